"""Positional arguments keep their help in `--help` whatever click is installed.

click 8.5 gave `click.Argument` a `help` parameter of its own; typer 0.20 (the newest that flwr
1.42 accepts) sets the help before calling click's constructor, which then sets it back to
None: every positional argument's description vanished from `--help` ("TABLE PATH [required]"
and nothing else). `keep_argument_help` puts typer's help back after the constructor, only where
click's Argument takes a help, and once.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import click
from typer.core import TyperArgument


def keep_argument_help() -> None:
    """Wrap `TyperArgument.__init__` so that its `help` survives click's constructor."""
    original = TyperArgument.__init__
    if getattr(original, "keeps_help", False) or (
            "help" not in inspect.signature(click.Argument.__init__).parameters):
        return

    @functools.wraps(original)
    def init(self: TyperArgument, *args: Any, help: str | None = None, **kwargs: Any) -> None:
        original(self, *args, help=help, **kwargs)
        self.help = help

    init.keeps_help = True  # type: ignore[attr-defined]
    TyperArgument.__init__ = init  # type: ignore[method-assign]
