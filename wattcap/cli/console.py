"""The terminal console shared by the commands."""

from __future__ import annotations

import sys

from rich.console import Console


def make_console(stderr: bool = False) -> Console:
    """A console that stays wide when piped (rich assumes 80 columns without a terminal)."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 150)


#: the consoles every command prints on: results on stdout, errors and notes on stderr
console = make_console()
err_console = make_console(stderr=True)
