"""The Lightning callback and the Hugging Face TrainerCallback: a tiny model for a few steps on
the emulated Nano, through the frameworks' real training loops."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from wattcap.devices import EmulatedDevice
from wattcap.runtime.session import SessionError
from wattcap.runtime.session_config import Goal, PlanSettings

MHZ = 1_000_000


def tiny_data(n: int = 64) -> TensorDataset:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, 16, generator=generator)
    y = (x[:, 0] > 0).long()
    return TensorDataset(x, y)


def nano_and_frequency() -> tuple[EmulatedDevice, int]:
    device = EmulatedDevice("jetson-nano")
    return device, device.frequencies_hz()[4]


def tiny_lightning_module(pl, on_step=None, lr: float = 1e-3,  # noqa: ANN001, ANN201
                          validates: bool = False):
    """A linear classifier as a LightningModule (`pl`: lightning.pytorch), calling `on_step`
    at every training step and, when it `validates`, logging `val_acc` on validation batches
    (without, Lightning warns of a validation step with no validation data)."""

    class TinyModule(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Linear(16, 2)
            self.example_input_array = torch.randn(4, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def training_step(self, batch, batch_idx):  # noqa: ANN001, ANN201
            if on_step is not None:
                on_step()
            x, y = batch
            return nn.functional.cross_entropy(self(x), y)

        def configure_optimizers(self):  # noqa: ANN201
            return torch.optim.Adam(self.parameters(), lr=lr)

    class ValidatingModule(TinyModule):
        def validation_step(self, batch, batch_idx) -> None:  # noqa: ANN001
            x, y = batch
            self.log("val_acc", (self(x).argmax(1) == y).float().mean())

    return ValidatingModule() if validates else TinyModule()


class FrequencyProbe:
    """Records the device clock at every training step, from inside the framework's loop."""

    def __init__(self, device: EmulatedDevice) -> None:
        self.device = device
        self.seen: list[int] = []

    def __call__(self) -> None:
        self.seen.append(self.device.current_frequency_hz())


# -- PyTorch Lightning ---------------------------------------------------------------------------


def test_lightning_callback_runs_the_plan_and_restores(tmp_path) -> None:  # noqa: ANN001
    pl = pytest.importorskip("lightning.pytorch")
    from wattcap.integrations.lightning import WattcapCallback

    device, f_hz = nano_and_frequency()
    initial_hz = device.current_frequency_hz()
    probe = FrequencyProbe(device)

    callback = WattcapCallback(device=device, accuracy_metric="val_acc", set_learning_rate=True,
                               planning=PlanSettings(batch_size=8, frequency_hz=f_hz),
                               goal=Goal(target_accuracy=0.99))
    assert callback.batch_size == 8
    lrs: list[float] = []

    class LrProbe(pl.Callback):
        def on_train_batch_start(self, trainer, *args) -> None:  # noqa: ANN001, ANN002
            lrs.append(trainer.optimizers[0].param_groups[0]["lr"])

    trainer = pl.Trainer(max_steps=6, accelerator="cpu", logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, val_check_interval=3,
                         num_sanity_val_steps=0, default_root_dir=str(tmp_path),
                         callbacks=[callback, LrProbe()])
    data = tiny_data()
    trainer.fit(tiny_lightning_module(pl, on_step=probe, lr=1.0, validates=True),
                DataLoader(data, batch_size=8), DataLoader(data, batch_size=32))

    assert probe.seen == [f_hz] * 6  # the plan's frequency, every step
    assert device.current_frequency_hz() == initial_hz  # restored at the end of fit
    assert lrs and all(lr == pytest.approx(callback.learning_rate) for lr in lrs)
    record = callback.record
    assert record is not None
    assert record.steps == 6 and record.samples_seen == 48
    assert record.device_time_s > 0 and record.energy_j > 0
    assert len(record.curve) == 2  # a validation every 3 steps reported the logged accuracy
    assert all(0.0 <= p.accuracy <= 1.0 for p in record.curve)


def test_lightning_refuses_a_batch_size_that_is_not_the_plans(tmp_path) -> None:  # noqa: ANN001
    pl = pytest.importorskip("lightning.pytorch")
    from wattcap.integrations.lightning import WattcapCallback

    device, f_hz = nano_and_frequency()
    initial_hz = device.current_frequency_hz()

    callback = WattcapCallback(device=device,
                               planning=PlanSettings(batch_size=8, frequency_hz=f_hz))
    trainer = pl.Trainer(max_steps=2, accelerator="cpu", logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=str(tmp_path),
                         callbacks=[callback])
    with pytest.raises(SessionError, match="plan chose batch size 8"):
        trainer.fit(tiny_lightning_module(pl), DataLoader(tiny_data(), batch_size=16))
    assert device.current_frequency_hz() == initial_hz


# -- Hugging Face Trainer ------------------------------------------------------------------------


class HfTinyModel(nn.Module):
    """What the Trainer expects of a model: keyword inputs, a loss when labels are given."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict:
        logits = self.net(x)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = nn.functional.cross_entropy(logits, labels)
        return out


class DictData(torch.utils.data.Dataset):
    def __init__(self, data: TensorDataset) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> dict:
        x, y = self.data[i]
        return {"x": x, "labels": y}


def test_hf_callback_runs_the_plan_and_restores(tmp_path) -> None:  # noqa: ANN001
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from wattcap.integrations.huggingface import WattcapTrainerCallback

    device, f_hz = nano_and_frequency()
    initial_hz = device.current_frequency_hz()
    probe = FrequencyProbe(device)

    class ProbeCallback(transformers.TrainerCallback):
        def on_step_end(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
            probe()
            optimizer = kwargs.get("optimizer")
            learning_rates.append(optimizer.param_groups[0]["lr"] if optimizer else None)

    learning_rates: list[float | None] = []
    trained_batches: list[int] = []

    def accuracy(prediction) -> dict:  # noqa: ANN001
        logits, labels = prediction
        return {"accuracy": float((logits.argmax(-1) == labels).mean())}

    def make_callback(**kwargs: object) -> WattcapTrainerCallback:
        return WattcapTrainerCallback(device=device, example_input=torch.randn(4, 16),
                                      accuracy_metric="eval_accuracy", set_learning_rate=True,
                                      planning=PlanSettings(batch_size=8, frequency_hz=f_hz),
                                      goal=Goal(target_accuracy=0.999), **kwargs)

    # a Trainer built with another batch size: set_batch_size cannot change it where the
    # Trainer fixes it when built (it is refused, saying how), and what it trains is checked
    refused = make_callback(set_batch_size=True)
    wrong = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=4, per_device_train_batch_size=4, report_to=[],
        use_cpu=True, save_strategy="no", logging_strategy="no", disable_tqdm=True)
    with refused:
        trainer = transformers.Trainer(model=HfTinyModel(), args=wrong,
                                       train_dataset=DictData(tiny_data()),
                                       callbacks=[refused])
        if trainer._train_batch_size != 8:  # a release that fixed the batch size when built
            with pytest.raises(SessionError, match="per_device_train_batch_size=callback"):
                trainer.train()
    assert device.current_frequency_hz() == initial_hz

    callback = make_callback()
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=4, per_device_train_batch_size=callback.batch_size,
        per_device_eval_batch_size=32, eval_strategy="steps", eval_steps=2,
        save_strategy="no", report_to=[], use_cpu=True, logging_strategy="no",
        disable_tqdm=True, dataloader_num_workers=0)
    data = DictData(tiny_data())
    with callback:
        model = HfTinyModel()
        model.net.register_forward_hook(
            lambda module, inputs, output: trained_batches.append(int(inputs[0].shape[0]))
            if module.training else None)
        trainer = transformers.Trainer(model=model, args=args, train_dataset=data,
                                       eval_dataset=data, compute_metrics=accuracy,
                                       callbacks=[callback, ProbeCallback()])
        trainer.train()
    # the batches really trained are the plan's (not only the args), at its learning rate
    # (the session's workload probe runs the example input first: the steps are the last 4)
    assert trained_batches[-4:] == [8] * 4 and 8 not in trained_batches[:-4]
    assert learning_rates[0] is not None
    assert learning_rates[0] <= callback.learning_rate * (1 + 1e-6)
    assert learning_rates[0] > 0.5 * callback.learning_rate  # not the Trainer's 5e-5 default
    assert args.learning_rate == pytest.approx(callback.learning_rate)
    assert probe.seen == [f_hz] * 4
    assert device.current_frequency_hz() == initial_hz
    record = callback.record
    assert record is not None
    assert record.steps == 4 and record.samples_seen == 32
    assert record.device_time_s > 0 and record.energy_j > 0
    assert len(record.curve) == 2


def test_hf_callback_restores_when_training_raises(tmp_path) -> None:  # noqa: ANN001
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from wattcap.integrations.huggingface import WattcapTrainerCallback

    device, f_hz = nano_and_frequency()
    initial_hz = device.current_frequency_hz()

    class Exploding(HfTinyModel):
        calls = 0

        def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict:
            Exploding.calls += 1
            if Exploding.calls == 2:
                raise RuntimeError("boom")
            return super().forward(x, labels)

    callback = WattcapTrainerCallback(device=device, example_input=torch.randn(4, 16),
                                      planning=PlanSettings(batch_size=8, frequency_hz=f_hz))
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=4, per_device_train_batch_size=8,
        save_strategy="no", report_to=[], use_cpu=True, logging_strategy="no",
        disable_tqdm=True)
    with pytest.raises(RuntimeError, match="boom"), callback:
        transformers.Trainer(model=Exploding(), args=args, train_dataset=DictData(tiny_data()),
                             callbacks=[callback]).train()
    assert device.current_frequency_hz() == initial_hz


# -- a moving cap through the frameworks ---------------------------------------------------------


def tiny_profile():  # noqa: ANN201
    from wattcap.devices.workload import measure_workload
    from wattcap.measure.profiling import Profiler

    workload = measure_workload(nn.Linear(16, 2), torch.randn(4, 16), None,
                                lambda out, _t: out.sum(), "tiny-linear")
    return Profiler(EmulatedDevice("jetson-nano"), "tiny-linear", workload=workload,
                    batch_sizes=(8,)).run(exhaustive=True)


def test_lightning_pauses_and_resumes_under_a_moving_cap(tmp_path) -> None:  # noqa: ANN001
    pl = pytest.importorskip("lightning.pytorch")
    from wattcap.devices.caps import ScheduleCap
    from wattcap.integrations.lightning import WattcapCallback

    device = EmulatedDevice("jetson-nano")
    initial_hz = device.current_frequency_hz()
    profile = tiny_profile()

    # 1 W is below every configuration (and the idle power): training pauses from the tick at
    # 0.05 s until the one at 0.20 s reads 5 W again
    callback = WattcapCallback(device=device, model_name="tiny-linear",
                               planning=PlanSettings(profile=profile),
                               cap=ScheduleCap([(0, 5.0), (0.03, 1.0), (0.18, 5.0)]))
    assert callback.session.cap_policy == "frequency"  # the dataloader keeps its batch size
    trainer = pl.Trainer(max_steps=12, accelerator="cpu", logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0,
                         default_root_dir=str(tmp_path), callbacks=[callback])
    trainer.fit(tiny_lightning_module(pl),
                DataLoader(tiny_data(), batch_size=callback.batch_size))
    record = callback.record
    assert record is not None and record.steps == 12
    assert [s.paused for s in record.segments] == [False, True, False]
    assert {s.batch_size for s in record.segments} == {8}
    pause = record.segments[1]
    assert pause.start_s == pytest.approx(0.05) and pause.end_s == pytest.approx(0.20)
    assert pause.steps <= 1  # at most the step in flight when the cap fell
    assert record.paused_s > 0.1
    assert any("no setting can meet it" in e for e in record.events)  # 1 W < idle power
    assert device.current_frequency_hz() == initial_hz


def test_hf_callback_keeps_the_trainers_batch_size_under_a_moving_cap() -> None:
    pytest.importorskip("transformers")
    from wattcap.integrations.huggingface import WattcapTrainerCallback

    callback = WattcapTrainerCallback(device=EmulatedDevice("jetson-nano"),
                                      model_name="tiny-linear", example_input=torch.randn(4, 16),
                                      planning=PlanSettings(profile=tiny_profile()),
                                      cap="solar:seed=2,day_s=60")
    assert callback.session.cap_policy == "frequency"
    assert callback.session.cap_source is not None


@pytest.mark.slow(seconds=3)  # the digits and a profile: make test runs it, test-fast not
def test_hf_callback_follows_a_replanned_batch_size_with_the_batch_it_trained(
        tmp_path) -> None:  # noqa: ANN001
    """follow_batch_size through a real Trainer drawing from `callback.train_dataloader`: a cap
    drop re-plans b=32 -> 16 (test_moving_cap's schedule); the batches trained change to 16,
    the samples counted are those trained (the Trainer fetches batches ahead: the new size
    lands late), and each optimiser step runs at the √-scaled rate of the batch it trained."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from wattcap.algorithms.efficiency import vector_from_samples
    from wattcap.core.run import scaled_learning_rate
    from wattcap.data import get_dataset
    from wattcap.devices.caps import ScheduleCap
    from wattcap.integrations.huggingface import WattcapTrainerCallback
    from wattcap.measure.profiling import Profiler
    from wattcap.models import get_model_spec
    from wattcap.runtime.session_config import CapSettings

    model_name = "digits32-cnn"
    profile = Profiler(EmulatedDevice("jetson-nano"), model_name,
                       batch_sizes=(8, 16, 32)).run(exhaustive=True)
    efficiency = vector_from_samples(  # small batches need fewer samples: a drop moves to 16
        {8: [600], 16: [700], 32: [1000]}, sample_budget=4096, model=model_name,
        input_shape=[1, 32, 32], dataset="proxy", task="image-classification",
        target_accuracy=0.7, seeds=[0])
    callback = WattcapTrainerCallback(
        device=EmulatedDevice("jetson-nano"), model=model_name,
        planning=PlanSettings(profile=profile, efficiency=efficiency),
        cap=CapSettings(power_cap=ScheduleCap([(0.0, 4.5), (0.52, 3.2)]), batch_size_hold_s=0),
        goal=Goal(sample_budget=4096), follow_batch_size=True, set_learning_rate=True)
    assert callback.session.cap_policy == "replan" and callback.batch_size == 32
    x, y = get_dataset("digits-32").split(0.2, seed=0)[0].to_tensors()
    trained: list[tuple[int, float]] = []  # each step's batch and the rate it stepped with

    class Net(HfTinyModel):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.net = get_model_spec(model_name).build(num_classes=10)

    class Following(transformers.Trainer):
        def get_train_dataloader(self):  # noqa: ANN202
            return callback.train_dataloader(self)

        def training_step(self, model, inputs, *args):  # noqa: ANN001, ANN002, ANN202
            trained.append((len(inputs["x"]), 0.0))
            return super().training_step(model, inputs, *args)

    class Rate(transformers.TrainerCallback):  # after ours: the rate the optimiser uses
        def on_pre_optimizer_step(self, *args, optimizer=None, **kwargs) -> None:  # noqa: ANN001, ANN002, ANN003
            trained[-1] = (trained[-1][0], optimizer.param_groups[0]["lr"])

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=30, report_to=[], use_cpu=True, save_strategy="no",
        logging_strategy="no", disable_tqdm=True, lr_scheduler_type="constant")
    with callback:
        Following(model=Net(), args=args, train_dataset=DictData(TensorDataset(x, y)),
                  callbacks=[callback, Rate()]).train()
    record = callback.record
    assert record is not None and record.steps == 30
    sizes = [b for b, _ in trained]
    changed = sizes.index(16)
    assert set(sizes[:changed]) == {32} and set(sizes[changed:]) == {16}
    assert record.samples_seen == sum(sizes)  # not the plan's size at the steps it lagged
    assert [s.batch_size for s in record.segments] == [32, 16]
    session = callback.session
    for b, rate in trained:
        assert rate == pytest.approx(scaled_learning_rate(session.lr_ref,
                                                          session.batch_size_ref, b))
