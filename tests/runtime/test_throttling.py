"""Throttling as a state of the world: on an emulated board that heats under sustained load
(and one hot at the start), every path that moves the clock — the plan at the start, the
drift re-plan, a moving cap, a noise-scale re-plan, the watchdog
(tests/runtime/test_watchdog.py) — meets a clock the
board does not follow, records the clamp and its cause, goes on under it, and the run reaches
its target instead of stopping."""

from __future__ import annotations

import pytest

from wattcap.core.profile import ProfileTable
from wattcap.data import get_dataset
from wattcap.devices import EmulatedDevice
from wattcap.devices.caps import ScheduleCap
from wattcap.devices.emulated_thermal import ThermalModel
from wattcap.devices.errors import FrequencyNotFollowedError
from wattcap.measure.profiling import Profiler
from wattcap.runtime.session import Session
from wattcap.runtime.session_config import CapSettings, DeviceHandling, PlanSettings
from wattcap.train.loop import TrainConfig, train_to_accuracy

MODEL = "digits32-cnn"
B = 32


def hot_nano(start_c: float | None = None, time_constant_s: float = 5.0) -> EmulatedDevice:
    """A Nano whose sustained training load at its top clocks would settle past its 85 °C
    trip point (20 °C per W: about 4 W of training settles near 105 °C, idle at 60 °C)."""
    return EmulatedDevice("jetson-nano", thermal=ThermalModel(
        resistance_c_per_w=20.0, time_constant_s=time_constant_s, start_c=start_c))


@pytest.fixture(scope="module")
def digits32() -> tuple:
    return get_dataset("digits-32").split(0.2, seed=0)


@pytest.fixture(scope="module")
def row_profile() -> ProfileTable:
    return Profiler(EmulatedDevice("jetson-nano"), MODEL, batch_sizes=(B,)).run(exhaustive=True)


def config(**update: object) -> TrainConfig:
    base = dict(model=MODEL, batch_size=B, target_accuracy=0.8, sample_budget=4096,
                eval_every_samples=256, max_eval_samples=200)
    return TrainConfig(**(base | update))


def test_a_board_hot_at_the_start_plans_under_its_clamp_and_trains(digits32: tuple) -> None:
    device = hot_nano(start_c=97.0, time_constant_s=600.0)
    freqs = device.frequencies_hz()
    device.idle(5 * device.sensor_period_s)  # it was busy before: the governor holds it down
    ceiling_hz = device.current_frequency_hz()
    assert ceiling_hz < freqs[-1]
    with pytest.raises(FrequencyNotFollowedError):  # the board refuses the top clock...
        device.set_frequency_hz(freqs[-1])
    train, test = digits32
    # ...the run does not: it trains to a target (a low one, three evaluations in: the clamp is
    # met by the plan at the start, and nothing later in the run moves the clock)
    record = train_to_accuracy(config(target_accuracy=0.3), train, test, device=device)
    assert record.reached
    plan_clamps = [c for c in record.clock_clamps if c.by == "plan"]
    assert plan_clamps and plan_clamps[0].requested_hz == freqs[-1]
    assert plan_clamps[0].cause == "thermal" and plan_clamps[0].ceiling_hz <= ceiling_hz
    assert any("held there by the board (thermal" in e for e in record.events)
    # what the record says ran is what the board allowed, never the refused clock
    assert record.frequency_hz is not None and record.frequency_hz < freqs[-1]
    assert device.run_frequency_hz() == freqs[-1]  # restored as found (the found lock)


@pytest.mark.slow(seconds=10)
def test_a_board_that_heats_during_the_run_is_re_planned_under_its_ceiling(
        digits32: tuple, row_profile: ProfileTable) -> None:
    device = hot_nano(time_constant_s=3.0)
    freqs = device.frequencies_hz()
    train, test = digits32
    record = train_to_accuracy(config(sample_budget=8192, target_accuracy=0.95), train, test,
                               device=device, profile=row_profile, power_cap_w=20.0)
    # the drift monitor saw the slower clock and re-planned; the re-measure met the clamp
    assert record.replans, record.events
    assert all(r.to_hz < freqs[-1] for r in record.replans)
    (clamp, *_) = [c for c in record.clock_clamps if c.by == "drift re-plan"]
    assert clamp.cause == "thermal" and clamp.ceiling_hz == record.replans[0].to_hz
    assert record.frequency_hz is not None and record.frequency_hz < freqs[-1]
    assert record.samples_seen > 0 and record.curve  # it trained on, no error


def test_a_moving_cap_that_rises_on_a_hot_board_goes_on_under_the_clamp(
        row_profile: ProfileTable) -> None:
    freqs = row_profile.knob_values
    low_w = row_profile.lookup(B, freqs[2]).peak_power_w + 0.1  # type: ignore[union-attr]
    device = hot_nano(start_c=97.0, time_constant_s=600.0)
    session = Session(device, model=MODEL,
                      planning=PlanSettings(profile=row_profile, batch_size=B),
                      cap=CapSettings(power_cap=ScheduleCap([(0.0, low_w), (0.5, 20.0)]),
                                      drift_tolerance=0.0),
                      device_handling=DeviceHandling(handle_signals=False))
    with session:
        while device.now_s() < 1.5:
            with session.step():
                pass
        session.report(0.5)
    record = session.record
    assert record is not None
    moving = [c for c in record.clock_clamps if c.by == "moving cap"]
    assert moving, record.events
    assert moving[0].requested_hz > moving[0].ceiling_hz and moving[0].cause == "thermal"
    assert record.steps > 0 and record.stop_reason is None


@pytest.mark.slow(seconds=8)
def test_a_noise_scale_re_plan_on_a_hot_board_goes_on_under_the_clamp() -> None:
    from wattcap.runtime.gns_replan import GnsSettings

    model = "digits-cnn"
    profile = Profiler(EmulatedDevice("jetson-nano"), model).run(exhaustive=True)
    train, test = get_dataset("digits").split(0.2, seed=0)
    device = EmulatedDevice("jetson-nano", thermal=ThermalModel(
        resistance_c_per_w=20.0, time_constant_s=600.0, start_c=97.0, step_interval_s=0.05))
    device.idle(0.5)  # hot and held down from the start
    cfg = TrainConfig(model=model, batch_size=64, target_accuracy=0.99, sample_budget=1024,
                      eval_every_samples=256, lr_ref=2e-3, batch_size_ref=64)
    record = train_to_accuracy(cfg, train, test, device=device, power_cap_w=4.5,
                               profile=profile, efficiency=GnsSettings(samples=512))
    gns = [c for c in record.clock_clamps if c.by == "gns re-plan"]
    assert gns and gns[0].cause == "thermal" and gns[0].ceiling_hz < gns[0].requested_hz
    assert record.samples_seen == 1024  # it trained on after the re-plan
    assert any(e.startswith("gns re-plan at 512 samples") for e in record.events)


@pytest.fixture(scope="module")
def full_profile() -> ProfileTable:
    return Profiler(EmulatedDevice("jetson-nano"), MODEL).run(exhaustive=True)


@pytest.mark.parametrize("given_batch_size", [False, True])
def test_a_clamp_at_the_start_re_plans_the_batch_size_under_the_ceiling(
        full_profile: ProfileTable, given_batch_size: bool) -> None:
    from wattcap.algorithms.planner import plan

    cap_w = 4.5
    planned = plan(full_profile, cap_w).choices["wattcap"]
    device = hot_nano(start_c=97.0, time_constant_s=600.0)
    device.idle(3.0)  # three polling intervals past the trip: three levels down
    ceiling_hz = device.current_frequency_hz()
    assert ceiling_hz < planned.knob_value
    under = plan(full_profile.up_to(ceiling_hz), cap_w).choices["wattcap"]
    # on this profile the best batch size under the ceiling is another than the plan's
    assert under.batch_size != planned.batch_size
    planning = PlanSettings(profile=full_profile, batch_size=planned.batch_size) \
        if given_batch_size else PlanSettings(profile=full_profile)
    with Session(device, model=MODEL, planning=planning,
                 cap=CapSettings(power_cap=cap_w, policy="frequency" if given_batch_size
                                 else None),
                 device_handling=DeviceHandling(handle_signals=False)) as session:
        if given_batch_size:  # the user's batch size stays; the clock is the ceiling
            assert (session.batch_size, session.frequency_hz) == (planned.batch_size,
                                                                  ceiling_hz)
            assert not any("re-planned under the board's ceiling" in e
                           for e in session.events)
        else:
            assert (session.batch_size, session.frequency_hz) == (under.batch_size,
                                                                  under.knob_value)
            assert device.current_frequency_hz() == under.knob_value
            assert any(f"plan: re-planned under the board's ceiling of {ceiling_hz / 1e6:.1f} "
                       f"MHz: b={planned.batch_size} -> {under.batch_size}" in e
                       for e in session.events)


def test_a_board_that_cools_is_followed_back_up_to_the_clock_it_refused(
        digits32: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    from wattcap.runtime import device_guard

    # a probe a device second apart (10 s in use) keeps this test's training short; what is
    # tested is that the run climbs back once the board allows it, and not before a probe
    monkeypatch.setattr(device_guard, "CLIMB_BACK_PROBE_S", 1.0)
    # hot at the start (past the trip: a level down), then cooled by a light load: 5 °C per W
    # settles near 45 °C, and the governor lifts its clamp a level a second
    device = EmulatedDevice("jetson-nano", thermal=ThermalModel(
        resistance_c_per_w=5.0, time_constant_s=5.0, start_c=97.0))
    top_hz = device.frequencies_hz()[-1]
    device.idle(1.0)
    with pytest.raises(FrequencyNotFollowedError):
        device.set_frequency_hz(top_hz)
    train, test = digits32
    record = train_to_accuracy(config(target_accuracy=0.99, eval_every_samples=512,
                                      sample_budget=2048),
                               train, test, device=device)
    (clamp,) = record.clock_clamps
    assert clamp.by == "plan" and clamp.requested_hz == top_hz and clamp.ceiling_hz < top_hz
    back = [e for e in record.events if e.startswith("the board allows a higher clock again")]
    assert back and back[-1].endswith("(plan's clock, which it had refused)")
    assert record.frequency_hz == top_hz  # the record's clock is the one the run ended at


def test_a_run_re_planned_under_the_ceiling_goes_back_to_the_plan_when_the_board_cools(
        full_profile: ProfileTable, monkeypatch: pytest.MonkeyPatch) -> None:
    from wattcap.algorithms.planner import plan
    from wattcap.runtime import device_guard

    monkeypatch.setattr(device_guard, "CLIMB_BACK_PROBE_S", 1.0)  # as in the test above
    cap_w = 4.5
    planned = plan(full_profile, cap_w).choices["wattcap"]
    # hot at the start (three levels down), then cooled by the load: 5 °C per W, 20 s
    device = EmulatedDevice("jetson-nano", thermal=ThermalModel(
        resistance_c_per_w=5.0, time_constant_s=20.0, start_c=97.0))
    device.idle(3.0)
    ceiling_hz = device.current_frequency_hz()
    under = plan(full_profile.up_to(ceiling_hz), cap_w).choices["wattcap"]
    assert under.batch_size != planned.batch_size
    with Session(device, model=MODEL, planning=PlanSettings(profile=full_profile),
                 cap=cap_w, device_handling=DeviceHandling(handle_signals=False)) as session:
        assert (session.batch_size, session.frequency_hz) == (under.batch_size,
                                                              under.knob_value)
        while session.batch_size != planned.batch_size and device.now_s() < 60.0:
            for _ in range(10):
                with session.step():
                    pass  # the emulator models the step from its cost: no math needed here
            session.report(0.5)
        assert (session.batch_size, session.frequency_hz) == (planned.batch_size,
                                                              planned.knob_value)
        assert device.current_frequency_hz() == planned.knob_value
        assert any(f"back to the plan, b={under.batch_size} -> {planned.batch_size}" in e
                   for e in session.events)
