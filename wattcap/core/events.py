"""Events a run records: cap violations, frequency steps, drift, re-plans."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from wattcap.core.profile import ProfilePoint


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

class DriftEvent(BaseModel):
    """Measured step time or power at the applied (b, f) left what this board reads there by
    more than the tolerance: the profile's point times the board's level learnt in the run's
    first windows (said in the run's events; the profile itself where none was learnt, and a
    point this run re-measured as it is). Changes are relative: +0.25 means 25 % more than
    `expected_*`."""

    model_config = ConfigDict(extra="forbid")
    time_s: float
    batch_size: int
    frequency_hz: int
    expected_seconds_per_sample: float
    measured_seconds_per_sample: float
    expected_avg_power_w: float
    measured_avg_power_w: float
    time_change: float
    power_change: float
    steps: int
    readings: int

class Replan(BaseModel):
    """A re-measure of one batch size's row after drift, and the frequency chosen from it."""

    model_config = ConfigDict(extra="forbid")
    time_s: float
    batch_size: int
    from_hz: int
    to_hz: int
    power_cap_w: float | None
    points: list[ProfilePoint]
    remeasure_device_s: float
    predicted_seconds_per_sample: float | None
    reason: str


class ClockClamp(BaseModel):
    """A clock the board did not follow: wattcap asked for `requested_hz`, the board ran at
    `running_hz`, held there by its own limit (`cause`: "thermal", "power limit", "power
    mode", "unknown"; `detail`: what the board said). The run went on at `ceiling_hz`, the
    highest clock of the table at or under the one the board ran, as the ceiling of the plans
    that followed; `by` is the path that asked (plan, watchdog, drift re-plan, ...)."""

    model_config = ConfigDict(extra="forbid")
    time_s: float
    requested_hz: int
    running_hz: int
    ceiling_hz: int
    cause: str
    detail: str = ""
    by: str
