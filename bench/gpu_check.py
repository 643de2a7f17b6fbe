"""A read-only check of wattcap on a real NVIDIA GPU: NVML read, a few batch sizes profiled with
the clock left alone, a few training steps timed by CUDA events on the GPU, a watched run
of a few seconds (its sensor thread's readings, mean and peak power, and the energy counter
against the readings' mean x the run's time: they must agree, as a mean that counted only some
readings would not), a capped run (a cap well below what the board draws: the watch must see
it on real readings and stop the run, as it cannot lower a clock it may not touch), a run on a
profile measured just before, with the drift monitor on (informational: how far its windows
read from the profile on a device that has not drifted), and wattcap's own loop training
digits-cnn to 90 % on the bundled digits on the GPU (pinned batches, non-blocking copies,
evaluation, a checkpoint) beside the same run on the CPU.

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

from wattcap.runtime.session_config import CapSettings, DeviceHandling, PlanSettings

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


def training_step(session: Any, model: str, b: int) -> Any:
    """One training step of `model` at batch size `b` on random data, run through `session`
    (a function; the model, batch and optimiser made once, on the session's device)."""
    import torch

    from wattcap.models import build_model

    net = session.prepare(build_model(model))
    shape = tuple(session.workload.input_shape) if session.workload else (3, 32, 32)
    x, y = session.to_device(torch.randn(b, *shape), torch.zeros(b, dtype=torch.long))
    opt = torch.optim.Adam(net.parameters(), lr=session.learning_rate)

    def step() -> None:
        with session.step():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()

    return step


def _train(session: Any, model: str, b: int, steps: int | None = None,
           seconds: float | None = None) -> None:
    """Train `model` at batch size `b` on random data through `session`, for `steps` steps
    or `seconds` of wall time."""
    step = training_step(session, model, b)
    start_s = time.monotonic()
    with session:
        while (steps is not None and session.steps < steps) or \
                (seconds is not None and time.monotonic() - start_s < seconds):
            step()


def watched_run(lines: list[str], device: Any, model: str, b: int,
                seconds: float) -> tuple[bool, float | None]:
    """Train for `seconds` under the Session's watch; report what its sensor thread saw and
    whether the readings' mean power x the run's time agrees with the energy counter. (Passed,
    the mean power.)"""
    from wattcap.runtime.session import Session

    session = Session(device, model=model, planning=PlanSettings(batch_size=b),
                      device_handling=DeviceHandling(restore=False, handle_signals=False))
    _train(session, model, b, seconds=seconds)
    record = session.record
    assert record is not None
    seen = record.observed_frequency_hz
    readings = 0 if seen is None else seen.readings
    due = record.wall_time_s / device.sensor_period_s
    clock = "no clock reported" if seen is None else f"clock {seen.describe()}"
    lines.append(f"watched run: {record.steps} steps of b={b} over {record.wall_time_s:.2f} s; "
                 f"{readings} sensor readings ({due:.0f} due at {device.sensor_period_s:g} s); "
                 f"{clock}")
    avg_w, peak_w = record.avg_power_w, record.peak_power_w
    if avg_w is None or peak_w is None:
        lines.append("watched run: no power reading")
        return False, None
    by_mean_j = avg_w * record.wall_time_s
    ratio = record.energy_j / by_mean_j if by_mean_j > 0 else float("inf")
    lines.append(f"watched run: mean {avg_w:.1f} W, peak {peak_w:.1f} W; energy "
                 f"{record.energy_j:.1f} J by the {record.energy_source}, {by_mean_j:.1f} J as "
                 f"the readings' mean x the time (ratio {ratio:.2f}); events: "
                 f"{'; '.join(record.events) or 'none'}")
    # the sensor kept (most of) its pace, and the mean stands for the whole run's power
    return readings >= 0.5 * due and 0 < avg_w <= peak_w and 0.67 <= ratio <= 1.5, avg_w


def capped_run(lines: list[str], device: Any, model: str, b: int, cap_w: float) -> bool:
    """Train under `cap_w`, below what the board draws: the watchdog must confirm the
    violation on real readings (two in a row) and, with no clock it may lower (this device
    offers only the one in effect), stop the run at the next step boundary."""
    from wattcap.devices.errors import WatchError
    from wattcap.runtime.session import Session

    session = Session(device, model=model, planning=PlanSettings(batch_size=b), cap=cap_w,
                      device_handling=DeviceHandling(restore=False, handle_signals=False))
    start_s = time.monotonic()
    try:
        _train(session, model, b, seconds=10.0)
    except WatchError as err:
        stopped = f"stopped: {err.message}"
    else:
        stopped = "NOT stopped"
    took_s = time.monotonic() - start_s
    record = session.record
    violations = [] if record is None else record.cap_violations
    first = (f"first violation {violations[0].readings} readings up to "
             f"{violations[0].max_power_w:.1f} W" if violations else "no violation recorded")
    lines.append(f"capped run (cap {cap_w:.1f} W): {session.steps} steps, {took_s:.2f} s; "
                 f"{first}; {stopped}")
    return stopped.startswith("stopped") and bool(violations) and took_s < 3.0


def fresh_profile_run(lines: list[str], device: Any, model: str, b: int,
                      seconds: float) -> None:
    """Profile b at the clock in effect, then train on that profile with the drift monitor
    (10 %) on, and report its drift events: on a GPU a step's time is accounted in batches,
    at each wait for the GPU, and a window must divide the time it holds by the steps it is
    of, or a device that runs exactly as profiled reads as drifted."""
    from wattcap.measure.profiling import Profiler
    from wattcap.runtime.session import Session

    profile = Profiler(device, model, batch_sizes=(b,)).run(exhaustive=True)
    point = profile.points[0]
    session = Session(device, model=model, planning=PlanSettings(batch_size=b, profile=profile),
                      cap=CapSettings(drift_tolerance=0.1),
                      device_handling=DeviceHandling(restore=False, handle_signals=False))
    _train(session, model, b, seconds=seconds)
    record = session.record
    assert record is not None
    changes = "; ".join(f"time {e.time_change:+.1%}, power {e.power_change:+.1%} over "
                        f"{e.steps} steps" for e in record.drift_events[:4])
    lines.append(f"fresh-profile run (informational): b={b} profiled at "
                 f"{point.seconds_per_sample * 1e3:.3f} ms/sample, {point.avg_power_w:.1f} W; "
                 f"{record.steps} steps over {record.wall_time_s:.2f} s with the drift monitor "
                 f"at 10 %: {len(record.drift_events)} drift event(s)"
                 + (f" ({changes})" if changes else "") + f", {len(record.replans)} re-plan(s)")
    # where the windows' own noise, not the tolerance, set what counts as drift
    lines += [f"  {event}" for event in record.events if event.startswith("drift monitor:")]


def training_to_a_target(lines: list[str], device: Any) -> bool:
    """wattcap's loop on the GPU, data loader and checkpoints included, to a target that the
    same seed reaches on the CPU: both must reach it, at about the same samples (the same
    data order and initial weights; cuDNN's kernels round otherwise than the CPU's)."""
    import tempfile

    from wattcap.core.run import TrainConfig
    from wattcap.data import get_dataset
    from wattcap.train.loop import train_to_accuracy

    train, test = get_dataset("digits").split(0.2, seed=0)
    config = TrainConfig(model="digits-cnn", batch_size=32, target_accuracy=0.9,
                         sample_budget=20_000, eval_every_samples=512)
    with tempfile.TemporaryDirectory() as checkpoints:
        on_gpu = train_to_accuracy(config, train, test, device=device,
                                   checkpoint_dir=checkpoints)
        saved = sorted(p.name for p in Path(checkpoints).iterdir())
    on_cpu = train_to_accuracy(config, train, test)
    lines.append(f"training to 90 % (digits-cnn, b=32, wattcap's loop): on "
                 f"{on_gpu.torch_device} reached={on_gpu.reached} at "
                 f"{on_gpu.samples_to_target or 0:.0f} samples in {on_gpu.steps} steps, "
                 f"{on_gpu.device_time_s:.2f} s of step time, {on_gpu.energy_j:.1f} J by the "
                 f"{on_gpu.energy_source}, checkpoint files {saved}; on the CPU "
                 f"reached={on_cpu.reached} at {on_cpu.samples_to_target or 0:.0f} samples")
    if not (on_gpu.reached and on_cpu.reached and on_gpu.samples_to_target
            and on_cpu.samples_to_target):
        return False
    ratio = on_gpu.samples_to_target / on_cpu.samples_to_target
    return on_gpu.torch_device == device.torch_device and bool(saved) and 0.67 <= ratio <= 1.5


def check(lines: list[str], model: str, batch_sizes: list[int], steps: int,
          pynvml_module: ModuleType | None = None, cpu_step: bool = False,
          watch_s: float = 3.0) -> int:
    """Run the checks, appending the report's lines; the exit status. (`pynvml_module` and
    `cpu_step`: the tests' fakes.)"""
    from wattcap.measure.profiling import Profiler
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
        # what wattcap reads before its first change to tell an administrator's clock setting
        # (read only: the application clocks and the reasons)
        from wattcap.devices.nvml_clock_hold import find_clock_hold

        hold = find_clock_hold(device._nvml, device._handle, device.clock_event_reasons(),
                               device.gpu_name, max(device.frequencies_hz()) // 1_000_000)
        lines.append(f"clock held by a setting wattcap did not make: {hold or 'none seen'}")
        profiler = Profiler(device, model, batch_sizes=tuple(batch_sizes))
        for b in batch_sizes:
            point = profiler.measure(b, device.pinned_hz)
            seen = point.observed_frequency_hz
            lines.append(f"profile b={b} (clock unlocked): peak {point.peak_power_w:.1f} W, avg "
                         f"{point.avg_power_w:.1f} W, {point.seconds_per_sample * 1e3:.3f} "
                         f"ms/sample over {point.steps} steps; clock "
                         + ("not reported" if seen is None else seen.describe()))
        b = batch_sizes[0]
        session = Session(device, model=model, planning=PlanSettings(batch_size=b),
                          device_handling=DeviceHandling(restore=False, handle_signals=False))
        _train(session, model, b, steps=steps)
        lines.append(f"training: {session.steps} steps of b={b} on {session.torch_device}, "
                     f"{session.device_time_s * 1e3:.1f} ms of step time (CUDA events)")
        ok = session.steps == steps and session.device_time_s > 0
        watched, drew_w = watched_run(lines, device, model, batch_sizes[-1], watch_s)
        # half of what the board drew: a cap it breaks at once
        capped = drew_w is not None and capped_run(lines, device, model, batch_sizes[-1],
                                                   0.5 * drew_w)
        ok = ok and watched and capped
        fresh_profile_run(lines, device, model, batch_sizes[-1], watch_s)
        ok = training_to_a_target(lines, device) and ok
    finally:
        device.close()
    lines.append(f"setters refused: {len(guard.refused)} {sorted(set(guard.refused))}")
    ok = ok and not guard.refused
    lines.append("result: " + ("PASS (no GPU setting was changed)" if ok else "FAIL"))
    return 0 if ok else 1


def gpu_usable(lines: list[str], nothing_to_do: str) -> bool:
    """Whether NVML answers and torch has CUDA; where not, `lines` say why and that there is
    `nothing_to_do`."""
    try:
        import pynvml
        import torch

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except Exception as err:  # noqa: BLE001 - any missing piece means: no GPU here
        lines.append(f"no NVIDIA GPU usable here ({type(err).__name__}: {err}): {nothing_to_do}")
        return False
    if not torch.cuda.is_available():
        lines.append(f"NVML answers but torch has no CUDA (a CPU build?): {nothing_to_do}")
        return False
    return True


def print_report(lines: list[str], out: Path | None) -> None:
    """Print the report, and write it to `out` too when given."""
    report = "\n".join(lines)
    print(report)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch-sizes", default="8,32")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--watch-s", type=float, default=3.0,
                        help="seconds of the watched run")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args(argv)
    lines = [f"wattcap gpu_check, {time.strftime('%Y-%m-%d %H:%M:%S')}"]
    code = 0
    if gpu_usable(lines, "nothing to check; wattcap's emulated devices work without one"):
        code = check(lines, args.model, [int(b) for b in args.batch_sizes.split(",")],
                     args.steps, watch_s=args.watch_s)
    print_report(lines, args.out)
    return code


if __name__ == "__main__":
    sys.exit(main())
