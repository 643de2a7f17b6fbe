"""wattcap's runs in a comparison on unkind boards run as `wattcap train` runs them: a Session
plans, watches the board and, where the board's level calls for it, chooses again once; each
step's math is the recorded run's of the batch size in use."""

from __future__ import annotations

import pytest

from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.algorithms.planner import plan
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.profile import ProfileTable
from wattcap.core.run import CurvePoint, RunRecord
from wattcap.devices.emulated import EmulatedDevice
from wattcap.devices.emulated_board import BoardState
from wattcap.experiments.replay import replay_on_device, replay_planned
from wattcap.measure.profiling import Profiler
from wattcap.runtime.session_config import PlanSettings

MODEL = "digits32-cnn"
SIZES = (16, 32, 64, 128)
CAP_W = 4.5
SEED = 0


@pytest.fixture(scope="module")
def profile() -> ProfileTable:
    return Profiler(EmulatedDevice("jetson-nano"), MODEL, batch_sizes=SIZES).run(exhaustive=True)


def _record(b: int, reached_at: float | None, seen: int = 24_576) -> RunRecord:
    return RunRecord(model=MODEL, batch_size=b, reached=reached_at is not None,
                     samples_to_target=reached_at, samples_seen=seen, final_accuracy=0.5,
                     curve=[CurvePoint(samples=seen, accuracy=0.5, device_time_s=0.0)],
                     device_time_s=0.0, energy_j=0.0, peak_power_w=None, avg_power_w=None,
                     wall_time_s=0.0)


def _runs(samples: dict[int, float | None]) -> dict[tuple[int, int], RunRecord]:
    return {(b, SEED): _record(b, s) for b, s in samples.items()}


def _efficiency() -> EfficiencyVector:
    # r_b = 1: every batch size needs the same samples (the records below say so too)
    return vector_from_samples({b: [16_384.0] * 2 for b in SIZES}, sample_budget=24_576,
                               use_fit=False, model=MODEL, input_shape=[1, 32, 32],
                               dataset="made-up", task="image-classification",
                               target_accuracy=0.8, seeds=[0, 1])


def test_a_board_as_profiled_replays_the_plan_as_the_fixed_replay_does(
        profile: ProfileTable) -> None:
    runs = _runs({b: 16_384.0 for b in SIZES})
    planning = PlanSettings(profile=profile, efficiency=_efficiency())
    choice = plan(profile, CAP_W, efficiency=_efficiency()).choices["wattcap"]
    planned = replay_planned(runs, SEED, EmulatedDevice("jetson-nano", seed=SEED), planning,
                             CAP_W)
    fixed = replay_on_device(runs[(choice.batch_size, SEED)],
                             EmulatedDevice("jetson-nano", seed=SEED), choice.knob_value, CAP_W)
    assert (planned.batch_size, planned.knob_value) == (choice.batch_size, choice.knob_value)
    assert planned.events == [] and planned.violations == [] == fixed.violations
    assert planned.time_s == pytest.approx(fixed.time_s, rel=1e-3)
    assert planned.energy_j == pytest.approx(fixed.energy_j, rel=0.02)


def test_a_hotter_board_is_planned_for_and_goes_on_at_the_new_batch_size(
        profile: ProfileTable) -> None:
    runs = _runs({b: 16_384.0 for b in SIZES})
    planning = PlanSettings(profile=profile, efficiency=_efficiency())
    choice = plan(profile, CAP_W, efficiency=_efficiency()).choices["wattcap"]
    hot = BoardState(power_factor=1.12)
    planned = replay_planned(runs, SEED, EmulatedDevice("jetson-nano", seed=SEED, board=hot),
                             planning, CAP_W)
    fixed = replay_on_device(runs[(choice.batch_size, SEED)],
                             EmulatedDevice("jetson-nano", seed=SEED, board=hot),
                             choice.knob_value, CAP_W)
    (event,) = planned.events
    assert event.startswith("re-planned for this board")
    assert planned.batch_size is not None and planned.knob_value is not None
    assert (planned.batch_size, planned.knob_value) != (choice.batch_size, choice.knob_value)
    # the new choice fits the cap on this board's level, as the event states it
    power_f = 1 + float(event.split(" in time and ")[1].split("%")[0]) / 100
    point = profile.lookup(planned.batch_size, planned.knob_value)
    assert power_f > 1.03 and point is not None and point.peak_power_w * power_f <= CAP_W
    # the fixed plan breaks the cap on this board until the watchdog has stepped its clock
    # down; the re-planned run until its board's level is known, then never again, and at
    # the best choice for this board it is faster (r_b = 1: time per sample decides)
    assert fixed.violations
    replanned_s = float(event.split(" at t=")[1].split(" s ")[0])
    assert all(v.start_s < replanned_s for v in planned.violations)
    assert planned.time_s is not None and planned.budget_time_s is None
    assert fixed.time_s is not None and planned.time_s < fixed.time_s


def test_a_run_that_ends_at_a_batch_size_that_missed_pays_its_budget(
        profile: ProfileTable) -> None:
    # every batch size's run missed the target: the replay goes the whole budget's way
    runs = _runs({b: None for b in SIZES})
    planning = PlanSettings(profile=profile, efficiency=_efficiency())
    planned = replay_planned(runs, SEED, EmulatedDevice("jetson-nano", seed=SEED), planning,
                             CAP_W)
    assert planned.time_s is None and planned.energy_j is None
    assert planned.budget_time_s is not None and planned.budget_time_s > 0


def test_a_run_that_cannot_meet_the_cap_on_its_board_is_scored_as_missed(
        profile: ProfileTable) -> None:
    """A board drawing three times the power at a cap just above the profile's lowest peak:
    the Session's watchdog stops the run at the lowest clock; the comparison goes on, the
    seed scored as a run that missed (what it trained is the price), the stop in its events."""
    runs = _runs({b: 16_384.0 for b in SIZES})
    cap_w = min(p.peak_power_w for p in profile.points) + 0.15
    hot = BoardState(power_factor=3.0)
    planned = replay_planned(runs, SEED, EmulatedDevice("jetson-nano", seed=SEED, board=hot),
                             PlanSettings(profile=profile, efficiency=_efficiency()), cap_w)
    assert planned.time_s is None and planned.budget_time_s is not None
    assert planned.violations and planned.events[-1].startswith("stopped: power")
    assert "at the lowest frequency" in planned.events[-1]


def test_a_choice_without_a_recorded_run_is_refused(profile: ProfileTable) -> None:
    planning = PlanSettings(profile=profile, efficiency=_efficiency())
    with pytest.raises(ValueError, match="no recorded run"):
        replay_planned({}, SEED, EmulatedDevice("jetson-nano", seed=SEED), planning, CAP_W)


def test_every_replayed_configuration_runs_under_the_sessions_backstop() -> None:
    """A Session under a constant cap sets the board's power limit to it; the replays of the
    other methods (the baselines, the brute force) run under the same hold, or a board whose
    limit slows wattcap's run would leave theirs unslowed."""
    device = EmulatedDevice("a100-sxm4", seed=SEED)
    found_w = device.power_limit_w()
    top_hz = device.frequencies_hz()[-1]
    record = _record(128, 60_000.0, seen=65_536)
    free = replay_on_device(record, EmulatedDevice("a100-sxm4", seed=SEED), top_hz, None)
    cap_w = 0.6 * free.peak_w
    held = replay_on_device(record, device, top_hz, cap_w)
    assert held.time_s is not None and free.time_s is not None
    assert held.time_s > 1.1 * free.time_s  # the limit held the clock down
    assert device.power_limit_w() == found_w  # and was put back
    # a board without a power limit (a Jetson) replays as before
    nano = replay_on_device(_record(64, 16_384.0), EmulatedDevice("jetson-nano", seed=SEED),
                            EmulatedDevice("jetson-nano").frequencies_hz()[-1], CAP_W)
    assert nano.time_s is not None


def test_a_replay_shorter_than_the_sensors_period_has_no_energy_not_zero() -> None:
    """A host-bound model on a datacenter GPU reaches its target in a few hundredths of a
    second, under the 100 ms sensor: no reading, so no energy (shown as not read), never a
    measured 0 J; a longer replay reads it."""
    from wattcap.runtime.meter import PowerMeter

    device = EmulatedDevice("h100-sxm", seed=SEED)
    top_hz = device.frequencies_hz()[-1]
    short = replay_on_device(_record(128, 512.0, seen=1024), device, top_hz, None)
    assert short.time_s is not None and short.time_s < device.sensor_period_s
    assert short.energy_j is None
    missed = replay_on_device(_record(128, None, seen=512), device, top_hz, None)
    assert missed.budget_time_s is not None and missed.budget_energy_j is None
    long = replay_on_device(_record(128, 60_000.0, seen=65_536), device, top_hz, None)
    assert long.energy_j is not None and long.energy_j > 0
    meter = PowerMeter(0.1)
    assert meter.measured_energy_j is None and meter.energy_j == 0.0
