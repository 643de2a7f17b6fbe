"""The Device interface: the only boundary between wattcap and hardware.

Everything above this layer (profiler, planner, trainer, watchdog) talks to a `Device` and never
to sysfs, NVML or the emulator directly. A device offers:

* a discrete list of GPU frequencies, setting one and reading back the one in effect;
* a power sensor with a known sampling period (and a hardware energy counter where one exists);
* a clock in *device seconds* (wall time on real hardware, virtual time on the emulator);
* `execute(step, cost)`: run one training step and return the device seconds it took;
* sensor ticks: callbacks fired once per sensor period with a `PowerReading`, from a background
  thread on real hardware, from the virtual clock on the emulator (so a watchdog may act in the
  middle of a long step in both cases);
* `restore()`: put every setting back as it was found. Devices are context managers.

Two threads may change the clock (the sensor thread's watchdog and the main thread's plan or
re-plan), so every clock write and the restore go through one re-entrant lock per device,
`clock_lock`, which a caller also holds across a read-modify-write. A tick callback that fails
is recorded in `watch_error`; `check_watch()` raises it, so a run never goes on unwatched.
"""

from __future__ import annotations

import math
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from wattcap.core.errors import WattcapError
from wattcap.core.events import ClockClamp
from wattcap.devices.cuda import cuda_of, out_of_memory_as_device_error
from wattcap.devices.errors import (
    DeviceError,
    DeviceNotSupportedError,
    FrequencyNotFollowedError,
    WatchError,
)
from wattcap.devices.found_state import DeviceClaim, FoundSettings, now_text

if TYPE_CHECKING:
    from wattcap.devices.workload import StepCost


@dataclass(frozen=True)
class PowerReading:
    """One sensor sample: device time of the sample and power averaged by the sensor, the
    clock the hardware reported with it (`clock_hz`: observed, None where unread), and whether
    the hardware said its power limit was acting then (`power_limited`: NVML's "SwPowerCap"
    clock event reason; None where unread or the device has no power limit)."""

    time_s: float
    power_w: float
    rail: str
    clock_hz: int | None = None
    power_limited: bool | None = None


@dataclass
class DeviceInfo:
    """What `wattcap devices` prints about one device."""

    name: str
    kind: str
    frequencies_hz: list[int]
    memory_bytes: int
    sensor_rail: str | None
    sensor_period_s: float | None
    power_mode: str | None = None
    notes: list[str] = field(default_factory=list)


TickCallback = Callable[[PowerReading], None]


class Device(ABC):
    """A GPU whose frequency wattcap may lock and whose power it can read."""

    #: short machine name used in profile files to refuse mismatches (e.g. "jetson-nano")
    name: str
    #: backend kind: "emulated", "jetson", "nvml"
    kind: str
    #: whether `execute` needs the real step to run for its timing (False on the emulator,
    #: whose timing comes from the workload; the math may still run for training)
    timing_needs_real_work: bool = True
    #: the error that stopped the sensor polling thread, if any
    sensor_error: DeviceError | None = None
    #: the first failure of a tick callback (the watchdog, a meter): see `check_watch`
    watch_error: WatchError | None = None
    #: whether wattcap's changes outlive this process (real hardware): such a device gets a
    #: state file and a lock before its first change (see `wattcap.devices.found_state`)
    persists_settings: bool = False
    #: the name `wattcap.devices.get_device` opens this device by ("jetson", "nvml:0")
    open_name: str = ""

    def __init__(self) -> None:
        self._tick_callbacks: list[TickCallback] = []
        self._tick_lock = threading.Lock()
        #: serialises clock writes and restore across threads (watchdog vs main thread)
        self.clock_lock = threading.RLock()
        #: the clock wattcap locked last (None: none since the device was found or restored)
        self._requested_hz: int | None = None
        #: changes of the power sensor during the run (another period or rail), for the record
        self.sensor_changes: list[str] = []
        #: what the device did to its settings beyond the run's own (for the record)
        self.events: list[str] = []
        self.clock_clamps: list[ClockClamp] = []  # clocks the board did not follow (record)
        #: CUDA steps ended but not yet waited for: (start event, end event)
        self._pending_events: list[tuple[Any, Any]] = []
        self._last_sync_s = time.monotonic()
        #: steps whose time the last `end_step` or `flush_timing` returned: 1 off CUDA; on CUDA
        #: 0 for a step whose time is still queued, then every step the wait accounted (what
        #: divides that time into steps: the drift monitor's time per sample)
        self.accounted_steps = 0
        self._claim: DeviceClaim | None = None
        #: open `claimed()` blocks: while any is, `restore()` keeps the lock and state file
        self._claim_holds = 0

    # -- identity ------------------------------------------------------------------------------
    @property
    def torch_device(self) -> str:
        """Where a model trained on this device runs: "cpu" (the emulator), "cuda" (a Jetson's
        integrated GPU) or "cuda:N" (an NVML GPU)."""
        return "cpu"

    @property
    def power_mode(self) -> str | None:
        """The active power mode (nvpmodel on a Jetson), or None where the device has none."""
        return None

    # -- frequencies ---------------------------------------------------------------------------
    @abstractmethod
    def frequencies_hz(self) -> list[int]:
        """Available GPU frequencies in Hz, ascending, capped by the current power mode."""

    @abstractmethod
    def current_frequency_hz(self) -> int:
        """The frequency the hardware reports now: an *observation*. On a real GPU it is the
        live clock, which idles at a few hundred MHz between steps whatever is locked; never
        derive the clock to apply from it (use `requested_frequency_hz`)."""

    def requested_frequency_hz(self) -> int | None:
        """The clock wattcap locked last (None: nothing locked since the device was found or
        restored; the driver's governor picks the clock)."""
        return self._requested_hz

    def run_frequency_hz(self) -> int:
        """The clock a run on this device runs at, as wattcap decides it: the one locked, else
        the top of the list (an unlocked GPU boosts up to it under load). What the watchdog's
        ceiling, its step-downs, resume and run records use; never the live reading."""
        if self._requested_hz is not None:
            return self._requested_hz
        return max(self.frequencies_hz())

    def set_frequency_hz(self, frequency_hz: int) -> int:
        """Lock the GPU at `frequency_hz` (one of `frequencies_hz()`); return the applied one.

        Raises FrequencyNotFollowedError when the hardware reports another frequency (the lock
        is in place all the same: it is the requested clock from then on). Holds `clock_lock`,
        so a watchdog in the sensor thread and the main thread never interleave their writes.
        """
        with self.clock_lock:
            self.claim_before_change()
            try:
                applied = self._apply_frequency_hz(frequency_hz)
            except FrequencyNotFollowedError:
                self._requested_hz = frequency_hz
                raise
            self._requested_hz = frequency_hz
            return applied

    @abstractmethod
    def _apply_frequency_hz(self, frequency_hz: int) -> int:
        """Backend part of `set_frequency_hz` (called with `clock_lock` held)."""

    # -- power ---------------------------------------------------------------------------------
    def power_mode_ids(self) -> list[int]:
        """The power modes the device can be switched to, by id (nvpmodel's on a Jetson);
        empty where it has none."""
        return []

    def set_power_mode(self, mode_id: int) -> int:
        """Switch to power mode `mode_id`; returns the mode now active. Put back by `restore`.
        Devices without power modes refuse."""
        raise DeviceNotSupportedError(f"{self.name} has no power modes wattcap can switch")

    def power_mode_names(self) -> dict[int, str]:
        """The power modes by id, with their names (nvpmodel.conf's on a Jetson); empty where
        the device has none."""
        return {}

    def require_power_mode(self, wanted: str) -> None:
        """Refuse to run in any power mode but the one active: the device is asked to run in
        `wanted` (a name or an id), and wattcap never switches a board's mode for that (a
        Jetson's `require_power_mode` accepts the mode it is in). Devices without power modes
        refuse every one."""
        raise DeviceNotSupportedError(
            f"{self.name} ({self.kind}) has no nvpmodel power modes, so power mode {wanted!r} "
            "cannot be run in: power modes are a Jetson's",
            hint="leave out the power mode; a GPU's power limit is its knob (profile it with "
            "--knob power-limit)")

    def power_limit_range_w(self) -> tuple[float, float] | None:
        """The lowest and highest power limit the board accepts (W), read from the board; None
        where the device has no power limit wattcap can read."""
        return None

    def power_limit_w(self) -> float | None:
        """The power limit set (W), None where the device has none or it cannot be read."""
        return None

    def enforced_power_limit_w(self) -> float | None:
        """The power limit the board enforces now (W): the one set, unless something else caps
        it lower (NVML reads it apart)."""
        return self.power_limit_w()

    def set_power_limit_w(self, limit_w: float) -> float:
        """Set the board's power limit (it holds *average* power), clamped to what the board
        accepts; returns the limit set. Put back by `restore`. Devices without one refuse."""
        raise DeviceNotSupportedError(f"{self.name} has no power limit wattcap can set")

    def check_knob(self, kind: str, value: int) -> None:
        """Refuse (DeviceNotSupportedError, saying what to do) a knob value this device cannot
        take, before anything is changed: a power limit on a device without one, a power mode
        it does not have. The GPU clock is checked when it is set."""
        from wattcap.core.knob import format_knob, knob_unit
        from wattcap.core.power_mode import power_mode_label

        if kind == "power_limit" and self.power_limit_range_w() is None:
            raise DeviceNotSupportedError(
                f"{self.name} has no power limit wattcap can read or set, so "
                f"{format_knob(kind, value)} cannot be applied: plan with a GPU-clock profile "
                "of this device")
        if kind == "power_mode" and value not in self.power_mode_ids():
            names = self.power_mode_names()
            modes = ", ".join(power_mode_label(m, names) for m in self.power_mode_ids()) \
                or "none"
            raise DeviceNotSupportedError(
                f"{self.name} has no {format_knob(kind, value)} (its power modes: {modes})")
        knob_unit(kind)  # an unknown kind is a ValueError naming the known ones

    def apply_knob(self, kind: str, value: int) -> int:
        """Set a knob (`wattcap.core.knob`) to `value` in its stored unit — the GPU clock in
        Hz, the power limit in mW, the power mode by id — and return the value applied in that
        unit (a power limit clamped to the board's range). `restore` puts back what was
        found."""
        from wattcap.core.knob import knob_unit

        self.check_knob(kind, value)
        if kind == "gpu_clock":
            return self.set_frequency_hz(value)
        if kind == "power_limit":
            unit = knob_unit(kind)
            return unit.stored(self.set_power_limit_w(unit.shown(value)))
        return self.set_power_mode(value)

    @property
    @abstractmethod
    def sensor_period_s(self) -> float:
        """How often the power sensor produces a new value; polling faster returns stale data."""

    @property
    @abstractmethod
    def sensor_rail(self) -> str:
        """The rail (or sum of rails) that `read_power_w` reports."""

    @abstractmethod
    def read_power_w(self) -> float:
        """The latest power value of the sensor."""

    def energy_counter_j(self) -> float | None:
        """Hardware energy counter in joules, or None where the hardware has none."""
        return None

    def begin_measurement(self, key: str) -> None:
        """A measurement window named `key` (a profile point) opens. Real sensors ignore it; an
        emulated one draws its noise for the window from (seed, key), so a point reads the same
        in every profile of the device whatever was measured before it."""
        return None  # a real sensor's noise is the hardware's

    # -- memory, time, work --------------------------------------------------------------------
    @abstractmethod
    def memory_bytes(self) -> int:
        """Memory usable for training (after OS, runtime and framework reservations)."""

    def free_memory_bytes(self) -> int | None:
        """Memory free now for this process's training (another process or a resident model
        may hold the rest), or None where it cannot be read: `memory_bytes` alone bounds it."""
        return None

    @abstractmethod
    def now_s(self) -> float:
        """Device clock in seconds (monotonic)."""

    def begin_step(self, cost: StepCost) -> StepTimer:
        """Start timing one training step whose work the caller runs next (a user's loop, a
        framework hook); `end_step` returns its device seconds. On a CUDA device the step is
        timed by CUDA events on *this* device's stream (not the current device's: `nvml:1`
        is timed on GPU 1); elsewhere by the wall clock."""
        cuda = cuda_of(self.torch_device)
        if cuda is None:
            return StepTimer(cost=cost, start_s=time.monotonic())
        start = cuda.Event(enable_timing=True)
        start.record(cuda.current_stream(self.torch_device))
        return StepTimer(cost=cost, start_s=time.monotonic(), start_event=start)

    def end_step(self, timer: StepTimer) -> float:
        """Finish a step started with `begin_step`: the device seconds accounted now. On a
        CUDA device the host does not wait for the GPU at every step: the step's end event is
        recorded, and this device's queue is waited for once per sensor period (and at
        `flush_timing`, e.g. an evaluation), when the steps since the last wait are accounted
        at their event-timed length; in between a step accounts 0 s."""
        if timer.start_event is None:
            self.accounted_steps = 1
            return time.monotonic() - timer.start_s
        cuda = cuda_of(self.torch_device)
        assert cuda is not None
        end = cuda.Event(enable_timing=True)
        end.record(cuda.current_stream(self.torch_device))
        self._pending_events.append((timer.start_event, end))
        if time.monotonic() - self._last_sync_s < self.sensor_period_s:
            self.accounted_steps = 0
            return 0.0
        return self.flush_timing()

    @property
    def pending_steps(self) -> int:
        """CUDA steps ended whose time is not yet accounted (0 off CUDA)."""
        return len(self._pending_events)

    def flush_timing(self) -> float:
        """Wait for this device's queued steps and return their event-timed seconds not yet
        accounted (0 when none are pending, or off CUDA)."""
        pending, self._pending_events = self._pending_events, []
        self._last_sync_s = time.monotonic()
        self.accounted_steps = len(pending)
        if not pending:
            return 0.0
        pending[-1][1].synchronize()  # the last end event: every step before it is done too
        return sum(float(start.elapsed_time(end)) for start, end in pending) / 1e3

    def run_step(self, step: Callable[[], object] | None, cost: StepCost) -> float:
        """Run one training step the way training runs it, queued: the device seconds
        accounted now (`end_step`'s; on CUDA the steps since the last wait, once per sensor
        period, else 0). `flush_timing` accounts the rest. A profile measured so runs the GPU
        as training does: waiting for it at every step would idle it between steps, slower
        and cooler than training, and a plan would then under-read the power it draws.

        `step` performs the real work (may be None when `timing_needs_real_work` is False);
        `cost` describes the step for devices that model rather than measure it.
        Raises DeviceOutOfMemoryError when the step does not fit.
        """
        if step is None and self.timing_needs_real_work:
            raise ValueError("a real device times the real step: pass the step to execute")
        timer = self.begin_step(cost)
        with out_of_memory_as_device_error(cost):
            if step is not None:
                step()
            return self.end_step(timer)

    def execute(self, step: Callable[[], object] | None, cost: StepCost) -> float:
        """Run one training step and wait for it: the device seconds it took (with any queued
        before it), timed whole now (a warm-up's step, a probe whether a batch size fits).
        Raises DeviceOutOfMemoryError when the step does not fit."""
        seconds = self.run_step(step, cost)
        steps = self.accounted_steps
        with out_of_memory_as_device_error(cost):
            seconds += self.flush_timing()  # a queued step's error surfaces at the wait
        self.accounted_steps += steps  # every step the two accounted
        return seconds

    def idle(self, seconds: float) -> None:
        """Let the device sit idle (sensors keep ticking)."""
        time.sleep(seconds)

    # -- settings ------------------------------------------------------------------------------
    def restore(self) -> None:
        """Put every setting changed by wattcap back to what it was. Idempotent. The state
        file goes (and the device's lock with it) only once that succeeded."""
        with self.clock_lock:
            self._restore_settings()
            self._requested_hz = None
            if self._claim is not None and self._claim_holds == 0:
                self._claim.release(restored=True)
                self._claim = None

    @contextmanager
    def claimed(self) -> Iterator[None]:
        """Hold the device's lock (and its state file) for the whole block, across the
        `restore()` calls inside it; restore when it ends. A profile puts the settings back
        between its phases, and another run must not take the GPU in one of those gaps."""
        with self.clock_lock:
            self.claim_before_change()
            self._claim_holds += 1
        try:
            yield
        finally:
            with self.clock_lock:
                self._claim_holds -= 1
            self.restore()

    # -- settings that outlive the process -------------------------------------------------
    def device_key(self) -> str:
        """What identifies this piece of hardware across processes (its state file, its
        lock)."""
        return f"{self.kind}-{self.name}"

    def found_settings(self) -> dict[str, object]:
        """The settings wattcap may change, as they are now (backend-specific, JSON)."""
        return {}

    def apply_found_settings(self, settings: dict[str, object]) -> None:
        """Put back settings `found_settings` returned (a later process, after a kill)."""
        raise DeviceError(f"{self.kind} devices keep no settings across processes")

    def claim_before_change(self) -> None:
        """Before the first change: take the device's lock, put back what a killed run left
        changed, and write the settings as found to the state file."""
        if not self.persists_settings or self._claim is not None \
                or getattr(self, "dry_run", False):
            return
        claim = DeviceClaim(self.device_key())
        claim.acquire()
        try:
            stale = claim.stale()
            if stale is not None:
                self.apply_found_settings(stale.settings)
                self.events.append(
                    f"put back the settings a run that ended without restoring them left "
                    f"changed (pid {stale.pid}, {stale.created_at}): {stale.settings}")
            claim.write(FoundSettings(device=self.open_name or self.kind, key=claim.key,
                                      settings=self.found_settings(), pid=os.getpid(),
                                      created_at=now_text()))
        except BaseException:
            claim.release(restored=False)
            raise
        self._claim = claim

    @abstractmethod
    def _restore_settings(self) -> None:
        """Backend part of `restore` (called with `clock_lock` held)."""

    def info(self) -> DeviceInfo:
        """A description for diagnostics."""
        return DeviceInfo(
            name=self.name,
            kind=self.kind,
            frequencies_hz=self.frequencies_hz(),
            memory_bytes=self.memory_bytes(),
            sensor_rail=self.sensor_rail,
            sensor_period_s=self.sensor_period_s,
            power_mode=self.power_mode,
        )

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    # -- sensor ticks --------------------------------------------------------------------------
    @contextmanager
    def sensor_ticks(self, callback: TickCallback) -> Iterator[None]:
        """Call `callback(reading)` once per sensor period while the block runs.

        Real devices poll from a background thread at the sensor period; the emulator overrides
        `_start_ticks`/`_stop_ticks` to fire from its virtual clock.
        """
        with self._tick_lock:
            self._tick_callbacks.append(callback)
            first = len(self._tick_callbacks) == 1
        if first:
            self._start_ticks()
        try:
            yield
        finally:
            with self._tick_lock:
                self._tick_callbacks.remove(callback)
                last = not self._tick_callbacks
            if last:
                self._stop_ticks()

    def _dispatch_tick(self, reading: PowerReading) -> bool:
        """Give a reading to every callback; False (and `watch_error` set) if one failed."""
        with self._tick_lock:
            callbacks = list(self._tick_callbacks)
        for callback in callbacks:
            try:
                callback(reading)
            except Exception as err:  # noqa: BLE001 - any failure stops the watch, see below
                # Raising here would end the sensor thread silently (real hardware) or tear a
                # step apart half-way (emulator); the error is kept and the run stops at the
                # next step boundary, where `check_watch` raises it.
                if self.watch_error is None:
                    name = getattr(callback, "__qualname__", None) or type(callback).__name__
                    self.watch_error = WatchError(
                        f"the power watch failed: sensor callback {name} raised "
                        f"{type(err).__name__}: {err} (at t={reading.time_s:.2f} s); the run "
                        "is stopped rather than continued without the cap being watched",
                        hint=("" if isinstance(err, WattcapError) else "this is a bug in the "
                              "callback; ") + "the device settings are restored")
                    self.watch_error.__cause__ = err
                return False
        return True

    def check_watch(self, power_cap_w: float | None = None) -> None:
        """Raise the watch's failure, if any: a failed tick callback, or a sensor that stopped
        (under a cap nobody would keep it; without one, power and energy would go unmeasured:
        either way the run stops and says why, never silently)."""
        if self.watch_error is not None:
            raise self.watch_error
        if self.sensor_error is not None:
            what = (f"the cap of {power_cap_w:g} W cannot be watched" if power_cap_w is not None
                    else "power and energy cannot be measured")
            raise WatchError(
                f"the power sensor stopped ({self.sensor_error.message}): {what}, so the run "
                "stops", hint=self.sensor_error.hint)

    def _start_ticks(self) -> None:
        self._poll_stop = threading.Event()
        self._poll_thread = threading.Thread(
            target=self._poll_loop, name=f"wattcap-sensor-{self.name}", daemon=True
        )
        self._poll_thread.start()

    def _stop_ticks(self) -> None:
        self._poll_stop.set()
        self._poll_thread.join(timeout=5 * self.sensor_period_s + 1.0)

    def _poll_loop(self) -> None:
        next_s = time.monotonic()
        while not self._poll_stop.is_set():
            try:
                power_w = self.read_power_w()
            except Exception as err:  # noqa: BLE001 - every failure ends the watch, said once
                # The run must not go on unwatched: the error is kept and `check_watch` stops
                # the run at the next step boundary (a backend maps its own errors to typed
                # DeviceErrors; anything else is an unknown sensor failure).
                self.sensor_error = err if isinstance(err, DeviceError) else DeviceError(
                    f"the power sensor failed: {type(err).__name__}: {err}",
                    hint="check the driver (`nvidia-smi`, `tegrastats`); the run stops "
                    "rather than go on without the cap being watched")
                return
            reading = PowerReading(self.now_s(), power_w, self.sensor_rail,
                                   clock_hz=self._observed_clock_hz(),
                                   power_limited=self._observed_power_limited())
            if not self._dispatch_tick(reading):
                return
            # Sleep to an absolute schedule, so the sample rate stays at the sensor period
            # (read each time: a sensor may change, instant -> averaged) even when a read is
            # slow; slots missed (a stalled thread) are skipped, never replayed as a burst of
            # readings at one instant.
            period_s = self.sensor_period_s
            next_s += period_s
            now_s = time.monotonic()
            if next_s < now_s:
                next_s += period_s * math.ceil((now_s - next_s) / period_s)
            self._poll_stop.wait(max(0.0, next_s - now_s))

    def _observed_clock_hz(self) -> int | None:
        """The clock the hardware reports beside a reading (None where it cannot be read)."""
        try:
            return self.current_frequency_hz()
        except Exception:  # noqa: BLE001 - an observation only: the reading stands without it
            return None

    def _observed_power_limited(self) -> bool | None:
        """Whether the hardware reports its power limit acting now (None: it cannot say)."""
        return None


@dataclass
class StepTimer:
    """A step being timed between `Device.begin_step` and `Device.end_step` (with the CUDA
    event recorded at its start on a CUDA device)."""

    cost: StepCost
    start_s: float
    start_event: Any = None
    #: work the step ran besides its own (a framework's backward, then the parts' passes a
    #: noise-scale measurement adds): a device that models time from cost charges it after
    #: `cost`; a real one measures the step as it ran
    extra_costs: list[StepCost] = field(default_factory=list)
