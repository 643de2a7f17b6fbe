"""A board that draws more power than the profile's: once the drift monitor knows this board's
level (the run's first windows), a run that may choose its batch size plans again on the
profile scaled to this board, once; a run given its batch size leaves the cap to the watchdog."""

from __future__ import annotations

import pytest

from wattcap.cli.train import NOT_REACHED_EXIT_CODE
from wattcap.core.profile import ProfileTable
from wattcap.devices.emulated import EmulatedDevice
from wattcap.devices.emulated_board import BoardState
from wattcap.measure.profiling import Profiler
from wattcap.runtime.session import Session
from wattcap.runtime.session_config import CapSettings, DeviceHandling, PlanSettings

MODEL = "digits32-cnn"
CAP_W = 4.5
HOT = 1.12  # the GPU's power on the board that trains, against the profile's board


@pytest.fixture(scope="module")
def profile() -> ProfileTable:
    return Profiler(EmulatedDevice("jetson-nano"), MODEL,
                    batch_sizes=(16, 32, 64, 128)).run(exhaustive=True)


def _train(profile: ProfileTable, power_factor: float, batch_size: int | None = None,
           seconds: float = 30.0) -> Session:
    device = EmulatedDevice("jetson-nano", board=BoardState(power_factor=power_factor))
    with Session(device, model=MODEL, planning=PlanSettings(profile=profile,
                                                            batch_size=batch_size),
                 cap=CapSettings(power_cap=CAP_W),
                 device_handling=DeviceHandling(handle_signals=False)) as session:
        while device.now_s() < seconds:
            with session.step():
                pass  # the emulator models the step's time and power from its cost
            if session.steps % 50 == 0:
                session.report(0.0)  # re-plans happen between steps, at a report
    return session


def test_a_hotter_board_is_planned_for_once_its_level_is_known(profile: ProfileTable) -> None:
    planned = profile.lookup(64, 768_000_000)
    assert planned is not None and planned.peak_power_w <= CAP_W  # the plan fits the profile
    session = _train(profile, HOT)
    record = session.record
    assert record is not None
    (event,) = [e for e in record.events if e.startswith("re-planned for this board")]
    assert "b=64 at 768.0 MHz -> b=" in event and "in power against the profile" in event
    assert session._monitor is not None and session._monitor.board_scale is not None
    time_f, power_f = session._monitor.board_scale
    assert power_f > 1.03 and time_f == pytest.approx(1.0, abs=0.01)
    # the new choice fits the cap on this board's level, and the board keeps to it
    point = profile.lookup(session.batch_size, session.frequency_hz)
    assert point is not None and point.peak_power_w * power_f <= CAP_W
    replanned_s = float(event.split(" at t=")[1].split(" s ")[0])
    assert record.cap_violations  # before: the watchdog held the cap, stepping down
    assert [v for v in record.cap_violations if v.start_s >= replanned_s] == []
    # the watchdog starts afresh at the new plan: its ceiling is the new clock, not the old
    # plan's (from there it would climb above the new plan, on power it learnt at the old
    # batch size), and it never stepped after the re-plan
    assert session._guard is not None and session._guard.ceiling_hz == session.frequency_hz
    # the clocks the old plan had to leave do not bound the new one's (a re-measure's ceiling)
    assert session._guard.lowest_infeasible_hz() is None
    assert [s for s in record.frequency_steps if s.time_s >= replanned_s] == []


def test_a_board_as_profiled_or_a_given_batch_size_is_not_planned_again(
        profile: ProfileTable) -> None:
    for session in (_train(profile, 1.0), _train(profile, HOT, batch_size=64)):
        assert session.record is not None
        assert not any(e.startswith("re-planned for this board") for e in session.record.events)
        assert session.batch_size == 64


def test_the_watchdog_reads_the_profile_between_its_clocks(profile: ProfileTable) -> None:
    """What the watchdog compares a board's power with: the profile's peak at the run's batch
    size, linear between measured clocks (a power limit holds a board between them), nothing
    outside the row."""
    session = Session(EmulatedDevice("jetson-nano"), model=MODEL,
                      planning=PlanSettings(profile=profile, batch_size=64),
                      cap=CapSettings(power_cap=CAP_W),
                      device_handling=DeviceHandling(handle_signals=False))
    row = profile.rows()[64]
    low, high = row[3], row[4]
    peak_at = session._guard_part.profile_peak_at
    assert peak_at(low.knob_value) == pytest.approx(low.peak_power_w)
    middle = (low.knob_value + high.knob_value) // 2
    assert peak_at(middle) == pytest.approx((low.peak_power_w + high.peak_power_w) / 2, rel=1e-3)
    assert peak_at(row[0].knob_value - 1) is None and peak_at(row[-1].knob_value + 1) is None


def test_a_resumed_run_keeps_its_new_plans_watch(profile: ProfileTable, tmp_path) -> None:
    """A checkpoint written after the re-plan for the board: the resumed run's watchdog counts
    the old plan's clock steps as the old plan's (they do not bound the new one's clocks)."""
    import torch

    def run(seconds: float) -> Session:
        device = EmulatedDevice("jetson-nano", board=BoardState(power_factor=HOT))
        model = torch.nn.Linear(2, 2)
        session = Session(device, model=MODEL, planning=PlanSettings(profile=profile),
                          cap=CapSettings(power_cap=CAP_W), checkpoint=tmp_path / "ckpt",
                          device_handling=DeviceHandling(handle_signals=False))
        with session:
            session.attach(model, torch.optim.SGD(model.parameters(), lr=0.1))
            while device.now_s() < seconds:
                with session.step():
                    pass
                if session.steps % 50 == 0:
                    session.report(0.0)  # a re-plan happens at a report; so does a checkpoint
            session.save_checkpoint()
        return session

    first = run(10.0)
    assert first.record is not None and first.record.frequency_steps  # the old plan's
    assert any(e.startswith("re-planned for this board") for e in first.record.events)
    assert first._guard is not None and first._guard.plan_steps_from > 0
    resumed = run(12.0)
    assert resumed._guard is not None
    assert resumed._guard.plan_steps_from == first._guard.plan_steps_from
    assert resumed._guard.lowest_infeasible_hz() is None
    # the re-plan is the run's, not the process's: the resumed part goes on at its choice and
    # does not re-plan again
    assert resumed.record is not None
    assert sum(e.startswith("re-planned for this board") for e in resumed.record.events) == 1
    assert (resumed.batch_size, resumed.frequency_hz) == (first.batch_size, first.frequency_hz)


def test_a_cooler_board_is_planned_for_where_that_is_clearly_faster(
        profile: ProfileTable) -> None:
    """A board that draws a little less than the profile's (within the drift tolerance) lets
    a faster configuration under the cap: the run takes it where it saves at least
    BOARD_SWITCH_GAIN of the time to the target on the board's profile; a board within noise
    of the profile keeps its plan."""
    from wattcap.algorithms.drift import BOARD_SWITCH_GAIN, time_gain

    cool = _train(profile, 0.93)
    record = cool.record
    assert record is not None and record.cap_violations == []
    (event,) = [e for e in record.events if e.startswith("re-planned for this board")]
    assert event.endswith(f"-> b={cool.batch_size} at {cool.frequency_hz / 1e6:.1f} MHz")
    assert cool._monitor is not None and cool._monitor.board_scale is not None
    time_f, power_f = cool._monitor.board_scale
    assert abs(power_f - 1) < 0.1  # within the tolerance: the old rule kept the plan
    board = profile.on_board(time_f, power_f)
    old, new = board.lookup(64, 768_000_000), board.lookup(cool.batch_size, cool.frequency_hz)
    assert old is not None and new is not None and new.peak_power_w <= CAP_W
    samples = {b: 10_000.0 for b in profile.batch_sizes}  # no efficiency vector: r_b = 1
    assert time_gain(old, new, samples) >= BOARD_SWITCH_GAIN
    same = _train(profile, 0.99)
    assert same.record is not None
    assert not any(e.startswith("re-planned") for e in same.record.events)
    assert (same.batch_size, same.frequency_hz) == (64, 768_000_000)


def test_time_gain() -> None:
    from wattcap.algorithms.drift import time_gain
    from wattcap.core.profile import ProfilePoint

    def point(b: int, s: float) -> ProfilePoint:
        return ProfilePoint(batch_size=b, knob_value=1, peak_power_w=1.0, avg_power_w=1.0,
                            seconds_per_sample=s, steps=1, readings=1)

    assert time_gain(point(32, 1.0), point(64, 0.5), {32: 100.0, 64: 150.0}) \
        == pytest.approx(1 - 75 / 100)
    assert time_gain(point(32, 1.0), point(64, 0.5), {32: 100.0}) == 0.0  # unknown: no gain


def test_the_gain_gate_decides_a_new_batch_size(profile: ProfileTable,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The same cooler board keeps its batch size where the gate asks more than the choice
    on it saves."""
    import wattcap.runtime.device_guard as device_guard

    monkeypatch.setattr(device_guard, "BOARD_SWITCH_GAIN", 0.99)
    kept = _train(profile, 0.93)
    assert kept.record is not None
    assert not any(e.startswith("re-planned") for e in kept.record.events)
    assert (kept.batch_size, kept.frequency_hz) == (64, 768_000_000)


def test_train_re_plans_for_its_board_on_the_r_b_it_planned_with(
        profile: ProfileTable, tmp_path) -> None:
    """`wattcap train` under a constant cap gives its Session the efficiency vector: on a board
    that reads as the profile, the choice on the board's profile is the plan's, and nothing
    re-plans it to the pure-throughput choice (r_b = 1)."""
    from typer.testing import CliRunner

    from wattcap.algorithms.efficiency import vector_from_samples
    from wattcap.cli import app
    from wattcap.core.run import RunRecord

    sizes = (16, 32, 64, 128)
    vector = vector_from_samples(  # B_noise = 16: the small batches need far fewer samples
        {b: [1000 * (1 + b / 16) * w for w in (0.97, 1.0, 1.03)] for b in sizes},
        sample_budget=10**6, model=MODEL, input_shape=[1, 32, 32], dataset="proxy",
        task="image-classification", target_accuracy=0.8, seeds=[0, 1, 2])
    profile.save(tmp_path / "p.json")
    vector.save(tmp_path / "e.json")
    result = CliRunner().invoke(app, [
        "train", "--profile", str(tmp_path / "p.json"), "--efficiency", str(tmp_path / "e.json"),
        "--model", MODEL, "--data", "digits-5-9-32", "--power-cap", str(CAP_W),
        "--target-accuracy", "0.999", "--sample-budget", "1024", "--out",
        str(tmp_path / "run.json")], env={"COLUMNS": "200"})
    record = RunRecord.load(tmp_path / "run.json")
    assert result.exit_code == (0 if record.reached else NOT_REACHED_EXIT_CODE), result.output
    assert record.batch_size in (16, 32)  # the plan's, on r_b
    assert not any(e.startswith("re-planned for this board") for e in record.events)


def test_a_board_reading_under_the_profile_within_its_noise_keeps_the_margin() -> None:
    """The level's noise: a board read as drawing less than the profile's counts only beyond
    two standard deviations of its windows' noise (none on a quiet board)."""
    from wattcap.algorithms.drift import BOARD_WINDOWS, DriftTest, WindowChange

    quiet, noisy = DriftTest(0.1, 0.1), DriftTest(0.1, 0.1)
    for i in range(8):
        quiet.add(WindowChange(0.0, -0.04, 10, 5))
        noisy.add(WindowChange(0.0, -0.04 + (0.03 if i % 2 else -0.03), 10, 5))
    assert quiet.board_power_noise() == 0.0
    # successive differences of 0.06: sigma = 0.06 / 0.954 (median |difference| of a normal
    # series), for a median of BOARD_WINDOWS windows against one
    assert noisy.board_power_noise() == pytest.approx(
        0.06 / 0.9539 * (1 + 1 / BOARD_WINDOWS) ** 0.5, rel=0.01)


def test_the_level_s_noise_decides_whether_a_cooler_board_is_trusted(
        profile: ProfileTable, monkeypatch: pytest.MonkeyPatch) -> None:
    """The board at 0.93 reads about 3 % under the profile's power and re-plans on the quiet
    emulator (test above); where its level's noise were 5 %, 2 sigmas cover the 3 %: it keeps
    its plan."""
    from wattcap.runtime.drift_monitor import DriftMonitor

    monkeypatch.setattr(DriftMonitor, "board_power_noise", property(lambda self: 0.05))
    kept = _train(profile, 0.93)
    assert kept.record is not None
    assert not any(e.startswith("re-planned") for e in kept.record.events)
    assert (kept.batch_size, kept.frequency_hz) == (64, 768_000_000)
