"""One-off, on one machine: where a Session's wall time over a plain PyTorch loop's goes. The
same resnet18 steps, interleaved in rounds: a plain loop; the loop with each step timed by
CUDA events as a Session times it (`Device.run_step`, a wait once per sensor period); the loop
beside the device's sensor thread alone (`Device.sensor_ticks`, readings kept, no Session);
the loop through a Session (`bench/gpu_timing_modes.training`). Read-only.

    python bench/results/gpu-2026-11-26-h200/session-overhead/decompose.py OUT.txt
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # before_after, beside this one
import gpu_check  # noqa: E402
import gpu_timing_modes  # noqa: E402
from before_after import report  # noqa: E402
from nvml_probe import ReadOnlyNvmlDevice  # noqa: E402


def loop_s(device: object, model: str, b: int, seconds: float, how: str) -> float:
    """Wall seconds per sample over the last two thirds of `seconds` of steps run `how`."""
    import torch

    from wattcap.devices.base import cuda_of
    from wattcap.devices.workload import workload_for
    from wattcap.measure.profiling import PowerStats
    from wattcap.models import build_model

    torch_device = device.torch_device  # type: ignore[attr-defined]
    net = build_model(model).to(torch_device)
    x = torch.randn(b, *workload_for(model).input_shape, device=torch_device)
    y = torch.zeros(b, dtype=torch.long, device=torch_device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    cost = workload_for(model).step_cost(b)

    def body() -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()

    def train_until(end_s: float) -> int:
        steps = 0
        while time.monotonic() < end_s:
            if how == "events":
                device.run_step(body, cost)  # type: ignore[attr-defined]
            else:
                body()
            steps += 1
        device.flush_timing()  # type: ignore[attr-defined]
        cuda = cuda_of(torch_device)
        if cuda is not None:
            cuda.synchronize(torch_device)
        return steps

    stats = PowerStats(since_s=device.now_s(), period_s=0.1)  # type: ignore[attr-defined]
    ticks = device.sensor_ticks(stats) if how == "sensor" \
        else contextlib.nullcontext()  # type: ignore[attr-defined]
    with ticks:
        start_s = time.monotonic()
        train_until(start_s + seconds / 3)
        window_s = time.monotonic()
        steps = train_until(start_s + seconds)
    return (time.monotonic() - window_s) / (max(steps, 1) * b)


def main(out: str, rounds: int = 4, seconds: float = 1.5, model: str = "resnet18",
         batch_sizes: tuple[int, ...] = (8, 128, 512)) -> int:
    import pynvml

    guard = gpu_check.RefusingNvml(pynvml)
    device = ReadOnlyNvmlDevice(0, pynvml_module=guard)
    results: dict[tuple[int, str], list[float]] = {}
    try:
        for b in batch_sizes:  # CUDA's and cuDNN's first work, not timed
            loop_s(device, model, b, seconds, "plain")
        for _ in range(rounds):
            for b in batch_sizes:
                plain = loop_s(device, model, b, seconds, "plain")
                for how in ("events", "sensor"):
                    results.setdefault((b, how), []).append(
                        loop_s(device, model, b, seconds, how) / plain)
                wall = gpu_timing_modes.training(device, model, b, seconds)[1]
                results.setdefault((b, "session"), []).append(wall / plain)
    finally:
        device.close()
    lines = [f"GPU: {device.gpu_name}; {model}, {rounds} rounds of {seconds:g} s each; wall "
             "time per sample over the plain loop's of the same round"]
    return report(lines, [(f"b={b} {how:<8}", values) for (b, how), values in results.items()],
                  guard.refused, out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
