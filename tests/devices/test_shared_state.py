"""One folder of locks and settings found for every user of the machine: a run under sudo and
a run as a user of the udev rule's group exclude each other, `wattcap restore` finds every
run's file, a user who cannot make the folder is told so once, and a profile keeps its lock
between its phases."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.fakes.sysfs import FakeDevfreqKernel, make_nano_l4t32
from wattcap.devices import found_state, jetson
from wattcap.devices.errors import DeviceError
from wattcap.devices.found_state import state_dir, state_files
from wattcap.devices.jetson import JetsonDevice
from wattcap.devices.restore import restore_left_settings
from wattcap.measure.profiling import Profiler

REPO = Path(__file__).resolve().parents[2]
SETTINGS = ("min_freq", "max_freq", "governor")


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shared folder moved into the test's temp dir (never the real /run/wattcap), and
    WATTCAP_STATE_DIR unset, so that the default applies."""
    (tmp_path / "run").mkdir()
    path = tmp_path / "run" / "wattcap"
    monkeypatch.setattr(found_state, "SHARED_STATE_DIR", path)
    monkeypatch.delenv("WATTCAP_STATE_DIR")
    return path


def as_user(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """Another user: another home, so another wattcap cache."""
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("WATTCAP_CACHE_DIR", str(home / ".cache" / "wattcap"))


def _devfreq(root: Path) -> dict[str, str]:
    node = next((root / "sys" / "class" / "devfreq").iterdir())
    return {a: (node / a).read_text().strip() for a in SETTINGS}


def test_two_users_share_one_folder_and_exclude_each_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: Path,
) -> None:
    board = make_nano_l4t32(tmp_path / "board")
    FakeDevfreqKernel().install(monkeypatch)
    as_user(monkeypatch, tmp_path / "root-home")  # the sudo run
    first = JetsonDevice(board.root)
    first.set_frequency_hz(first.frequencies_hz()[3])
    assert state_dir() == shared
    # sticky and writable by all, so that every user's run can make its lock file there
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    (state,) = state_files()
    assert stat.S_IMODE(state.stat().st_mode) == 0o644  # restore, as any user, reads it

    as_user(monkeypatch, tmp_path / "video-user-home")  # the udev group's run
    second = JetsonDevice(board.root)
    assert state_dir() == shared
    with pytest.raises(DeviceError, match=r"in use by another wattcap run \(pid \d+"):
        second.set_frequency_hz(second.frequencies_hz()[1])
    first.restore()
    second.set_frequency_hz(second.frequencies_hz()[1])  # free again
    second.restore()
    assert state_files() == []
    assert not (tmp_path / "root-home" / ".cache" / "wattcap" / "state").exists()


def test_restore_finds_the_state_another_users_killed_run_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: Path,
) -> None:
    board = make_nano_l4t32(tmp_path / "board")
    found = _devfreq(board.root)
    user_home = tmp_path / "user-home"
    script = textwrap.dedent(f"""
        import signal, os, sys
        from pathlib import Path
        import pytest
        sys.path.insert(0, {str(REPO)!r})
        from tests.fakes.sysfs import FakeDevfreqKernel
        from wattcap.devices import found_state
        from wattcap.devices.jetson import JetsonDevice
        found_state.SHARED_STATE_DIR = Path({str(shared)!r})
        FakeDevfreqKernel().install(pytest.MonkeyPatch())
        device = JetsonDevice({str(board.root)!r})
        device.set_frequency_hz(device.frequencies_hz()[2])
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    env = {k: v for k, v in os.environ.items() if k != "WATTCAP_STATE_DIR"}
    env.update(HOME=str(user_home), WATTCAP_CACHE_DIR=str(user_home / "cache"))
    child = subprocess.run([sys.executable, "-c", script], env=env, timeout=120, check=False)
    assert child.returncode == -9
    assert _devfreq(board.root) != found

    as_user(monkeypatch, tmp_path / "root-home")  # `sudo wattcap restore`: another cache
    FakeDevfreqKernel().install(monkeypatch)
    (done,) = restore_left_settings(str(board.root))
    assert done.done, done.message
    assert _devfreq(board.root) == found and state_files() == []


def test_a_folder_that_cannot_be_made_falls_back_to_the_users_own_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    # a parent that is a file: no mkdir under it succeeds, not even root's (a read-only
    # parent would not stop root, who runs these tests in some containers)
    (tmp_path / "run").write_text("")
    monkeypatch.setattr(found_state, "SHARED_STATE_DIR", tmp_path / "run" / "wattcap")
    monkeypatch.setattr(found_state, "_fallback_noted", set())
    monkeypatch.delenv("WATTCAP_STATE_DIR")
    as_user(monkeypatch, tmp_path / "home")
    own = tmp_path / "home" / ".cache" / "wattcap" / "state"
    assert state_dir() == own and own.is_dir()
    assert state_dir() == own
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert str(tmp_path / "run" / "wattcap") in lines[0] and str(own) in lines[0]
    assert "install -d -m 1777" in lines[0]


def test_a_named_folder_that_cannot_be_made_is_an_error_not_a_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("WATTCAP_STATE_DIR", str(tmp_path / "file" / "state"))
    with pytest.raises(DeviceError, match="cannot keep the device's settings"):
        state_dir()


def test_a_profile_keeps_its_lock_between_its_phases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    board = make_nano_l4t32(tmp_path / "board")
    FakeDevfreqKernel().install(monkeypatch)
    # the phases' windows last sensor periods of wall time; the fake rail answers at once and
    # the lock's hand-over does not depend on the period's length
    monkeypatch.setattr(jetson, "INA3221_PERIOD_S", 0.01)
    found = _devfreq(board.root)
    device = JetsonDevice(board.root)
    profiler = Profiler(device, "digits-cnn", batch_sizes=(4,), min_readings=4,
                        step_factory=lambda b, d: lambda: time.sleep(0.002))
    refused: list[str] = []
    fitting = profiler.fitting_batch_sizes

    def another_run_tries_between_phases() -> tuple[list[int], list[int]]:
        # after the sensor-noise phase put the settings back, before the search
        assert _devfreq(board.root) == found
        other = JetsonDevice(board.root)
        try:
            other.set_frequency_hz(other.frequencies_hz()[1])
        except DeviceError as err:
            refused.append(err.message)
        else:
            other.restore()
        (state,) = state_files()  # the profile's, still there: a kill now is undone
        assert json.loads(state.read_text())["pid"] == os.getpid()
        return fitting()

    monkeypatch.setattr(profiler, "fitting_batch_sizes", another_run_tries_between_phases)
    top_two = JetsonDevice.frequencies_hz(device)[-2:]  # a short profile: two clocks
    monkeypatch.setattr(device, "frequencies_hz", lambda: top_two)
    profiler.run(exhaustive=True)
    assert refused and "in use by another wattcap run" in refused[0]
    assert _devfreq(board.root) == found and state_files() == []
    free = JetsonDevice(board.root)  # the lock went with the profile
    free.set_frequency_hz(free.frequencies_hz()[1])
    free.restore()


def test_restore_never_applies_a_file_another_user_could_have_planted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: Path,
) -> None:
    """The shared folder is writable by all: a state file owned by neither root nor the user
    who restores is named and left alone (restore may run as root); the same file of root's
    is applied."""
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    board = make_nano_l4t32(tmp_path / "board")
    FakeDevfreqKernel().install(monkeypatch)
    device = JetsonDevice(board.root)
    device.set_frequency_hz(device.frequencies_hz()[2])
    (state,) = state_files()
    record = json.loads(state.read_text())
    device.restore()
    found = _devfreq(board.root)
    # planted: "put back" the GPU clock's ceiling at its lowest step
    lowest = str(min(device.frequencies_hz()))
    record["settings"] = {**record["settings"], "max_freq": int(lowest)}
    state.write_text(json.dumps(record))
    os.chown(state, 54321, -1)
    (refused,) = restore_left_settings(sysfs_root=str(board.root))
    assert not refused.done and "belongs to uid 54321, neither root nor you" in refused.message
    assert _devfreq(board.root) == found and state.exists()
    os.chown(state, 0, -1)
    (applied,) = restore_left_settings(sysfs_root=str(board.root))
    assert applied.done, applied.message
    assert _devfreq(board.root)["max_freq"] == lowest
