"""The root of every error a user can meet: a message and, where one helps, a hint saying what
to do. The command line maps them to exit codes and one-line messages in one handler
(`wattcap.cli.errors`); library code raises the subclass that says what went wrong."""

from __future__ import annotations


class WattcapError(Exception):
    """An error wattcap reports to its user: `message` says what is wrong, `hint` (optional)
    what to do about it. Subclasses also derive from the builtin a caller would catch
    (ValueError, RuntimeError, ...) so that existing `except` clauses keep working."""

    #: the process exit code the command line ends with (2: bad input, as for a usage error)
    exit_code: int = 2

    def __init__(self, message: str = "", hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text} ({self.hint})" if self.hint and self.hint not in text else text
