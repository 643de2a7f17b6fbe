"""The Hugging Face callback following the session's batch size (follow_batch_size=True) through
a real Trainer on the emulated Nano: each step charged at the batch it trained, dataloader
workers, and the online correction measuring with the Trainer's own loss."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.integrations.test_integrations import DictData, HfTinyModel, tiny_data, tiny_profile
from wattcap.devices import EmulatedDevice
from wattcap.runtime.session_config import Goal, PlanSettings

MODEL = "digits32-cnn"


class ChargingNano(EmulatedDevice):
    """The emulated Nano noting, for every step it runs, the batch size of the cost it was
    charged, the seconds it took and its clock before and after (the hardware boundary: what
    the session tells the device a step runs)."""

    def __init__(self) -> None:
        super().__init__("jetson-nano")
        self.charged: list[tuple[int, float, int, int]] = []

    def end_step(self, timer):  # noqa: ANN001, ANN201
        before_hz = self.run_frequency_hz()
        busy_s = super().end_step(timer)
        self.charged.append((timer.cost.batch_size, busy_s, before_hz, self.run_frequency_hz()))
        return busy_s


@pytest.fixture(scope="module")
def digits_profile():  # noqa: ANN201
    from wattcap.measure.profiling import Profiler

    return Profiler(EmulatedDevice("jetson-nano"), MODEL,
                    batch_sizes=(8, 16, 32)).run(exhaustive=True)


def _train_through_a_cap_drop(profile, tmp_path, workers: int,  # noqa: ANN001, ANN202
                              as_datasets: bool = False):
    """30 steps of a Trainer drawing from `callback.train_dataloader` with `workers` dataloader
    workers while a cap drop re-plans b=32 -> 16 (test_moving_cap's schedule), from a torch
    dataset or (`as_datasets`) a `datasets.Dataset` of the same samples with a text column
    the model does not take. Returns the callback, its device and, per step, (the batch
    trained, the session's batch size when the step began, the learning rate it stepped
    with)."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from torch.utils.data import TensorDataset

    from wattcap.algorithms.efficiency import vector_from_samples
    from wattcap.data import get_dataset
    from wattcap.devices.caps import ScheduleCap
    from wattcap.integrations.huggingface import WattcapTrainerCallback
    from wattcap.models import get_model_spec
    from wattcap.runtime.session_config import CapSettings

    efficiency = vector_from_samples(  # small batches need fewer samples: a drop moves to 16
        {8: [600], 16: [700], 32: [1000]}, sample_budget=4096, model=MODEL,
        input_shape=[1, 32, 32], dataset="proxy", task="image-classification",
        target_accuracy=0.7, seeds=[0])
    device = ChargingNano()
    callback = WattcapTrainerCallback(
        device=device, model=MODEL, planning=PlanSettings(profile=profile, efficiency=efficiency),
        cap=CapSettings(power_cap=ScheduleCap([(0.0, 4.5), (0.52, 3.2)]), batch_size_hold_s=0),
        goal=Goal(sample_budget=4096), follow_batch_size=True, set_learning_rate=True)
    assert callback.session.cap_policy == "replan" and callback.batch_size == 32
    x, y = get_dataset("digits-32").split(0.2, seed=0)[0].to_tensors()
    steps: list[list] = []  # [trained, planned when the step began, rate]

    class Net(HfTinyModel):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.net = get_model_spec(MODEL).build(num_classes=10)

    class Following(transformers.Trainer):
        def get_train_dataloader(self):  # noqa: ANN202
            return callback.train_dataloader(self)

        def training_step(self, model, inputs, *args):  # noqa: ANN001, ANN002, ANN202
            steps[-1][0] = len(inputs["x"])
            return super().training_step(model, inputs, *args)

    class Probe(transformers.TrainerCallback):  # after ours: the rate the optimiser uses
        def on_step_begin(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
            steps.append([0, callback.session.batch_size, 0.0])

        def on_pre_optimizer_step(self, *args, optimizer=None, **kwargs) -> None:  # noqa: ANN001, ANN002, ANN003
            steps[-1][2] = optimizer.param_groups[0]["lr"]

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=30, report_to=[], use_cpu=True, save_strategy="no",
        logging_strategy="no", disable_tqdm=True, lr_scheduler_type="constant",
        dataloader_num_workers=workers, dataloader_pin_memory=False)
    train_dataset = DictData(TensorDataset(x, y))
    if as_datasets:
        datasets = pytest.importorskip("datasets")
        train_dataset = datasets.Dataset.from_dict(
            {"x": x.numpy(), "labels": y.numpy(), "note": [f"digit {int(v)}" for v in y]}
        ).with_format("torch", columns=["x", "labels"], output_all_columns=True)
    with callback:
        Following(model=Net(), args=args, train_dataset=train_dataset,
                  callbacks=[callback, Probe()]).train()
    return callback, device, [tuple(step) for step in steps]


@pytest.mark.slow(seconds=4)
def test_hf_callback_charges_each_step_at_the_batch_it_trained(digits_profile,
                                                               tmp_path) -> None:  # noqa: ANN001
    """After a re-plan the Trainer still trains a batch it fetched at the old size: the
    emulated device must charge that step at the size trained (32), not the session's new
    batch size (16), so the step's device seconds are those of the batch trained."""
    from wattcap.devices.workload import workload_for

    callback, device, steps = _train_through_a_cap_drop(digits_profile, tmp_path, workers=0)
    record = callback.record
    assert record is not None and record.steps == len(steps) == len(device.charged) == 30
    trained = [b for b, _, _ in steps]
    lagged = [i for i, (b, planned, _) in enumerate(steps) if b != planned]
    assert lagged and all(steps[i][:2] == (32, 16) for i in lagged)  # the old size lands late
    assert [b for b, _, _, _ in device.charged] == trained
    workload = workload_for(MODEL)
    overhead = device.spec.allocator_overhead_factor
    timed = 0
    for b, (_, busy_s, before_hz, after_hz) in zip(trained, device.charged, strict=True):
        if before_hz != after_hz:
            continue  # the clock moved mid-step (a tick): no one clock to model it at
        own_s = device.model_step(workload.step_cost(b, overhead), before_hz)[0]
        other_s = device.model_step(workload.step_cost(48 - b, overhead), before_hz)[0]
        assert busy_s == pytest.approx(own_s, rel=1e-6)
        assert abs(busy_s - other_s) > 0.1 * own_s  # the sizes' costs tell them apart
        timed += 1
    assert timed >= 20 and all(device.charged[i][2] == device.charged[i][3] for i in lagged)
    assert record.device_time_s >= sum(busy_s for _, busy_s, _, _ in device.charged)


@pytest.mark.slow(seconds=6)
def test_hf_callback_follows_the_session_with_dataloader_workers(digits_profile,
                                                                 tmp_path) -> None:  # noqa: ANN001
    """dataloader_num_workers=1: the batch sampler runs in the main process and reads the
    session's batch size as it draws, the workers prefetching batches ahead; the re-planned
    size reaches training later than without workers, then stays, and every step is counted,
    charged and stepped at the size it trained."""
    from wattcap.core.run import scaled_learning_rate

    callback, device, steps = _train_through_a_cap_drop(digits_profile, tmp_path, workers=1)
    record = callback.record
    assert record is not None and record.steps == len(steps) == 30
    trained = [b for b, _, _ in steps]
    changed = trained.index(16)
    assert set(trained[:changed]) == {32} and set(trained[changed:]) == {16}
    replanned = [planned for _, planned, _ in steps].index(16)
    assert changed - replanned >= 2  # the workers' prefetched batches of 32 trained first
    assert record.samples_seen == sum(trained)
    assert [s.batch_size for s in record.segments] == [32, 16]
    assert [b for b, _, _, _ in device.charged] == trained
    session = callback.session
    for b, _, rate in steps:
        assert rate == pytest.approx(scaled_learning_rate(session.lr_ref,
                                                          session.batch_size_ref, b))


@pytest.mark.slow(seconds=8)
def test_hf_callback_follows_the_session_on_a_datasets_dataset(digits_profile,
                                                               tmp_path) -> None:  # noqa: ANN001
    """A Hugging Face `datasets.Dataset` with a column the model does not take (text, which
    no collator stacks): the Trainer's own removal of unused columns drops it, and the run
    draws, trains, charges and steps exactly as from a torch dataset of the same samples."""
    pytest.importorskip("datasets")
    callback, device, steps = _train_through_a_cap_drop(digits_profile, tmp_path / "hf",
                                                        workers=0, as_datasets=True)
    _, torch_device, torch_steps = _train_through_a_cap_drop(digits_profile, tmp_path / "torch",
                                                             workers=0)
    record = callback.record
    assert record is not None and record.steps == len(steps) == 30
    trained = [b for b, _, _ in steps]
    assert trained[0] == 32 and trained[-1] == 16  # the re-plan reached training
    assert steps == torch_steps
    assert [b for b, _, _, _ in device.charged] == trained
    assert [c[:2] for c in device.charged] == [c[:2] for c in torch_device.charged]
    assert record.samples_seen == sum(trained)


# -- the online correction measures with the Trainer's loss --------------------------------------


def _correcting_callback(**kwargs: object):  # noqa: ANN202
    """A callback correcting a linear model's plan at b=8 (its profile's one batch size) from a
    proxy vector with a B_noise and a stated reference (no run trains it: only the
    measurement of the first steps is looked at, no window closes)."""
    from wattcap.algorithms.efficiency import vector_from_samples
    from wattcap.core.noise_scale import NoiseScaleTrajectory, NoiseScaleWindow
    from wattcap.integrations.huggingface import WattcapTrainerCallback

    vector = vector_from_samples(
        {b: [600 * (1 + b / 20) * f for f in (0.95, 1.0, 1.05)] for b in (8, 16)}, 100_000,
        model="tiny-linear", input_shape=[16], dataset="proxy", task="image-classification",
        target_accuracy=0.9, seeds=[0, 1, 2])
    reference = NoiseScaleTrajectory(
        batch_size=8, chunk_size=2, preconditioner="adam", confidence=0.9,
        windows=[NoiseScaleWindow(samples_start=0, samples_end=512, steps=32, b_simple=20.0,
                                  b_low=10.0, b_high=40.0)])
    return WattcapTrainerCallback(
        device=EmulatedDevice("jetson-nano"), model_name="tiny-linear",
        example_input=torch.randn(4, 16), follow_batch_size=True, cap=5.0,
        planning=PlanSettings(profile=tiny_profile(), online_correction=True,
                              efficiency=vector.model_copy(
                                  update={"noise_reference": [reference]})), **kwargs)


def test_hf_correction_measures_with_the_trainers_compute_loss(tmp_path) -> None:  # noqa: ANN001
    """A Trainer whose compute_loss is its own (labels popped before the forward, label
    smoothing): the measurement's parts go through it, as training's batches do, with the
    labels its training inputs had; a noise_scale_loss given by the user takes precedence."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")

    def train(callback) -> list[int]:  # noqa: ANN001
        seen: list[int] = []  # the samples of each batch the override's loss is computed on

        class Smoothing(transformers.Trainer):
            def get_train_dataloader(self):  # noqa: ANN202
                return callback.train_dataloader(self)

            # The Trainer passes return_outputs and num_items_in_batch; this loss needs neither.
            def compute_loss(self, model, inputs, *_args, **_kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
                seen.append(len(inputs["x"]))
                labels = inputs.pop("labels")  # the forward gets no labels
                logits = model(**inputs)["logits"]
                return nn.functional.cross_entropy(logits, labels, label_smoothing=0.1)

        args = transformers.TrainingArguments(
            output_dir=str(tmp_path), max_steps=4, report_to=[], use_cpu=True,
            save_strategy="no", logging_strategy="no", disable_tqdm=True)
        with callback:
            Smoothing(model=HfTinyModel(), args=args, train_dataset=DictData(tiny_data()),
                      callbacks=[callback]).train()
        return seen

    callback = _correcting_callback()
    assert callback.batch_size == 8
    seen = train(callback)
    correction = callback.session._noise.correction
    # steps 0-3 open the first window's first block: the first is Adam's warm-up, the others
    # are measured in 4 parts of 2, each part's loss the override's
    assert correction.measured_steps == 3 and correction.skipped_steps == 0
    assert seen.count(8) == 4 and seen.count(2) == 4 * correction.measured_steps
    assert seen[:2] == [8, 8] and len(seen) == 16  # training's own batch first each step

    parts: list[int] = []

    def own_loss(model, part):  # noqa: ANN001, ANN202
        parts.append(len(part["x"]))  # the forward's inputs (the override took the labels)
        return model(**part)["logits"].logsumexp(-1).mean()

    explicit = _correcting_callback(noise_scale_loss=own_loss)
    seen = train(explicit)
    measured = explicit.session._noise.correction.measured_steps
    assert measured == 3 and parts == [2] * 4 * measured and seen == [8] * 4
