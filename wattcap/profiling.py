"""Device profiling: peak power P(b, f), average power and time per sample T(b, f).

For each (b, f) the profiler locks the frequency, runs warm-up steps, then measured steps while
the power sampler collects one reading per sensor period, until the window holds enough
readings. Two search modes:

* exhaustive: every (b, f) that fits in memory;
* pruned (needs a cap): the largest b first, from the lowest f upward until the cap is crossed;
  each smaller b starts from the highest feasible f of the previous one (power falls with b, so
  that f is a good first guess), goes up while feasible, and down if the guess was not.
  It finds the same feasible frontier as exhaustive while measuring far fewer points.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict

from wattcap.devices.base import Device, DeviceOutOfMemoryError, PowerReading
from wattcap.schema import VersionedFile, WattcapFileError, require_match
from wattcap.workload import DEFAULT_BATCH_SIZES, Workload, workload_for


class ProfilePoint(BaseModel):
    """Measurements at one (batch size, frequency)."""

    model_config = ConfigDict(extra="forbid")
    batch_size: int
    frequency_hz: int
    peak_power_w: float
    avg_power_w: float
    seconds_per_sample: float
    steps: int
    readings: int

    def time_for_samples_s(self, samples: float) -> float:
        """Device seconds to process `samples` samples at this point."""
        return self.seconds_per_sample * samples


class ProfileTable(VersionedFile):
    """The two lookup tables of a device for one model and input shape."""

    FILE_KIND = "wattcap.profile"
    SCHEMA_VERSION = 1

    device: str
    device_kind: str
    power_mode: str | None = None
    sensor_rail: str
    sensor_period_s: float
    model: str
    input_shape: list[int]
    batch_sizes: list[int]
    frequencies_hz: list[int]
    max_batch_size: int | None
    oom_batch_sizes: list[int] = []
    mode: Literal["exhaustive", "pruned", "refresh"]
    power_cap_w: float | None = None
    points: list[ProfilePoint]
    points_measured: int
    profiling_device_s: float
    workload: dict = {}

    def lookup(self, batch_size: int, frequency_hz: int) -> ProfilePoint | None:
        """The measured point, or None if it was not measured."""
        for point in self.points:
            if point.batch_size == batch_size and point.frequency_hz == frequency_hz:
                return point
        return None

    def rows(self) -> dict[int, list[ProfilePoint]]:
        """Measured points per batch size, ascending in frequency."""
        rows: dict[int, list[ProfilePoint]] = {}
        for point in sorted(self.points, key=lambda p: (p.batch_size, p.frequency_hz)):
            rows.setdefault(point.batch_size, []).append(point)
        return rows

    def frontier(self, power_cap_w: float | None) -> dict[int, ProfilePoint]:
        """For each batch size, the measured point at the highest f with peak ≤ cap."""
        result: dict[int, ProfilePoint] = {}
        for b, row in self.rows().items():
            feasible = [p for p in row if power_cap_w is None or p.peak_power_w <= power_cap_w]
            if feasible:
                result[b] = feasible[-1]
        return result

    def check_matches(
        self,
        device: str | None = None,
        model: str | None = None,
        input_shape: tuple[int, ...] | list[int] | None = None,
        source: str = "profile",
    ) -> None:
        """Refuse a profile made for another device, model or input shape."""
        if device is not None:
            require_match("the profile", "device", device, self.device, source)
        if model is not None:
            require_match("the profile", "model", model, self.model, source)
        if input_shape is not None:
            require_match("the profile", "input shape", list(input_shape), self.input_shape, source)

    def merged(self, newer: ProfileTable) -> ProfileTable:
        """This profile with `newer`'s points replacing the same (b, f)."""
        if (newer.device, newer.model, newer.input_shape) != (
            self.device, self.model, self.input_shape
        ):
            raise WattcapFileError("cannot merge profiles of different devices or models")
        keep = {(p.batch_size, p.frequency_hz): p for p in self.points}
        keep.update({(p.batch_size, p.frequency_hz): p for p in newer.points})
        return self.model_copy(update={"points": list(keep.values())})


@dataclass
class PowerStats:
    """Accumulates sensor readings: peak, time-average, energy by integration."""

    readings: list[PowerReading] = field(default_factory=list)

    def __call__(self, reading: PowerReading) -> None:
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


ProgressCallback = Callable[[ProfilePoint | None, str], None]


@dataclass
class Profiler:
    """Measures a ProfileTable on a device for one model."""

    device: Device
    model: str
    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    warmup_steps: int = 1
    min_steps: int = 1
    min_readings: int = 5
    progress: ProgressCallback | None = None
    workload: Workload | None = None
    _steps: dict[int, Callable[[], object]] = field(default_factory=dict, init=False)
    _warmed: set[int] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        if self.workload is None:
            self.workload = workload_for(self.model)
        self._overhead = getattr(getattr(self.device, "spec", None), "allocator_overhead_factor", 1)

    # -- one point -----------------------------------------------------------------------------
    def _step_fn(self, batch_size: int) -> Callable[[], object] | None:
        if not self.device.timing_needs_real_work:
            return None
        if batch_size not in self._steps:
            self._steps[batch_size] = build_training_step(self.model, batch_size)
        return self._steps[batch_size]

    def measure(self, batch_size: int, frequency_hz: int) -> ProfilePoint:
        """Measure one point (raises DeviceOutOfMemoryError if the batch does not fit)."""
        assert self.workload is not None
        cost = self.workload.step_cost(batch_size, self._overhead)
        step = self._step_fn(batch_size)
        self.device.set_frequency_hz(frequency_hz)
        # Warm-up (allocator, cuDNN autotuning) depends on the shape, not the clock: once per b.
        if batch_size not in self._warmed:
            for _ in range(self.warmup_steps):
                self.device.execute(step, cost)
            self._warmed.add(batch_size)
        stats = PowerStats()
        period_s = self.device.sensor_period_s
        steps = 0
        busy_s = 0.0
        with self.device.sensor_ticks(stats):
            # A window shorter than a few sensor periods would report one stale value.
            while (
                steps < self.min_steps
                or len(stats.readings) < self.min_readings
                or busy_s < self.min_readings * period_s
            ):
                busy_s += self.device.execute(step, cost)
                steps += 1
        point = ProfilePoint(
            batch_size=batch_size,
            frequency_hz=frequency_hz,
            peak_power_w=round(stats.peak_w, 4),
            avg_power_w=round(stats.average_w, 4),
            seconds_per_sample=busy_s / (steps * batch_size),
            steps=steps,
            readings=len(stats.readings),
        )
        if self.progress:
            self.progress(point, f"b={batch_size} f={frequency_hz / 1e6:.1f} MHz")
        return point

    # -- searches ------------------------------------------------------------------------------
    def _fitting_batch_sizes(self) -> tuple[list[int], list[int]]:
        assert self.workload is not None
        fits, oom = [], []
        for b in sorted(self.batch_sizes):
            if self.workload.memory_needed_bytes(b, self._overhead) <= self.device.memory_bytes():
                fits.append(b)
            else:
                oom.append(b)
        return fits, oom

    def run(self, power_cap_w: float | None = None, exhaustive: bool = False) -> ProfileTable:
        """Profile the device; pruned search when a cap is given and exhaustive is False."""
        start_s = self.device.now_s()
        frequencies = self.device.frequencies_hz()
        fits, oom = self._fitting_batch_sizes()
        points: list[ProfilePoint] = []
        try:
            if exhaustive or power_cap_w is None:
                mode = "exhaustive"
                for b in reversed(fits):
                    for f in frequencies:
                        try:
                            points.append(self.measure(b, f))
                        except DeviceOutOfMemoryError:
                            oom.append(b)
                            break
            else:
                mode = "pruned"
                points = self._pruned(fits, oom, frequencies, power_cap_w)
        finally:
            self.device.restore()
        fits = [b for b in fits if b not in oom]
        assert self.workload is not None
        return ProfileTable(
            device=self.device.name,
            device_kind=self.device.kind,
            power_mode=getattr(self.device, "power_mode", None),
            sensor_rail=self.device.sensor_rail,
            sensor_period_s=self.device.sensor_period_s,
            model=self.model,
            input_shape=list(self.workload.input_shape),
            batch_sizes=sorted(fits),
            frequencies_hz=frequencies,
            max_batch_size=max(fits) if fits else None,
            oom_batch_sizes=sorted(set(oom)),
            mode=mode,
            power_cap_w=None if mode == "exhaustive" else power_cap_w,
            points=points,
            points_measured=len(points),
            profiling_device_s=self.device.now_s() - start_s,
            workload=self.workload.to_dict(),
        )

    def _pruned(
        self, fits: list[int], oom: list[int], frequencies: list[int], cap_w: float
    ) -> list[ProfilePoint]:
        points: list[ProfilePoint] = []
        start_index = 0  # frequency index to start the next (smaller) batch size from
        for b in reversed(fits):
            try:
                index = start_index
                point = self.measure(b, frequencies[index])
                points.append(point)
                if point.peak_power_w <= cap_w:
                    # Feasible: climb until the cap is crossed.
                    while index + 1 < len(frequencies):
                        point = self.measure(b, frequencies[index + 1])
                        points.append(point)
                        if point.peak_power_w > cap_w:
                            break
                        index += 1
                else:
                    # The guess was over the cap: descend until feasible.
                    while index > 0:
                        index -= 1
                        point = self.measure(b, frequencies[index])
                        points.append(point)
                        if point.peak_power_w <= cap_w:
                            break
                    else:
                        index = 0
                start_index = index
            except DeviceOutOfMemoryError:
                oom.append(b)
        return points


def build_training_step(model_name: str, batch_size: int) -> Callable[[], object]:
    """A real training step (forward, backward, Adam) of a registered model on synthetic data,
    on CUDA when available: what a real device runs while it is profiled."""
    import torch

    from wattcap.models import get_model_spec

    spec = get_model_spec(model_name)
    torch_device = "cuda" if torch.cuda.is_available() else "cpu"
    model = spec.build().to(torch_device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    inputs, targets = spec.example_batch(batch_size)
    inputs, targets = inputs.to(torch_device), targets.to(torch_device)

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        loss = spec.loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    return step

