"""What a long command says when it is stopped (Ctrl-C, SIGTERM, the terminal closed): the
exact command to run again, and what of the stopped work that run will reuse."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager


def command_line(argv: list[str] | None = None) -> str:
    """The command as the user ran it (`wattcap` and its arguments), quoted for a shell."""
    args = sys.argv[1:] if argv is None else argv
    return shlex.join(["wattcap", *args])


def resume_hint(kept: str, argv: list[str] | None = None) -> str:
    """The lines a stopped command prints: what was kept, and the command that resumes."""
    return f"stopped: {kept}. To go on, run the same command again:\n  {command_line(argv)}"


@contextmanager
def resumable(kept: str) -> Iterator[None]:
    """Run a long command's work so that a stop says how to go on: SIGINT, SIGTERM and SIGHUP
    become an exception inside the block (`exit_cleanly_on_signals`, so that open files and
    devices are closed on the way out), and on the way out `resume_hint(kept)` is printed on
    stderr before the command ends with the signal's exit code (130 for Ctrl-C, 143 for
    SIGTERM). `kept` says what a new run reuses ("finished runs are kept in cmp/runs")."""
    from wattcap.cli.common import err_console
    from wattcap.devices.signals import Terminated, exit_cleanly_on_signals

    try:
        with exit_cleanly_on_signals():
            yield
    except (Terminated, KeyboardInterrupt):
        err_console.print(resume_hint(kept), highlight=False, markup=False, soft_wrap=True)
        raise
