"""How a profile point's timing compares with training on a real NVIDIA GPU, read-only: for a
few batch sizes, rounds of (a) a point whose steps are each waited for and read back (how
wattcap profiled before 2026-11-26), (b) a point whose steps run queued as training runs them
(wattcap's profiler now) and (c) training through a Session (its steady part), interleaved so that
the board's warming and the host's noise fall on each alike. Prints each one's time per sample
(its CUDA-event time; wall time for the training) and its mean power, mean and spread over
the rounds, and (d) the same steps in a plain PyTorch loop, whose wall time the Session's is
compared with (the Session's own per-step cost where steps are short). Profiling exists to
predict (c): the closer a point's numbers to it, the better.

The clock is left to the board and no setting is changed (the NVML module refuses every
setter, as in bench/gpu_check.py). Without CUDA or NVML it says so and exits 0.

    python bench/gpu_timing_modes.py --batch-sizes 8,32,128,512 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from wattcap.runtime.session_config import DeviceHandling, PlanSettings

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # gpu_check and nvml_probe, the scripts beside this one
import gpu_check  # noqa: E402
from nvml_probe import ReadOnlyNvmlDevice  # noqa: E402


def waited_point(device: Any, model: str, b: int, readings: int) -> tuple[float, float]:
    """(seconds per sample, mean W) of a window whose steps are each waited for and read
    back: the step of `build_training_step` plus a host read, timed by `Device.execute`."""
    import torch

    from wattcap.devices.workload import workload_for
    from wattcap.measure.profiling import PowerStats, build_training_step

    run = build_training_step(model, b, device.torch_device)

    def step() -> None:
        run()
        torch.cuda.synchronize(device.torch_device)  # as reading the loss back waits

    cost = workload_for(model).step_cost(b)
    for _ in range(6):
        device.execute(step, cost)
    stats = PowerStats(since_s=device.now_s(), period_s=device.sensor_period_s)
    steps, busy_s = 0, 0.0
    with device.sensor_ticks(stats):
        while len(stats.readings) < readings or busy_s < readings * device.sensor_period_s:
            busy_s += device.execute(step, cost)
            steps += 1
    return busy_s / (steps * b), stats.average_w


def queued_point(device: Any, model: str, b: int, readings: int,
                 points: list[Any] | None = None) -> tuple[float, float]:
    """(seconds per sample, mean W) of wattcap's profiler at the clock in effect; the point
    itself (its own standard error of time, the clock its readings reported) is appended to
    `points`."""
    from wattcap.measure.profiling import Profiler

    profiler = Profiler(device, model, batch_sizes=(b,), min_readings=readings)
    point = profiler.measure(b, device.pinned_hz)
    profiler.release_steps()
    if points is not None:
        points.append(point)
    return point.seconds_per_sample, point.avg_power_w


def own_std_line(b: int, points: list[Any], spus: list[float]) -> str:
    """How the points' own standard error of time (what the plan's near-ties note counts)
    compares with the spread of the same point between rounds (what it should stand for)."""
    known = [p.seconds_per_sample_std for p in points if p.seconds_per_sample_std is not None]
    mean_spu = statistics.fmean(spus)
    between = statistics.stdev(spus) / mean_spu if len(spus) > 1 else float("nan")
    if not known:
        return f"b={b} queued point's own time std: none recorded (fewer than 3 parts)"
    own = statistics.fmean(known) / mean_spu
    return (f"b={b} queued point's own time std (standard error, from its window's parts): "
            f"{own:.1%} of its time, mean of {len(known)}; between rounds: {between:.1%}")


def training(device: Any, model: str, b: int, seconds: float) -> tuple[float, float, float]:
    """(event seconds per sample, wall seconds per sample, mean W) of training through a
    Session, measured over its last two thirds (the first third warms up: allocator, cuDNN,
    the board's clock), its own sensor window beside the Session's."""
    from wattcap.measure.profiling import PowerStats
    from wattcap.runtime.session import Session

    session = Session(device, model=model, planning=PlanSettings(batch_size=b),
                      device_handling=DeviceHandling(restore=False, handle_signals=False))
    step = gpu_check.training_step(session, model, b)

    def train_until(end_s: float) -> None:
        while time.monotonic() < end_s:
            step()

    start_s = time.monotonic()
    with session:
        train_until(start_s + seconds / 3)
        session.report(0.01)  # a wait: the warm-up's steps are accounted before the window
        stats = PowerStats(since_s=device.now_s(), period_s=device.sensor_period_s)
        steps, busy_s, window_start_s = session.steps, session.device_time_s, time.monotonic()
        with device.sensor_ticks(stats):
            train_until(start_s + seconds)
            session.report(0.01)
        samples = (session.steps - steps) * b
        busy_s = session.device_time_s - busy_s
        wall_s = time.monotonic() - window_start_s
    return busy_s / samples, wall_s / samples, stats.average_w


def plain_loop(device: Any, model: str, b: int, seconds: float) -> float:
    """Wall seconds per sample of the same steps in a plain PyTorch loop (no Session, no
    timing, no sensor), measured as `training` measures its own: over the last two thirds,
    the GPU waited for at both ends. The Session's per-step cost is its wall time over this."""
    import torch

    from wattcap.devices.cuda import configure_cuda_backends, cuda_of
    from wattcap.devices.workload import workload_for
    from wattcap.models import build_model

    configure_cuda_backends(device.torch_device)  # as the Session's device does
    net = build_model(model).to(device.torch_device)
    x = torch.randn(b, *workload_for(model).input_shape, device=device.torch_device)
    y = torch.zeros(b, dtype=torch.long, device=device.torch_device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    cuda = cuda_of(device.torch_device)  # None: the tests' CPU step

    def train_until(end_s: float) -> int:
        steps = 0
        while time.monotonic() < end_s:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
            steps += 1
        if cuda is not None:
            cuda.synchronize(device.torch_device)
        return steps

    start_s = time.monotonic()
    train_until(start_s + seconds / 3)
    window_start_s = time.monotonic()
    steps = train_until(start_s + seconds)
    return (time.monotonic() - window_start_s) / (max(steps, 1) * b)


def drift_windows(device: Any, model: str, b: int, seconds: float
                  ) -> tuple[list[tuple[float, float]], int]:
    """Every drift-monitor window's (time change, power change) over `seconds` of steady
    training steps against a point measured just before, and how many of them the monitor
    (tolerance 10 %) called drift: what its rule must tell from noise on a device that has not
    drifted (nothing is re-planned, the point stays the reference)."""
    from wattcap.algorithms.drift import DriftTest, DriftVerdict, WindowChange
    from wattcap.devices.workload import workload_for
    from wattcap.measure.profiling import Profiler, build_training_step
    from wattcap.runtime.drift_monitor import DriftMonitor

    windows: list[WindowChange] = []

    class RecordingDriftTest(DriftTest):
        def add(self, window: WindowChange, from_profile: bool = True,
                teaches_board: bool = True) -> DriftVerdict | None:
            windows.append(window)
            return super().add(window, from_profile, teaches_board)

    profiler = Profiler(device, model, batch_sizes=(b,))
    profile = profiler.run(exhaustive=True)
    profiler.release_steps()
    monitor = DriftMonitor(device, profile, b, tolerance=0.1, profiler=profiler)
    monitor._test = RecordingDriftTest(0.1, 0.1)  # noqa: SLF001 - the bench reads every window
    step = build_training_step(model, b, device.torch_device)
    cost = workload_for(model).step_cost(b)
    for _ in range(6):
        device.execute(step, cost)
    end_s = time.monotonic() + seconds
    with device.sensor_ticks(monitor):
        while time.monotonic() < end_s:
            start_s = device.now_s()
            busy_s = device.run_step(step, cost)
            monitor.on_step(start_s, device.now_s(), busy_s, timed_steps=device.accounted_steps)
        device.flush_timing()
    return [(w.time_change, w.power_change) for w in windows], len(monitor.events)


def _spread(values: list[float], scale: float = 1.0, digits: int = 4) -> str:
    mean = statistics.fmean(values) * scale
    std = statistics.stdev(values) * scale if len(values) > 1 else 0.0
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def compare(lines: list[str], model: str, batch_sizes: list[int], rounds: int,
            readings: int, train_s: float, window_s: float = 0.0,
            pynvml_module: ModuleType | None = None, cpu_step: bool = False) -> int:
    """Measure and append the report's lines; the exit status. (`pynvml_module` and
    `cpu_step`: the tests' fakes.)"""
    if pynvml_module is None:
        import pynvml as pynvml_module
    guard = gpu_check.RefusingNvml(pynvml_module)
    device = ReadOnlyNvmlDevice(0, pynvml_module=guard)
    device.cpu_step = cpu_step
    try:
        lines.append(f"GPU: {device.gpu_name} ({device.torch_device}), clock left to the board "
                     f"(up to {device.pinned_hz / 1e6:g} MHz); {model}, {rounds} rounds, points "
                     f"of {readings} readings, {train_s:g} s of training")
        lines.append(f"{'b':>4}  {'how':<38} {'ms/sample (mean ± std)':>24} {'mean W':>14}")
        for b in batch_sizes:
            rows: dict[str, tuple[list[float], list[float]]] = {}
            points: list[Any] = []
            overhead: list[float] = []
            for _ in range(rounds):
                for name, (spu, watts) in (
                    ("point, each step waited for (before)", waited_point(device, model, b,
                                                                          readings)),
                    ("point, steps queued (now)", queued_point(device, model, b, readings,
                                                               points)),
                ):
                    rows.setdefault(name, ([], []))[0].append(spu)
                    rows[name][1].append(watts)
                event_s, wall_s, watts = training(device, model, b, train_s)
                for name, spu in (("training, CUDA-event time", event_s),
                                  ("training, wall time", wall_s)):
                    rows.setdefault(name, ([], []))[0].append(spu)
                    rows[name][1].append(watts)
                plain_s = plain_loop(device, model, b, train_s)
                rows.setdefault("plain PyTorch loop, wall time", ([], []))[0].append(plain_s)
                overhead.append(wall_s / plain_s)
            for name, (spus, watts_seen) in rows.items():
                lines.append(f"{b:>4}  {name:<38} {_spread(spus, 1e3):>24} "
                             + (f"{_spread(watts_seen, digits=1):>14}" if watts_seen
                                else f"{'(not read)':>14}"))
            lines.append(f"b={b} Session's wall time over a plain loop's, round by round: "
                         f"{_spread(overhead, digits=3)}")
            lines.append(own_std_line(b, points, rows["point, steps queued (now)"][0]))
            lines.append(f"b={b} queued points' clock, round by round: " + "; ".join(
                "not reported" if p.observed_frequency_hz is None
                else p.observed_frequency_hz.describe() for p in points))
        for b in (batch_sizes if window_s > 0 else []):
            changes, drifts = drift_windows(device, model, b, window_s)
            for what, values in (("time", [t for t, _ in changes]),
                                 ("power", [w for _, w in changes])):
                if not values:
                    continue
                beyond = sum(1 for v in values if abs(v) > 0.1)
                lines.append(f"b={b} drift windows vs a point measured just before, {what}: "
                             f"{len(values)} windows, {_spread(values, 100, 1)} %, range "
                             f"{min(values):+.1%} to {max(values):+.1%}, {beyond} beyond 10 %")
            lines.append(f"b={b} windows' time changes in order (%): "
                         + " ".join(f"{t * 100:+.0f}" for t, _ in changes))
            single = sum(1 for t, w in changes if abs(t) > 0.1 or abs(w) > 0.1)
            lines.append(f"b={b} drift called: {drifts} of {len(changes)} windows by the "
                         f"monitor's rule; {single} by a window-by-window rule at 10 %")
    finally:
        device.close()
    lines.append(f"setters refused: {len(guard.refused)} {sorted(set(guard.refused))}")
    return 1 if guard.refused else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch-sizes", default="8,32,128,512")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--readings", type=int, default=5, help="sensor readings per point")
    parser.add_argument("--train-s", type=float, default=1.5,
                        help="seconds of each training run (its first third warms up)")
    parser.add_argument("--windows-s", type=float, default=0.0,
                        help="also train this long per batch size with the drift monitor "
                        "reporting every window (nothing re-planned)")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args(argv)
    lines = [f"wattcap gpu_timing_modes, {time.strftime('%Y-%m-%d %H:%M:%S')}"]
    code = 0
    if gpu_check.gpu_usable(lines, "nothing to compare"):
        code = compare(lines, args.model, [int(b) for b in args.batch_sizes.split(",")],
                       args.rounds, args.readings, args.train_s, args.windows_s)
    gpu_check.print_report(lines, args.out)
    return code


if __name__ == "__main__":
    sys.exit(main())
