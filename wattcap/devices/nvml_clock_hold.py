"""A graphics clock someone else holds off the driver's default, seen before wattcap locks one.

NVML has no getter for locked clocks (`nvidia-smi -lgc`), and its only way back from a lock is
a reset to the driver's default: a restore after wattcap's own lock would silently remove a lock
an administrator had put there. So before the first change (`NvmlDevice.found_settings`) the
board is asked what it tells of a held clock, and a clock change is refused while one is held,
unless `WATTCAP_REPLACE_CLOCK_LOCK=1` says to replace it. The signals NVML gives:

* the clock event reason "clocks limited by applications clocks or locked clocks setting"
  (UserDefinedClocks, a.k.a. ApplicationsClocksSetting) set before wattcap locked anything.
  An idle GPU may report only GpuIdle, so where the reasons read idle they are read again
  while a small kernel keeps the GPU busy (`reasons_under_load`: torch's CUDA spin kernel,
  0.4 s at a 1980 MHz clock, 2.3 s under a lock at 345 MHz); without torch's CUDA an idle GPU's
  lock stays unseen, and the run record says so;
* application clocks (`nvidia-smi -ac`) other than the default application clocks. GPUs
  without application clocks answer NOT_SUPPORTED: that signal is skipped.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from wattcap.devices.errors import DeviceError
from wattcap.devices.nvml_errors import map_nvml_error

#: set to 1 to let wattcap lock the clock although another clock setting holds it
REPLACE_CLOCK_LOCK_ENV = "WATTCAP_REPLACE_CLOCK_LOCK"
#: NVML's names for the one reason bit a user-defined clock (lock or application clocks) sets
HELD_REASONS = frozenset({"UserDefinedClocks", "ApplicationsClocksSetting"})


class ClockHeldError(DeviceError):
    """The clock is held off the driver's default by a setting wattcap could not put back."""


#: GPU clock cycles one probe kernel spins (`torch.cuda._sleep`), and how many are queued:
#: 8 x 1e8 cycles keep a GPU busy 0.4 s at a 1980 MHz boost clock (longer than the ramp wait
#: below, so the reasons are read under work), 2.3 s under a lock at a 345 MHz clock
PROBE_SPIN_CYCLES = 100_000_000
PROBE_KERNELS = 8
#: host wait before the reasons are read: the clock leaves idle within a few driver ticks
PROBE_RAMP_S = 0.25


def reasons_under_load(cuda: Any, torch_device: str,
                       read_reasons: Callable[[], list[str]]) -> list[str] | None:
    """The clock event reasons read while a spin kernel keeps `torch_device` busy: a lock
    shows its reason bit under work, where an idle GPU may report only GpuIdle. None where
    this torch has no spin kernel (nothing probed). `cuda` is torch.cuda; the kernels are waited
    for before this returns (also after an error), so no work is left running."""
    spin = getattr(cuda, "_sleep", None)
    if spin is None:
        return None
    with cuda.device(torch_device):
        stream = cuda.current_stream(torch_device)
        try:
            for _ in range(PROBE_KERNELS):
                spin(PROBE_SPIN_CYCLES)
            time.sleep(PROBE_RAMP_S)
            return read_reasons()
        finally:
            end = cuda.Event()
            end.record(stream)
            end.synchronize()


def reasons_with_load_probe(
    idle_reasons: list[str], cuda: Any, torch_device: str | None,
    read_reasons: Callable[[], list[str]],
) -> tuple[list[str], str | None]:
    """The reasons to judge a held clock by, for a GPU whose reasons read idle: those read
    under a short load (`reasons_under_load`) added to them where the probe could run on the
    CUDA device at this GPU's PCI bus (`torch_device`, None: none matched). Also what the run
    record should say where the probe told nothing: no CUDA device of this GPU, a CUDA error,
    or a GPU still reading idle under the spin kernel (a lock there stays unseen)."""
    unseen = "a clock lock on this idle GPU could go unseen"
    if cuda is None or torch_device is None:
        return idle_reasons, (f"clock-lock probe skipped: no CUDA device of torch at this "
                              f"GPU's PCI bus; {unseen}")
    try:
        under_load = reasons_under_load(cuda, torch_device, read_reasons)
    except Exception as exc:  # noqa: BLE001 - any CUDA failure: the probe only adds evidence
        return idle_reasons, (f"clock-lock probe failed on {torch_device} ({exc}); {unseen}")
    if under_load is None:
        return idle_reasons, f"clock-lock probe skipped: this torch has no spin kernel; {unseen}"
    said = None if "GpuIdle" not in under_load else (
        f"clock-lock probe: {torch_device} still read idle under the spin kernel; {unseen}")
    return sorted(set(idle_reasons) | set(under_load)), said


def replace_clock_lock_allowed() -> bool:
    """Whether the user said to replace a clock setting found (env WATTCAP_REPLACE_CLOCK_LOCK)."""
    return os.environ.get(REPLACE_CLOCK_LOCK_ENV, "").strip().lower() in ("1", "true", "yes")


def find_clock_hold(nvml: ModuleType, handle: Any, reasons: list[str], gpu: str,
                    top_mhz: int | None = None) -> str | None:
    """What shows a graphics clock held off the driver's default now, in words; None where no
    signal shows one. `reasons` are the clock event reasons read now; `top_mhz` the highest
    supported graphics clock. A signal the GPU or the bindings do not offer is skipped; another
    failed read raises a typed DeviceError (the change is refused: nothing is known).

    Where the driver's own default application clock lies below the top clock (a V100's stock
    1312 of 1530 MHz), that default sets the reason bit under load by itself: the bit then
    says nothing of a lock and only the application clocks are compared."""
    found = []
    clocks = _applications_clocks_mhz(nvml, handle, gpu)
    stock_bit = clocks is not None and top_mhz is not None and clocks[1] < top_mhz
    held = sorted(HELD_REASONS & set(reasons))
    if held and not stock_bit:
        found.append(f"the clock event reasons say a user-defined clock holds it ({held[0]})")
    if clocks is not None and clocks[0] != clocks[1]:
        found.append(f"application clocks {clocks[0]} MHz, default {clocks[1]} MHz")
    return "; ".join(found) or None


def _applications_clocks_mhz(nvml: ModuleType, handle: Any, gpu: str) -> tuple[int, int] | None:
    """(application graphics clock, default application graphics clock) in MHz; None where the
    GPU or the bindings have no application clocks."""
    current = getattr(nvml, "nvmlDeviceGetApplicationsClock", None)
    default = getattr(nvml, "nvmlDeviceGetDefaultApplicationsClock", None)
    if current is None or default is None:  # bindings older than the getters
        return None
    skip = tuple(getattr(nvml, name) for name in ("NVMLError_NotSupported",
                                                  "NVMLError_FunctionNotFound")
                 if hasattr(nvml, name))
    try:
        return (int(current(handle, nvml.NVML_CLOCK_GRAPHICS)),
                int(default(handle, nvml.NVML_CLOCK_GRAPHICS)))
    except skip:
        return None
    except nvml.NVMLError as exc:
        raise map_nvml_error(nvml, exc, "reading the application clocks", gpu) from exc


def clock_held_error(gpu: str, index: int, hold: str) -> ClockHeldError:
    """The refusal to change a clock someone else holds: what was found, and the two ways on."""
    return ClockHeldError(
        f"NVML: the graphics clock of {gpu} is held off the driver's default by a setting "
        f"wattcap did not make ({hold}), so wattcap does not change the clock: NVML cannot "
        "read a lock back, and a restore could only reset the clock to the driver's default, "
        "removing that setting without a word",
        hint="leave it and profile with the clock as it is: `wattcap profile --knob "
        "power-limit` changes only the power limit (read and put back) and leaves the clock "
        "to the board; or set "
        f"{REPLACE_CLOCK_LOCK_ENV}=1 to let wattcap lock the clock and reset it to the driver's "
        "default on restore. The setting found is then not put back: re-apply it after the "
        f"run (`sudo nvidia-smi -i {index} -lgc MIN,MAX` for a locked clock)")


def replaced_event(gpu: str, hold: str) -> str:
    """The device event of a run that replaced a clock setting it found."""
    return (f"replaced the clock setting found on {gpu} ({hold}) as "
            f"{REPLACE_CLOCK_LOCK_ENV}=1 allows; the restore resets the clock to the driver's "
            "default and does not put that setting back (re-apply it: `sudo nvidia-smi -lgc "
            "MIN,MAX`)")
