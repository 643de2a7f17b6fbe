"""One measurement window of the profiler: the sensor readings (peak, time average, energy),
and the window's accounted time cut at the readings, whose spread is the window's own noise."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from wattcap.devices.base import (
    PowerReading,
)

if TYPE_CHECKING:  # workload imports torch: loaded only when a profile is measured
    pass


@dataclass
class PowerStats:
    """Accumulates sensor readings: peak, time-average, energy by integration.

    With `since_s` (device seconds) and `period_s`, a reading is kept only if the sensor period
    it averages began at or after `since_s`: the first reading of a point would otherwise mix
    in the previous point's work (another frequency, another batch size)."""

    readings: list[PowerReading] = field(default_factory=list)
    since_s: float = float("-inf")
    period_s: float = 0.0

    def __call__(self, reading: PowerReading) -> None:
        if reading.time_s - self.period_s >= self.since_s - 1e-9:
            self.readings.append(reading)

    @property
    def peak_w(self) -> float:
        """Highest reading."""
        return max(r.power_w for r in self.readings)

    @property
    def average_w(self) -> float:
        """Mean reading: readings are evenly spaced, one per sensor period."""
        return sum(r.power_w for r in self.readings) / len(self.readings)

    def energy_j(self, period_s: float) -> float:
        """Energy, integrating each reading over one sensor period."""
        return sum(r.power_w for r in self.readings) * period_s


@dataclass
class WindowParts:
    """A window's accounted time cut at the sensor's readings: a part closes at the first
    accounted step after a new reading (on a GPU, at the wait of each sensor period), so its
    parts' spread is the window's own noise (`window_time_std_s`)."""

    stats: PowerStats
    closed: list[tuple[float, int]] = field(default_factory=list)
    _seconds: float = 0.0
    _steps: int = 0
    _readings_at_start: int = 0

    def add(self, seconds: float, accounted_steps: int, last: bool = False) -> None:
        self._seconds += seconds
        self._steps += accounted_steps
        if self._steps and (last or len(self.stats.readings) > self._readings_at_start):
            self.closed.append((self._seconds, self._steps))
            self._seconds, self._steps = 0.0, 0
            self._readings_at_start = len(self.stats.readings)


@dataclass(frozen=True)
class MeasuredWindow:
    """One measurement window: its readings, steps, accounted device seconds and parts."""

    stats: PowerStats
    steps: int
    busy_s: float
    parts: list[tuple[float, int]]
