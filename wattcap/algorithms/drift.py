"""Drift or noise: whether a run's measurement windows at one profile point say the device left
the point, or only that each window reads a little differently.

The drift monitor compares each window (a few sensor readings' worth of steps) with the
profile's point, which was itself measured over one such window. Where a window's time or
power varies from one window to the next by more than the tolerance, comparing single
windows finds "drift" every few windows on a device that has not moved (on an H100 with a
host-bound resnet18 step at b = 32, a third of 0.5 s windows read more than 10 % off a point
measured just before), and each false drift costs a re-measure. So a drift is decided on:

* the median of the last `MEDIAN_OF` windows at the point (at least two: one window held up
  by a pause does not decide alone);
* a threshold of the tolerance or `NOISE_SIGMAS` times the noise of that median against a
  point measured over one window, whichever is larger, once the run's windows have shown
  their noise (`MIN_DIFFERENCES` successive differences); a window's noise is the median of
  the absolute differences between successive windows at one point, which a change of level
  moves by one difference only (it is not mistaken for noise).

On a quiet device (the emulator's time, a GPU-bound step) the noise is near 0 and the
tolerance decides, as before; on a noisy one the threshold rises with the noise measured, and
the monitor says so.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

#: successive differences of windows (in the run, each between two windows at one point) that
#: the noise is known from before a drift can be decided
MIN_DIFFERENCES = 3
#: windows at a point before its drift can be decided, and the most whose median decides
MIN_POINT_WINDOWS = 2
MEDIAN_OF = 3
#: a drift is this many sigmas of the measurement's noise away from the point, at least
NOISE_SIGMAS = 3.0
#: successive differences kept for the noise estimate
HISTORY_DIFFERENCES = 20
#: median |x - y| of two independent normal draws of sigma s is this times s
_MEDIAN_ABS_DIFFERENCE = NormalDist().inv_cdf(0.75) * math.sqrt(2)


@dataclass(frozen=True)
class WindowChange:
    """One window's relative difference from the point (+0.2: 20 % more), and its size."""

    time_change: float
    power_change: float
    steps: int
    readings: int


@dataclass(frozen=True)
class DriftVerdict:
    """A drift decided: the median changes of the last windows, their steps and readings, and
    the thresholds they passed (relative)."""

    time_change: float
    power_change: float
    steps: int
    readings: int
    time_threshold: float
    power_threshold: float


def sigma_of_differences(differences: Sequence[float]) -> float:
    """One standard deviation of a noisy series from its successive differences (a window's
    relative time or power from one window to the next; a sensor's readings): their median
    absolute value, which a change of level or a few jumps move little; 0 without any."""
    if not differences:
        return 0.0
    return statistics.median(abs(d) for d in differences) / _MEDIAN_ABS_DIFFERENCE


def noise_threshold(tolerance: float, noise: float) -> float:
    """The change that counts as drift: the tolerance, or `NOISE_SIGMAS` sigmas of a median of
    `MEDIAN_OF` windows compared with a point measured over one window (its noise taken as
    that of a mean, √(1 + 1/n) of one window's), whichever is larger."""
    return max(tolerance, NOISE_SIGMAS * noise * math.sqrt(1 + 1 / MEDIAN_OF))


@dataclass
class DriftTest:
    """A run's windows, and whether those at the point in use say the device drifted from it.
    The noise is the run's (the measurement's), learnt across points; the level is the point's."""

    time_tolerance: float
    power_tolerance: float
    _point: list[WindowChange] = field(default_factory=list, init=False)
    _time_differences: deque[float] = field(
        default_factory=lambda: deque(maxlen=HISTORY_DIFFERENCES), init=False)
    _power_differences: deque[float] = field(
        default_factory=lambda: deque(maxlen=HISTORY_DIFFERENCES), init=False)

    def new_point(self) -> None:
        """The windows from now on are of another point (another clock, batch size or cap, or
        the point measured afresh): its level starts afresh, the noise learnt stays."""
        self._point = []

    @property
    def ready(self) -> bool:
        """Whether the run's windows have shown their noise (drift can be decided)."""
        return len(self._time_differences) >= MIN_DIFFERENCES

    def thresholds(self) -> tuple[float, float]:
        """(time, power) thresholds from the noise learnt so far."""
        return (noise_threshold(self.time_tolerance, sigma_of_differences(self._time_differences)),
                noise_threshold(self.power_tolerance,
                                sigma_of_differences(self._power_differences)))

    def add(self, window: WindowChange) -> DriftVerdict | None:
        """Add one window at the point in use; the verdict when the windows now say drift,
        else None."""
        if self._point:
            last = self._point[-1]
            self._time_differences.append(window.time_change - last.time_change)
            self._power_differences.append(window.power_change - last.power_change)
        self._point = [*self._point[-(MEDIAN_OF - 1):], window]
        if not self.ready or len(self._point) < MIN_POINT_WINDOWS:
            return None
        time_change = statistics.median(w.time_change for w in self._point)
        power_change = statistics.median(w.power_change for w in self._point)
        time_threshold, power_threshold = self.thresholds()
        if abs(time_change) <= time_threshold and abs(power_change) <= power_threshold:
            return None
        return DriftVerdict(time_change=time_change, power_change=power_change,
                            steps=sum(w.steps for w in self._point),
                            readings=sum(w.readings for w in self._point),
                            time_threshold=time_threshold, power_threshold=power_threshold)
