"""What a training run is and what it leaves behind: the configuration of our own loop
(`TrainConfig`), the accuracy curve (`CurvePoint`) and the `RunRecord` file every run writes,
whichever loop drove it (ours, a user's, Lightning's, the Hugging Face Trainer's).

Light on purpose (no torch import): the CLI and the reports read records without a model.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict

from wattcap.core.cap_history import CapTimeline, Segment
from wattcap.core.defaults import DEFAULT_BATCH_SIZE_REF, DEFAULT_LR_REF
from wattcap.core.events import CapViolation, ClockClamp, DriftEvent, FrequencyStep, Replan
from wattcap.core.knob import KnobKind
from wattcap.core.metric import ACCURACY, MetricError, TargetMetric
from wattcap.core.observed_clock import ObservedFrequency
from wattcap.core.schema import VersionedFile


def scaled_learning_rate(lr_ref: float, batch_size_ref: int, batch_size: int) -> float:
    """Square-root scaling for Adam/AdamW: lr = lr_ref · sqrt(b / b_ref)."""
    return lr_ref * math.sqrt(batch_size / batch_size_ref)


#: the metrics wattcap's own loop evaluates on the test split (a user's loop reports any
#: metric through a Session)
LOOP_METRICS = ("accuracy", "loss", "perplexity")


def check_loop_metric(metric: TargetMetric) -> None:
    """Refuse a metric wattcap's own loop cannot evaluate (MetricError, a ValueError)."""
    if metric.name not in LOOP_METRICS or (metric.name == "accuracy" and not metric.is_accuracy):
        raise MetricError(
            f"wattcap's loop evaluates {', '.join(LOOP_METRICS)} (accuracy as a fraction), not "
            f"{metric.name}{'' if metric.high in (None, 1.0) else f':{metric.high:g}'}; for "
            "another metric train in your own loop with a Session (target_metric=...), or "
            "import its runs (wattcap import efficiency)")


class TrainConfig(BaseModel):
    """Everything that determines a run of wattcap's own training loop (`train_to_accuracy`)."""

    model_config = ConfigDict(extra="forbid")
    model: str
    batch_size: int
    #: the target, in `target_metric`'s units (the name predates metrics other than accuracy)
    target_accuracy: float
    #: what the loop evaluates and the target is on: accuracy (grows) or loss (falls)
    target_metric: TargetMetric = ACCURACY
    sample_budget: int = 20_000
    eval_every_samples: int = 256
    #: the paper's reference: Adam at 5e-4 for b = 128, sqrt-scaled to the batch size
    lr_ref: float = DEFAULT_LR_REF
    batch_size_ref: int = DEFAULT_BATCH_SIZE_REF
    optimizer: Literal["adam", "adamw"] = "adam"
    weight_decay: float = 0.0
    seed: int = 0
    max_eval_samples: int | None = None
    #: evaluations after the first one at the target, so the smoothed curve that
    #: samples-to-target is read from does not rest on one lucky evaluation (estimation runs)
    evals_past_target: int = 0

    @property
    def learning_rate(self) -> float:
        """The learning rate at this batch size."""
        return scaled_learning_rate(self.lr_ref, self.batch_size_ref, self.batch_size)

    def check(self) -> None:
        """Refuse settings that would break same-sample-count evaluation."""
        if self.batch_size < 1:
            raise ValueError(f"batch size must be positive, got {self.batch_size}")
        if self.eval_every_samples % self.batch_size:
            raise ValueError(
                f"eval_every_samples ({self.eval_every_samples}) must be a multiple of the batch "
                f"size ({self.batch_size}) so every batch size is evaluated at the same samples"
            )
        check_loop_metric(self.target_metric)
        self.target_metric.check_target(self.target_accuracy)

    def identity_fields(self) -> dict:
        """The fields that name this configuration in run identities and recorded runs'
        keys: every field, less the metric where it is accuracy (the default), so runs
        recorded before metrics existed keep their identity and are reused."""
        fields = self.model_dump(mode="json")
        if self.target_metric == ACCURACY:
            del fields["target_metric"]
        return fields


class CurvePoint(BaseModel):
    """The evaluated metric after a number of training samples (`accuracy`: the value of the
    run's target metric, accuracy unless the run says otherwise)."""

    model_config = ConfigDict(extra="forbid")
    samples: int
    accuracy: float
    device_time_s: float


class RunRecord(VersionedFile):
    """The outcome of one training run."""

    FILE_KIND = "wattcap.run"
    SCHEMA_VERSION = 5  # 3: architecture_fingerprint; 4: objective, cap_source, segments,
    #                     timeline, paused_s, stop_reason (a moving cap); 5: target_metric,
    #                     knob_kind, knob_value
    MIGRATIONS = {4: lambda raw: raw}  # 5 added fields (absent: accuracy, the GPU clock)

    #: the configuration of wattcap's own loop; None for a run driven by a user's loop
    config: TrainConfig | None = None
    model: str
    batch_size: int
    learning_rate: float | None = None
    #: the target, in `target_metric`'s units
    target_accuracy: float | None = None
    #: the metric of the target and of the curve's values (a loss falls to its target)
    target_metric: TargetMetric = ACCURACY
    sample_budget: int | None = None
    dataset: str | None = None
    method: str | None = None
    device: str | None = None
    device_kind: str | None = None
    torch_device: str | None = None
    #: the clock wattcap requested (locked) at the end of the run, never a live reading
    frequency_hz: int | None = None
    #: the knob the run was planned on (`wattcap.core.knob`) and, for a power limit (mW) or
    #: power mode (id), the value applied; for the clock, `frequency_hz` says it
    knob_kind: KnobKind = "gpu_clock"
    knob_value: int | None = None
    #: the clock the hardware reported beside the power readings (on a real GPU the live
    #: clock, idle between steps): mean, min and max; None where none was read
    observed_frequency_hz: ObservedFrequency | None = None
    power_cap_w: float | None = None
    reached: bool
    #: samples where the smoothed accuracy curve crosses the target (interpolated)
    samples_to_target: float | None
    #: device seconds at that crossing
    time_to_accuracy_s: float | None = None
    samples_seen: int
    steps: int = 0
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
    #: clocks the board did not follow (thermal, power mode, power limit) and where the run
    #: went on
    clock_clamps: list[ClockClamp] = []
    #: "counter" (hardware energy counter difference), "sensor" (readings × sensor period),
    #: "none" (no reading: energy_j is 0
    #: because nothing was measured, a run shorter than the sensor's period)
    energy_source: str | None = None
    events: list[str] = []
    resumed_from_samples: int | None = None
    wall_time_s: float
    weights_source: str | None = None
    #: the model's architecture (wattcap.models.architecture_fingerprint); None: not recorded
    architecture_fingerprint: str | None = None
    #: what the selection minimised ("time", "energy within 300 s", ...)
    objective: str | None = None
    #: a moving cap: its source, the run's segments of constant plan (`power_cap_w`,
    #: `batch_size` and `frequency_hz` above are then those at the end), a compact series of
    #: power, cap, frequency and batch size, the device seconds spent paused (included in
    #: `device_time_s`) and why the cap ended the run, if it did
    cap_source: str | None = None
    segments: list[Segment] = []
    timeline: CapTimeline | None = None
    paused_s: float = 0.0
    stop_reason: str | None = None
