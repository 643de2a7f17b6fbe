"""A refresh in rounds: the frontier search is the first round, each later round measures the
points it found again after the gap, and the rounds are merged as a profile's are (mean time,
a spread that includes what changed between rounds, the largest peak), so the refreshed points
carry the spread the planner's margin and "within noise" read."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wattcap.cli import app
from wattcap.core.profile import ProfilePoint, ProfileTable
from wattcap.core.progress import JobProgress
from wattcap.devices import EmulatedDevice
from wattcap.devices.emulated import Drift
from wattcap.devices.errors import FrequencyNotFollowedError
from wattcap.measure.profile_refresh import RefreshResult, refresh_profile
from wattcap.measure.profiling import Profiler

MODEL = "digits32-cnn"
SIZES = (8, 32)
CAP_W = 4.0
GAP_S = 5.0
#: the board in each round: slower and hotter in the second (it drifted while it idled)
SPEEDS = (1.0, 0.8)
POWERS = (1.0, 1.1)


class DriftingBoard(EmulatedDevice):
    """An emulated Nano whose speed and power change while it idles between rounds: round k
    runs at SPEEDS[k] and POWERS[k]."""

    def __init__(self) -> None:
        super().__init__("jetson-nano")
        self.idles_s: list[float] = []

    def idle(self, seconds: float) -> None:
        super().idle(seconds)
        self.idles_s.append(seconds)
        round_ = len(self.idles_s)
        self.drift = Drift(after_s=0.0, speed_factor=SPEEDS[round_], power_factor=POWERS[round_])


@pytest.fixture(scope="module")
def previous() -> ProfileTable:
    """The profile to refresh: pruned for the cap on a steady Nano."""
    return Profiler(EmulatedDevice("jetson-nano"), MODEL, batch_sizes=SIZES).run(power_cap_w=CAP_W)


def _refresh(previous: ProfileTable, rounds: int | None,
             **kwargs: float) -> tuple[RefreshResult, DriftingBoard, list[ProfilePoint]]:
    """A refresh of `previous` on a drifting board (`rounds` None: the default), and every point
    it measured, in order."""
    board = DriftingBoard()
    seen: list[ProfilePoint] = []

    def record(update: JobProgress) -> None:
        assert isinstance(update.item, ProfilePoint)
        seen.append(update.item)

    profiler = Profiler(board, MODEL, batch_sizes=SIZES, progress=record)
    extra = {} if rounds is None else {"rounds": rounds}
    result = refresh_profile(profiler, previous, power_cap_w=CAP_W, round_gap_s=GAP_S,
                             **extra, **kwargs)
    return result, board, seen


def test_a_refresh_in_two_rounds_gives_each_point_the_spread_between_its_rounds(
        previous: ProfileTable) -> None:
    result, board, seen = _refresh(previous, 2)
    table = result.table
    assert board.idles_s == [GAP_S]
    assert table.mode == "refresh" and table.rounds == 2
    assert len(result.round_device_s) == 2 and result.round_gap_s == GAP_S
    assert result.rounds_skipped is None
    count = len(result.changes)
    assert count >= len(SIZES) and len(seen) == 2 * count  # round two measures round one's
    # the gap is not counted as profiling time
    assert table.profiling_device_s == pytest.approx(
        previous.profiling_device_s + sum(result.round_device_s))
    peaks_differ = False
    for i, change in enumerate(result.changes):
        point, rounds = change.new, [seen[i], seen[count + i]]
        key = (point.batch_size, point.knob_value)
        assert all((p.batch_size, p.knob_value) == key for p in rounds)
        times = [p.seconds_per_sample for p in rounds]
        assert times[1] > 1.1 * times[0]  # the second round ran on the slower board
        assert point.rounds == 2 and point.round_seconds_per_sample == times
        assert point.seconds_per_sample == pytest.approx(statistics.fmean(times))
        between_s = statistics.stdev(times)
        assert point.seconds_per_sample_std is not None
        assert point.seconds_per_sample_std >= between_s * (1 - 1e-9)
        assert point.peak_power_w == max(p.peak_power_w for p in rounds)
        peaks_differ |= rounds[0].peak_power_w != rounds[1].peak_power_w
        # the merged point is the one the table keeps and the one the change compares
        assert table.lookup(*key) == point
        assert change.old == previous.lookup(*key)
        if change.old is not None:
            assert change.time_change == pytest.approx(
                point.seconds_per_sample / change.old.seconds_per_sample - 1.0)
    assert peaks_differ  # the hotter second round read other peaks: the max is a choice
    # written out and read back with its rounds
    assert ProfileTable.model_validate_json(table.to_json()) == table


def test_a_refresh_in_one_round_measures_once_as_before(previous: ProfileTable) -> None:
    """One round (the default on an emulated device) measures the frontier once: no gap, no
    later round, points of one round, the table's rounds left as they were."""
    by_default, board, seen = _refresh(previous, None)
    assert board.idles_s == [] and len(by_default.round_device_s) == 1
    assert len(seen) == len(by_default.changes)
    assert [c.new for c in by_default.changes] == seen  # the points as measured, unmerged
    assert by_default.table.rounds == previous.rounds == 1
    written = json.loads(by_default.table.to_json())
    assert "rounds" not in written
    assert all("rounds" not in p and "round_seconds_per_sample" not in p
               for p in written["points"])
    once, _, _ = _refresh(previous, 1)
    assert once.table.model_dump(exclude={"created_at"}) == \
        by_default.table.model_dump(exclude={"created_at"})
    expected = previous.remeasured(seen)
    assert once.table.points == expected.points


def test_a_refresh_leaves_its_later_rounds_out_where_the_first_took_longer_than_allowed(
        previous: ProfileTable) -> None:
    long, board, _ = _refresh(previous, 2, max_first_round_s=1e-3)
    assert board.idles_s == [] and len(long.round_device_s) == 1
    assert long.table.rounds == 1 and all(c.new.rounds == 1 for c in long.changes)
    assert long.rounds_skipped is not None and "one round only" in long.rounds_skipped
    with pytest.raises(ValueError, match="at least 1"):
        _refresh(previous, 0)


runner = CliRunner()


def _invoke(*args: object):
    return runner.invoke(app, ["profile", "--model", MODEL, "--batch-sizes", "8,32",
                               *(str(a) for a in args)], env={"COLUMNS": "200"})


@pytest.fixture
def profile_path(tmp_path: Path, previous: ProfileTable) -> Path:
    path = tmp_path / "p.json"
    previous.save(path)
    return path


def test_the_cli_refreshes_in_rounds_and_says_so(tmp_path: Path, profile_path: Path) -> None:
    out = tmp_path / "refreshed.json"
    result = _invoke("--refresh", profile_path, "--power-cap", CAP_W, "--rounds", 2,
                     "--out", out)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "2 rounds took" in text and "0 s idle between rounds" in text
    assert "re-measured (refresh, 2 rounds)" in text
    table = ProfileTable.load(out)
    assert table.mode == "refresh" and table.rounds == 2
    fresh = [p for p in table.points if not p.predicted and p.rounds == 2]
    assert fresh and all(len(p.round_seconds_per_sample) == 2 for p in fresh)
    # one round, as an emulated device measures unless told: nothing said of rounds
    once = _invoke("--refresh", profile_path, "--power-cap", CAP_W, "--out", tmp_path / "1.json")
    assert once.exit_code == 0, once.output
    assert "rounds" not in once.output
    assert ProfileTable.load(tmp_path / "1.json").rounds == 1


def test_the_cli_refreshes_in_the_default_rounds_of_real_hardware(
        tmp_path: Path, profile_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The emulator standing in for real hardware (its default made real hardware's): a
    refresh says it measures two rounds, as a profile does, and measures them."""
    import wattcap.measure.profile_rounds as rounds_module

    monkeypatch.setattr(rounds_module, "default_rounds", lambda device: 2)
    out = tmp_path / "refreshed.json"
    result = _invoke("--refresh", profile_path, "--power-cap", CAP_W, "--out", out)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "measuring in 2 rounds" in text and "2 rounds took" in text
    assert ProfileTable.load(out).rounds == 2


def test_a_refresh_dry_run_says_its_rounds(profile_path: Path, previous: ProfileTable) -> None:
    result = _invoke("--refresh", profile_path, "--power-cap", CAP_W, "--rounds", 2,
                     "--dry-run")
    assert result.exit_code == 0, result.output
    frontier = len(previous.frontier(CAP_W))
    assert (f"re-measure {frontier} frontier points of {profile_path} (more where one now "
            f"breaks the cap), in 2 rounds") in " ".join(result.output.split())
    assert f"{2 * frontier} measurements at least" in " ".join(result.output.split())
    assert ProfileTable.load(profile_path) == previous  # a dry run writes nothing
    once = _invoke("--refresh", profile_path, "--power-cap", CAP_W, "--dry-run")
    assert once.exit_code == 0, once.output
    assert "rounds" not in once.output


class ClampingBoard(DriftingBoard):
    """A drifting board that, once it has idled, holds the top clock lower (hot): a later
    round's point at that clock is refused as a real board refuses it."""

    def set_frequency_hz(self, frequency_hz: int) -> int:
        top_hz = self.frequencies_hz()[-1]
        if self.idles_s and frequency_hz == top_hz:
            running_hz = self.frequencies_hz()[-2]
            raise FrequencyNotFollowedError(
                f"held at {running_hz} Hz", requested_hz=frequency_hz, running_hz=running_hz,
                cause="thermal")
        return super().set_frequency_hz(frequency_hz)


def test_a_later_round_leaves_out_a_point_the_board_now_holds_lower() -> None:
    """No cap: the frontier is the top clock of each row, which the hot board refuses in the
    second round; the refresh finishes, those points keep one round, the others two."""
    steady = Profiler(EmulatedDevice("jetson-nano"), MODEL, batch_sizes=SIZES).run(
        exhaustive=True)
    board = ClampingBoard()
    result = refresh_profile(Profiler(board, MODEL, batch_sizes=SIZES), steady,
                             rounds=2, round_gap_s=GAP_S)
    top_hz = board.frequencies_hz()[-1]
    assert board.idles_s == [GAP_S]
    assert result.changes
    for change in result.changes:
        expected = 1 if change.new.knob_value == top_hz else 2
        assert change.new.rounds == expected, change.new
    assert any(c.new.knob_value == top_hz for c in result.changes)
