"""Training to accuracy, learning-rate scaling, same-sample-count evaluation, checkpoints."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from wattcap.core.schema import WattcapFileError
from wattcap.data import get_dataset
from wattcap.devices import EmulatedDevice
from wattcap.models.weights import load_weights, read_metadata
from wattcap.train.loop import (
    BatchStream,
    RunRecord,
    TrainConfig,
    pretrain,
    scaled_learning_rate,
    train_to_accuracy,
)


@pytest.fixture(scope="module")
def digits_splits():
    return get_dataset("digits").split(0.2, seed=0)


def small_config(**overrides) -> TrainConfig:
    # A from-scratch CNN on digits learns in a few thousand samples at 1e-3 (b=32); the
    # paper's fine-tuning reference (5e-4 at b=128) is the default, tested on its own.
    values = dict(model="digits-cnn", batch_size=16, target_accuracy=0.95, sample_budget=4096,
                  eval_every_samples=256, lr_ref=1e-3, batch_size_ref=32)
    values.update(overrides)
    return TrainConfig(**values)


class Killed(Exception):
    """Stands for a kill of the training process at an evaluation."""


def kill_at(samples: int):
    """An `on_eval` that kills the run at the evaluation after `samples` samples (the
    checkpoint is written when the accuracy is reported, before on_eval runs)."""
    def kill(point) -> None:
        if point.samples == samples:
            raise Killed
    return kill


def test_square_root_learning_rate_scaling():
    assert scaled_learning_rate(1e-3, 32, 32) == pytest.approx(1e-3)
    assert scaled_learning_rate(1e-3, 32, 128) == pytest.approx(2e-3)
    assert scaled_learning_rate(1e-3, 32, 8) == pytest.approx(5e-4)
    assert small_config(batch_size=64, lr_ref=4e-4, batch_size_ref=16).learning_rate == \
        pytest.approx(4e-4 * math.sqrt(4))


def test_optimizer_uses_the_scaled_rate(digits_splits, monkeypatch):
    seen = []
    original = torch.optim.Adam.__init__

    def spy(self, params, lr=1e-3, **kw):
        seen.append(lr)
        original(self, params, lr=lr, **kw)

    monkeypatch.setattr(torch.optim.Adam, "__init__", spy)
    train, test = digits_splits
    train_to_accuracy(small_config(batch_size=64, sample_budget=256), train, test)
    assert seen == [pytest.approx(1e-3 * math.sqrt(64 / 32))]
    seen.clear()
    default = TrainConfig(model="digits-cnn", batch_size=64, target_accuracy=0.9,
                          sample_budget=256)
    train_to_accuracy(default, train, test)
    assert seen == [pytest.approx(5e-4 * math.sqrt(64 / 128))]  # the paper's reference


def test_eval_cadence_must_be_a_multiple_of_every_batch_size():
    with pytest.raises(ValueError, match="multiple of the batch size"):
        small_config(batch_size=128, eval_every_samples=200).check()


def test_every_batch_size_is_evaluated_at_the_same_sample_counts(digits_splits):
    train, test = digits_splits
    counts = {}
    for b in (4, 32, 128):
        record = train_to_accuracy(
            small_config(batch_size=b, target_accuracy=1.0, sample_budget=1024,
                         eval_every_samples=256), train, test)
        counts[b] = [p.samples for p in record.curve]
    assert counts[4] == counts[32] == counts[128] == [256, 512, 768, 1024]


def test_batch_stream_is_the_same_sample_order_for_every_batch_size():
    stream = BatchStream(100, seed=3)
    by_four = [stream.indices(i, 4) for i in range(0, 256, 4)]
    by_sixtyfour = [stream.indices(i, 64) for i in range(0, 256, 64)]
    assert torch.equal(torch.tensor(sum((list(x) for x in by_four), [])),
                       torch.tensor(sum((list(x) for x in by_sixtyfour), [])))
    first_epoch = stream.indices(0, 100)
    assert sorted(first_epoch.tolist()) == list(range(100))  # a permutation: each sample once


def test_run_reaches_target_and_accounts_device_time_and_energy(digits_splits):
    train, test = digits_splits
    device = EmulatedDevice("jetson-nano")
    record = train_to_accuracy(small_config(), train, test, device=device)
    assert record.reached and record.samples_to_target is not None
    assert record.final_accuracy >= 0.95
    # interpolated between the last evaluation under the target and the first one at it
    last = record.curve[-1]
    assert record.curve[-2].samples < record.samples_to_target <= last.samples
    assert record.time_to_accuracy_s is not None
    assert record.curve[-2].device_time_s < record.time_to_accuracy_s <= last.device_time_s
    assert record.device_time_s == pytest.approx(device.now_s(), rel=1e-9)
    # Energy from sampled power agrees with the emulator's exact integral within noise.
    assert record.energy_j == pytest.approx(device.true_energy_j, rel=0.05)
    assert record.peak_power_w >= record.avg_power_w > device.spec.idle_w


def test_budget_stops_an_unreachable_target(digits_splits):
    train, test = digits_splits
    record = train_to_accuracy(small_config(target_accuracy=1.0, sample_budget=512), train, test)
    assert not record.reached and record.samples_to_target is None
    assert record.samples_seen == 512
    assert record.time_to_accuracy_s is None


def test_interrupted_run_resumes_to_the_same_result(digits_splits, tmp_path):
    train, test = digits_splits
    config = small_config()
    full = train_to_accuracy(config, train, test, device=EmulatedDevice("jetson-nano"))

    with pytest.raises(Killed):
        train_to_accuracy(config, train, test, device=EmulatedDevice("jetson-nano"),
                          checkpoint_dir=tmp_path, on_eval=kill_at(768))
    resumed = train_to_accuracy(config, train, test, device=EmulatedDevice("jetson-nano"),
                                checkpoint_dir=tmp_path)
    # The checkpoint is written when the accuracy is reported, before on_eval runs.
    assert resumed.resumed_from_samples == 768
    assert [p.accuracy for p in resumed.curve] == [p.accuracy for p in full.curve]
    assert resumed.samples_to_target == full.samples_to_target
    assert resumed.device_time_s == pytest.approx(full.device_time_s, rel=1e-9)
    # the observed clock covers the whole run, not only what came after the resume
    assert resumed.observed_frequency_hz is not None and full.observed_frequency_hz is not None
    assert resumed.observed_frequency_hz.readings == pytest.approx(
        full.observed_frequency_hz.readings, abs=2)


def test_a_run_resumed_past_its_target_makes_as_many_more_evaluations(digits_splits, tmp_path):
    """A run that goes on for `evals_past_target` evaluations past the crossing and is killed
    among them makes only the ones left after its resume, not that many again."""
    train, test = digits_splits
    config = small_config(evals_past_target=3)
    full = train_to_accuracy(config, train, test, device=EmulatedDevice("jetson-nano"))
    samples = [p.samples for p in full.curve]
    crossing = next(s for s in samples if s >= full.samples_to_target)
    killed_at = samples[samples.index(crossing) + 2]  # two of the three made
    assert killed_at < samples[-1]

    with pytest.raises(Killed):
        train_to_accuracy(config, train, test, device=EmulatedDevice("jetson-nano"),
                          checkpoint_dir=tmp_path, on_eval=kill_at(killed_at))
    resumed = train_to_accuracy(config, train, test, device=EmulatedDevice("jetson-nano"),
                                checkpoint_dir=tmp_path)
    assert resumed.resumed_from_samples == killed_at
    assert [p.samples for p in resumed.curve] == samples
    assert resumed.samples_seen == full.samples_seen


def test_checkpoint_of_another_configuration_is_refused(digits_splits, tmp_path):
    train, test = digits_splits
    train_to_accuracy(small_config(sample_budget=256), train, test, checkpoint_dir=tmp_path)
    with pytest.raises(WattcapFileError, match=r"another run \(it differs in "
                                               r"config.batch_size\)"):
        train_to_accuracy(small_config(batch_size=32, sample_budget=256), train, test,
                          checkpoint_dir=tmp_path)


def test_a_checkpoint_of_other_data_or_weights_is_refused(digits_splits, tmp_path):
    """The same config on another subset of the data, or from other weights, is another run:
    its checkpoint folder is never resumed from (it would hand back the other run's result)."""
    import numpy as np

    from wattcap.models import build_model
    from wattcap.models.weights import save_weights

    train, test = digits_splits
    config = small_config(sample_budget=256)
    train_to_accuracy(config, train, test, checkpoint_dir=tmp_path)
    half = train.subset(np.arange(len(train) // 2))
    with pytest.raises(WattcapFileError, match=r"differs in train_data\)"):
        train_to_accuracy(config, half, test, checkpoint_dir=tmp_path)
    weights = save_weights(build_model("digits-cnn"), tmp_path / "w.safetensors",
                           {"model": "digits-cnn"})
    with pytest.raises(WattcapFileError, match=r"differs in weights_sha256\)"):
        train_to_accuracy(config, train, test, checkpoint_dir=tmp_path, weights=weights)
    # the same inputs resume
    again = train_to_accuracy(config, train, test, checkpoint_dir=tmp_path)
    assert again.resumed_from_samples == 256


def test_pretrained_weights_are_safetensors_and_help(tmp_path, digits_splits):
    path = tmp_path / "w.safetensors"
    meta = pretrain("digits-cnn", "digits", path, epochs=2)
    assert float(meta["test_accuracy"]) > 0.8
    assert read_metadata(path)["model"] == "digits-cnn"
    with open(path, "rb") as handle:  # safetensors: 8-byte header length, then JSON
        header_len = int.from_bytes(handle.read(8), "little")
        assert handle.read(1) == b"{" and header_len > 0
    train, test = digits_splits
    cold = train_to_accuracy(small_config(), train, test)
    warm = train_to_accuracy(small_config(), train, test, weights=path)
    assert warm.samples_to_target < cold.samples_to_target


def test_weights_for_another_model_are_refused(tmp_path):
    path = tmp_path / "w.safetensors"
    pretrain("digits-cnn", "digits", path, epochs=1)
    from wattcap.models import build_model

    with pytest.raises(WattcapFileError, match="digits-cnn"):
        load_weights(build_model("digits32-cnn"), path, expect_model="digits32-cnn")
    (tmp_path / "evil.safetensors").write_bytes(b"\x80\x04K\x01.")  # a pickle, not safetensors
    with pytest.raises(WattcapFileError, match="not a safetensors"):
        read_metadata(tmp_path / "evil.safetensors")


def test_run_record_round_trip(tmp_path, digits_splits):
    train, test = digits_splits
    record = train_to_accuracy(small_config(sample_budget=512), train, test,
                               device=EmulatedDevice("jetson-nano"), method="wattcap")
    record.save(tmp_path / "run.json")
    loaded = RunRecord.load(tmp_path / "run.json")
    assert loaded == record


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_killed_cli_run_resumes_from_checkpoint(tmp_path):
    """SIGKILL a real `wattcap train` process mid-run; the rerun, a fresh process as a user's
    next command is, resumes and ends like an uninterrupted run. That uninterrupted run is
    only the reference: the same command in this process (the same Typer app, on the one
    thread the CLI trains on wherever it runs) saves a process start of seconds (torch)."""
    from typer.testing import CliRunner

    from wattcap.cli import app
    from wattcap.measure.profiling import Profiler

    profile = Profiler(EmulatedDevice("jetson-nano"), "digits-cnn").run(power_cap_w=None)
    profile.save(tmp_path / "profile.json")
    args = ["train", "--profile", str(tmp_path / "profile.json"),
            "--power-cap", "none", "--model", "digits-cnn", "--data", "digits",
            "--target-accuracy", "0.9", "--sample-budget", "8192", "--eval-every", "128"]
    base = [sys.executable, "-m", "wattcap.cli", *args]
    env = dict(os.environ, WATTCAP_CACHE_DIR=str(tmp_path / "cache"))
    done = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "full.json")],
                              env={"WATTCAP_CACHE_DIR": str(tmp_path / "cache")})
    assert done.exit_code == 0, done.output
    ckpt = tmp_path / "ckpt"
    proc = subprocess.Popen(base + ["--checkpoint-dir", str(ckpt), "--out",
                                    str(tmp_path / "resumed.json")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    # Killed as soon as the first checkpoint (128 of ~3100 samples) is on disk: a fixed delay
    # after it would race the end of the run on a fast machine.
    while not (ckpt / "checkpoint.safetensors").exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "resumed.json").exists(), "the run finished before it was killed"
    rerun = subprocess.run(base + ["--checkpoint-dir", str(ckpt), "--out",
                                   str(tmp_path / "resumed.json")],
                           check=True, env=env, capture_output=True, text=True)
    # said when it starts: the resume line comes before any line of training progress
    lines = rerun.stdout.splitlines()
    said = [i for i, line in enumerate(lines) if "resumed from the checkpoint at" in line]
    assert said, rerun.stdout
    assert all(" 0/8192 samples" in line for line in lines[1:said[0]]), lines
    full = RunRecord.load(tmp_path / "full.json")
    resumed = RunRecord.load(tmp_path / "resumed.json")
    assert resumed.resumed_from_samples is not None and resumed.resumed_from_samples > 0
    assert [p.accuracy for p in resumed.curve] == [p.accuracy for p in full.curve]
    assert resumed.samples_to_target == full.samples_to_target
    assert Path(ckpt / "checkpoint.safetensors").exists()


def test_a_resumed_run_with_dropout_ends_bitwise_equal(digits_splits, tmp_path):
    """Dropout draws from torch's generator: a resumed run must draw on as the uninterrupted
    one did (the RNG states travel in the checkpoint), ending with the same weights, bit for
    bit (CPU)."""
    from safetensors.torch import load_file

    from wattcap.models import user_model_text

    (tmp_path / "dropnet.py").write_text(
        "from torch import nn\n"
        "def make(num_classes=10):\n"
        "    return nn.Sequential(nn.Flatten(), nn.Linear(64, 48), nn.ReLU(), nn.Dropout(0.5),\n"
        "                         nn.Linear(48, num_classes))\n")
    model = user_model_text(f"{tmp_path / 'dropnet.py'}:make", input_shape="1x8x8")
    train, test = digits_splits
    config = small_config(model=model, target_accuracy=1.0, sample_budget=1024)

    full_dir, cut_dir = tmp_path / "full", tmp_path / "cut"
    train_to_accuracy(config, train, test, checkpoint_dir=full_dir)
    with pytest.raises(Killed):
        train_to_accuracy(config, train, test, checkpoint_dir=cut_dir, on_eval=kill_at(512))
    resumed = train_to_accuracy(config, train, test, checkpoint_dir=cut_dir)
    assert resumed.resumed_from_samples == 512 and resumed.samples_seen == 1024
    full = load_file(str(full_dir / "checkpoint.safetensors"))
    cut = load_file(str(cut_dir / "checkpoint.safetensors"))
    weights = [k for k in full if k.startswith("model.")]
    assert weights and all(torch.equal(full[k], cut[k]) for k in weights)


def test_a_checkpoint_of_another_plan_is_refused(digits_splits, tmp_path):
    """The same config under another cap, method or device was planned for other
    conditions: its checkpoint folder is another run's."""
    train, test = digits_splits
    config = small_config(sample_budget=256)
    train_to_accuracy(config, train, test, device=EmulatedDevice("jetson-nano"),
                      power_cap_w=9.0, checkpoint_dir=tmp_path)
    with pytest.raises(WattcapFileError, match=r"differs in power_cap_w\)"):
        train_to_accuracy(config, train, test, device=EmulatedDevice("jetson-nano"),
                          power_cap_w=8.0, checkpoint_dir=tmp_path)
    with pytest.raises(WattcapFileError, match=r"differs in device\)"):
        train_to_accuracy(config, train, test, device=EmulatedDevice("jetson-tx2nx"),
                          power_cap_w=9.0, checkpoint_dir=tmp_path)
    again = train_to_accuracy(config, train, test, device=EmulatedDevice("jetson-nano"),
                              power_cap_w=9.0, checkpoint_dir=tmp_path)
    assert again.resumed_from_samples == 256
