"""Measured tables in (issue 28 item 1): CSV layouts, the --columns mapping, unit errors,
repeated and missing rows, an absent peak, and round trips through `wattcap export profile`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.algorithms.planner import plan
from wattcap.cli import app
from wattcap.core.plan import InfeasibleCapError
from wattcap.core.profile import ProfileTable
from wattcap.devices import EmulatedDevice
from wattcap.measure.imported_tables import (
    TableImportError,
    export_profile,
    import_efficiency,
    import_profile,
)
from wattcap.measure.profiling import Profiler

CAP_W = 2.7


@pytest.fixture(scope="module")
def measured() -> ProfileTable:
    return Profiler(EmulatedDevice("jetson-nano"), "digits-cnn",
                    batch_sizes=(8, 32, 128)).run(exhaustive=True)


def _write(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


def _import(path: Path, **options: object) -> ProfileTable:
    settings = {"device": "jetson-nano", "model": "digits-cnn", "power_sampling": "instant:0.05",
                **options}
    return import_profile(path, **settings)  # type: ignore[arg-type]


def test_an_exported_profile_imports_to_the_same_table_and_plan(
    measured: ProfileTable, tmp_path: Path,
) -> None:
    csv_path = tmp_path / "table.csv"
    csv_path.write_text(export_profile(measured))
    imported = _import(csv_path, input_shape=list(measured.input_shape))
    key = [(p.batch_size, p.knob_value, p.seconds_per_sample, p.peak_power_w, p.avg_power_w)
           for p in sorted(measured.points, key=lambda p: (p.batch_size, p.knob_value))]
    assert [(p.batch_size, p.knob_value, p.seconds_per_sample, p.peak_power_w,
             p.avg_power_w) for p in imported.points] == key
    assert imported.mode == "imported" and imported.peak_power_source == "measured"
    assert imported.imported_from is not None and imported.imported_from["file"] == "table.csv"
    assert all(p.steps == 0 and p.readings == 0 for p in imported.points)  # not recorded
    assert imported.power_noise_w is None and imported.sensor_rail == "imported (instant, 0.05 s)"
    ours = plan(measured, CAP_W, margin_sigmas=0).choices["wattcap"]
    theirs = plan(imported, CAP_W, margin_sigmas=0).choices["wattcap"]
    assert (theirs.batch_size, theirs.knob_value) == (ours.batch_size, ours.knob_value)
    again = tmp_path / "again.json"
    imported.save(again)
    assert ProfileTable.load(again) == imported


def test_every_time_and_clock_layout_gives_the_same_points(tmp_path: Path) -> None:
    base = _import(_write(tmp_path / "a.csv", "batch_size,frequency_mhz,seconds_per_sample,"
                          "avg_power_w,peak_power_w",
                          ["8,921.6,0.002,3.0,3.5", "32,921.6,0.001,4.0,4.6"]))
    other_units = _import(_write(tmp_path / "b.csv", "batch_size,frequency_hz,ms_per_sample,"
                                 "avg_power_w,peak_power_w",
                                 ["8,921600000,2,3.0,3.5", "32,921600000,1,4.0,4.6"]))
    per_epoch = _import(_write(tmp_path / "c.csv", "batch_size,frequency_mhz,seconds_per_epoch,"
                               "samples_per_epoch,avg_power_w,peak_power_w",
                               ["8,921.6,100,50000,3.0,3.5", "32,921.6,50,50000,4.0,4.6"]))
    renamed = _import(_write(tmp_path / "d.csv", "bs,clock,t,power.draw,max_power",
                             ["8,921.6,0.002,3.0,3.5", "32,921.6,0.001,4.0,4.6"]),
                      columns="batch_size=bs,frequency_mhz=clock,seconds_per_sample=t,"
                              "avg_power_w=power.draw,peak_power_w=max_power")
    for table in (other_units, per_epoch, renamed):
        assert [(p.batch_size, p.knob_value, p.peak_power_w, p.avg_power_w)
                for p in table.points] == [(p.batch_size, p.knob_value, p.peak_power_w,
                                            p.avg_power_w) for p in base.points]
        assert [p.seconds_per_sample for p in table.points] == pytest.approx(
            [p.seconds_per_sample for p in base.points])


def test_units_written_by_the_measuring_tool_are_converted(tmp_path: Path) -> None:
    """nvidia-smi writes "148.10 W" and "1410 MHz" (or, with nounits, the unit in the header:
    "power.draw [W]"): a unit of the column's kind is converted, whatever its prefix."""
    plain = _import(_write(tmp_path / "plain.csv", "batch_size,frequency_mhz,ms_per_sample,"
                           "avg_power_w,peak_power_w",
                           ["8,1410,0.5,148.1,160", "32,1410,0.25,190.5,201"]))
    with_units = _import(_write(tmp_path / "units.csv", "batch_size, clocks.sm [MHz], "
                                "ms_per_sample, power.draw [W], peak_power_w",
                                ["8, 1.41 GHz, 500 us, 148.1 W, 160000 mW",
                                 "32, 1410, 0.25, 190.5, 201 W"]),
                         columns="frequency_hz=clocks.sm [MHz],avg_power_w=power.draw [W]")
    header_only = _import(_write(tmp_path / "header.csv", "batch_size,clock (GHz),"
                                 "step [s],power [mW],peak_power_w",
                                 ["8,1.41,0.0005,148100,160", "32,1.41,0.00025,190500,201"]),
                          columns="frequency_mhz=clock (GHz),ms_per_sample=step [s],"
                                  "avg_power_w=power [mW]")
    for table in (with_units, header_only):
        assert [(p.batch_size, p.knob_value) for p in table.points] == [
            (p.batch_size, p.knob_value) for p in plain.points]
        for ours, theirs in zip(table.points, plain.points, strict=True):
            assert ours.seconds_per_sample == pytest.approx(theirs.seconds_per_sample)
            assert ours.avg_power_w == pytest.approx(theirs.avg_power_w)
            assert ours.peak_power_w == pytest.approx(theirs.peak_power_w)
    with pytest.raises(TableImportError, match=r"column 'power \[MHz\]': '3' is in MHz, "
                       "where the column takes mW, W, kW"):
        _import(_write(tmp_path / "bad.csv", "batch_size,frequency_mhz,seconds_per_sample,"
                       "power [MHz]", ["8,921.6,0.002,3"]), columns="avg_power_w=power [MHz]")


@pytest.mark.parametrize(("header", "row", "message"), [
    ("batch_size,frequency_mhz,seconds_per_sample,avg_power_w", "8,921600000,0.002,3.0",
     r"column 'frequency_mhz': 921600000 MHz must be in \(1, 10000\] MHz: check the unit"),
    ("batch_size,frequency_mhz,seconds_per_sample,avg_power_w", "8,921.6,0.002,-3",
     r"column 'avg_power_w': -3 W must be in"),
    ("batch_size,frequency_mhz,seconds_per_sample,avg_power_w", "8,921.6,fast,3",
     r"row 2, column 'seconds_per_sample': 'fast' is not a number"),
    ("batch_size,frequency_mhz,avg_power_w", "8,921.6,3", r"no time column"),
    ("batch_size,frequency_mhz,seconds_per_sample,avg_power_w,peak_power_w",
     "8,921.6,0.002,3,2.5", r"peak power 2.5 W is below the average 3 W"),
    ("batch_size,frequency_mhz,seconds_per_sample,avg_power_w", "8.5,921.6,0.002,3",
     r"8.5 is not a whole number"),
    # a unit of another kind, a unit on a count, a converted value out of range
    ("batch_size,frequency_mhz,seconds_per_sample,avg_power_w", "8,921.6,0.002,3 MiB",
     r"column 'avg_power_w': '3 MiB' is in MiB, where the column takes mW, W, kW"),
    ("batch_size,frequency_mhz,seconds_per_sample,avg_power_w", "8 samples,921.6,0.002,3",
     r"column 'batch_size': '8 samples': the column takes a plain number, not samples"),
    ("batch_size,frequency_mhz,seconds_per_sample,avg_power_w", "8,921.6,0.002,6 kW",
     r"column 'avg_power_w': 6 kW \(6000 W\) must be in \(0.01, 5000\] W"),
    ("batch_size,frequency_mhz,seconds_per_sample,avg_power_w", "8,921.6 Hz,0.002,3",
     r"921.6 Hz \(0.0009216 MHz\) must be in \(1, 10000\] MHz"),
])
def test_bad_tables_are_refused_naming_the_row_and_column(
    tmp_path: Path, header: str, row: str, message: str,
) -> None:
    with pytest.raises(TableImportError, match=message):
        _import(_write(tmp_path / "bad.csv", header, [row]))


def test_repeated_rows_are_a_mean_with_its_spread_and_an_absent_peak_is_said(
    tmp_path: Path,
) -> None:
    table = _import(_write(tmp_path / "t.csv", "batch_size,frequency_mhz,seconds_per_sample,"
                           "avg_power_w", ["8,500,0.004,2.0", "8,500,0.006,2.4",
                                           "8,900,0.002,3.0", "32,900,0.001,4.0"]),
                    power_sampling="average:1")
    point = table.lookup(8, 500_000_000)
    assert point is not None and point.seconds_per_sample == pytest.approx(0.005)
    assert point.avg_power_w == pytest.approx(2.2)
    assert point.seconds_per_sample_std == pytest.approx(0.001414, rel=1e-3)
    assert table.lookup(32, 500_000_000) is None  # a missing row stays missing
    assert table.lookup(32, 900_000_000).seconds_per_sample_std is None  # one row: no spread
    assert table.peak_power_source == "average"
    assert table.imported_from["repeated_rows_merged"] == 1
    result = plan(table, 3.5)
    assert any("the cap is applied to average power" in note for note in result.notes)


def test_an_efficiency_table_in_samples_or_epochs(tmp_path: Path) -> None:
    samples = {16: [400, 480], 64: [640, None], 128: [900, 1000]}
    direct = vector_from_samples(samples, sample_budget=2000, model="digits-cnn",
                                 input_shape=[], dataset="proxy", task="image-classification",
                                 target_accuracy=0.8, seeds=[0, 1])
    rows = [f"{b},{s},{'not reached' if v is None else v},2000"
            for b, per_seed in samples.items() for s, v in enumerate(per_seed)]
    by_samples = import_efficiency(
        _write(tmp_path / "e.csv", "batch_size,seed,samples_to_target,budget_samples", rows),
        model="digits-cnn", dataset="proxy", target_accuracy=0.8)
    epochs = [f"{b},{s},{'' if v is None else v / 200},10,200"
              for b, per_seed in samples.items() for s, v in enumerate(per_seed)]
    by_epochs = import_efficiency(
        _write(tmp_path / "f.csv", "batch_size,seed,epochs_to_target,budget_epochs,"
               "samples_per_epoch", epochs),
        model="digits-cnn", dataset="proxy", target_accuracy=0.8)
    for vector in (by_samples, by_epochs):
        assert {e.batch_size: e.ratio for e in vector.entries} == pytest.approx(
            {e.batch_size: e.ratio for e in direct.entries})
        assert vector.entry(64).samples_per_seed == [640, None]  # the miss stays a miss
        assert any("imported from" in note for note in vector.notes)
    with pytest.raises(TableImportError, match="seed 0 appears twice"):
        import_efficiency(_write(tmp_path / "g.csv", "batch_size,seed,samples_to_target,"
                                 "budget_samples", ["16,0,400,2000", "16,0,410,2000"]),
                          model="m", dataset="d", target_accuracy=0.8)
    with pytest.raises(TableImportError, match="beyond the run's budget"):
        import_efficiency(_write(tmp_path / "i.csv", "batch_size,seed,samples_to_target,"
                                 "budget_samples", ["16,0,4000,2000"]),
                          model="m", dataset="d", target_accuracy=0.8)


def test_import_and_export_from_the_command_line(measured: ProfileTable, tmp_path: Path) -> None:
    runner = CliRunner()
    measured.save(tmp_path / "measured.json")
    exported = runner.invoke(app, ["export", "profile", str(tmp_path / "measured.json"),
                                   "--out", str(tmp_path / "table.csv")])
    assert exported.exit_code == 0, exported.output
    imported = runner.invoke(app, ["import", "profile", str(tmp_path / "table.csv"),
                                   "--device", "jetson-nano", "--model", "digits-cnn",
                                   "--power-sampling", "instant:0.05",
                                   "--out", str(tmp_path / "imported.json")])
    assert imported.exit_code == 0, imported.output
    assert f"{len(measured.points)} points of 3 batch sizes" in imported.output
    _write(tmp_path / "eff.csv", "batch_size,seed,samples_to_target,budget_samples",
           ["8,0,300,2000", "32,0,400,2000", "128,0,700,2000"])
    vector = runner.invoke(app, ["import", "efficiency", str(tmp_path / "eff.csv"), "--model",
                                 "digits-cnn", "--dataset", "proxy", "--target-accuracy", "0.8",
                                 "--out", str(tmp_path / "eff.json")])
    assert vector.exit_code == 0, vector.output
    planned = runner.invoke(app, ["plan", "--profile", str(tmp_path / "imported.json"),
                                  "--efficiency", str(tmp_path / "eff.json"), "--power-cap",
                                  str(CAP_W), "--json"])
    assert planned.exit_code == 0, planned.output
    assert json.loads(planned.stdout)["methods"]["wattcap"]["batch_size"] in (8, 32, 128)
    refused = runner.invoke(app, ["import", "profile", str(tmp_path / "table.csv"), "--device",
                                  "x", "--model", "m", "--power-sampling", "sometimes",
                                  "--out", str(tmp_path / "x.json")])
    assert refused.exit_code != 0 and "power sampling 'sometimes'" in refused.output
    assert not (tmp_path / "x.json").exists()


def test_a_cap_on_average_power_allows_what_a_peak_cap_refuses(
    measured: ProfileTable, tmp_path: Path,
) -> None:
    """`plan --cap-on average`: the same cap, held by average power (a power limit, a site's
    budget), admits clocks whose peak is above it; the plan says the cap is on average power."""
    measured.save(tmp_path / "measured.json")
    # a cap between a point's average and its peak: feasible on average, refused on peak
    point = max((p for p in measured.points if p.peak_power_w > p.avg_power_w + 0.05),
                key=lambda p: p.avg_power_w)
    cap_w = round((point.avg_power_w + point.peak_power_w) / 2, 3)
    runner = CliRunner()
    choices = {}
    for cap_on in ("peak", "average"):
        result = runner.invoke(app, ["plan", "--profile", str(tmp_path / "measured.json"),
                                     "--power-cap", str(cap_w), "--margin-sigmas", "0",
                                     "--cap-on", cap_on, "--json"])
        assert result.exit_code == 0, result.output
        planned = json.loads(result.stdout)
        choices[cap_on] = planned
        chosen = planned["methods"]["wattcap"]
        power = measured.lookup(chosen["batch_size"], chosen["knob_value"])
        assert power is not None
        held_w = power.peak_power_w if cap_on == "peak" else power.avg_power_w
        assert held_w <= cap_w
    peak_choice = choices["peak"]["methods"]["wattcap"]
    average_choice = choices["average"]["methods"]["wattcap"]
    assert average_choice["knob_value"] > peak_choice["knob_value"]
    assert average_choice["predicted_time_s"] < peak_choice["predicted_time_s"]
    assert any("average power" in note for note in choices["average"]["notes"])
    assert not any("average power" in note for note in choices["peak"]["notes"])
    bad = runner.invoke(app, ["plan", "--profile", str(tmp_path / "measured.json"),
                              "--power-cap", str(cap_w), "--cap-on", "mean"])
    assert bad.exit_code != 0


def test_a_peak_of_averaged_readings_grows_the_margin(tmp_path: Path) -> None:
    """Item 9: nvidia-smi's power.draw is a 1 s average; its "peak" hides instant peaks, so the
    planner raises it by (sqrt(1 s / 0.1 s) - 1) times its excursion above the average before
    comparing with the cap, and says so. The same table read as instant readings does not."""
    rows = ["8,500,0.004,2.0,2.1", "8,900,0.002,3.0,3.2", "32,500,0.002,2.4,2.5",
            "32,900,0.001,3.4,3.6"]
    header = "batch_size,frequency_mhz,seconds_per_sample,avg_power_w,peak_power_w"
    path = _write(tmp_path / "t.csv", header, rows)
    instant = _import(path, power_sampling="instant:0.1")
    averaged = _import(path, power_sampling="average:1")
    assert instant.peak_power_source == "measured" and instant.power_window_s is None
    assert averaged.peak_power_source == "averaged" and averaged.power_window_s == 1.0
    gain = 10 ** 0.5
    # at 3.7 W: b=32 at 900 MHz peaks at 3.6 W as instant readings; as 1 s averages it
    # hides an instant peak near 3.4 + gain * 0.2 = 4.03 W
    by_instant = plan(instant, 3.7, margin_sigmas=0)
    by_average = plan(averaged, 3.7, margin_sigmas=0)
    assert by_instant.choices["wattcap"].knob_value == 900_000_000
    chosen = by_average.choices["wattcap"]
    point = averaged.lookup(chosen.batch_size, chosen.knob_value)
    assert point is not None
    assert point.avg_power_w + gain * (point.peak_power_w - point.avg_power_w) <= 3.7
    assert (chosen.batch_size, chosen.knob_value) != (32, 900_000_000)
    note = next(n for n in by_average.notes if "averaged over 1 s" in n)
    assert f"{gain - 1:.2f}x" in note
    assert not any("averaged over" in n for n in by_instant.notes)
    # the front is searched on the raised peaks and reports the measured ones, as choices do
    assert by_average.pareto_front and all(
        fp.peak_power_w == averaged.lookup(fp.batch_size, fp.knob_value).peak_power_w
        for fp in by_average.pareto_front)
    # the lowest cap it can meet is the lowest grown peak: 2.0 + gain * 0.1
    with pytest.raises(InfeasibleCapError) as refused:
        plan(averaged, 2.3, margin_sigmas=0)
    assert refused.value.lowest_feasible_w == pytest.approx(2.0 + gain * 0.1)
    assert plan(instant, 2.3, margin_sigmas=0).choices["wattcap"].batch_size == 8


def test_a_vector_without_an_input_shape_plans_with_any_profile(
    measured: ProfileTable, tmp_path: Path,
) -> None:
    """An imported vector records no input shape unless given one: nothing to compare, so it
    plans with a profile that has one; a vector of another recorded shape is still refused."""
    from wattcap.core.schema import WattcapFileError

    path = _write(tmp_path / "e.csv", "batch_size,seed,samples_to_target,budget_samples",
                  ["8,0,300,2000", "32,0,400,2000", "128,0,700,2000"])
    unshaped = import_efficiency(path, model="digits-cnn", dataset="proxy", target_accuracy=0.8)
    assert unshaped.input_shape == [] and measured.input_shape
    assert plan(measured, CAP_W, efficiency=unshaped).choices["wattcap"].batch_size in (8, 32, 128)
    other = import_efficiency(path, model="digits-cnn", dataset="proxy", target_accuracy=0.8,
                              input_shape=[3, 64, 64])
    with pytest.raises(WattcapFileError, match="input shape"):
        plan(measured, CAP_W, efficiency=other)


def test_an_exported_efficiency_vector_imports_to_the_same_runs(tmp_path: Path) -> None:
    samples = {8: [1000.0, None, 1200.0], 32: [900.0, 950.0, 1000.0], 128: [2000.0] * 3}
    vector = vector_from_samples(samples, sample_budget=5000, use_fit=False, model="m",
                                 input_shape=[], dataset="proxy", task="image-classification",
                                 target_accuracy=0.8, seeds=[0, 1, 2])
    path = tmp_path / "eff.json"
    vector.save(path)
    runner = CliRunner()
    done = runner.invoke(app, ["export", "efficiency", str(path), "--out",
                               str(tmp_path / "runs.csv")])
    assert done.exit_code == 0, done.output
    assert "8,1,not reached,5000" in (tmp_path / "runs.csv").read_text()
    back = import_efficiency(tmp_path / "runs.csv", model="m", dataset="proxy",
                             target_accuracy=0.8)
    assert {e.batch_size: e.samples_per_seed for e in back.entries} == samples
    # the runs, not the ratios, travel: the import recomputes r_b by its own rule (the fit)
    assert back.entry(32).samples_mean == pytest.approx(vector.entry(32).samples_mean)


PROFILE_HEADER = "batch_size,frequency_mhz,seconds_per_sample,avg_power_w,peak_power_w"


def test_a_time_in_us_among_bare_seconds_is_refused_naming_its_row(tmp_path: Path) -> None:
    """One row written '1400 us', the others bare seconds (~1.21 s per sample): converted,
    that row is 864x below the rest. Read as it is, it made baseline-1's plan 871.91x slower
    than wattcap's; it is refused, its row named."""
    path = _write(tmp_path / "mixed.csv", PROFILE_HEADER,
                  ["8,921.6,1.21,3.0,3.5", "16,921.6,1400 us,3.2,3.6", "32,921.6,1.19,4.0,4.6",
                   "64,921.6,1.25,4.1,4.7"])
    with pytest.raises(TableImportError) as refused:
        _import(path)
    message = str(refused.value)
    assert "column 'seconds_per_sample' mixes units whose values disagree: row 3:" in message
    assert "'1400 us' is 0.0014 s, 864x below the median 1.21 s" in message
    assert "bare (read as s)" in message
    # through the command line: exit 2, the row named, no profile written
    out = tmp_path / "mixed.json"
    result = CliRunner().invoke(app, ["import", "profile", str(path), "--device", "d",
                                      "--model", "m", "--power-sampling", "instant:0.1",
                                      "--out", str(out)])
    assert result.exit_code == 2 and "row 3" in result.output and "1400 us" in result.output
    assert not out.exists()


def test_cells_in_different_explicit_units_must_agree_once_converted(tmp_path: Path) -> None:
    """ms, us and s in one column: the us cell agrees with the ms cells (1.4 ms), the s cell
    is 880x above their median and is the one named."""
    with pytest.raises(TableImportError, match=r"row 5: '1.1 s' is 1100 ms, 880x above the "
                       r"median 1.25 ms of the 2 cells written in ms") as refused:
        _import(_write(tmp_path / "units.csv", "batch_size,frequency_mhz,ms_per_sample,"
                       "avg_power_w", ["8,900,1.2 ms,3.0", "16,900,1400 us,3.1",
                                       "32,900,1.3 ms,3.5", "64,900,1.1 s,3.9"]))
    assert "row 3" not in str(refused.value) and "'1400 us'" not in str(refused.value)


def test_a_column_in_one_unit_keeps_its_measured_spread(tmp_path: Path) -> None:
    """Time per sample spans two orders of magnitude over a profile (b=4 at the lowest clock
    against b=128 at the highest): in one unit, bare or not, that is the measurement."""
    rows = ["4,76.8,0.08,2.0,2.2", "4,921.6,0.006,2.6,2.9", "128,76.8,0.01,2.4,2.7",
            "128,921.6,0.0008,4.0,4.6"]
    bare = _import(_write(tmp_path / "bare.csv", PROFILE_HEADER, rows))
    written = _import(_write(tmp_path / "ms.csv", PROFILE_HEADER.replace(
        "seconds_per_sample", "ms_per_sample"), ["4,76.8,80 ms,2.0,2.2", "4,921.6,6 ms,2.6,2.9",
                                                 "128,76.8,10 ms,2.4,2.7",
                                                 "128,921.6,800 us,4.0,4.6"]))
    assert [p.seconds_per_sample for p in written.points] == pytest.approx(
        [p.seconds_per_sample for p in bare.points])
    assert max(p.seconds_per_sample for p in bare.points) / min(
        p.seconds_per_sample for p in bare.points) == pytest.approx(100)


def test_every_problem_of_a_table_is_reported_in_one_run(tmp_path: Path) -> None:
    path = _write(tmp_path / "many.csv", PROFILE_HEADER,
                  ["8,921.6,fast,3.0,3.5", "16.5,921.6,0.002,3.2,3.6",
                   "32,921600000,0.001,4.0,4.6", "64,921.6,0.001,4.1,3.7",
                   "64,921.6,0.001,4 MiB,4.7"])
    with pytest.raises(TableImportError) as refused:
        _import(path)
    lines = str(refused.value).splitlines()
    assert lines[0] == f"{path}: 5 problems:"
    for expected in ("row 2, column 'seconds_per_sample': 'fast' is not a number",
                     "row 3, column 'batch_size': 16.5 is not a whole number",
                     "row 4, column 'frequency_mhz': 921600000 MHz must be in (1, 10000] MHz",
                     "row 5: peak power 3.7 W is below the average 4.1 W",
                     "row 6, column 'avg_power_w': '4 MiB' is in MiB"):
        assert sum(expected in line for line in lines[1:]) == 1, expected


def test_missing_columns_are_named_together_with_the_other_cells_problems(
        tmp_path: Path) -> None:
    path = _write(tmp_path / "cols.csv", "batch_size,frequency_mhz,peak_power_w",
                  ["8,921.6,3.5", "x,921.6,3.6"])
    with pytest.raises(TableImportError) as refused:
        _import(path)
    message = str(refused.value)
    assert "3 problems" in message and "no time column" in message
    assert "no average power column ('avg_power_w')" in message
    assert "row 3, column 'batch_size': 'x' is not a number" in message


def test_a_long_list_of_problems_is_cut_with_a_count_of_the_rest(tmp_path: Path) -> None:
    path = _write(tmp_path / "long.csv", PROFILE_HEADER,
                  [f"{b},921.6,slow,3.0,3.5" for b in range(1, 26)])
    with pytest.raises(TableImportError) as refused:
        _import(path)
    lines = str(refused.value).splitlines()
    assert lines[0].endswith("25 problems:")
    assert len(lines) == 1 + 20 + 1 and lines[-1].strip() == "... and 5 more"
    assert "row 21," in lines[20] and "row 22," not in str(refused.value)


def test_every_problem_of_an_efficiency_table_is_reported_in_one_run(tmp_path: Path) -> None:
    path = _write(tmp_path / "runs.csv", "batch_size,seed,samples_to_target,budget_samples",
                  ["16,0,400,2000", "16,0,410,2000", "16,1,4000,2000", "64,0,lots,2000",
                   "64,1,500,2k", "128,0,700,2000"])
    with pytest.raises(TableImportError) as refused:
        import_efficiency(path, model="m", dataset="d", target_accuracy=0.8)
    message = str(refused.value)
    assert "4 problems" in message  # b=128's one run is not a problem: runs may differ
    for expected in ("row 3: batch size 16, seed 0 appears twice",
                     "row 4: 4000 samples to target is beyond the run's budget of 2000",
                     "row 5, column 'samples_to_target': 'lots' is not a number",
                     "row 6, column 'budget_samples': '2k': the column takes a plain number"):
        assert expected in message, expected


def test_every_problem_of_a_table_of_curves_is_reported_in_one_run(tmp_path: Path) -> None:
    path = _write(tmp_path / "curves.csv", "batch_size,seed,samples_seen,metric_value,"
                  "budget_samples", ["8,0,100,0.5,1000", "8,0,100,0.6,1000", "8,0,200,abc,1000",
                                     "16,0,100,0.7,1000", "16,0,200,1.5,1000"])
    with pytest.raises(TableImportError) as refused:
        import_efficiency(path, model="m", dataset="d", target_accuracy=0.6)
    message = str(refused.value)
    assert "3 problems" in message
    for expected in ("row 4, column 'metric_value': 'abc' is not a number",
                     "row 6, column 'metric_value': 1.5 (accuracy) must be in",
                     "batch size 8, seed 0 has two evaluations at the same sample count"):
        assert expected in message, expected


def test_disagreeing_cells_are_shown_in_the_columns_unit_and_bare_ones_in_the_headers(
        tmp_path: Path) -> None:
    """A header in MHz mapped to frequency_hz: bare cells read as MHz, a cell in kHz (the
    wrong prefix) is a thousand times too low, shown in Hz as the column stores it."""
    with pytest.raises(TableImportError, match=r"row 4: '1410 kHz' is 1\.41e\+06 Hz, 1000x "
                       r"below the median 1\.41e\+09 Hz of the 2 cells written bare \(read as "
                       r"MHz\)"):
        _import(_write(tmp_path / "clock.csv", "batch_size,clock [MHz],seconds_per_sample,"
                       "avg_power_w", ["8,1410,0.002,3.0", "16,1410,0.002,3.1",
                                       "32,1410 kHz,0.001,3.5"]),
                columns="frequency_hz=clock [MHz]")
