"""Train to a target accuracy with a chosen (b, f) on any device.

The math runs for real on the CPU (or the device's GPU); the device provides time and power.
Evaluation happens at the same sample counts for every batch size (every `eval_every_samples`,
which every batch size divides), so no batch size is favoured by the resolution of the curve.
Batches are drawn from a seeded stream of epoch permutations, so a run is a pure function of
its seed, and a checkpointed run resumes into exactly the same sequence.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from wattcap.data import ArrayDataset, check_data_fits_model
from wattcap.devices.base import Device, PowerReading
from wattcap.models import ModelSpec, get_model_spec, model_fingerprint
from wattcap.profiling import ProfileTable
from wattcap.runtime import (
    CapViolation,
    CapWatchdog,
    DriftEvent,
    DriftMonitor,
    FrequencyStep,
    Replan,
)
from wattcap.schema import VersionedFile, WattcapFileError
from wattcap.weights import load_weights
from wattcap.workload import workload_for


def scaled_learning_rate(lr_ref: float, batch_size_ref: int, batch_size: int) -> float:
    """Square-root scaling for Adam/AdamW: lr = lr_ref · sqrt(b / b_ref)."""
    return lr_ref * math.sqrt(batch_size / batch_size_ref)


class TrainConfig(BaseModel):
    """Everything that determines a training run's math."""

    model_config = ConfigDict(extra="forbid")
    model: str
    batch_size: int
    target_accuracy: float
    sample_budget: int = 20_000
    eval_every_samples: int = 256
    lr_ref: float = 1e-3
    batch_size_ref: int = 32
    optimizer: Literal["adam", "adamw"] = "adam"
    weight_decay: float = 0.0
    seed: int = 0
    max_eval_samples: int | None = None

    @property
    def learning_rate(self) -> float:
        """The learning rate at this batch size."""
        return scaled_learning_rate(self.lr_ref, self.batch_size_ref, self.batch_size)

    def check(self) -> None:
        """Refuse settings that would break same-sample-count evaluation."""
        if self.eval_every_samples % self.batch_size:
            raise ValueError(
                f"eval_every_samples ({self.eval_every_samples}) must be a multiple of the batch "
                f"size ({self.batch_size}) so every batch size is evaluated at the same samples"
            )
        if not 0 < self.target_accuracy <= 1:
            raise ValueError(f"target accuracy must be in (0, 1], got {self.target_accuracy}")


class CurvePoint(BaseModel):
    """Test accuracy after a number of training samples."""

    model_config = ConfigDict(extra="forbid")
    samples: int
    accuracy: float
    device_time_s: float


class RunRecord(VersionedFile):
    """The outcome of one training run."""

    FILE_KIND = "wattcap.run"
    SCHEMA_VERSION = 2  # 2: architecture_fingerprint

    config: TrainConfig
    dataset: str
    method: str | None = None
    device: str | None = None
    device_kind: str | None = None
    frequency_hz: int | None = None
    power_cap_w: float | None = None
    reached: bool
    samples_to_target: int | None
    samples_seen: int
    final_accuracy: float
    curve: list[CurvePoint]
    device_time_s: float
    energy_j: float
    peak_power_w: float | None
    avg_power_w: float | None
    cap_violations: list[CapViolation] = []
    frequency_steps: list[FrequencyStep] = []
    drift_events: list[DriftEvent] = []
    replans: list[Replan] = []
    #: "counter" (hardware energy counter difference), "sensor" (readings × sensor period)
    energy_source: str | None = None
    events: list[str] = []
    resumed_from_samples: int | None = None
    wall_time_s: float
    weights_source: str | None = None
    #: the model's architecture (wattcap.models.architecture_fingerprint); None: not recorded
    architecture_fingerprint: str | None = None

    @property
    def time_to_accuracy_s(self) -> float | None:
        """Device seconds to reach the target, or None if it was not reached."""
        if not self.reached:
            return None
        return next(p.device_time_s for p in self.curve if p.samples == self.samples_to_target)


class BatchStream:
    """Batches of b samples from seeded epoch permutations, crossing epoch boundaries so that
    every batch size sees exactly the same sample order."""

    def __init__(self, n: int, seed: int) -> None:
        self.n = n
        self.seed = seed

    def indices(self, start: int, count: int) -> np.ndarray:
        """Sample indices at stream positions [start, start + count)."""
        out = np.empty(count, dtype=np.int64)
        filled = 0
        while filled < count:
            epoch, offset = divmod(start + filled, self.n)
            perm = np.random.default_rng((self.seed, epoch)).permutation(self.n)
            take = min(count - filled, self.n - offset)
            out[filled:filled + take] = perm[offset:offset + take]
            filled += take
        return out


@torch.no_grad()
def evaluate(model: torch.nn.Module, spec: ModelSpec, x: torch.Tensor, y: torch.Tensor,
             batch_size: int = 512) -> float:
    """Accuracy of `model` on (x, y)."""
    was_training = model.training
    model.eval()
    correct = counted = 0
    for i in range(0, len(x), batch_size):
        c, n = spec.correct(model(x[i:i + batch_size]), y[i:i + batch_size])
        correct += c
        counted += n
    model.train(was_training)
    return correct / max(counted, 1)


def _make_optimizer(config: TrainConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    cls = torch.optim.AdamW if config.optimizer == "adamw" else torch.optim.Adam
    return cls(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)


class PowerMeter:
    """Running peak, mean and energy of sensor readings (a sensor-tick callback)."""

    def __init__(self, period_s: float, peak_w: float | None = None, total_w: float = 0.0,
                 readings: int = 0) -> None:
        self.period_s = period_s
        self.peak_w = peak_w
        self.total_w = total_w
        self.readings = readings

    def __call__(self, reading: PowerReading) -> None:
        self.total_w += reading.power_w
        self.readings += 1
        if self.peak_w is None or reading.power_w > self.peak_w:
            self.peak_w = reading.power_w

    @property
    def energy_j(self) -> float:
        """Each reading stands for one sensor period."""
        return self.total_w * self.period_s

    @property
    def average_w(self) -> float | None:
        return self.total_w / self.readings if self.readings else None

    def state(self) -> dict:
        return {"peak_w": self.peak_w, "total_w": self.total_w, "readings": self.readings}


@dataclass
class Checkpoint:
    """Run state in one safetensors file: weights and optimizer tensors, and the rest as JSON in
    its metadata, replaced atomically so a kill at any moment leaves a complete checkpoint."""

    folder: Path

    @property
    def path(self) -> Path:
        return self.folder / "checkpoint.safetensors"

    def exists(self) -> bool:
        return self.path.exists()

    def save(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
             state: dict) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tensors = {f"model.{k}": v.detach().clone().contiguous()
                   for k, v in model.state_dict().items()}
        opt_state = optimizer.state_dict()
        for index, param_state in opt_state["state"].items():
            for key, value in param_state.items():
                tensor = value if torch.is_tensor(value) else torch.tensor(value)
                tensors[f"optim.{index}.{key}"] = tensor.detach().clone().contiguous()
        state = dict(state, param_groups=opt_state["param_groups"])
        tmp = self.path.with_suffix(".safetensors.tmp")
        save_file(tensors, str(tmp), metadata={"state": json.dumps(state)})
        tmp.replace(self.path)

    def load(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
        try:
            with safe_open(str(self.path), framework="pt") as handle:
                state = json.loads((handle.metadata() or {})["state"])
            tensors = load_file(str(self.path))
        except (OSError, ValueError, KeyError, SafetensorError) as err:
            raise WattcapFileError(f"{self.path}: unreadable checkpoint ({err})") from None
        model.load_state_dict(
            {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
        )
        opt_state: dict = {"state": {}, "param_groups": state.pop("param_groups")}
        for key, value in tensors.items():
            if key.startswith("optim."):
                _, index, name = key.split(".", 2)
                opt_state["state"].setdefault(int(index), {})[name] = value
        optimizer.load_state_dict(opt_state)
        return state


EvalCallback = Callable[[CurvePoint], None]


def train_to_accuracy(
    config: TrainConfig,
    train: ArrayDataset,
    test: ArrayDataset,
    device: Device | None = None,
    weights: str | Path | None = None,
    power_cap_w: float | None = None,
    checkpoint_dir: str | Path | None = None,
    method: str | None = None,
    on_eval: EvalCallback | None = None,
    watchdog: bool = True,
    profile: ProfileTable | None = None,
    drift_tolerance: float = 0.1,
) -> RunRecord:
    """Train until test accuracy ≥ target (checked every `eval_every_samples`) or the budget.

    With a device, each step runs through `device.execute` (device time, power sampled every
    sensor period, the cap watchdog acting on the same ticks). The run's energy is the
    difference of the device's hardware energy counter where it has one, else the integral of
    the sensor readings. With a checkpoint folder, the run saves its state at every evaluation
    and resumes from it when restarted.

    With the device's `profile` (the one the plan came from), a `DriftMonitor` compares the
    measured step time and power with the profile point at the applied (b, f); a difference
    beyond `drift_tolerance` (0.1 = 10 %, time or power) is recorded, and at the next
    evaluation the batch size's row is re-measured and the frequency re-planned (same batch
    size). Raises WattcapFileError when the profile belongs to another device, model or
    architecture, and DataMismatchError when the data does not fit the model (task, shape).
    """
    config.check()
    wall_start = time.monotonic()
    spec = get_model_spec(config.model)
    check_data_fits_model(train, spec)
    torch.manual_seed(config.seed)
    model = spec.build(num_classes=train.num_classes)
    weights_source = None
    if weights is not None:
        load_weights(model, weights, expect_model=config.model)
        weights_source = str(weights)
    model.train()
    optimizer = _make_optimizer(config, model)
    x_train, y_train = train.to_tensors()
    x_test, y_test = test.to_tensors()
    if config.max_eval_samples is not None:
        x_test, y_test = x_test[:config.max_eval_samples], y_test[:config.max_eval_samples]
    stream = BatchStream(len(train), config.seed)

    samples = 0
    curve: list[CurvePoint] = []
    device_time_s = 0.0
    meter = PowerMeter(device.sensor_period_s if device is not None else 0.0)
    events: list[str] = []
    resumed_from = None
    checkpoint = Checkpoint(Path(checkpoint_dir)) if checkpoint_dir else None
    if checkpoint is not None and checkpoint.exists():
        state = checkpoint.load(model, optimizer)
        if state["config"] != config.model_dump():
            raise WattcapFileError(
                f"{checkpoint.folder}: the checkpoint belongs to another run configuration; "
                "use another --checkpoint-dir or delete it"
            )
        samples = resumed_from = state["samples"]
        curve = [CurvePoint(**p) for p in state["curve"]]
        device_time_s = state["device_time_s"]
        meter = PowerMeter(meter.period_s, **state["meter"])
        events = state["events"] + [f"resumed from checkpoint at {samples} samples"]

    cost = None
    if device is not None:
        cost = workload_for(config.model).step_cost(
            config.batch_size,
            getattr(getattr(device, "spec", None), "allocator_overhead_factor", 1.0),
        )
    guard = CapWatchdog(device, power_cap_w) if device is not None and watchdog else None
    monitor = None
    if device is not None and profile is not None:
        profile.check_matches(model=config.model, source="profile",
                              architecture_fingerprint=model_fingerprint(config.model))
        monitor = DriftMonitor(device, profile, config.batch_size, power_cap_w=power_cap_w,
                               tolerance=drift_tolerance, watchdog=guard)
    if resumed_from is not None:
        # What the runtime did before the restart stays in the record; a re-plan's lower
        # frequency is put back (only ever lowered: the caller's frequency may be the plan's).
        if guard is not None:
            guard.violations += [CapViolation(**v) for v in state.get("cap_violations", [])]
            guard.steps += [FrequencyStep(**s) for s in state.get("frequency_steps", [])]
        old_events = [DriftEvent(**e) for e in state.get("drift_events", [])]
        old_replans = [Replan(**r) for r in state.get("replans", [])]
        if monitor is not None:
            monitor.events += old_events
            monitor.replans += old_replans
            monitor.adopt(old_replans)
        saved_hz = state.get("frequency_hz")
        if (device is not None and saved_hz is not None
                and saved_hz < device.current_frequency_hz()
                and saved_hz in device.frequencies_hz()):
            device.set_frequency_hz(saved_hz)
    # The hardware counter, where there is one, measures every joule (evaluation included);
    # the readings only sample it. Energy before a resume comes from the checkpoint.
    counter_start_j = device.energy_counter_j() if device is not None else None
    energy_before_j = 0.0
    if resumed_from is not None:
        energy_before_j = state.get("counter_energy_j") or meter.energy_j

    def counter_energy_j() -> float | None:
        if counter_start_j is None or device is None:
            return None
        now_j = device.energy_counter_j()
        return None if now_j is None else energy_before_j + now_j - counter_start_j

    def step(idx: np.ndarray) -> None:
        optimizer.zero_grad(set_to_none=True)
        loss = spec.loss(model(x_train[idx]), y_train[idx])
        loss.backward()
        optimizer.step()

    def run_steps() -> None:
        nonlocal samples, device_time_s
        while samples < config.sample_budget:
            if curve and curve[-1].accuracy >= config.target_accuracy:
                return
            for _ in range(config.eval_every_samples // config.batch_size):
                idx = torch.from_numpy(stream.indices(samples, config.batch_size))
                if device is None:
                    step(idx)
                else:
                    start_s = device.now_s()
                    busy_s = device.execute(lambda idx=idx: step(idx), cost)
                    device_time_s += busy_s
                    if monitor is not None:
                        monitor.on_step(start_s, device.now_s(), busy_s)
                samples += config.batch_size
            point = CurvePoint(samples=samples, accuracy=evaluate(model, spec, x_test, y_test),
                               device_time_s=device_time_s)
            curve.append(point)
            if on_eval is not None:
                on_eval(point)
            if monitor is not None and point.accuracy < config.target_accuracy:
                # Re-planning waits for an evaluation: the re-measure interrupts training, and
                # its device time is paid by this run.
                replan = monitor.replan_if_due()
                if replan is not None:
                    device_time_s += replan.remeasure_device_s
            if checkpoint is not None:
                checkpoint.save(model, optimizer, {
                    "config": config.model_dump(), "samples": samples,
                    "curve": [p.model_dump() for p in curve], "device_time_s": device_time_s,
                    "meter": meter.state(), "events": events,
                    "counter_energy_j": counter_energy_j(),
                    "frequency_hz": device.current_frequency_hz() if device else None,
                    "cap_violations": [v.model_dump() for v in guard.violations] if guard
                    else [],
                    "frequency_steps": [s.model_dump() for s in guard.steps] if guard else [],
                    "drift_events": [e.model_dump() for e in monitor.events] if monitor
                    else [],
                    "replans": [r.model_dump() for r in monitor.replans] if monitor else [],
                })

    if device is None or (curve and curve[-1].accuracy >= config.target_accuracy):
        run_steps()
    else:
        with ExitStack() as ticks:
            for callback in (meter, guard, monitor):
                if callback is not None:
                    ticks.enter_context(device.sensor_ticks(callback))
            run_steps()
        if guard is not None:
            guard.finish()

    reached_at = next((p.samples for p in curve if p.accuracy >= config.target_accuracy), None)
    if guard is not None:
        for v in guard.violations:
            events.append(f"cap exceeded for {v.duration_s:.2f} s at t={v.start_s:.1f} s "
                          f"(max {v.max_power_w:.2f} W)")
        events += [f"watchdog: {note}" for note in guard.notes]
    if monitor is not None:
        events += [f"drift monitor: {note}" for note in monitor.notes]
        for replan in monitor.replans:
            events.append(f"re-planned at t={replan.time_s:.1f} s: {replan.from_hz / 1e6:.1f} -> "
                          f"{replan.to_hz / 1e6:.1f} MHz ({replan.reason}; re-measured "
                          f"{len(replan.points)} points in {replan.remeasure_device_s:.1f} s)")
    energy_j = counter_energy_j()
    energy_source = None if device is None else "sensor" if energy_j is None else "counter"
    if energy_j is None:
        energy_j = meter.energy_j
    return RunRecord(
        config=config,
        dataset=train.name,
        method=method,
        device=device.name if device else None,
        device_kind=device.kind if device else None,
        frequency_hz=device.current_frequency_hz() if device else None,
        power_cap_w=power_cap_w,
        reached=reached_at is not None,
        samples_to_target=reached_at,
        samples_seen=samples,
        final_accuracy=curve[-1].accuracy if curve else 0.0,
        curve=curve,
        device_time_s=device_time_s,
        energy_j=energy_j,
        peak_power_w=meter.peak_w,
        avg_power_w=meter.average_w,
        cap_violations=guard.violations if guard else [],
        frequency_steps=guard.steps if guard else [],
        drift_events=monitor.events if monitor else [],
        replans=monitor.replans if monitor else [],
        energy_source=energy_source,
        events=events,
        resumed_from_samples=resumed_from,
        wall_time_s=time.monotonic() - wall_start,
        weights_source=weights_source,
        architecture_fingerprint=model_fingerprint(config.model),
    )


def pretrain(
    model: str,
    dataset: str,
    out: str | Path,
    epochs: int = 3,
    batch_size: int = 32,
    lr: float = 1e-3,
    seed: int = 0,
    data_options: dict | None = None,
) -> dict[str, str]:
    """Train a model from scratch on a data set (a data spec: bundled name, ``cifar100:PATH``
    ...; ``data_options`` go to :func:`wattcap.data.load_splits`) and save safetensors
    weights; returns the metadata written (model, input shape, dataset, test accuracy)."""
    from wattcap.data import load_splits
    from wattcap.weights import save_weights

    spec = get_model_spec(model)
    train, test = load_splits(dataset, seed=seed, **(data_options or {}))
    check_data_fits_model(train, spec)
    torch.manual_seed(seed)
    net = spec.build(num_classes=train.num_classes).train()
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    stream = BatchStream(len(train), seed)
    for position in range(0, epochs * len(train) - batch_size + 1, batch_size):
        # batch by batch: a large uint8 set is never held as float32
        x, y = (torch.from_numpy(a) for a in train.batch(stream.indices(position, batch_size)))
        optimizer.zero_grad(set_to_none=True)
        spec.loss(net(x), y).backward()
        optimizer.step()
    accuracy = evaluate(net, spec, *test.to_tensors())
    metadata = {
        "model": model, "input_shape": json.dumps(list(spec.input_shape)),
        "dataset": dataset, "num_classes": str(train.num_classes), "epochs": str(epochs),
        "test_accuracy": f"{accuracy:.4f}", "seed": str(seed),
    }
    save_weights(net, out, metadata)
    return metadata
