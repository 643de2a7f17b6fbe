"""What a real GPU does that kinder fakes hid (issue 26), each a regression test on the fakes
at the hardware boundary: NVML's live clock idles between steps; a sensor fails mid-run with
raw NVML errors or hangs; CUDA work is timed on the Session's own GPU; a stalled poll thread
must not replay its missed readings as a burst."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pynvml
import pytest
import torch

from tests.fakes.fake_cuda import FakeCuda
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml
from tests.runtime.test_session import TorchDeviceSpy, small_run
from wattcap.core.observed_clock import ObservedFrequency
from wattcap.core.run import TrainConfig
from wattcap.data import get_dataset
from wattcap.devices.base import PowerReading
from wattcap.devices.errors import WatchError
from wattcap.devices.nvml import INSTANT_FAILURES_BEFORE_AVERAGE, NvmlDevice
from wattcap.train.loop import train_to_accuracy

MHZ = 1_000_000
PLANNED_MHZ = 1500

# CUDA is faked (torch is a CPU build here): the data loader's pinned memory has no GPU
pytestmark = pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true")


@pytest.fixture(autouse=True)
def _heap_before_the_test_frozen() -> Iterator[None]:
    """The profiler frees a batch size's model with gc.collect() before building the next (and
    the memory spy below collects too): a full collection scans every object the process
    holds, torch's and the suite's included, ~0.4 s each (19 in one test here). What a test
    frees it made itself, so what was there before it is frozen out of the scans for the
    test's length (gc.freeze: still alive and still holding what it references, only never
    scanned); the test's own objects are collected as before."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _long_run() -> tuple[TrainConfig, object, object]:
    """A run that would go on for minutes (an unreachable target): only a stop ends it."""
    train, test = get_dataset("digits").split(0.2, seed=0)
    config = TrainConfig(model="digits-cnn", batch_size=16, target_accuracy=0.9999,
                         sample_budget=2_000_000, eval_every_samples=4096, max_eval_samples=64)
    return config, train, test


def _gpu_and_device(monkeypatch: pytest.MonkeyPatch, index: int = 0,
                    **gpu: object) -> tuple[FakeNvml, FakeCuda, NvmlDevice]:
    gpus = [FakeGpu(pci_bus_id=f"00000000:{0x3B + i:02X}:00.0".encode(), **gpu)
            for i in range(index + 1)]
    nvml = FakeNvml(gpus)
    cuda = FakeCuda({i: g for i, g in enumerate(gpus)}).install(monkeypatch)
    TorchDeviceSpy(monkeypatch)
    return nvml, cuda, NvmlDevice(index, pynvml_module=nvml)


def test_training_on_nvml_runs_at_the_plans_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI locks the plan's clock, then trains: the live clock reads the idle 345 MHz
    between steps, and nothing may take that for the clock to apply."""
    nvml, _, device = _gpu_and_device(monkeypatch)
    gpu = nvml.gpus[0]
    config, train, test = small_run()
    with device:
        device.set_frequency_hz(PLANNED_MHZ * MHZ)
        assert device.current_frequency_hz() == gpu.idle_clock_mhz * MHZ  # idle now
        record = train_to_accuracy(config, train, test, device=device)
    # every lock is the plan's (the Session may apply it again), never the idle clock read
    assert set(gpu.lock_history) == {(PLANNED_MHZ, PLANNED_MHZ)}
    assert record.frequency_hz == PLANNED_MHZ * MHZ
    observed = record.observed_frequency_hz
    assert observed is not None and observed.readings >= 1
    assert {observed.min_hz, observed.max_hz} <= {gpu.idle_clock_mhz * MHZ, PLANNED_MHZ * MHZ}
    assert gpu.locked_mhz is None  # restored
    # the poll thread's readings come a period apart give or take its jitter: every one of
    # them counts in the mean (the board drew between its idle and its busy power)
    assert record.avg_power_w is not None
    assert gpu.idle_draw_mw / 1e3 <= record.avg_power_w <= gpu.busy_draw_mw / 1e3


@pytest.mark.parametrize(("fail", "message"), [
    ({"nvmlDeviceGetFieldValues": (2, "raw")}, "reading power on .* failed"),
    ({"nvmlDeviceGetFieldValues": (2, pynvml.NVML_ERROR_GPU_IS_LOST)}, "was lost"),
])
def test_a_sensor_error_mid_run_stops_the_run_safely(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fail: dict, message: str,
) -> None:
    nvml, _, device = _gpu_and_device(monkeypatch, fail=fail)
    gpu = nvml.gpus[0]
    config, train, test = _long_run()
    with device, pytest.raises(WatchError, match="power sensor stopped") as raised:
        device.set_frequency_hz(PLANNED_MHZ * MHZ)
        train_to_accuracy(config, train, test, device=device, checkpoint_dir=tmp_path,
                          power_cap_w=500.0)
    assert raised.value.__class__ is WatchError
    assert device.sensor_error is not None
    assert __import__("re").search(message, device.sensor_error.message)
    # the safe state: the lowest clock set before the stop, a checkpoint, then restored
    assert gpu.lock_history[-1] == (345, 345)
    assert any(tmp_path.iterdir())
    assert gpu.locked_mhz is None


def test_a_hung_sensor_thread_stops_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The poll thread blocks inside a driver call: no error is ever raised, the readings just
    stop. The Session notices within 3 sensor periods of device time."""
    nvml, _, device = _gpu_and_device(monkeypatch, hang={"nvmlDeviceGetFieldValues": 3})
    config, train, test = _long_run()
    try:
        with device, pytest.raises(WatchError, match="no power reading for"):
            train_to_accuracy(config, train, test, device=device)
    finally:
        nvml.hung.set()  # let the blocked poll thread finish
    assert nvml.gpus[0].locked_mhz is None


def test_nvml_1_is_timed_and_synchronised_on_gpu_1(monkeypatch: pytest.MonkeyPatch) -> None:
    _, cuda, device = _gpu_and_device(monkeypatch, index=1)
    assert device.torch_device == "cuda:1"
    config, train, test = small_run()
    record = train_to_accuracy(config, train, test, device=device)
    assert record.steps >= 1
    assert cuda.devices("record") == {1} and cuda.devices("event-sync") == {1}
    assert not cuda.devices("device-sync")  # never the current device's synchronize


def test_the_cuda_device_of_an_nvml_gpu_is_found_once_not_at_every_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each timed step asks for the device's CUDA device four times; finding it asks NVML for
    the PCI bus and scans CUDA's devices (9.5 us on an H200): it is found once, on the first
    ask where torch's CUDA can answer, and kept (CUDA's numbering is fixed for the process)."""
    from wattcap.devices.workload import workload_for

    nvml, _, device = _gpu_and_device(monkeypatch, index=1)
    cost = workload_for("digits-cnn").step_cost(8)
    for _ in range(50):
        device.run_step(lambda: None, cost)
    device.flush_timing()
    assert device.torch_device == "cuda:1"
    assert nvml.calls.count("nvmlDeviceGetPciInfo") <= 2  # construction may read it once
    device.close()


def test_a_stalled_poll_skips_its_missed_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    from wattcap.runtime.watchdog import CapWatchdog

    nvml = FakeNvml([FakeGpu(hang={"nvmlDeviceGetFieldValues": 3})])  # 61 W idle
    device = NvmlDevice(0, pynvml_module=nvml)
    device.set_frequency_hz(1980 * MHZ)
    readings: list[PowerReading] = []
    guard = CapWatchdog(device, power_cap_w=40.0)  # every reading is over the cap
    # the fourth read hangs until 0.6 s: about 0.5 s after the last reading, 4-5 slots missed
    release = threading.Timer(0.6, nvml.hung.set)
    with device.sensor_ticks(readings.append), device.sensor_ticks(guard):
        release.start()
        time.sleep(1.2)
    release.join()
    gaps = [b.time_s - a.time_s for a, b in zip(readings, readings[1:], strict=False)]
    # the stall is there (four periods or more; its exact length is the timer's and the
    # poll's scheduling: 0.4995 s was seen)
    assert max(gaps) >= 4 * device.sensor_period_s
    # after it, the schedule goes on from now: no burst of readings at one instant
    assert min(gaps) > device.sensor_period_s / 2, gaps
    # and so no burst of step-downs: one decision per two readings, a period or more apart
    steps = [step.time_s for step in guard.steps]
    assert len(steps) >= 2 and len(steps) <= len(readings) // 2
    assert min(b - a for a, b in zip(steps, steps[1:], strict=False)) > device.sensor_period_s
    device.close()


def test_the_sensor_falls_back_to_the_average_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGpu()
    device = NvmlDevice(0, pynvml_module=FakeNvml([gpu]))
    assert (device.sensor_period_s, device.sensor_rail) == (0.1, "board-instant")
    gpu.has_instant_power = False  # the field stops answering mid-run
    for _ in range(INSTANT_FAILURES_BEFORE_AVERAGE):  # a run of misses, not one
        assert device.read_power_w() == pytest.approx(gpu.idle_draw_mw / 1e3)
    assert (device.sensor_period_s, device.sensor_rail) == (1.0, "board-average")
    assert len(device.sensor_changes) == 1 and "1 s average" in device.sensor_changes[0]
    device.close()


def test_energy_integrates_power_over_the_real_time_between_readings() -> None:
    from wattcap.runtime.meter import PowerMeter

    meter = PowerMeter(0.1)
    for t in (0.1, 0.2, 0.3):
        meter(PowerReading(t, 100.0, "board-instant"))
    assert meter.energy_j == pytest.approx(30.0)
    meter(PowerReading(1.3, 100.0, "board-average"))  # one second later (stall, new period)
    assert meter.energy_j == pytest.approx(130.0)  # not 40 J: a reading stands for its time
    assert torch is not None


def test_the_mean_power_counts_readings_that_come_off_the_sensor_period() -> None:
    """A polling thread wakes a little late or early: its readings are 0.1 s apart give or
    take milliseconds, never exactly. The mean is of every reading, the energy of each one
    over the real time since the one before."""
    from wattcap.runtime.meter import MeterState, PowerMeter

    meter = PowerMeter(0.1)
    times_s, powers_w = (0.1, 0.2013, 0.2998, 0.4021), (100.0, 50.0, 100.0, 50.0)
    for t, p in zip(times_s, powers_w, strict=True):
        meter(PowerReading(t, p, "board-instant"))
    assert meter.average_w == pytest.approx(75.0)
    assert meter.peak_w == 100.0
    assert meter.energy_j == pytest.approx(100 * 0.1 + 50 * 0.1013 + 100 * 0.0985 + 50 * 0.1023)
    resumed = PowerMeter(0.1)  # a checkpoint keeps the mean's sum
    resumed.resume(MeterState.model_validate(meter.state().model_dump()))
    assert resumed.average_w == pytest.approx(75.0)
    older = PowerMeter(0.1)  # a checkpoint written before the sum was kept: what it had
    older.resume(MeterState(peak_w=100.0, total_w=300.0, readings=3))
    assert older.average_w == pytest.approx(100.0)


def test_the_power_limit_backstops_a_constant_cap_and_is_put_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nvml, _, device = _gpu_and_device(monkeypatch, power_limit_mw=700_000,
                                      power_limit_constraints_mw=(200_000, 700_000))
    gpu = nvml.gpus[0]
    config, train, test = small_run()
    with device:
        record = train_to_accuracy(config, train, test, device=device, power_cap_w=150.0)
    # 150 W is below the board's 200 W floor: clamped, said so; then the limit found is back
    assert gpu.power_limit_history == [200_000, 700_000]
    assert any("hardware backstop: power limit 200 W for the cap 150 W (clamped" in e
               for e in record.events)


def test_a_dry_run_records_the_backstop_it_would_set_not_one_it_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gpus = [FakeGpu(pci_bus_id=b"00000000:3B:00.0")]
    nvml = FakeNvml(gpus)
    FakeCuda({0: gpus[0]}).install(monkeypatch)
    TorchDeviceSpy(monkeypatch)
    device = NvmlDevice(0, dry_run=True, pynvml_module=nvml)
    config, train, test = small_run()
    with device:
        record = train_to_accuracy(config, train, test, device=device, power_cap_w=300.0)
    assert nvml.setter_calls == []
    assert not any(e.startswith("hardware backstop: power limit") for e in record.events)
    assert any("hardware backstop (dry run): a real run would set the power limit to 300 W "
               "for the cap 300 W; nothing was set" in e for e in record.events)


def test_without_permission_the_backstop_is_off_and_the_run_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nvml, _, device = _gpu_and_device(monkeypatch)
    gpu = nvml.gpus[0]
    config, train, test = small_run()
    monkeypatch.setattr(gpu, "deny_set", False)
    real_set = nvml.nvmlDeviceSetPowerManagementLimit

    def denied(handle: object, limit_mw: int) -> None:
        gpu.deny_set = True
        try:
            real_set(handle, limit_mw)
        finally:
            gpu.deny_set = False

    monkeypatch.setattr(nvml, "nvmlDeviceSetPowerManagementLimit", denied)
    with device:
        record = train_to_accuracy(config, train, test, device=device, power_cap_w=400.0)
    (line,) = [e for e in record.events if "hardware backstop off" in e]
    assert "no permission to set the power limit" in line and "sudo nvidia-smi -i 0 -pl 400" \
        in line and "software watchdog alone" in line
    assert record.steps >= 1 and gpu.power_limit_history == []


def test_without_permission_a_cap_the_board_breaks_stops_the_run_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    """Not root: neither the power limit nor a clock can be set. The board draws more than the
    cap, the watchdog's step down is refused, and the run stops (a checkpoint written) rather
    than go on over the cap, with the fix; nothing was ever set."""
    nvml, _, device = _gpu_and_device(monkeypatch, deny_set=True, idle_draw_mw=70_000,
                                      busy_draw_mw=80_000)
    gpu = nvml.gpus[0]
    config, train, test = _long_run()
    with device, pytest.raises(WatchError, match="above the cap 65.00 W and could not step "
                               "the frequency down") as raised:
        train_to_accuracy(config, train, test, device=device, power_cap_w=65.0,
                          checkpoint_dir=tmp_path)
    assert "run as root" in (raised.value.hint or "")
    assert any(tmp_path.iterdir())
    assert gpu.lock_history == [] and gpu.power_limit_history == []


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_profiling_holds_one_batch_sizes_model_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A memory spy: every step the profiler builds is tracked while alive; eight batch sizes
    never have two models on the GPU, and the allocator's cache is emptied between them."""
    import weakref

    from wattcap.measure.profiling import Profiler

    _, cuda, device = _gpu_and_device(monkeypatch)
    alive: weakref.WeakSet = weakref.WeakSet()
    most_alive = []

    class Step:
        def __init__(self, batch_size: int) -> None:
            self.model = torch.nn.Linear(64, 10)  # stands for the model on the GPU
            self.batch = torch.zeros(batch_size, 64)

        def __call__(self) -> None:
            self.model(self.batch).sum().backward()

    def factory(batch_size: int, torch_device: str) -> Step:
        gc.collect()
        most_alive.append(len(alive))
        step = Step(batch_size)
        alive.add(step)
        return step

    sizes = (1, 2, 4, 8, 16, 32, 64, 128)
    profiler = Profiler(device, "digits-cnn", batch_sizes=sizes, step_factory=factory,
                        min_readings=1)
    for b in sizes:
        profiler.measure(b, device.frequencies_hz()[-1])
    assert most_alive == [0] * len(sizes)  # the previous batch size's model was freed first
    assert sum(1 for name, _ in cuda.calls if name == "empty-cache") == len(sizes) - 1
    # warmed up until two 3-step means agreed (or 20 steps), per batch size
    assert set(profiler.warmup_steps_taken) == set(sizes)
    assert all(6 <= n <= 18 for n in profiler.warmup_steps_taken.values())
    profiler.release_steps()
    gc.collect()
    assert len(alive) == 0
    device.close()


def test_the_largest_batch_size_is_probed_beyond_the_memory_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The memory model is the first guess: on real hardware the sizes it rules out are tried
    with a real step until one runs out of memory."""
    from wattcap.devices.nvml import CONTEXT_RESERVED_BYTES
    from wattcap.measure.profiling import Profiler

    _, _, device = _gpu_and_device(monkeypatch, memory_total=CONTEXT_RESERVED_BYTES + (1 << 20))
    built: list[int] = []

    def factory(batch_size: int, torch_device: str):
        built.append(batch_size)
        if batch_size >= 64:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return lambda: None

    sizes = (4, 8, 16, 32, 64, 128)
    profiler = Profiler(device, "digits-cnn", batch_sizes=sizes, step_factory=factory)
    model_fits = [b for b in sizes
                  if profiler.workload.memory_needed_bytes(b, 1) <= device.memory_bytes()]
    assert model_fits != [4, 8, 16, 32]  # the model alone guesses otherwise
    fits, oom = profiler.fitting_batch_sizes()
    assert (fits, oom) == ([4, 8, 16, 32], [64, 128])
    assert 128 not in built  # probing stops at the first size that does not fit
    device.close()


def test_the_gpu_is_waited_for_once_per_sensor_period_and_at_evaluations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Waiting for the GPU at every step would stall the host's queue: steps are accounted
    when the device is waited for, once per sensor period and at each evaluation."""
    _, cuda, device = _gpu_and_device(monkeypatch)
    train, test = get_dataset("digits").split(0.2, seed=0)
    config = TrainConfig(model="digits-cnn", batch_size=8, target_accuracy=0.9999,
                         sample_budget=1024, eval_every_samples=256, max_eval_samples=64)
    ends: list[float] = []
    accounted: list[int] = []
    #: (the time a step's end returned, the steps its wait accounted), one per step: the
    #: evaluations' waits are in `accounted` only, or the two lists would pair up wrongly
    step_ends: list[tuple[float, int]] = []
    real_end, real_flush = device.end_step, device.flush_timing

    in_step = [False]

    def end_step(timer: object) -> float:
        in_step[0] = True
        ends.append(real_end(timer))  # type: ignore[arg-type]
        in_step[0] = False
        accounted.append(device.accounted_steps)
        step_ends.append((ends[-1], device.accounted_steps))
        return ends[-1]

    def flush_timing() -> float:  # the waits at evaluations (those of a step count there)
        seconds = real_flush()
        if not in_step[0]:
            accounted.append(device.accounted_steps)
        return seconds

    monkeypatch.setattr(device, "end_step", end_step)
    monkeypatch.setattr(device, "flush_timing", flush_timing)
    record = train_to_accuracy(config, train, test, device=device)
    waits = sum(1 for name, _ in cuda.calls if name == "event-sync")
    evaluations = len(record.curve)
    assert record.steps == 128
    assert evaluations <= waits < record.steps // 2  # not one per step
    assert sum(1 for t in ends if t == 0.0) > record.steps // 2  # most steps wait for nothing
    # each wait says how many steps its time is of (what the drift monitor divides it by):
    # every step is accounted once, a queued one as 0
    assert sum(accounted) == record.steps and max(accounted) > 1
    # a step's end returns time exactly when its wait accounted steps (under load one period
    # may hold a single step: a wait of one)
    assert len(step_ends) == record.steps
    assert all((t == 0.0) == (n == 0) for t, n in step_ends)
    assert device.pending_steps == 0
    # every step is in the device time by each evaluation: the curve's times only grow
    times = [p.device_time_s for p in record.curve]
    assert times == sorted(times) and times[0] > 0 and record.device_time_s >= times[-1]


def test_a_step_the_profiler_times_whole_is_one_accounted_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`execute` waits for the GPU: its time is of the steps it accounted, queued ones
    before it included (one, where nothing was queued)."""
    from wattcap.devices.workload import StepCost

    _, _, device = _gpu_and_device(monkeypatch)
    # no wait falls due by itself in this test (a wait is due once per sensor period)
    monkeypatch.setattr(NvmlDevice, "sensor_period_s", property(lambda self: 3600.0))
    cost = StepCost(batch_size=8, flops=1.0, dram_bytes=1.0, optimizer_bytes=1.0, kernels=1,
                    flops_per_kernel_per_sample=1.0, memory_needed_bytes=0)
    assert device.execute(lambda: None, cost) >= 0 and device.accounted_steps == 1
    device.end_step(device.begin_step(cost))  # queued: accounted at the next wait
    assert (device.accounted_steps, device.pending_steps) == (0, 1)
    device.execute(lambda: None, cost)
    assert (device.accounted_steps, device.pending_steps) == (2, 0)
    device.close()


def test_a_profile_point_runs_its_steps_queued_as_training_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A point's window runs the GPU as training runs it: steps queued, the GPU waited for
    once per sensor period and at the window's end, never at every step (the H100 gave a
    profile 20 % slower and 8 % cooler than training on it when each step was waited for);
    the point's time is every step's, each accounted once."""
    import time as clock

    from wattcap.measure.profiling import Profiler

    _, cuda, device = _gpu_and_device(monkeypatch)
    step_s = 0.002
    profiler = Profiler(device, "digits-cnn", batch_sizes=(8,), min_readings=3,
                        step_factory=lambda b, d: (lambda: clock.sleep(step_s)))
    frequency_hz = device.frequencies_hz()[-1]
    profiler.measure(8, frequency_hz)  # warms b=8 up (each warm-up step is waited for)
    accounted: list[int] = []
    real_flush = device.flush_timing

    def flush_timing() -> float:
        seconds = real_flush()
        accounted.append(device.accounted_steps)
        return seconds

    monkeypatch.setattr(device, "flush_timing", flush_timing)
    waits_before = sum(1 for name, _ in cuda.calls if name == "event-sync")
    point = profiler.measure(8, frequency_hz)
    waits = sum(1 for name, _ in cuda.calls if name == "event-sync") - waits_before
    window_s = point.steps * step_s
    assert point.steps >= 100  # 3 readings of a 0.1 s sensor, 2 ms steps
    assert 2 <= waits <= window_s / device.sensor_period_s + 2  # not one per step
    assert sum(accounted) == point.steps and device.pending_steps == 0
    assert point.seconds_per_sample * 8 == pytest.approx(step_s, rel=0.5)
    device.close()


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_profiling_power_limits_on_nvml_sets_each_limit_and_puts_the_found_one_back(
    monkeypatch: pytest.MonkeyPatch, wattcap_state_dir: str,
) -> None:
    """The power-limit knob on a datacenter GPU: each limit is set through NVML (clamped to
    the board's constraints), the clock is left to the board at every point (a lock would
    fight the limit), and the limit found is restored."""
    from wattcap.measure.profiling import Profiler

    # the sensor-noise window in real time on the fake's sensor period: 10 readings, not 100
    monkeypatch.setattr("wattcap.measure.profiling.NOISE_READINGS", 10)
    nvml, _, device = _gpu_and_device(monkeypatch, power_limit_mw=450_000,
                                      power_limit_constraints_mw=(200_000, 700_000))
    gpu = nvml.gpus[0]
    profiler = Profiler(device, "digits-cnn", batch_sizes=(4, 8),
                        step_factory=lambda b, d: (lambda: None), min_readings=1)
    locks_before = len(gpu.lock_history)
    table = profiler.run_power_limits([250.0, 600.0])
    assert (table.knob_kind, table.knob_values) == ("power_limit", [250_000, 600_000])
    assert table.max_power_limit_w == pytest.approx(700.0)  # the board's constraint
    assert sorted(p.knob_value for p in table.points) == [250_000, 250_000, 600_000, 600_000]
    assert gpu.power_limit_history[:2] == [250_000, 600_000]
    assert gpu.power_limit_mw == 450_000  # the limit found is back
    # the sensor-noise window locks the lowest clock once; the limit points lock nothing
    assert len(gpu.lock_history) - locks_before <= 1
    with pytest.raises(ValueError, match="outside what"):
        profiler.run_power_limits([150.0])
    device.close()


def test_training_with_a_power_limit_plan_on_nvml_sets_the_limit_and_puts_it_back(
    monkeypatch: pytest.MonkeyPatch, wattcap_state_dir: str,
) -> None:
    """A power-limit plan on a datacenter GPU (issue 28 item 2): the Session sets the planned
    limit through NVML before the first step, locks no clock (the board runs under the
    limit), and the limit found is back afterwards; the record says what it ran at."""
    from wattcap.core.profile import ProfilePoint, ProfileTable

    nvml, _, device = _gpu_and_device(monkeypatch, power_limit_mw=450_000,
                                      power_limit_constraints_mw=(200_000, 700_000))
    gpu = nvml.gpus[0]
    # the table as `profile --knob power-limit` writes it (profiling it is tested above)
    points = [ProfilePoint(batch_size=16, knob_value=limit_mw, peak_power_w=limit_mw / 1e3,
                           avg_power_w=limit_mw / 1e3 - 20, seconds_per_sample=spp, steps=5,
                           readings=10)
              for limit_mw, spp in ((250_000, 2e-4), (600_000, 1e-4))]
    table = ProfileTable(device=device.name, device_kind="nvml", sensor_rail="board",
                         sensor_period_s=device.sensor_period_s, model="digits-cnn",
                         input_shape=[1, 8, 8], batch_sizes=[16], knob_kind="power_limit",
                         knob_values=[250_000, 600_000], max_batch_size=16, mode="exhaustive",
                         points=points, points_measured=2, profiling_device_s=1.0,
                         power_noise_w=0.5, max_power_limit_w=700.0)
    config, train, test = small_run()
    locks_before, limits_before = len(gpu.lock_history), len(gpu.power_limit_history)
    record = train_to_accuracy(config, train, test, device=device, profile=table,
                               knob_value=250_000)
    assert gpu.power_limit_history[limits_before] == 250_000  # the plan's limit, first
    assert gpu.power_limit_mw == 450_000  # the limit found is back
    assert len(gpu.lock_history) == locks_before  # the clock was left to the board
    assert (record.knob_kind, record.knob_value) == ("power_limit", 250_000)
    assert any("power limit 250 W applied" in event for event in record.events)
    device.close()


def test_a_profile_point_states_its_own_time_spread_from_its_sensor_periods(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A point's window on a GPU is accounted once per sensor period; the periods' times per
    sample give the point a standard error (`seconds_per_sample_std`), so a plan can tell when
    two choices are within the noise of the points that rank them (H200, resnet18: 0.1-4.4 %
    stated; the same points varied 0.1-20 % between rounds minutes apart). A steady step
    states a small one, a step whose time jumps from period to period a larger one."""
    import time as clock

    from wattcap.measure.profiling import Profiler

    _, _, device = _gpu_and_device(monkeypatch)

    def stated(step: Callable[[], None]) -> float:
        profiler = Profiler(device, "digits-cnn", batch_sizes=(8,), min_readings=6,
                            step_factory=lambda b, d: step)
        point = profiler.measure(8, device.frequencies_hz()[-1])
        assert point.seconds_per_sample_std is not None, point
        return point.seconds_per_sample_std / point.seconds_per_sample

    steady = stated(lambda: clock.sleep(0.002))
    waits = [0]
    real_flush = device.flush_timing

    def flush_timing() -> float:
        waits[0] += 1
        return real_flush()

    def jumping() -> None:  # 1 ms or 4 ms, from one of the GPU's waits to the next
        clock.sleep(0.004 if waits[0] % 2 else 0.001)

    monkeypatch.setattr(device, "flush_timing", flush_timing)
    jumps = stated(jumping)
    assert jumps > 0.1 and jumps > 2 * steady
    device.close()


def test_an_emulated_point_states_no_time_spread() -> None:
    """The emulator's timing is noise-free: a point of three sensor periods or more states 0,
    one of fewer states none."""
    from wattcap.devices.emulated import EmulatedDevice
    from wattcap.measure.profiling import Profiler

    profile = Profiler(EmulatedDevice(), "digits-cnn", batch_sizes=(8, 64)).run(exhaustive=True)
    stds = {p.seconds_per_sample_std for p in profile.points}
    assert stds <= {0.0, None} and 0.0 in stds


def test_a_profile_point_records_the_clock_its_board_ran_at(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A point records the clock the board reported at each of its readings: a board that
    holds the locked clock shows it; one that throttles to 1200 MHz part-way through the
    window (a power or thermal limit under load, where the lock read back fine when set)
    shows a mean below the point's clock, so the profile names the point."""
    import time as clock

    from wattcap.measure.profiling import Profiler

    nvml, _, device = _gpu_and_device(monkeypatch)
    gpu = nvml.gpus[0]
    top_hz = device.frequencies_hz()[-1]
    # a real board keeps its clock over the microseconds between a wait and the next launch
    # (H200, host-bound b=32: 1980-1980 MHz at 30 readings); the fake would read its idle
    # clock there, so it idles at the lock
    gpu.idle_clock_mhz = top_hz // MHZ
    throttle_at_s = [float("inf")]

    def step() -> None:
        if clock.monotonic() >= throttle_at_s[0]:
            gpu.clock_mhz = 1200
        clock.sleep(0.002)

    profiler = Profiler(device, "digits-cnn", batch_sizes=(8,), min_readings=6,
                        step_factory=lambda b, d: step)
    steady = profiler.measure(8, top_hz)
    seen = steady.observed_frequency_hz
    assert seen is not None and seen.readings == steady.readings >= 6
    assert seen.min_hz == seen.max_hz == top_hz

    throttle_at_s[0] = clock.monotonic() + 0.25  # 0.1 s sensor: 2 readings held, then 1200
    throttled = profiler.measure(8, top_hz)
    seen = throttled.observed_frequency_hz
    assert seen is not None and seen.readings == throttled.readings
    assert seen.min_hz == 1200 * MHZ and seen.max_hz == top_hz
    assert seen.mean_hz < 0.98 * top_hz and seen.below_hz(top_hz, 0.02)
    assert not ObservedFrequency.of([top_hz] * 6).below_hz(top_hz, 0.02)
    device.close()


def test_an_emulated_point_records_its_own_clock() -> None:
    """The emulator runs each point at its clock: every reading reports it."""
    from wattcap.devices.emulated import EmulatedDevice
    from wattcap.measure.profiling import Profiler

    profile = Profiler(EmulatedDevice(), "digits-cnn", batch_sizes=(8, 64)).run(exhaustive=True)
    for point in profile.points:
        seen = point.observed_frequency_hz
        assert seen is not None and seen.readings == point.readings
        assert seen.min_hz == seen.max_hz == seen.mean_hz == point.knob_value
    assert profile.clock_not_held() == []


def test_batch_sizes_past_the_free_memory_are_left_out_with_a_note_and_never_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a shared GPU another process holds most of the memory: the sizes the free memory
    cannot hold are left out with a note before any step runs, not found by running out of
    memory (nor probed, which would take the memory from that process)."""
    from wattcap.devices.nvml import CONTEXT_RESERVED_BYTES
    from wattcap.measure.profiling import Profiler

    # 16 GiB, of which the other process leaves 3 MiB beside this process's context-to-be
    _, _, device = _gpu_and_device(monkeypatch, memory_total=16 << 30,
                                   memory_free=CONTEXT_RESERVED_BYTES + (3 << 20))
    built: list[int] = []

    def factory(batch_size: int, torch_device: str) -> Callable[[], None]:
        built.append(batch_size)
        return lambda: None

    sizes = (4, 8, 16, 32, 64, 128, 1024)
    profiler = Profiler(device, "digits-cnn", batch_sizes=sizes, step_factory=factory,
                        min_readings=1)
    needed = {b: profiler.workload.memory_needed_bytes(b, 1) for b in sizes}
    assert needed[64] <= 3 << 20 < needed[128] < device.memory_bytes()  # total alone lets in
    assert profiler.fitting_batch_sizes() == ([4, 8, 16, 32, 64], [128, 1024])
    assert 128 not in built and 1024 not in built  # no step at them, not even a probe
    [note] = profiler.notes
    assert "128 (needs 5 MiB), 1024 (needs 42 MiB) left out: 3 MiB" in note
    device.close()


def test_plenty_of_free_memory_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the GPU to itself, the usable memory (total less the context) bounds the sizes."""
    from wattcap.measure.profiling import Profiler

    _, _, device = _gpu_and_device(monkeypatch, memory_total=16 << 30, memory_free=16 << 30)
    profiler = Profiler(device, "digits-cnn", batch_sizes=(4, 1024),
                        step_factory=lambda b, d: lambda: None)
    assert profiler.fitting_batch_sizes() == ([4, 1024], [])
    assert profiler.notes == []
    device.close()
