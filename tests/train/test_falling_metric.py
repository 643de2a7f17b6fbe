"""Targets on metrics as they are (issue 28, item 5): a loss, a perplexity or a word error
rate that falls to its target, F1 on 0-100, through wattcap's loop, the proxy estimate, a
Session driven by a user's loop, and the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wattcap.cli import app
from wattcap.core.metric import ACCURACY, metric_named
from wattcap.core.run import RunRecord, TrainConfig
from wattcap.data import get_dataset
from wattcap.devices import EmulatedDevice
from wattcap.models import get_model_spec
from wattcap.runtime.errors import SessionError
from wattcap.runtime.session import Session
from wattcap.runtime.session_config import Goal, PlanSettings
from wattcap.train.efficiency import estimate_efficiency
from wattcap.train.loop import evaluate_dataset, train_to_accuracy
from wattcap.train.run_store import RunStore, SweepInputs

LOSS = metric_named("loss")
FROM_SCRATCH = {"lr_ref": 1e-3, "batch_size_ref": 32}
OLD_RUN = Path(__file__).parents[1] / "core" / "old_schema_files" / "run-v4.json"


@pytest.fixture(scope="module")
def digits_splits():
    return get_dataset("digits").split(0.2, seed=0)


def loss_config(**overrides) -> TrainConfig:
    values = dict(model="digits-cnn", batch_size=16, target_accuracy=0.5,
                  target_metric=LOSS, sample_budget=4096, eval_every_samples=256,
                  **FROM_SCRATCH)
    values.update(overrides)
    return TrainConfig(**values)


def test_the_loop_trains_until_the_test_loss_falls_to_the_target(digits_splits) -> None:
    train, test = digits_splits
    record = train_to_accuracy(loss_config(), train, test, device=EmulatedDevice("jetson-nano"))
    assert record.target_metric == LOSS and record.reached
    losses = [p.accuracy for p in record.curve]
    assert losses[0] > 0.5 >= losses[-1]  # the curve holds losses, falling to the target
    assert record.curve[-2].samples < record.samples_to_target <= record.curve[-1].samples
    # the same run to accuracy 0.5 would have stopped elsewhere: the direction is used
    to_accuracy = train_to_accuracy(loss_config(target_metric=ACCURACY), train, test)
    assert to_accuracy.samples_to_target != record.samples_to_target


def test_the_evaluated_loss_and_perplexity_are_the_test_splits(digits_splits) -> None:
    import torch

    train, test = digits_splits
    spec = get_model_spec("digits-cnn")
    torch.manual_seed(0)
    model = spec.build(num_classes=train.num_classes).eval()  # as evaluation runs it
    x, y = test.batch(list(range(len(test))))
    with torch.no_grad():
        expected = float(spec.loss(model(torch.from_numpy(x)), torch.from_numpy(y)))
    # batched evaluation weights each batch by its samples: the whole split's mean loss
    loss = evaluate_dataset(model, spec, test, batch_size=50, metric="loss")
    assert loss == pytest.approx(expected, rel=1e-5)
    perplexity = evaluate_dataset(model, spec, test, batch_size=50, metric="perplexity")
    assert perplexity == pytest.approx(math.exp(expected), rel=1e-5)
    with pytest.raises(ValueError, match="evaluates accuracy, loss, perplexity"):
        evaluate_dataset(model, spec, test, metric="wer")


def test_our_loop_refuses_a_metric_it_cannot_evaluate() -> None:
    with pytest.raises(ValueError, match="your own loop with a Session"):
        loss_config(target_metric=metric_named("wer"), target_accuracy=0.2).check()
    with pytest.raises(ValueError, match="your own loop"):
        loss_config(target_metric=metric_named("accuracy:100"), target_accuracy=80).check()
    with pytest.raises(ValueError, match="outside loss's range"):
        loss_config(target_accuracy=-1.0).check()
    loss_config(target_accuracy=2.5).check()  # a loss above 1 is a loss


def test_runs_to_accuracy_keep_their_recorded_identity(tmp_path: Path) -> None:
    """Runs recorded before metrics existed are found again: an accuracy config's key has no
    metric in it; a loss config is another run."""
    accuracy = loss_config(target_metric=ACCURACY, target_accuracy=0.9)
    assert "target_metric" not in accuracy.identity_fields()
    assert accuracy.identity_fields() == {
        k: v for k, v in accuracy.model_dump(mode="json").items() if k != "target_metric"}
    store = RunStore(tmp_path, SweepInputs("digits-cnn", None, "digits"))
    loss = loss_config(target_accuracy=0.9)
    assert store.path(loss) != store.path(accuracy)


def test_a_proxy_estimate_to_a_loss_target_reads_samples_where_the_loss_falls(
        digits_splits) -> None:
    vector = estimate_efficiency("digits-cnn", "digits", 0.6, batch_sizes=(8, 32), seeds=1,
                                 sample_budget=4096, target_metric=LOSS,
                                 data=digits_splits, **FROM_SCRATCH)
    assert vector.target_metric == LOSS and vector.target_accuracy == 0.6
    for b in (8, 32):
        assert vector.entry(b).reachable
    from wattcap.experiments.tables import efficiency_table

    assert "proxy target loss <= 0.6, given" in str(efficiency_table(vector).title)
    # the same runs read against accuracy 0.6 (reached early, growing) give other samples
    accuracy = estimate_efficiency("digits-cnn", "digits", 0.6, batch_sizes=(8, 32), seeds=1,
                                   sample_budget=4096, data=digits_splits, **FROM_SCRATCH)
    assert vector.samples(8) != accuracy.samples(8)


def test_a_session_takes_a_word_error_rate_that_falls_to_its_target() -> None:
    session = Session(None, planning=PlanSettings(batch_size=8),
                      goal=Goal(target_accuracy=0.2, target_metric="wer", sample_budget=10_000))
    with session:
        for wer in (0.6, 0.4, 0.3):
            session.samples += 256
            session.report(wer)
        assert not session.reached and "wer 0.3 (target wer <= 0.2)" in session.status().detail
        for wer in (0.18, 0.15):
            session.samples += 256
            session.report(wer)
        assert session.reached and session.done
        assert 256 * 3 < session.samples_to_target <= 256 * 4
        with pytest.raises(SessionError, match=r"wer must be in \[0, inf\]"):
            session.report(-0.1)
    record = session.record
    assert record is not None and record.reached and record.target_metric.direction == "lower"


def test_a_session_takes_f1_on_0_to_100_and_refuses_a_fraction_target() -> None:
    session = Session(None, planning=PlanSettings(batch_size=8),
                      goal=Goal(target_accuracy=85, target_metric="f1:100"))
    with session:
        for f1 in (40.0, 70.0, 86.0, 90.0):
            session.samples += 256
            session.report(f1)
        assert session.reached
    with pytest.raises(SessionError, match="outside f1's range"):
        Session(None, planning=PlanSettings(batch_size=8),
                goal=Goal(target_accuracy=185, target_metric="f1:100"))
    with pytest.raises(SessionError, match=r"0.85 on f1's 0-100 scale .*say 85, or the metric "
                       "f1:1"):
        # in range, but a fraction on a percentage's scale: a unit mistake
        Session(None, planning=PlanSettings(batch_size=8),
                goal=Goal(target_accuracy=0.85, target_metric="f1:100"))
    Session(None, planning=PlanSettings(batch_size=8),  # a fraction on f1's own scale
            goal=Goal(target_accuracy=0.85, target_metric="f1")).close()
    with pytest.raises(SessionError, match="a percentage"):
        # accuracy is a fraction
        Session(None, planning=PlanSettings(batch_size=8), goal=Goal(target_accuracy=85))
    with pytest.raises(SessionError, match="unknown metric 'bleu2'"):
        Session(None, planning=PlanSettings(batch_size=8),
                goal=Goal(target_accuracy=0.5, target_metric="bleu2"))


def test_a_run_record_of_an_earlier_schema_loads_as_accuracy() -> None:
    raw = json.loads(OLD_RUN.read_text())
    assert raw["schema_version"] == 4 and "target_metric" not in raw
    record = RunRecord.load(OLD_RUN)
    assert record.target_metric == ACCURACY and record.migrated_from == 4
    assert record.target_accuracy == raw["target_accuracy"]


runner = CliRunner()


@pytest.fixture(scope="module")
def nano_profile(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("metric") / "profile.json"
    result = runner.invoke(app, ["profile", "--device", "emulated:jetson-nano", "--model",
                                 "digits-cnn", "--exhaustive", "--batch-sizes", "16,32",
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_train_to_a_loss_target_from_the_command_line(nano_profile: Path,
                                                      tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    result = runner.invoke(app, [
        "train", "--profile", str(nano_profile), "--model", "digits-cnn", "--data", "digits",
        "--power-cap", "none", "--method", "baseline-1", "--metric", "loss",
        "--target-accuracy", "0.6", "--lr-ref", "1e-3", "--batch-size-ref", "32",
        "--sample-budget", "4096", "--out", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "reached loss 0.6 after" in result.output
    assert "time-to-target" in result.output
    record = RunRecord.load(out)
    assert record.reached and record.target_metric == LOSS and record.final_accuracy <= 0.6


@pytest.mark.parametrize(("args", "message"), [
    (["--metric", "wer", "--target-accuracy", "0.2"], "--metric: wattcap's loop evaluates"),
    (["--metric", "loss", "--target-accuracy", "-1"], "outside loss's range"),
    (["--metric", "nope", "--target-accuracy", "0.2"], "unknown metric 'nope'"),
])
def test_train_refuses_a_metric_or_target_it_cannot_use(nano_profile: Path, args: list,
                                                        message: str) -> None:
    result = runner.invoke(app, ["train", "--profile", str(nano_profile), "--model",
                                 "digits-cnn", "--data", "digits", "--power-cap", "none",
                                 "--method", "baseline-1", *args], env={"COLUMNS": "200"})
    assert result.exit_code != 0
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_estimate_refuses_an_automatic_loss_target(tmp_path: Path) -> None:
    result = runner.invoke(app, ["estimate", "--model", "digits-cnn", "--proxy", "digits",
                                 "--metric", "loss", "--out", str(tmp_path / "e.json")],
                           env={"COLUMNS": "200"})
    assert result.exit_code != 0
    assert "'auto' is a share of the best accuracy" in " ".join(result.output.split())
