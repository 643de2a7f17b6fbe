"""Knobs other than the GPU clock (issue 28 items 2, 3, 7): a power limit and a Jetson power
mode, imported from measured tables, planned by predicted time where time is not monotone in
the knob, with the power-limit baseline; the oracle is a brute force over every feasible
(b, knob value); training (which sets clocks) refuses them in one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.algorithms.planner import plan
from wattcap.algorithms.power_margin import cap_on_average, monotone_peaks
from wattcap.cli import app
from wattcap.core.knob import format_knob, knob_unit
from wattcap.core.plan import InfeasibleCapError
from wattcap.core.profile import ProfilePoint, ProfileTable
from wattcap.measure.imported_tables import TableImportError, export_profile, import_profile
from wattcap.runtime.session_config import PlanSettings

#: a datacenter GPU's sweep over power limits (W): at 250 W the board runs hot and its clock
#: falls below what 200 W gives, so b=64 is faster at 200 W than at 250 W (not monotone)
POWER_LIMIT_ROWS = [
    # batch_size, power_limit_w, ms_per_sample, avg_power_w, peak_power_w
    (16, 150, 1.60, 140.0, 160.0),
    (16, 200, 1.30, 185.0, 205.0),
    (16, 250, 1.25, 230.0, 255.0),
    (64, 150, 1.10, 145.0, 165.0),
    (64, 200, 0.80, 195.0, 215.0),
    (64, 250, 0.95, 240.0, 262.0),
]


def _power_limit_csv(path: Path, rows: list[tuple] = POWER_LIMIT_ROWS) -> Path:
    lines = ["batch_size,power_limit_w,ms_per_sample,avg_power_w,peak_power_w"]
    lines += [",".join(f"{v:g}" for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def _import(path: Path) -> ProfileTable:
    return import_profile(path, device="a100-sxm", model="resnet18",
                          power_sampling="average:1")


def test_a_power_limit_table_imports_as_the_power_limit_knob_in_milliwatts(
        tmp_path: Path) -> None:
    table = _import(_power_limit_csv(tmp_path / "limits.csv"))
    assert table.knob_kind == "power_limit"
    assert table.knob_values == [150_000, 200_000, 250_000]  # mW, NVML's unit
    assert table.describe_knob(200_000) == "power limit 200 W"
    # exported in the kind's column, it imports to the same points
    again = tmp_path / "again.csv"
    again.write_text(export_profile(table))
    assert again.read_text().splitlines()[0].split(",")[:2] == ["batch_size", "power_limit_w"]
    back = _import(again)
    assert [(p.batch_size, p.knob_value, p.seconds_per_sample) for p in back.points] == [
        (p.batch_size, p.knob_value, p.seconds_per_sample) for p in table.points]


def test_a_power_mode_table_round_trips_with_mode_ids(tmp_path: Path) -> None:
    path = tmp_path / "modes.csv"
    path.write_text("batch_size,power_mode,seconds_per_sample,avg_power_w,peak_power_w\n"
                    "8,0,0.004,9.0,11.0\n8,1,0.006,6.0,7.5\n8,2,0.005,7.0,9.5\n")
    table = import_profile(path, device="jetson-orin-nano", model="resnet18",
                           power_sampling="instant:0.1")
    assert (table.knob_kind, table.knob_values) == ("power_mode", [0, 1, 2])
    again = tmp_path / "again.csv"
    again.write_text(export_profile(table))
    assert "power_mode" in again.read_text().splitlines()[0]
    assert import_profile(again, device="jetson-orin-nano", model="resnet18",
                          power_sampling="instant:0.1").points == table.points
    # mode ids are not ordered by power: under 10 W the fastest feasible mode is 2, not 1
    chosen = plan(table, 10.0, margin_sigmas=0).choices["wattcap"]
    assert chosen.knob_value == 2
    assert plan(table, 10.0, margin_sigmas=0).safe_knob_value == 2  # most powerful safe mode


@pytest.mark.parametrize("header, row, match", [
    ("batch_size,power_limit_w,frequency_mhz,ms_per_sample,avg_power_w", "8,200,900,1,150",
     "two knob columns"),
    ("batch_size,power_limit_w,ms_per_sample,avg_power_w", "8,200000,1,150", "check the unit"),
    ("batch_size,power_mode,ms_per_sample,avg_power_w", "8,1.5,1,5", "not a whole number"),
    ("batch_size,ms_per_sample,avg_power_w", "8,1,5", "no knob"),
])
def test_a_knob_column_that_cannot_be_read_is_refused_naming_it(
        tmp_path: Path, header: str, row: str, match: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(f"{header}\n{row}\n")
    with pytest.raises(TableImportError, match=match):
        _import(path)


def test_where_time_is_not_monotone_in_the_power_limit_the_faster_limit_is_chosen(
        tmp_path: Path) -> None:
    table = _import(_power_limit_csv(tmp_path / "limits.csv"))
    # no cap: Algorithm 1's "highest value" would run b=64 at 250 W; 200 W is faster
    free = plan(table, None, margin_sigmas=0)
    assert (free.choices["wattcap"].batch_size, free.choices["wattcap"].knob_value) == (
        64, 200_000)
    assert free.choices["wattcap"].seconds_per_sample == pytest.approx(0.80e-3)
    # and the row's best point under a cap is its fastest feasible one
    for cap in (170.0, 210.0, 220.0, 300.0):
        for b, point in table.frontier(cap).items():
            feasible = [p for p in table.points if p.batch_size == b and p.peak_power_w <= cap]
            assert point.seconds_per_sample == min(p.seconds_per_sample for p in feasible)


def test_the_power_limit_baseline_is_the_largest_batch_at_limit_equal_to_the_cap(
        tmp_path: Path) -> None:
    table = cap_on_average(_import(_power_limit_csv(tmp_path / "limits.csv")))
    result = plan(table, 250.0, margin_sigmas=0)
    assert result.knob_kind == "power_limit" and result.safe_knob_value == 250_000
    base = result.choices["baseline-1"]
    assert (base.batch_size, base.knob_value) == (64, 250_000)  # nvidia-smi -pl 250
    assert result.choices["wattcap"].knob_value == 200_000  # faster, under the same cap
    assert result.speedup("baseline-1") == pytest.approx(0.95 / 0.80)
    assert any("sets the power limit to the cap" in note for note in result.notes)
    # a cap between the measured limits: the practice's limit is the highest one under it
    assert plan(table, 240.0, margin_sigmas=0).safe_knob_value == 200_000
    # under every measured limit: no baseline, said
    low = plan(table, 146.0, margin_sigmas=0)
    assert "baseline-1" not in low.choices
    assert "no power limit at or below the cap" in low.unavailable["baseline-1"]


def _table(rows: list[list[tuple[float, float]]], kind: str) -> ProfileTable:
    """rows[i][j]: (peak W, seconds per sample) of batch size 2^(i+3) at knob value j."""
    values = [100_000 * (j + 1) for j in range(len(rows[0]))]
    points = [ProfilePoint(batch_size=2 ** (i + 3), knob_value=values[j], peak_power_w=peak,
                           avg_power_w=peak * 0.9, seconds_per_sample=spp, steps=0, readings=0)
              for i, row in enumerate(rows) for j, (peak, spp) in enumerate(row)]
    sizes = [2 ** (i + 3) for i in range(len(rows))]
    return ProfileTable(device="d", device_kind="imported", sensor_rail="r", sensor_period_s=0.1,
                        model="m", input_shape=[], batch_sizes=sizes, knob_kind=kind,
                        knob_values=values, max_batch_size=max(sizes), mode="imported",
                        points=points, points_measured=len(points), profiling_device_s=0.0)


_cell = st.tuples(st.floats(1.0, 10.0), st.floats(1e-4, 1e-2))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_cell, min_size=3, max_size=3), min_size=2, max_size=4),
       st.lists(st.floats(0.2, 1.5), min_size=4, max_size=4),
       st.floats(1.0, 11.0), st.sampled_from(["gpu_clock", "power_limit", "power_mode"]))
def test_the_choice_and_the_oracle_are_the_brute_force_over_every_feasible_point(
        rows: list[list[tuple[float, float]]], ratios: list[float], cap: float,
        kind: str) -> None:
    table = _table(rows, kind)
    proxy, target = (vector_from_samples(
        {b: [1000.0 * r] for b, r in zip(table.batch_sizes, rs, strict=False)},
        sample_budget=10**9, use_fit=False, model="m", input_shape=[], dataset=name,
        task="image-classification", target_accuracy=0.5, seeds=[0])
        for name, rs in (("proxy", ratios), ("target", list(reversed(ratios)))))
    # where power does not fall as the knob rises (the clock, a limit), a point is feasible when
    # no measured point of its row at a lower value is over the cap (planner.monotone_peaks)
    ordered = kind != "power_mode"
    feasible = [p for p in table.points if max(
        q.peak_power_w for q in table.points if q.batch_size == p.batch_size and (
            q.knob_value <= p.knob_value if ordered else q is p)) <= cap]
    if not feasible:
        return
    result = plan(table, cap, efficiency=proxy, target_efficiency=target, margin_sigmas=0)
    for method, vector in (("wattcap", proxy), ("fastest", target)):
        best = min(p.seconds_per_sample * vector.ratio(p.batch_size) for p in feasible)
        choice = result.choices[method]
        assert choice.peak_power_w <= cap
        assert choice.seconds_per_sample * vector.ratio(choice.batch_size) == pytest.approx(best)


def test_a_remeasured_row_scales_its_other_points_so_none_is_stale() -> None:
    """The device got 50 % slower and 10 % hotter at b=8: its two re-measured points say so;
    its third point is brought along scaled and marked predicted, with the change as its
    uncertainty, and b=16 (not re-measured) is left as it was. With the stale point left as
    it was, the lowest clock would look fastest under a cap between the old and new peaks."""
    table = _table([[(3.0, 1.0e-3), (4.0, 0.8e-3), (5.0, 0.7e-3)],
                    [(3.5, 0.9e-3), (4.5, 0.7e-3), (5.5, 0.6e-3)]], "gpu_clock")
    values = table.knob_values
    new = [ProfilePoint(batch_size=8, knob_value=values[j], peak_power_w=peak * 1.1,
                        avg_power_w=peak * 0.9 * 1.1, seconds_per_sample=spp * 1.5, steps=5,
                        readings=10)
           for j, (peak, spp) in ((1, (4.0, 0.8e-3)), (2, (5.0, 0.7e-3)))]
    fresh = table.remeasured(new)
    scaled = fresh.lookup(8, values[0])
    assert scaled is not None and scaled.predicted and scaled.steps == 0
    assert scaled.seconds_per_sample == pytest.approx(1.5e-3)
    assert scaled.peak_power_w == pytest.approx(3.3)
    assert scaled.peak_power_std_w == pytest.approx(3.3 * 0.1)
    assert fresh.lookup(8, values[1]) == new[0]
    assert fresh.lookup(16, values[0]) == table.lookup(16, values[0])
    # under 4.5 W the new 4.4 W point (1.2 ms) beats the scaled lowest clock (1.5 ms); the
    # stale one (1.0 ms) would have won
    assert fresh.frontier(4.5)[8].knob_value == values[1]
    stale = table.merged(table.model_copy(update={"points": new}))
    assert stale.frontier(4.5)[8].knob_value == values[0]


def test_plan_speaks_of_the_knob_with_its_unit(tmp_path: Path) -> None:
    profile = tmp_path / "limits.json"
    _import(_power_limit_csv(tmp_path / "limits.csv")).save(profile)
    result = CliRunner().invoke(app, ["plan", "--profile", str(profile), "--power-cap", "250",
                                      "--cap-on", "average"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "limit W" in result.output and "MHz" not in result.output
    assert "power limit 200 W" in result.output or " 200 " in result.output
    summary = CliRunner().invoke(app, ["plan", "--profile", str(profile), "--power-cap", "250",
                                       "--cap-on", "average", "--json"])
    data = json.loads(summary.stdout)
    assert (data["knob_kind"], data["knob_unit"], data["knob_value"]) == (
        "power_limit", "mW", 200_000)
    assert "frequency_hz" not in data


def test_a_session_plans_the_power_limit_and_leaves_the_clock_alone(tmp_path: Path) -> None:
    from wattcap.runtime.session import Session

    profile = _import(_power_limit_csv(tmp_path / "limits.csv"))
    # plans; touches nothing
    session = Session(None, planning=PlanSettings(profile=profile), cap=250.0)
    expected = plan(profile, 250.0).choices["wattcap"]
    assert (session.knob_kind, session.frequency_hz) == ("power_limit", None)
    assert (session.batch_size, session.knob_value) == (expected.batch_size,
                                                         expected.knob_value)
    assert session.choice is not None and session.choice.knob_value == expected.knob_value


def test_knob_units() -> None:
    assert format_knob("gpu_clock", 614_400_000) == "614.4 MHz"
    assert format_knob("power_limit", 150_500) == "power limit 150.5 W"
    assert format_knob("power_mode", 3) == "power mode 3"
    assert [knob_unit(k).power_rises_with_value for k in ("gpu_clock", "power_limit",
                                                          "power_mode")] == [True, True, False]
    with pytest.raises(ValueError, match="unknown knob kind 'fan'"):
        knob_unit("fan")


def test_the_cost_objective_takes_the_boards_largest_power_limit_as_p_max(
        tmp_path: Path) -> None:
    from wattcap.core.objective import Objective

    table = _import(_power_limit_csv(tmp_path / "limits.csv"))
    cost = Objective.of("cost", eta=0.5)
    # a power-limit table: the largest limit it measured
    assert plan(table, None, objective=cost).objective.cost_power_w == pytest.approx(250.0)
    # recorded from the board (NVML's constraint): that one, said in the notes
    board = table.model_copy(update={"max_power_limit_w": 400.0})
    result = plan(board, None, objective=cost)
    assert result.objective.cost_power_w == pytest.approx(400.0)
    assert any("P_max = 400.00 W, the board's largest power limit" in n for n in result.notes)
    # the user's value wins
    mine = Objective.of("cost", eta=0.5, cost_power_w=300.0)
    assert plan(board, None, objective=mine).objective.cost_power_w == pytest.approx(300.0)
    # a clock table without a recorded limit: its highest (measured) peak, as before
    clock = _table([[(3.0, 1e-3), (4.0, 8e-4)]], "gpu_clock")
    assert plan(clock, None, objective=cost).objective.cost_power_w == pytest.approx(4.0)


def test_under_a_peak_cap_the_power_limit_baseline_says_why_it_cannot_run(
        tmp_path: Path) -> None:
    table = _import(_power_limit_csv(tmp_path / "limits.csv"))
    result = plan(table, 250.0, margin_sigmas=0)  # peaks of 1 s averages, raised
    reason = result.unavailable["baseline-1"]
    assert "b=64 at the safe power limit 250 W draws" in reason
    assert "over the 250.00 W cap" in reason and "holds average power, not peak" in reason
    assert result.choices["wattcap"].peak_power_w <= 250.0
    # held on average power, the table's peaks exist: the plan does not say they are missing
    averaged = plan(cap_on_average(table), 250.0, margin_sigmas=0)
    assert any("--cap-on average: the peak W columns show average power" in note
               for note in averaged.notes)
    assert not any("has no peak power" in note for note in averaged.notes)


def test_no_peak_is_planned_below_a_lower_knob_values_measured_peak() -> None:
    """A clock row whose middle point read low (noise: a window at a low clock holds more
    readings, so its maximum reads higher) is planned at its lower clock's peak; a predicted
    point raises nothing; power modes, which are not ordered, are left as measured."""
    rows = [[(4.0, 1.0e-3), (3.9, 0.8e-3), (4.5, 0.7e-3)],
            [(4.2, 0.9e-3), (4.6, 0.7e-3), (5.0, 0.6e-3)]]
    clock = _table(rows, "gpu_clock")
    values = clock.knob_values
    raised = monotone_peaks(clock)
    assert raised.lookup(8, values[1]).peak_power_w == 4.0
    assert [p.peak_power_w for p in raised.points if (p.batch_size, p.knob_value) != (
        8, values[1])] == [p.peak_power_w for p in clock.points if (
            p.batch_size, p.knob_value) != (8, values[1])]
    # under 3.95 W nothing of b=8 is planned (the 3.9 W reading at the higher clock was luck)
    with pytest.raises(InfeasibleCapError, match=r"b=8 at 0.2 MHz read 3.90 W, but a lower "
                       r"GPU clock of its row read 4.00 W"):
        plan(clock, 3.95, margin_sigmas=0)
    assert plan(clock, 4.0, margin_sigmas=0).choices["wattcap"].knob_value == values[1]
    # where something else fits, the plan says which reading it held
    other = _table([rows[0], [(3.5, 0.9e-3), (4.6, 0.7e-3), (5.0, 0.6e-3)]], "gpu_clock")
    result = plan(other, 3.95, margin_sigmas=0)
    assert result.choices["wattcap"].batch_size == 16
    assert any(note.startswith("1 measured point(s) under the cap held at a lower GPU clock's "
                               "peak: b=8 at 0.2 MHz read 3.90 W") for note in result.notes)
    # the same rows as power limits are ordered too; as power modes they are not
    assert monotone_peaks(_table(rows, "power_limit")).lookup(8, values[1]).peak_power_w == 4.0
    modes = _table(rows, "power_mode")
    assert monotone_peaks(modes) == modes
    assert plan(modes, 3.95, margin_sigmas=0).choices["wattcap"].knob_value == values[1]
    # a predicted lower point (a model's smooth value, not a reading) raises nothing
    predicted = clock.model_copy(update={"points": [
        p.model_copy(update={"predicted": True}) if (p.batch_size, p.knob_value) == (
            8, values[0]) else p for p in clock.points]})
    assert monotone_peaks(predicted).lookup(8, values[1]).peak_power_w == 3.9
