"""A stopped long command (Ctrl-C, SIGTERM) says what it kept and the exact command that goes
on from there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wattcap.cli.resume import command_line, resumable, resume_hint

WATTCAP = Path(sys.executable).parent / "wattcap"


def test_the_command_to_run_again_is_the_one_the_user_ran_quoted_for_a_shell() -> None:
    assert command_line(["estimate", "--out", "my eff.json", "--seeds", "1"]) == \
        "wattcap estimate --out 'my eff.json' --seeds 1"
    assert resume_hint("each finished run is kept in runs and reused", ["compare"]) == (
        "stopped: each finished run is kept in runs and reused. To go on, run the same "
        "command again:\n  wattcap compare")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_inside_the_work_prints_how_to_go_on_and_ends_with_its_code(
    signum: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["wattcap", "sensitivity", "--quick", "--out", "cmp"])
    handler_before = signal.getsignal(signum)  # another test in this process may have set one
    ran_on = []
    with pytest.raises(SystemExit) as stopped, resumable("each finished run is kept"):
        os.kill(os.getpid(), signum)
        ran_on.append("after the signal")  # never: the signal ends the work here
    assert stopped.value.code == 128 + signum and not ran_on
    err = capsys.readouterr().err
    assert "stopped: each finished run is kept. To go on, run the same command again:" in err
    assert "  wattcap sensitivity --quick --out cmp" in err
    # the handlers are back: outside the block a signal is not turned into the hint
    assert signal.getsignal(signum) is handler_before


def test_work_that_ends_on_its_own_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with resumable("kept"):
        pass
    with pytest.raises(ValueError), resumable("kept"):
        raise ValueError("an error is not a stop")
    assert "stopped" not in capsys.readouterr().err


def test_a_stopped_estimate_names_the_command_that_resumes_it(tmp_path: Path) -> None:
    """SIGTERM while the sweep runs: its progress line says it stopped, and the last lines say
    where the finished runs are and the exact command to run again."""
    env = {**os.environ, "WATTCAP_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}
    args = [str(WATTCAP), "estimate", "--model", "digits-cnn", "--proxy", "digits", "--seeds",
            "1", "--batch-sizes", "16,32", "--sample-budget", "4096", "--out", "eff.json"]
    job = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    assert job.stdout is not None
    first = job.stdout.readline()  # the progress has started
    assert first.startswith("estimating r_b of digits-cnn on digits: 0/2 runs"), first
    # what the sweep will do, said from inside the work (the first line is printed while the
    # progress starts, before its block is entered: a signal then has no progress to stop)
    second = job.stdout.readline()
    assert "2 runs (2 batch size(s) x 1 seed(s)); the first, b=32" in second, second
    job.send_signal(signal.SIGTERM)
    out, err = job.communicate(timeout=120)
    assert job.returncode == 128 + signal.SIGTERM, (out, err)
    assert "(stopped)" in out
    assert (f"each finished run is kept in {tmp_path / 'cache' / 'runs'} and reused" in
            " ".join(err.split()))
    assert err.rstrip().endswith("wattcap estimate --model digits-cnn --proxy digits --seeds 1 "
                                 "--batch-sizes 16,32 --sample-budget 4096 --out eff.json")
    assert "Traceback" not in err


def test_a_stopped_train_with_a_checkpoint_folder_says_how_to_go_on(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT) once the first checkpoint is on disk: the run ends with 130, the
    checkpoint is still there, and the last lines say so and give the command to run again."""
    from wattcap.devices.emulated import EmulatedDevice
    from wattcap.measure.profiling import Profiler

    Profiler(EmulatedDevice("jetson-nano"), "digits-cnn").run(power_cap_w=None).save(
        tmp_path / "profile.json")
    env = {**os.environ, "WATTCAP_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}
    args = [str(WATTCAP), "train", "--profile", "profile.json", "--power-cap", "none",
            "--model", "digits-cnn", "--data", "digits", "--target-accuracy", "0.999",
            "--sample-budget", "100000", "--eval-every", "128", "--checkpoint-dir", "ckpt"]
    job = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    checkpoint = tmp_path / "ckpt" / "checkpoint.safetensors"
    deadline = time.monotonic() + 120
    while not checkpoint.exists() and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    job.send_signal(signal.SIGINT)
    out, err = job.communicate(timeout=120)
    assert job.returncode == 128 + signal.SIGINT, (out, err)
    assert checkpoint.exists()
    said = " ".join(err.split())
    assert "stopped: the checkpoint in ckpt (written at every evaluation) is kept. To go on, " \
           "run the same command again:" in said, err
    assert err.rstrip().endswith(" ".join(["wattcap", *args[1:]]))
    assert "Traceback" not in err


def test_pretrain_says_what_it_does_before_it_trains(tmp_path: Path) -> None:
    """The first line pretrain prints is its progress (before the data loads), the last
    what it wrote."""
    from typer.testing import CliRunner

    from wattcap.cli import app

    out = tmp_path / "w.safetensors"
    result = CliRunner().invoke(app, ["pretrain", "--model", "digits-cnn", "--data", "digits",
                                      "--epochs", "1", "--out", str(out)],
                                env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[0].startswith("pre-training digits-cnn on digits (1 epoch(s)): 0 samples"), lines
    assert lines[-1].startswith(f"wrote {out}"), lines
    assert out.exists()
