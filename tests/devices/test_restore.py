"""Settings are put back however a run ends: normally, on an exception, and on SIGTERM/SIGINT
(in a separate process that is really killed)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.fakes.sysfs import NANO_FREQUENCIES_HZ, FakeBoard, FakeDevfreqKernel, make_nano_l4t32
from wattcap.data import get_dataset
from wattcap.devices import EmulatedDevice
from wattcap.devices.jetson import JetsonDevice
from wattcap.devices.signals import Terminated, exit_cleanly_on_signals
from wattcap.train.loop import TrainConfig, train_to_accuracy

REPO = Path(__file__).resolve().parents[2]
SETTINGS = ("min_freq", "max_freq", "governor")


def settings(board: FakeBoard) -> dict[str, str]:
    return {name: board.read(name) for name in SETTINGS}


# -- exceptions ----------------------------------------------------------------------------------


def test_jetson_settings_come_back_after_an_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    board = make_nano_l4t32(tmp_path)
    kernel = FakeDevfreqKernel().install(monkeypatch)
    original = settings(board)
    locked_hz = NANO_FREQUENCIES_HZ[4]
    with pytest.raises(RuntimeError, match="boom"):
        with JetsonDevice(tmp_path) as device:
            device.set_frequency_hz(locked_hz)
            assert board.read("min_freq") == board.read("max_freq") == str(locked_hz)
            raise RuntimeError("boom")
    assert settings(board) == original
    # Restored through the kernel, in an order the kernel accepts (it refuses min > max).
    assert set(kernel.writes[-2:]) == {("min_freq", int(original["min_freq"])),
                                       ("max_freq", int(original["max_freq"]))}


def test_emulated_frequency_comes_back_when_training_fails() -> None:
    train, test = get_dataset("digits").split(0.2, seed=0)
    config = TrainConfig(model="digits-cnn", batch_size=32, target_accuracy=0.99,
                         sample_budget=1024, eval_every_samples=128)
    device = EmulatedDevice("jetson-nano")
    initial_hz = device.current_frequency_hz()

    def fail_at_first_eval(point: object) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        with device:
            device.set_frequency_hz(device.frequencies_hz()[2])
            train_to_accuracy(config, train, test, device=device, on_eval=fail_at_first_eval)
    assert device.current_frequency_hz() == initial_hz


# -- signals, in this process --------------------------------------------------------------------


def wait_for_signal() -> None:
    """Python runs signal handlers between bytecodes of the main thread: give it some."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        time.sleep(0.01)
    raise AssertionError("the signal handler never ran")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_emulated_frequency_comes_back_on_a_signal(signum: int) -> None:
    device = EmulatedDevice("jetson-nano")
    initial_hz = device.current_frequency_hz()
    handler_before = signal.getsignal(signum)
    with pytest.raises(Terminated) as raised:
        with exit_cleanly_on_signals(), device:
            device.set_frequency_hz(device.frequencies_hz()[0])
            os.kill(os.getpid(), signum)
            wait_for_signal()
    assert raised.value.code == 128 + signum
    assert device.current_frequency_hz() == initial_hz
    assert signal.getsignal(signum) is handler_before


def test_a_second_signal_does_not_interrupt_the_restore() -> None:
    finished_unwinding = False
    with pytest.raises(Terminated):
        with exit_cleanly_on_signals():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                wait_for_signal()
            finally:
                os.kill(os.getpid(), signal.SIGINT)  # an impatient second Ctrl-C
                time.sleep(0.05)
                finished_unwinding = True
    assert finished_unwinding


def test_signals_are_left_alone_outside_the_main_thread() -> None:
    seen: list[object] = []

    def worker() -> None:
        with exit_cleanly_on_signals():
            seen.append(signal.getsignal(signal.SIGTERM))

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == [before]


# -- SIGTERM to a real process -------------------------------------------------------------------

SCRIPT = textwrap.dedent("""
    import sys
    import time
    from pathlib import Path

    sys.path.insert(0, {repo!r})
    from tests.fakes.sysfs import FakeDevfreqKernel
    from wattcap.devices import jetson
    from wattcap.runtime.watchdog import exit_cleanly_on_signals

    # The hardware boundary: every write goes through the fake kernel, as in test_jetson.py.
    jetson.write_sysfs = FakeDevfreqKernel().write
    root = Path(sys.argv[1])
    device = jetson.JetsonDevice(root)
    with exit_cleanly_on_signals(), device:
        device.set_frequency_hz(int(sys.argv[2]))
        print("READY", flush=True)
        time.sleep(60)
    print("not reached", flush=True)
""")


def test_jetson_settings_come_back_when_the_process_is_killed(tmp_path: Path) -> None:
    signum = signal.SIGTERM
    board = make_nano_l4t32(tmp_path / "board")
    original = settings(board)
    locked_hz = NANO_FREQUENCIES_HZ[3]
    script = tmp_path / "hold_clock.py"
    script.write_text(SCRIPT.format(repo=str(REPO)))
    process = subprocess.Popen(
        [sys.executable, str(script), str(board.root), str(locked_hz)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 60)
        assert ready, "the child never said READY"
        line = process.stdout.readline()
        assert line.strip() == "READY", process.stderr.read() if process.stderr else line
        assert board.read("min_freq") == board.read("max_freq") == str(locked_hz)
        process.send_signal(signum)
        returncode = process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert returncode == 128 + signum  # non-zero: the run did not finish
    assert settings(board) == original
    assert "not reached" not in (process.stdout.read() if process.stdout else "")
