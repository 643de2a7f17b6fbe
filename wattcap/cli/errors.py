"""The one place where errors become what a person reads: every `WattcapError` a command lets
through ends as `error: <message>` (and `hint: <hint>` when it has one that the message does not
already carry) and the error's exit code, with no traceback. Anything else is a bug and keeps its
traceback, so that it gets reported."""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape
from typer.core import TyperGroup

from wattcap.core.errors import WattcapError


def report_error(err: WattcapError) -> int:
    """Print a user's error in one line (two with a hint); the exit code to end with."""
    from wattcap.cli.common import err_console

    text = str(err)
    hint = err.hint if err.hint and err.hint not in text else None
    # str(err) may carry the hint in parentheses: the hint gets its own line instead
    if err.hint and hint is None and text.endswith(f" ({err.hint})"):
        text, hint = text[: -len(f" ({err.hint})")], err.hint
    err_console.print(f"[bold red]error:[/] {escape(text)}")
    if hint:
        err_console.print(f"[bold]hint:[/] {escape(hint)}")
    return err.exit_code


class WattcapGroup(TyperGroup):
    """The app's command group: runs a command and maps its WattcapError to a clean exit."""

    def invoke(self, ctx: Any) -> Any:  # typer's own (vendored) click Context
        try:
            return super().invoke(ctx)
        except WattcapError as err:
            raise typer.Exit(report_error(err)) from None
