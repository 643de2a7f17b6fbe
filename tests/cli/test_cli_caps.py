"""The command line of issue 19: `plan --objective ... --plot` shows the time/energy Pareto
front, `train --power-cap SPEC` follows a moving cap and `--plot` draws the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.cli_run import flat as _flat
from tests.cli.cli_run import invoke
from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.cli.train import NOT_REACHED_EXIT_CODE
from wattcap.core.run import RunRecord

DEVICE = "emulated:jetson-nano"
MODEL = "digits32-cnn"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("cli-caps")
    profile = folder / "profile.json"
    result = invoke("profile", "--device", DEVICE, "--model", MODEL, "--batch-sizes",
                    "16,32,64", "--out", profile)
    assert result.exit_code == 0, result.output
    efficiency = folder / "eff.json"
    vector_from_samples(
        {16: [700], 32: [800], 64: [1000]}, sample_budget=4096, model=MODEL,
        input_shape=[1, 32, 32],
        dataset="proxy", task="image-classification", target_accuracy=0.8,
        seeds=[0]).save(efficiency)
    return profile, efficiency


def test_plan_objectives_and_the_pareto_front(files: tuple[Path, Path], tmp_path: Path) -> None:
    profile, efficiency = files
    plans = {}
    for objective in ("time", "energy"):
        result = invoke("plan", "--profile", profile, "--efficiency", efficiency,
                        "--power-cap", "5", "--objective", objective, "--json")
        assert result.exit_code == 0, result.output
        plans[objective] = json.loads(result.output)
    assert plans["energy"]["objective"]["name"] == "energy"
    assert plans["energy"]["predicted_energy_j"] <= plans["time"]["predicted_energy_j"]
    assert plans["energy"]["predicted_time_s"] >= plans["time"]["predicted_time_s"]
    front = plans["time"]["pareto_front"]
    assert front and [p["predicted_time_s"] for p in front] == sorted(
        p["predicted_time_s"] for p in front)
    # both objectives' choices lie on the front
    for chosen in plans.values():
        assert any((p["batch_size"], p["knob_value"]) == (chosen["batch_size"],
                                                            chosen["knob_value"])
                   for p in front)
    png = tmp_path / "front.png"
    result = invoke("plan", "--profile", profile, "--efficiency", efficiency, "--power-cap", "5",
                    "--objective", "cost", "--eta", "0.5", "--plot", png)
    assert result.exit_code == 0, result.output
    output = _flat(result.output)
    assert "Pareto front" in output and "objective cost (eta 0.5" in output
    assert png.read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize(("args", "message"), [
    (("--objective", "cost"), "eta"),
    (("--objective", "speed"), "unknown objective"),
    (("--objective", "energy", "--max-energy", "10"), "time objective only"),
    (("--objective", "energy", "--deadline", "0.001"), "deadline"),
])
def test_plan_refuses_bad_objectives_clearly(files: tuple[Path, Path], args: tuple,
                                            message: str) -> None:
    profile, efficiency = files
    result = invoke("plan", "--profile", profile, "--efficiency", efficiency, "--power-cap", "5",
                    *args)
    assert result.exit_code != 0
    assert message in _flat(result.output) and "Traceback" not in result.output


def test_train_follows_a_schedule_and_plots_the_run(files: tuple[Path, Path],
                                                     tmp_path: Path) -> None:
    profile, efficiency = files
    schedule = tmp_path / "caps.csv"
    schedule.write_text("time_s,cap_w\n0,5.5\n0.12,3.2\n")
    out, png = tmp_path / "run.json", tmp_path / "run.png"
    result = invoke("train", "--profile", profile, "--efficiency", efficiency, "--power-cap",
                    f"schedule:{schedule}", "--model", MODEL, "--data", "digits-32",
                    "--target-accuracy", "0.99", "--sample-budget", "256", "--eval-every",
                    "128", "--out", out, "--plot", png)
    record = RunRecord.load(out)
    assert not record.reached  # 99 % in 256 samples: the exit code says so, the record is kept
    assert result.exit_code == NOT_REACHED_EXIT_CODE, result.output
    assert record.cap_source is not None and "schedule" in record.cap_source
    assert len(record.segments) >= 2
    first, second = record.segments[0], record.segments[1]
    assert (second.batch_size, second.frequency_hz) != (first.batch_size, first.frequency_hz)
    assert second.batch_size <= first.batch_size and second.frequency_hz <= first.frequency_hz
    assert record.segments[1].cap_w == 3.2
    assert [p.samples for p in record.curve] == [128, 256]
    assert not record.drift_events  # the emulator does not drift: short steps are not drift
    assert "segments under" in _flat(result.output)
    assert png.read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize(("cap", "extra", "message"), [
    ("wind:speed=3", (), "unknown kind"),
    ("battery:max_w=9", (), "capacity_wh"),
    ("4.5", ("--plot", "x.png"), "moving cap"),
])
def test_train_refuses_bad_cap_specs_clearly(files: tuple[Path, Path], cap: str, extra: tuple,
                                             message: str) -> None:
    profile, _ = files
    result = invoke("train", "--profile", profile, "--power-cap", cap, "--model", MODEL,
                    "--data", "digits-32", "--target-accuracy", "0.9", *extra)
    assert result.exit_code != 0
    assert message in _flat(result.output) and "Traceback" not in result.output
