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

A drift is a change *during* the run. The board a run trains on is often not the one profiled
(another board of the same kind, another day, another temperature), and it reads its own level
at every point from the start: on three fresh H100s of one machine kind the same point peaked
at 283, 312 and 345 W. So the first level the run's windows show at a profile point, when it
lies within `BOARD_TOLERANCE` of the profile, is taken as this board's (a factor on the
profile's time and power, `DriftTest.board_scale`: the median of the run's first
`BOARD_WINDOWS` windows at profile points, so one odd window does not set it), and drift is
judged against the profile times that factor from then on, at every point of the profile. A
first level farther off than boards differ is judged against the profile (the profile is not of
this device as it is now: a drift once the noise is known). A change within the first windows
is taken for the board's level: the monitor cannot tell it from a board that differs.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

from wattcap.core.profile import ProfilePoint

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
#: how far (relative, time or power) a run's board may read from the profile in its first
#: windows and be taken as the board it is: one point read on fresh starts of one machine kind
#: spreads with a relative standard deviation of 10 % (resnet18 b = 64 peaking at 283, 312 and
#: 345 W on three fresh H100s: bench/results/, the 2026-11-26 and 2026-11-27 H100 reports), so
#: two boards (the profile's and the run's) differ with √2 x 10 % = 14 %: three of those
BOARD_TOLERANCE = 0.42
#: the run's first windows at profile points whose median is this board's level (of four:
#: the mean of the middle two, so neither one odd window nor windows alternating around the
#: level set it off)
BOARD_WINDOWS = 4
#: median |x - y| of two independent normal draws of sigma s is this times s
_MEDIAN_ABS_DIFFERENCE = NormalDist().inv_cdf(0.75) * math.sqrt(2)


def board_calls_for_replan(planned_peak_w: float | None, board_scale: tuple[float, float],
                           power_cap_w: float | None, margin_w: float, time_tolerance: float,
                           power_tolerance: float) -> bool:
    """Whether a run's board level (`board_scale`: time and power factors against the profile)
    calls for choosing the batch size and clock again: the planned point (its profiled peak)
    would break the cap less the margin on this board, or the board reads off the profile by
    more than the drift tolerances."""
    time_factor, power_factor = board_scale
    breaks_cap = power_cap_w is not None and planned_peak_w is not None and \
        planned_peak_w * power_factor > power_cap_w - margin_w
    return breaks_cap or abs(time_factor - 1) > time_tolerance or \
        abs(power_factor - 1) > power_tolerance


#: a board re-plan that neither the cap nor the drift tolerances call for must promise at
#: least this much less time to the target on the board's profile to change the batch size:
#: the switch margin a moving cap's re-plan asks of a batch-size change (`ConfigChooser`), for
#: the same reason (a gain within the profile's noise is not worth a new batch size and
#: learning rate); a clock alone changes freely, as there
BOARD_SWITCH_GAIN = 0.05


def time_gain(current: ProfilePoint, new: ProfilePoint, samples: Mapping[int, float]) -> float:
    """1 - T(new)/T(current): the share of the time to the target `new` saves against
    `current` (each at its batch size's `samples` to the target); 0 where either has none."""
    at_current, at_new = samples.get(current.batch_size), samples.get(new.batch_size)
    if not at_current or not at_new:
        return 0.0
    return 1.0 - new.time_for_samples_s(at_new) / current.time_for_samples_s(at_current)


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
    board_tolerance: float = BOARD_TOLERANCE
    #: this run's board against the profile's: (time, power) factors from the first level of
    #: the run's windows at profile points; None until known, or where it is farther off
    board_scale: tuple[float, float] | None = field(default=None, init=False)
    #: whether this board's level was decided (from the first windows, or taken over)
    board_decided: bool = field(default=False, init=False)
    _first_windows: list[WindowChange] = field(default_factory=list, init=False)
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

    def board_power_noise(self) -> float:
        """One standard deviation of this board's power level (relative): the windows' noise
        learnt so far, for a median of `BOARD_WINDOWS` of them against a point measured over
        one window (as `noise_threshold` reads a median of windows)."""
        return sigma_of_differences(self._power_differences) * math.sqrt(1 + 1 / BOARD_WINDOWS)

    def take_board(self, scale: tuple[float, float] | None) -> None:
        """This board's level as an earlier part of the run decided it (a resumed run: not
        learnt again from windows that may follow a drift)."""
        self.board_scale, self.board_decided = scale, True

    def _learn_board(self, window: WindowChange) -> None:
        """One of the run's first windows at a profile point; at the last of them, this
        board's level (if within the spread boards show)."""
        self._first_windows.append(window)
        if len(self._first_windows) < BOARD_WINDOWS:
            return
        self.board_decided = True
        time_change = statistics.median(w.time_change for w in self._first_windows)
        power_change = statistics.median(w.power_change for w in self._first_windows)
        if max(abs(time_change), abs(power_change)) <= self.board_tolerance:
            self.board_scale = (1.0 + time_change, 1.0 + power_change)

    def add(self, window: WindowChange, from_profile: bool = True,
            teaches_board: bool = True) -> DriftVerdict | None:
        """Add one window at the point in use (its change against the profile's point,
        `from_profile`, or against a point this run re-measured); the verdict when the windows
        now say drift, else None. The verdict's changes are against what this board reads at
        the point (the profile's times `board_scale`). A window that does not teach the board's
        level (`teaches_board`: one whose clock the board did not hold) is judged only."""
        if self._point:
            last = self._point[-1]
            self._time_differences.append(window.time_change - last.time_change)
            self._power_differences.append(window.power_change - last.power_change)
        self._point = [*self._point[-(MEDIAN_OF - 1):], window]
        if from_profile and not self.board_decided and teaches_board:
            self._learn_board(window)
        if not self.ready or len(self._point) < MIN_POINT_WINDOWS or (
                from_profile and not self.board_decided):
            return None
        time_change = statistics.median(w.time_change for w in self._point)
        power_change = statistics.median(w.power_change for w in self._point)
        if from_profile and self.board_scale is not None:
            time_change = (1.0 + time_change) / self.board_scale[0] - 1.0
            power_change = (1.0 + power_change) / self.board_scale[1] - 1.0
        time_threshold, power_threshold = self.thresholds()
        if abs(time_change) <= time_threshold and abs(power_change) <= power_threshold:
            return None
        return DriftVerdict(time_change=time_change, power_change=power_change,
                            steps=sum(w.steps for w in self._point),
                            readings=sum(w.readings for w in self._point),
                            time_threshold=time_threshold, power_threshold=power_threshold)
