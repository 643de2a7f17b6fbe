"""The one place where errors become what a person reads: every error a command reports, every
`WattcapError` it lets through and every mistake on the command line (a missing option, an
unknown flag) ends as `error: <message>` (and `hint: <hint>` when it has one that the message
does not already carry) and an exit code, with no traceback. The text is printed as text:
brackets in it ("pip install 'wattcap[fleet]'", "power.draw [W]") are not rich markup. Anything
else is a bug and keeps its traceback, so that it gets reported."""

from __future__ import annotations

from typing import Any

import click
import typer
from rich.markup import escape
from typer.core import TyperGroup

from wattcap.core.errors import WattcapError

#: how every error line starts, whatever reported it
ERROR_PREFIX = "error:"


def _click_errors() -> tuple[type[Exception], ...]:
    """click's usage errors: the installed click's, and those of the click that newer typer
    (0.2x) vendors and raises instead."""
    import importlib

    found: list[type[Exception]] = [click.ClickException]
    try:
        found.append(importlib.import_module("typer._click.exceptions").ClickException)
    except ImportError:  # typer 0.20 uses the installed click
        pass
    return tuple(found)


_CLICK_ERRORS = _click_errors()


def print_error(message: str, hint: str | None = None) -> None:
    """`error: MESSAGE` (and `hint: HINT`) on stderr, the text escaped for rich."""
    from wattcap.cli.console import err_console

    err_console.print(f"[bold red]{ERROR_PREFIX}[/] {escape(message)}", highlight=False)
    if hint:
        err_console.print(f"[bold]hint:[/] {escape(hint)}", highlight=False)


def report_error(err: WattcapError) -> int:
    """Print a user's error in one line (two with a hint); the exit code to end with."""
    text = str(err)
    hint = err.hint if err.hint and err.hint not in text else None
    # str(err) may carry the hint in parentheses: the hint gets its own line instead
    if err.hint and hint is None and text.endswith(f" ({err.hint})"):
        text, hint = text[: -len(f" ({err.hint})")], err.hint
    print_error(text, hint)
    return err.exit_code


def report_usage_error(err: Any) -> int:
    """A mistake on the command line (click's): the usage, where to find help, and the
    error in wattcap's own words; click's exit code (2 for usage)."""
    from wattcap.cli.console import err_console

    ctx = getattr(err, "ctx", None)
    if ctx is not None:
        err_console.print(escape(ctx.get_usage()), highlight=False)
        err_console.print(f"Try '{escape(ctx.command_path)} --help' for help.", highlight=False)
    print_error(err.format_message())
    return err.exit_code


def _is_help_request(err: Exception) -> bool:
    """click's "no arguments: show the help" travels as a usage error: it is no error."""
    return type(err).__name__ == "NoArgsIsHelpError"


class WattcapGroup(TyperGroup):
    """The app's command group: runs a command and maps its WattcapError, and any mistake on
    the command line, to one clean exit."""

    def make_context(self, info_name: str | None, args: list[str],
                     parent: Any = None, **extra: Any) -> Any:
        # the app's own options and command name are parsed here (`wattcap -X`, `wattcap nope`)
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except _CLICK_ERRORS as err:
            if _is_help_request(err):
                raise
            raise typer.Exit(report_usage_error(err)) from None

    def invoke(self, ctx: Any) -> Any:  # typer's own (vendored) click Context
        try:
            return super().invoke(ctx)
        except WattcapError as err:
            raise typer.Exit(report_error(err)) from None
        except _CLICK_ERRORS as err:  # a command's (or a sub-group's) usage
            if _is_help_request(err):
                raise
            raise typer.Exit(report_usage_error(err)) from None
