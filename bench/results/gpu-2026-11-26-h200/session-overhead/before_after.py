"""One-off, on one machine: the Session's wall time per sample over a plain PyTorch loop's,
with `NvmlDevice.torch_device` looked up at every ask (before: an NVML PCI query and a CUDA
properties scan, four times per step) and found once (after), interleaved in rounds; and
what one lookup costs. Read-only (the NVML module refuses every setter).

    python bench/results/gpu-2026-11-26-h200/session-overhead/before_after.py OUT.txt
"""

from __future__ import annotations

import statistics
import sys
import timeit
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(BENCH))
import gpu_check  # noqa: E402
import gpu_timing_modes  # noqa: E402
from nvml_probe import ReadOnlyNvmlDevice  # noqa: E402


def report(lines: list[str], rows: list[tuple[str, list[float]]], refused: list[str],
           out: str) -> int:
    """Print and write the report: each row's label with its rounds' mean ± std and each
    round's value, then the setters refused; the exit status (1 if any was)."""
    for label, values in rows:
        lines.append(f"{label} {statistics.fmean(values):.3f} ± {statistics.stdev(values):.3f} "
                     f"({', '.join(f'{v:.3f}' for v in values)})")
    lines.append(f"setters refused: {len(refused)}")
    gpu_check.print_report(lines, Path(out))
    return 1 if refused else 0


def looked_up_every_time(self: object) -> str:
    from wattcap.devices.nvml import cuda_index_for_pci_bus

    index = cuda_index_for_pci_bus(self.pci_bus_id())  # type: ignore[attr-defined]
    return f"cuda:{self.index if index is None else index}"  # type: ignore[attr-defined]


def main(out: str, rounds: int = 4, seconds: float = 1.5, model: str = "resnet18") -> int:
    import pynvml
    import torch

    from wattcap.devices.nvml import NvmlDevice

    found_once = NvmlDevice.torch_device
    guard = gpu_check.RefusingNvml(pynvml)
    device = ReadOnlyNvmlDevice(0, pynvml_module=guard)
    torch.zeros(1, device=device.torch_device)
    n = 2000
    lines = [f"GPU: {device.gpu_name}; one torch_device lookup: "
             f"{timeit.timeit(lambda: looked_up_every_time(device), number=n) / n * 1e6:.1f} us "
             f"looked up, {timeit.timeit(lambda: device.torch_device, number=n) / n * 1e6:.2f} "
             "us found once"]
    ratios: dict[tuple[str, int], list[float]] = {}
    try:
        for b in (8, 128, 512):  # CUDA's and cuDNN's first work, not timed
            gpu_timing_modes.plain_loop(device, model, b, seconds)
        for _ in range(rounds):
            for name, prop in (("before", property(looked_up_every_time)),
                               ("after", found_once)):
                NvmlDevice.torch_device = prop  # type: ignore[method-assign]
                for b in (8, 128, 512):
                    _, wall_s, _ = gpu_timing_modes.training(device, model, b, seconds)
                    plain_s = gpu_timing_modes.plain_loop(device, model, b, seconds)
                    ratios.setdefault((name, b), []).append(wall_s / plain_s)
    finally:
        NvmlDevice.torch_device = found_once  # type: ignore[method-assign]
        device.close()
    return report(lines, [(f"b={b} {name}: Session wall / plain loop wall =", values)
                          for (name, b), values in sorted(ratios.items(),
                                                          key=lambda kv: (kv[0][1], kv[0][0]))],
                  guard.refused, out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
