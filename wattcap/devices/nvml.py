"""NVIDIA GPUs through NVML (package nvidia-ml-py, module `pynvml`).

Safety: constructing an `NvmlDevice` only reads. Clocks are changed in exactly one place,
`set_frequency_hz`, and put back by `restore` only when this object locked them; never over
a clock setting someone else made (`nvml_clock_hold`) unless told to; with ``dry_run=True``
no setter is ever called. The board power limit is set only by
`set_power_limit_w` (the hardware backstop under a cap), and only once the limit found is
kept for a restore.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from wattcap.devices.base import Device, DeviceInfo
from wattcap.devices.cuda import (
    cuda_index_for_pci_bus,
    cuda_of,
    normal_bus_id,
    own_cuda_memory_bytes,
)
from wattcap.devices.errors import (
    DeviceNotFoundError,
    DeviceNotSupportedError,
    DevicePermissionError,
    FrequencyNotFollowedError,
)
from wattcap.devices.nvml_clock_hold import (
    clock_held_error,
    find_clock_hold,
    reasons_with_load_probe,
    replace_clock_lock_allowed,
    replaced_event,
)
from wattcap.devices.nvml_errors import clock_reason_names, map_nvml_error, open_error
from wattcap.devices.nvml_values import field_value, slugify, text, throttle_cause

INSTALL_HINT = "pip install 'wattcap[nvml]'"

# NVML_FI_DEV_POWER_INSTANT is refreshed by the driver every few tens of milliseconds; 100 ms
# keeps each poll fresh without busy-polling. nvmlDeviceGetPowerUsage is a 1 s moving average
# on Ampere and newer (except GA100), so polling it faster than 1 s only repeats the average.
INSTANT_PERIOD_S = 0.1
AVERAGE_PERIOD_S = 1.0
#: instant-field errors in a row before the sensor becomes the average for the rest of the run:
#: a busy driver misses a read now and then (that reading comes from the average), a field
#: that keeps failing is gone
INSTANT_FAILURES_BEFORE_AVERAGE = 3

# Device memory the CUDA context and PyTorch's allocator take before the first tensor
# (about 0.3-0.6 GiB depending on GPU and driver): a modelling estimate.
CONTEXT_RESERVED_BYTES = 512 << 20

# Clock-event reasons that do not mean the clock was pulled down by a limiter: the GPU idling,
# and the user-defined (locked) clocks we set ourselves.
_BENIGN_REASONS = {"None", "GpuIdle", "UserDefinedClocks", "ApplicationsClocksSetting"}


def import_pynvml() -> ModuleType:
    """The `pynvml` module, or DeviceNotFoundError telling how to install it."""
    try:
        import pynvml
    except ImportError as exc:
        raise DeviceNotFoundError(
            "NVML: the Python bindings (module pynvml) are not installed", hint=INSTALL_HINT
        ) from exc
    return pynvml


class NvmlDevice(Device):
    """One NVIDIA GPU seen by NVML: locked graphics clocks, power, energy counter, memory."""

    kind = "nvml"
    persists_settings = True

    def __init__(
        self, index: int = 0, dry_run: bool = False, pynvml_module: ModuleType | None = None
    ) -> None:
        super().__init__()
        self._nvml = pynvml_module if pynvml_module is not None else import_pynvml()
        self.index = index
        self.open_name = f"nvml:{index}"
        self.dry_run = dry_run
        self.planned_locks_mhz: list[int] = []
        self._locked = False
        #: a clock setting someone else made, seen before the first change (None: none seen);
        #: wattcap locks no clock over it unless told to (`nvml_clock_hold`)
        self._clock_hold: str | None = None
        self._replace_hold = False  # ... and whether the user said to replace it
        #: the power limit found (mW) when this object first changed it, None: untouched
        self._found_limit_mw: int | None = None
        #: the CUDA device, once torch's CUDA could tell (`torch_device`)
        self._torch_device: str | None = None
        #: instant-field errors in a row (reset by the next good reading)
        self._instant_failures = 0
        #: the clock event reasons: the pre-r535 entry point only; SwPowerCap's bit (looked up
        #: once, off the names' decoding every reading would do)
        self._old_reasons_api = False
        self._sw_power_cap_bit: int | None = None
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            raise open_error(nvml, exc, "initialising NVML", index) from exc
        what = "getting a handle"
        try:
            self._handle = nvml.nvmlDeviceGetHandleByIndex(index)
            what = "reading the name"
            self.gpu_name = text(nvml.nvmlDeviceGetName(self._handle))
            self.name = slugify(self.gpu_name)
            what = "reading the supported clocks"
            self._frequencies_hz = self._read_frequencies_hz()
            what = "reading power"
            self._instant_power = self._probe_instant_power()
            try:
                self._energy_supported = self._read_energy_mj() is not None
            except nvml.NVMLError:
                self._energy_supported = False
        except BaseException as exc:
            nvml.nvmlShutdown()
            if isinstance(exc, nvml.NVMLError):  # nothing raw leaves the constructor
                raise open_error(nvml, exc, what, index) from exc
            raise

    # -- reads ---------------------------------------------------------------------------------
    def _read_frequencies_hz(self) -> list[int]:
        nvml, handle = self._nvml, self._handle
        try:
            memory_mhz = nvml.nvmlDeviceGetSupportedMemoryClocks(handle)
            if not memory_mhz:
                return []
            # Under a training load the memory runs at its highest clock; the graphics clocks
            # supported with it are the ones a lock can reach.
            clocks_mhz = nvml.nvmlDeviceGetSupportedGraphicsClocks(handle, max(memory_mhz))
        except nvml.NVMLError_NotSupported:
            return []
        return sorted({int(mhz) * 1_000_000 for mhz in clocks_mhz})

    def _read_instant_power_mw(self) -> float | None:
        """The instant field (mW), None where it did not answer this time."""
        return self._read_instant_field()[0]

    def _read_instant_field(self) -> tuple[float | None, int]:
        """The instant field (mW) and its return code; None with the code where it failed."""
        nvml = self._nvml
        field_id = getattr(nvml, "NVML_FI_DEV_POWER_INSTANT", None)
        if field_id is None:  # bindings older than the field
            return None, int(nvml.NVML_ERROR_NOT_SUPPORTED)
        # a raised error (GPU lost, ...) goes to the caller; a field the driver does not
        # offer, or could not read this time, answers its code inside the struct
        (field,) = nvml.nvmlDeviceGetFieldValues(self._handle, [field_id])
        if field.nvmlReturn != nvml.NVML_SUCCESS:
            return None, int(field.nvmlReturn)
        return field_value(nvml, field), int(field.nvmlReturn)

    def _probe_instant_power(self) -> bool:
        """Whether the instant field answers: NOT_SUPPORTED says no at once, another error
        is asked again (a transient miss must not cost the run its fast sensor)."""
        nvml = self._nvml
        for _ in range(INSTANT_FAILURES_BEFORE_AVERAGE):
            try:
                power_mw, code = self._read_instant_field()
            except nvml.NVMLError:
                return False
            if power_mw is not None:
                return True
            if code == nvml.NVML_ERROR_NOT_SUPPORTED:
                return False
        return False

    def _code_name(self, code: int) -> str:
        names = [n for n in dir(self._nvml)
                 if n.startswith("NVML_ERROR_") and getattr(self._nvml, n) == code]
        return names[0] if names else f"NVML return code {code}"

    def _read_energy_mj(self) -> int | None:
        nvml = self._nvml
        try:
            return int(nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        except nvml.NVMLError_NotSupported:
            return None

    # -- frequencies ---------------------------------------------------------------------------
    def frequencies_hz(self) -> list[int]:
        """Supported graphics clocks (at the highest memory clock), ascending, in Hz."""
        return list(self._frequencies_hz)

    def current_frequency_hz(self) -> int:
        """The graphics clock NVML reports now: the live clock (idle between steps), an
        observation only."""
        nvml = self._nvml
        with self._errors("reading the graphics clock"):
            mhz = nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_GRAPHICS)
        return int(mhz) * 1_000_000

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Every NVML call's raw error becomes a typed DeviceError, here and only here."""
        try:
            yield
        except self._nvml.NVMLError as err:
            raise map_nvml_error(self._nvml, err, what, self.gpu_name) from err

    def clock_event_reasons(self) -> list[str]:
        """Why the clock is below its maximum now (e.g. "SwPowerCap", "HwThermalSlowdown")."""
        mask = self._clock_event_mask()
        return [] if mask is None else clock_reason_names(self._nvml, mask)

    def _observed_power_limited(self) -> bool | None:
        """NVML's "SwPowerCap" reason beside each reading (on the polling thread: one NVML
        call and a bit test, the bit looked up once): the power limit holds the clock."""
        mask = self._clock_event_mask()
        if mask is None:
            return None
        if self._sw_power_cap_bit is None:
            nvml = self._nvml
            self._sw_power_cap_bit = int(getattr(nvml, "nvmlClocksEventReasonSwPowerCap", 0)
                                         or nvml.nvmlClocksThrottleReasonSwPowerCap)
        return bool(mask & self._sw_power_cap_bit)

    def _clock_event_mask(self) -> int | None:
        nvml = self._nvml
        getter = None if self._old_reasons_api else \
            getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        try:
            if getter is not None:
                try:
                    return int(getter(self._handle))
                except nvml.NVMLError_FunctionNotFound:
                    self._old_reasons_api = True  # drivers older than r535: said once
            return int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(self._handle))
        except nvml.NVMLError:
            return None

    def enforced_power_limit_w(self) -> float | None:
        """The limit the board enforces now (lower than `power_limit_w` where something out of
        band, a BMC or DCGM, caps it too), else `power_limit_w`."""
        try:
            return self._nvml.nvmlDeviceGetEnforcedPowerLimit(self._handle) / 1e3
        except (self._nvml.NVMLError, AttributeError):
            return self.power_limit_w()

    def power_limit_w(self) -> float | None:
        """The board power limit set (NVML's management limit), None where it cannot be read
        (diagnostics; what a restore needs is read strictly by `found_settings`)."""
        nvml = self._nvml
        try:
            return nvml.nvmlDeviceGetPowerManagementLimit(self._handle) / 1e3
        except nvml.NVMLError:
            return None

    def power_limit_range_w(self) -> tuple[float, float] | None:
        """NVML's power management limit constraints (W); None where the board reports none."""
        nvml = self._nvml
        try:
            low_mw, high_mw = nvml.nvmlDeviceGetPowerManagementLimitConstraints(self._handle)
        except nvml.NVMLError:
            return None
        return low_mw / 1e3, high_mw / 1e3

    def set_power_limit_w(self, limit_w: float) -> float:
        """Set the board power limit to `limit_w`, clamped to the board's constraints (NVML
        enforces it on the 1 s average); returns the limit set. `restore` puts the limit found
        back."""
        nvml = self._nvml
        with self._errors("reading the power limit constraints"):
            low_mw, high_mw = nvml.nvmlDeviceGetPowerManagementLimitConstraints(self._handle)
        limit_mw = int(min(max(limit_w * 1e3, low_mw), high_mw))
        if self.dry_run:
            return limit_mw / 1e3
        with self.clock_lock:
            self.claim_before_change()
            found_mw = self._found_limit_mw
            if found_mw is None:
                with self._errors("reading the power limit"):
                    found_mw = int(nvml.nvmlDeviceGetPowerManagementLimit(self._handle))
            try:
                nvml.nvmlDeviceSetPowerManagementLimit(self._handle, limit_mw)
            except nvml.NVMLError_NoPermission as exc:
                raise DevicePermissionError(
                    f"NVML: no permission to set the power limit of {self.gpu_name}",
                    hint=f"run as root (as `sudo nvidia-smi -i {self.index} -pl "
                    f"{limit_mw / 1e3:g}` would need)") from exc
            except nvml.NVMLError as exc:
                raise map_nvml_error(nvml, exc, "setting the power limit", self.gpu_name) \
                    from exc
            self._found_limit_mw = found_mw  # changed: restore puts it back
        return limit_mw / 1e3

    @property
    def torch_device(self) -> str:
        """The CUDA device of this NVML GPU. CUDA numbers GPUs fastest first unless
        CUDA_DEVICE_ORDER=PCI_BUS_ID, NVML by PCI bus: the PCI bus id decides, the NVML index
        is the fallback (then set CUDA_DEVICE_ORDER=PCI_BUS_ID to keep them the same).

        Found once, when torch's CUDA is there to ask: CUDA's numbering is fixed for the
        process, and every timed step asks four times (an NVML PCI query and a scan of CUDA's
        devices: 9.5 us per ask on an H200, host time a host-bound step waits for)."""
        if self._torch_device is not None:
            return self._torch_device
        index = cuda_index_for_pci_bus(self.pci_bus_id())
        device = f"cuda:{self.index if index is None else index}"
        if cuda_of(device) is not None:  # torch with CUDA answered: final
            self._torch_device = device
        return device

    def pci_bus_id(self) -> str | None:
        """The GPU's PCI bus id ("00000000:3B:00.0"), None where NVML cannot tell."""
        nvml = self._nvml
        try:
            info = nvml.nvmlDeviceGetPciInfo(self._handle)
        except (nvml.NVMLError, AttributeError):
            return None
        bus_id = getattr(info, "busId", None) or getattr(info, "busIdLegacy", None)
        return text(bus_id) if bus_id else None

    def _apply_frequency_hz(self, frequency_hz: int) -> int:
        """Lock the graphics clock at `frequency_hz` and check that the GPU follows."""
        allowed = self.frequencies_hz()
        if frequency_hz not in allowed:
            raise ValueError(
                f"{frequency_hz / 1e6:g} MHz is not a supported graphics clock of {self.name}"
            )
        mhz = frequency_hz // 1_000_000
        if self.dry_run:
            self.planned_locks_mhz.append(mhz)
            return frequency_hz
        if self._clock_hold is not None:
            if not self._replace_hold:
                raise clock_held_error(self.gpu_name, self.index, self._clock_hold)
            self.events.append(replaced_event(self.gpu_name, self._clock_hold))
            self._clock_hold = None  # said once; from here on the lock is wattcap's
        nvml = self._nvml
        try:
            nvml.nvmlDeviceSetGpuLockedClocks(self._handle, mhz, mhz)
        except nvml.NVMLError_NoPermission as exc:
            raise DevicePermissionError(
                f"NVML: no permission to lock the graphics clock of {self.gpu_name}",
                hint="run as root (locking clocks needs the privilege `sudo nvidia-smi -lgc "
                f"{mhz},{mhz}` needs), or use --dry-run to plan without changing clocks",
            ) from exc
        except nvml.NVMLError_NotSupported as exc:
            raise DeviceNotSupportedError(
                f"NVML: {self.gpu_name} does not support locking the graphics clock",
                hint="locked clocks need a Volta or newer data-centre/workstation GPU; use "
                "another GPU or the emulated device",
            ) from exc
        except nvml.NVMLError as exc:
            raise map_nvml_error(nvml, exc, "locking the graphics clock", self.gpu_name) \
                from exc
        self._locked = True
        actual_hz = self.current_frequency_hz()
        if actual_hz == frequency_hz:
            return actual_hz
        reasons = self.clock_event_reasons()
        limiters = [r for r in reasons if r not in _BENIGN_REASONS]
        if not limiters:
            # The lock was accepted and nothing limits the clock; an idle GPU may simply not
            # have ramped up yet, so the locked value is the one that applies under load.
            return frequency_hz
        raise FrequencyNotFollowedError(
            f"requested {mhz} MHz but {self.gpu_name} runs at {actual_hz // 1_000_000} MHz; "
            f"clock event reasons: {', '.join(limiters)} (power limit or thermal throttling)",
            hint="choose a lower frequency, or check cooling and the power limit "
            "(`nvidia-smi -q -d PERFORMANCE,POWER`)",
            requested_hz=frequency_hz, running_hz=actual_hz,
            cause=throttle_cause(limiters), cause_detail=", ".join(limiters),
        )

    # -- power ---------------------------------------------------------------------------------
    @property
    def sensor_period_s(self) -> float:
        """0.1 s with instant power, 1.0 s when only the 1 s averaged reading exists."""
        return INSTANT_PERIOD_S if self._instant_power else AVERAGE_PERIOD_S

    @property
    def sensor_rail(self) -> str:
        """Board power, instant or 1 s average."""
        return "board-instant" if self._instant_power else "board-average"

    def read_power_w(self) -> float:
        """Board power in watts (instant where supported, else NVML's averaged value). A
        reading the instant field misses comes from the average and the next one asks the
        field again; after INSTANT_FAILURES_BEFORE_AVERAGE misses in a row the sensor becomes
        the 1 s average for good: its period and rail change with it, and the change is
        recorded."""
        with self._errors("reading power"):
            if self._instant_power:
                power_mw, code = self._read_instant_field()
                if power_mw is not None:
                    self._instant_failures = 0
                    return power_mw / 1e3
                self._instant_failures += 1
                if self._instant_failures >= INSTANT_FAILURES_BEFORE_AVERAGE:
                    self._instant_power = False
                    self.sensor_changes.append(
                        f"t={self.now_s():.1f} s: instant power failed {self._instant_failures} "
                        f"readings in a row (last: {self._code_name(code)}); the sensor is now "
                        f"NVML's {AVERAGE_PERIOD_S:g} s average (rail board-average, a reading "
                        f"every {AVERAGE_PERIOD_S:g} s)")
            return self._nvml.nvmlDeviceGetPowerUsage(self._handle) / 1e3

    def energy_counter_j(self) -> float | None:
        """Total energy since the driver loaded, in joules; None where unsupported (pre-Volta)."""
        if not self._energy_supported:
            return None
        with self._errors("reading the energy counter"):
            energy_mj = self._read_energy_mj()
        return None if energy_mj is None else energy_mj / 1e3

    # -- memory, time, work --------------------------------------------------------------------
    def memory_bytes(self) -> int:
        """Total device memory minus the CUDA context reservation."""
        with self._errors("reading memory"):
            total = int(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).total)
        return max(0, total - CONTEXT_RESERVED_BYTES)

    def free_memory_bytes(self) -> int:
        """Device memory free now for this process (other processes on a shared GPU use the
        rest)."""
        with self._errors("reading memory"):
            free = int(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).free)
        # NVML's free is the whole GPU's. Once this process has a CUDA context here, that
        # context is already missing from it (`memory_bytes` reserves it from the total, so it
        # is not taken twice), and this process's own allocator pool is missing too, though it
        # is given back before the next batch size is built: it counts as free. Before then,
        # the context it will take is still in free: reserve it.
        own = own_cuda_memory_bytes(self.torch_device)
        return max(0, free - CONTEXT_RESERVED_BYTES if own is None else free + own)

    def now_s(self) -> float:
        """Wall clock (monotonic) seconds."""
        return time.monotonic()

    # -- settings ------------------------------------------------------------------------------
    def device_key(self) -> str:
        """The GPU's PCI bus id (NVML and CUDA indices can differ and change), else its
        index."""
        bus = self.pci_bus_id()
        return f"nvml-{normal_bus_id(bus) if bus else self.index}"

    def found_settings(self) -> dict[str, object]:
        """The power limit as found (None only on a board without one). NVML has no getter
        for locked clocks: a restore resets them to the driver's default (what `nvidia-smi
        -rgc` does). Read before the first change (a stale run's settings already put back),
        so it also looks for a clock setting someone else made: while one holds the clock,
        wattcap locks none (and a restore after a kill resets none) unless told to replace
        it. Raises where the limit cannot be read: the change is refused."""
        limit_mw = self._limit_to_keep_mw()
        self._clock_hold = find_clock_hold(self._nvml, self._handle, self._reasons_to_judge(),
                                           self.gpu_name, max(self.frequencies_hz()) // 1_000_000)
        self._replace_hold = replace_clock_lock_allowed()
        if self._clock_hold is None:
            clocks = "reset (NVML cannot read a lock)"
        elif self._replace_hold:
            clocks = f"reset (replacing a setting found: {self._clock_hold})"
        else:
            clocks = f"keep (a setting found holds the clock: {self._clock_hold})"
        return {"power_limit_mw": limit_mw, "locked_clocks": clocks}

    def _reasons_to_judge(self) -> list[str]:
        """The clock event reasons read now and, on an idle GPU, under a short load on the
        CUDA device at its PCI bus (`reasons_with_load_probe`; what it could not tell: an
        event)."""
        reasons = self.clock_event_reasons()
        if "GpuIdle" not in reasons:
            return reasons
        index = cuda_index_for_pci_bus(self.pci_bus_id())
        device = None if index is None else f"cuda:{index}"
        reasons, said = reasons_with_load_probe(reasons, device and cuda_of(device), device,
                                                self.clock_event_reasons)
        if said:
            self.events.append(said)
        return reasons

    def _limit_to_keep_mw(self) -> int | None:
        """The power limit now (mW), for the state written before the first change; None only
        where the board has no power limit (NOT_SUPPORTED: none to lose). Any other failure
        refuses the change: a state without the limit could not put it back after a kill."""
        nvml = self._nvml
        try:
            return int(nvml.nvmlDeviceGetPowerManagementLimit(self._handle))
        except nvml.NVMLError_NotSupported:
            return None
        except nvml.NVMLError as exc:
            mapped = map_nvml_error(nvml, exc, "reading the power limit", self.gpu_name)
            raise type(mapped)(
                f"NVML: cannot read the power limit of {self.gpu_name} ({exc}), so nothing is "
                "changed: the state kept before a change must hold it for a restore after a "
                "kill to put it back",
                hint=mapped.hint) from exc

    def apply_found_settings(self, settings: dict[str, object]) -> None:
        """Reset the locked clocks (unless a setting found held them: wattcap locked none);
        put the power limit found back where it moved."""
        nvml = self._nvml
        if not str(settings.get("locked_clocks", "reset")).startswith("keep"):
            with self._errors("resetting the locked clock"):
                nvml.nvmlDeviceResetGpuLockedClocks(self._handle)
        limit_mw = settings.get("power_limit_mw")
        if limit_mw is not None and self.power_limit_w() != int(str(limit_mw)) / 1e3:
            with self._errors("setting the power limit"):
                nvml.nvmlDeviceSetPowerManagementLimit(self._handle, int(str(limit_mw)))

    def _restore_settings(self) -> None:
        """Put the power limit found back and reset the locked graphics clock, each only if
        this object changed it. Idempotent."""
        nvml = self._nvml
        if self._found_limit_mw is not None:
            try:
                with self._errors("putting the power limit back"):
                    nvml.nvmlDeviceSetPowerManagementLimit(self._handle, self._found_limit_mw)
            finally:  # the clock is reset below either way; a failed limit still raises
                if self._locked:
                    self._reset_clocks()
            self._found_limit_mw = None
            return
        if not self._locked:
            return
        self._reset_clocks()

    def _reset_clocks(self) -> None:
        nvml = self._nvml
        try:
            nvml.nvmlDeviceResetGpuLockedClocks(self._handle)
        except nvml.NVMLError_NoPermission as exc:
            raise DevicePermissionError(
                f"NVML: no permission to reset the locked clock of {self.gpu_name}",
                hint="run `sudo nvidia-smi -rgc` to reset it by hand",
            ) from exc
        except nvml.NVMLError as exc:
            raise map_nvml_error(nvml, exc, "resetting the locked clock", self.gpu_name) \
                from exc
        self._locked = False

    def close(self) -> None:
        """Restore the settings and release NVML."""
        try:
            self.restore()
        finally:
            self._nvml.nvmlShutdown()

    def info(self) -> DeviceInfo:
        """Description with the power limit and sensor kind."""
        info = super().info()
        limit_w = self.power_limit_w()
        info.notes = [
            f"{self.gpu_name} (NVML index {self.index})",
            f"power limit {limit_w:g} W" if limit_w is not None else "power limit unknown",
            "instant power" if self._instant_power else "power is a 1 s average",
            "energy counter" if self._energy_supported else "no energy counter",
        ]
        return info


def list_nvml_devices(pynvml_module: ModuleType | None = None) -> list[str]:
    """Ids (``nvml:<index>``) of the GPUs NVML sees; [] without pynvml, driver or GPU."""
    try:
        nvml = pynvml_module if pynvml_module is not None else import_pynvml()
    except DeviceNotFoundError:
        return []
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return []
    try:
        return [f"nvml:{i}" for i in range(int(nvml.nvmlDeviceGetCount()))]
    except nvml.NVMLError:
        return []
    finally:
        nvml.nvmlShutdown()
