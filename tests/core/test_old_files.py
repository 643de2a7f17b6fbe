"""Old files keep working: profiles and efficiency vectors written by earlier schema versions
(by wattcap's own code at earlier commits, see old_schema_files/README.md) load migrated, plan,
and are rewritten by `wattcap migrate`; a file of a newer version is refused, naming it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wattcap.cli import app
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.migrate import migrate_file
from wattcap.core.profile import ProfileTable
from wattcap.core.schema import WattcapFileError

OLD = Path(__file__).parent / "old_schema_files"
PROFILES = {"profile-v1.json": 1, "profile-v2-predicted-points.json": 2,
            "profile-v2-fingerprint.json": 2, "profile-v3.json": 3,
            "profile-v4.json": 4, "profile-v5.json": 5, "profile-v6.json": 6,
            "profile-v7.json": 7}
VECTORS = {"efficiency-v1.json": 1, "efficiency-v2-fit.json": 2,
           "efficiency-v2-fingerprint.json": 2, "efficiency-v3.json": 3,
           "efficiency-v4.json": 4, "efficiency-v5.json": 5}


def invoke(*args: object):  # noqa: ANN201
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def test_the_fixtures_are_of_earlier_versions() -> None:
    # if a format's version moves on, its current files join these fixtures
    for name, version in {**PROFILES, **VECTORS}.items():
        assert json.loads((OLD / name).read_text())["schema_version"] == version
    assert max(PROFILES.values()) < ProfileTable.SCHEMA_VERSION
    assert max(VECTORS.values()) < EfficiencyVector.SCHEMA_VERSION


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_each_earlier_profile_loads_with_its_measurements(name: str) -> None:
    raw = json.loads((OLD / name).read_text())
    table = ProfileTable.load(OLD / name)
    assert table.migrated_from == PROFILES[name]
    assert table.schema_version == ProfileTable.SCHEMA_VERSION
    assert len(table.points) == len(raw["points"]) and table.points
    assert [(p.batch_size, p.knob_value, p.peak_power_w) for p in table.points] == [
        (p["batch_size"], p.get("knob_value", p.get("frequency_hz")), p["peak_power_w"])
        for p in raw["points"]]
    # a profile before knobs varied the GPU clock, in Hz (version 5 says so itself)
    assert table.knob_kind == "gpu_clock"
    assert table.knob_values == raw.get("knob_values", raw.get("frequencies_hz"))
    # absent fields stay absent: nothing is invented for a file that did not record them
    assert [None if p.observed_frequency_hz is None else p.observed_frequency_hz.model_dump()
            for p in table.points] == [p.get("observed_frequency_hz") for p in raw["points"]]
    assert table.clock_not_held() == []
    # before rounds (version 7): one pass, no rule named for the rails
    assert table.rounds == 1 and all(p.rounds == 1 for p in table.points)
    assert table.sensor_rule is None
    assert table.power_modes is None  # before version 8: the modes were not recorded
    if "architecture_fingerprint" not in raw:
        assert table.architecture_fingerprint is None and table.device_spec is None


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_each_earlier_efficiency_vector_loads_with_its_ratios(name: str) -> None:
    raw = json.loads((OLD / name).read_text())
    vector = EfficiencyVector.load(OLD / name)
    assert vector.migrated_from == VECTORS[name]
    for entry in raw["entries"]:
        ratio = entry.get("ratio", entry.get("ratio_mean"))
        assert vector.ratio(entry["batch_size"]) == pytest.approx(ratio)
        assert vector.entry(entry["batch_size"]).samples_per_seed == entry["samples_per_seed"]
    assert vector.ratio(vector.reference_batch_size) == pytest.approx(1.0)
    # every earlier file's target was an accuracy in (0, 1] that grows
    assert (vector.target_metric.name, vector.target_metric.direction) == ("accuracy", "higher")


def test_a_version_1_batch_size_without_a_ratio_is_left_out_and_said(tmp_path: Path) -> None:
    raw = json.loads((OLD / "efficiency-v1.json").read_text())
    raw["entries"][0].update(samples_per_seed=[None], samples_mean=None, ratio_mean=None,
                             ratio_std=None)
    missed = raw["entries"][0]["batch_size"]
    path = tmp_path / "missed.json"
    path.write_text(json.dumps(raw))
    vector = EfficiencyVector.load(path)
    assert vector.ratio(missed) is None  # never given an invented r_b
    assert any(f"b = [{missed}]" in note for note in vector.notes)


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_earlier_files_plan(profile: str) -> None:
    result = invoke("plan", "--profile", OLD / profile, "--efficiency",
                    OLD / "efficiency-v1.json", "--power-cap", "5", "--json")
    assert result.exit_code == 0, result.output
    assert "read as version" in result.stderr and "wattcap migrate" in result.stderr
    summary = json.loads(result.stdout)
    assert summary["methods"]["wattcap"]["batch_size"] in {8, 16, 32}


def test_migrate_rewrites_and_keeps_the_original(tmp_path: Path) -> None:
    for name in ("profile-v1.json", "efficiency-v2-fingerprint.json"):
        shutil.copy(OLD / name, tmp_path / name)
    result = invoke("migrate", tmp_path / "profile-v1.json",
                    tmp_path / "efficiency-v2-fingerprint.json")
    assert result.exit_code == 0, result.output
    assert f"schema version 1 -> {ProfileTable.SCHEMA_VERSION}" in result.output
    assert f"schema version 2 -> {EfficiencyVector.SCHEMA_VERSION}" in result.output
    migrated = json.loads((tmp_path / "profile-v1.json").read_text())
    assert migrated["schema_version"] == ProfileTable.SCHEMA_VERSION
    assert ProfileTable.load(tmp_path / "profile-v1.json").migrated_from is None
    backup = tmp_path / "profile-v1.schema-v1.json"
    assert backup.read_text() == (OLD / "profile-v1.json").read_text()  # nothing is lost
    again = migrate_file(tmp_path / "profile-v1.json")
    assert again.backup is None and again.from_version == again.to_version


def test_a_newer_file_is_refused_naming_its_version(tmp_path: Path) -> None:
    raw = json.loads((OLD / "profile-v1.json").read_text())
    raw["schema_version"] = ProfileTable.SCHEMA_VERSION + 1
    path = tmp_path / "newer.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(WattcapFileError, match=rf"newer wattcap \(schema version "
                       rf"{ProfileTable.SCHEMA_VERSION + 1}\).*Upgrade wattcap"):
        ProfileTable.load(path)
    result = invoke("migrate", path)
    assert result.exit_code != 0 and "newer wattcap" in result.output
    assert json.loads(path.read_text()) == raw  # left as it was


def test_migrate_refuses_other_kinds_and_corrupt_files(tmp_path: Path) -> None:
    other = tmp_path / "plan.json"
    other.write_text(json.dumps({"kind": "wattcap.run", "schema_version": 1}))
    with pytest.raises(WattcapFileError, match="'wattcap.run' file; wattcap migrate rewrites"):
        migrate_file(other)
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"kind": "wattcap.profile", ')
    with pytest.raises(WattcapFileError, match="not a JSON file"):
        migrate_file(corrupt)


def test_a_plan_before_knobs_loads_as_gpu_clock_choices() -> None:
    # written by `wattcap plan --out` at 38a2fe0 (plan schema 3), from profile-v4.json
    from wattcap.core.plan import Plan

    raw = json.loads((OLD / "plan-v3.json").read_text())
    loaded = Plan.load(OLD / "plan-v3.json")
    assert loaded.migrated_from == 3 and loaded.knob_kind == "gpu_clock"
    assert loaded.safe_knob_value == raw["safe_frequency_hz"]
    for method, choice in raw["choices"].items():
        assert loaded.choices[method].knob_value == choice["frequency_hz"]
    assert [p.knob_value for p in loaded.pareto_front] == [
        p["frequency_hz"] for p in raw["pareto_front"]]
    assert loaded.describe_knob(loaded.choices["wattcap"].knob_value).endswith(" MHz")


def test_a_comparison_before_knobs_loads_with_its_clocks() -> None:
    # the demo's golden comparison.json at 38a2fe0 (schema 1; its times masked by nothing)
    from wattcap.experiments.compare import Comparison

    raw = json.loads((OLD / "comparison-v1.json").read_text())
    loaded = Comparison.load(OLD / "comparison-v1.json")
    assert loaded.migrated_from == 1 and loaded.knob_kind == "gpu_clock"
    assert loaded.risk is None and loaded.trace_label is None
    assert [(r.method, r.batch_size, r.knob_value, r.time_s) for r in loaded.results] == [
        (r["method"], r["batch_size"], r["frequency_hz"], r["time_s"]) for r in raw["results"]]


def test_a_comparison_before_restarts_loads_without_budget_times() -> None:
    # a trace replay at 0b52d15 (schema 3): no missed seed's budget was recorded, so a missed
    # seed stays "not reached" (no time invented) and every other result is unchanged
    from wattcap.experiments.compare import Comparison

    raw = json.loads((OLD / "comparison-v3.json").read_text())
    loaded = Comparison.load(OLD / "comparison-v3.json")
    assert raw["schema_version"] == 3 and loaded.migrated_from == 3
    assert all(r.budget_time_s == [] for r in loaded.results)
    assert [(r.method, r.knob_value, r.time_s) for r in loaded.results] == [
        (r["method"], r["knob_value"], r["time_s"]) for r in raw["results"]]
    for r, old in zip(loaded.results, raw["results"], strict=True):
        assert r.expected_time_s == pytest.approx(sum(old["time_s"]) / len(old["time_s"]))


def test_a_comparison_before_boards_was_replayed_on_the_kind_board() -> None:
    # a trace replay at 8a4fc00 (schema 4): no board recorded, and none was drawn then
    from wattcap.experiments.compare import Comparison

    raw = json.loads((OLD / "comparison-v4.json").read_text())
    loaded = Comparison.load(OLD / "comparison-v4.json")
    assert raw["schema_version"] == 4 and "board" not in raw
    assert loaded.migrated_from == 4 and loaded.board == "kind"
    assert [(r.method, r.knob_value, r.time_s) for r in loaded.results] == [
        (r["method"], r["knob_value"], r["time_s"]) for r in raw["results"]]


def test_a_comparison_before_board_replans_ran_every_seed_at_its_choice() -> None:
    # a trace replay at cb95e65 (schema 5): no per-seed choices recorded, none re-planned
    from wattcap.experiments.compare import Comparison

    raw = json.loads((OLD / "comparison-v5.json").read_text())
    loaded = Comparison.load(OLD / "comparison-v5.json")
    assert raw["schema_version"] == 5 and "seed_batch_sizes" not in raw["results"][0]
    assert loaded.migrated_from == 5 and loaded.schema_version == Comparison.SCHEMA_VERSION
    assert all(r.seed_batch_sizes == [] and r.board_replans == 0 for r in loaded.results)
    assert all(r.board_replan_label(loaded.describe_knob) is None for r in loaded.results)
    assert [(r.method, r.batch_size, r.knob_value, r.time_s) for r in loaded.results] == [
        (r["method"], r["batch_size"], r["knob_value"], r["time_s"]) for r in raw["results"]]


def test_the_files_the_repository_ships_are_at_their_current_schema() -> None:
    """Examples a newcomer opens first must not greet them with a migration note (a `--json`
    plan of the fleet's profile would carry it): old files belong here, under OLD, only."""
    from wattcap.core.fleet import FleetFile
    from wattcap.core.plan import Plan
    from wattcap.core.run import RunRecord
    from wattcap.experiments.compare import Comparison
    from wattcap.experiments.federation import FleetRun
    from wattcap.experiments.trace import TraceManifest

    current = {cls.FILE_KIND: cls.SCHEMA_VERSION for cls in (
        ProfileTable, EfficiencyVector, RunRecord, Comparison, Plan, FleetFile, FleetRun,
        TraceManifest)}
    shipped = {}
    for path in sorted((OLD.parents[2] / "examples").rglob("*.json")):
        raw = json.loads(path.read_text())
        if isinstance(raw, dict) and str(raw.get("kind", "")).startswith("wattcap."):
            shipped[path.name] = (raw["schema_version"], current[raw["kind"]])
    assert "profile-jetson-nano.json" in shipped and "trace.json" in shipped
    assert {name: found for name, (found, wanted) in shipped.items() if found != wanted} == {}
