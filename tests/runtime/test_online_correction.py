"""The online correction on the emulated Nano with real training: a target whose noise scale
differs from the proxy's (label noise on the bundled digits: about 3x in B_simple) is
corrected toward its own, a target equal to its proxy is not moved, and the measurement's
cost is in the run's device time."""

from __future__ import annotations

import re

import pytest

from tests.bench_scripts import load_bench_script
from wattcap.algorithms.noise_correction import RELEVANT_FACTOR
from wattcap.cli.train import NOT_REACHED_EXIT_CODE
from wattcap.devices import EmulatedDevice
from wattcap.devices.workload import workload_for
from wattcap.runtime.session import SessionError
from wattcap.train.loop import TrainConfig, train_to_accuracy

#: the scenarios, their data and helpers are the bench's (bench/online_correction.py), so the
#: numbers on the results page and these assertions come from the same code
bench = load_bench_script("online_correction")
MODEL, CAP_W, BUDGET = bench.MODEL, bench.CAP_W, bench.BUDGET

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def profile():
    return bench.profile()


@pytest.fixture(scope="module")
def data():
    return bench.splits()


_PROXIES: dict = {}


def _proxy(b_noise: float, reference_train, test):
    """The bench's proxy vector, its reference measured once per module (three runs each). The
    callbacks' runs (2,304 samples) take it too, rather than each measuring a reference of
    its own to 4,096 samples: a reference's windows do not depend on its budget (the same
    seeded runs, cut later), so those windows are the same here to 4,096 samples."""
    key = (b_noise, reference_train.name)
    if key not in _PROXIES:
        _PROXIES[key] = bench.proxy_vector(b_noise, reference_train, test)
    return _PROXIES[key]


def _runs(profile, vector, target_train, test, correction: bool = True):
    return bench.runs(profile, vector, target_train, test, correction)


_last_pooled = bench.last_pooled
_replans = bench.replans


def test_a_target_with_a_third_of_the_proxys_noise_scale_is_corrected_to_smaller_batches(
        profile, data) -> None:
    clean, noisy, test = data
    vector = _proxy(30.0, noisy, test)  # the proxy is the noisy task: its B_noise 3x
    first, records = _runs(profile, vector, clean, test)
    assert first.batch_size == 128  # the proxy's r_b picks the largest batch here
    for record in records:
        assert _last_pooled(record) < 1 / RELEVANT_FACTOR, record.events
        for replan in _replans(record):  # every move goes the right way
            assert "b=128 -> 64" in replan or "b=128 -> 32" in replan, replan
    corrected = [r for r in records if _replans(r)]
    assert len(corrected) >= 2, [r.events for r in records]
    for record in corrected:  # within the budget, at most one move per doubling
        samples = [int(re.search(r"at (\d+) samples", e).group(1)) for e in _replans(record)]
        assert all(s <= BUDGET for s in samples)
        assert all(b >= 2 * a for a, b in zip(samples, samples[1:], strict=False))
        assert record.batch_size < 128


def test_a_target_with_three_times_the_proxys_noise_scale_reads_so(profile, data) -> None:
    """The direction is seen in every seed; whether it is beyond the relevant factor within
    the budget is not (the results page gives the count): no move toward smaller batches."""
    clean, noisy, test = data
    vector = _proxy(10.0, clean, test)
    first, records = _runs(profile, vector, noisy, test)
    assert first.batch_size == 64
    for record in records:
        assert _last_pooled(record) > 1.2, record.events
        assert all("-> 32" not in e and "-> 16" not in e for e in _replans(record))
        assert record.batch_size >= 64


def test_a_target_like_its_proxy_is_not_moved_and_the_measurement_costs_time(
        profile, data) -> None:
    clean, _, test = data
    vector = _proxy(10.0, clean, test)
    first, records = _runs(profile, vector, clean, test)
    for record in records:
        assert not _replans(record), record.events
        assert 0.5 < _last_pooled(record) < 2.0
        assert record.batch_size == first.batch_size
    _, (plain,) = bench.runs(profile, vector, clean, test, False, seeds=bench.TARGET_SEEDS[:1])
    assert records[0].curve[-1].samples == plain.curve[-1].samples
    assert records[0].device_time_s > plain.device_time_s  # chunked steps are charged


def test_a_vector_without_a_reference_is_refused_with_how_to_make_one(profile, data) -> None:
    clean, _, test = data
    vector = _proxy(10.0, clean, test).model_copy(update={"noise_reference": []})
    config = TrainConfig(model=MODEL, batch_size=64, target_accuracy=0.999, sample_budget=512,
                         eval_every_samples=256, seed=0)
    with pytest.raises(SessionError, match="--noise-reference"):
        train_to_accuracy(config, clean, test, device=EmulatedDevice("jetson-nano"),
                          profile=profile, efficiency=vector, power_cap_w=CAP_W,
                          online_correction=True)


def test_a_chunked_step_costs_the_chunks_launches_at_the_chunks_size() -> None:
    workload = workload_for(MODEL)
    whole = workload.step_cost(64)
    chunked = workload.chunked_step_cost(64, 4)
    assert chunked.kernels == 4 * whole.kernels
    assert chunked.flops == pytest.approx(whole.flops)
    assert chunked.batch_size == 16  # the kernels run at the chunk's size
    assert chunked.memory_needed_bytes < whole.memory_needed_bytes
    device = EmulatedDevice("jetson-nano")
    hz = max(device.frequencies_hz())
    assert device.model_step(chunked, hz)[0] > device.model_step(whole, hz)[0]
    with pytest.raises(ValueError):
        workload.chunked_step_cost(64, 3)


def test_a_step_measured_beside_a_frameworks_backward_is_charged_both(profile, data) -> None:
    """The Lightning callback's measured step runs the batch's own backward (Lightning's) and
    then the parts' passes: the emulator charges the step both, a plain step and the parts
    without a second update, more than a chunked step (what `session.backward`'s costs)."""
    import torch

    from wattcap.models import get_model_spec
    from wattcap.runtime.session import Session
    from wattcap.runtime.session_config import DeviceHandling, PlanSettings

    clean, _, test = data
    spec = get_model_spec(MODEL)
    net = spec.build(num_classes=clean.num_classes)
    x, y = clean.to_tensors()
    with Session("emulated:jetson-nano", model=MODEL,
                 planning=PlanSettings(profile=profile, efficiency=_proxy(10.0, clean, test),
                                       batch_size=64, online_correction=True),
                 cap=CAP_W, device_handling=DeviceHandling(handle_signals=False)) as session:
        optimizer = torch.optim.Adam(net.parameters())
        session.begin_step(samples=64)
        correction = session._noise.correction
        correction._measuring = True  # as `will_measure` decides for a measured step
        correction.attach(net, optimizer)
        session.measure_beside(net, optimizer,
                               lambda part: spec.loss(net(part[0]), part[1]), (x[:64], y[:64]))
        hz = session.device.run_frequency_hz()
        busy_s = session.end_step(samples=64)
    workload, device = workload_for(MODEL), EmulatedDevice("jetson-nano")
    overhead = device.spec.allocator_overhead_factor
    plain_s = device.model_step(workload.step_cost(64, overhead), hz)[0]
    passes = workload.chunk_passes_cost(64, 4, overhead)
    assert passes.optimizer_bytes == 0  # one update per step, Lightning's
    passes_s = device.model_step(passes, hz)[0]
    assert busy_s == pytest.approx(plain_s + passes_s, rel=1e-6)
    assert busy_s > device.model_step(workload.chunked_step_cost(64, 4, overhead), hz)[0]


def test_train_on_the_command_line_corrects_and_refuses_without_a_reference(
        profile, data, tmp_path) -> None:
    """`wattcap train --online-correction`: the record holds the correction's evidence; a
    vector without the proxy's reference is refused before any training, saying how to make
    one."""
    import json

    from typer.testing import CliRunner

    from wattcap.cli import app

    clean, _, test = data
    vector = _proxy(10.0, clean, test)
    profile.save(tmp_path / "p.json")
    vector.save(tmp_path / "e.json")
    vector.model_copy(update={"noise_reference": []}).save(tmp_path / "bare.json")
    base = ["train", "--profile", str(tmp_path / "p.json"), "--device", "emulated:jetson-nano",
            "--model", MODEL, "--data", "digits", "--power-cap", str(CAP_W),
            "--target-accuracy", "0.999", "--sample-budget", "4096", "--online-correction"]
    refused = CliRunner().invoke(app, [*base, "--efficiency", str(tmp_path / "bare.json")])
    assert refused.exit_code != 0 and "--noise-reference" in refused.output, refused.output
    result = CliRunner().invoke(app, [*base, "--efficiency", str(tmp_path / "e.json"),
                                      "--out", str(tmp_path / "run.json")])
    # 99.9 % is out of reach: the run ends on its budget, its record written, exit code 1
    assert result.exit_code == NOT_REACHED_EXIT_CODE, result.output
    events = json.loads((tmp_path / "run.json").read_text())["events"]
    assert any(e.startswith("online correction: the target's noise scale is measured")
               for e in events)
    assert any("pooled factor" in e for e in events), events


def test_a_loop_without_session_backward_is_told_the_correction_cannot_measure(
        profile, data) -> None:
    """A framework's loop that calls loss.backward() itself: the first step due for a
    measurement finds it was not measured, the correction turns off and says why (no step is
    charged as chunked after it)."""
    import torch

    from wattcap.models import get_model_spec
    from wattcap.runtime.session import Session
    from wattcap.runtime.session_config import DeviceHandling, PlanSettings, Reporting

    clean, _, test = data
    vector = _proxy(10.0, clean, test)
    spec = get_model_spec(MODEL)
    torch.manual_seed(0)
    net = spec.build(num_classes=clean.num_classes)
    x, y = clean.to_tensors()
    with Session("emulated:jetson-nano", model=MODEL,
                 planning=PlanSettings(profile=profile, efficiency=vector,
                                       online_correction=True),
                 cap=CAP_W, reporting=Reporting(dataset=clean.name),
                 device_handling=DeviceHandling(handle_signals=False)) as session:
        optimizer = torch.optim.Adam(net.parameters(), lr=session.learning_rate)
        session.attach(net, optimizer)
        step = 0
        while session.samples < 4096:  # into the first window long enough to be measured
            b = session.batch_size
            idx = torch.arange(step * b, (step + 1) * b) % len(x)
            step += 1
            with session.step():
                optimizer.zero_grad()
                spec.loss(net(x[idx]), y[idx]).backward()
                optimizer.step()
        correction = session._noise.correction
        assert correction is not None and correction.unmeasurable
        assert not correction.measuring and correction.measured_steps == 0
    told = [e for e in session.events if "calls neither session.backward" in e]
    assert len(told) == 1, session.events


def test_every_window_is_judged_even_when_a_step_crosses_its_end(data) -> None:
    """At b = 48 steps end across the windows' ends (2048, 4096, ...): each window still closes
    once and gives its evidence (or why there is none); windows too short for an interval are
    not measured at all (their chunked steps could never count)."""
    from wattcap.runtime.online_correction import CorrectionSettings, OnlineCorrection

    clean, _, test = data
    correction = OnlineCorrection(CorrectionSettings(), _proxy(10.0, clean, test))
    samples, judged, measured_at = 0, [], []
    while samples < 8192:
        if correction.will_measure(samples, 48):
            measured_at.append(samples)
            correction._backward_called = True  # what session.backward does on such a step
            correction._term = (1.0, 150.0 + (samples % 7))
        samples += 48
        judged += correction.after_step(samples, 48)
    ends = [w.samples_end for w in correction.windows.windows]
    assert ends == [2048, 4096, 8192], ends  # each judged once, none lost at its crossing
    assert len(judged) == len(ends)
    # (0, 512] and (512, 1024] hold 10 steps of 48 each: too few for an interval, unmeasured
    assert min(measured_at) >= 1024 - 48
    assert correction.windows.windows[-1].steps <= 32 + 8  # bursts, not every step


def test_a_checkpoint_after_a_correction_saves_and_resumes_the_factor(profile, data,
                                                                      tmp_path) -> None:
    import torch

    from wattcap.models import get_model_spec
    from wattcap.runtime.session import Session
    from wattcap.runtime.session_config import (
        CheckpointSettings,
        DeviceHandling,
        PlanSettings,
        Reporting,
    )

    clean, _, test = data
    vector = _proxy(10.0, clean, test)
    spec = get_model_spec(MODEL)

    def session() -> Session:
        return Session("emulated:jetson-nano", model=MODEL,
                       planning=PlanSettings(profile=profile, efficiency=vector,
                                             online_correction=True, transfer_factor=3.0),
                       cap=CAP_W, reporting=Reporting(dataset=clean.name),
                       checkpoint=CheckpointSettings(directory=tmp_path),
                       device_handling=DeviceHandling(handle_signals=False))

    net = spec.build(num_classes=clean.num_classes)
    with session() as first:
        first.attach(net, torch.optim.Adam(net.parameters()))
        policy = first._noise.correction.policy
        policy.applied_factor, policy.applied_spread = 3.0, 1.4  # as a correction leaves it
        first.save_checkpoint()  # no window closed since (a resumed run's case)
        first.report(0.5)  # and again, as every evaluation does
    net = spec.build(num_classes=clean.num_classes)
    with session() as second:
        second.attach(net, torch.optim.Adam(net.parameters()))
        assert second._noise.correction.policy.applied_factor == pytest.approx(3.0)
        assert second.efficiency.ratio(4) > vector.ratio(4)  # r_b moved toward B' = 3B
        assert any("resumed with r_b moved by factor 3.00" in e for e in second.events)
        # the transfer factor narrowed to the evidence's interval, as in the first run
        assert second.transfer_factor == pytest.approx(1.4)
        assert second._noise.correction.policy.applied_spread == pytest.approx(1.4)


def test_the_lightning_callback_measures_beside_lightnings_backward(profile, data,
                                                                   tmp_path) -> None:
    """Through a real Lightning loop: with noise_scale_loss the correction's windows are
    measured (its evidence is in the record) and training's own gradient is Lightning's;
    without it the record says nothing can be measured."""
    pl = pytest.importorskip("lightning.pytorch")
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from wattcap.integrations.lightning import WattcapCallback
    from wattcap.models import get_model_spec
    from wattcap.runtime.sampling import SessionBatchSampler
    from wattcap.runtime.session_config import Goal, PlanSettings

    clean, _, test = data
    vector = _proxy(10.0, clean, test)  # its windows to 2,304 samples: see _proxy
    spec = get_model_spec(MODEL)

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.net = spec.build(num_classes=clean.num_classes)

        def training_step(self, batch, batch_idx):  # noqa: ANN001, ANN201
            return spec.loss(self.net(batch[0]), batch[1])

        def configure_optimizers(self):  # noqa: ANN201
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    x, y = clean.to_tensors()

    def callback_for(noise_scale_loss, follow: bool = True) -> WattcapCallback:  # noqa: ANN001
        return WattcapCallback(device=EmulatedDevice("jetson-nano"), model=MODEL,
                               planning=PlanSettings(profile=profile, efficiency=vector,
                                                     online_correction=True),
                               cap=CAP_W, goal=Goal(sample_budget=2048 + 64 * 4),
                               noise_scale_loss=noise_scale_loss, follow_batch_size=follow)

    def fit(noise_scale_loss) -> object:  # noqa: ANN001
        callback = callback_for(noise_scale_loss)
        trainer = pl.Trainer(max_steps=(2048 + 64 * 4) // callback.batch_size,
                             accelerator="cpu", logger=False, enable_checkpointing=False,
                             enable_progress_bar=False, enable_model_summary=False,
                             num_sanity_val_steps=0, limit_val_batches=0,
                             default_root_dir=str(tmp_path), callbacks=[callback])
        sampler = SessionBatchSampler(callback.session, len(x))
        trainer.fit(Module(), DataLoader(TensorDataset(x, y), batch_sampler=sampler))
        assert callback.record is not None
        return callback.record

    loss = lambda module, part: spec.loss(module.net(part[0]), part[1])  # noqa: E731
    with pytest.raises(SessionError, match="follow_batch_size=True"):
        callback_for(loss, follow=False)  # the correction's re-plans change the batch size

    measured = fit(loss)
    evidence = [e for e in measured.events if "pooled factor" in e]
    assert evidence and "(1024, 2048]" in evidence[0], measured.events
    unmeasured = fit(None)
    assert any("calls neither session.backward nor session.measure_beside" in e
               for e in unmeasured.events)
    assert not any("pooled factor" in e for e in unmeasured.events)


def _hf_parts(spec, clean):  # noqa: ANN001, ANN202
    """The bench's model as a Trainer expects one (keyword inputs, its mean loss from
    `labels`) and the target's training set as dicts."""
    import torch
    from torch import nn

    class HfNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.net = spec.build(num_classes=clean.num_classes)

        def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict:
            return {"loss": spec.loss(self.net(x), labels)}

    x, y = clean.to_tensors()

    class Data(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return len(x)

        def __getitem__(self, i: int) -> dict:
            return {"x": x[i], "labels": y[i]}

    return HfNet, Data()


def _hf_args(tmp_path, max_steps: int, **kwargs: object):  # noqa: ANN001, ANN202
    import transformers

    return transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=max_steps, report_to=[], use_cpu=True,
        save_strategy="no", logging_strategy="no", disable_tqdm=True, **kwargs)


def test_the_hugging_face_callback_measures_beside_the_trainers_backward(
        profile, data, tmp_path) -> None:
    """Through a real Trainer drawing from the callback's dataloader: the correction's windows
    are measured (its evidence is in the record) after the Trainer's backward, whose gradient
    the optimiser steps with unchanged, and the samples counted are those the Trainer
    trained."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    import torch

    from wattcap.integrations.huggingface import WattcapTrainerCallback
    from wattcap.models import get_model_spec
    from wattcap.runtime.session_config import Goal, PlanSettings

    clean, _, test = data
    vector = _proxy(10.0, clean, test)  # its windows to 2,304 samples: see _proxy
    spec = get_model_spec(MODEL)
    HfNet, train_set = _hf_parts(spec, clean)  # noqa: N806
    budget = 2048 + 64 * 4
    callback = WattcapTrainerCallback(
        device=EmulatedDevice("jetson-nano"), model=MODEL, follow_batch_size=True,
        planning=PlanSettings(profile=profile, efficiency=vector, online_correction=True),
        cap=CAP_W, goal=Goal(sample_budget=budget))
    trained: list[int] = []
    grads: list[list[torch.Tensor]] = []
    unchanged: list[bool] = []
    measured_at: list[int] = []

    class Following(transformers.Trainer):
        def get_train_dataloader(self):  # noqa: ANN202
            return callback.train_dataloader(self)

        def training_step(self, model, inputs, *args):  # noqa: ANN001, ANN002, ANN202
            trained.append(len(inputs["x"]))  # what the Trainer really trains
            return super().training_step(model, inputs, *args)

    class Before(transformers.TrainerCallback):  # the Trainer's gradient, before ours
        def on_pre_optimizer_step(self, *args, model=None, **kwargs) -> None:  # noqa: ANN001, ANN002, ANN003
            grads.append([p.grad.clone() for p in model.parameters()])

    class After(transformers.TrainerCallback):  # what the optimiser steps with, after ours
        def on_pre_optimizer_step(self, *args, model=None, **kwargs) -> None:  # noqa: ANN001, ANN002, ANN003
            correction = callback.session._noise.correction
            if correction.measuring:
                measured_at.append(len(trained))
            unchanged.append(all(torch.equal(p.grad, g)
                                 for p, g in zip(model.parameters(), grads[-1], strict=True)))

    with callback:
        Following(model=HfNet(), args=_hf_args(tmp_path, budget // callback.batch_size),
                  train_dataset=train_set, callbacks=[Before(), callback, After()]).train()
    record = callback.record
    assert record is not None
    evidence = [e for e in record.events if "pooled factor" in e]
    assert evidence and "(1024, 2048]" in evidence[0], record.events
    assert len(measured_at) >= 16 and all(unchanged)
    assert callback.session._noise.correction.measured_steps > 0
    assert record.samples_seen == sum(trained) and record.steps == len(trained)


def test_the_hugging_face_callback_refuses_what_it_cannot_correct(
        profile, data, tmp_path) -> None:
    """The correction without follow_batch_size (its re-plans change the batch size), a
    Trainer that accumulates gradients (no callback sees the step's whole batch) and one whose
    dataloader keeps its own batch size: refused, saying what to do, before any step."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")

    from wattcap.integrations.huggingface import WattcapTrainerCallback
    from wattcap.models import get_model_spec
    from wattcap.runtime.session_config import PlanSettings

    clean, _, test = data
    HfNet, train_set = _hf_parts(get_model_spec(MODEL), clean)  # noqa: N806

    def callback_for(**kwargs: object) -> WattcapTrainerCallback:
        return WattcapTrainerCallback(
            device=EmulatedDevice("jetson-nano"), model=MODEL, cap=CAP_W,
            planning=PlanSettings(profile=profile, efficiency=_proxy(10.0, clean, test),
                                  online_correction=True), **kwargs)

    for kwargs in ({}, {"noise_scale_loss": lambda model, part: model(**part)["loss"]}):
        with pytest.raises(SessionError, match="pass follow_batch_size=True"):
            callback_for(**kwargs)
    callback = callback_for(follow_batch_size=True)

    class Following(transformers.Trainer):
        def get_train_dataloader(self):  # noqa: ANN202
            return callback.train_dataloader(self)

    for trainer_class, args, message in (
            (Following, _hf_args(tmp_path, 2, gradient_accumulation_steps=2),
             "gradient_accumulation_steps=1"),
            (transformers.Trainer, _hf_args(tmp_path, 2, per_device_train_batch_size=64),
             r"callback.train_dataloader\(self\)")):
        with callback, pytest.raises(SessionError, match=message):
            trainer_class(model=HfNet(), args=args, train_dataset=train_set,
                          callbacks=[callback]).train()
        assert callback.session.steps == 0


def test_a_run_that_could_not_correct_is_refused_at_its_start(profile, data) -> None:
    """Before any training: a baseline method (its choice is not wattcap's), and a proxy
    vector without a B_noise to move (no fit, no noise scale)."""
    from wattcap.runtime.session import Session
    from wattcap.runtime.session_config import DeviceHandling, PlanSettings

    clean, _, test = data
    vector = _proxy(10.0, clean, test)
    no_b_noise = vector.model_copy(update={"fit": None, "ratio_source": "mean"})
    for planning, cap, message in (
            (PlanSettings(profile=profile, efficiency=vector, method="baseline-1",
                          online_correction=True), None, "not a baseline"),
            (PlanSettings(profile=profile, efficiency=no_b_noise, online_correction=True),
             CAP_W, "needs a B_noise")):
        with pytest.raises(SessionError, match=message):
            Session("emulated:jetson-nano", model=MODEL, planning=planning, cap=cap,
                    device_handling=DeviceHandling(handle_signals=False))


def test_a_correction_under_a_moving_cap_reaches_its_chooser_and_ends_the_transfer_factor(
        profile, data) -> None:
    """Under a moving cap the run's choices are the follower's: the corrected r_b must be its
    chooser's, the cap in force is planned again with it at once, and the transfer factor (a
    stand-in for not knowing the target) is narrowed to the evidence's own interval."""
    from wattcap.algorithms.noise_correction import PooledEvidence
    from wattcap.devices.caps import ScheduleCap
    from wattcap.runtime.session import Session
    from wattcap.runtime.session_config import CapSettings, DeviceHandling, PlanSettings

    clean, _, test = data
    vector = _proxy(10.0, clean, test)
    session = Session("emulated:jetson-nano", model=MODEL,
                      planning=PlanSettings(profile=profile, efficiency=vector,
                                            online_correction=True, transfer_factor=3.0),
                      cap=CapSettings(power_cap=ScheduleCap([(0.0, CAP_W), (60.0, 4.0)]),
                                      batch_size_hold_s=0.0),
                      device_handling=DeviceHandling(handle_signals=False))
    with session:
        follower = session._follower
        assert follower is not None and follower.chooser is not None
        assert follower.chooser.efficiency is vector and follower.chooser.transfer_factor == 3
        correction = session._noise.correction
        planned_b = follower.target.batch_size
        correction.pending = PooledEvidence(windows=2, samples_end=1024, factor=0.1,
                                            factor_low=0.2 / 3, factor_high=0.15)
        session._noise._correct_if_due()
        moved = follower.chooser.efficiency
        assert moved is session.efficiency and moved is not vector
        assert moved.ratio(8) < vector.ratio(8)  # toward smaller batches (B' = 0.1 B)
        # the cap in force is planned again at once, not at its next move (at 60 s)
        assert follower.pending is not None and follower.pending.batch_size < planned_b
        assert any("online correction: re-planned" in e for e in follower.events)
        # the factor is narrowed to the evidence's interval (0.1 within [0.067, 0.15]: 1.5x)
        assert follower.chooser.transfer_factor == pytest.approx(1.5)
        assert session.transfer_factor == pytest.approx(1.5)
        assert any("transfer factor 3 narrowed to 1.50" in e for e in session.events)
