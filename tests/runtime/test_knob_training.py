"""Training with a plan of another knob than the GPU clock (issue 28 item 2): the Session
applies the planned power limit or power mode, leaves the clock to the board, watches the cap
and restores what it found; what acts on clocks refuses such a profile in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from wattcap.cli import app
from wattcap.cli.train import NOT_REACHED_EXIT_CODE
from wattcap.core.knob import KnobError
from wattcap.core.profile import ProfileTable
from wattcap.core.run import RunRecord
from wattcap.devices import EmulatedDevice
from wattcap.devices.errors import DeviceNotSupportedError
from wattcap.measure.profiling import Profiler
from wattcap.runtime.errors import SessionError
from wattcap.runtime.session import Session
from wattcap.runtime.session_config import DeviceHandling, PlanSettings

MODEL = "digits-cnn"


@pytest.fixture(scope="module")
def limit_profile() -> ProfileTable:
    device = EmulatedDevice("jetson-nano")
    device.power_limit_emulated = True
    return Profiler(device, MODEL, batch_sizes=(8, 32)).run_power_limits([3.0, 9.0])


@pytest.fixture(scope="module")
def mode_profile() -> ProfileTable:
    return Profiler(EmulatedDevice("jetson-nano"), MODEL, batch_sizes=(8, 32)).run_power_modes()


def _train_steps(session: Session, steps: int = 20) -> None:
    for _ in range(steps):
        with session.step():
            pass
    session.report(0.5)


def test_a_power_limit_plan_is_applied_watched_and_restored(limit_profile) -> None:
    device = EmulatedDevice("jetson-nano")
    device.power_limit_emulated = True
    found_hz = device.requested_frequency_hz()
    session = Session(device, model=MODEL,
                      planning=PlanSettings(profile=limit_profile, batch_size=32, knob_value=3000),
                      device_handling=DeviceHandling(handle_signals=False))
    assert session.frequency_hz is None and session.knob_kind == "power_limit"
    with session:
        assert device.power_limit_w() == pytest.approx(3.0)
        assert device.requested_frequency_hz() == found_hz  # the clock is the board's
        _train_steps(session)
    assert device.power_limit_w() is None  # none was set before: none after
    record = session.record
    assert record is not None
    assert (record.knob_kind, record.knob_value) == ("power_limit", 3000)
    assert any("power limit 3 W applied" in e for e in record.events)
    assert any("drift monitor off" in e for e in record.events)
    # the limit holds the average: measured below it, up to the sensor's noise
    assert record.avg_power_w is not None and record.avg_power_w <= 3.0 + 0.1


def test_a_power_mode_plan_runs_in_that_mode_and_puts_the_mode_found_back(
        mode_profile) -> None:
    device = EmulatedDevice("jetson-nano")
    maxn, five_w = mode_profile.lookup(32, 0), mode_profile.lookup(32, 1)
    assert maxn is not None and five_w is not None
    cap = (maxn.peak_power_w + five_w.peak_power_w) / 2  # only the 5W mode fits at b=32
    session = Session(device, model=MODEL,
                      planning=PlanSettings(profile=mode_profile, batch_size=32, margin_sigmas=0),
                      cap=cap, device_handling=DeviceHandling(handle_signals=False))
    assert session.knob_value == 1
    with session:
        assert device.power_mode == "5W"
        _train_steps(session)
    assert device.power_mode == "MAXN"
    record = session.record
    assert record is not None and (record.knob_kind, record.knob_value) == ("power_mode", 1)
    assert record.peak_power_w is not None and not record.cap_violations


def test_what_acts_on_clocks_refuses_another_knob_in_one_line(limit_profile) -> None:
    device = EmulatedDevice("jetson-nano")
    device.power_limit_emulated = True
    with pytest.raises(SessionError, match="give knob_value, not frequency_hz"):
        Session(device, model=MODEL,
                planning=PlanSettings(profile=limit_profile, batch_size=32,
                                      frequency_hz=max(device.frequencies_hz())))
    with pytest.raises(SessionError, match="give the profile"):
        Session(device, model=MODEL, planning=PlanSettings(batch_size=32, knob_value=3000))
    with pytest.raises(KnobError, match="following a moving cap acts on the GPU clock"):
        Session(device, model=MODEL, planning=PlanSettings(profile=limit_profile),
                cap="solar:seed=1")


def test_a_device_without_the_knob_refuses_before_anything_changes(limit_profile) -> None:
    device = EmulatedDevice("jetson-nano")  # no emulated power limit: a Jetson has none
    with pytest.raises(DeviceNotSupportedError, match="has no power limit"):
        device.check_knob("power_limit", 3000)
    with pytest.raises(DeviceNotSupportedError, match=r"its power modes: 0 \(MAXN\), 1 \(5W\)"):
        device.check_knob("power_mode", 7)
    session = Session(device, model=MODEL,
                      planning=PlanSettings(profile=limit_profile, batch_size=32, knob_value=3000),
                      device_handling=DeviceHandling(handle_signals=False))
    found_hz = device.requested_frequency_hz()
    with pytest.raises(DeviceNotSupportedError):
        session.start()
    assert device.requested_frequency_hz() == found_hz and device.power_limit_w() is None


def test_train_runs_a_power_mode_plan_from_the_command_line(mode_profile,
                                                           tmp_path: Path) -> None:
    profile = tmp_path / "modes.json"
    mode_profile.save(profile)
    out = tmp_path / "run.json"
    maxn = mode_profile.lookup(32, 0)
    assert maxn is not None
    result = CliRunner().invoke(app, [
        "train", "--profile", str(profile), "--model", MODEL, "--data", "digits",
        "--power-cap", f"{maxn.peak_power_w - 0.01:.2f}", "--method", "baseline-1",
        "--target-accuracy", "0.5", "--sample-budget", "512", "--margin-sigmas", "0",
        "--out", str(out)], env={"COLUMNS": "200"})
    record = RunRecord.load(out)
    assert result.exit_code == (0 if record.reached else NOT_REACHED_EXIT_CODE), result.output
    assert "batch size 32 at power mode 1" in " ".join(result.output.split())
    assert (record.knob_kind, record.knob_value) == ("power_mode", 1)
    assert record.power_cap_w is not None and not record.cap_violations
