"""Signals that end a run: turned into an exception so that `finally` blocks and device context
managers put the hardware back (clocks unlocked, governor restored) however the run ends."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(SystemExit):
    """Raised in the main thread on SIGTERM/SIGINT/SIGHUP so `finally` blocks restore the
    hardware."""


#: the signals that end a run and must leave the device as it was found
EXIT_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name)
)


@contextmanager
def exit_cleanly_on_signals() -> Iterator[None]:
    """Turn SIGTERM, SIGINT and SIGHUP (the terminal closed, an ssh session dropped) into an
    exception while the block runs, so that device context managers restore clocks on the way
    out; the old handlers come back afterwards.

    Only the first signal raises: a second one (an impatient second Ctrl-C) while the block
    unwinds is ignored, so it cannot interrupt the restore half-way."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def handler(signum: int, frame: object) -> None:
        if received:
            return
        received.append(signum)
        raise Terminated(128 + signum)

    previous = {sig: signal.signal(sig, handler) for sig in EXIT_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
