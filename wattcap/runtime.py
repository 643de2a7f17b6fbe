"""Run-time guards while training: the power-cap watchdog and the profile-drift monitor.

Both are sensor-tick callbacks (`Device.sensor_ticks`), so they act on every backend, mid-step
included: from a polling thread on real hardware, from the virtual clock on the emulator.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from wattcap.devices.base import Device, DeviceError, PowerReading


class CapViolation(BaseModel):
    """Consecutive readings above the cap."""

    model_config = ConfigDict(extra="forbid")
    start_s: float
    duration_s: float  # time from the first to the last reading above the cap
    readings: int
    max_power_w: float


class FrequencyStep(BaseModel):
    """A frequency change made by the runtime, and why."""

    model_config = ConfigDict(extra="forbid")
    time_s: float
    from_hz: int
    to_hz: int
    reason: str


@dataclass
class CapWatchdog:
    """Steps the frequency down one level when power stays above the cap for longer than one
    sensor period (two consecutive readings), and records every violation. A single reading over
    the cap is noise until the next one confirms it."""

    device: Device
    power_cap_w: float | None
    violations: list[CapViolation] = field(default_factory=list)
    steps: list[FrequencyStep] = field(default_factory=list)
    _run: list[PowerReading] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, reading: PowerReading) -> None:
        if self.power_cap_w is None:
            return
        with self._lock:
            if reading.power_w > self.power_cap_w:
                self._run.append(reading)
                if len(self._run) >= 2:
                    self._step_down(reading)
            elif self._run:
                self._close_run()

    def _step_down(self, reading: PowerReading) -> None:
        current = self.device.current_frequency_hz()
        lower = [f for f in self.device.frequencies_hz() if f < current]
        if not lower:
            return  # already at the floor: the violation stays recorded
        try:
            applied = self.device.set_frequency_hz(lower[-1])
        except DeviceError:
            return
        self.steps.append(FrequencyStep(
            time_s=reading.time_s, from_hz=current, to_hz=applied,
            reason=f"power {reading.power_w:.2f} W above the cap {self.power_cap_w:.2f} W "
                   "for more than one sensor period",
        ))

    def _close_run(self) -> None:
        first, last = self._run[0], self._run[-1]
        self.violations.append(CapViolation(
            start_s=first.time_s,
            duration_s=last.time_s - first.time_s,
            readings=len(self._run),
            max_power_w=max(r.power_w for r in self._run),
        ))
        self._run = []

    def finish(self) -> None:
        """Close a violation still open at the end of the run."""
        with self._lock:
            if self._run:
                self._close_run()


class Terminated(SystemExit):
    """Raised in the main thread on SIGTERM/SIGINT so `finally` blocks restore the hardware."""


@contextmanager
def exit_cleanly_on_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGINT into an exception while the block runs, so that device
    context managers restore clocks on the way out; the old handlers come back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise Terminated(128 + signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
