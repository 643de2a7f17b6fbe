"""`--help` reads the same whatever click and typer are installed: positional arguments keep
their help (`keep_argument_help`), flags show no type and positionals their name
(`keep_one_face`).

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


def _plain_type(shown: str | None) -> str | None:
    """'<path>' -> 'PATH', '<float range>' -> 'FLOAT RANGE', '<peak|average>' ->
    '[peak|average]': a type as typer 0.20 (and click) writes it."""
    if shown is None or not (shown.startswith("<") and ">" in shown):
        return shown
    inner, _, rest = shown[1:].partition(">")
    if "|" in inner:
        return f"[{inner}]{rest}"
    return _CLICK_NAMES.get(inner, inner.upper()) + rest


#: the names click (and typer 0.20) gives the types newer typer writes in Python's words
_CLICK_NAMES = {"str": "TEXT", "int": "INTEGER", "int range": "INTEGER RANGE"}


def keep_one_face() -> None:
    """Newer typer (0.2x, which vendors click) writes types as '<path>', shows '<bool>' beside
    every flag and '{table}' for a positional in the usage line; `wattcap --help` reads as it
    does under typer 0.20 whatever typer is installed: no type beside a flag, types in capitals,
    positionals by name. Does nothing where typer has no such display (0.20)."""
    from typer import core

    base = getattr(core, "_TyperParameter", None)
    shown = getattr(base, "display_type_rich", None)
    if base is None or shown is None or getattr(shown, "keeps_face", False):
        return
    classes: tuple[Any, ...] = (base, core.TyperOption, core.TyperArgument)
    for cls in classes:
        if "display_type_rich" in vars(cls):  # each class that defines its own
            cls.display_type_rich = _face(vars(cls)["display_type_rich"])
    argument: Any = core.TyperArgument
    if hasattr(argument, "_usage_display_name"):  # '{table}' in the usage line
        argument._usage_display_name = _usage_name


def _face(original: Any) -> Any:
    """`display_type_rich` without a type for flags, and types in capitals."""

    @functools.wraps(original)
    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if getattr(self, "is_flag", False) and not getattr(self, "count", False):
            return None  # a flag takes no value: nothing to type
        return _plain_type(original(self, ctx))

    display_type_rich.keeps_face = True  # type: ignore[attr-defined]
    return display_type_rich


def _usage_name(self: Any) -> str:
    """A positional in the usage line: TABLE, [WHAT], FILES... (not '{table}')."""
    name = (self.metavar or self.name or "").upper()
    if not self.required:
        name = f"[{name}]"
    return name + ("..." if self.nargs != 1 else "")
