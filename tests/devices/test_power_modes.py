"""Jetson power modes as a knob (issue 28 item 2): switched by id with `nvpmodel -m ID` (a fake
binary on PATH that edits the fake L4T tree as the real one edits /), read back, refused when
they need a reboot or root, and the mode found put back by restore, also after a kill."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fakes.sysfs import (
    MHZ,
    FakeBoard,
    FakeDevfreqKernel,
    make_orin_nano_l4t36,
    write_nvpmodel,
)
from wattcap.devices import EmulatedDevice, jetson
from wattcap.devices.errors import DeviceNotSupportedError, DevicePermissionError
from wattcap.devices.jetson import JetsonDevice
from wattcap.runtime.session_config import DeviceHandling, PlanSettings

FAKE_BIN = Path(__file__).resolve().parents[1] / "fakes" / "bin"


@pytest.fixture
def board(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeBoard:
    board = make_orin_nano_l4t36(tmp_path)  # modes 0 "15W" (624.75 MHz), 1 "7W" (408 MHz)
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVPMODEL_ROOT", str(board.root))
    FakeDevfreqKernel().install(monkeypatch)
    return board


def _status(board: FakeBoard) -> str:
    return (board.root / "var" / "lib" / "nvpmodel" / "status").read_text()


def _calls(board: FakeBoard) -> list[str]:
    log = board.root / "nvpmodel-calls.log"
    return log.read_text().splitlines() if log.exists() else []


def _devfreq(board: FakeBoard) -> dict[str, str]:
    return {a: (board.devfreq / a).read_text().strip()
            for a in ("min_freq", "max_freq", "governor")}


def test_a_mode_is_switched_read_back_and_restored(board: FakeBoard,
                                                   wattcap_state_dir: str) -> None:
    device = JetsonDevice(board.root)
    assert device.power_mode_ids() == [0, 1] and device.power_mode == "15W"
    found = _devfreq(board)
    assert device.set_power_mode(1) == 1
    assert _calls(board) == ["-m 1"] and "pmode:0001" in _status(board)
    assert device.power_mode == "7W" and device.power_mode_id == 1
    assert max(device.frequencies_hz()) == 408 * MHZ  # the mode's cap bounds the clocks
    device.set_frequency_hz(306 * MHZ)  # a lock inside the mode
    device.restore()
    assert _calls(board) == ["-m 1", "-m 0"] and "pmode:0000" in _status(board)
    assert device.power_mode == "15W" and max(device.frequencies_hz()) == 624_750_000
    assert _devfreq(board) == found  # the clocks as found, after the mode


def test_a_mode_left_switched_by_a_killed_run_is_put_back(board: FakeBoard,
                                                          wattcap_state_dir: str) -> None:
    found = JetsonDevice(board.root).found_settings()
    assert found["power_mode_id"] == 0
    JetsonDevice(board.root).set_power_mode(1)  # never restored: the process "died"
    assert "pmode:0001" in _status(board)
    JetsonDevice(board.root).apply_found_settings(found)
    assert "pmode:0000" in _status(board)
    assert {k: str(v) for k, v in found.items() if k != "power_mode_id"} == _devfreq(board)


def test_a_mode_that_needs_a_reboot_is_refused_before_nvpmodel_runs(
        board: FakeBoard) -> None:
    (board.root / "etc" / "nvpmodel.conf").unlink()  # rewritten with TPC masks
    write_nvpmodel(board.root, "nvpmodel_p3767_0003.conf",
                   [(0, "15W", 624_750_000), (1, "7W", 408_000_000), (2, "MAXN", -1)],
                   default_id=0, active_id=0, tpc_masks={0: "0", 1: "0", 2: "1"})
    device = JetsonDevice(board.root)
    with pytest.raises(DeviceNotSupportedError, match="needs a reboot.*never reboots") as err:
        device.set_power_mode(2)
    assert "sudo nvpmodel -m 2" in (err.value.hint or "")
    assert _calls(board) == [] and "pmode:0000" in _status(board)
    assert device.set_power_mode(1) == 1  # the same mask: no reboot
    device.restore()


def test_a_reboot_prompt_is_answered_no_and_refused(board: FakeBoard,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    wattcap_state_dir: str) -> None:
    monkeypatch.setenv("FAKE_NVPMODEL_REBOOT", "1")
    device = JetsonDevice(board.root)
    with pytest.raises(DeviceNotSupportedError, match="asked for a reboot"):
        device.set_power_mode(1)
    assert "pmode:0000" in _status(board) and device.power_mode == "15W"
    device.restore()
    assert _calls(board) == ["-m 1"]  # nothing to put back: the mode never changed


def test_without_root_the_error_says_how_to_fix_it(board: FakeBoard,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    wattcap_state_dir: str) -> None:
    monkeypatch.setenv("FAKE_NVPMODEL_DENY", "1")
    device = JetsonDevice(board.root)
    with pytest.raises(DevicePermissionError, match="Permission denied") as err:
        device.set_power_mode(1)
    assert "sudo" in (err.value.hint or "") and "pmode:0000" in _status(board)
    device.restore()


def test_an_unknown_mode_or_a_missing_nvpmodel_is_one_clear_error(
        board: FakeBoard, monkeypatch: pytest.MonkeyPatch, wattcap_state_dir: str) -> None:
    device = JetsonDevice(board.root)
    with pytest.raises(ValueError, match=r"no power mode 7; its modes: 0 \(15W\), 1 \(7W\)"):
        device.set_power_mode(7)
    monkeypatch.setenv("PATH", str(board.root / "empty"))
    monkeypatch.setattr(jetson, "NVPMODEL_PATH", str(board.root / "no-nvpmodel"))
    with pytest.raises(DeviceNotSupportedError, match="nvpmodel is not installed"):
        device.set_power_mode(1)
    device.restore()
    assert "pmode:0000" in _status(board)


def test_a_dry_run_plans_the_command_and_runs_nothing(board: FakeBoard) -> None:
    device = JetsonDevice(board.root, dry_run=True)
    assert device.set_power_mode(1) == 1
    assert [c[1:] for c in device.planned_commands] == [["-m", "1"]]
    assert _calls(board) == [] and "pmode:0000" in _status(board)


def test_the_emulated_board_switches_and_restores_its_modes() -> None:
    device = EmulatedDevice("jetson-nano")
    assert device.power_mode_ids() == [0, 1] and device.power_mode == "MAXN"
    top = max(device.frequencies_hz())
    device.set_power_mode(1)
    assert device.power_mode == "5W" and max(device.frequencies_hz()) <= 640 * MHZ
    assert device.current_frequency_hz() == max(device.frequencies_hz())
    device.restore()
    assert device.power_mode == "MAXN" and device.current_frequency_hz() == top
    with pytest.raises(ValueError, match="no power mode 2"):
        device.set_power_mode(2)


def test_profiling_every_power_mode_and_planning_it(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from wattcap.algorithms.planner import plan
    from wattcap.cli import app
    from wattcap.core.profile import ProfileTable
    from wattcap.measure.profiling import Profiler

    device = EmulatedDevice("jetson-nano")
    table = Profiler(device, "digits-cnn", batch_sizes=(8, 128)).run_power_modes()
    assert device.power_mode == "MAXN"  # the mode found is back
    assert (table.knob_kind, table.knob_values) == ("power_mode", [0, 1])
    assert len(table.points) == 4
    for b in (8, 128):
        maxn, five_w = table.lookup(b, 0), table.lookup(b, 1)
        assert maxn is not None and five_w is not None
        # the 5W mode caps the clock: slower, and (at the large batch) lower peak power
        assert five_w.seconds_per_sample > maxn.seconds_per_sample
    big_maxn, big_5w = table.lookup(128, 0), table.lookup(128, 1)
    assert big_5w is not None and big_maxn is not None
    assert big_5w.peak_power_w < big_maxn.peak_power_w
    # a cap between them: the plan runs the 5W mode, and says the knob is the mode
    cap = (big_5w.peak_power_w + big_maxn.peak_power_w) / 2
    result = plan(table, cap, margin_sigmas=0)
    chosen = result.choices["wattcap"]
    assert chosen.peak_power_w <= cap
    assert result.describe_knob(chosen.knob_value).startswith("power mode ")
    # the command line: one table per mode sweep, refused with options it cannot honour
    out = tmp_path / "modes.json"
    runner = CliRunner()
    done = runner.invoke(app, ["profile", "--device", "emulated:jetson-nano", "--model",
                               "digits-cnn", "--knob", "power-mode", "--batch-sizes", "8,32",
                               "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert ProfileTable.load(out).knob_kind == "power_mode"
    refused = runner.invoke(app, ["profile", "--model", "digits-cnn", "--knob", "power-mode",
                                  "--power-cap", "4", "--out", str(out)])
    assert refused.exit_code != 0 and "no --few-points, --refresh or --power-cap" in \
        refused.output


def test_the_emulated_power_limit_holds_the_average_and_profiles_as_a_knob(
        tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from wattcap.cli import app
    from wattcap.core.profile import ProfileTable
    from wattcap.devices.workload import workload_for
    from wattcap.measure.profiling import Profiler

    device = EmulatedDevice("jetson-nano")
    assert device.power_limit_range_w() is None  # a Jetson has no power limit
    with pytest.raises(DeviceNotSupportedError, match="power_limit_emulated"):
        device.set_power_limit_w(5.0)
    device.power_limit_emulated = True
    bounds = device.power_limit_range_w()
    assert bounds is not None
    low_w, high_w = bounds
    assert low_w < 2.0 < 9.0 < high_w
    cost = workload_for("resnet18").step_cost(64, device.spec.allocator_overhead_factor)
    free_s = device.execute(None, cost)
    free_w = device.model_step(cost, device.current_frequency_hz())[1]
    limit_w = device.set_power_limit_w(free_w - 1.0)
    limited_s = device.execute(None, cost)
    assert limited_s > free_s  # the limit lowered the clock
    step_hz = device._step_hz(cost)
    assert step_hz < device.current_frequency_hz()
    assert device.model_step(cost, step_hz)[1] <= limit_w  # the average holds the limit
    device.restore()
    assert device.power_limit_w() is None and device.execute(None, cost) == pytest.approx(free_s)
    # profiled over limits: a table of the power-limit knob, in mW, the limit found back
    table = Profiler(device, "resnet18", batch_sizes=(16, 64)).run_power_limits(
        [free_w - 1.0, high_w])
    assert table.knob_kind == "power_limit" and len(table.knob_values) == 2
    assert device.power_limit_w() is None
    low, high = table.knob_values
    for b in (16, 64):
        slow, fast = table.lookup(b, low), table.lookup(b, high)
        assert slow is not None and fast is not None
        assert slow.seconds_per_sample >= fast.seconds_per_sample
        assert slow.avg_power_w <= fast.avg_power_w + 0.1
    out = tmp_path / "limits.json"
    done = CliRunner().invoke(app, ["profile", "--model", "digits-cnn", "--knob", "power-limit",
                                    "--power-limits", "2,9", "--batch-sizes", "8",
                                    "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert ProfileTable.load(out).knob_values == [2000, 9000]
    bad = CliRunner().invoke(app, ["profile", "--model", "digits-cnn", "--knob", "power-limit",
                                   "--power-limits", "2,x", "--out", str(out)])
    assert bad.exit_code != 0 and "--power-limits takes watts" in bad.output


def test_training_with_a_power_mode_plan_switches_the_mode_and_puts_it_back(
        board: FakeBoard, wattcap_state_dir: str) -> None:
    """A power-mode plan on a Jetson (issue 28 item 2): the Session runs `nvpmodel -m ID` for
    the planned mode at the start, locks no clock inside it (the mode bounds the clock), and
    the mode found is back when the session closes; the record says which mode it ran in."""
    from wattcap.core.profile import ProfilePoint, ProfileTable
    from wattcap.runtime.session import Session

    device = JetsonDevice(board.root)
    points = [ProfilePoint(batch_size=8, knob_value=mode, peak_power_w=peak, avg_power_w=peak,
                           seconds_per_sample=spp, steps=5, readings=10)
              for mode, peak, spp in ((0, 9.0, 1.0e-3), (1, 6.0, 1.6e-3))]
    table = ProfileTable(device=device.name, device_kind="jetson", sensor_rail="VDD_IN",
                         sensor_period_s=0.05, model="digits-cnn", input_shape=[1, 8, 8],
                         batch_sizes=[8], knob_kind="power_mode", knob_values=[0, 1],
                         max_batch_size=8, mode="exhaustive", points=points,
                         points_measured=2, profiling_device_s=1.0, power_noise_w=0.0)
    found = _devfreq(board)
    session = Session(device, planning=PlanSettings(profile=table, margin_sigmas=0), cap=7.0,
                      device_handling=DeviceHandling(handle_signals=False))
    assert (session.batch_size, session.knob_value) == (8, 1)  # 15W breaks the cap
    session.start()
    assert _calls(board) == ["-m 1"] and device.power_mode == "7W"
    assert _devfreq(board)["governor"] == found["governor"]  # no clock lock inside the mode
    record = session.close()
    assert _calls(board) == ["-m 1", "-m 0"] and device.power_mode == "15W"
    assert _devfreq(board) == found
    assert record is not None and (record.knob_kind, record.knob_value) == ("power_mode", 1)
