"""Power accounting of a run: peak, mean and energy from the sensor readings."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from wattcap.devices.base import PowerReading


class PowerMeter:
    """Running peak, mean and energy of sensor readings (a sensor-tick callback)."""

    def __init__(self, period_s: float, peak_w: float | None = None, total_w: float = 0.0,
                 readings: int = 0) -> None:
        self.period_s = period_s
        self.peak_w = peak_w
        self.total_w = total_w
        self.readings = readings
        self.last: PowerReading | None = None

    def __call__(self, reading: PowerReading) -> None:
        self.total_w += reading.power_w
        self.readings += 1
        self.last = reading
        if self.peak_w is None or reading.power_w > self.peak_w:
            self.peak_w = reading.power_w

    @property
    def energy_j(self) -> float:
        """Each reading stands for one sensor period."""
        return self.total_w * self.period_s

    @property
    def average_w(self) -> float | None:
        """Mean of the readings so far."""
        return self.total_w / self.readings if self.readings else None

    def state(self) -> MeterState:
        """What a checkpoint keeps of the meter."""
        return MeterState(peak_w=self.peak_w, total_w=self.total_w, readings=self.readings)


class MeterState(BaseModel):
    """The power meter's running sums, as a checkpoint keeps them."""

    model_config = ConfigDict(extra="forbid")
    peak_w: float | None = None
    total_w: float = 0.0
    readings: int = 0
