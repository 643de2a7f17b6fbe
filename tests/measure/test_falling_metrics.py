"""Metrics as they are (issue 28 item 5): a falling metric (word error rate) read on each run's
curve in its own direction, F1 on 0-100, the metric stored in the efficiency vector, and
targets outside a metric's range refused."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wattcap.algorithms.curves import samples_to_target
from wattcap.algorithms.planner import plan
from wattcap.cli import app
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.metric import MetricError, metric_named
from wattcap.core.profile import ProfilePoint, ProfileTable
from wattcap.measure.imported_tables import TableImportError, import_efficiency

BATCH_SIZES = (8, 32, 128)
EVERY = 200
BUDGET = 8000


def _scale(b: int, seed: int) -> float:
    """Samples over which a run's error falls by e: larger batches need more samples."""
    return 600.0 * (1 + b / 64) * (1 + 0.05 * seed)


def _wer(b: int, seed: int, samples: float) -> float:
    return 0.1 + 0.8 * math.exp(-samples / _scale(b, seed))


def _curve_rows(value_of) -> list[str]:
    return [f"{b},{seed},{s},{value_of(b, seed, s):.6f},{BUDGET}"
            for b in BATCH_SIZES for seed in range(2) for s in range(0, BUDGET + 1, EVERY)]


def _write(path: Path, rows: list[str]) -> Path:
    path.write_text("batch_size,seed,samples_seen,metric_value,budget_samples\n"
                    + "\n".join(rows) + "\n")
    return path


def test_a_falling_curve_is_read_in_its_direction() -> None:
    curve = [(s, _wer(32, 0, s)) for s in range(0, BUDGET + 1, EVERY)]
    exact = -_scale(32, 0) * math.log((0.3 - 0.1) / 0.8)  # where WER = 0.3
    read = samples_to_target(curve, 0.3, "lower")
    assert read == pytest.approx(exact, rel=0.02)
    # read as a growing metric (smoothed non-decreasing: flat at its mean, ~0.24) the same
    # curve never reaches 0.3: the direction matters
    assert samples_to_target(curve, 0.3) is None
    assert samples_to_target(curve, 0.05, "lower") is None  # never that low: missed


def test_a_wer_table_is_estimated_like_its_accuracy_mirror_and_planned(tmp_path: Path) -> None:
    wer = import_efficiency(_write(tmp_path / "wer.csv", _curve_rows(_wer)), model="m",
                            dataset="speech", target_accuracy=0.3, metric="wer")
    mirror = import_efficiency(_write(tmp_path / "acc.csv", _curve_rows(
        lambda b, seed, s: 1.0 - _wer(b, seed, s))), model="m", dataset="speech",
        target_accuracy=0.7)
    assert wer.target_metric.name == "wer" and wer.target_metric.direction == "lower"
    assert mirror.target_metric.name == "accuracy"
    for b in BATCH_SIZES:
        assert wer.entry(b).samples_per_seed == pytest.approx(mirror.entry(b).samples_per_seed)
        expected = [-_scale(b, s) * math.log(0.2 / 0.8) for s in range(2)]
        assert wer.entry(b).samples_per_seed == pytest.approx(expected, rel=0.03)
    # the stored metric survives a round trip, and the plan uses its r_b
    wer.save(tmp_path / "wer.json")
    loaded = EfficiencyVector.load(tmp_path / "wer.json")
    assert loaded.target_metric == wer.target_metric
    points = [ProfilePoint(batch_size=b, knob_value=900_000_000, peak_power_w=3.0,
                           avg_power_w=2.5, seconds_per_sample=1e-3 / math.sqrt(b), steps=10,
                           readings=5) for b in BATCH_SIZES]
    table = ProfileTable(device="d", device_kind="emulated", sensor_rail="VDD_IN",
                         sensor_period_s=0.05, model="m", input_shape=[],
                         batch_sizes=list(BATCH_SIZES), knob_values=[900_000_000],
                         max_batch_size=128, mode="exhaustive", points=points,
                         points_measured=3, profiling_device_s=1.0, power_noise_w=0.0)
    chosen = plan(table, None, efficiency=loaded, margin_sigmas=0).choices["wattcap"]
    best = min(BATCH_SIZES, key=lambda b: table.lookup(b, 900_000_000).seconds_per_sample
               * loaded.ratio(b))
    assert chosen.batch_size == best
    assert chosen.efficiency_ratio == pytest.approx(loaded.ratio(best))
    assert any("r_b to wer <= 0.3 on speech" in n
               for n in plan(table, None, efficiency=loaded, margin_sigmas=0).notes)


def test_f1_on_a_hundred_point_scale(tmp_path: Path) -> None:
    path = _write(tmp_path / "f1.csv", _curve_rows(
        lambda b, seed, s: 100 * (1.0 - _wer(b, seed, s))))
    vector = import_efficiency(path, model="m", dataset="ner", target_accuracy=70,
                               metric="f1:100")
    assert vector.target_metric.high == 100 and vector.target_accuracy == 70
    assert vector.entry(32).samples_per_seed[0] == pytest.approx(
        -_scale(32, 0) * math.log(0.2 / 0.8), rel=0.03)
    with pytest.raises(TableImportError, match=r"outside f1's range \(0, 1\].*NAME:100"):
        import_efficiency(path, model="m", dataset="ner", target_accuracy=70, metric="f1")
    with pytest.raises(TableImportError, match=r"must be in \(.*100\]"):
        import_efficiency(_write(tmp_path / "bad.csv", ["8,0,0,0.5,100", "8,0,50,150,100"]),
                          model="m", dataset="ner", target_accuracy=70, metric="f1:100")


def test_metric_names_and_refusals() -> None:
    assert metric_named("WER").reached(0.2, 0.3) and not metric_named("wer").reached(0.4, 0.3)
    assert metric_named("accuracy").reached(0.8, 0.7)
    assert metric_named("perplexity").low == 1.0
    with pytest.raises(MetricError, match="unknown metric 'rouge'"):
        metric_named("rouge")
    with pytest.raises(MetricError, match="must be a number"):
        metric_named("f1:x")


def test_import_a_wer_table_from_the_command_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "wer.csv", _curve_rows(_wer))
    result = CliRunner().invoke(app, ["import", "efficiency", str(path), "--model", "m",
                                      "--dataset", "speech", "--metric", "wer", "--target",
                                      "0.3", "--out", str(tmp_path / "wer.json")])
    assert result.exit_code == 0, result.output
    assert "wer <= 0.3" in result.output
    refused = CliRunner().invoke(app, ["import", "efficiency", str(path), "--model", "m",
                                       "--dataset", "speech", "--metric", "accuracy",
                                       "--target", "30", "--out", str(tmp_path / "x.json")])
    assert refused.exit_code != 0 and "outside accuracy's range" in refused.output
    assert not (tmp_path / "x.json").exists()
