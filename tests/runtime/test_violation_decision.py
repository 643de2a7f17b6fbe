"""A confirmed violation at the planned point is answered by a decision, in one step: the
plan's choice for the cap less the excess seen (the clock for a clock profile, the power limit
or power mode for those), not one clock level per two readings."""

from __future__ import annotations

import re

import pytest

from wattcap.core.profile import ProfileTable
from wattcap.devices import EmulatedDevice
from wattcap.devices.emulated import Drift
from wattcap.devices.spec import load_spec
from wattcap.measure.profiling import Profiler
from wattcap.runtime.session import Session
from wattcap.runtime.session_config import DeviceHandling, PlanSettings

MODEL = "digits32-cnn"
B = 32


def quiet_nano(**kwargs: object) -> EmulatedDevice:
    spec = load_spec("jetson-nano").model_copy(update={"sensor_noise_w": 0.01})
    return EmulatedDevice(spec, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def row_profile() -> ProfileTable:
    return Profiler(quiet_nano(), MODEL, batch_sizes=(B,)).run(exhaustive=True)


def _train(session: Session, steps: int) -> None:
    for _ in range(steps):
        with session.step():
            pass
    session.report(0.5)


def test_a_violation_at_the_planned_clock_moves_to_the_plans_clock_for_the_lower_cap(
        row_profile: ProfileTable) -> None:
    freqs = row_profile.knob_values
    top = row_profile.lookup(B, freqs[-1])
    assert top is not None
    cap_w = top.peak_power_w + 0.05  # the plan: b at the top clock, just under the cap
    # the board now leaks 30 % more GPU power (hot silicon): the planned point breaks the cap
    device = quiet_nano(drift=Drift(after_s=0.0, power_factor=1.3))
    session = Session(device, model=MODEL,
                      planning=PlanSettings(profile=row_profile, batch_size=B, margin_sigmas=0),
                      cap=cap_w, device_handling=DeviceHandling(handle_signals=False))
    assert session.frequency_hz == freqs[-1]
    with session:
        _train(session, 30)
    record = session.record
    assert record is not None and record.frequency_steps
    first = record.frequency_steps[0]
    assert first.from_hz == freqs[-1]
    found = re.search(r"the cap less the ([0-9.]+) W over it", first.reason)
    assert found, first.reason
    excess_w = float(found.group(1))
    assert excess_w > 0.1
    # exactly the plan's choice for the lower cap, more than one level down in one step
    expected = row_profile.frontier(cap_w - excess_w)[B].knob_value
    assert first.to_hz == expected < freqs[-2]
    # 30 % over is far beyond the profile's sensor noise: decided at its first reading
    assert row_profile.power_noise_w is not None
    assert "standard deviations of the sensor's noise" in first.reason
    assert first.time_s == record.cap_violations[0].start_s


def test_without_the_excess_the_old_rule_would_have_stayed_one_level_down(
        row_profile: ProfileTable) -> None:
    """The check above could not pass by accident: f*(b) for the cap itself is the planned
    clock, so a rule that asks for the cap alone steps one level."""
    freqs = row_profile.knob_values
    top = row_profile.lookup(B, freqs[-1])
    assert top is not None
    assert row_profile.frontier(top.peak_power_w + 0.05)[B].knob_value == freqs[-1]


def test_a_violation_under_a_power_limit_plan_moves_the_limit_in_one_step() -> None:
    limits_w = [3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    device = EmulatedDevice("jetson-nano")
    device.power_limit_emulated = True
    profile = Profiler(device, MODEL, batch_sizes=(B,)).run_power_limits(limits_w)
    nine = profile.lookup(B, 9000)
    assert nine is not None
    cap_w = nine.peak_power_w - 0.3  # the user's 9 W limit peaks over this cap
    runner = EmulatedDevice("jetson-nano")
    runner.power_limit_emulated = True
    session = Session(runner, model=MODEL,
                      planning=PlanSettings(profile=profile, batch_size=B, knob_value=9000,
                                            margin_sigmas=0),
                      cap=cap_w, device_handling=DeviceHandling(handle_signals=False))
    with session:
        _train(session, 30)
        limit_in_force_w = runner.power_limit_w()
    record = session.record
    assert record is not None
    moves = [s for s in record.frequency_steps if "power limit 9 W -> power limit" in s.reason]
    assert len(moves) == 1, [s.reason for s in record.frequency_steps]
    found = re.search(r"the cap less the ([0-9.]+) W over it", moves[0].reason)
    assert found
    expected = profile.frontier(cap_w - float(found.group(1)))[B].knob_value
    assert limit_in_force_w == pytest.approx(expected / 1000)
    assert record.knob_value == expected < 9000
