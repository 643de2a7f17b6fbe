"""Replaying a measured device (issue 28 item 8): `compare --device trace:FILE` plans from a
trace's table and proxy runs and scores every method on its target runs, without training;
nothing the trace lacks is invented."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wattcap.cli import app
from wattcap.experiments.compare import Comparison
from wattcap.experiments.trace import load_trace, replay_trace

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trace-nano" / "trace.json"
runner = CliRunner()


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def test_the_bundled_trace_replays_end_to_end_on_its_measured_numbers(tmp_path: Path) -> None:
    result = runner.invoke(app, ["compare", "--device", f"trace:{EXAMPLE}", "--power-caps",
                                 "4.5,none", "--out", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "not measured hardware" in result.output and "nothing trained" in result.output
    comparison = Comparison.load(tmp_path / "comparison.json")
    assert comparison.trace_label is not None and "emulated" in comparison.trace_label
    assert "Replayed from a trace" in (tmp_path / "report.md").read_text()
    # every time is the table's time per sample at the choice x that seed's samples
    table = {(int(r["batch_size"]), round(float(r["frequency_mhz"]) * 1e6)): r
             for r in _rows(EXAMPLE.parent / "profile.csv")}
    runs = {(int(r["batch_size"]), int(r["seed"])): float(r["samples_to_target"])
            for r in _rows(EXAMPLE.parent / "target-runs.csv")}
    assert {r.power_cap_w for r in comparison.results} == {4.5, None}
    for r in comparison.results:
        spp = float(table[(r.batch_size, r.knob_value)]["seconds_per_sample"])
        assert r.time_s == pytest.approx([spp * runs[(r.batch_size, s)] for s in range(3)])
        fastest = comparison.get(r.device, r.power_cap_w, r.target, "fastest")
        assert fastest is not None and fastest.time_mean_s is not None
        assert r.time_mean_s is not None and fastest.time_mean_s <= r.time_mean_s + 1e-12
        if r.power_cap_w is not None:
            assert float(table[(r.batch_size, r.knob_value)]["peak_power_w"]) <= r.power_cap_w


def _power_limit_trace(folder: Path, target_sizes: tuple[int, ...] = (16, 64)) -> Path:
    (folder / "profile.csv").write_text(
        "batch_size,power_limit_w,ms_per_sample,avg_power_w,peak_power_w\n"
        "16,150,1.60,140,160\n16,250,1.25,230,255\n"
        "64,150,1.10,145,165\n64,200,0.80,195,215\n64,250,0.95,240,262\n")
    runs = "batch_size,seed,samples_to_target,budget_samples\n"
    (folder / "proxy.csv").write_text(runs + "16,0,900,5000\n16,1,1100,5000\n"
                                      "64,0,1500,5000\n64,1,1500,5000\n")
    (folder / "target.csv").write_text(runs + "".join(
        f"{b},{s},{1000 + 100 * s + b},5000\n" for b in target_sizes for s in (0, 1)))
    manifest = {"kind": "wattcap.trace", "schema_version": 1, "label": "a test's table",
                "device": "a100-pcie", "model": "resnet50",
                "profile": {"file": "profile.csv", "power_sampling": "average:1"},
                "proxy": {"file": "proxy.csv", "dataset": "proxy-data", "target": 0.7},
                "targets": [{"file": "target.csv", "dataset": "my-data", "target": 0.8}]}
    path = folder / "trace.json"
    path.write_text(json.dumps(manifest))
    return path


def _replayed(folder: Path, edit, caps: str) -> tuple[Path, Path, Comparison]:  # noqa: ANN001
    """The power-limit trace with its manifest edited, replayed by `compare` under `caps`."""
    path = _power_limit_trace(folder)
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))
    out = folder / "out"
    result = runner.invoke(app, ["compare", "--device", f"trace:{path}", "--power-caps", caps,
                                 "--out", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return path, out, Comparison.load(out / "comparison.json")


def test_a_trace_replays_the_robust_choice_of_a_transfer_factor(tmp_path: Path) -> None:
    """compare --device trace: --transfer-factor K scores plan(transfer_factor=K)'s choice on
    the trace's target runs and records K (real tables are where it is to be judged). On this
    table the proxy's r_b as it is takes b=64 without a cap; robust to a B_noise 3x either way,
    b=16 (b=64 would lose most if the target's B_noise were a third)."""
    from wattcap.algorithms.planner import plan

    path = _power_limit_trace(tmp_path)
    out = tmp_path / "out"
    result = runner.invoke(app, ["compare", "--device", f"trace:{path}", "--power-caps", "none",
                                 "--out", str(out), "--transfer-factor", "3"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    comparison = Comparison.load(out / "comparison.json")
    assert comparison.transfer_factor == 3
    trace = load_trace(path)
    ours = comparison.get(trace.manifest.device, None, "my-data", "wattcap")
    expected = plan(trace.profile, None, efficiency=trace.proxy,
                    transfer_factor=3).choices["wattcap"]
    assert ours is not None
    assert (ours.batch_size, ours.knob_value) == (expected.batch_size, expected.knob_value)
    plain = replay_trace(trace, [None])
    assert plain.transfer_factor is None
    assert plain.get(trace.manifest.device, None, "my-data", "wattcap").batch_size == 64
    assert ours.batch_size == 16


def test_a_power_limit_trace_replays_with_its_knob(tmp_path: Path) -> None:
    path = _power_limit_trace(tmp_path)
    trace = load_trace(path)
    assert trace.profile.knob_kind == "power_limit" and list(trace.targets) == ["my-data"]
    out = tmp_path / "out"
    result = runner.invoke(app, ["compare", "--device", f"trace:{path}", "--power-caps",
                                 "none", "--out", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    comparison = Comparison.load(out / "comparison.json")
    assert comparison.knob_kind == "power_limit"
    ours = comparison.get("a100-pcie", None, "my-data", "wattcap")
    assert ours is not None and (ours.batch_size, ours.knob_value) == (64, 200_000)
    assert "b=64 @ power limit 200 W" in (out / "report.md").read_text()
    assert _rows(out / "results.csv")[0]["power_limit_w"] in {"150", "200", "250"}


def test_a_batch_size_the_target_never_ran_gets_no_invented_time(tmp_path: Path) -> None:
    path = _power_limit_trace(tmp_path, target_sizes=(16,))  # the target never ran b=64
    out = tmp_path / "out"
    result = runner.invoke(app, ["compare", "--device", f"trace:{path}", "--power-caps",
                                 "none", "--out", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    comparison = Comparison.load(out / "comparison.json")
    assert comparison.get("a100-pcie", None, "my-data", "wattcap") is None
    assert any("b=64, which the target's runs never ran: no time" in line
               for line in comparison.infeasible)
    fastest = comparison.get("a100-pcie", None, "my-data", "fastest")
    assert fastest is not None and fastest.batch_size == 16  # measured only


@pytest.mark.parametrize("edit, message", [
    (lambda folder: None, "give --power-caps"),
    (lambda folder: (folder / "target.csv").unlink(), "target.csv"),
    (lambda folder: (folder / "trace.json").write_text("{}"), "trace.json"),
])
def test_a_trace_that_cannot_be_replayed_is_one_clear_line(tmp_path: Path, edit,
                                                             message: str) -> None:
    path = _power_limit_trace(tmp_path)
    edit(tmp_path)
    caps = [] if message == "give --power-caps" else ["--power-caps", "none"]
    result = runner.invoke(app, ["compare", "--device", f"trace:{path}", *caps,
                                 "--out", str(tmp_path / "out")])
    assert result.exit_code != 0 and message in result.output
    assert "Traceback" not in result.output


def test_import_trace_writes_the_files_plan_reads(tmp_path: Path) -> None:
    from wattcap.algorithms.planner import plan
    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.core.profile import ProfileTable

    result = runner.invoke(app, ["import", "trace", str(EXAMPLE), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    profile = ProfileTable.load(tmp_path / "profile.json")
    proxy = EfficiencyVector.load(tmp_path / "efficiency-proxy.json")
    target = EfficiencyVector.load(tmp_path / "efficiency-target-digits-5-9-32.json")
    assert profile.mode == "imported" and target.ratio_source != "fit"  # measured means
    trace = load_trace(EXAMPLE)
    replayed = plan(trace.profile, 4.5, efficiency=trace.proxy).choices["wattcap"]
    planned = plan(profile, 4.5, efficiency=proxy, target_efficiency=target)
    assert (planned.choices["wattcap"].batch_size, planned.choices["wattcap"].knob_value) == (
        replayed.batch_size, replayed.knob_value)
    assert "fastest" in planned.choices


def test_the_trace_benchmark_writes_traces_that_load_as_they_were(tmp_path: Path) -> None:
    from tests.bench_scripts import load_bench_script

    bench = load_bench_script("trace_quality")
    trace = load_trace(EXAMPLE)
    path = bench.write_trace(tmp_path / "again", trace.profile, trace.proxy, trace.targets)
    again = load_trace(path)
    assert [(p.batch_size, p.knob_value, p.seconds_per_sample) for p in again.profile.points] \
        == [(p.batch_size, p.knob_value, p.seconds_per_sample) for p in trace.profile.points]
    for name, vector in trace.targets.items():
        assert [e.samples_per_seed for e in again.targets[name].entries] == [
            e.samples_per_seed for e in vector.entries]
    caps = bench.caps_for(trace.profile, on_average=False)
    peaks = [p.peak_power_w for p in trace.profile.points]
    assert caps[-1] is None and all(min(peaks) < c < max(peaks) for c in caps[:-1])
    replayed = bench.ratios(replay_trace(again, caps))
    assert all(r >= 1.0 - 1e-9 for values in replayed.values() for r in values)
    assert len(replayed["wattcap"]) == len(caps)


def test_a_missed_seed_costs_its_budget_and_a_restart(tmp_path: Path) -> None:
    """b=64 missed the target in one of two seeds: scored by its expected time with restarts
    (the reaching seed's samples plus (1 - p) / p budgets), it is still the fastest here and
    the oracle's brute force chooses it; before, a batch size with a miss was left out."""
    path = _power_limit_trace(tmp_path)
    (tmp_path / "target.csv").write_text(
        "batch_size,seed,samples_to_target,budget_samples\n"
        "16,0,3000,5000\n16,1,3200,5000\n64,0,1064,1500\n64,1,not reached,1500\n")
    comparison = replay_trace(load_trace(path), [None])
    fastest = comparison.get("a100-pcie", None, "my-data", "fastest")
    assert fastest is not None and (fastest.batch_size, fastest.knob_value) == (64, 200_000)
    assert fastest.time_s[1] is None and fastest.time_mean_s is None
    assert fastest.budget_time_s[1] == pytest.approx(0.80e-3 * 1500)
    assert fastest.expected_time_s == pytest.approx(0.80e-3 * (1064 + 1500))
    assert "expected with restarts (1 of 2 seeds missed)" in fastest.missed_label()
    b16 = 1.25e-3 * 3100  # b=16 at its fastest limit, every seed reached
    assert fastest.expected_time_s < b16
    ours = comparison.get("a100-pcie", None, "my-data", "wattcap")
    assert ours is not None and comparison.over_fastest_pct(ours) is not None


def test_a_trace_says_its_caps_hold_average_power_and_the_command_can_too(
        tmp_path: Path) -> None:
    """A power-limited GPU's caps hold average power: the manifest says so (cap_on), every
    choice keeps its average under the cap while its peak may pass it, and the report says
    what the caps held; --cap-on overrides the manifest, and a trained comparison (emulated
    Jetsons) refuses it."""
    path, out, comparison = _replayed(tmp_path, lambda m: m.update(cap_on="average"), "160")
    assert comparison.cap_on == "average"
    table = load_trace(path).profile
    fastest = comparison.get("a100-pcie", 160.0, "my-data", "fastest")
    assert fastest is not None and (fastest.batch_size, fastest.knob_value) == (64, 150_000)
    point = table.lookup(64, 150_000)
    assert point is not None and point.avg_power_w <= 160.0 < point.peak_power_w
    assert "The caps hold average power" in (out / "report.md").read_text()
    # overriding the manifest: at 160 W no peak fits under the cap with its margin (the
    # table's peaks are of 1 s averages: a wide one), said; at 210 W every choice's peak fits
    assert replay_trace(load_trace(path), [160.0], cap_on="peak").results == []
    peak = replay_trace(load_trace(path), [210.0], cap_on="peak")
    assert peak.cap_on == "peak" and peak.results
    for r in peak.results:
        assert table.lookup(r.batch_size, r.knob_value).peak_power_w <= 210.0
    refused = runner.invoke(app, ["compare", "--cap-on", "average", "--out",
                                  str(tmp_path / "x")])
    assert refused.exit_code != 0 and "--cap-on average is for a trace" in refused.output


def test_a_trace_of_a_falling_metric_reports_its_target_in_that_metric(tmp_path: Path) -> None:
    def falling(manifest: dict) -> None:
        manifest["targets"][0].update({"metric": "wer", "target": 0.2})
        manifest["proxy"].update({"metric": "f1:100", "target": 70})

    _, out, comparison = _replayed(tmp_path, falling, "none")
    assert comparison.target_metric.name == "wer" and comparison.proxy_target_metric.high == 100
    report = (out / "report.md").read_text()
    assert "target wer <= 0.2" in report and "its own target f1 >= 70" in report
    assert "target accuracy 20%" not in report
