"""wattcap's own training loop: train to a target accuracy with a chosen (b, f) on any device.

It is a client of `wattcap.Session` like any user's loop: the Session applies the frequency,
accounts device time, power and energy, keeps the cap and watches for drift, checkpoints and
restores; this module only decides what a step and an evaluation are. Evaluation happens at the
same sample counts for every batch size (every `eval_every_samples`, which every batch size
divides), so no batch size is favoured by the resolution of the curve. Under a moving cap the
batch size may change between steps; the cadence holds by one rule: a step never crosses an
evaluation point — when fewer samples than the batch size remain before the next evaluation,
the step trains on just those (a smaller batch, costed as such, at the current learning rate).
Batches are drawn from a seeded stream of epoch permutations, so a run is a pure function of its
seed, and a checkpointed run resumes into exactly the same sequence.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Generator
from pathlib import Path

import numpy as np
import torch

from wattcap.core.defaults import DEFAULT_BATCH_SIZE_HOLD_S, DEFAULT_MARGIN_SIGMAS
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.objective import Objective
from wattcap.core.profile import ProfileTable
from wattcap.core.run import (
    LOOP_METRICS,
    CurvePoint,
    RunRecord,
    TrainConfig,
    scaled_learning_rate,
)
from wattcap.data import Dataset, check_data_fits_model
from wattcap.data.loader import StreamBatches, iterate_batches, move_to_device
from wattcap.data.specs import check_batch_fits_split
from wattcap.devices.base import Device
from wattcap.devices.caps import CapSource
from wattcap.models import ModelSpec, get_model_spec, model_fingerprint, model_source_sha256
from wattcap.models.weights import load_weights
from wattcap.runtime.cap_follower import CapPolicy
from wattcap.runtime.checkpoint import Checkpoint
from wattcap.runtime.errors import SessionError
from wattcap.runtime.gns_replan import GnsSettings
from wattcap.runtime.meter import PowerMeter
from wattcap.runtime.sampling import BatchStream
from wattcap.runtime.session import Session, SessionStatus
from wattcap.runtime.session_config import (
    CapSettings,
    CheckpointSettings,
    Goal,
    PlanSettings,
    Reporting,
)

__all__ = [
    "BatchStream", "Checkpoint", "CurvePoint", "PowerMeter", "RunRecord", "TrainConfig",
    "evaluate", "evaluate_dataset", "pretrain", "scaled_learning_rate", "train_to_accuracy",
]


@torch.no_grad()
def evaluate(model: torch.nn.Module, spec: ModelSpec, x: torch.Tensor, y: torch.Tensor,
             batch_size: int = 512, torch_device: str | None = None) -> float:
    """Accuracy of `model` on (x, y), evaluated on `torch_device` (default: the model's)."""
    if torch_device is None:
        torch_device = str(next(model.parameters()).device)
    was_training = model.training
    model.eval()
    correct = counted = 0
    for i in range(0, len(x), batch_size):
        inputs = move_to_device(x[i:i + batch_size], torch_device)
        targets = move_to_device(y[i:i + batch_size], torch_device)
        c, n = spec.correct(model(inputs), targets)
        correct += c
        counted += n
    model.train(was_training)
    return correct / max(counted, 1)


@torch.no_grad()
def evaluate_dataset(model: torch.nn.Module, spec: ModelSpec, data: Dataset,
                     batch_size: int = 512, torch_device: str | None = None,
                     max_samples: int | None = None, metric: str = "accuracy") -> float:
    """`metric` (accuracy, loss: the mean cross-entropy per prediction, or perplexity: its
    exponential) of `model` on a data set's first `max_samples` (default all) samples, read
    batch by batch (a uint8 set is never held as float32): accuracy is the value `evaluate`
    gives on the same samples as tensors."""
    if metric not in LOOP_METRICS:
        raise ValueError(f"wattcap's loop evaluates {', '.join(LOOP_METRICS)}, not {metric!r}")
    if torch_device is None:
        torch_device = str(next(model.parameters()).device)
    n = len(data) if max_samples is None else min(max_samples, len(data))
    was_training = model.training
    model.eval()
    total = 0.0
    counted = 0
    for start in range(0, n, batch_size):
        x, y = data.batch(np.arange(start, min(n, start + batch_size)))
        inputs = move_to_device(torch.from_numpy(x), torch_device)
        targets = move_to_device(torch.from_numpy(y), torch_device)
        outputs = model(inputs)
        if metric == "accuracy":
            correct, k = spec.correct(outputs, targets)
            c = float(correct)
        else:  # the batch's mean loss per prediction, weighted by its predictions
            k = targets.numel()
            c = float(spec.loss(outputs, targets)) * k
        total += c
        counted += k
    model.train(was_training)
    mean = total / max(counted, 1)
    return math.exp(mean) if metric == "perplexity" else mean


def _make_optimizer(config: TrainConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    cls = torch.optim.AdamW if config.optimizer == "adamw" else torch.optim.Adam
    return cls(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)


def _draw_batch(data: Dataset, stream: BatchStream, position: int, count: int,
                torch_device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The `count` samples at stream `position`, as tensors on `torch_device`."""
    x, y = data.batch(stream.indices(position, count))
    return (move_to_device(torch.from_numpy(np.ascontiguousarray(x)), torch_device),
            move_to_device(torch.from_numpy(np.ascontiguousarray(y)), torch_device))


def _optimizer_step(model: torch.nn.Module, spec: ModelSpec, optimizer: torch.optim.Optimizer,
                    inputs: torch.Tensor, targets: torch.Tensor,
                    session: Session | None = None) -> None:
    optimizer.zero_grad(set_to_none=True)
    if session is None:
        spec.loss(model(inputs), targets).backward()
    else:  # the Session measures the gradient noise scale through it (gns, the correction)
        session.backward(lambda x, y: spec.loss(model(x), y), inputs, targets)
    optimizer.step()


EvalCallback = Callable[[CurvePoint], None]


def run_identity(config: TrainConfig, train: Dataset, test: Dataset,
                 weights: str | Path | None, **plan: object) -> dict:
    """What a training checkpoint belongs to: the config, the weights by content and the data
    by content (a reused checkpoint folder with other --data, --weights or --subset-fraction
    is refused, never resumed), and `plan` — the device, method, cap and objective the run
    was planned for (a checkpoint of a run under another cap is another run's)."""
    from wattcap.data.base import data_fingerprint
    from wattcap.models import model_identity
    from wattcap.train.run_store import SweepInputs

    # one identity for checkpoints and recorded runs (SweepInputs): the model by its file's
    # name, architecture and source (a copied project resumes, a changed model is refused),
    # the weights and the data's files by content; then this run's config and the samples of
    # its two splits (another subset is another run)
    inputs = SweepInputs(config.model, None if weights is None else Path(weights), train.name)
    portable = model_identity(config.model)["model"]
    return inputs.identity(config={**config.identity_fields(), "model": portable},
                           train_data=data_fingerprint(train), test_data=data_fingerprint(test),
                           **plan)


def _described(value: object) -> object:
    """A cap source or objective as stable text for an identity (never an object's repr)."""
    describe = getattr(value, "describe", None)
    return describe() if callable(describe) else value


def train_to_accuracy(
    config: TrainConfig,
    train: Dataset,
    test: Dataset,
    device: Device | None = None,
    weights: str | Path | None = None,
    power_cap_w: float | None = None,
    checkpoint_dir: str | Path | None = None,
    method: str | None = None,
    on_eval: EvalCallback | None = None,
    watchdog: bool = True,
    profile: ProfileTable | None = None,
    drift_tolerance: float = 0.1,
    progress: Callable[[SessionStatus], None] | None = None,
    margin_sigmas: float = DEFAULT_MARGIN_SIGMAS,
    batch_size_hold_s: float = DEFAULT_BATCH_SIZE_HOLD_S,
    power_cap: CapSource | str | float | None = None,
    objective: Objective | str | None = None,
    cap_policy: CapPolicy | None = None,
    reference_profiles: list[ProfileTable] | None = None,
    num_workers: int = 0,
    efficiency: EfficiencyVector | GnsSettings | str | None = None,
    risk: float | None = None,
    knob_value: int | None = None,
    transfer_factor: float | None = None,
    online_correction: bool = False,
) -> RunRecord:
    """Train until test accuracy ≥ target (checked every `eval_every_samples`) or the budget;
    with `config.target_metric` loss or perplexity, until the test loss (perplexity) ≤ target.

    `train` and `test` are any wattcap data sets (``batch(indices)``): batches go through a
    torch DataLoader with `num_workers` worker processes, in the order of the seeded stream,
    so the result does not depend on the number of workers.

    The run goes through a `Session` on `device` at the frequency the device runs at now (set
    it before; the Session restores the device afterwards): device time per step, power
    sampled every sensor period, the cap watchdog acting on the same ticks, energy from the
    device's hardware energy counter where it has one, else the integral of the readings. The
    model and every batch live on the device's torch device. With a checkpoint folder, the run
    saves its state at every evaluation and resumes from it when restarted.

    With the device's `profile` (the one the plan came from), a `DriftMonitor` compares the
    measured step time and power with the profile point at the applied (b, f); a difference
    beyond `drift_tolerance` (0.1 = 10 %, time or power) is recorded, and at the next
    evaluation the batch size's row is re-measured and the frequency re-planned (same batch
    size). Raises WattcapFileError when the profile belongs to another device, model or
    architecture, and DataMismatchError when the data does not fit the model (task, shape).

    With a `profile` of a power limit or power mode (`wattcap.core.knob`), the Session applies
    `knob_value` (mW, mode id; default the plan's) at the start and restores what it found;
    the clock is left to the board, and the drift monitor is off (it re-plans clocks).

    `efficiency="gns"` (or a `GnsSettings`, with the `profile`) measures r_b on this run's
    data: the run starts at `config.batch_size` (the measuring batch: large is best), and
    after the gradient noise scale is measured (`wattcap.runtime.gns_replan`) it re-plans with
    Algorithm 1 and goes on at the chosen batch size and frequency, learning rate √-scaled,
    optimiser state kept; every profile batch size must divide `eval_every_samples`.
    `online_correction` (with the `profile` and an `efficiency` vector holding the proxy's
    noise-scale reference) measures the target's noise scale all run long and re-plans when it
    parts from the proxy's (`wattcap.runtime.online_correction`); the same divisibility holds.

    `power_cap`, instead of `power_cap_w`, is a cap that may move (a `CapSource` or a spec such
    as "solar:seed=3"; see `Session`): with the `profile` (and the proxy `efficiency`, the
    `objective`), the selection re-runs on every change under `cap_policy` (default: "replan",
    batch size and frequency; "safe-frequency" for the baselines). The loop follows the
    batch size from the next step on, re-scales the learning rate by the √ rule and keeps the
    optimiser's state; evaluation stays at the same sample counts (see the module docstring).
    A pause idles the device; a cap that can never rise again ends the run, not reached,
    without an evaluation off the cadence. Under a moving cap batches are drawn in this
    process one at a time (their size is known only when they are due): `num_workers` then
    has no effect.
    """
    config.check()
    spec = get_model_spec(config.model)
    check_data_fits_model(train, spec)
    check_batch_fits_split(train, config.batch_size)
    if profile is not None:
        profile.check_matches(model=config.model, source="profile",
                              architecture_fingerprint=model_fingerprint(config.model))
    if isinstance(efficiency, EfficiencyVector):  # estimated for this model, as it is now
        efficiency.check_matches(model=config.model, source="efficiency vector",
                                 architecture_fingerprint=model_fingerprint(config.model),
                                 model_source_sha256=model_source_sha256(config.model))
    replanning = "efficiency='gns'" if GnsSettings.of(efficiency) is not None else \
        "online_correction" if online_correction else None
    if replanning is not None:
        if profile is None:
            raise ValueError(f"{replanning} re-plans with Algorithm 1: give the profile")
        odd = [b for b in profile.batch_sizes if config.eval_every_samples % b]
        if odd:
            raise ValueError(f"with {replanning} every profile batch size must divide "
                             f"eval_every_samples ({config.eval_every_samples}): not {odd}")
    if cap_policy is None:
        cap_policy = "safe-frequency" if method in ("baseline-1", "baseline-2") else "replan"
    if power_cap_w is not None and power_cap is not None:
        raise SessionError("give power_cap_w (a constant cap) or power_cap (a cap source), "
                           "not both")
    session = Session(
        device, model=spec,
        planning=PlanSettings(
            profile=profile, efficiency=efficiency, objective=objective,
            reference_profiles=reference_profiles, method=method or "wattcap",
            batch_size=config.batch_size,
            frequency_hz=device.requested_frequency_hz() if device is not None and (
                profile is None or profile.knob_kind == "gpu_clock") else None,
            knob_value=knob_value, lr_ref=config.lr_ref, batch_size_ref=config.batch_size_ref,
            margin_sigmas=margin_sigmas, risk=risk, transfer_factor=transfer_factor,
            online_correction=online_correction),
        cap=CapSettings(
            power_cap=power_cap_w if power_cap is None else power_cap, policy=cap_policy,
            watchdog=watchdog, drift_tolerance=drift_tolerance if profile is not None else 0.0,
            batch_size_hold_s=batch_size_hold_s),
        goal=Goal(target_accuracy=config.target_accuracy, target_metric=config.target_metric,
                  sample_budget=config.sample_budget),
        checkpoint=CheckpointSettings(
            directory=checkpoint_dir,
            identity=run_identity(config, train, test, weights,
                                  device=None if device is None else device.name,
                                  method=method, power_cap_w=power_cap_w,
                                  power_cap=_described(power_cap),
                                  objective=_described(objective))),
        reporting=Reporting(progress=progress, dataset=train.name, config=config,
                            weights_source=str(weights) if weights is not None else None),
    )
    session.method = method  # type: ignore[assignment]  # None: not chosen by a method
    torch.manual_seed(config.seed)
    model = spec.build(num_classes=train.num_classes)
    if weights is not None:
        loaded = load_weights(model, weights, expect_model=config.model,
                              new_head_classes=train.num_classes)
        if "new_head" in loaded:
            session.events.append(
                f"new {train.num_classes}-class head (the weights' head has "
                f"{loaded.get('num_classes', 'another number of')} classes): "
                f"{loaded['new_head']} initialised fresh")
    with session:
        torch_device = session.torch_device
        model = model.to(torch_device).train()
        optimizer = _make_optimizer(config, model)
        session.attach(model, optimizer)
        stream = BatchStream(len(train), config.seed)
        every = config.eval_every_samples

        def batches_of(b: int) -> Generator[tuple[torch.Tensor, torch.Tensor], None, None]:
            # Enough batches for the rest of the budget, rounded up to whole evaluation rounds.
            left = -(-(config.sample_budget - session.samples) // b)
            return iterate_batches(
                train, StreamBatches(stream, session.samples, b, max(0, left) + every // b),
                num_workers=num_workers, torch_device=torch_device)

        # One batch size until a re-plan: the loader prepares the batches ahead (workers).
        # Under a moving cap the size of the next batch is known only when it is due.
        b = session.batch_size
        batches = batches_of(b) if session.cap_source is None else None
        past_target = session.reports_past_target  # a resumed run counts on
        try:
            while not session.done or (session.reached
                                       and past_target < config.evals_past_target
                                       and session.samples < config.sample_budget):
                # evaluations past the crossing, counted while the smoothed curve stays crossed
                past_target = past_target + 1 if session.reached else 0
                if batches is not None and session.batch_size != b:  # a GNS re-plan
                    batches.close()
                    b = session.batch_size
                    batches = batches_of(b)
                next_eval = (session.samples // every + 1) * every
                while session.samples < next_eval and not session.cap_stopped:
                    count = min(session.batch_size, next_eval - session.samples)
                    if batches is not None:
                        inputs, targets = next(batches)
                    else:
                        inputs, targets = _draw_batch(train, stream, session.samples, count,
                                                      torch_device)
                    session.apply_learning_rate(optimizer)
                    with session.step(samples=count):
                        _optimizer_step(model, spec, optimizer, inputs, targets, session)
                if session.cap_stopped:
                    break  # no evaluation off the cadence
                point = session.report(evaluate_dataset(
                    model, spec, test, torch_device=torch_device,
                    max_samples=config.max_eval_samples, metric=config.target_metric.name))
                if on_eval is not None:
                    on_eval(point)
        finally:
            if batches is not None:
                batches.close()  # stops the loader's workers
    assert session.record is not None
    return session.record


def pretrain(
    model: str,
    dataset: str,
    out: str | Path,
    epochs: int = 2,
    batch_size: int = 32,
    lr: float = 1e-3,
    seed: int = 0,
    data_options: dict | None = None,
    num_workers: int = 0,
    progress: Callable[[SessionStatus], None] | None = None,
) -> dict[str, str]:
    """Train a model from scratch on a data set for `epochs` and save safetensors weights;
    returns the metadata written (model, input shape, dataset, test accuracy). `dataset` is a
    data spec (a bundled name, ``cifar100:PATH``...; `data_options` go to
    :func:`wattcap.data.load_splits`). It runs through a device-less Session (on CUDA when
    torch has it), like every training loop, and draws batches through a DataLoader with
    `num_workers` workers, so a large uint8 data set is never held as float32. `progress`
    gets the Session's status (samples of the budget) as it trains."""
    from wattcap.data import load_splits
    from wattcap.models.weights import save_weights

    spec = get_model_spec(model)
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    train, test = load_splits(dataset, seed=seed, **(data_options or {}))
    check_data_fits_model(train, spec)
    steps = (epochs * len(train)) // batch_size
    session = Session(None, model=spec,
                      planning=PlanSettings(batch_size=batch_size, lr_ref=lr,
                                            batch_size_ref=batch_size, method="pretrain"),
                      goal=Goal(sample_budget=steps * batch_size),
                      reporting=Reporting(progress=progress, dataset=dataset))
    torch.manual_seed(seed)
    net = spec.build(num_classes=train.num_classes)
    with session:
        torch_device = session.torch_device
        net = net.to(torch_device).train()
        optimizer = torch.optim.Adam(net.parameters(), lr=session.learning_rate)
        stream = BatchStream(len(train), seed)
        batches = iterate_batches(train, StreamBatches(stream, 0, batch_size, steps),
                                  num_workers=num_workers, torch_device=torch_device)
        try:
            while not session.done:
                inputs, targets = next(batches)
                with session.step():
                    _optimizer_step(net, spec, optimizer, inputs, targets)
        finally:
            batches.close()
        accuracy = evaluate_dataset(net, spec, test, torch_device=torch_device)
        session.report(accuracy)
    metadata = {
        "model": model, "input_shape": json.dumps(list(spec.input_shape)),
        "dataset": dataset, "num_classes": str(train.num_classes), "epochs": str(epochs),
        "test_accuracy": f"{accuracy:.4f}", "seed": str(seed),
    }
    save_weights(net.to("cpu"), out, metadata)
    return metadata
