"""Drift: an emulated device that derates mid-run (slower, hotter) is noticed by the drift
monitor, which re-measures the batch size's row and re-plans the frequency; `profile --refresh`
re-measures a profile's frontier and reports the change."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wattcap.cli import app
from wattcap.core.profile import ProfilePoint, ProfileTable
from wattcap.core.run import CurvePoint
from wattcap.core.schema import WattcapFileError
from wattcap.data import ArrayDataset, get_dataset
from wattcap.devices import Drift, EmulatedDevice, PowerReading, load_spec
from wattcap.measure.profiling import Profiler
from wattcap.runtime.drift_monitor import DriftMonitor
from wattcap.runtime.watchdog import CapWatchdog
from wattcap.train.loop import RunRecord, TrainConfig, train_to_accuracy

MODEL = "digits32-cnn"
B = 32
EPS = 1e-9
DERATING = dict(speed_factor=0.8, power_factor=1.15)
DERATING_AFTER_S = 1.0  # after the monitor learnt this board's level (its first windows)


def quiet_nano(drift: Drift | None = None) -> EmulatedDevice:
    spec = load_spec("jetson-nano").model_copy(update={"sensor_noise_w": 0.01})
    return EmulatedDevice(spec, drift=drift)


@pytest.fixture(scope="module")
def digits32() -> tuple[ArrayDataset, ArrayDataset]:
    return get_dataset("digits-32").split(0.2, seed=0)


@pytest.fixture(scope="module")
def profiles() -> tuple[ProfileTable, ProfileTable]:
    """One batch size's row measured on the device as it was, and as it is after derating."""
    before = Profiler(quiet_nano(), MODEL, batch_sizes=(B,)).run(exhaustive=True)
    after = Profiler(quiet_nano(Drift(after_s=0.0, **DERATING)), MODEL,
                     batch_sizes=(B,)).run(exhaustive=True)
    return before, after


@pytest.fixture(scope="module")
def scenario(profiles: tuple[ProfileTable, ProfileTable]) -> tuple[float, int, int]:
    """A cap under which the fresh device runs at f*, and the derated one only one level lower:
    (cap W, f* before, f* after)."""
    before, after = profiles
    freqs = before.knob_values
    f_star = freqs[-3]
    f_lower = freqs[-4]
    cap_w = max(before.lookup(B, f_star).peak_power_w, after.lookup(B, f_lower).peak_power_w)
    cap_w += 0.03
    # Preconditions of the scenario (they fail loudly if the emulated physics changes).
    assert cap_w < before.lookup(B, freqs[-2]).peak_power_w
    assert cap_w < after.lookup(B, f_star).avg_power_w
    assert before.frontier(cap_w)[B].knob_value == f_star
    assert after.frontier(cap_w)[B].knob_value == f_lower
    return cap_w, f_star, f_lower


def config(**update: object) -> TrainConfig:
    base = dict(model=MODEL, batch_size=B, target_accuracy=0.8, sample_budget=4096,
                eval_every_samples=256, max_eval_samples=200)
    return TrainConfig(**(base | update))


#: the evaluation after the derating run's re-plan, where a test resumes it from: the drift is
#: decided once the windows showed their noise, then re-planned at the next evaluation (at
#: 1,024 samples here)
AFTER_THE_REPLAN = 1280


@dataclass
class DeratingRun:
    """The scenario's derating run: its record, its device, the log of what went on and off the
    GPU around its re-measure (`gpu_log`), and its checkpoint folder as it was at
    AFTER_THE_REPLAN samples (`checkpoint_after_replan`, never written to)."""

    record: RunRecord
    device: EmulatedDevice
    gpu_log: list[str]
    checkpoint_after_replan: Path


@pytest.fixture(scope="module")
def derating_run(digits32: tuple[ArrayDataset, ArrayDataset],
                 profiles: tuple[ProfileTable, ProfileTable],
                 scenario: tuple[float, int, int],
                 tmp_path_factory: pytest.TempPathFactory) -> DeratingRun:
    """The scenario's run on a device that derates after DERATING_AFTER_S, watched against
    `before`, trained once for the tests that only read it (seconds of training each time).
    Spies log the re-measure's moves and pass every call on; the run checkpoints (its record
    is the same without), and its folder is copied as a process that died after the re-plan
    leaves it."""
    before, _ = profiles
    cap_w, f_star, _ = scenario
    train, test = digits32
    folder = tmp_path_factory.mktemp("derating-checkpoint")
    after_replan = tmp_path_factory.mktemp("derating-checkpoint-after-the-replan")

    def copy_after_the_replan(point: CurvePoint) -> None:
        if point.samples == AFTER_THE_REPLAN:  # written at the evaluation, before this call
            shutil.copytree(folder, after_replan, dirs_exist_ok=True)

    device = quiet_nano(Drift(after_s=DERATING_AFTER_S, **DERATING))
    device.set_frequency_hz(f_star)
    with pytest.MonkeyPatch.context() as monkeypatch:
        gpu_log = _log_the_gpu_moves(monkeypatch)
        record = train_to_accuracy(config(), train, test, device=device, power_cap_w=cap_w,
                                   profile=before, checkpoint_dir=folder,
                                   on_eval=copy_after_the_replan)
    assert any(after_replan.iterdir()), "no evaluation at AFTER_THE_REPLAN samples"
    return DeratingRun(record, device, gpu_log, after_replan)


def test_derating_mid_run_triggers_remeasure_and_replan(
    derating_run: DeratingRun, scenario: tuple[float, int, int],
) -> None:
    _, _, f_lower = scenario
    record, device = derating_run.record, derating_run.device

    assert record.reached
    # Noticed after the derating began, as a slowdown of about 1/0.8 at most.
    assert record.drift_events
    event = record.drift_events[0]
    assert event.time_s > DERATING_AFTER_S
    assert 0.1 < event.time_change <= 1 / DERATING["speed_factor"] - 1 + 0.01
    assert event.batch_size == B
    # Re-measured on the device and re-planned: the batch size's highest feasible frequency
    # under the derating, kept until the end.
    assert record.replans
    replan = record.replans[0]
    assert replan.batch_size == B and replan.points
    assert all(p.batch_size == B for p in replan.points)
    assert replan.to_hz == f_lower
    assert replan.remeasure_device_s > 0
    assert record.frequency_hz == f_lower
    assert any(e.startswith("re-planned") for e in record.events)
    # The re-measure's device time is part of the run's time.
    assert record.device_time_s >= replan.remeasure_device_s
    # The cap held: no violation lasted longer than one sensor period.
    assert all(v.duration_s <= device.sensor_period_s + EPS for v in record.cap_violations)


def test_the_replan_alone_moves_the_frequency_down(
    digits32: tuple[ArrayDataset, ArrayDataset], profiles: tuple[ProfileTable, ProfileTable],
    scenario: tuple[float, int, int],
) -> None:
    """Without the watchdog, the re-measure finds f* now breaks the cap and the re-plan steps
    down to the frequency that keeps it."""
    before, after = profiles
    cap_w, f_star, f_lower = scenario
    device = quiet_nano(Drift(after_s=DERATING_AFTER_S, **DERATING))
    device.set_frequency_hz(f_star)
    train, test = digits32
    record = train_to_accuracy(config(), train, test, device=device, power_cap_w=cap_w,
                               profile=before, watchdog=False)
    assert record.frequency_steps == []
    (replan, *_) = record.replans
    assert (replan.from_hz, replan.to_hz) == (f_star, f_lower)
    measured = {p.knob_value: p for p in replan.points}
    assert measured[f_star].peak_power_w > cap_w  # the old plan breaks the cap now
    assert measured[f_lower].peak_power_w <= cap_w
    # The re-measured time matches the derated device, not the old profile.
    assert measured[f_lower].seconds_per_sample == pytest.approx(
        after.lookup(B, f_lower).seconds_per_sample, rel=0.02)
    assert replan.predicted_seconds_per_sample == measured[f_lower].seconds_per_sample
    assert record.frequency_hz == f_lower
    assert record.reached


def test_a_device_that_holds_its_profile_is_left_alone(
    digits32: tuple[ArrayDataset, ArrayDataset], profiles: tuple[ProfileTable, ProfileTable],
    scenario: tuple[float, int, int],
) -> None:
    before, _ = profiles
    cap_w, f_star, _ = scenario
    device = quiet_nano()
    device.set_frequency_hz(f_star)
    train, test = digits32
    record = train_to_accuracy(config(), train, test, device=device, power_cap_w=cap_w,
                               profile=before)
    assert record.reached
    assert record.drift_events == [] and record.replans == []
    assert record.frequency_hz == f_star


def test_a_profile_of_another_device_is_refused(
    digits32: tuple[ArrayDataset, ArrayDataset], profiles: tuple[ProfileTable, ProfileTable],
) -> None:
    before, _ = profiles
    train, test = digits32
    with pytest.raises(WattcapFileError, match="jetson-tx2nx"):
        train_to_accuracy(config(), train, test, device=EmulatedDevice("jetson-tx2nx"),
                          profile=before)


def _monitor_at_a_point(before: ProfileTable, **options: object
                        ) -> tuple[DriftMonitor, ProfilePoint, float]:
    """A drift monitor on the quiet Nano at the third-highest clock of `before`: (the monitor,
    its profile point, the sensor period)."""
    device = quiet_nano()
    f = before.knob_values[-3]
    device.set_frequency_hz(f)
    point = before.lookup(B, f)
    assert point is not None
    return DriftMonitor(device, before, B, tolerance=0.1, **options), point, \
        device.sensor_period_s


def _steps_at_power(monitor: DriftMonitor, point: ProfilePoint, period_s: float,
                    power_factors: list[float]) -> list[object]:
    """One step per factor, four sensor periods long and on time: four readings inside it at
    the point's average power times the factor, one outside (an evaluation) at 10x."""
    step_s = 4 * period_s
    busy_s = point.seconds_per_sample * B  # on time
    t = 0.0
    events = []
    for factor in power_factors:
        for k in range(1, 5):
            monitor(PowerReading(t + k * period_s, point.avg_power_w * factor, "test"))
        monitor(PowerReading(t + step_s + period_s / 2, point.avg_power_w * 10, "test"))
        events.append(monitor.on_step(t, t + step_s, busy_s))
        t += step_s + period_s
    return events


def test_monitor_compares_only_readings_taken_during_steps(
    profiles: tuple[ProfileTable, ProfileTable],
) -> None:
    monitor, point, period_s = _monitor_at_a_point(profiles[0], min_readings=4, min_steps=2)
    # The first step only opens the window at this frequency; each two after it fill one. The
    # first four windows (steps 2-9) read the profile: this board's level. Power rises by
    # 20 % from the tenth step; a drift is decided on the median of the last three windows.
    events = _steps_at_power(monitor, point, period_s, [1.0] * 9 + [1.2] * 4)
    assert events[:12] == [None] * 12  # one window at +20 % is not yet a drift
    event = events[12]
    assert event is not None and monitor.pending is event
    assert event.power_change == pytest.approx(0.2, abs=1e-6)
    assert event.time_change == pytest.approx(0.0, abs=1e-6)
    assert event.readings == 3 * 8 and event.steps == 3 * 2
    assert monitor.notes == []  # the board read as profiled: nothing to say about it


def test_the_re_measure_holds_the_watchdog_and_gives_back_its_earlier_hold(
    profiles: tuple[ProfileTable, ProfileTable],
) -> None:
    """While the drift re-plan measures points (setting their clocks), the cap watchdog only
    records: a clock it moved mid-window would label a point with a clock it did not run. Its
    own hold (a moving cap's) is what it has after."""
    before = profiles[0]
    for earlier in (None, "a moving cap below every configuration"):
        device = quiet_nano()
        f = before.knob_values[-3]
        device.set_frequency_hz(f)
        guard = CapWatchdog(device, power_cap_w=10.0)
        guard.hold(earlier)
        held_while_measuring: list[str | None] = []
        profiler = Profiler(device, MODEL, batch_sizes=(B,))
        measure = profiler.measure

        def spy(*args, seen=held_while_measuring, guard=guard, measure=measure,  # noqa: ANN002, ANN003, ANN202, ANN001
                **kwargs):
            seen.append(guard.held)
            return measure(*args, **kwargs)

        profiler.measure = spy  # type: ignore[method-assign]
        monitor = DriftMonitor(device, before, B, tolerance=0.1, min_readings=4, min_steps=2,
                               watchdog=guard, profiler=profiler)
        point = before.lookup(B, f)
        assert point is not None
        _steps_at_power(monitor, point, device.sensor_period_s, [1.0] * 9 + [1.2] * 4)
        assert monitor.pending is not None
        assert monitor.replan_if_due() is not None
        assert held_while_measuring and all(held_while_measuring)
        assert guard.held == earlier
    # a re-measure that fails gives the watchdog back all the same
    with pytest.raises(RuntimeError), guard.measuring("a re-measure that fails"):
        assert guard.held is not None
        raise RuntimeError("lost the device")
    assert guard.held == earlier


def test_a_board_that_reads_off_the_profile_from_the_start_is_not_drift(
    profiles: tuple[ProfileTable, ProfileTable],
) -> None:
    """A board 20 % hotter than the profile's from its first window on (another board of the
    kind, within the spread boards show) is this board: no drift in an hour's worth of windows,
    a note saying what it reads; a rise from that level later is drift. One 60 % off from the
    start is farther than boards differ: drift as soon as the noise is known."""
    monitor, point, period_s = _monitor_at_a_point(profiles[0], min_readings=4, min_steps=2)
    events = _steps_at_power(monitor, point, period_s, [1.2] * 41 + [1.2 * 1.2] * 4)
    assert events[:44] == [None] * 44
    assert events[44] is not None and events[44].power_change == pytest.approx(0.2, abs=1e-6)
    assert events[44].expected_avg_power_w == pytest.approx(point.avg_power_w * 1.2)
    (note,) = monitor.notes
    assert "+20% in average power against the profile" in note, note
    assert "+0% in time per sample" in note

    off, point, period_s = _monitor_at_a_point(profiles[0], min_readings=4, min_steps=2)
    events = _steps_at_power(off, point, period_s, [1.6] * 9)
    assert events[:8] == [None] * 8  # the run's first windows: the noise is not known yet
    assert events[8] is not None and events[8].power_change == pytest.approx(0.6, abs=1e-6)
    assert off.notes == []


def test_a_resumed_monitor_keeps_the_board_level_its_run_had(
    profiles: tuple[ProfileTable, ProfileTable],
) -> None:
    """The board's level goes into the checkpoint (`board`) and comes back (`adopt`): a board
    that drifted 15 % while the run was stopped is a drift, not a level learnt afresh."""
    first, point, period_s = _monitor_at_a_point(profiles[0], min_readings=4, min_steps=2)
    assert first.board is None  # nothing decided yet
    _steps_at_power(first, point, period_s, [1.2] * 9)
    assert first.board is not None and first.board["scale"] == pytest.approx([1.0, 1.2])
    resumed, point, period_s = _monitor_at_a_point(profiles[0], min_readings=4, min_steps=2)
    resumed.adopt([], first.board)
    events = _steps_at_power(resumed, point, period_s, [1.2 * 1.15] * 9)
    assert events[8] is not None and events[8].power_change == pytest.approx(0.15, abs=1e-6)
    afresh, point, period_s = _monitor_at_a_point(profiles[0], min_readings=4, min_steps=2)
    assert _steps_at_power(afresh, point, period_s, [1.2 * 1.15] * 9) == [None] * 9


def test_the_monitor_says_when_the_windows_noise_sets_the_threshold(
    profiles: tuple[ProfileTable, ProfileTable],
) -> None:
    """Windows whose power swings by 20 % either way around the point: not drift, and the run's
    events say the threshold rose above the tolerance (once, and only once the noise is
    known)."""
    monitor, point, period_s = _monitor_at_a_point(profiles[0], min_readings=1, min_steps=1)
    busy_s = point.seconds_per_sample * B
    t, events, noted_after = 0.0, [], []
    for index in range(12):
        swing = 1.2 if index % 2 else 0.8
        monitor(PowerReading(t + period_s, point.avg_power_w * swing, "test"))
        events.append(monitor.on_step(t, t + period_s, busy_s))
        noted_after.append(len(monitor.notes))
        t += period_s
    assert events == [None] * 12
    assert noted_after[:4] == [0] * 4  # the first window opens, then 3 differences are learnt
    assert noted_after[-1] == 1
    assert "is reported beyond" in monitor.notes[0] and "not the tolerance's 10%" in \
        monitor.notes[0]


class QueuedNano(EmulatedDevice):
    """The emulated Nano, with steps queued on it as on a GPU (set by `QueuedTiming`)."""

    queued = 0

    @property
    def pending_steps(self) -> int:
        return self.queued


class QueuedTiming:
    """How a CUDA device accounts its steps: the host does not wait for the GPU at every step,
    so a step's time is 0 while it is queued and a wait once per sensor period accounts every
    step since the last (`Device.end_step`, `accounted_steps`, `pending_steps`)."""

    def __init__(self, device: QueuedNano, monitor: DriftMonitor, step_s: float) -> None:
        self.device, self.monitor, self.step_s = device, monitor, step_s
        self.time_s = self.last_wait_s = 0.0
        self.next_reading_s = device.sensor_period_s

    def run(self, steps: int, power_w: float, slower: float = 1.0) -> list[object]:
        events = []
        period_s = self.device.sensor_period_s
        for _ in range(steps):
            start_s, self.time_s = self.time_s, self.time_s + self.step_s * slower
            while self.next_reading_s <= self.time_s:
                self.monitor(PowerReading(self.next_reading_s, power_w, "test"))
                self.next_reading_s += period_s
            self.device.queued += 1
            if self.time_s - self.last_wait_s < period_s:
                busy_s, timed = 0.0, 0
            else:
                busy_s, timed = self.device.queued * self.step_s * slower, self.device.queued
                self.device.queued, self.last_wait_s = 0, self.time_s
            event = self.monitor.on_step(start_s, self.time_s, busy_s, timed_steps=timed)
            self.monitor.pending = None
            if event is not None:
                events.append(event)
        return events


@pytest.mark.parametrize("steps_per_wait", [3, 12, 25])
def test_steps_timed_in_batches_are_not_drift(
    profiles: tuple[ProfileTable, ProfileTable], steps_per_wait: int,
) -> None:
    """On a GPU a window of readings closes with some steps' time still queued and opens with
    a wait that accounts steps from before it: counting every step of the window against the
    time it holds read 10-17 % off the profile on a device that runs exactly to it (false
    drift, a re-measure and a re-plan). The time per sample is that of the steps timed."""
    before, _ = profiles
    device = quiet_nano()
    f = before.knob_values[-1]
    point = before.lookup(B, f)
    step_s = point.seconds_per_sample * B
    spec = device.spec.model_copy(update={"sensor_period_s": steps_per_wait * step_s})
    device = QueuedNano(spec)
    monitor = DriftMonitor(device, before, B, tolerance=0.1)
    timing = QueuedTiming(device, monitor, step_s)
    assert timing.run(4000, point.avg_power_w) == []
    # and a device that really runs 20 % slower is still seen (the median of the last
    # windows: from the window after the one that holds the change, exactly)
    events = timing.run(1000, point.avg_power_w, slower=1.2)
    assert len(events) >= 3 and all(e.time_change > 0.1 for e in events)
    assert all(e.time_change == pytest.approx(0.2) for e in events[1:])


def test_profile_refresh_reports_the_derating(
    tmp_path: Path, profiles: tuple[ProfileTable, ProfileTable],
    scenario: tuple[float, int, int],
) -> None:
    runner = CliRunner()
    old_path = tmp_path / "nano.json"
    before, _ = profiles
    before.save(old_path)
    cap_w, f_star, f_lower = scenario
    new_path = tmp_path / "refreshed.json"
    # the same quiet sensor the profile was measured with (its 0.03 W slack is below the
    # default sensor's noise)
    spec_path = tmp_path / "quiet-nano.json"
    spec_path.write_text(quiet_nano().spec.model_dump_json())
    result = runner.invoke(app, [
        "profile", "--refresh", str(old_path), "--device", f"emulated:{spec_path}",
        "--power-cap", f"{cap_w:.4f}", "--drift", "0,0.8,1.15", "--out", str(new_path),
    ])
    assert result.exit_code == 0, result.output
    assert "changed since" in result.output
    assert f"{f_star / 1e6:.1f} MHz -> {f_lower / 1e6:.1f} MHz" in result.output
    refreshed = ProfileTable.load(new_path)
    assert refreshed.mode == "refresh"
    old, new = before.lookup(B, f_star), refreshed.lookup(B, f_star)
    assert new.seconds_per_sample > 1.15 * old.seconds_per_sample
    assert refreshed.frontier(cap_w)[B].knob_value == f_lower
    assert ProfileTable.load(old_path) == before  # --out leaves the original alone

    # The same device without drift: nothing changed beyond 10 %.
    calm = runner.invoke(app, ["profile", "--refresh", str(old_path), "--device",
                               "emulated:jetson-nano", "--out", str(tmp_path / "calm.json")])
    assert calm.exit_code == 0, calm.output
    assert "no change beyond 10 %" in calm.output


def test_profile_refresh_refuses_another_device(
    tmp_path: Path, profiles: tuple[ProfileTable, ProfileTable],
) -> None:
    path = tmp_path / "nano.json"
    profiles[0].save(path)
    result = CliRunner().invoke(app, ["profile", "--refresh", str(path), "--device",
                                      "emulated:jetson-tx2nx"])
    assert result.exit_code == 2
    assert "made for device 'jetson-nano'" in result.output
    assert ProfileTable.load(path) == profiles[0]


def test_a_resumed_run_keeps_the_replan_and_its_lower_frequency(
    tmp_path: Path, digits32: tuple[ArrayDataset, ArrayDataset],
    profiles: tuple[ProfileTable, ProfileTable], scenario: tuple[float, int, int],
    derating_run: DeratingRun,
) -> None:
    before, _ = profiles
    cap_w, f_star, f_lower = scenario
    train, test = digits32
    # The derating run's folder as a process killed after the re-plan's checkpoint leaves it
    # (copied: the restarted run writes its own checkpoints there).
    shutil.copytree(derating_run.checkpoint_after_replan, tmp_path, dirs_exist_ok=True)

    # Restarted on the (still derated) device at the plan's frequency, as the CLI would.
    device = quiet_nano(Drift(after_s=0.0, **DERATING))
    device.set_frequency_hz(f_star)
    record = train_to_accuracy(config(), train, test, device=device, power_cap_w=cap_w,
                               profile=before, checkpoint_dir=tmp_path)
    assert record.resumed_from_samples == AFTER_THE_REPLAN
    assert record.reached
    assert len(record.replans) == 1 and record.replans[0].to_hz == f_lower
    # The re-planned frequency was put back at once, and the re-measured point is the
    # reference now, so the same drift is not reported a second time.
    assert record.frequency_hz == f_lower
    # the watchdog's steps were all before the kill (under the drift, before its re-plan)
    resumed_s = next(p.device_time_s for p in record.curve
                     if p.samples == record.resumed_from_samples)
    assert record.frequency_steps and all(s.time_s <= resumed_s for s in record.frequency_steps)
    assert len(record.drift_events) == 1
    assert all(v.duration_s <= device.sensor_period_s + EPS for v in record.cap_violations)


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_train_cli_watches_drift_and_replans(
    tmp_path: Path, profiles: tuple[ProfileTable, ProfileTable],
    scenario: tuple[float, int, int],
) -> None:
    before, _ = profiles
    cap_w, f_star, f_lower = scenario
    profile_path = tmp_path / "nano.json"
    before.save(profile_path)
    # The scenario's cap is set 0.03 W above a frontier point: the planner's noise margin is
    # turned off so that the plan is that point (test_margin.py tests the margin).
    args = ["train", "--profile", str(profile_path), "--power-cap", f"{cap_w:.4f}",
            "--margin-sigmas", "0",
            "--model", MODEL, "--data", "digits-32", "--target-accuracy", "0.8",
            "--sample-budget", "4096", "--out", str(tmp_path / "run.json")]
    result = CliRunner().invoke(app, args + ["--drift", f"{DERATING_AFTER_S},0.8,1.15"])
    assert result.exit_code == 0, result.output
    assert f"batch size {B} at {f_star / 1e6:.1f} MHz" in result.output
    assert "re-planned" in result.output
    record = RunRecord.load(tmp_path / "run.json")
    assert record.drift_events and record.replans
    assert record.replans[0].to_hz <= f_lower
    assert record.frequency_hz <= f_lower

    # --drift-tolerance 0 turns the monitor off: the drift goes unwatched, only the watchdog
    # (whose steps are logged) stands between the run and the cap.
    off = CliRunner().invoke(app, args + ["--drift", f"{DERATING_AFTER_S},0.8,1.15",
                                          "--drift-tolerance", "0"])
    assert off.exit_code == 0, off.output
    assert not RunRecord.load(tmp_path / "run.json").replans

    refused = CliRunner().invoke(app, args + ["--device", "jetson", "--drift", "0,0.8,1.1"])
    assert refused.exit_code != 0
    assert "only applies to emulated devices" in refused.output


def _log_the_gpu_moves(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Spies on the training model leaving the GPU, the re-measure and its copy being freed:
    each logs, then does what it spies on (the run is the one without them)."""
    import wattcap.runtime.drift_monitor as drift_monitor
    from wattcap.runtime.device_guard import DeviceGuard

    log: list[str] = []
    real_offload = DeviceGuard.training_model_off_gpu
    real_refresh, real_release = drift_monitor.refresh_row, Profiler.release_steps

    @contextmanager
    def offload(self: DeviceGuard) -> Iterator[None]:
        log.append("model off the GPU")
        with real_offload(self):
            yield
        log.append("model back")

    def refresh(*args: object, **kwargs: object):
        log.append("re-measure")
        return real_refresh(*args, **kwargs)

    def release(self: Profiler) -> None:
        log.append("copy freed")
        real_release(self)

    monkeypatch.setattr(DeviceGuard, "training_model_off_gpu", offload)
    monkeypatch.setattr(drift_monitor, "refresh_row", refresh)
    monkeypatch.setattr(Profiler, "release_steps", release)
    return log


def test_the_remeasure_never_holds_two_models_on_the_gpu(derating_run: DeratingRun) -> None:
    """The re-measure builds its own copy of the model: the training model is off the GPU for
    exactly that long, and the copy is freed before it comes back."""
    log = derating_run.gpu_log
    assert derating_run.record.replans
    start = log.index("model off the GPU")
    assert log[start:start + 4] == ["model off the GPU", "re-measure", "copy freed",
                                    "model back"]


def test_the_training_model_and_its_optimizer_leave_the_gpu_and_come_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch
    from torch import nn

    from wattcap.runtime.device_guard import DeviceGuard

    moves: list[str] = []
    real_to = nn.Module.to

    def to(self: nn.Module, *args: object, **kwargs: object) -> nn.Module:
        target = str(kwargs.get("device", args[0] if args else ""))
        moves.append(target)
        return real_to(self, "cpu") if target.startswith("cuda") else real_to(self, *args,
                                                                               **kwargs)

    tensor_moves: list[str] = []
    real_tensor_to = torch.Tensor.to

    def tensor_to(self: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        target = str(kwargs.get("device", args[0] if args else ""))
        tensor_moves.append(target)
        return self if target.startswith("cuda") else real_tensor_to(self, *args, **kwargs)

    monkeypatch.setattr(nn.Module, "to", to)
    monkeypatch.setattr(torch.Tensor, "to", tensor_to)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 4)).sum().backward()
    optimizer.step()

    class FakeSession:
        _attached = (model, optimizer)
        torch_device = "cuda:1"

    moments = 2 * len(list(model.parameters()))  # Adam's exp_avg and exp_avg_sq
    with DeviceGuard(FakeSession()).training_model_off_gpu():
        assert moves == ["cpu"]
        off = len(tensor_moves)
        assert off >= moments and set(tensor_moves) == {"cpu"}
    assert moves == ["cpu", "cuda:1"]
    # the optimiser's moments come back to the GPU; Adam's "step" counter stays where it was
    assert tensor_moves[off:].count("cuda:1") == moments


def test_a_replan_says_the_values_that_changed(derating_run: DeratingRun) -> None:
    import re

    reason = derating_run.record.replans[0].reason
    # the value the profile had, the value measured, and the change
    assert re.search(r"time per sample \d+\.\d{3} -> \d+\.\d{3} ms \(\+\d+%\)", reason), reason
