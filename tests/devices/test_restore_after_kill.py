"""Restore what was found, even after a kill (issue 26 item 7): a state file is written before
the first change and removed once restored; `wattcap restore` and the next run put back what a
SIGKILLed run left changed; a per-device lock keeps two runs off one GPU."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fakes.fake_pynvml import FakeGpu, FakeNvml
from tests.fakes.sysfs import FakeDevfreqKernel, make_nano_l4t32
from wattcap.cli import app
from wattcap.devices.errors import DeviceError
from wattcap.devices.found_state import state_files
from wattcap.devices.jetson import JetsonDevice
from wattcap.devices.nvml import NvmlDevice

REPO = Path(__file__).resolve().parents[2]
LOCK_HZ = 460_800_000
SETTINGS = ("min_freq", "max_freq", "governor")


def _devfreq(root: Path) -> dict[str, str]:
    node = next((root / "sys" / "class" / "devfreq").iterdir())
    return {a: (node / a).read_text().strip() for a in SETTINGS}


def _kill_a_run_holding_a_lock(root: Path, state_dir: str) -> None:
    """A separate process locks the clock and is SIGKILLed: nothing of it restores."""
    script = textwrap.dedent(f"""
        import sys, time
        import pytest
        sys.path.insert(0, {str(REPO)!r})
        from tests.fakes.sysfs import FakeDevfreqKernel
        from wattcap.devices.jetson import JetsonDevice
        FakeDevfreqKernel().install(pytest.MonkeyPatch())
        JetsonDevice({str(root)!r}).set_frequency_hz({LOCK_HZ})
        print("locked", flush=True)
        time.sleep(120)
    """)
    env = {**os.environ, "WATTCAP_STATE_DIR": state_dir}
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             env=env)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "locked"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)


def test_sigkill_then_wattcap_restore_puts_back_what_was_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wattcap_state_dir: str,
) -> None:
    board = make_nano_l4t32(tmp_path / "board")
    found = _devfreq(board.root)
    _kill_a_run_holding_a_lock(board.root, wattcap_state_dir)
    left = _devfreq(board.root)
    assert left["min_freq"] == left["max_freq"] == str(LOCK_HZ) != found["min_freq"]
    (state,) = state_files()
    saved = json.loads(state.read_text())
    assert saved["kind"] == "wattcap.found-settings" and saved["device"] == "jetson"
    # the clocks as found, and the nvpmodel mode found (MAXN, id 0)
    assert {k: str(v) for k, v in saved["settings"].items()} == {**found, "power_mode_id": "0"}

    FakeDevfreqKernel().install(monkeypatch)
    monkeypatch.setenv("WATTCAP_SYSFS_ROOT", str(board.root))
    result = CliRunner().invoke(app, ["restore"])
    assert result.exit_code == 0, result.output
    assert "restored jetson-" in result.output
    assert _devfreq(board.root) == found
    assert state_files() == []
    again = CliRunner().invoke(app, ["restore"])
    assert again.exit_code == 0 and "nothing to restore" in again.output


def test_the_next_run_restores_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wattcap_state_dir: str,
) -> None:
    board = make_nano_l4t32(tmp_path / "board")
    found = _devfreq(board.root)
    _kill_a_run_holding_a_lock(board.root, wattcap_state_dir)
    FakeDevfreqKernel().install(monkeypatch)
    device = JetsonDevice(board.root)
    lower_hz = device.frequencies_hz()[2]
    device.set_frequency_hz(lower_hz)
    assert any("put back the settings" in event for event in device.events)
    # what this run found (and will restore) is the original, not the killed run's lock
    (state,) = state_files()
    assert {k: str(v) for k, v in json.loads(state.read_text())["settings"].items()} == {
        **found, "power_mode_id": "0"}
    device.restore()
    assert _devfreq(board.root) == found and state_files() == []


def test_one_run_per_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    board = make_nano_l4t32(tmp_path / "board")
    FakeDevfreqKernel().install(monkeypatch)
    first, second = JetsonDevice(board.root), JetsonDevice(board.root)
    first.set_frequency_hz(first.frequencies_hz()[3])
    with pytest.raises(DeviceError, match=r"in use by another wattcap run \(pid \d+"):
        second.set_frequency_hz(second.frequencies_hz()[1])
    first.restore()
    second.set_frequency_hz(second.frequencies_hz()[1])  # free again
    second.restore()
    assert state_files() == []


def test_nvml_keeps_its_power_limit_and_resets_clocks_it_cannot_read() -> None:
    gpu = FakeGpu(power_limit_mw=350_000)
    nvml = FakeNvml([gpu])
    device = NvmlDevice(0, pynvml_module=nvml)
    device.set_frequency_hz(1500 * 1_000_000)
    (state,) = state_files()
    saved = json.loads(state.read_text())
    assert saved["key"] == "nvml-0000:3b:00.0" and saved["device"] == "nvml:0"
    assert saved["settings"]["power_limit_mw"] == 350_000
    # a later process: put back from the file alone
    gpu.power_limit_mw = 200_000
    NvmlDevice(0, pynvml_module=nvml).apply_found_settings(saved["settings"])
    assert gpu.locked_mhz is None and gpu.power_limit_mw == 350_000
    device.restore()
    assert state_files() == []


def test_a_dry_run_writes_no_state() -> None:
    nvml = FakeNvml([FakeGpu()])
    NvmlDevice(0, dry_run=True, pynvml_module=nvml).set_frequency_hz(1500 * 1_000_000)
    assert state_files() == [] and nvml.setter_calls == []
