"""A cap that moves during a run (issue 19), on the emulated Nano with digits32-cnn: a cap drop
mid-run is obeyed within one sensor period, the batch size and learning rate change at the
next step with the optimiser's state kept, a cap below every configuration pauses training
and a rising cap resumes it, a kill mid-segment resumes to the same result, a battery that
empties pauses the run instead of violating and ends it, a small battery keeps the time
objective within the energy it has left, and the record keeps the segments and a small time
series."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.fakes.power_supply import class_root, laptop
from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.algorithms.energy_budget import EnergyBudget
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.profile import ProfileTable
from wattcap.core.run import RunRecord, TrainConfig, scaled_learning_rate
from wattcap.data import get_dataset
from wattcap.devices import EmulatedDevice, PowerReading
from wattcap.devices.caps import BatteryCap, CallableCap, PowerSupplyCap, ScheduleCap
from wattcap.measure.profiling import Profiler
from wattcap.models import get_model_spec
from wattcap.runtime.cap_follower import CapFollower, ConfigChooser
from wattcap.runtime.sampling import SessionBatchSampler
from wattcap.runtime.session import Session, SessionError, SessionStatus
from wattcap.runtime.session_config import CapSettings, Goal, PlanSettings
from wattcap.train.loop import train_to_accuracy

MODEL = "digits32-cnn"
PERIOD_S = 0.05  # the emulated Nano's sensor period
#: 4.5 W: b=32 at 921.6 MHz; 3.2 W: b=16 at 691.2 MHz; 2.0 W: below every configuration (2.49 W
#: + the planner's margin) but above the idle power at the lowest frequency (1.53 W); 4.0 W: b=32
#: at 844.8 MHz. Change times fall between sensor ticks (every 50 ms): each is read at the next.
SCHEDULE = [(0.0, 4.5), (0.52, 3.2), (1.03, 2.0), (1.61, 4.0)]
DROP_TICK_S, PAUSE_TICK_S, RESUME_TICK_S = 0.55, 1.05, 1.65
#: the runs' target: reached at 800-1,300 samples, 2.3-3 s of device time, 12-28 steps after the
#: cap rises (1.65 s), so a run sees the drop, the pause and the rise and trains on in the last
#: segment; a higher target only adds steps of that segment (0.9 took 1,900-2,400 samples)
TARGET = 0.75


@pytest.fixture(scope="module")
def profile() -> ProfileTable:
    return Profiler(EmulatedDevice("jetson-nano"), MODEL, batch_sizes=(8, 16, 32)).run(
        exhaustive=True)


@pytest.fixture(scope="module")
def efficiency() -> EfficiencyVector:
    """Small batches need fewer samples (as on the bundled digits): the plan moves to a
    smaller batch when the cap drops."""
    return vector_from_samples(
        {8: [600], 16: [700], 32: [1000]}, sample_budget=4096, model=MODEL,
        input_shape=[1, 32, 32],
        dataset="proxy", task="image-classification", target_accuracy=0.7, seeds=[0])


@pytest.fixture(scope="module")
def digits32() -> tuple:
    return get_dataset("digits-32").split(0.2, seed=0)


def test_the_plan_for_each_cap_of_the_schedule(profile: ProfileTable,
                                               efficiency: EfficiencyVector) -> None:
    # what the other tests rely on, stated once
    chooser = ConfigChooser(profile, "replan", 32, None, efficiency=efficiency)
    picks = {cap: chooser.choose(cap, 32) for _, cap in SCHEDULE}
    assert [(t.batch_size, t.frequency_hz) if t else None for t in picks.values()] == [
        (32, 921_600_000), (16, 691_200_000), None, (32, 844_800_000)]
    assert chooser.lowest_cap_w == pytest.approx(chooser.replanner.lowest_feasible_cap_w)
    assert chooser.lowest_cap_w > min(p.peak_power_w for p in profile.points)  # the margin
    assert EmulatedDevice("jetson-nano").idle_power_w(76_800_000) < 2.0 < chooser.lowest_cap_w


# -- a user's loop under a moving cap ------------------------------------------------------------


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_a_user_loop_follows_a_cap_that_drops_pauses_and_rises(
    profile: ProfileTable, efficiency: EfficiencyVector, digits32: tuple
) -> None:
    train, test = digits32
    x_test, y_test = test.to_tensors()
    statuses: list[SessionStatus] = []
    session = Session(EmulatedDevice("jetson-nano"), model=MODEL,
                      planning=PlanSettings(profile=profile, efficiency=efficiency),
                      cap=CapSettings(power_cap=ScheduleCap(SCHEDULE), batch_size_hold_s=0.0),
                      goal=Goal(target_accuracy=TARGET, sample_budget=4096),
                      reporting=statuses.append)  # this schedule moves twice a second: follow it
    device = session.device
    assert device is not None
    steps: list[tuple[float, int, int, float, int]] = []  # start, b, f, lr, samples
    torch.manual_seed(0)
    with session:
        net = get_model_spec(MODEL).build(num_classes=10).train()
        optimizer = torch.optim.Adam(net.parameters(), lr=session.learning_rate)
        loader = DataLoader(TensorDataset(*train.to_tensors()),
                            batch_sampler=SessionBatchSampler(session, len(train)))
        next_eval = 128
        for x, y in loader:
            session.apply_learning_rate(optimizer)
            steps.append((device.now_s(), session.batch_size, device.current_frequency_hz(),
                          optimizer.param_groups[0]["lr"], len(x)))
            with session.step(samples=len(x)):
                optimizer.zero_grad()
                nn.functional.cross_entropy(net(x), y).backward()
                optimizer.step()
            if session.samples >= next_eval:
                next_eval += 128
                with torch.no_grad():
                    session.report(float((net(x_test).argmax(1) == y_test).float().mean()))
            if session.done:
                break
    record = session.record
    assert record is not None and record.reached
    # the batch size changes at the first step that starts after the tick that read the drop
    before = [s for s in steps if s[0] < DROP_TICK_S]
    after = [s for s in steps if DROP_TICK_S < s[0] < PAUSE_TICK_S]
    assert {(b, f) for _, b, f, _, _ in before} == {(32, 921_600_000)}
    assert after and {(b, f) for _, b, f, _, _ in after} == {(16, 691_200_000)}
    resumed = [s for s in steps if s[0] > RESUME_TICK_S]
    assert resumed and {(b, f) for _, b, f, _, _ in resumed} == {(32, 844_800_000)}
    # the samples drawn follow the batch size, and the learning rate follows the √ rule
    for _, b, _, lr, n in steps:
        assert n == b
        assert lr == pytest.approx(scaled_learning_rate(session.lr_ref, session.batch_size_ref,
                                                        b))
    # one Adam state all along: its step count is every step's, not restarted at a change
    state = optimizer.state[next(iter(net.parameters()))]
    assert int(state["step"]) == len(steps) == record.steps
    # the cap is kept: no violation lasts longer than one sensor period
    assert all(v.duration_s <= PERIOD_S + 1e-9 for v in record.cap_violations)
    # the frequency is lowered within one period of the drop, in the middle of the step
    lowered = [t for t, f in device.frequency_log if DROP_TICK_S - 1e-9 <= t]
    assert lowered and lowered[0] == pytest.approx(DROP_TICK_S)
    # the pause: no step between the tick that read 2.0 W and the one that read 4.0 W
    assert not [s for s in steps if PAUSE_TICK_S + 1e-9 < s[0] < RESUME_TICK_S - 1e-9]
    paused = [s for s in record.segments if s.paused]
    assert len(paused) == 1
    assert paused[0].start_s == pytest.approx(PAUSE_TICK_S)
    assert paused[0].end_s == pytest.approx(RESUME_TICK_S)
    assert paused[0].frequency_hz == 76_800_000
    # the step in flight when the cap fell finished (at the frequency that overdraws least):
    # at most the one reading that averages its end is above the cap, then idling is under it
    assert paused[0].steps <= 1 and paused[0].readings_over_cap <= 1
    assert not any("no setting can meet it" in e for e in record.events)
    assert record.paused_s == pytest.approx(RESUME_TICK_S - PAUSE_TICK_S, abs=PERIOD_S)
    assert any(s.paused for s in statuses) and not statuses[-1].paused
    assert any("training paused" in e for e in record.events)
    assert any("training resumed" in e for e in record.events)
    # samples-to-target counts every segment's samples
    assert sum(s.samples for s in record.segments) == record.samples_seen
    assert record.samples_to_target is not None
    assert [(s.batch_size, s.paused) for s in record.segments] == [
        (32, False), (16, False), (16, True), (32, False)]


# -- wattcap's own loop: cadence, kill and resume mid-segment -----------------------------------


class Killed(Exception):
    pass


def run(profile: ProfileTable, efficiency: EfficiencyVector, digits32: tuple,
        checkpoint_dir: Path | None = None, kill_after_s: float | None = None,
        schedule: list[tuple[float, float]] = SCHEDULE, batch_size_hold_s: float = 0.0,
        target_accuracy: float = TARGET, sample_budget: int = 4096,
        max_eval_samples: int = 200) -> RunRecord:
    train, test = digits32
    config = TrainConfig(model=MODEL, batch_size=32, target_accuracy=target_accuracy,
                         sample_budget=sample_budget, eval_every_samples=128,
                         max_eval_samples=max_eval_samples)

    def kill(point) -> None:  # noqa: ANN001
        if kill_after_s is not None and point.device_time_s > kill_after_s:
            raise Killed

    return train_to_accuracy(config, train, test, device=EmulatedDevice("jetson-nano"),
                             power_cap=ScheduleCap(schedule), profile=profile,
                             efficiency=efficiency, checkpoint_dir=checkpoint_dir,
                             on_eval=kill, batch_size_hold_s=batch_size_hold_s)


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_the_batch_size_is_held_under_a_flickering_cap_unless_it_cannot_meet_it(
    profile: ProfileTable, efficiency: EfficiencyVector, digits32: tuple
) -> None:
    """A cap that flickers (clouds over a panel) changes the batch size, and its learning
    rate, at most once per hold; a cap the batch size in use cannot meet at any clock is
    obeyed at once. (The emulated run lasts seconds: the hold is 1 s here, 30 s by default.)
    The rows' lowest planned peaks differ by the sensor's noise (the lowest clock draws about
    the same at every batch size), so the caps are read from the profile: a low cap whose
    plan is a batch size with another's row reaching lower, and a cap only that other meets."""
    chooser = ConfigChooser(profile, "replan", 32, None, efficiency=efficiency)
    levels = sorted({p.peak_power_w for p in chooser.profile.points})
    floors = {b: min(p.peak_power_w for p in row) for b, row in chooser.profile.rows().items()}
    low, in_use = next((cap, t.batch_size) for cap in levels
                       if (t := chooser.choose(cap, 32)) is not None and t.batch_size != 32
                       and min(floors.values()) < floors[t.batch_size])
    # a cap the batch size in use at `low` cannot meet at any clock and another can
    only = next(cap for cap in levels if chooser.best_for_batch_size(in_use, cap) is None
                and any(chooser.best_for_batch_size(b, cap) for b in floors if b != in_use))
    # `only` lasts long enough for the step in flight (slowed to the lowest clock) to end
    flicker = [(0.0, 4.5), (0.3, low), (0.6, 4.5), (0.9, low), (1.3, only), (2.0, 4.5),
               (2.3, low), (2.6, 4.5), (2.9, low)]
    # the schedule's 3 s take some 640 samples; the next evaluation's 768 end past 4 s (at b=8,
    # 230 MHz under `low`), what follows only slows the test. The target is out of reach: the
    # evaluations only set where plans are taken, so a few samples each read the same (half
    # of these runs' time would be evaluating 200)
    record = run(profile, efficiency, digits32, schedule=flicker, batch_size_hold_s=1.0,
                 target_accuracy=0.9999, sample_budget=768, max_eval_samples=50)
    # a plan whose batch size never ran a step (the cap moved again while the step of the
    # previous batch size was in flight) changed nothing
    runs = [s for s in record.segments if not s.paused and s.steps > 0]
    assert runs[-1].end_s > 3.0  # the run saw the whole schedule
    changes = [(later.start_s, earlier.batch_size, later.cap_w)
               for earlier, later in zip(runs, runs[1:], strict=False)
               if later.batch_size != earlier.batch_size]
    assert len(changes) >= 3  # it does follow the cap, only not at every flicker
    for (t0, _, _), (t1, before, cap_w) in zip(changes, changes[1:], strict=False):
        if t1 - t0 < 1.0:  # only where the batch size in use could not meet the new cap
            assert chooser.best_for_batch_size(before, cap_w) is None, changes
    assert any(cap_w == only and t1 - t0 < 1.0
               for (t0, _, _), (t1, _, cap_w) in zip(changes, changes[1:], strict=False))
    assert any("the batch size is held until" in event for event in record.events)
    # without the hold, the flicker moves the batch size at nearly every change of the cap
    free = run(profile, efficiency, digits32, schedule=flicker, target_accuracy=0.9999,
               sample_budget=768, max_eval_samples=50)
    free_runs = [s for s in free.segments if not s.paused and s.steps > 0]
    assert sum(b.batch_size != a.batch_size
               for a, b in zip(free_runs, free_runs[1:], strict=False)) > len(changes)


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_our_loop_resumes_mid_segment_to_the_same_result(
    profile: ProfileTable, efficiency: EfficiencyVector, digits32: tuple, tmp_path: Path
) -> None:
    full = run(profile, efficiency, digits32)
    assert full.reached
    assert not full.drift_events  # the drift monitor follows the batch size and the cap
    assert [p.samples % 128 for p in full.curve] == [0] * len(full.curve)  # the same cadence
    assert [s.batch_size for s in full.segments if not s.paused][:2] == [32, 16]
    with pytest.raises(Killed):
        run(profile, efficiency, digits32, tmp_path, kill_after_s=0.6)
    resumed = run(profile, efficiency, digits32, tmp_path)
    # the checkpoint it resumed from lies inside the b=16 segment, not at a change of the cap
    before = [s for s in full.segments if not s.paused]
    start = sum(s.samples for s in full.segments[:full.segments.index(before[1])])
    assert resumed.resumed_from_samples is not None
    assert start < resumed.resumed_from_samples < start + before[1].samples
    assert [p.accuracy for p in resumed.curve] == [p.accuracy for p in full.curve]
    assert resumed.samples_to_target == full.samples_to_target
    assert resumed.time_to_accuracy_s == pytest.approx(full.time_to_accuracy_s, rel=1e-6)
    shape = [(s.batch_size, s.frequency_hz, s.paused, s.samples, s.steps)
             for s in full.segments]
    assert [(s.batch_size, s.frequency_hz, s.paused, s.samples, s.steps)
            for s in resumed.segments] == shape
    assert resumed.paused_s == pytest.approx(full.paused_s, abs=1e-6)


# -- a battery that empties ----------------------------------------------------------------------


def test_an_emptying_battery_pauses_the_run_instead_of_violating_and_ends_it(
    profile: ProfileTable, efficiency: EfficiencyVector, digits32: tuple
) -> None:
    train, test = digits32
    battery = BatteryCap(capacity_wh=0.001, max_power_w=5.0)
    config = TrainConfig(model=MODEL, batch_size=32, target_accuracy=0.99, sample_budget=4096,
                         eval_every_samples=128, max_eval_samples=200)
    record = train_to_accuracy(config, train, test, device=EmulatedDevice("jetson-nano"),
                               power_cap=battery, profile=profile, efficiency=efficiency)
    assert not record.reached and record.stop_reason is not None
    assert "never rise" in record.stop_reason
    assert record.samples_seen < config.sample_budget
    # the batch size stepped down as the battery's power fell, then training paused
    trained = [s for s in record.segments if not s.paused]
    assert [s.batch_size for s in trained] == sorted((s.batch_size for s in trained),
                                                     reverse=True)
    assert record.segments[-1].paused
    assert record.segments[-1].cap_w is not None
    assert record.segments[-1].cap_w < ConfigChooser(profile, "replan", 32, None).lowest_cap_w
    assert all(v.duration_s <= PERIOD_S + 1e-9 for v in record.cap_violations)
    # the battery was drained by what the device drew (converter losses included), reading by
    # reading: the record's energy but for the time after the last reading (under a sensor
    # period, at that reading's power), which the run ended before a reading measured
    delivered_j = battery.drawn_j * battery.converter_efficiency
    assert record.peak_power_w is not None
    assert 0.0 < record.energy_j - delivered_j < PERIOD_S * record.peak_power_w
    assert record.curve and all(p.samples % 128 == 0 for p in record.curve)
    # no configuration's rest of the run fits in what such a battery holds: the least energy
    # is taken, and the record says so once, not every period
    assert sum("no configuration fits" in event for event in record.events) == 1


#: an event where the energy left moved the time objective's choice
ENERGY_MOVED = re.compile(r"energy left ([\d.]+) J: (b=\d+ at [\d.]+ MHz) would need ([\d.]+) J "
                          r"for the rest of the run, (b=\d+ at [\d.]+ MHz) fits \(([\d.]+) J\)")


def test_a_small_battery_keeps_the_time_objective_within_the_energy_left(
    profile: ProfileTable, digits32: tuple
) -> None:
    """r_b under which b=16 reaches the target as fast as b=32 for less energy (its power is
    lower), and a battery whose energy above the lowest cap lies between the two: the plain
    time choice (b=32) would empty it before the target, so the run starts on the fastest
    configuration whose predicted energy fits, and every plan the energy moved fits."""
    train, test = digits32
    efficiency = vector_from_samples(
        {8: [600], 16: [600], 32: [1000]}, sample_budget=4096, model=MODEL,
        input_shape=[1, 32, 32], dataset="proxy", task="image-classification",
        target_accuracy=0.7, seeds=[0])
    chooser = ConfigChooser(profile, "replan", 32, None, efficiency=efficiency)
    plain = chooser.choose(5.0, 32)
    assert plain is not None and plain.batch_size == 32
    whole_run = EnergyBudget(0.0, 0, 32)
    plain_j = chooser.rest_energy_j(plain, whole_run)
    least_j = float(chooser.replanner.candidates.energy_j.min())
    assert plain_j is not None and least_j < plain_j
    # the capacity whose energy above the lowest cap is halfway between the two
    per_wh_j = BatteryCap(capacity_wh=1.0, max_power_w=5.0).energy_left_j(chooser.lowest_cap_w)
    assert per_wh_j is not None
    battery = BatteryCap(capacity_wh=(least_j + plain_j) / 2 / per_wh_j, max_power_w=5.0)
    left_j = battery.energy_left_j(chooser.lowest_cap_w)
    assert left_j is not None
    expected = chooser.choose(battery.cap_w(0.0), 32, EnergyBudget(left_j, 0, 32))
    assert expected is not None and expected != plain
    assert chooser.energy_rule is not None and chooser.energy_rule.fits
    config = TrainConfig(model=MODEL, batch_size=32, target_accuracy=0.99, sample_budget=4096,
                         eval_every_samples=128, max_eval_samples=200)
    record = train_to_accuracy(config, train, test, device=EmulatedDevice("jetson-nano"),
                               power_cap=battery, profile=profile, efficiency=efficiency)
    first = record.segments[0]
    assert (first.batch_size, first.frequency_hz) == (expected.batch_size,
                                                      expected.frequency_hz)
    assert f"energy left {left_j:.1f} J" in first.reason and plain.describe() in first.reason
    moved = [m for event in record.events if (m := ENERGY_MOVED.search(event))]
    assert moved
    for match in moved:
        left, plain_text, plain_rest, chosen_text, chosen_rest = match.groups()
        assert plain_text != chosen_text
        # (printed to 0.1 J: rounding keeps the order)
        assert float(chosen_rest) <= float(left) <= float(plain_rest), match.group(0)
    # as the battery drains (its cap falling, the clock with it) the prediction may run out
    # before the run does: then the least energy, said once
    assert sum("no configuration fits" in event for event in record.events) <= 1


def test_a_real_battery_under_a_steady_cap_is_checked_again_as_it_drains(
    profile: ProfileTable, tmp_path: Path
) -> None:
    """A laptop battery read from the power-supply class (a fake sysfs tree) under a steady
    5 W ceiling: the cap never moves, but the energy above the reserve does. While it holds
    plenty the plain time choice runs; once the gauge reports an energy between what the plain
    choice and the thriftiest one need, the next read re-plans, with the event saying why."""
    efficiency = vector_from_samples(
        {8: [600], 16: [600], 32: [1000]}, sample_budget=4096, model=MODEL,
        input_shape=[1, 32, 32], dataset="proxy", task="image-classification",
        target_accuracy=0.7, seeds=[0])
    battery, _ = laptop(tmp_path, energy_now_wh=30.0)  # 20 Wh above a 20 % reserve of 50 Wh
    source = PowerSupplyCap(reserve_fraction=0.2, max_power_w=5.0, period_s=0.1,
                            root=class_root(tmp_path))
    device = EmulatedDevice("jetson-nano")
    chooser = ConfigChooser(profile, "replan", 32, None, efficiency=efficiency)
    follower = CapFollower(source, device, chooser, 32, device.current_frequency_hz())
    plain = follower.begin()
    assert plain == chooser.choose(5.0, 32) and chooser.energy_rule is None
    plain_j = chooser.rest_energy_j(plain, EnergyBudget(0.0, 0, 32))
    assert plain_j is not None
    left_j = (float(chooser.replanner.candidates.energy_j.min()) + plain_j) / 2
    battery.set(energy_now=round((10.0 + left_j / 3600) * 1e6))
    with device.sensor_ticks(follower):
        device.idle(0.3)
    assert source.cap_w(0.3) == 5.0  # the cap did not move
    expected = chooser.choose(5.0, 32, EnergyBudget(source.energy_left_j() or 0.0, 0, 32))
    assert expected is not None and expected != plain
    assert follower.target == expected
    assert any(event.endswith(f"re-planned {plain.describe()} -> {expected.describe()}")
               and "energy left changed; energy left" in event for event in follower.events)


# -- the follower's pieces -----------------------------------------------------------------------


def test_a_cap_below_the_idle_power_is_reported_not_hidden(profile: ProfileTable) -> None:
    device = EmulatedDevice("jetson-nano")
    chooser = ConfigChooser(profile, "replan", 32, None)
    follower = CapFollower(CallableCap(lambda t: 5.0 if t < 0.1 else 1.0), device, chooser,
                           32, device.current_frequency_hz())
    follower.begin()
    with device.sensor_ticks(follower):
        device.idle(0.15)
        assert follower.paused
        follower.start_idling()  # what the Session does between steps
        device.idle(0.4)
    assert follower.paused and device.current_frequency_hz() == device.frequencies_hz()[0]
    assert follower.segments[-1].paused and follower.segments[-1].readings_over_cap > 0
    assert any("no setting can meet it" in e for e in follower.events)
    assert follower.stopped is None  # a function may rise again


def test_a_fixed_policy_keeps_its_configuration_and_pauses_under_it(
    profile: ProfileTable,
) -> None:
    chooser = ConfigChooser(profile, "fixed", 16, 614_400_000)
    point = chooser.profile.lookup(16, 614_400_000)  # its peak with the planner's margin
    assert point is not None
    assert chooser.choose(5.0, 16) == chooser.choose(point.peak_power_w, 16)
    assert chooser.choose(point.peak_power_w - 0.01, 16) is None
    assert chooser.lowest_cap_w == point.peak_power_w


def test_bad_moving_cap_arguments_are_refused_by_name(profile: ProfileTable) -> None:
    with pytest.raises(SessionError, match="needs a device"):
        Session(None, planning=PlanSettings(batch_size=8), cap="solar:seed=1")
    with pytest.raises(SessionError, match="unknown kind"):
        Session(EmulatedDevice("jetson-nano"), model=MODEL, planning=PlanSettings(profile=profile),
                cap="wind:speed=3")
    with pytest.raises(SessionError, match="unknown cap policy"):
        Session(EmulatedDevice("jetson-nano"), model=MODEL, planning=PlanSettings(profile=profile),
                cap=CapSettings(power_cap="solar:seed=1", policy="sometimes"))  # type: ignore[arg-type]
    with pytest.raises(SessionError, match="eta"):
        Session(EmulatedDevice("jetson-nano"), model=MODEL,
                planning=PlanSettings(profile=profile, objective="cost"))
    constant = Session(EmulatedDevice("jetson-nano"), model=MODEL,
                       planning=PlanSettings(profile=profile), cap="4.5")
    assert constant.power_cap_w == 4.5 and constant.cap_source is None  # today's behaviour


def test_the_energy_objective_plans_a_lower_frequency(profile: ProfileTable,
                                                     efficiency: EfficiencyVector) -> None:
    fast = Session(EmulatedDevice("jetson-nano"), model=MODEL,
                   planning=PlanSettings(profile=profile, efficiency=efficiency), cap=4.5)
    thrifty = Session(EmulatedDevice("jetson-nano"), model=MODEL,
                      planning=PlanSettings(profile=profile, efficiency=efficiency,
                                            objective="energy"),
                      cap=4.5)
    assert fast.choice is not None and thrifty.choice is not None
    assert thrifty.choice.predicted_energy_j <= fast.choice.predicted_energy_j
    assert thrifty.choice.predicted_time_s >= fast.choice.predicted_time_s
    assert thrifty.plan is not None and thrifty.plan.objective.name == "energy"


def test_timeline_stays_small_and_keeps_the_shape() -> None:
    from wattcap.core.cap_history import TimelineRecorder

    recorder = TimelineRecorder(0.05, max_points=50)
    for i in range(1, 2001):
        t = i * 0.05
        recorder.add(t, 3.0 + (1.0 if t > 50 else 0.0), 4.5 if t <= 50 else 5.5,
                     921_600_000, 32 if t <= 50 else 16)
    line = recorder.finish()
    assert len(line.t_s) <= 50
    assert line.bin_s > 0.05 and math.isclose(line.t_s[-1], 100.0)
    assert line.power_w[0] == pytest.approx(3.0) and line.power_w[-1] == pytest.approx(4.0)
    assert line.batch_size[0] == 32 and line.batch_size[-1] == 16
    assert min(c for c in line.cap_w if c is not None) == 4.5


def test_a_steady_cap_keeps_one_segment(profile: ProfileTable) -> None:
    device = EmulatedDevice("jetson-nano")
    follower = CapFollower(CallableCap(lambda t: 4.0), device,
                           ConfigChooser(profile, "replan", 32, None), 32,
                           device.current_frequency_hz())
    follower.begin()
    for i in range(200):
        follower(PowerReading(0.05 * (i + 1), 3.5, "test"))
    assert len(follower.segments) == 1 and follower.segments[0].energy_j == pytest.approx(
        200 * 3.5 * 0.05)


def test_a_run_under_a_moving_cap_is_plotted(profile: ProfileTable, efficiency: EfficiencyVector,
                                             digits32: tuple, tmp_path: Path) -> None:
    from wattcap.experiments.cap_run import cap_run_figure, plot_cap_run

    train, test = digits32
    config = TrainConfig(model=MODEL, batch_size=32, target_accuracy=0.99, sample_budget=512,
                         eval_every_samples=128, max_eval_samples=100)
    record = train_to_accuracy(config, train, test, device=EmulatedDevice("jetson-nano"),
                               power_cap=ScheduleCap(SCHEDULE[:3]), profile=profile,
                               efficiency=efficiency)
    record.save(tmp_path / "run.json")
    loaded = RunRecord.load(tmp_path / "run.json")
    assert loaded == record and loaded.timeline is not None
    assert (tmp_path / "run.json").stat().st_size < 200_000
    out = plot_cap_run(loaded, tmp_path / "run.png")
    assert out.stat().st_size > 10_000
    figure = cap_run_figure(loaded)  # a schedule has no supply of its own to draw
    labels = figure.axes[0].get_legend_handles_labels()[1]
    assert "cap" in labels and "supply draw" not in labels
    constant = train_to_accuracy(config.model_copy(update={"sample_budget": 128}), train, test,
                                 device=EmulatedDevice("jetson-nano"), power_cap_w=4.5)
    with pytest.raises(ValueError, match="no cap timeline"):
        plot_cap_run(constant, tmp_path / "none.png")


def test_a_batch_size_change_must_promise_five_percent(profile: ProfileTable,
                                                       efficiency: EfficiencyVector) -> None:
    hysteresis = ConfigChooser(profile, "replan", 32, None, efficiency=efficiency)
    free = ConfigChooser(profile, "replan", 32, None, efficiency=efficiency, switch_margin=0.0)
    caps = sorted({p.peak_power_w for p in profile.points})
    kept = 0
    for cap in caps:
        for current in (8, 16, 32):
            best, chosen = free.choose(cap, current), hysteresis.choose(cap, current)
            assert (best is None) == (chosen is None)
            if best is None or chosen == best:
                continue
            # kept the batch size in use, at its best frequency, for a gain under 5 %
            assert chosen is not None and chosen.batch_size == current
            assert chosen.frequency_hz == free.highest_under(current, cap)
            assert hysteresis._score[(best.batch_size, best.frequency_hz)] > 0.95 * \
                hysteresis._score[(chosen.batch_size, chosen.frequency_hz)]
            kept += 1
    assert kept > 0  # the profile has such near-ties: the rule was exercised


def test_a_held_watchdog_records_but_leaves_the_clock() -> None:
    from wattcap.runtime.watchdog import CapWatchdog

    device = EmulatedDevice("jetson-nano")
    start_hz = device.current_frequency_hz()
    guard = CapWatchdog(device, power_cap_w=2.0)
    guard.hold("the step in flight finishes")
    for i in range(3):
        guard(PowerReading(0.05 * (i + 1), 3.0, "test"))
    assert device.current_frequency_hz() == start_hz and not guard.steps
    assert any("held" in note for note in guard.notes)
    guard.hold(None)
    guard(PowerReading(0.20, 1.5, "test"))
    assert len(guard.violations) == 1 and guard.violations[0].readings == 3
    guard(PowerReading(0.25, 3.0, "test"))
    guard(PowerReading(0.30, 3.0, "test"))
    assert device.current_frequency_hz() < start_hz  # released: it acts again
