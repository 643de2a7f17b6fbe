"""Heat for the emulated board: sustained load warms it, and past a trip point the clock is
pulled down a level per polling interval, as the kernel's thermal governor does on a Jetson
(a `passive` trip and its polling delay, Documentation/driver-api/thermal/sysfs-api.rst) and
the driver's thermal slowdown on a datacenter GPU; below the release point it comes back a
level at a time.

A lumped model: the board's temperature T follows dT/dt = (ambient + R·P − T) / τ for the
power P it draws (R: °C per W at steady state, τ: the heat sink's time constant), integrated
exactly over each stretch of constant power. Off unless a device is given one (the kind
emulator of the goldens and unit tests never throttles)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ThermalModel:
    """How a board heats and where it throttles (°C, W, s)."""

    resistance_c_per_w: float
    time_constant_s: float = 60.0
    ambient_c: float = 25.0
    trip_c: float = 85.0
    #: the clamp lifts a level per period at or below this (hysteresis: trip − 5 °C default)
    release_c: float | None = None
    #: the temperature at the start (a board that just ran something else is hot)
    start_c: float | None = None
    #: how often the governor moves the clamp a level: a thermal zone's passive polling
    #: delay (a modelling estimate of its order: a second)
    step_interval_s: float = 1.0

    def __post_init__(self) -> None:
        if not (self.resistance_c_per_w > 0 and self.time_constant_s > 0):
            raise ValueError("a thermal model needs resistance_c_per_w > 0 and "
                             "time_constant_s > 0")
        if self.release_at_c >= self.trip_c:
            raise ValueError("the release temperature must lie below the trip point")

    @property
    def release_at_c(self) -> float:
        """Where the clamp starts to lift."""
        return self.trip_c - 5.0 if self.release_c is None else self.release_c


class BoardHeat:
    """The temperature of one emulated board and the clock clamp it imposes (an index into the
    board's clock table: the highest clock it lets run)."""

    def __init__(self, model: ThermalModel, levels: int) -> None:
        self.model = model
        self.temperature_c = model.ambient_c if model.start_c is None else model.start_c
        #: index of the highest clock allowed (levels - 1: none clamped)
        self.clamp_index = levels - 1
        self._levels = levels
        self._last_step_s = float("-inf")

    def heat(self, seconds: float, power_w: float) -> None:
        """Integrate the temperature over `seconds` at `power_w`."""
        model = self.model
        steady_c = model.ambient_c + model.resistance_c_per_w * power_w
        self.temperature_c = steady_c + (self.temperature_c - steady_c) * math.exp(
            -seconds / model.time_constant_s)

    def on_period(self, now_s: float) -> None:
        """At each sensor period, once per `step_interval_s`: a level down while at or past
        the trip, a level up once back under the release point."""
        if now_s - self._last_step_s < self.model.step_interval_s - 1e-9:
            return
        before = self.clamp_index
        if self.temperature_c >= self.model.trip_c:
            self.clamp_index = max(self.clamp_index - 1, 0)
        elif self.temperature_c <= self.model.release_at_c:
            self.clamp_index = min(self.clamp_index + 1, self._levels - 1)
        if self.clamp_index != before:
            self._last_step_s = now_s

    @property
    def throttling(self) -> bool:
        """The clamp holds some clock back."""
        return self.clamp_index < self._levels - 1

    def describe(self) -> str:
        """'GPU 86.2 °C, throttles at 85.0 °C' (as a thermal zone says it)."""
        return (f"GPU {self.temperature_c:.1f} °C, throttles at {self.model.trip_c:.1f} °C")


__all__ = ["BoardHeat", "ThermalModel"]
