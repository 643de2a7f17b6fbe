"""The `wattcap` command line: devices, profile, plan, plot-profile, demo."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wattcap.cli import app
from wattcap.profiling import ProfileTable

DEVICE = "emulated:jetson-nano"
MODEL = "digits32-cnn"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CHOICE_KEYS = {"batch_size", "frequency_hz", "predicted_time_s", "predicted_energy_j",
               "peak_power_w", "method"}

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def _flat(text: str) -> str:
    """Output with rich's line wrapping undone."""
    return re.sub(r"\s+", " ", text)


@pytest.fixture(scope="module")
def profile_file(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "profile.json"
    result = invoke("profile", "--device", DEVICE, "--model", MODEL, "--out", out)
    assert result.exit_code == 0, result.output
    return out


def test_devices_lists_the_emulated_jetsons() -> None:
    result = invoke("devices")
    assert result.exit_code == 0, result.output
    assert "jetson-nano" in result.output
    assert "jetson-tx2nx" in result.output
    assert "921.6" in result.output  # the Nano's f_max


def test_profile_exhaustive_writes_a_profile(profile_file) -> None:
    table = ProfileTable.load(profile_file)
    assert table.mode == "exhaustive"
    assert (table.device, table.model) == ("jetson-nano", MODEL)
    assert table.points_measured == len(table.batch_sizes) * len(table.frequencies_hz)


def test_profile_pruned_measures_fewer_points(tmp_path, profile_file) -> None:
    out = tmp_path / "pruned.json"
    result = invoke("profile", "--device", DEVICE, "--model", MODEL, "--power-cap", "5",
                    "--out", out)
    assert result.exit_code == 0, result.output
    assert "pruned" in result.output
    pruned = ProfileTable.load(out)
    exhaustive = ProfileTable.load(profile_file)
    assert pruned.mode == "pruned" and pruned.power_cap_w == 5.0
    assert 0 < pruned.points_measured < exhaustive.points_measured
    assert f"{pruned.points_measured} points" in result.output


def test_profile_with_an_unknown_model_lists_known_models(tmp_path) -> None:
    result = invoke("profile", "--device", DEVICE, "--model", "nope", "--out",
                    tmp_path / "x.json")
    assert result.exit_code != 0
    assert "nope" in result.output
    for known in ("resnet18", "mobilenetv2", "digits32-cnn"):
        assert known in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "x.json").exists()


def test_profile_with_an_unknown_device_fails_clearly(tmp_path) -> None:
    result = invoke("profile", "--device", "emulated:jetson-nope", "--model", MODEL, "--out",
                    tmp_path / "x.json")
    assert result.exit_code != 0
    assert "jetson-nano" in result.output
    assert "Traceback" not in result.output


def test_plan_json(profile_file) -> None:
    result = invoke("plan", "--profile", profile_file, "--power-cap", "5", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert CHOICE_KEYS <= set(data)
    assert data["method"] == "wattcap"
    assert data["peak_power_w"] <= 5.0
    assert data["power_cap_w"] == 5.0
    assert {"wattcap", "baseline-1", "baseline-2"} <= set(data["methods"])
    for name, choice in data["methods"].items():
        assert CHOICE_KEYS <= set(choice)
        assert choice["method"] == name
        assert choice["peak_power_w"] <= 5.0
        assert choice["predicted_time_s"] >= data["predicted_time_s"]
    table = ProfileTable.load(profile_file)
    point = table.lookup(data["batch_size"], data["frequency_hz"])
    assert point is not None and point.peak_power_w == data["peak_power_w"]


def test_plan_without_a_cap(profile_file, tmp_path) -> None:
    out = tmp_path / "plan.json"
    result = invoke("plan", "--profile", profile_file, "--power-cap", "none", "--json",
                    "--out", out)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["power_cap_w"] is None
    assert data["frequency_hz"] == max(ProfileTable.load(profile_file).frequencies_hz)
    assert out.exists()


def test_plan_table_output(profile_file) -> None:
    result = invoke("plan", "--profile", profile_file, "--power-cap", "5")
    assert result.exit_code == 0, result.output
    for method in ("wattcap", "baseline-1", "baseline-2", "fastest"):
        assert method in result.output


def test_plan_with_an_infeasible_cap(profile_file) -> None:
    lowest = min(p.peak_power_w for p in ProfileTable.load(profile_file).points)
    result = invoke("plan", "--profile", profile_file, "--power-cap", "0.5")
    assert result.exit_code != 0
    output = _flat(result.output)
    assert "infeasible" in output
    assert f"{lowest:.2f}" in output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("cap", ["-3", "lots"])
def test_plan_with_a_bad_cap_value(profile_file, cap) -> None:
    result = invoke("plan", "--profile", profile_file, "--power-cap", cap)
    assert result.exit_code != 0
    assert "--power-cap" in result.output
    assert "Traceback" not in result.output


def test_plan_with_a_corrupt_profile(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "wattcap.profile", "schema_version": 1, "points": [')
    result = invoke("plan", "--profile", bad, "--power-cap", "5")
    assert result.exit_code != 0
    output = _flat(result.output)
    assert "not valid JSON" in output
    assert "bad.json" in output
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)


def test_plan_with_a_plan_file_as_profile(profile_file, tmp_path) -> None:
    plan_path = tmp_path / "plan.json"
    assert invoke("plan", "--profile", profile_file, "--power-cap", "5", "--out",
                  plan_path).exit_code == 0
    result = invoke("plan", "--profile", plan_path, "--power-cap", "5")
    assert result.exit_code != 0
    assert "wattcap.plan" in _flat(result.output)


def test_plot_profile_writes_a_png(profile_file, tmp_path) -> None:
    out = tmp_path / "x.png"
    result = invoke("plot-profile", "--profile", profile_file, "--power-cap", "5", "--out", out)
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 10_000


@pytest.mark.slow  # the demo also pre-trains and trains on the bundled digits (~1 min)
def test_demo(tmp_path) -> None:
    out = tmp_path / "demo"
    result = invoke("demo", "--out", out, "--quick")
    assert result.exit_code == 0, result.output
    assert "speed-up" in result.output
    heatmaps = sorted(out.glob("heatmap-*.png"))
    profiles = sorted(out.glob("profile-*.json"))
    assert len(heatmaps) >= 2 and len(profiles) >= 2
    for png in heatmaps:
        assert png.read_bytes()[:8] == PNG_MAGIC
    for path in profiles:
        assert ProfileTable.load(path).device == "jetson-nano"
