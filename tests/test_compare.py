"""The evaluation harness on a tiny scenario, end to end through the CLI."""

from __future__ import annotations

import csv

import pytest
from typer.testing import CliRunner

from wattcap.cli import app
from wattcap.experiments.compare import Comparison
from wattcap.planner import METHODS
from wattcap.profiling import ProfileTable
from wattcap.training import pretrain

runner = CliRunner()
CAPS = [3.6, None]


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare")
    weights = out / "w.safetensors"
    pretrain("digits-cnn", "digits-0-4", weights, epochs=2)
    args = ["compare", "--out", str(out), "--device", "jetson-nano", "--model", "digits-cnn",
            "--weights", str(weights), "--proxy", "digits-rotated", "--targets", "digits-5-9",
            "--power-caps", "3.6,none", "--seeds", "2", "--target-accuracy", "0.8",
            "--sample-budget", "8192"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output
    return out, first.output, second.output


def test_report_files_exist_and_are_readable(compared):
    out, _, _ = compared
    for name in ("report.md", "report.html", "results.csv", "bars-time.png", "bars-energy.png",
                 "heatmap-jetson-nano.png", "comparison.json"):
        assert (out / name).exists(), name
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    html = (out / "report.html").read_text()
    assert "<table>" in html and "bars-time.png" in html


def test_table_has_every_method_and_scenario(compared):
    out, _, _ = compared
    report = (out / "report.md").read_text()
    header = next(line for line in report.splitlines() if line.startswith("| device"))
    assert all(method in header for method in METHODS)
    rows = [line for line in report.splitlines() if line.startswith("| jetson-nano")]
    assert len(rows) == len(CAPS)
    assert any("3.6 W" in row for row in rows) and any("no cap" in row for row in rows)
    comparison = Comparison.load(out / "comparison.json")
    for cap in CAPS:
        for method in METHODS:
            result = comparison.get("jetson-nano", cap, "digits-5-9", method)
            assert result is not None and len(result.time_s) == 2
    with open(out / "results.csv") as handle:
        assert len(list(csv.DictReader(handle))) == len(CAPS) * len(METHODS) * 2


def test_fastest_is_never_slower_on_its_own_r(compared):
    """The oracle property on the recorded data: with r_b measured on the target, no method's
    choice beats the fastest configuration's."""
    out, _, _ = compared
    comparison = Comparison.load(out / "comparison.json")
    profile = ProfileTable.load(out / "profile-jetson-nano-digits-cnn.json")
    from wattcap.experiments.compare import efficiency_from_runs
    from wattcap.training import RunRecord

    runs = {}
    for path in (out / "runs").glob("math-digits-5-9-*.json"):
        record = RunRecord.load(path)
        runs[(record.config.batch_size, record.config.seed)] = record
    target_r = efficiency_from_runs(runs, "digits-cnn", "digits-5-9", 2, 0.8, [1, 8, 8])

    def time_on_target(r) -> float:
        point = profile.lookup(r.batch_size, r.frequency_hz)
        return point.seconds_per_sample * target_r.samples(r.batch_size)

    for cap in CAPS:
        fastest = comparison.get("jetson-nano", cap, "digits-5-9", "fastest")
        for method in METHODS:
            other = comparison.get("jetson-nano", cap, "digits-5-9", method)
            assert time_on_target(fastest) <= time_on_target(other) * (1 + 1e-9)
            if other.frequency_steps == 0:
                # Measured on the device clock, it matches the profile's prediction for the
                # samples the runs trained (their first evaluation at the target).
                point = profile.lookup(other.batch_size, other.frequency_hz)
                trained = [runs[(other.batch_size, s)].samples_to_target for s in range(2)]
                assert other.time_mean_s == pytest.approx(
                    point.seconds_per_sample * sum(trained) / 2, rel=0.02)


def test_resumed_comparison_reuses_recorded_runs(compared):
    _, first, second = compared
    assert "0 reused" in first and "0 training runs trained" not in first
    assert "0 training runs trained" in second
