"""Device profiling: peak power P(b, f), average power and time per sample T(b, f).

For each (b, f) the profiler locks the frequency, runs warm-up steps, then measured steps while
the power sampler collects one reading per sensor period, until the window holds enough
readings. Two search modes:

* exhaustive: every (b, f) that fits in memory;
* pruned (needs a cap): the largest b first, from the lowest f upward until the cap is crossed;
  each smaller b starts from the highest feasible f of the previous one (power falls with b, so
  that f is a good first guess), goes up while feasible, and down if the guess was not.
  It finds the same feasible frontier as exhaustive while measuring far fewer points;
* model (`wattcap.measure.active_profiling`): a few points measured, the rest predicted by a device
  model fitted to them, measuring next where the cap's frontier is least certain.

A profile goes stale when the device drifts (temperature, power mode, software, ageing):
`refresh_profile` (in `wattcap.measure.profile_refresh`) re-measures only its feasible frontier,
one point per batch size (more only where a point now breaks the cap), and `refresh_row` is the
same search for one batch size, which the runtime's drift monitor uses mid-run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from wattcap.algorithms.timing_spread import window_time_std_s
from wattcap.core.batches import DEFAULT_BATCH_SIZES
from wattcap.core.defaults import DEFAULT_MARGIN_SIGMAS
from wattcap.core.knob import KnobKind, format_knob, knob_unit
from wattcap.core.observed_clock import ObservedFrequency
from wattcap.core.profile import ProfilePoint, ProfileTable
from wattcap.core.progress import JobProgress, OnProgress
from wattcap.devices.base import Device, PowerReading
from wattcap.devices.cuda import configure_cuda_backends, cuda_of, out_of_memory_as_device_error
from wattcap.devices.errors import DeviceOutOfMemoryError
from wattcap.devices.signals import exit_cleanly_on_signals

if TYPE_CHECKING:  # workload imports torch: loaded only when a profile is measured
    from wattcap.devices.workload import StepCost, Workload
from wattcap.measure.power_window import MeasuredWindow, PowerStats, WindowParts

#: adaptive warm-up on real hardware: groups of this many steps, until two consecutive group
#: means differ by less than the tolerance, or the maximum is reached
WARMUP_GROUP_STEPS = 3
WARMUP_TOLERANCE = 0.05
WARMUP_MAX_STEPS = 20
#: readings of the one window every profile measures its sensor's noise on (the smallest batch
#: size at the lowest clock), whatever its mode: the noise, and so the planner's margin, is a
#: property of the device's sensor, not of which points a profile happened to measure
NOISE_READINGS = 100


#: the profiler's progress: one `JobProgress` per measured point, the point as its `item`
ProgressCallback = OnProgress


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
    #: builds the real training step of batch size b on a torch device, for models that are
    #: not registered (a user's nn.Module); default: `build_training_step` of `model`
    step_factory: Callable[[int, str], Callable[[], object]] | None = None
    #: steps run at a point's (b, f) before its window opens when the previous step ran another
    #: point: the first reading averages the sensor period before it, which then holds this
    #: point's own step boundary instead of another point's (the searches that move between
    #: neighbouring points, or warm up a new b at its first point, need none)
    lead_in_steps: int = 0
    #: the pruned search holds the planner's margin below the cap (this many sigmas of the
    #: sensor noise measured first), so that it climbs each row as far as a plan may go
    margin_sigmas: float = DEFAULT_MARGIN_SIGMAS
    _steps: dict[int, Callable[[], object]] = field(default_factory=dict, init=False)
    _warmed: set[int] = field(default_factory=set, init=False)
    _last_point: tuple[int, int | str] | None = field(default=None, init=False)
    _reading_series: list[list[float]] = field(default_factory=list, init=False)
    #: the sensor's noise measured on its own window at the start of `run` (None: not yet)
    _sensor_noise_w: float | None = field(default=None, init=False)
    #: device seconds that window took (counted in the profile's profiling_device_s)
    _sensor_noise_s: float = field(default=0.0, init=False)
    _points_measured: int = field(default=0, init=False)
    #: steps each batch size's adaptive warm-up took (real hardware)
    warmup_steps_taken: dict[int, int] = field(default_factory=dict, init=False)
    #: what the profile left out and why (batch sizes the free memory rules out), for the
    #: command's output
    notes: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if self.workload is None:
            from wattcap.devices.workload import workload_for

            self.workload = workload_for(self.model)
        self._overhead = getattr(getattr(self.device, "spec", None), "allocator_overhead_factor", 1)

    # -- one point -----------------------------------------------------------------------------
    def _step_fn(self, batch_size: int) -> Callable[[], object] | None:
        """The real step of `batch_size`, built inside the out-of-memory guard. One batch
        size's model, optimiser and batch live on the GPU at a time: the previous one is freed
        (and the allocator's cache emptied) before the next is built."""
        if not self.device.timing_needs_real_work:
            return None
        if batch_size not in self._steps:
            self.release_steps()
            configure_cuda_backends(self.device.torch_device)
            factory = self.step_factory or (
                lambda b, torch_device: build_training_step(self.model, b, torch_device))
            assert self.workload is not None
            with out_of_memory_as_device_error(self.workload.step_cost(batch_size,
                                                                       self._overhead)):
                self._steps[batch_size] = factory(batch_size, self.device.torch_device)
            self._warmed.discard(batch_size)  # a new model and allocator state: warm up again
        return self._steps[batch_size]

    def release_steps(self) -> None:
        """Free every built step (model, optimiser, batch) and the GPU allocator's cache."""
        if not self._steps:
            return
        self._steps.clear()
        import gc

        gc.collect()
        cuda = cuda_of(self.device.torch_device)
        if cuda is not None:
            with cuda.device(self.device.torch_device):
                cuda.empty_cache()

    def _warm_up(self, step: Callable[[], object] | None, cost: StepCost) -> None:
        """Warm a new step up (allocator, cuDNN autotuning): on real hardware until two
        consecutive 3-step means differ by less than 5 % (at most 20 steps); the emulator's
        modelled step needs `warmup_steps` (its timing has no warm-up)."""
        if not self.device.timing_needs_real_work:
            for _ in range(self.warmup_steps):
                self.device.execute(step, cost)
            return
        means: list[float] = []
        done = 0
        while done + WARMUP_GROUP_STEPS <= WARMUP_MAX_STEPS:
            means.append(sum(self.device.execute(step, cost)
                             for _ in range(WARMUP_GROUP_STEPS)) / WARMUP_GROUP_STEPS)
            done += WARMUP_GROUP_STEPS
            if len(means) >= 2 and abs(means[-1] - means[-2]) < WARMUP_TOLERANCE * means[-2]:
                break
        self.warmup_steps_taken[cost.batch_size] = done

    def measure(self, batch_size: int, frequency_hz: int) -> ProfilePoint:
        """Measure one point (raises DeviceOutOfMemoryError if the batch does not fit)."""
        return self.measure_with_readings(batch_size, frequency_hz)[0]

    def measure_with_readings(
        self, batch_size: int, frequency_hz: int
    ) -> tuple[ProfilePoint, list[PowerReading]]:
        """Measure one point and return it with the sensor readings behind it."""
        return self._point(batch_size, frequency_hz, frequency_hz,
                           f"b={batch_size} f={frequency_hz / 1e6:.1f} MHz")

    def measure_at_power_limit(self, batch_size: int, limit_mw: int) -> ProfilePoint:
        """Measure one point of the power-limit knob: the limit is already set, the clock is
        left to the board (locking it would fight the limit), the point keyed by the limit."""
        return self._point(batch_size, None, limit_mw,
                           f"b={batch_size} at {format_knob('power_limit', limit_mw)}")[0]

    def _point(self, batch_size: int, frequency_hz: int | None, knob_value: int,
               detail: str) -> tuple[ProfilePoint, list[PowerReading]]:
        window = self._window(batch_size, frequency_hz, self.min_readings,
                              key=f"b={batch_size} f={frequency_hz}"
                              if frequency_hz is not None else f"b={batch_size} knob={knob_value}")
        stats, steps = window.stats, window.steps
        point = ProfilePoint(
            batch_size=batch_size,
            knob_value=knob_value,
            peak_power_w=round(stats.peak_w, 4),
            avg_power_w=round(stats.average_w, 4),
            seconds_per_sample=window.busy_s / (steps * batch_size),
            steps=steps,
            readings=len(stats.readings),
            seconds_per_sample_std=window_time_std_s(window.parts, batch_size),
            observed_frequency_hz=ObservedFrequency.of(r.clock_hz for r in stats.readings),
        )
        self._reading_series.append([r.power_w for r in stats.readings])
        self._points_measured += 1
        if self.progress:
            grid = len(self.batch_sizes) * len(self.device.frequencies_hz())
            self.progress(JobProgress(
                self._points_measured, max(grid, self._points_measured), "points",
                detail, item=point))
        return point, stats.readings

    def _window(self, batch_size: int, frequency_hz: int | None, min_readings: int, key: str,
                ) -> MeasuredWindow:
        """Run `batch_size` at `frequency_hz` (None: the clock as the board sets it) through
        one measurement window of at least `min_readings` sensor readings."""
        assert self.workload is not None
        cost = self.workload.step_cost(batch_size, self._overhead)
        step = self._step_fn(batch_size)
        if frequency_hz is not None:
            self.device.set_frequency_hz(frequency_hz)
        # (b, clock), or (b, key) where the clock is the board's (a power limit's point)
        point_id = (batch_size, frequency_hz if frequency_hz is not None else key)
        # Warm-up (allocator, cuDNN autotuning) depends on the shape, not the clock: once per b.
        if batch_size not in self._warmed:
            self._warm_up(step, cost)
            self._warmed.add(batch_size)
        elif self.lead_in_steps and self._last_point != point_id:
            for _ in range(self.lead_in_steps):
                self.device.execute(step, cost)
        self._last_point = point_id
        period_s = self.device.sensor_period_s
        stats = PowerStats(since_s=self.device.now_s(), period_s=period_s)
        steps = 0
        busy_s = 0.0
        parts = WindowParts(stats)
        self.device.begin_measurement(key)
        with self.device.sensor_ticks(stats):
            # A window shorter than a few sensor periods would report one stale value. Its
            # steps run queued, as training runs them (`Device.run_step`), and are all
            # accounted at the window's last wait, inside the sensor's window.
            while (
                steps < self.min_steps
                or len(stats.readings) < min_readings
                or busy_s < min_readings * period_s
            ):
                seconds = self.device.run_step(step, cost)
                busy_s += seconds
                steps += 1
                parts.add(seconds, self.device.accounted_steps)
                self.device.check_watch()
            with out_of_memory_as_device_error(cost):
                seconds = self.device.flush_timing()
            busy_s += seconds
            parts.add(seconds, self.device.accounted_steps, last=True)
        return MeasuredWindow(stats, steps, busy_s, parts.closed)

    def measure_sensor_noise(self) -> float | None:
        """The sensor's noise (one standard deviation, W), measured once on its own window of
        NOISE_READINGS readings at the smallest batch size and the lowest clock, the same in
        every profile mode; None when that batch size does not fit."""
        from wattcap.algorithms.profile_model import reading_noise_w

        frequency_hz = min(self.device.frequencies_hz())
        start_s = self.device.now_s()
        try:
            stats = self._window(min(self.batch_sizes), frequency_hz, NOISE_READINGS,
                                 key="sensor-noise").stats
        except DeviceOutOfMemoryError:
            self.release_steps()
            return None
        self._sensor_noise_w = round(reading_noise_w([[r.power_w for r in stats.readings]]), 5)
        self._sensor_noise_s = self.device.now_s() - start_s
        return self._sensor_noise_w

    # -- searches ------------------------------------------------------------------------------
    def fitting_batch_sizes(self) -> tuple[list[int], list[int]]:
        """Batch sizes whose step fits in the device's memory, and those that do not. The
        memory model is the first guess, against the smaller of the usable memory and the
        memory free now (another process or a resident model may hold the rest); the sizes
        the free memory rules out are left out with a note in `notes`. Otherwise, on real
        hardware the sizes the model rules out are probed with a real step, smallest first,
        until one runs out of memory (a size it lets in and that does not fit is found when it
        is measured)."""
        assert self.workload is not None
        usable_bytes = self.device.memory_bytes()
        free_bytes = self.device.free_memory_bytes()
        # The free memory already lacks this process's CUDA context, which `memory_bytes`
        # reserves from the total: the two are compared, never subtracted from each other.
        free_binds = free_bytes is not None and free_bytes < usable_bytes
        limit_bytes = min(usable_bytes, free_bytes) if free_bytes is not None else usable_bytes
        fits, oom = [], []
        for b in sorted(self.batch_sizes):
            if self.workload.memory_needed_bytes(b, self._overhead) <= limit_bytes:
                fits.append(b)
            else:
                oom.append(b)
        if free_binds and oom:
            note = ("batch sizes " + ", ".join(
                f"{b} (needs {self.workload.memory_needed_bytes(b, self._overhead) / 2**20:.0f}"
                " MiB)" for b in oom)
                + f" left out: {limit_bytes / 2**20:.0f} MiB of the device's memory is free"
                f" now, of {usable_bytes / 2**20:.0f} MiB usable (another process holds the"
                " rest)")
            if note not in self.notes:
                self.notes.append(note)
        # Probing past free memory would take it from the process that holds the rest.
        if self.device.timing_needs_real_work and not free_binds:
            for b in list(oom):
                if not self._runs(b):
                    break
                oom.remove(b)
                fits.append(b)
        return fits, oom

    def _runs(self, batch_size: int) -> bool:
        """Whether one real step of `batch_size` runs on the device (out of memory: no)."""
        assert self.workload is not None
        cost = self.workload.step_cost(batch_size, self._overhead)
        try:
            self.device.execute(self._step_fn(batch_size), cost)
        except DeviceOutOfMemoryError:
            self.release_steps()
            return False
        return True

    def run(
        self,
        power_cap_w: float | None = None,
        exhaustive: bool = False,
        mode: Literal["exhaustive", "pruned", "model"] | None = None,
        max_points: int | None = None,
    ) -> ProfileTable:
        """Profile the device. `mode` "exhaustive" measures every point; "pruned" (the default
        when a cap is given and `exhaustive` is False) searches each row up to the cap;
        "model" measures a few points (at most `max_points`, default 10 % of the grid) and
        predicts the rest with a fitted device model (`wattcap.measure.active_profiling`)."""
        if mode is None:
            mode = "exhaustive" if exhaustive or power_cap_w is None else "pruned"
        if mode == "pruned" and power_cap_w is None:
            raise ValueError("the pruned search needs a power cap")
        # The phases each put the device back when done; the lock stays taken from the first
        # to the last, so no other run changes the GPU between them.
        with self.device.claimed():
            return self._run_phases(power_cap_w, mode, max_points)

    def _run_phases(self, power_cap_w: float | None,
                    mode: Literal["exhaustive", "pruned", "model"],
                    max_points: int | None) -> ProfileTable:
        """`run`'s phases: the sensor's noise, then the search of `mode`."""
        self._points_measured = 0  # progress counts this run's points
        with exit_cleanly_on_signals():
            try:
                self.measure_sensor_noise()
            finally:
                self.device.restore()
        if mode == "model":
            from wattcap.measure.active_profiling import ActiveProfiler

            with exit_cleanly_on_signals():
                try:
                    return ActiveProfiler(self, max_points=max_points).run(power_cap_w)
                finally:
                    self.release_steps()
        start_s = self.device.now_s()
        frequencies = self.device.frequencies_hz()
        fits, oom = self.fitting_batch_sizes()
        points: list[ProfilePoint] = []
        # The search locks clocks for minutes: SIGTERM/SIGINT/SIGHUP must not leave them locked.
        with exit_cleanly_on_signals():
            points = self._search(fits, oom, frequencies, power_cap_w, mode)
        return self.table(points, mode, None if mode == "exhaustive" else power_cap_w,
                          start_s, [b for b in fits if b not in oom], oom)

    def run_power_limits(self, limits_w: list[float] | None = None,
                         count: int = 8) -> ProfileTable:
        """Profile the power-limit knob: at each limit (default: `count` limits spread evenly
        over the range the board accepts), every batch size with the clock left to the board,
        as a limit runs in practice (`nvidia-smi -pl`). The limit found and the clocks are put
        back after, also on a signal."""
        bounds = self.device.power_limit_range_w()
        if bounds is None:
            raise ValueError(f"{self.device.name} has no power limit wattcap can read")
        low_w, high_w = bounds
        if limits_w is None:
            limits_w = [low_w + (high_w - low_w) * i / (count - 1) for i in range(count)]
        outside = [w for w in limits_w if not low_w <= w <= high_w]
        if outside:
            raise ValueError(f"power limits {outside} W are outside what {self.device.name} "
                             f"accepts ({low_w:g}-{high_w:g} W)")
        table = self._knob_sweep(
            "power_limit", sorted(limits_w),
            lambda limit_w: knob_unit("power_limit").stored(
                self.device.set_power_limit_w(limit_w)),
            self.measure_at_power_limit)
        return table.model_copy(update={"max_power_limit_w": high_w})

    def run_power_modes(self) -> ProfileTable:
        """Profile the power-mode knob: in every power mode of the device, every batch size at
        the highest clock the mode allows (devfreq under load runs there). Exhaustive over
        (batch size, mode); the mode and clocks found are put back after, also on a signal."""
        modes = self.device.power_mode_ids()
        if not modes:
            raise ValueError(f"{self.device.name} has no power modes to profile")

        def at_mode_top(batch_size: int, mode_id: int) -> ProfilePoint:
            point = self.measure(batch_size, max(self.device.frequencies_hz()))
            return point.model_copy(update={"knob_value": mode_id})

        return self._knob_sweep("power_mode", modes,
                                lambda mode_id: self.device.set_power_mode(mode_id),
                                at_mode_top)

    def _knob_sweep(self, kind: KnobKind, values: list, apply: Callable[[Any], int],
                    measure: Callable[[int, int], ProfilePoint]) -> ProfileTable:
        """What the knob profiles share: the sensor's noise first, then at each value (set by
        `apply`, which returns the value as stored) every batch size that fits, the largest
        first; the device put back after, also on a signal, its lock held throughout."""
        with self.device.claimed():
            return self._knob_phases(kind, values, apply, measure)

    def _knob_phases(self, kind: KnobKind, values: list, apply: Callable[[Any], int],
                     measure: Callable[[int, int], ProfilePoint]) -> ProfileTable:
        self._points_measured = 0
        with exit_cleanly_on_signals():
            try:
                self.measure_sensor_noise()
            finally:
                self.device.restore()
        start_s = self.device.now_s()
        fits, oom = self.fitting_batch_sizes()
        points: list[ProfilePoint] = []
        stored: list[int] = []
        with exit_cleanly_on_signals():
            try:
                for value in values:
                    stored.append(apply(value))
                    for b in reversed([b for b in fits if b not in oom]):
                        try:
                            points.append(measure(b, stored[-1]))
                        except DeviceOutOfMemoryError:
                            oom.append(b)
            finally:
                self.release_steps()
                self.device.restore()
        table = self.table(points, "exhaustive", None, start_s,
                           [b for b in fits if b not in oom], oom)
        return table.model_copy(update={"knob_kind": kind, "knob_values": sorted(set(stored))})

    def table(
        self,
        points: list[ProfilePoint],
        mode: Literal["exhaustive", "pruned", "model"],
        power_cap_w: float | None,
        start_s: float,
        fits: list[int],
        oom: list[int],
        model_fit: dict | None = None,
    ) -> ProfileTable:
        """A ProfileTable of `points` (device time counted from `start_s`)."""
        assert self.workload is not None
        frequencies = self.device.frequencies_hz()
        return ProfileTable(
            device=self.device.name,
            device_kind=self.device.kind,
            power_mode=self.device.power_mode,
            sensor_rail=self.device.sensor_rail,
            sensor_rule=_sensor_rule(self.device),
            sensor_period_s=self.device.sensor_period_s,
            model=self.model,
            input_shape=list(self.workload.input_shape),
            batch_sizes=sorted(fits),
            knob_values=frequencies,
            max_batch_size=max(fits) if fits else None,
            oom_batch_sizes=sorted(set(oom)),
            mode=mode,
            power_cap_w=power_cap_w,
            points=points,
            points_measured=sum(1 for p in points if not p.predicted),
            profiling_device_s=self.device.now_s() - start_s + self._sensor_noise_s,
            workload=self.workload.to_dict(),
            model_fit=model_fit or {},
            power_noise_w=self.power_noise_w(),
            # a board's power limit (NVML's); the emulated Jetson's limit is an emulation for
            # power-limit profiles, not a property of the board it models
            max_power_limit_w=(self.device.power_limit_range_w() or (None, None))[1]
            if self.device.kind == "nvml" else None,
            architecture_fingerprint=model_fingerprint_or_none(self.model),
            device_spec=_device_spec(self.device),
            power_modes=self.device.power_mode_names() or None,
        )

    @property
    def margin_w(self) -> float:
        """The planner's margin below the cap for a measured point: `margin_sigmas` of the
        sensor noise measured at the start of `run` (0 before it)."""
        return self.margin_sigmas * (self._sensor_noise_w or 0.0)

    def power_noise_w(self) -> float | None:
        """The sensor's noise (one standard deviation, W) estimated from every window measured
        so far (successive differences; see `profile_model.reading_noise_w`); None before
        any."""
        from wattcap.algorithms.profile_model import reading_noise_w

        if self._sensor_noise_w is not None:
            return self._sensor_noise_w
        if not any(len(series) > 1 for series in self._reading_series):
            return None
        return round(reading_noise_w(self._reading_series), 5)

    def _search(
        self, fits: list[int], oom: list[int], frequencies: list[int],
        power_cap_w: float | None, mode: str,
    ) -> list[ProfilePoint]:
        points: list[ProfilePoint] = []
        try:
            if mode == "exhaustive":
                for b in reversed(fits):
                    for f in frequencies:
                        try:
                            points.append(self.measure(b, f))
                        except DeviceOutOfMemoryError:
                            oom.append(b)
                            break
            else:
                assert power_cap_w is not None
                points = self._pruned(fits, oom, frequencies, power_cap_w - self.margin_w)
        finally:
            self.release_steps()
            self.device.restore()
        return points

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


def model_fingerprint_or_none(model: str) -> str | None:
    from wattcap.models import model_fingerprint

    try:
        return model_fingerprint(model)
    except (KeyError, ValueError):
        return None  # a workload given for a model this process cannot build


def _device_spec(device: Device) -> dict | None:
    spec = getattr(device, "spec", None)
    return spec.model_dump(mode="json") if device.kind == "emulated" and spec is not None else None


def build_training_step(
    model_name: str, batch_size: int, torch_device: str = "cpu"
) -> Callable[[], object]:
    """A real training step (forward, backward, Adam) of a registered model on synthetic data,
    on the device's torch device: what a real device runs while it is profiled."""
    import torch

    from wattcap.models import get_model_spec

    spec = get_model_spec(model_name)
    model = spec.build().to(torch_device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    inputs, targets = spec.example_batch(batch_size)
    # Made once per batch size: a synchronous copy costs nothing worth measuring, but the
    # non-blocking flag keeps every host-to-device copy of wattcap alike.
    inputs = inputs.to(torch_device, non_blocking=True)
    targets = targets.to(torch_device, non_blocking=True)

    def step() -> None:
        # nothing read back to the host: a read would wait for the GPU at every step, which
        # training does not (wattcap's loop reads a loss only at evaluations)
        optimizer.zero_grad(set_to_none=True)
        spec.loss(model(inputs), targets).backward()
        optimizer.step()

    return step


def _sensor_rule(device: Device) -> str | None:
    """The rule a device took its power rails by (a Jetson's `power_source`), for the
    profile; None where the device has one sensor."""
    source = getattr(device, "power_source", None)
    return None if source is None else source.describe()
