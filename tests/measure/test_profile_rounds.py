"""Profiles in rounds: every point measured again after a gap, the rounds merged into a mean
time, a spread that includes what changed between rounds, the largest peak."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wattcap.cli import app
from wattcap.core.profile import ProfilePoint, ProfileTable
from wattcap.core.progress import JobProgress
from wattcap.devices import EmulatedDevice, load_spec
from wattcap.devices.emulated import Drift
from wattcap.devices.emulated_board import BoardState
from wattcap.measure.profile_rounds import (
    DEFAULT_REAL_ROUNDS,
    DEFAULT_ROUND_GAP_S,
    default_round_gap_s,
    default_rounds,
    merge_point,
    profile_in_rounds,
    sweep_in_rounds,
)
from wattcap.measure.profiling import Profiler

MODEL = "digits32-cnn"
SIZES = (8, 32)
#: the board's speed in each round: it slows, then runs faster than at first
SPEEDS = (1.0, 0.8, 1.25)


class ChangingBoard(EmulatedDevice):
    """An emulated board whose speed changes while it idles between rounds (its temperature,
    a background process): round k runs at SPEEDS[k]."""

    def __init__(self) -> None:
        super().__init__("jetson-nano")
        self.idles_s: list[float] = []

    def idle(self, seconds: float) -> None:
        super().idle(seconds)
        self.idles_s.append(seconds)
        self.drift = Drift(after_s=0.0, speed_factor=SPEEDS[len(self.idles_s)])


def _recording_profiler(device: EmulatedDevice) -> tuple[Profiler, list[ProfilePoint]]:
    """A profiler and the list every point it measures lands in, in order."""
    seen: list[ProfilePoint] = []

    def record(update: JobProgress) -> None:
        assert isinstance(update.item, ProfilePoint)
        seen.append(update.item)

    return Profiler(device, MODEL, batch_sizes=SIZES, progress=record), seen


def test_a_changing_board_gives_each_point_the_spread_between_its_rounds() -> None:
    board = ChangingBoard()
    profiler, seen = _recording_profiler(board)
    result = profile_in_rounds(profiler, len(SPEEDS), power_cap_w=4.0, round_gap_s=5.0)
    table = result.table
    assert board.idles_s == [5.0, 5.0]
    assert table.rounds == 3 and result.gap_s == 5.0 and len(result.round_device_s) == 3
    count = len(table.points)
    assert count > 0 and len(seen) == 3 * count  # later rounds measure exactly round one's
    # the first round is the plain profile; the gaps are not counted as profiling time
    first = Profiler(EmulatedDevice("jetson-nano"), MODEL, batch_sizes=SIZES).run(power_cap_w=4.0)
    assert table.profiling_device_s == pytest.approx(
        first.profiling_device_s + sum(result.round_device_s[1:]))
    for i, point in enumerate(table.points):
        rounds = [seen[i], seen[count + i], seen[2 * count + i]]
        assert all((p.batch_size, p.knob_value) == (point.batch_size, point.knob_value)
                   for p in rounds)
        times = [p.seconds_per_sample for p in rounds]
        # each round's time is the board's at that round's speed, measured on its own
        for speed, time_s in zip(SPEEDS, times, strict=True):
            alone = Profiler(EmulatedDevice("jetson-nano", drift=Drift(0.0, speed)), MODEL,
                             batch_sizes=SIZES).measure(point.batch_size, point.knob_value)
            assert time_s == pytest.approx(alone.seconds_per_sample, rel=1e-9)
        assert point.rounds == 3 and point.round_seconds_per_sample == times
        assert point.seconds_per_sample == pytest.approx(statistics.fmean(times))
        # the emulator's windows have no timing noise: the rounds' spread is the spread
        between_s = statistics.stdev(times)
        assert between_s > 0.05 * point.seconds_per_sample
        assert all((p.seconds_per_sample_std or 0.0) < between_s for p in rounds)
        assert point.seconds_per_sample_std == pytest.approx(between_s, rel=1e-9)
        assert point.peak_power_w == max(p.peak_power_w for p in rounds)
        assert point.avg_power_w == pytest.approx(statistics.fmean(p.avg_power_w for p in rounds),
                                                  abs=1e-4)
        assert point.steps == sum(p.steps for p in rounds)
    # what plans read: the merged spread, written out and read back
    again = ProfileTable.model_validate_json(table.to_json())
    assert again == table


def _point(time_s: float, std_s: float | None, peak_w: float, avg_w: float) -> ProfilePoint:
    return ProfilePoint(batch_size=8, knob_value=1, peak_power_w=peak_w, avg_power_w=avg_w,
                        seconds_per_sample=time_s, steps=4, readings=10,
                        seconds_per_sample_std=std_s)


def test_a_window_noisier_than_the_rounds_sets_the_spread() -> None:
    merged = merge_point([_point(1.00, 0.10, 5.0, 4.0), _point(1.02, None, 5.5, 4.2),
                          _point(0.99, 0.02, 5.2, 4.1)])
    assert merged.seconds_per_sample_std == 0.10  # > the rounds' stdev (~0.015)
    assert merged.seconds_per_sample == pytest.approx(1.0033333333)
    assert (merged.peak_power_w, merged.avg_power_w) == (5.5, 4.1)
    assert (merged.rounds, merged.round_seconds_per_sample) == (3, [1.00, 1.02, 0.99])
    quiet = merge_point([_point(1.0, 0.001, 5.0, 4.0), _point(1.2, 0.001, 5.0, 4.0)])
    assert quiet.seconds_per_sample_std == pytest.approx(statistics.stdev([1.0, 1.2]))


def test_one_round_is_the_plain_profile_and_writes_no_new_keys() -> None:
    plain = Profiler(EmulatedDevice("jetson-nano"), MODEL, batch_sizes=SIZES).run(power_cap_w=4.0)
    profiler, _ = _recording_profiler(EmulatedDevice("jetson-nano"))
    one = profile_in_rounds(profiler, 1, power_cap_w=4.0).table
    # the same profile but for when it was written (two runs may fall in different seconds)
    assert one.model_dump(exclude={"created_at"}) == plain.model_dump(exclude={"created_at"})
    written = json.loads(one.to_json())
    assert "rounds" not in written
    assert all("rounds" not in p and "round_seconds_per_sample" not in p
               for p in written["points"])
    assert ProfileTable.model_validate(written).rounds == 1  # a file without them loads


def test_a_steady_board_has_no_spread_between_rounds_and_no_default_gap() -> None:
    device = EmulatedDevice("jetson-nano")
    assert default_round_gap_s(device) == 0.0 and DEFAULT_ROUND_GAP_S > 0
    table = profile_in_rounds(Profiler(device, MODEL, batch_sizes=SIZES), 2,
                              exhaustive=True).table
    assert all(p.rounds == 2 and p.seconds_per_sample_std == pytest.approx(0.0, abs=1e-12)
               for p in table.points)
    with pytest.raises(ValueError, match="at least 1"):
        profile_in_rounds(Profiler(device, MODEL, batch_sizes=SIZES), 0)


class MeasuredInRealTime(EmulatedDevice):
    """The emulated Nano as a device whose time is measured, not modelled (only what decides
    the default rounds reads this flag)."""

    timing_needs_real_work = True


def test_real_hardware_measures_two_rounds_by_default_the_emulator_one() -> None:
    assert default_rounds(EmulatedDevice("jetson-nano")) == 1
    assert default_rounds(MeasuredInRealTime("jetson-nano")) == DEFAULT_REAL_ROUNDS >= 2


def test_later_rounds_are_left_out_where_the_first_took_longer_than_allowed() -> None:
    device = EmulatedDevice("jetson-nano")
    long = profile_in_rounds(Profiler(device, MODEL, batch_sizes=SIZES), 2, exhaustive=True,
                             max_first_round_s=1e-3)
    assert len(long.round_device_s) == 1 and long.table.rounds == 1
    assert long.skipped is not None and "--rounds 2` measures them anyway" in long.skipped
    short = profile_in_rounds(Profiler(device, MODEL, batch_sizes=SIZES), 2, exhaustive=True,
                              max_first_round_s=1e6)
    assert len(short.round_device_s) == 2 and short.table.rounds == 2 and short.skipped is None


def test_a_knob_sweep_leaves_its_later_rounds_out_where_the_first_took_long() -> None:
    device = EmulatedDevice("jetson-nano")
    profiler = Profiler(device, MODEL, batch_sizes=SIZES)
    long = sweep_in_rounds(device, profiler.run_power_modes, 3, max_first_round_s=1e-3)
    assert len(long.round_device_s) == 1 and long.table.rounds == 1 and long.skipped
    short = sweep_in_rounds(device, profiler.run_power_modes, 2, max_first_round_s=1e6)
    assert len(short.round_device_s) == 2 and short.table.rounds == 2 and not short.skipped


runner = CliRunner()


def _invoke(*args: object):
    return runner.invoke(app, ["profile", "--model", MODEL, "--batch-sizes", "8,32",
                               *(str(a) for a in args)], env={"COLUMNS": "200"})


def test_the_cli_profiles_in_rounds_and_says_how_long_they_took(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    result = _invoke("--power-cap", "4", "--rounds", "2", "--out", out)
    assert result.exit_code == 0, result.output
    assert "2 rounds took" in result.output and "0 s idle between rounds" in result.output
    table = ProfileTable.load(out)
    assert table.rounds == 2 and all(p.rounds == 2 for p in table.points)


def test_the_cli_measures_one_round_on_the_emulator_unless_told(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    result = _invoke("--power-cap", "4", "--out", out)
    assert result.exit_code == 0, result.output
    assert "rounds" not in result.output
    assert ProfileTable.load(out).rounds == 1


def test_the_cli_says_when_the_default_measures_rounds_and_when_it_leaves_one_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default's wording, on the emulator standing in for real hardware (its default made
    real hardware's): it says it measures two rounds, and says so when the first took long."""
    import wattcap.measure.profile_rounds as rounds_module

    monkeypatch.setattr(rounds_module, "default_rounds", lambda device: 2)
    result = _invoke("--power-cap", "4", "--out", tmp_path / "two.json")
    assert result.exit_code == 0, result.output
    assert "measuring in 2 rounds" in " ".join(result.output.split())
    assert "2 rounds took" in result.output
    assert ProfileTable.load(tmp_path / "two.json").rounds == 2
    monkeypatch.setattr(rounds_module, "DEFAULT_ROUNDS_MAX_FIRST_S", 1e-3)
    result = _invoke("--power-cap", "4", "--out", tmp_path / "one.json")
    assert result.exit_code == 0, result.output
    assert "one round only" in " ".join(result.output.split())
    assert ProfileTable.load(tmp_path / "one.json").rounds == 1
    # rounds asked for are measured whatever the first took
    result = _invoke("--power-cap", "4", "--rounds", "2", "--out", tmp_path / "asked.json")
    assert result.exit_code == 0, result.output
    assert "one round only" not in " ".join(result.output.split())
    assert ProfileTable.load(tmp_path / "asked.json").rounds == 2


def test_a_few_point_profile_in_rounds_predicts_again_from_its_merged_points() -> None:
    """Later rounds measure the few points the first chose again; the predicted points come
    from a model fitted to the merged points (a board slower in the second round: every
    prediction slower than the first round's alone), not from the first round's fit."""
    one = profile_in_rounds(Profiler(ChangingBoard(), MODEL, batch_sizes=SIZES), 1,
                            power_cap_w=4.0, few_points=True, round_gap_s=5.0).table
    two = profile_in_rounds(Profiler(ChangingBoard(), MODEL, batch_sizes=SIZES), 2,
                            power_cap_w=4.0, few_points=True, round_gap_s=5.0).table
    assert one.mode == two.mode == "model" and two.rounds == 2
    measured = [p for p in two.points if not p.predicted]
    assert measured and all(p.rounds == 2 and len(p.round_seconds_per_sample) == 2
                            for p in measured)
    assert [(p.batch_size, p.knob_value) for p in measured] == \
        [(p.batch_size, p.knob_value) for p in one.points if not p.predicted]
    first = {(p.batch_size, p.knob_value): p for p in one.points if p.predicted}
    again = {(p.batch_size, p.knob_value): p for p in two.points if p.predicted}
    assert again and again.keys() == first.keys()
    assert all(again[key].seconds_per_sample > first[key].seconds_per_sample * 1.05
               for key in again)
    assert two.model_fit["parameters"] != one.model_fit["parameters"]


def test_later_rounds_read_a_steady_lagging_board_as_the_first_did() -> None:
    """A sensor that averages two periods and lags one would carry the previous point's power
    into a point's first reading; a later round's lead-in step at each point keeps it out, so a
    steady board (no noise) reads the same peaks in every round, however far apart the few
    points lie."""
    quiet = load_spec("jetson-nano").model_copy(update={"sensor_noise_w": 0.0})
    lagging = BoardState(sensor_window_periods=2.0, sensor_lag_periods=1.0, label="lagging")
    tables = [profile_in_rounds(Profiler(EmulatedDevice(quiet, board=lagging), MODEL,
                                         batch_sizes=(8, 32, 128)), rounds, power_cap_w=4.0,
                                few_points=True).table for rounds in (1, 2)]
    first = {(p.batch_size, p.knob_value): p.peak_power_w
             for p in tables[0].points if not p.predicted}
    merged = {(p.batch_size, p.knob_value): p.peak_power_w
              for p in tables[1].points if not p.predicted}
    assert len(first) >= 3 and merged == pytest.approx(first, abs=1e-6)


def test_power_limit_and_power_mode_profiles_are_measured_in_rounds_too(tmp_path: Path) -> None:
    """A knob sweep in rounds: every (batch size, knob value) measured in each round and merged
    as a clock profile's points are (the emulated A100's unkind board: power read differently
    from round to round by its sensor's noise)."""
    limits = tmp_path / "limits.json"
    result = runner.invoke(app, ["profile", "--device", "emulated:a100-sxm4:unkind=1",
                                 "--model", "digits32-cnn", "--batch-sizes", "64,256",
                                 "--knob", "power-limit", "--power-limits", "200,300,400",
                                 "--rounds", "2", "--out", str(limits)],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "2 rounds took" in result.output
    table = ProfileTable.load(limits)
    assert table.knob_kind == "power_limit" and table.rounds == 2
    assert len(table.points) == 6 and all(p.rounds == 2 for p in table.points)
    assert all(len(p.round_seconds_per_sample) == 2 for p in table.points)
    # --dry-run says what that run measures: every (batch size, limit), not every clock
    dry = runner.invoke(app, ["profile", "--device", "emulated:a100-sxm4", "--model",
                              "digits32-cnn", "--batch-sizes", "64,256", "--knob", "power-limit",
                              "--power-limits", "200,300,400", "--dry-run"],
                        env={"COLUMNS": "200"})
    assert dry.exit_code == 0, dry.output
    assert f"every power limit value, {len(table.points)} points at most" in dry.output
    modes = tmp_path / "modes.json"
    result = runner.invoke(app, ["profile", "--device", "emulated:jetson-nano", "--model",
                                 MODEL, "--batch-sizes", "8,32", "--knob", "power-mode",
                                 "--rounds", "3", "--out", str(modes)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    table = ProfileTable.load(modes)
    assert table.knob_kind == "power_mode" and table.rounds == 3
    assert table.points and all(p.rounds == 3 for p in table.points)


@pytest.mark.parametrize(("args", "message"), [
    (("--rounds", "0"), "--rounds must be 1 or more"),
    (("--rounds", "-3"), "--rounds must be 1 or more"),
    (("--round-gap-s", "10"), "this device measures 1 round by default: give --rounds 2"),
    (("--rounds", "1", "--round-gap-s", "10"), "--round-gap-s needs --rounds 2"),
    (("--rounds", "2", "--round-gap-s", "-1"), "0 seconds or more"),
])
def test_the_cli_refuses_bad_rounds(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    result = _invoke(*args, "--out", tmp_path / "p.json")
    assert result.exit_code != 0
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "p.json").exists()
