"""What a Session shows a progress display: `SessionStatus`, a snapshot that is itself a
`wattcap.core.progress.ProgressUpdate`, and the callback that receives it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from wattcap.core.metric import ACCURACY, TargetMetric, target_percent
from wattcap.core.progress import percent


@dataclass
class SessionStatus:
    """A snapshot for progress displays."""

    samples: int
    steps: int
    device_time_s: float
    accuracy: float | None
    target_accuracy: float | None
    power_w: float | None
    power_cap_w: float | None
    frequency_hz: int | None
    batch_size: int
    sample_budget: int | None
    #: training is paused: the cap is below what any configuration can meet
    paused: bool = False
    #: where a resumed run picked up, shown with the first status after the resume
    resumed_from_samples: int | None = None
    #: the metric `accuracy` and `target_accuracy` are values of
    target_metric: TargetMetric = ACCURACY


    # -- the ProgressUpdate protocol (wattcap.core.progress): samples of the budget ----------
    @property
    def done(self) -> float:
        """Samples trained (a `ProgressUpdate`)."""
        return self.samples

    @property
    def total(self) -> float | None:
        """The sample budget (a `ProgressUpdate`)."""
        return self.sample_budget

    @property
    def unit(self) -> str:
        """What `done` counts (a `ProgressUpdate`)."""
        return "samples"

    @property
    def item(self) -> SessionStatus:
        """The status itself (a `ProgressUpdate`)."""
        return self

    @property
    def detail(self) -> str:
        """Accuracy against the target, power against the cap, the batch size and clock in use
        (a re-plan may change either), device time."""
        parts = ["paused: the cap is below every configuration"] if self.paused else []
        if self.resumed_from_samples is not None:
            parts.append(f"resumed from the checkpoint at {self.resumed_from_samples} samples")
        if self.accuracy is not None and self.target_metric.is_accuracy:
            parts.append(f"accuracy {percent(self.accuracy, 1)}"
                         + (f" (target {target_percent(self.target_accuracy)})"
                            if self.target_accuracy is not None else ""))
        elif self.accuracy is not None:
            parts.append(f"{self.target_metric.name} {self.accuracy:.4g}"
                         + (f" (target {self.target_metric.describe(self.target_accuracy)})"
                            if self.target_accuracy is not None else ""))
        if self.power_w is not None:
            parts.append(f"{self.power_w:.2f} W"
                         + (f" (cap {self.power_cap_w:g} W)" if self.power_cap_w else ""))
        parts.append(f"b={self.batch_size}" + (f" at {self.frequency_hz / 1e6:.0f} MHz"
                                               if self.frequency_hz is not None else ""))
        if self.device_time_s > 0 or self.frequency_hz is not None:  # none without a device
            parts.append(f"{self.device_time_s:.1f} s of device time")
        return ", ".join(parts)


#: a Session's progress: the one protocol of every long job, each update a `SessionStatus`
ProgressCallback = Callable[[SessionStatus], None]
