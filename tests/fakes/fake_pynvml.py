"""A fake `pynvml` module: the real constants, error classes and ctypes structs, fake GPUs.

Everything that is data in the real module (NVML_* constants, clock-reason bits, NVMLError and
its per-code subclasses, c_nvmlFieldValue_t, c_nvmlMemory_t) is taken from the installed
nvidia-ml-py, so the backend is tested against the same types it meets on a real driver. Only
the functions that would call libnvidia-ml are replaced, driven by a scriptable `FakeGpu`.
Like the real library, every call before nvmlInit() fails with NVMLError_Uninitialized.

Power is not a scripted reading but a draw over time, sampled as the driver samples it: the GPU
draws `busy_draw_mw` while work runs at the boost clock (see the fake torch.cuda), less at a
lower locked clock, never more than the enforced power limit, and `idle_draw_mw` otherwise; the
instant field reports the draw as of its last refresh (every INSTANT_REFRESH_S), the averaged
reading the mean draw over the last AVERAGE_WINDOW_S as of its last refresh (so it lags a change
by up to a second), and the energy counter integrates the draw over time. The time is
`FakeGpu.clock` (the real monotonic clock unless a test passes its own).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pynvml as real

# An H100 SXM-like list, descending as NVML returns it (15 MHz steps from 1980 to 345 MHz);
# the duplicate checks that the backend deduplicates.
H100_GRAPHICS_CLOCKS_MHZ = [*range(1980, 344, -15), 345]

#: NVML_FI_DEV_POWER_INSTANT is refreshed every few tens of milliseconds
INSTANT_REFRESH_S = 0.02
#: nvmlDeviceGetPowerUsage on Ampere and newer: a 1 s moving average, refreshed every 100 ms
AVERAGE_WINDOW_S = 1.0
AVERAGE_REFRESH_S = 0.1


#: FakeGpu fields the draw depends on: a change starts a new piece of the draw's trace
_DRAW_INPUTS = ("busy", "busy_draw_mw", "idle_draw_mw", "clock_mhz", "locked_mhz",
                "power_limit_mw")


@dataclass
class FakeGpu:
    """What one fake GPU reports and how it reacts to clock locks."""

    name: str = "NVIDIA H100 80GB HBM3"
    memory_clocks_mhz: list[int] = field(default_factory=lambda: [2619, 1593])
    graphics_clocks_mhz: dict[int, list[int]] = field(
        default_factory=lambda: {2619: list(H100_GRAPHICS_CLOCKS_MHZ), 1593: [1410, 1200, 345]}
    )
    idle_clock_mhz: int = 345
    clock_mhz: int = 345
    #: what the board draws (mW) while work runs and while it idles; the sensors sample it
    busy_draw_mw: int = 74_500
    idle_draw_mw: int = 61_000
    #: NVML_FI_DEV_POWER_INSTANT answers; False: the field reports NOT_SUPPORTED
    has_instant_power: bool = True
    #: per-field errors: the next reads of the instant field report these NVML return codes
    #: inside the struct (one per read, first first), as a busy driver does now and then
    instant_field_errors: list[int] = field(default_factory=list)
    #: nvmlDeviceGetTotalEnergyConsumption answers (False: NotSupported, pre-Volta); the
    #: counter starts at energy_at_start_mj and integrates the draw
    has_energy_counter: bool = True
    energy_at_start_mj: float = 123_456_789.0
    #: the time the sensors sample the draw at (seconds)
    clock: Callable[[], float] = time.monotonic
    memory_total: int = 85_520_809_984
    memory_free: int = 84_000_000_000
    power_limit_mw: int = 700_000
    #: a lower limit something out of band enforces (a BMC, DCGM), mW; None: the one set
    enforced_limit_mw: int | None = None
    #: what nvmlDeviceGetPowerManagementLimitConstraints reports (min, max), mW
    power_limit_constraints_mw: tuple[int, int] = (200_000, 700_000)
    #: every power limit ever set, in order
    power_limit_history: list[int] = field(default_factory=list)
    clock_reasons: int = real.nvmlClocksEventReasonGpuIdle
    #: setters raise NVMLError_NoPermission (not root)
    deny_set: bool = False
    #: setters raise NVMLError_NotSupported (e.g. a GeForce without locked clocks)
    locking_supported: bool = True
    #: a power/thermal limit: a lock above it runs at cap_mhz with `cap_reason` set
    cap_mhz: int | None = None
    #: why the board holds the clock at cap_mhz (NVML's bit: SwPowerCap, SwThermalSlowdown, ...)
    cap_reason: int = real.nvmlClocksEventReasonSwPowerCap
    #: work runs on the GPU now (set by the fake torch.cuda between a step's start event and
    #: its end event's synchronize): only then does a locked clock show; idle, the live clock
    #: is the idle clock whatever is locked, as on real hardware
    busy: bool = False
    locked_mhz: tuple[int, int] | None = None
    #: a lock someone else set before wattcap ran (`nvidia-smi -lgc M,M`): work runs at it and
    #: the reasons carry its bit, as `locked_mhz` and `clock_reasons` then say
    admin_lock_mhz: int | None = None
    #: whether the reasons show the user-defined clocks bit while the GPU idles; False: an idle
    #: GPU reports only GpuIdle, whatever is locked (hardware need not show it idle)
    lock_reason_at_idle: bool = True
    #: nvmlDeviceGetApplicationsClock / nvmlDeviceGetDefaultApplicationsClock (graphics, MHz);
    #: None: NOT_SUPPORTED (a GPU without application clocks)
    applications_clock_mhz: int | None = 1980
    default_applications_clock_mhz: int | None = 1980
    #: every (min, max) lock ever set, in order
    lock_history: list[tuple[int, int]] = field(default_factory=list)
    #: errors injected mid-run: function name -> (calls that still succeed, NVML return code,
    #: or "raw" for an NVMLError of a code the bindings have no subclass for)
    fail: dict[str, tuple[int, int | str]] = field(default_factory=dict)
    #: a read that never returns (a hung driver call): function name -> calls before it hangs
    hang: dict[str, int] = field(default_factory=dict)
    #: nvmlDeviceGetPciInfo().busId, as the real struct holds it (bytes, 8-digit domain)
    pci_bus_id: bytes = b"00000000:3B:00.0"
    #: (time, draw) at every change of the draw, the first at creation
    trace: list[tuple[float, float]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if self.admin_lock_mhz is not None:
            self.locked_mhz = (self.admin_lock_mhz, self.admin_lock_mhz)
            self.clock_mhz = self.admin_lock_mhz
            self.clock_reasons |= real.nvmlClocksEventReasonApplicationsClocksSetting
        self.trace.append((self.clock(), float(self.draw_now_mw())))

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name in _DRAW_INPUTS and "trace" in self.__dict__:
            self.trace.append((self.clock(), float(self.draw_now_mw())))

    def max_clock_mhz(self) -> int:
        """The highest graphics clock (at the highest memory clock): where work runs unlocked."""
        return max(self.graphics_clocks_mhz.get(max(self.memory_clocks_mhz), [self.clock_mhz]))

    def work_clock_mhz(self) -> int:
        """The clock work runs at: the locked one (or what a limiter leaves of it), else the
        boost clock."""
        return self.clock_mhz if self.locked_mhz is not None else self.max_clock_mhz()

    def draw_now_mw(self) -> int:
        """What the board draws at this instant. Under work the draw above idle scales with
        the square of the clock (dynamic power is f x V^2 and the voltage rises with f: a
        square is the mild end), `busy_draw_mw` at the boost clock; the driver holds the draw
        at the enforced power limit (it would lower the clock to do so)."""
        return min(self.unheld_draw_mw(), self.enforced_mw())

    def enforced_mw(self) -> int:
        """The limit the driver holds the draw at."""
        return min(self.power_limit_mw, self.enforced_limit_mw or self.power_limit_mw)

    def unheld_draw_mw(self) -> int:
        """What the board would draw now without its power limit."""
        if not self.busy:
            return self.idle_draw_mw
        share = (self.work_clock_mhz() / self.max_clock_mhz()) ** 2
        return round(self.idle_draw_mw + (self.busy_draw_mw - self.idle_draw_mw) * share)

    def draw_at_mw(self, t_s: float) -> float:
        """The draw at time `t_s` (the first draw before the trace starts)."""
        draw = self.trace[0][1]
        for start_s, value in self.trace:
            if start_s > t_s:
                break
            draw = value
        return draw

    def energy_between_mj(self, start_s: float, end_s: float) -> float:
        """The integral of the draw over [start_s, end_s] (mW x s = mJ)."""
        points = [(t, d) for t, d in self.trace if start_s < t < end_s]
        edges = [(start_s, self.draw_at_mw(start_s)), *points, (end_s, 0.0)]
        return sum(d * (b - a) for (a, d), (b, _) in zip(edges, edges[1:], strict=False))

    def instant_reading_mw(self) -> int:
        """The instant field: the draw as of its last refresh."""
        refreshed_s = math.floor(self.clock() / INSTANT_REFRESH_S) * INSTANT_REFRESH_S
        return round(self.draw_at_mw(refreshed_s))

    def average_reading_mw(self) -> int:
        """The averaged reading: the mean draw over the window before its last refresh."""
        refreshed_s = math.floor(self.clock() / AVERAGE_REFRESH_S) * AVERAGE_REFRESH_S
        window = self.energy_between_mj(refreshed_s - AVERAGE_WINDOW_S, refreshed_s)
        return round(window / AVERAGE_WINDOW_S)

    def energy_reading_mj(self) -> int:
        """The energy counter: the start value plus the draw integrated since creation."""
        return int(self.energy_at_start_mj + self.energy_between_mj(self.trace[0][0], self.clock()))


@dataclass(frozen=True)
class FakeHandle:
    """Stands for an nvmlDevice_t."""

    index: int


def _error(code: int) -> real.NVMLError:
    # The real NVMLError maps a code to its subclass (NVMLError_NoPermission, ...).
    return real.NVMLError(code)


class FakeNvml(ModuleType):
    """A module with pynvml's names; pass it as ``pynvml_module=``."""

    def __init__(
        self,
        gpus: list[FakeGpu] | None = None,
        library_missing: bool = False,
        event_reasons_api: bool = True,
    ) -> None:
        super().__init__("pynvml", __doc__)
        for attribute in dir(real):
            value = getattr(real, attribute)
            constant = attribute.startswith(("NVML_", "nvmlClocks")) and isinstance(value, int)
            error_class = attribute.startswith("NVMLError")
            if constant or error_class or attribute.startswith("c_nvml"):
                setattr(self, attribute, value)
        self.gpus = [FakeGpu()] if gpus is None else gpus
        self.library_missing = library_missing
        self.init_count = 0
        #: released by a test to let a hung call return
        self.hung = threading.Event()
        #: names of every function called, in order
        self.calls: list[str] = []
        if not event_reasons_api:
            # Drivers older than r535 lack the entry point; pynvml raises FunctionNotFound.
            self.nvmlDeviceGetCurrentClocksEventReasons = self._function_not_found

    # -- bookkeeping ---------------------------------------------------------------------------
    @property
    def setter_calls(self) -> list[str]:
        """Calls that change GPU state."""
        return [c for c in self.calls if c.startswith(("nvmlDeviceSet", "nvmlDeviceReset"))]

    def _enter(self, name: str, handle: FakeHandle | None = None) -> None:
        self.calls.append(name)
        if self.init_count == 0:
            raise _error(real.NVML_ERROR_UNINITIALIZED)
        if handle is None:
            return
        gpu = self._gpu(handle)
        if name in gpu.fail:
            left, code = gpu.fail[name]
            if left <= 0:
                # "raw": a code the bindings have no subclass for gives the bare NVMLError
                raise _error(123_456 if code == "raw" else int(code))
            gpu.fail[name] = (left - 1, code)
        if name in gpu.hang:
            if gpu.hang[name] <= 0:
                self.hung.wait()  # until the test releases it
            gpu.hang[name] -= 1

    def _gpu(self, handle: FakeHandle) -> FakeGpu:
        return self.gpus[handle.index]

    def _function_not_found(self, handle: FakeHandle) -> int:
        self.calls.append("nvmlDeviceGetCurrentClocksEventReasons")
        raise _error(real.NVML_ERROR_FUNCTION_NOT_FOUND)

    # -- library -------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        if self.library_missing:
            raise _error(real.NVML_ERROR_LIBRARY_NOT_FOUND)
        self.init_count += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.init_count -= 1

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            raise _error(real.NVML_ERROR_INVALID_ARGUMENT)
        return FakeHandle(index)

    # -- reads ---------------------------------------------------------------------------------
    def nvmlDeviceGetName(self, handle: FakeHandle) -> str:
        self._enter("nvmlDeviceGetName", handle)
        return self._gpu(handle).name

    def nvmlDeviceGetPciInfo(self, handle: FakeHandle) -> Any:
        self._enter("nvmlDeviceGetPciInfo", handle)
        info = real.nvmlPciInfo_t()
        info.busId = self._gpu(handle).pci_bus_id
        return info

    def nvmlDeviceGetSupportedMemoryClocks(self, handle: FakeHandle) -> list[int]:
        self._enter("nvmlDeviceGetSupportedMemoryClocks", handle)
        return list(self._gpu(handle).memory_clocks_mhz)

    def nvmlDeviceGetSupportedGraphicsClocks(self, handle: FakeHandle, memory_mhz: int) -> list:
        self._enter("nvmlDeviceGetSupportedGraphicsClocks", handle)
        clocks = self._gpu(handle).graphics_clocks_mhz.get(memory_mhz)
        if clocks is None:
            raise _error(real.NVML_ERROR_NOT_FOUND)
        return list(clocks)

    def nvmlDeviceGetClockInfo(self, handle: FakeHandle, clock_type: int) -> int:
        self._enter("nvmlDeviceGetClockInfo", handle)
        if clock_type != real.NVML_CLOCK_GRAPHICS:
            raise _error(real.NVML_ERROR_NOT_SUPPORTED)
        gpu = self._gpu(handle)
        if not gpu.busy:
            return gpu.idle_clock_mhz  # the live clock idles whatever is locked
        return gpu.clock_mhz

    def nvmlDeviceGetPowerUsage(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetPowerUsage", handle)
        return self._gpu(handle).average_reading_mw()

    def nvmlDeviceGetFieldValues(self, handle: FakeHandle, field_ids: list[int]) -> Any:
        self._enter("nvmlDeviceGetFieldValues", handle)
        gpu = self._gpu(handle)
        values = (real.c_nvmlFieldValue_t * len(field_ids))()
        for value, field_id in zip(values, field_ids, strict=True):
            value.fieldId = field_id
            if field_id == real.NVML_FI_DEV_POWER_INSTANT and gpu.instant_field_errors:
                value.nvmlReturn = gpu.instant_field_errors.pop(0)
            elif field_id == real.NVML_FI_DEV_POWER_INSTANT and gpu.has_instant_power:
                value.nvmlReturn = real.NVML_SUCCESS
                value.valueType = real.NVML_VALUE_TYPE_UNSIGNED_INT
                value.value.uiVal = gpu.instant_reading_mw()
            else:
                value.nvmlReturn = real.NVML_ERROR_NOT_SUPPORTED
        return values

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetTotalEnergyConsumption", handle)
        gpu = self._gpu(handle)
        if not gpu.has_energy_counter:
            raise _error(real.NVML_ERROR_NOT_SUPPORTED)
        return gpu.energy_reading_mj()

    def nvmlDeviceGetMemoryInfo(self, handle: FakeHandle) -> Any:
        self._enter("nvmlDeviceGetMemoryInfo", handle)
        gpu = self._gpu(handle)
        return real.c_nvmlMemory_t(
            gpu.memory_total, gpu.memory_free, gpu.memory_total - gpu.memory_free
        )

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetCurrentClocksEventReasons", handle)
        return self._reasons(self._gpu(handle))

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        return self._reasons(self._gpu(handle))

    @staticmethod
    def _reasons(gpu: FakeGpu) -> int:
        if gpu.busy:
            # the driver holds the draw at the power limit: it says so ("SwPowerCap")
            limited = gpu.unheld_draw_mw() > gpu.enforced_mw()
            return (gpu.clock_reasons & ~real.nvmlClocksEventReasonGpuIdle) | \
                (real.nvmlClocksEventReasonSwPowerCap if limited else 0)
        reasons = gpu.clock_reasons | real.nvmlClocksEventReasonGpuIdle
        if not gpu.lock_reason_at_idle:
            reasons &= ~real.nvmlClocksEventReasonApplicationsClocksSetting
        return reasons

    def nvmlDeviceGetApplicationsClock(self, handle: FakeHandle, clock_type: int) -> int:
        self._enter("nvmlDeviceGetApplicationsClock", handle)
        return self._applications_clock(self._gpu(handle).applications_clock_mhz, clock_type)

    def nvmlDeviceGetDefaultApplicationsClock(self, handle: FakeHandle, clock_type: int) -> int:
        self._enter("nvmlDeviceGetDefaultApplicationsClock", handle)
        gpu = self._gpu(handle)
        return self._applications_clock(gpu.default_applications_clock_mhz, clock_type)

    @staticmethod
    def _applications_clock(mhz: int | None, clock_type: int) -> int:
        if mhz is None or clock_type != real.NVML_CLOCK_GRAPHICS:
            raise _error(real.NVML_ERROR_NOT_SUPPORTED)
        return mhz

    def nvmlDeviceGetPowerManagementLimit(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetPowerManagementLimit", handle)
        return self._gpu(handle).power_limit_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetEnforcedPowerLimit", handle)
        gpu = self._gpu(handle)
        return min(gpu.power_limit_mw, gpu.enforced_limit_mw or gpu.power_limit_mw)

    # -- setters -------------------------------------------------------------------------------
    def _check_set(self, gpu: FakeGpu) -> None:
        if gpu.deny_set:
            raise _error(real.NVML_ERROR_NO_PERMISSION)
        if not gpu.locking_supported:
            raise _error(real.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceSetGpuLockedClocks(self, handle: FakeHandle, min_mhz: int, max_mhz: int) -> None:
        self._enter("nvmlDeviceSetGpuLockedClocks", handle)
        gpu = self._gpu(handle)
        self._check_set(gpu)
        gpu.locked_mhz = (min_mhz, max_mhz)
        gpu.lock_history.append((min_mhz, max_mhz))
        reasons = real.nvmlClocksEventReasonApplicationsClocksSetting
        # the clock under work; idle, the live clock reads the idle clock (see GetClockInfo)
        if gpu.cap_mhz is not None and gpu.cap_mhz < max_mhz:
            gpu.clock_mhz = gpu.cap_mhz
            reasons |= gpu.cap_reason
        else:
            gpu.clock_mhz = max_mhz
        gpu.clock_reasons = reasons

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: FakeHandle) -> list[int]:
        self._enter("nvmlDeviceGetPowerManagementLimitConstraints", handle)
        return list(self._gpu(handle).power_limit_constraints_mw)

    def nvmlDeviceSetPowerManagementLimit(self, handle: FakeHandle, limit_mw: int) -> None:
        self._enter("nvmlDeviceSetPowerManagementLimit", handle)
        gpu = self._gpu(handle)
        if gpu.deny_set:
            raise _error(real.NVML_ERROR_NO_PERMISSION)
        low, high = gpu.power_limit_constraints_mw
        if not low <= limit_mw <= high:
            raise _error(real.NVML_ERROR_INVALID_ARGUMENT)
        gpu.power_limit_mw = int(limit_mw)
        gpu.power_limit_history.append(int(limit_mw))

    def nvmlDeviceResetGpuLockedClocks(self, handle: FakeHandle) -> None:
        self._enter("nvmlDeviceResetGpuLockedClocks", handle)
        gpu = self._gpu(handle)
        self._check_set(gpu)
        gpu.locked_mhz = None
        gpu.clock_mhz = gpu.idle_clock_mhz
        gpu.clock_reasons = real.nvmlClocksEventReasonGpuIdle
