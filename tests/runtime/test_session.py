"""`wattcap.Session`, the one runtime every loop goes through: a user's own model in a plain
PyTorch loop on the emulated Nano, resume after a kill, restore after an exception and after a
signal (in a real process), a failing sensor callback, the torch device of real backends (a
spy at the torch boundary: CI has no CUDA), and the one clock lock per device."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Sampler, TensorDataset

from tests.fakes.fake_pynvml import FakeGpu, FakeNvml
from tests.fakes.sysfs import NANO_FREQUENCIES_HZ, FakeBoard, FakeDevfreqKernel, make_nano_l4t32
from wattcap.core.profile import ProfileTable
from wattcap.core.run import RunRecord, TrainConfig
from wattcap.data import get_dataset
from wattcap.devices import EmulatedDevice, PowerReading, get_device
from wattcap.devices.errors import WatchError
from wattcap.devices.jetson import JetsonDevice
from wattcap.devices.nvml import NvmlDevice
from wattcap.devices.workload import measure_workload
from wattcap.measure.profiling import Profiler
from wattcap.runtime.session import Session, SessionError
from wattcap.runtime.session_config import Goal, PlanSettings
from wattcap.runtime.watchdog import CapWatchdog
from wattcap.train.loop import train_to_accuracy

REPO = Path(__file__).resolve().parents[2]
SETTINGS = ("min_freq", "max_freq", "governor")


class UserNet(nn.Module):
    """A model wattcap has never seen: defined here, not registered anywhere."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Flatten(),
                                  nn.Linear(8 * 8 * 8, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


@pytest.fixture(scope="module")
def digits() -> tuple[TensorDataset, torch.Tensor, torch.Tensor]:
    train, test = get_dataset("digits").split(0.2, seed=0)
    x, y = train.to_tensors()
    return TensorDataset(x, y), *test.to_tensors()


@pytest.fixture(scope="module")
def user_profile() -> ProfileTable:
    """The user's model profiled on the emulated Nano (its workload measured from the module:
    the emulator models time and power from it)."""
    net = UserNet()
    workload = measure_workload(net, torch.randn(4, 1, 8, 8), None,
                                lambda out, _t: out.sum(), "user-net")
    return Profiler(EmulatedDevice("jetson-nano"), "user-net", workload=workload).run(
        exhaustive=True)


class StreamSampler(Sampler):
    """Seeded epoch permutations from a sample position: the user's loop resumes its data
    order from `session.samples` after a restart."""

    def __init__(self, n: int, start: int, seed: int = 0) -> None:
        self.n, self.start, self.seed = n, start, seed

    def __iter__(self):  # noqa: ANN204
        position = self.start
        while True:
            epoch, offset = divmod(position, self.n)
            perm = np.random.default_rng((self.seed, epoch)).permutation(self.n)
            for index in perm[offset:]:
                yield int(index)
                position += 1

    def __len__(self) -> int:
        return 10**9


def accuracy(net: nn.Module, x: torch.Tensor, y: torch.Tensor, device: str) -> float:
    with torch.no_grad():
        return float((net(x.to(device)).argmax(1) == y.to(device)).float().mean())


def user_loop(session: Session, data: tuple, stop_at: int | None = None) -> nn.Module:
    """What a user writes: their model, their optimiser, a DataLoader, `session.step()`."""
    train, x_test, y_test = data
    torch.manual_seed(0)
    net = UserNet().to(session.torch_device)
    optimizer = torch.optim.Adam(net.parameters(), lr=session.learning_rate)
    session.attach(net, optimizer)  # resumes from the checkpoint folder if there is one
    loader = DataLoader(train, batch_size=session.batch_size,
                        sampler=StreamSampler(len(train), session.samples))
    for x, y in loader:
        x, y = session.to_device(x, y)
        with session.step():
            optimizer.zero_grad()
            nn.functional.cross_entropy(net(x), y).backward()
            optimizer.step()
        if session.samples % 256 == 0:
            session.report(accuracy(net, x_test, y_test, session.torch_device))
            if stop_at is not None and session.samples >= stop_at:
                raise KeyboardInterrupt
        if session.done:
            break
    return net


def make_session(profile: ProfileTable, cap_w: float | None = 4.0,
                 checkpoint: Path | None = None, **planning: Any) -> Session:
    return Session(EmulatedDevice("jetson-nano"), model=UserNet(), model_name="user-net",
                   example_input=torch.randn(4, 1, 8, 8),
                   planning=PlanSettings(profile=profile, **planning), cap=cap_w,
                   goal=Goal(target_accuracy=0.8, sample_budget=6144), checkpoint=checkpoint)


# -- a user's loop on the emulated Nano ----------------------------------------------------------


def test_a_user_loop_runs_the_plan_and_leaves_a_record(
    user_profile: ProfileTable, digits: tuple
) -> None:
    session = make_session(user_profile)
    device = session.device
    assert device is not None
    initial_hz = device.current_frequency_hz()
    assert session.choice is not None and session.plan is not None
    assert session.batch_size == session.choice.batch_size
    # the square-root rule from the paper's reference (5e-4 at b=128) without a vector
    assert session.learning_rate == pytest.approx(5e-4 * (session.batch_size / 128) ** 0.5)
    with session:
        assert device.current_frequency_hz() == session.choice.knob_value
        user_loop(session, digits)
    assert device.current_frequency_hz() == initial_hz  # restored on exit
    record = session.record
    assert record is not None and record.reached
    assert record.samples_to_target is not None
    assert record.curve[-2].samples < record.samples_to_target <= record.curve[-1].samples
    assert record.time_to_accuracy_s is not None and record.time_to_accuracy_s > 0
    assert record.energy_j > 0 and record.energy_source == "sensor"
    assert record.peak_power_w is not None and record.peak_power_w <= 4.0 + 0.2
    assert record.model == "user-net" and record.config is None
    assert record.steps * record.batch_size == record.samples_seen
    # time is the emulated device's: samples x the profile's time per sample at the point
    point = user_profile.lookup(record.batch_size, session.choice.knob_value)
    assert point is not None
    assert record.device_time_s == pytest.approx(
        record.samples_seen * point.seconds_per_sample, rel=0.02)


def test_a_short_last_batch_counts_the_samples_it_trains(user_profile: ProfileTable) -> None:
    """A DataLoader without drop_last ends each epoch with a short batch: `session.step()`
    without a count trains the batch moved with `to_device`, not the plan's batch size."""
    session = make_session(user_profile, cap_w=None, batch_size=16, frequency_hz=None)
    data = TensorDataset(torch.randn(40, 1, 8, 8), torch.randint(0, 10, (40,)))
    net = UserNet()
    optimizer = torch.optim.Adam(net.parameters(), lr=session.learning_rate)
    sizes = []
    with session:
        for _ in range(2):  # two epochs of 16 + 16 + 8
            for x, y in DataLoader(data, batch_size=session.batch_size, shuffle=True):
                x, y = session.to_device(x, y)
                before = session.samples
                with session.step():
                    optimizer.zero_grad()
                    nn.functional.cross_entropy(net(x), y).backward()
                    optimizer.step()
                sizes.append(session.samples - before)
        with session.step(5):  # a count given wins; nothing moved: the batch size
            pass
        with session.step():
            pass
    assert sizes == [16, 16, 8, 16, 16, 8]
    assert session.samples == 80 + 5 + 16 and session.steps == 8


def test_a_killed_user_loop_resumes_to_the_same_result(
    user_profile: ProfileTable, digits: tuple, tmp_path: Path
) -> None:
    with make_session(user_profile) as full:
        user_loop(full, digits)
    with pytest.raises(KeyboardInterrupt):
        with make_session(user_profile, checkpoint=tmp_path) as first:
            user_loop(first, digits, stop_at=512)
    with make_session(user_profile, checkpoint=tmp_path) as second:
        user_loop(second, digits)
    assert full.record is not None and second.record is not None
    assert second.record.resumed_from_samples == 512
    assert [p.accuracy for p in second.record.curve] == [p.accuracy for p in full.record.curve]
    assert second.record.samples_to_target == full.record.samples_to_target
    assert second.record.device_time_s == pytest.approx(full.record.device_time_s, rel=1e-6)


def test_a_checkpoint_of_another_run_is_refused(
    user_profile: ProfileTable, digits: tuple, tmp_path: Path
) -> None:
    from wattcap.core.schema import WattcapFileError

    with pytest.raises(KeyboardInterrupt):
        with make_session(user_profile, checkpoint=tmp_path) as first:
            user_loop(first, digits, stop_at=256)
    with pytest.raises(WattcapFileError, match="another run"):
        with make_session(user_profile, checkpoint=tmp_path, batch_size=8) as other:
            user_loop(other, digits)


def test_the_device_is_restored_after_an_exception(user_profile: ProfileTable) -> None:
    session = make_session(user_profile, frequency_hz=user_profile.knob_values[3])
    device = session.device
    assert device is not None
    initial_hz = device.current_frequency_hz()
    with pytest.raises(RuntimeError, match="boom"):
        with session:
            assert device.current_frequency_hz() != initial_hz
            raise RuntimeError("boom")
    assert device.current_frequency_hz() == initial_hz


def test_a_failing_tick_callback_stops_the_run_with_a_clear_error(
    user_profile: ProfileTable, digits: tuple
) -> None:
    session = make_session(user_profile, frequency_hz=user_profile.knob_values[3])
    device = session.device
    assert device is not None
    initial_hz = device.current_frequency_hz()

    def broken(reading: PowerReading) -> None:
        raise ZeroDivisionError("a bug in a callback")

    with pytest.raises(WatchError, match="power watch failed.*ZeroDivisionError") as raised:
        with session, device.sensor_ticks(broken):
            user_loop(session, digits)
    assert isinstance(raised.value.__cause__, ZeroDivisionError)
    assert session.steps <= 3  # stopped at the first step boundary after the failure
    assert device.current_frequency_hz() == initial_hz


def test_bad_session_arguments_are_refused_by_name(user_profile: ProfileTable) -> None:
    with pytest.raises(SessionError, match="power cap"):
        make_session(user_profile, cap_w=float("nan"))
    with pytest.raises(SessionError, match="infeasible"):
        make_session(user_profile, cap_w=0.5)
    with pytest.raises(SessionError, match="profile to plan"):
        Session(EmulatedDevice("jetson-nano"), model="digits-cnn")
    with Session(EmulatedDevice("jetson-nano"), model=UserNet(),
                 planning=PlanSettings(batch_size=8)) as no_input:
        with pytest.raises(SessionError, match="example_input"):
            no_input.begin_step()
    session = Session(EmulatedDevice("jetson-nano"), planning=PlanSettings(batch_size=8))
    with pytest.raises(SessionError, match="with` block"):
        session.begin_step()
    with session, pytest.raises(SessionError, match="model's workload"):
        session.begin_step()


def test_a_run_shorter_than_the_sensors_period_says_no_energy_was_read() -> None:
    """Two steps of a small model on the emulated H100 (100 ms sensor): no reading, so the
    record's energy is marked as not measured, never a sensor's 0 J."""
    with Session(EmulatedDevice("h100-sxm"), model="digits-cnn",
                 planning=PlanSettings(batch_size=32)) as session:
        for _ in range(2):
            with session.step():
                pass
    record = session.record
    assert record is not None and record.device_time_s < 0.1
    assert record.energy_source == "none" and record.peak_power_w is None


# -- real backends: the model and every batch go to the device's torch device --------------------


class TorchDeviceSpy:
    """Stands at the torch boundary: records where tensors and modules are sent and keeps them
    on the CPU (CI has no CUDA)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tensors: list[str] = []
        self.modules: list[str] = []
        self.pinned = 0
        tensor_to, module_to = torch.Tensor.to, nn.Module.to
        spy = self

        def tensor_spy(self: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
            target = kwargs.get("device", args[0] if args else None)
            if isinstance(target, (str, torch.device)) and str(target).startswith("cuda"):
                spy.tensors.append(str(target))
                assert kwargs.get("non_blocking") is True, "CUDA copies must not block"
                return self
            return tensor_to(self, *args, **kwargs)

        def module_spy(self: nn.Module, *args: object, **kwargs: object) -> nn.Module:
            target = kwargs.get("device", args[0] if args else None)
            if isinstance(target, (str, torch.device)) and str(target).startswith("cuda"):
                spy.modules.append(str(target))
                return self
            return module_to(self, *args, **kwargs)

        def pin(self: torch.Tensor) -> torch.Tensor:
            spy.pinned += 1
            return self

        monkeypatch.setattr(torch.Tensor, "to", tensor_spy)
        monkeypatch.setattr(nn.Module, "to", module_spy)
        monkeypatch.setattr(torch.Tensor, "pin_memory", pin)


def small_run() -> tuple[TrainConfig, object, object]:
    train, test = get_dataset("digits").split(0.2, seed=0)
    config = TrainConfig(model="digits-cnn", batch_size=16, target_accuracy=0.99,
                         sample_budget=64, eval_every_samples=32, max_eval_samples=64)
    return config, train, test


def test_training_on_a_jetson_puts_model_and_batches_on_cuda(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    board = make_nano_l4t32(tmp_path)
    FakeDevfreqKernel().install(monkeypatch)
    device = JetsonDevice(board.root)
    assert device.torch_device == "cuda"
    spy = TorchDeviceSpy(monkeypatch)
    config, train, test = small_run()
    device.set_frequency_hz(NANO_FREQUENCIES_HZ[5])
    record = train_to_accuracy(config, train, test, device=device)
    steps = config.sample_budget // config.batch_size
    evals = config.sample_budget // config.eval_every_samples
    assert record.torch_device == "cuda" and record.device_kind == "jetson"
    assert spy.modules == ["cuda"]
    # every training batch (inputs and targets) and every evaluation batch went to cuda
    assert spy.tensors.count("cuda") == 2 * steps + 2 * evals
    assert spy.pinned == len(spy.tensors)
    assert record.steps == steps and record.device_time_s > 0
    assert record.frequency_hz == NANO_FREQUENCIES_HZ[5]
    # the power rule and the rails it took stay with the run
    assert "device: power sensor: input rail: POM_5V_IN (POM_5V_IN measures the module's " \
        "input)" in record.events


def test_training_on_an_nvml_gpu_puts_model_and_batches_on_its_cuda_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nvml = FakeNvml([FakeGpu(), FakeGpu(pci_bus_id=b"00000000:86:00.0")])
    device = NvmlDevice(1, pynvml_module=nvml)
    assert device.torch_device == "cuda:1"  # no CUDA in torch: the NVML index
    spy = TorchDeviceSpy(monkeypatch)
    config, train, test = small_run()
    record = train_to_accuracy(config, train, test, device=device)
    assert spy.modules == ["cuda:1"]
    assert set(spy.tensors) == {"cuda:1"} and len(spy.tensors) >= 2 * record.steps
    assert record.torch_device == "cuda:1"


def test_nvml_maps_its_gpu_to_the_cuda_index_by_pci_bus(monkeypatch: pytest.MonkeyPatch) -> None:
    # CUDA numbers GPUs fastest first: here NVML's GPU 1 is CUDA's device 0.
    buses = {0: (0, 0x86, 0), 1: (0, 0x3B, 0)}

    class Props:
        def __init__(self, index: int) -> None:
            self.pci_domain_id, self.pci_bus_id, self.pci_device_id = buses[index]

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", Props)
    nvml = FakeNvml([FakeGpu(pci_bus_id=b"00000000:3B:00.0"),
                     FakeGpu(pci_bus_id=b"00000000:86:00.0")])
    assert NvmlDevice(0, pynvml_module=nvml).torch_device == "cuda:1"
    assert NvmlDevice(1, pynvml_module=nvml).torch_device == "cuda:0"


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_a_jetson_profile_is_measured_on_cuda_and_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from wattcap.cli import app
    from wattcap.devices import jetson

    board = make_nano_l4t32(tmp_path / "board")
    FakeDevfreqKernel().install(monkeypatch)
    monkeypatch.setenv("WATTCAP_SYSFS_ROOT", str(board.root))
    # Every window runs steps for a number of sensor periods of wall time (the sensor-noise
    # window 100, each point 5): at the INA3221's 50 ms, ~12 s of them. The fake rail answers
    # at once, and nothing asserted here depends on the period's length.
    monkeypatch.setattr(jetson, "INA3221_PERIOD_S", 0.01)
    spy = TorchDeviceSpy(monkeypatch)
    original = {name: board.read(name) for name in SETTINGS}
    out = tmp_path / "jetson.json"
    # The fake rail reads 2 W at every frequency: under a 5 W cap the pruned search climbs
    # the whole row of the one batch size; real hardware measures 2 rounds by default (here
    # without the minute between them)
    result = CliRunner().invoke(app, ["profile", "--device", "jetson", "--model", "digits-cnn",
                                      "--batch-sizes", "4", "--power-cap", "5",
                                      "--round-gap-s", "0", "--out", str(out)],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "measuring in 2 rounds, 0 s apart" in result.output
    profile = ProfileTable.load(out)
    assert profile.rounds == 2 and all(p.rounds == 2 for p in profile.points)
    assert profile.device == "jetson-nano" and profile.device_kind == "jetson"
    assert profile.power_mode == "MAXN" and profile.sensor_rail == "POM_5V_IN"
    # the board's modes by id, as its nvpmodel.conf names them: a real board's profile has no
    # spec to take them from, so labels would show bare ids without them
    modes = get_device("jetson", sysfs_root=str(board.root)).power_mode_names()
    assert modes and modes[0] == "MAXN" and profile.device_spec is None
    assert profile.power_modes == modes == profile.power_mode_names()
    assert [p.knob_value for p in profile.points] == NANO_FREQUENCIES_HZ
    assert spy.modules == ["cuda", "cuda"]  # each round builds its steps on the GPU
    assert {name: board.read(name) for name in SETTINGS} == original


# -- signals, in a real process ------------------------------------------------------------------

# The session's imports (torch among them) cost a process seconds of CPU: one parent pays them
# once and forks a fresh process per test, which runs the session and gets the signal; the
# parent reaps it and says how it ended. Each signal still reaches a process of its own, and
# its exit status is the one Python gives a SystemExit that reaches the top.
FORKING_PARENT = textwrap.dedent("""
    import gc
    import os
    import sys
    import threading
    import time
    from pathlib import Path

    sys.path.insert(0, {repo!r})
    from tests.fakes.sysfs import FakeDevfreqKernel
    from wattcap.devices import jetson
    from wattcap.runtime.session import Session
    from wattcap.runtime.session_config import PlanSettings

    # a fork copies the calling thread only: another thread here would be lost in the child
    assert threading.active_count() == 1, threading.enumerate()
    # the garbage collector leaves the imported objects alone: a child's collections would
    # touch (and so copy) every page of them again, a second of CPU at its exit
    gc.freeze()
    while True:
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)
        pid = os.fork()
        if pid == 0:
            break  # the child runs the session below
        _, status = os.waitpid(pid, 0)
        print("EXIT", os.waitstatus_to_exitcode(status), flush=True)

    board_root, locked_hz = line.split()
    jetson.write_sysfs = FakeDevfreqKernel().write  # the hardware boundary
    device = jetson.JetsonDevice(Path(board_root))
    plan = PlanSettings(batch_size=8, frequency_hz=int(locked_hz))
    with Session(device, planning=plan) as session:
        while True:
            with session.step():
                time.sleep(0.01)
            if session.steps == 1:
                print("READY", os.getpid(), flush=True)
    print("not reached", flush=True)
""")


class SessionForks:
    """The forking parent: `start` a session process on a board, read what it says."""

    def __init__(self, folder: Path) -> None:
        script = folder / "forks.py"
        script.write_text(FORKING_PARENT.format(repo=str(REPO)))
        self.stderr = folder / "stderr.txt"
        with self.stderr.open("w") as stderr:
            # one OpenMP thread: no thread pool for a fork to leave behind, and the
            # session's processes do no tensor work that more would speed up
            self.process = subprocess.Popen(
                [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=stderr, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))

    def start(self, board: FakeBoard, locked_hz: int) -> int:
        """A session process that has locked `board` at `locked_hz`: its pid."""
        assert self.process.stdin is not None
        self.process.stdin.write(f"{board.root} {locked_hz}\n")
        self.process.stdin.flush()
        said = self.line(60).split()
        assert said[:1] == ["READY"], f"{said}: {self.stderr.read_text()}"
        return int(said[1])

    def line(self, timeout_s: float) -> str:
        """The next line the parent or its child prints. Each answers what the test did last,
        so none can wait in the reader's buffer, where `select` would not see it."""
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        assert ready, f"nothing said in {timeout_s} s: {self.stderr.read_text()}"
        return self.process.stdout.readline()

    def stop(self, pid: int) -> None:
        """Kill a session process that did not end as it should, and read its end."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        self.line(30)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="module")
def session_forks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionForks]:
    forks = SessionForks(tmp_path_factory.mktemp("session-forks"))
    yield forks
    forks.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_restores_the_jetson_clocks(
    tmp_path: Path, signum: int, session_forks: SessionForks
) -> None:
    board = make_nano_l4t32(tmp_path / "board")
    original = {name: board.read(name) for name in SETTINGS}
    locked_hz = NANO_FREQUENCIES_HZ[3]
    pid = session_forks.start(board, locked_hz)
    try:
        assert board.read("min_freq") == board.read("max_freq") == str(locked_hz)
        os.kill(pid, signum)
        exit_line = session_forks.line(30)
    except BaseException:
        session_forks.stop(pid)
        raise
    assert exit_line.split() == ["EXIT", str(128 + signum)], exit_line
    assert {name: board.read(name) for name in SETTINGS} == original


# -- one clock lock per device -------------------------------------------------------------------


def test_the_watchdog_waits_for_the_clock_lock(board_nano: FakeBoard) -> None:
    device = JetsonDevice(board_nano.root)
    start_hz = NANO_FREQUENCIES_HZ[6]
    device.set_frequency_hz(start_hz)
    guard = CapWatchdog(device, power_cap_w=1.0)
    done = threading.Event()

    def two_readings_over_the_cap() -> None:
        guard(PowerReading(0.05, 2.0, "test"))
        guard(PowerReading(0.10, 2.0, "test"))
        done.set()

    with device.clock_lock:  # the main thread is half-way through a re-plan
        thread = threading.Thread(target=two_readings_over_the_cap)
        thread.start()
        assert not done.wait(0.2), "the watchdog wrote the clock while the lock was held"
        assert device.current_frequency_hz() == start_hz
    thread.join(5)
    assert done.is_set()
    assert device.current_frequency_hz() == NANO_FREQUENCIES_HZ[5]
    device.restore()


@pytest.fixture
def board_nano(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeBoard:
    board = make_nano_l4t32(tmp_path)
    FakeDevfreqKernel().install(monkeypatch)
    return board


def test_a_dead_sensor_stops_the_run_with_or_without_a_cap() -> None:
    from wattcap.devices.errors import SensorMissingError

    device = EmulatedDevice("jetson-nano")
    device.check_watch(None)  # a live sensor: nothing to say
    device.sensor_error = SensorMissingError("no sensor", hint="use a meter")
    with pytest.raises(WatchError, match="cannot be measured") as no_cap:
        device.check_watch(None)
    assert no_cap.value.hint == "use a meter"
    with pytest.raises(WatchError, match="cap of 5 W cannot be watched"):
        device.check_watch(5.0)


def test_run_record_of_a_session_round_trips(
    user_profile: ProfileTable, digits: tuple, tmp_path: Path
) -> None:
    with make_session(user_profile) as session:
        user_loop(session, digits)
    assert session.record is not None
    session.record.save(tmp_path / "run.json")
    assert RunRecord.load(tmp_path / "run.json") == session.record


def test_env_sysfs_root_reaches_the_jetson_backend(
    board_nano: FakeBoard, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wattcap.devices import get_device

    monkeypatch.setenv("WATTCAP_SYSFS_ROOT", str(board_nano.root))
    assert get_device("jetson").name == "jetson-nano"
    monkeypatch.delenv("WATTCAP_SYSFS_ROOT")
    assert os.environ.get("WATTCAP_SYSFS_ROOT") is None


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_the_example_trains_a_user_model_through_a_session(tmp_path: Path) -> None:
    # one OpenMP thread, as conftest sets for this process: the workload census of the
    # reference models (their profiles are planned against) took 3x the CPU with a thread per
    # core on a busy machine (35 s instead of 11 s)
    env = dict(os.environ, WATTCAP_CACHE_DIR=str(tmp_path), OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, str(REPO / "examples" / "train_your_own_model.py"),
                          "--target-accuracy", "0.3"], capture_output=True, text=True,
                         env=env, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "plan: batch size" in run.stdout
    assert "reached 30%: True" in run.stdout
    assert list((tmp_path / "profiles").glob("jetson-nano-my-net-*.json"))  # profiled, cached


def test_one_lucky_evaluation_is_not_the_target_reached() -> None:
    """The run goes on until the smoothed curve crosses the target: an evaluation above it
    that the next ones take back would otherwise end the run and record a miss."""
    session = Session(None, planning=PlanSettings(batch_size=8),
                      goal=Goal(target_accuracy=0.8, sample_budget=10_000))
    with session:
        for accuracy in (0.5, 0.82, 0.7, 0.7):
            session.samples += 256
            session.report(accuracy)
        assert not session.reached and not session.done and session.samples_to_target is None
        for accuracy in (0.9, 0.9):
            session.samples += 256
            session.report(accuracy)
        assert session.reached and session.done
        assert 256 * 4 < session.samples_to_target <= 256 * 6
    assert session.record is not None and session.record.reached
