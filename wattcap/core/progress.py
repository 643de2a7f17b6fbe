"""Progress: one protocol every long job reports through, and what a person sees of it.

Every long job — profiling a grid, a proxy sweep of |B| x seeds runs, the noise-scale run,
training to a target, the harness's sweeps — takes `progress: OnProgress | None`, a callable
that receives one `ProgressUpdate` each time a unit of work is done: `done` of `total` `unit`s
(total None: unknown; it may grow, e.g. when a sweep retries), a `detail` for a person, and
the `item` just finished (a `ProfilePoint`, a `RunRecord`, ...; None for a plain message). A
Session's `SessionStatus` is such an update (done = samples, total = the sample budget).

What a person sees is a `ProgressReporter`: `update(completed, detail)` as work is done, used as a
context manager around the work. `make_progress` picks the implementation from the console: a
live rich bar when it is a terminal, and otherwise (CI logs, pipes, files) `PlainProgress`, which
prints a line at every 10 % of the total, at most one more line every 10 s between them, and one
at the end, so a log shows that the job lives without a line per step. Before the first unit is
done, a job's messages (what it is about to do: how many runs, which one is long) are printed at
once: the first line a person reads says what the wait is for.

This module imports neither torch nor the command line; rich loads only for a terminal bar.
"""

from __future__ import annotations

import math
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rich.console import Console

class ProgressUpdate(Protocol):
    """What every long job reports, each time a unit of work is done."""

    @property
    def done(self) -> float:
        """Units done so far."""
        ...

    @property
    def total(self) -> float | None:
        """Units in all (None: unknown)."""
        ...

    @property
    def unit(self) -> str:
        """What is counted: "points", "runs", "samples"."""
        ...

    @property
    def detail(self) -> str:
        """The latest unit, for a person ("b=8 seed=0: 1536 samples to target")."""
        ...

    @property
    def item(self) -> Any:
        """The unit just finished (a ProfilePoint, a RunRecord, the SessionStatus itself);
        None for a message."""
        ...


#: the one progress callback of every long job
OnProgress = Callable[[ProgressUpdate], None]


@dataclass(frozen=True)
class JobProgress:
    """A `ProgressUpdate` of a job, with the `item` just finished (None: a message only)."""

    done: float
    total: float | None
    unit: str
    detail: str = ""
    item: Any = None


def percent(share: float, digits: int = 0) -> str:
    """A share as a percentage a person can trust: rounded down, so that 99.7 % of a job (or
    an accuracy of 0.9996) never shows as 100 % before it is."""
    scale = 10 ** digits
    value = math.floor(share * 100 * scale + 1e-9) / scale
    return f"{value:.{digits}f}%"


#: seconds between two time-driven lines of `PlainProgress`
PLAIN_INTERVAL_S = 10.0
#: fraction of the total at whose every multiple `PlainProgress` prints a line
PLAIN_STEP_FRACTION = 0.1


class ProgressReporter(ABC):
    """Progress of one task: `completed` of `total` `unit`s (total None: unknown), and a short
    `detail` about the latest unit (e.g. the accuracy just measured).

    Use it as a context manager: entering shows the start, leaving shows the end state.
    """

    def __init__(self, description: str, total: int | None, unit: str) -> None:
        if total is not None and total < 0:
            raise ValueError(f"progress total must be >= 0 or None, got {total}")
        self.description = description
        self.total = total
        self.unit = unit
        self.completed = 0
        self.detail = ""
        self._started = False
        self._closed = False

    def update(self, completed: int | None = None, detail: str | None = None,
               total: int | None = None) -> None:
        """Set how much is done (and the latest detail, or a corrected total)."""
        if completed is not None:
            self.completed = completed
        if detail is not None:
            self.detail = detail
        if total is not None:
            self.total = total
        if self._started and not self._closed:
            self._show()

    def show(self, update: ProgressUpdate) -> None:
        """Follow a job's `ProgressUpdate` (pass `reporter.show` as the job's `progress`)."""
        self.update(int(update.done), update.detail or None,
                    total=None if update.total is None else int(update.total))

    def note(self, text: str) -> None:
        """A line a person must see now, whatever the throttle (a resume, a pause)."""
        self.update(detail=text)
        self._note(text)

    def _note(self, text: str) -> None:
        print(f"{self.description}: {text}", file=sys.stderr, flush=True)

    def advance(self, amount: int = 1, detail: str | None = None) -> None:
        """Count `amount` more units done."""
        self.update(self.completed + amount, detail)

    def fraction(self) -> float | None:
        """Share of the total done, in [0, 1]; None when the total is unknown."""
        if self.total is None:
            return None
        if self.total == 0:
            return 1.0
        return min(max(self.completed / self.total, 0.0), 1.0)

    def __enter__(self) -> ProgressReporter:
        self._started = True
        self._start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self._closed:
            self._closed = True
            self._stop(failed=exc_type is not None)

    @abstractmethod
    def _start(self) -> None:
        """Show that the task began."""

    @abstractmethod
    def _show(self) -> None:
        """Reflect the current state (an implementation may decide to show nothing)."""

    @abstractmethod
    def _stop(self, failed: bool) -> None:
        """Show the end state."""


class PlainProgress(ProgressReporter):
    """Plain lines for output that is not a terminal: one at the start, one for each new
    message while no unit is done yet (what the job is about to do), one whenever the work
    crosses another `step_fraction` of the total, one when `interval_s` passed since the last
    line without such a crossing, and one at the end (unless the last line already showed it).

    `clock` (seconds, monotonic) is injectable so the throttling is testable without sleeping.
    """

    def __init__(self, description: str, total: int | None, unit: str,
                 stream: IO[str] | None = None, interval_s: float = PLAIN_INTERVAL_S,
                 step_fraction: float = PLAIN_STEP_FRACTION,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(description, total, unit)
        if interval_s <= 0 or not 0 < step_fraction <= 1:
            raise ValueError("PlainProgress needs interval_s > 0 and 0 < step_fraction <= 1")
        self.stream = stream if stream is not None else sys.stdout
        self.interval_s = interval_s
        self.step_fraction = step_fraction
        self.clock = clock
        self._start_s = 0.0
        self._last_line_s = 0.0
        self._last_step = 0
        self._last_shown: tuple[int, str, int | None] | None = None

    def _step(self) -> int:
        share = self.fraction()
        # a hair of tolerance so 3/10 counts as the third tenth despite float rounding
        return 0 if share is None else math.floor(share / self.step_fraction + 1e-9)

    def line(self, suffix: str = "") -> str:
        """The text of one progress line for the current state."""
        elapsed = timedelta(seconds=int(self.clock() - self._start_s))
        done = f"{self.completed}/{self.total}" if self.total is not None else f"{self.completed}"
        share = self.fraction()
        shown = f" ({percent(share)})" if share is not None else ""
        text = f"{self.description}: {done} {self.unit}{shown}, {elapsed} elapsed"
        if self.detail:
            text += f"; {self.detail}"
        return text + suffix

    def _emit(self, suffix: str = "") -> None:
        print(self.line(suffix), file=self.stream, flush=True)
        self._last_line_s = self.clock()
        self._last_shown = (self.completed, self.detail, self.total)

    def _start(self) -> None:
        self._start_s = self.clock()
        self._last_step = self._step()
        self._emit()

    def _note(self, text: str) -> None:
        print(f"{self.description}: {text}", file=self.stream, flush=True)

    def _show(self) -> None:
        step = self._step()
        if step > self._last_step:
            self._last_step = step
            self._emit()
        elif self.clock() - self._last_line_s >= self.interval_s:
            self._emit()
        elif self.completed == 0 and self._last_shown is not None \
                and self.detail != self._last_shown[1]:
            # before the first unit is done a job says what it is about to do (how many runs,
            # the long one first): shown at once, as the first unit may take minutes
            self._emit()

    def _stop(self, failed: bool) -> None:
        if failed:
            self._emit(" (stopped)")
        elif self._last_shown != (self.completed, self.detail, self.total):
            self._emit()


class RichProgress(ProgressReporter):
    """A live rich progress bar on a terminal: bar, done/total, elapsed time, latest detail."""

    def __init__(self, description: str, total: int | None, unit: str, console: Console) -> None:
        super().__init__(description, total, unit)
        self.console = console
        self._progress: Any = None  # a rich Progress once started
        self._task: Any = None

    def _start(self) -> None:
        from rich.markup import escape
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(),
            TextColumn("{task.completed}" + ("/{task.total}" if self.total is not None else "")
                       + f" {escape(self.unit)}"),
            TimeElapsedColumn(), TextColumn("{task.fields[detail]}", markup=False),
            console=self.console,
        )
        self._progress.start()
        self._task = self._progress.add_task(escape(self.description), total=self.total,
                                             detail=self.detail)

    def _note(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)

    def _show(self) -> None:
        assert self._progress is not None and self._task is not None
        self._progress.update(self._task, completed=self.completed, total=self.total,
                              detail=self.detail)

    def _stop(self, failed: bool) -> None:
        assert self._progress is not None
        self._show()
        self._progress.stop()


def make_progress(console: Console, description: str, total: int | None, unit: str
                  ) -> ProgressReporter:
    """A rich bar when `console` is an interactive terminal, else plain periodic lines on the
    console's stream (what CI logs and pipes should get)."""
    if console.is_terminal and not console.is_dumb_terminal:
        return RichProgress(description, total, unit, console)
    return PlainProgress(description, total, unit, stream=console.file)
