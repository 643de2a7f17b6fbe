"""Which CUDA device is the GPU at a PCI bus: NVML and torch number GPUs each their own way
(CUDA_VISIBLE_DEVICES, the order torch enumerates), so a GPU is matched by its bus, never by a
guessed index."""

from __future__ import annotations

from typing import Any

__all__ = ["cuda_index_for_pci_bus", "normal_bus_id"]


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
