"""The emulated device: a physics model of a Jetson-class GPU (DESIGN §3), driven by the real
workload of a real model. Training math runs for real on the CPU; time and power come from the
model, on a virtual device clock.

One step at batch b and frequency f is three phases, each with its own power:

* host: the CPU launches `kernels` kernels (fixed time; GPU nearly idle);
* busy: forward + backward, max(compute_s, memory_s), where
  compute_s = flops / (peak(f) · occupancy(b)), peak ∝ f, occupancy = b / (b + b_half);
* optimizer: the memory-bound Adam update (fixed time).

Power in a phase = idle + cpu + dram · (bytes/s ÷ bandwidth) + static(V(f))
                   + dyn_max · (V(f)/V_max)² · (f/f_max) · activity.

The power sensor, like an INA3221, reports every `sensor_period_s` the average power over its
last period plus noise, so a long busy phase shows at its full power while short phases are
averaged. A `Drift` makes the device change mid-run (thermal derating), for the runtime's
drift detection to find.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from wattcap.core.power_mode import find_power_mode, list_power_modes
from wattcap.devices.base import Device, DeviceInfo, PowerReading, StepTimer
from wattcap.devices.emulated_board import TOP_LIMIT_BAND, BoardState
from wattcap.devices.emulated_thermal import BoardHeat, ThermalModel
from wattcap.devices.errors import (
    DeviceError,
    DeviceNotSupportedError,
    DeviceOutOfMemoryError,
    FrequencyNotFollowedError,
)
from wattcap.devices.spec import DeviceSpec, load_spec

if TYPE_CHECKING:
    from wattcap.devices.workload import StepCost


#: how many remembered step phases an emulated device keeps (a few batch sizes at ~100 clocks)
_PHASES_MEMO_SIZE = 4096

#: what a power-mode profile of an emulated device says once measured (and docs/hardware.md)
EMULATED_POWER_MODES_NOTE = (
    "the emulated power modes limit the GPU clock only (their other limits — CPU cores, "
    "memory clock, TPC gating — are not modelled, so a mode may read above its nominal budget)")


@dataclass(frozen=True)
class Drift:
    """A change of the device after `after_s` device seconds (e.g. thermal derating)."""

    after_s: float
    speed_factor: float = 1.0  # multiplies achievable FLOP/s (throttling < 1)
    power_factor: float = 1.0  # multiplies GPU power (hot silicon leaks more > 1)
    description: str = "thermal derating"


@dataclass(frozen=True)
class PhasePower:
    """Duration and power of one phase of a step at one frequency."""

    name: str
    duration_s: float
    power_w: float


class EmulatedDevice(Device):
    """A device whose time and power come from `DeviceSpec` physics on a virtual clock."""

    kind = "emulated"
    timing_needs_real_work = False

    def __init__(
        self,
        spec: DeviceSpec | str = "jetson-nano",
        power_mode: str | None = None,
        seed: int = 0,
        drift: Drift | None = None,
        thermal: ThermalModel | None = None,
        board: BoardState | None = None,
    ) -> None:
        super().__init__()
        self.spec = load_spec(spec) if isinstance(spec, str) else spec
        self.name = self.spec.name
        mode = self._find_mode(power_mode or self.spec.default_power_mode)
        self._power_mode = mode
        ceiling_hz = self.spec.power_modes[mode].gpu_max_hz
        self._frequencies_hz = [f for f in self.spec.frequencies_hz if f <= ceiling_hz]
        self._initial_hz = self._frequencies_hz[-1]
        self._frequency_hz = self._initial_hz
        #: the mode found, once `set_power_mode` switched it (restore puts it back)
        self._found_mode: str | None = None
        #: a Jetson has no board power limit: True emulates one as NVML enforces it (for
        #: power-limit profiles); False refuses it as the board would. A spec with a power
        #: limit range (a datacenter GPU) has one from the start, at the top of its range
        self.power_limit_emulated = self.spec.power_limit_range_w is not None
        #: the limit the board holds when nothing set one (NVML's default limit)
        self._default_limit_w = (None if self.spec.power_limit_range_w is None
                                 else self.spec.power_limit_range_w[1])
        #: the emulated power limit (W) held on each step's average power, None: none
        self._power_limit_w: float | None = self._default_limit_w
        self._limit_changed = False
        self.drift = drift
        #: what differs in this run from another of the same board (kind: nothing)
        self.board = board or BoardState()
        #: the board's heat and the clock it lets run (None: a board that never throttles)
        self.heat = None if thermal is None else BoardHeat(thermal,
                                                           len(self.spec.frequencies_hz))
        self._seed = seed
        self._rng = random.Random(seed)
        self._clock_s = 0.0
        self._next_tick_s = self.spec.sensor_period_s
        #: the clock of the step in flight (None between steps), and whether the power limit
        #: acted on it
        self._step_clock_hz: int | None = None
        self._step_power_limited = False
        # (start_s, end_s, power_w) of the recent past: enough for one sensor window
        self._segments: deque[tuple[float, float, float]] = deque()
        self._last_reading: PowerReading | None = None
        self.true_energy_j = 0.0
        #: where set to a list, each sensor tick appends (tick time, the power the board really
        #: drew over the period that ends there): no noise, no window, no lag. Ground truth for
        #: benches (how long a cap was really exceeded); nothing in wattcap reads it
        self.true_period_w: list[tuple[float, float]] | None = None
        self.frequency_log: list[tuple[float, int]] = []
        #: a step's phases by everything they are computed from (see `phases`)
        self._phases_memo: dict[tuple, tuple[PhasePower, ...]] = {}

    @property
    def power_mode(self) -> str:
        """The emulated nvpmodel mode (it caps the frequency list)."""
        return self._power_mode

    def _find_mode(self, wanted: str) -> str:
        """The spec's mode `wanted` names: by name in any case, by id (its position), or by
        the name without nvpmodel.conf's MODE_ prefix ("15W" for MODE_15W, the name the AGX
        Orin's modes had before they took the real ones: its earlier profiles still match)."""
        names = self.power_mode_names()
        mode_id = find_power_mode(wanted, names)
        if mode_id is None:
            raise DeviceError(f"{self.name}: unknown power mode {wanted!r}",
                              hint=f"use one of {list_power_modes(names)}, by name or id")
        return names[mode_id]

    def power_mode_names(self) -> dict[int, str]:
        """The spec's power modes by id (their position, as nvpmodel numbers them)."""
        return dict(enumerate(self.spec.power_modes))

    def require_power_mode(self, wanted: str) -> None:
        """Accept the mode the emulated board runs in (`power_mode` chose it), by name or id."""
        if self._find_mode(wanted) != self._power_mode:
            raise DeviceError(f"{self.name} runs in power mode {self._power_mode}, not in "
                              f"{wanted}", hint=f"make it in that mode (power_mode={wanted!r})")

    def power_mode_ids(self) -> list[int]:
        """The spec's power modes by position (0: the first listed, as nvpmodel numbers the
        stock modes: MAXN 0, 5W 1 on a Nano)."""
        return list(range(len(self.spec.power_modes)))

    @property
    def power_mode_id(self) -> int:
        """The active mode's id (its position in the spec)."""
        return list(self.spec.power_modes).index(self._power_mode)

    def set_power_mode(self, mode_id: int) -> int:
        """Switch the emulated nvpmodel mode: its GPU cap bounds the clocks, and the clock
        goes to the mode's top (devfreq under load); `restore` puts the mode found back."""
        names = list(self.spec.power_modes)
        if not 0 <= mode_id < len(names):
            raise ValueError(f"{self.name} has no power mode {mode_id}; its modes: "
                             + list_power_modes(self.power_mode_names()))
        with self.clock_lock:
            if names[mode_id] != self._power_mode:
                if self._found_mode is None:
                    self._found_mode = self._power_mode
                self._use_mode(names[mode_id])
        return mode_id

    def power_limit_range_w(self) -> tuple[float, float] | None:
        """With `power_limit_emulated`, the emulated limit's range: the spec's where it gives
        one (a datacenter GPU's, as NVML reports it), else from the idle power at the lowest
        clock to the largest power mode's budget; else None (a Jetson has none)."""
        if not self.power_limit_emulated:
            return None
        if self.spec.power_limit_range_w is not None:
            return self.spec.power_limit_range_w
        top_w = max(mode.budget_w for mode in self.spec.power_modes.values())
        return round(lowest_power_w(self), 3), top_w

    def power_limit_w(self) -> float | None:
        """The power limit set (None: none, the board runs at its clocks)."""
        return self._power_limit_w

    def set_power_limit_w(self, limit_w: float) -> float:
        """An emulated power limit, as NVML enforces one: each step runs at the highest clock
        (up to the one set) whose average power stays under the limit, the lowest clock when
        none does; instant peaks may pass it. Clamped to `power_limit_range_w`; `restore`
        puts back the limit found (a datacenter GPU's default, else none)."""
        bounds = self.power_limit_range_w()
        if bounds is None:
            raise DeviceNotSupportedError(
                f"{self.name} has no power limit (a Jetson has none); set "
                "power_limit_emulated = True to emulate one as NVML enforces it")
        low_w, high_w = bounds
        with self.clock_lock:
            self._power_limit_w = min(max(limit_w, low_w), high_w)
            self._limit_changed = True
        return self._power_limit_w

    def _running_hz(self) -> int:
        """The clock the board runs: the one set, held under the thermal clamp."""
        if self.heat is None:
            return self._frequency_hz
        return min(self._frequency_hz, self.spec.frequencies_hz[self.heat.clamp_index])

    def _step_hz(self, cost: StepCost) -> int:
        """The clock a step runs at: the one set, lowered by heat and under a power limit."""
        running_hz = self._running_hz()
        if self._power_limit_w is None:
            return running_hz
        # the limit holds a window's average: an unkind board overshoots it a little
        limit_w = self._power_limit_w * (1.0 + self.board.limit_overshoot)
        self._step_power_limited = False
        for frequency_hz in reversed(self._frequencies_hz):
            if frequency_hz > running_hz:
                continue
            power_w = self.model_step(cost, frequency_hz)[1]
            # the limit acts (NVML's "SwPowerCap" reason) where the step would draw more
            # than it at the clock set
            self._step_power_limited |= power_w > self._power_limit_w
            if power_w <= limit_w:
                return frequency_hz
        return self._frequencies_hz[0]

    def _use_mode(self, mode: str) -> None:
        self._power_mode = mode
        ceiling_hz = self.spec.power_modes[mode].gpu_max_hz
        self._frequencies_hz = [f for f in self.spec.frequencies_hz if f <= ceiling_hz]
        self._frequency_hz = self._frequencies_hz[-1]
        self.frequency_log.append((self._clock_s, self._frequency_hz))

    # -- frequencies ---------------------------------------------------------------------------
    def frequencies_hz(self) -> list[int]:
        return list(self._frequencies_hz)

    def current_frequency_hz(self) -> int:
        return self._running_hz()

    def _apply_frequency_hz(self, frequency_hz: int) -> int:
        if frequency_hz not in self._frequencies_hz:
            raise DeviceError(
                f"{self.name}: {frequency_hz / 1e6:.1f} MHz is not available in power mode "
                f"{self.power_mode}",
                hint="choose one of: "
                + ", ".join(f"{f / 1e6:.1f}" for f in self._frequencies_hz)
                + " MHz",
            )
        if frequency_hz != self._frequency_hz:
            self._frequency_hz = frequency_hz
            self.frequency_log.append((self._clock_s, frequency_hz))
        running_hz = self._running_hz()
        if running_hz != frequency_hz and self.heat is not None:
            raise FrequencyNotFollowedError(
                f"{self.name}: requested {frequency_hz / 1e6:.1f} MHz but the GPU runs at "
                f"{running_hz / 1e6:.1f} MHz: the board is hot ({self.heat.describe()})",
                hint="let the board cool down, or choose a lower frequency",
                requested_hz=frequency_hz, running_hz=running_hz, cause="thermal",
                cause_detail=self.heat.describe())
        return frequency_hz

    def _restore_settings(self) -> None:
        if self._limit_changed:
            self._power_limit_w, self._limit_changed = self._default_limit_w, False
        if self._found_mode is not None:
            self._use_mode(self._found_mode)
            self._found_mode = None
        if self._frequency_hz != self._initial_hz:
            self._frequency_hz = self._initial_hz
            self.frequency_log.append((self._clock_s, self._initial_hz))

    # -- power ---------------------------------------------------------------------------------
    @property
    def sensor_period_s(self) -> float:
        return self.spec.sensor_period_s

    @property
    def sensor_rail(self) -> str:
        return self.spec.sensor_rail

    def read_power_w(self) -> float:
        if self._last_reading is None:
            return self.idle_power_w()
        return self._last_reading.power_w

    def _start_ticks(self) -> None:
        """Ticks come from the virtual clock as it advances: no thread."""

    def _stop_ticks(self) -> None:
        """Nothing to stop."""

    # -- memory and time -----------------------------------------------------------------------
    def memory_bytes(self) -> int:
        return self.spec.memory_usable_bytes

    def free_memory_bytes(self) -> int:
        # the modelled device runs nothing else: all its usable memory is free
        return self.spec.memory_usable_bytes

    def now_s(self) -> float:
        return self._clock_s

    def info(self) -> DeviceInfo:
        info = super().info()
        info.kind = "emulated"
        info.power_mode = self.power_mode
        info.notes.append(self.spec.description)
        if not self.board.kind:
            info.notes.append(self.board.describe())
        return info

    # -- physics -------------------------------------------------------------------------------
    def _drifted(self) -> tuple[float, float]:
        """(speed, power) factors now: the run's board state, and a drift once it started; at
        a power limit in the top of its range a board that runs hot there is slower too."""
        speed, power = self.board.speed_factor, self.board.power_factor
        if self.drift is not None and self._clock_s >= self.drift.after_s:
            speed, power = speed * self.drift.speed_factor, power * self.drift.power_factor
        if self.board.slow_at_top_limit and self._at_top_limit():
            speed *= 1.0 - self.board.slow_at_top_limit
        return speed, power

    def _at_top_limit(self) -> bool:
        limits = self.spec.power_limit_range_w
        if limits is None or self._power_limit_w is None:
            return False
        low_w, high_w = limits
        return self._power_limit_w >= high_w - TOP_LIMIT_BAND * (high_w - low_w)

    def _power_w(self, frequency_hz: int, activity: float, dram_use: float) -> float:
        spec = self.spec
        _, power_factor = self._drifted()
        v_ratio = spec.voltage_curve.at(frequency_hz) / spec.voltage_curve.at(spec.f_max_hz)
        gpu_w = spec.gpu_static_max_w * v_ratio**2 + spec.gpu_dyn_max_w * v_ratio**2 * (
            frequency_hz / spec.f_max_hz
        ) * activity
        return spec.idle_w + spec.dram_max_w * min(1.0, dram_use) + gpu_w * power_factor

    def idle_power_w(self, frequency_hz: int | None = None) -> float:
        """Power of the device doing nothing at a locked frequency."""
        return self._power_w(frequency_hz or self._running_hz(), 0.0, 0.0)

    def occupancy(self, cost: StepCost) -> float:
        """Share of peak compute a step's kernels reach: saturates in the batch size."""
        b_half = self.spec.fill_flops_per_kernel / max(cost.flops_per_kernel_per_sample, 1.0)
        return cost.batch_size / (cost.batch_size + b_half)

    def power_activity(self, cost: StepCost) -> float:
        """GPU switching activity in the busy phase: keeps rising with b after throughput
        saturates (see spec source of power_activity_batch_factor)."""
        b_half = self.spec.fill_flops_per_kernel / max(cost.flops_per_kernel_per_sample, 1.0)
        b_half *= self.spec.power_activity_batch_factor
        return cost.batch_size / (cost.batch_size + b_half)

    def phases(self, cost: StepCost, frequency_hz: int) -> list[PhasePower]:
        """The three phases of a step at a frequency, with their durations and power."""
        # A step's phases are computed again for each phase, each tick inside it and each clock
        # a power limit tries: remembered by their inputs (the same numbers, computed once;
        # emulated profiling spent most of its time here)
        speed_factor, power_factor = self._drifted()
        key = (cost, frequency_hz, speed_factor, power_factor, self.board.host_factor,
               id(self.spec))
        known = self._phases_memo.get(key)
        if known is None:
            if len(self._phases_memo) > _PHASES_MEMO_SIZE:
                self._phases_memo.clear()
            known = self._phases_memo[key] = tuple(self._computed_phases(cost, frequency_hz))
        return list(known)

    def _computed_phases(self, cost: StepCost, frequency_hz: int) -> list[PhasePower]:
        spec = self.spec
        speed_factor, _ = self._drifted()
        peak = spec.peak_flops_at_fmax * (frequency_hz / spec.f_max_hz)
        peak *= spec.compute_efficiency * speed_factor
        compute_s = cost.flops / (peak * self.occupancy(cost))
        bandwidth = spec.memory_bandwidth_bytes_per_s
        memory_s = cost.dram_bytes / (bandwidth * spec.memory_bandwidth_efficiency)
        busy_s = max(compute_s, memory_s)
        host_s = cost.kernels * spec.launch_overhead_s * self.board.host_factor
        optimizer_s = cost.optimizer_bytes / (bandwidth * spec.memory_bandwidth_efficiency)
        if spec.host_overlaps_gpu:
            # the host queues launches ahead of the GPU: it holds the step back only for the
            # launch time the GPU's own work does not cover (the GPU waits, near idle)
            host_s = max(0.0, host_s - busy_s - optimizer_s)
        cpu_w = spec.cpu_feed_w
        busy_activity = self.power_activity(cost) * compute_s / busy_s
        return [
            PhasePower(
                "host", host_s, self._power_w(frequency_hz, spec.host_phase_activity, 0.0) + cpu_w
            ),
            PhasePower(
                "busy",
                busy_s,
                self._power_w(frequency_hz, busy_activity, cost.dram_bytes / busy_s / bandwidth)
                + cpu_w,
            ),
            PhasePower(
                "optimizer",
                optimizer_s,
                self._power_w(
                    frequency_hz,
                    spec.optimizer_phase_activity,
                    # no update (passes a measurement adds to a step): no optimizer phase
                    cost.optimizer_bytes / optimizer_s / bandwidth if optimizer_s > 0 else 0.0,
                )
                + cpu_w,
            ),
        ]

    def model_step(self, cost: StepCost, frequency_hz: int) -> tuple[float, float, float]:
        """Noise-free (step_s, average power_w, busy-phase power_w) of a step: for tests and
        reports; the profiler measures through the sensor instead."""
        phases = self.phases(cost, frequency_hz)
        step_s = sum(p.duration_s for p in phases)
        energy = sum(p.duration_s * p.power_w for p in phases)
        return step_s, energy / step_s, max(p.power_w for p in phases)

    # -- running -------------------------------------------------------------------------------
    def begin_step(self, cost: StepCost) -> StepTimer:
        """Refuse a batch that does not fit, as a real device would; the step's time is
        modelled at `end_step`, after the real math ran."""
        if cost.memory_needed_bytes > self.spec.memory_usable_bytes:
            raise DeviceOutOfMemoryError(
                f"{self.name}: CUDA out of memory: batch size {cost.batch_size} needs "
                f"{cost.memory_needed_bytes / 2**20:.0f} MiB, "
                f"{self.spec.memory_usable_bytes / 2**20:.0f} MiB usable",
                hint="use a smaller batch size (see the profile's max batch size)",
            )
        return StepTimer(cost=cost, start_s=self._clock_s)

    def end_step(self, timer: StepTimer) -> float:
        """Advance the virtual clock through the step's three phases at the current frequency
        (ticks fire on the way, so the watchdog may change the frequency mid-phase)."""
        start_s = self._clock_s
        self.accounted_steps = 1  # modelled now, step by step
        for cost in [timer.cost, *timer.extra_costs]:
            self._run_phases(cost)
        self._step_clock_hz, self._step_power_limited = None, False
        return self._clock_s - start_s

    def _run_phases(self, cost: StepCost) -> None:
        """The virtual clock through one cost's three phases (see `end_step`)."""
        for index in range(3):
            # Work is tracked as the fraction left, so a frequency change made by a tick
            # callback mid-phase (the watchdog) applies to the rest of the phase.
            remaining = 1.0
            while remaining > 1e-12:
                # the clock the step runs at (under a binding power limit, lower than the one
                # set), which the readings report as NVML reports the SM clock
                self._step_clock_hz = self._step_hz(cost)
                phase = self.phases(cost, self._step_clock_hz)[index]
                if phase.duration_s <= 0:
                    break
                left_s = phase.duration_s * remaining
                until_tick_s = self._next_tick_s - self._clock_s
                if left_s < until_tick_s:
                    self._advance(left_s, phase.power_w)
                    remaining = 0.0
                else:
                    self._advance(until_tick_s, phase.power_w)
                    remaining -= until_tick_s / phase.duration_s
                    self._tick()

    def idle(self, seconds: float) -> None:
        end_s = self._clock_s + seconds
        while self._clock_s < end_s - 1e-12:
            step_s = min(end_s - self._clock_s, self._next_tick_s - self._clock_s)
            self._advance(step_s, self.idle_power_w())
            if self._clock_s >= self._next_tick_s - 1e-12:
                self._tick()

    def begin_measurement(self, key: str) -> None:
        """The sensor's noise from here on is drawn from (seed, key): the same point measured in
        an exhaustive, a pruned or a few-point profile reads the same, so their errors compare."""
        self._rng = random.Random(f"{self._seed}:{key}")

    def _advance(self, seconds: float, power_w: float) -> None:
        if seconds <= 0:
            return
        self._segments.append((self._clock_s, self._clock_s + seconds, power_w))
        if self.heat is not None:
            self.heat.heat(seconds, power_w)
        self._clock_s += seconds
        self.true_energy_j += seconds * power_w

    def _true_average_w(self, start_s: float, end_s: float) -> float:
        """The board's mean power over [start_s, end_s] (the segments still held)."""
        energy = covered = 0.0
        for seg_start, seg_end, power in self._segments:
            overlap = min(seg_end, end_s) - max(seg_start, start_s)
            if overlap > 0:
                energy += overlap * power
                covered += overlap
        return energy / covered if covered > 0 else self.idle_power_w()

    def _tick(self) -> None:
        tick_s = self._next_tick_s
        period_s = self.spec.sensor_period_s
        # the reading averages its window, which ends `lag` before the tick (kind: the period)
        window_end = tick_s - self.board.sensor_lag_periods * period_s
        window_start = window_end - self.board.sensor_window_periods * period_s
        keep_from_s = min(window_start, tick_s - period_s)  # the ground truth's period too
        while self._segments and self._segments[0][1] <= keep_from_s:
            self._segments.popleft()
        average_w = self._true_average_w(window_start, window_end)
        if self.true_period_w is not None:
            self.true_period_w.append((tick_s, self._true_average_w(tick_s - period_s, tick_s)))
        noisy_w = max(0.0, average_w + self._rng.gauss(0.0, self.spec.sensor_noise_w))
        if self.heat is not None:
            self.heat.on_period(tick_s)
        self._last_reading = PowerReading(tick_s, noisy_w, self.spec.sensor_rail,
                                          clock_hz=self._step_clock_hz or self._running_hz(),
                                          power_limited=None if self._power_limit_w is None
                                          else self._step_power_limited)
        self._next_tick_s = tick_s + self.spec.sensor_period_s
        self._dispatch_tick(self._last_reading)


def emulated_device_names() -> list[str]:
    """Device names accepted as `emulated:<name>`."""
    from wattcap.devices.spec import list_specs

    return list_specs()


def lowest_power_w(device: EmulatedDevice) -> float:
    """Idle power at the lowest frequency: no cap below this can be met."""
    return device.idle_power_w(device.frequencies_hz()[0])


__all__ = ["Drift", "EmulatedDevice", "PhasePower", "emulated_device_names", "lowest_power_w"]
