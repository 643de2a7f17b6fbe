"""Real efficiency tables as they are: batch sizes with different numbers of runs, run ids that
differ between batch sizes, a batch size measured once. Each r_b comes from its own batch
size's runs; a single run is kept with one run's spread (pooled over the batch sizes that have
more), and the plan says so."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wattcap.algorithms.efficiency import ratio_log_spread, vector_from_samples
from wattcap.algorithms.planner import plan
from wattcap.cli import app
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.profile import ProfileTable
from wattcap.devices import EmulatedDevice
from wattcap.experiments.trace import load_trace, replay_trace
from wattcap.measure.imported_tables import export_efficiency, import_efficiency
from wattcap.measure.profiling import Profiler

#: (batch size, run id, samples to target): ids as a real sweep left them, b=64 run once
RUNS = [(16, 3, 400.0), (16, 7, 430.0), (16, 9, 470.0), (64, 12, 700.0),
        (128, 0, 900.0), (128, 1, 980.0)]
HEADER = "batch_size,seed,samples_to_target,budget_samples"


def _table(path: Path, runs: list[tuple[int, int, float]] = RUNS) -> Path:
    path.write_text(HEADER + "\n" + "".join(f"{b},{s},{v:g},2000\n" for b, s, v in runs))
    return path


def _imported(path: Path) -> EfficiencyVector:
    return import_efficiency(path, model="digits-cnn", dataset="their-sweep",
                             target_accuracy=0.8)


@pytest.fixture(scope="module")
def profile() -> ProfileTable:
    return Profiler(EmulatedDevice("jetson-nano"), "digits-cnn",
                    batch_sizes=(16, 64, 128)).run(exhaustive=True)


def test_each_batch_size_keeps_its_own_runs(tmp_path: Path) -> None:
    vector = _imported(_table(tmp_path / "runs.csv"))
    per_b: dict[int, list[float | None]] = {}
    for b, _, v in RUNS:
        per_b.setdefault(b, []).append(v)
    direct = vector_from_samples(per_b, sample_budget=2000, model="m", input_shape=[],
                                 dataset="d", task="image-classification",
                                 target_accuracy=0.8, seeds=[0])
    assert vector.runs_per_batch_size() == {16: 3, 64: 1, 128: 2}
    assert {e.batch_size: e.ratio for e in vector.entries} == pytest.approx(
        {e.batch_size: e.ratio for e in direct.entries})
    assert vector.seeds == [0, 1, 3, 7, 9, 12]  # every run id the table names
    assert vector.runs_label() == "1-3 runs per batch size"
    assert any("6 runs" in note for note in vector.notes)
    # and out again: one row per run, each batch size's runs numbered from 0
    exported = (tmp_path / "out.csv")
    exported.write_text(export_efficiency(vector))
    assert _imported(exported).runs_per_batch_size() == vector.runs_per_batch_size()


def test_a_single_run_gets_one_runs_pooled_spread_not_none(tmp_path: Path) -> None:
    vector = _imported(_table(tmp_path / "runs.csv"))
    cv16 = statistics.stdev([400, 430, 470]) / statistics.fmean([400, 430, 470])
    cv128 = statistics.stdev([900, 980]) / statistics.fmean([900, 980])
    pooled = math.sqrt((2 * cv16 ** 2 + 1 * cv128 ** 2) / 3)
    assert vector.single_run_batch_sizes() == [64]
    assert vector.pooled_run_spread() == pytest.approx(pooled)
    # these runs follow the large-batch relation: the fit's interval stands for b=64's spread
    assert vector.ratio_source == "fit"
    assert ratio_log_spread(vector, 64) > 0
    # where they do not (b=64 faster than b=16), r_b is b=64's one run, with one run's spread
    # (before: none at all, as if one run were known exactly)
    bumpy = _imported(_table(tmp_path / "bumpy.csv", [*RUNS[:3], (64, 12, 300.0), *RUNS[4:]]))
    assert bumpy.ratio_source == "mean"
    assert ratio_log_spread(bumpy, 64) == pytest.approx(pooled)
    assert any(f"single run for b = [64]: the spread of their r_b is one run's, {pooled:.0%}"
               in note for note in bumpy.ratio_notes())
    # a table where every batch size was run once has no spread to pool, and says nothing
    once = _imported(_table(tmp_path / "once.csv", [(16, 0, 400), (64, 0, 700),
                                                    (128, 0, 900)]))
    assert once.single_run_batch_sizes() == [] and once.pooled_run_spread() is None
    assert not any("runs per batch size" in note for note in once.ratio_notes())


def test_the_plan_says_which_batch_sizes_rest_on_one_run(tmp_path: Path,
                                                         profile: ProfileTable) -> None:
    vector = _imported(_table(tmp_path / "runs.csv"))
    result = plan(profile, None, efficiency=vector)
    notes = "\n".join(result.notes)
    assert "runs per batch size differ on their-sweep (b=16: 3, b=64: 1, b=128: 2)" in notes
    assert "a single run for b = [64]: their r_b is the large-batch fit's" in notes
    assert result.choices["wattcap"].batch_size in (16, 64, 128)


def test_import_and_plan_from_the_command_line(tmp_path: Path, profile: ProfileTable) -> None:
    profile.save(tmp_path / "profile.json")
    runner = CliRunner()
    imported = runner.invoke(app, ["import", "efficiency", str(_table(tmp_path / "runs.csv")),
                                   "--model", "digits-cnn", "--dataset", "their-sweep",
                                   "--target", "0.8", "--out", str(tmp_path / "eff.json")],
                             env={"COLUMNS": "200"})
    assert imported.exit_code == 0, imported.output
    planned = runner.invoke(app, ["plan", "--profile", str(tmp_path / "profile.json"),
                                  "--efficiency", str(tmp_path / "eff.json"),
                                  "--power-cap", "none"], env={"COLUMNS": "200"})
    assert planned.exit_code == 0, planned.output
    assert "a single run for b = [64]" in " ".join(planned.output.split())


def test_a_trace_whose_runs_differ_between_batch_sizes_replays(tmp_path: Path) -> None:
    (tmp_path / "profile.csv").write_text(
        "batch_size,power_limit_w,ms_per_sample,avg_power_w,peak_power_w\n"
        "16,150,1.60,140,160\n16,250,1.25,230,255\n64,150,1.10,145,165\n64,250,0.95,240,262\n")
    (tmp_path / "proxy.csv").write_text(HEADER + "\n16,0,900,5000\n16,1,1100,5000\n"
                                        "16,2,1000,5000\n64,4,1500,5000\n")
    (tmp_path / "target.csv").write_text(HEADER + "\n16,5,1000,5000\n16,6,1200,5000\n"
                                         "16,8,1100,5000\n64,2,1700,5000\n")
    manifest = {"kind": "wattcap.trace", "schema_version": 1, "label": "a test's table",
                "device": "a100-pcie", "model": "resnet50",
                "profile": {"file": "profile.csv", "power_sampling": "average:1"},
                "proxy": {"file": "proxy.csv", "dataset": "proxy-data", "target": 0.7},
                "targets": [{"file": "target.csv", "dataset": "my-data", "target": 0.8}]}
    (tmp_path / "trace.json").write_text(json.dumps(manifest))
    comparison = replay_trace(load_trace(tmp_path / "trace.json"), [None, 200.0])
    assert comparison.results
    for result in comparison.results:
        runs = 3 if result.batch_size == 16 else 1
        assert len(result.time_s) == runs  # each choice scored on its own batch size's runs
    fastest = comparison.get("a100-pcie", None, "my-data", "fastest")
    assert fastest is not None and fastest.batch_size == 16  # 1100 x 1.25 ms < 1700 x 0.95 ms
