"""torch's CUDA as wattcap touches it, never importing torch itself (a step that ran torch
work has imported it already): the module for a device, this process's memory there, the
backends profiling and training share, out-of-memory as a DeviceError, and which CUDA device is
the GPU at a PCI bus (NVML and torch number GPUs each their own way: CUDA_VISIBLE_DEVICES, the
order torch enumerates; a GPU is matched by its bus, never by a guessed index)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from wattcap.devices.errors import DeviceOutOfMemoryError

if TYPE_CHECKING:
    from wattcap.devices.workload import StepCost

__all__ = ["CUDNN_BENCHMARK", "configure_cuda_backends", "cuda_index_for_pci_bus", "cuda_of",
           "normal_bus_id", "out_of_memory_as_device_error", "own_cuda_memory_bytes"]


def cuda_of(torch_device: str) -> Any:
    """`torch.cuda` when `torch_device` is a CUDA device and CUDA is there, else None. torch
    is not imported for this: a step that ran torch work has imported it already."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not torch_device.startswith("cuda") or not torch.cuda.is_available():
        return None
    return torch.cuda


def own_cuda_memory_bytes(torch_device: str) -> int | None:
    """What this process's CUDA allocator holds on `torch_device` (the built steps and its
    cache, both given back before another batch size is built); None while this process has no
    CUDA context there (torch not imported, or CUDA not initialised). torch is not imported."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not torch_device.startswith("cuda") or not torch.cuda.is_initialized():
        return None
    return int(torch.cuda.memory_reserved(torch_device))


#: cuDNN autotuning: on, in profiling and in training alike (a profile timed with one setting
#: and a run with another would disagree); each batch size's warm-up absorbs the tuning
CUDNN_BENCHMARK = True


def configure_cuda_backends(torch_device: str) -> None:
    """Set torch's CUDA backends the one way wattcap profiles and trains (no-op off CUDA)."""
    cuda = cuda_of(torch_device)
    if cuda is not None:
        import torch

        torch.backends.cudnn.benchmark = CUDNN_BENCHMARK


@contextmanager
def out_of_memory_as_device_error(cost: StepCost | object) -> Iterator[None]:
    """Turn torch's CUDA out-of-memory error into DeviceOutOfMemoryError naming the batch size
    (a user's loop and our own see the same error)."""
    try:
        yield
    except RuntimeError as exc:  # torch.cuda.OutOfMemoryError is a RuntimeError
        if "out of memory" in str(exc).lower():
            batch_size = getattr(cost, "batch_size", None)
            what = f"batch size {batch_size}" if batch_size is not None else "the step"
            raise DeviceOutOfMemoryError(
                f"{what} does not fit in GPU memory ({exc})", hint="use a smaller batch size"
            ) from exc
        raise


def cuda_index_for_pci_bus(bus_id: str | None) -> int | None:
    """The CUDA index of the GPU at PCI `bus_id`, None when torch has no CUDA or no match."""
    import sys

    torch: Any = sys.modules.get("torch")
    if bus_id is None or torch is None or not torch.cuda.is_available():
        return None
    wanted = normal_bus_id(bus_id)
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        found = "{:04x}:{:02x}:{:02x}.0".format(
            int(getattr(props, "pci_domain_id", 0)), int(getattr(props, "pci_bus_id", -1)),
            int(getattr(props, "pci_device_id", -1)))
        if found == wanted:
            return index
    return None


def normal_bus_id(bus_id: str) -> str:
    """`bus_id` with its domain in 4 hex digits: NVML pads it to 8 ("00000000:3B:00.0"),
    torch's device properties to 4."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    return f"{int(domain, 16):04x}:{rest}" if rest else bus_id.lower()
