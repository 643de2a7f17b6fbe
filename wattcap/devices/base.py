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
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wattcap.workload import StepCost


class DeviceError(RuntimeError):
    """A device problem, with a hint telling the user how to fix it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message}\n  fix: {hint}")


class DevicePermissionError(DeviceError):
    """Writing a setting (clocks, governor) needs privileges we do not have."""


class SensorMissingError(DeviceError):
    """The device has no power sensor wattcap can read."""


class DeviceNotFoundError(DeviceError):
    """The requested device is not present on this machine."""


class DeviceOutOfMemoryError(DeviceError, MemoryError):
    """A batch does not fit in the device memory, as a real device would report."""


class FrequencyNotFollowedError(DeviceError):
    """The hardware did not apply the requested frequency (power-mode cap, thermal)."""


@dataclass(frozen=True)
class PowerReading:
    """One sensor sample: device time of the sample and power averaged by the sensor."""

    time_s: float
    power_w: float
    rail: str


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

    def __init__(self) -> None:
        self._tick_callbacks: list[TickCallback] = []
        self._tick_lock = threading.Lock()

    # -- frequencies ---------------------------------------------------------------------------
    @abstractmethod
    def frequencies_hz(self) -> list[int]:
        """Available GPU frequencies in Hz, ascending, capped by the current power mode."""

    @abstractmethod
    def current_frequency_hz(self) -> int:
        """The frequency the hardware reports now."""

    @abstractmethod
    def set_frequency_hz(self, frequency_hz: int) -> int:
        """Lock the GPU at `frequency_hz` (one of `frequencies_hz()`); return the applied one.

        Raises FrequencyNotFollowedError when the hardware reports another frequency.
        """

    # -- power ---------------------------------------------------------------------------------
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

    # -- memory, time, work --------------------------------------------------------------------
    @abstractmethod
    def memory_bytes(self) -> int:
        """Memory usable for training (after OS, runtime and framework reservations)."""

    @abstractmethod
    def now_s(self) -> float:
        """Device clock in seconds (monotonic)."""

    @abstractmethod
    def execute(self, step: Callable[[], object] | None, cost: StepCost) -> float:
        """Run one training step and return the device seconds it took.

        `step` performs the real work (may be None when `timing_needs_real_work` is False);
        `cost` describes the step for devices that model rather than measure it.
        Raises DeviceOutOfMemoryError when the step does not fit.
        """

    def idle(self, seconds: float) -> None:
        """Let the device sit idle (sensors keep ticking)."""
        time.sleep(seconds)

    # -- settings ------------------------------------------------------------------------------
    @abstractmethod
    def restore(self) -> None:
        """Put every setting changed by wattcap back to what it was. Idempotent."""

    def info(self) -> DeviceInfo:
        """A description for diagnostics."""
        return DeviceInfo(
            name=self.name,
            kind=self.kind,
            frequencies_hz=self.frequencies_hz(),
            memory_bytes=self.memory_bytes(),
            sensor_rail=self.sensor_rail,
            sensor_period_s=self.sensor_period_s,
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

    def _dispatch_tick(self, reading: PowerReading) -> None:
        with self._tick_lock:
            callbacks = list(self._tick_callbacks)
        for callback in callbacks:
            callback(reading)

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
        period_s = self.sensor_period_s
        next_s = time.monotonic()
        while not self._poll_stop.is_set():
            try:
                power_w = self.read_power_w()
            except DeviceError as err:
                # A sensor that cannot be read (none on a Nano 2 GB, a driver error) must not
                # kill training: ticks stop and the error is kept for the run record.
                self.sensor_error = err
                return
            self._dispatch_tick(PowerReading(self.now_s(), power_w, self.sensor_rail))
            next_s += period_s
            # Sleeping to an absolute schedule keeps the sample rate at the sensor period
            # even when a read is slow, without ever polling faster than the sensor updates.
            self._poll_stop.wait(max(0.0, next_s - time.monotonic()))
