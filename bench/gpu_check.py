"""A read-only check of wattcap on a real NVIDIA GPU: NVML read, a few batch sizes profiled with
the clock left alone, a few training steps timed by CUDA events on the GPU.

It never changes a setting: the NVML module it hands wattcap refuses every setter
(nvmlDeviceSet*, nvmlDeviceReset*) and the report counts the refusals (there must be none).
Without CUDA or NVML it says so and exits 0. Run `pytest -m gpu` beside it on the same machine.

    python bench/gpu_check.py                 # prints the report
    python bench/gpu_check.py --out bench/results/gpu-check.txt
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent


class RefusingNvml(ModuleType):
    """The real pynvml, except that every setter raises (and is counted) instead of running."""

    def __init__(self, real: ModuleType) -> None:
        super().__init__("pynvml")
        self._real = real
        self.refused: list[str] = []

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._real, name)
        if callable(value) and name.startswith(("nvmlDeviceSet", "nvmlDeviceReset")):
            def refuse(*args: object, **kwargs: object) -> None:
                self.refused.append(name)
                raise self._real.NVMLError(self._real.NVML_ERROR_NO_PERMISSION)
            return refuse
        return value


def _probe_module() -> ModuleType:
    """bench/nvml_probe.py (its read-only NVML device), imported beside this script."""
    spec = importlib.util.spec_from_file_location("nvml_probe", HERE / "nvml_probe.py")
    assert spec is not None and spec.loader is not None
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    return probe


def check(lines: list[str], model: str, batch_sizes: list[int], steps: int,
          pynvml_module: ModuleType | None = None, cpu_step: bool = False) -> int:
    """Run the checks, appending the report's lines; the exit status. (`pynvml_module` and
    `cpu_step`: the tests' fakes.)"""
    import torch

    from wattcap.measure.profiling import Profiler
    from wattcap.models import build_model
    from wattcap.runtime.session import Session

    if pynvml_module is None:
        import pynvml as pynvml_module
    guard = RefusingNvml(pynvml_module)
    device = _probe_module().ReadOnlyNvmlDevice(0, pynvml_module=guard)
    device.cpu_step = cpu_step
    try:
        lines.append(f"GPU: {device.gpu_name} ({device.torch_device}), "
                     f"{len(device.supported_hz)} supported clocks, live clock "
                     f"{device.current_frequency_hz() / 1e6:g} MHz, power "
                     f"{device.read_power_w():.1f} W on {device.sensor_rail}, energy counter "
                     f"{device.energy_counter_j()} J")
        limit_w, limit_range_w = device.power_limit_w(), device.power_limit_range_w()
        lines.append(f"power limit: {limit_w} W, the board's range {limit_range_w} W (the "
                     f"power-limit knob's span); PCI {device.pci_bus_id()} -> "
                     f"{device.torch_device}; clock event reasons now: "
                     f"{', '.join(device.clock_event_reasons()) or 'none'}")
        profiler = Profiler(device, model, batch_sizes=tuple(batch_sizes))
        for b in batch_sizes:
            point = profiler.measure(b, device.pinned_hz)
            lines.append(f"profile b={b} (clock unlocked): peak {point.peak_power_w:.1f} W, avg "
                         f"{point.avg_power_w:.1f} W, {point.seconds_per_sample * 1e3:.3f} "
                         f"ms/sample over {point.steps} steps")
        b = batch_sizes[0]
        session = Session(device, model=model, batch_size=b, restore=False,
                          handle_signals=False)
        net = session.prepare(build_model(model))
        shape = tuple(session.workload.input_shape) if session.workload else (3, 32, 32)
        x, y = session.to_device(torch.randn(b, *shape), torch.zeros(b, dtype=torch.long))
        opt = torch.optim.Adam(net.parameters(), lr=session.learning_rate)
        with session:
            for _ in range(steps):
                with session.step():
                    opt.zero_grad()
                    torch.nn.functional.cross_entropy(net(x), y).backward()
                    opt.step()
        lines.append(f"training: {session.steps} steps of b={b} on {session.torch_device}, "
                     f"{session.device_time_s * 1e3:.1f} ms of step time (CUDA events)")
        ok = session.steps == steps and session.device_time_s > 0
    finally:
        device.close()
    lines.append(f"setters refused: {len(guard.refused)} {sorted(set(guard.refused))}")
    ok = ok and not guard.refused
    lines.append("result: " + ("PASS (no GPU setting was changed)" if ok else "FAIL"))
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch-sizes", default="8,32")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args(argv)
    lines = [f"wattcap gpu_check, {time.strftime('%Y-%m-%d %H:%M:%S')}"]
    try:
        import pynvml
        import torch

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        cuda = torch.cuda.is_available()
    except Exception as err:  # noqa: BLE001 - any missing piece means: no GPU here
        lines.append(f"no NVIDIA GPU usable here ({type(err).__name__}: {err}): nothing to "
                     "check; wattcap's emulated devices work without one")
        code = 0
    else:
        if not cuda:
            lines.append("NVML answers but torch has no CUDA (a CPU build?): nothing to check")
            code = 0
        else:
            code = check(lines, args.model, [int(b) for b in args.batch_sizes.split(",")],
                         args.steps)
    report = "\n".join(lines)
    print(report)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
