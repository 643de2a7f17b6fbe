"""NVML's errors in wattcap's words: the typed device error for a raw NVML error (what failed
and how to go on), and the names of a clocks-event (throttle) reason mask."""

from __future__ import annotations

from types import ModuleType

from wattcap.devices.errors import (
    DeviceError,
    DeviceLostError,
    DeviceNotFoundError,
    DeviceNotSupportedError,
    DevicePermissionError,
)


def _is_code(nvml: ModuleType, err: Exception, names: tuple[str, ...]) -> bool:
    """Whether the NVML error `err` carries one of the return codes `names`."""
    code = getattr(err, "value", None)
    return code is not None and any(getattr(nvml, n, object()) == code for n in names)


#: NVML return codes after which the GPU cannot be used until it (or the driver) is back
_LOST_CODES = ("NVML_ERROR_GPU_IS_LOST", "NVML_ERROR_DRIVER_NOT_LOADED",
               "NVML_ERROR_UNINITIALIZED", "NVML_ERROR_RESET_REQUIRED",
               "NVML_ERROR_LIB_RM_VERSION_MISMATCH")


def map_nvml_error(nvml: ModuleType, err: Exception, what: str, gpu: str) -> DeviceError:
    """The one translation of a raw NVML error into wattcap's typed device errors: not
    supported, no permission, GPU lost, or unknown (each with how to go on)."""
    def is_code(*names: str) -> bool:
        return _is_code(nvml, err, names)

    if is_code("NVML_ERROR_NOT_SUPPORTED"):
        return DeviceNotSupportedError(f"NVML: {gpu} does not support {what}",
                                       hint="use another GPU or the emulated device")
    if is_code("NVML_ERROR_NO_PERMISSION"):
        return DevicePermissionError(f"NVML: no permission for {what} on {gpu}",
                                     hint="run as root (sudo), or use --dry-run")
    if is_code(*_LOST_CODES):
        return DeviceLostError(f"NVML: {gpu} was lost during {what} ({err})",
                               hint="check `nvidia-smi` and `dmesg`; the GPU or the driver "
                               "may need a reset before another run")
    return DeviceError(f"NVML: {what} on {gpu} failed ({type(err).__name__}: {err})",
                       hint="check `nvidia-smi`; report it if it persists")


def open_error(nvml: ModuleType, err: Exception, what: str, index: int) -> DeviceError:
    """A raw NVML error met while opening GPU `index`, as a typed error saying what failed
    and how to fix it: driver not loaded, no permission, wrong index, GPU lost."""
    def is_code(*names: str) -> bool:
        return _is_code(nvml, err, names)

    gpu = f"the GPU at NVML index {index}"
    if is_code("NVML_ERROR_LIBRARY_NOT_FOUND"):
        return DeviceNotFoundError(
            f"NVML: cannot initialise ({err}) to open {gpu}",
            hint="install the NVIDIA driver (it provides libnvidia-ml.so), or use the "
            "emulated device")
    if is_code("NVML_ERROR_DRIVER_NOT_LOADED"):
        return DeviceNotFoundError(
            f"NVML: cannot initialise ({err}) to open {gpu}: the NVIDIA driver is not loaded",
            hint="load it (`sudo modprobe nvidia`, or reboot after installing it) until "
            "`nvidia-smi` answers, or use the emulated device")
    if is_code("NVML_ERROR_NO_PERMISSION"):
        return DevicePermissionError(
            f"NVML: no permission for {what} of {gpu} ({err})",
            hint="give this user access to /dev/nvidia* (its group, often `video`), or run as "
            "root")
    if is_code("NVML_ERROR_INVALID_ARGUMENT", "NVML_ERROR_NOT_FOUND") \
            and what == "getting a handle":
        return DeviceNotFoundError(
            f"NVML: no GPU at index {index} ({err})",
            hint="list the GPUs with `nvidia-smi -L` and pick an index from it")
    if is_code(*_LOST_CODES):
        return DeviceLostError(
            f"NVML: {gpu} was lost during {what} ({err})",
            hint="check `nvidia-smi` and `dmesg`; the GPU or the driver may need a reset")
    return DeviceError(f"NVML: {what} of {gpu} failed ({type(err).__name__}: {err})",
                       hint="check that `nvidia-smi` lists it; report it if it persists")


def clock_reason_names(nvml: ModuleType, mask: int) -> list[str]:
    """Decode a clocks-event (throttle) reason bit mask into names, using the module's constants."""
    by_bit: dict[int, str] = {}
    # The newer "ClocksEvent" names win over the deprecated "ClocksThrottle" aliases.
    for prefix in ("nvmlClocksThrottleReason", "nvmlClocksEventReason"):
        for attribute in sorted(dir(nvml)):
            if not attribute.startswith(prefix):
                continue
            short = attribute[len(prefix) :]
            value = getattr(nvml, attribute)
            if short in ("All", "None") or not isinstance(value, int) or value <= 0:
                continue
            by_bit[value] = short
    return [name for bit, name in sorted(by_bit.items()) if mask & bit]
