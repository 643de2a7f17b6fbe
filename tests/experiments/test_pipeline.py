"""The whole pipeline at small scale through the CLI, and the demo's choice of model."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from wattcap.algorithms.planner import plan
from wattcap.cli import app
from wattcap.core.efficiency import EfficiencyVector
from wattcap.devices import EmulatedDevice
from wattcap.experiments.demo import DEVICE, PIPELINE_CAPS_W, TASK
from wattcap.measure.profiling import Profiler
from wattcap.measure.references import emulated_reference_profiles
from wattcap.train.loop import RunRecord

runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_pipeline_end_to_end_through_the_cli(tmp_path):
    weights = tmp_path / "w.safetensors"
    invoke("pretrain", "--model", "digits-cnn", "--data", "digits-0-4", "--out", str(weights),
           "--epochs", "2")
    eff = tmp_path / "eff.json"
    out = invoke("estimate", "--model", "digits-cnn", "--proxy", "digits-rotated",
                 "--target-accuracy", "0.8", "--weights", str(weights), "--batch-sizes",
                 "8,32,128", "--seeds", "2", "--sample-budget", "8192", "--out", str(eff)).output
    assert "r_b" in out
    vector = EfficiencyVector.load(eff)
    assert [e.batch_size for e in vector.entries] == [8, 32, 128]
    assert vector.ratio(128) == 1.0
    profile = tmp_path / "profile.json"
    invoke("profile", "--model", "digits-cnn", "--batch-sizes", "8,32,128", "--out", str(profile))
    plan_json = json.loads(invoke("plan", "--profile", str(profile), "--efficiency", str(eff),
                                  "--power-cap", "4", "--json").output)
    assert plan_json["peak_power_w"] <= 4
    run = tmp_path / "run.json"
    out = invoke("train", "--profile", str(profile), "--efficiency", str(eff), "--power-cap", "4",
                 "--model", "digits-cnn", "--data", "digits-5-9", "--target-accuracy", "0.8",
                 "--weights", str(weights), "--out", str(run)).output
    assert "time-to-accuracy" in out
    record = RunRecord.load(run)
    assert record.reached
    assert record.config.batch_size == plan_json["batch_size"]
    assert record.frequency_hz <= plan_json["knob_value"]  # the watchdog may only step down
    assert record.method == "wattcap" and record.power_cap_w == 4
    baseline = invoke("train", "--profile", str(profile), "--efficiency", str(eff),
                      "--power-cap", "4", "--model", "digits-cnn", "--data", "digits-5-9",
                      "--target-accuracy", "0.8", "--weights", str(weights), "--method",
                      "baseline-1").output
    assert "baseline-1" in baseline


def test_train_refuses_a_profile_of_another_model(tmp_path):
    profile = tmp_path / "profile.json"
    invoke("profile", "--model", "digits-cnn", "--batch-sizes", "8,32", "--out", str(profile))
    result = runner.invoke(app, ["train", "--profile", str(profile), "--power-cap", "none",
                                 "--model", "digits32-cnn", "--data", "digits-32",
                                 "--target-accuracy", "0.8"])
    assert result.exit_code != 0
    assert "digits-cnn" in result.output and "digits32-cnn" in result.output


def test_demo_model_genuinely_loads_the_emulated_nano():
    """At the demo's tighter cap, baseline-1's choice differs from wattcap's."""
    profile = Profiler(EmulatedDevice(DEVICE), TASK.model).run(exhaustive=True)
    references = emulated_reference_profiles(DEVICE)
    tight = min(c for c in PIPELINE_CAPS_W if c is not None)
    result = plan(profile, tight, reference_profiles=references)
    ours, base = result.choices["wattcap"], result.choices["baseline-1"]
    assert (ours.batch_size, ours.knob_value) != (base.batch_size, base.knob_value)
    # The model is heavy enough that the cap binds: at f_max its largest batch exceeds it.
    top = profile.lookup(profile.max_batch_size, profile.knob_values[-1])
    assert top.peak_power_w > tight
