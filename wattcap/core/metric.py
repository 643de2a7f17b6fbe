"""The metric a training target is set on, as it is: accuracy in (0, 1] that grows, F1 or BLEU on
0-100, a word error rate, a loss or a perplexity that falls. An efficiency vector stores it, so
"reached" means the same to whoever reads the file."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict

from wattcap.core.errors import WattcapError


class MetricError(WattcapError, ValueError):
    """An unknown metric, or a target outside its metric's range (a unit mistake)."""


class TargetMetric(BaseModel):
    """A metric's name, the direction in which it improves and its range (low, high]."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = "accuracy"
    direction: Literal["higher", "lower"] = "higher"
    low: float = 0.0
    #: the top of the scale (1 for a fraction, 100 for a percentage); None: unbounded
    high: float | None = 1.0

    def reached(self, value: float, target: float) -> bool:
        """Whether a measured value meets the target in this metric's direction."""
        return value >= target if self.direction == "higher" else value <= target

    def check_target(self, target: float) -> float:
        """The target, if it lies in the metric's range; else a clear refusal."""
        high = math.inf if self.high is None else self.high
        if not math.isfinite(target) or not self.low < target <= high:
            scale = f"({self.low:g}, {high:g}]"
            hint = (" (a percentage? say NAME:100)" if self.high == 1.0 and 1 < target <= 100
                    else "")
            raise MetricError(f"target {target:g} is outside {self.name}'s range {scale}{hint}")
        if self.direction == "higher" and high >= 10 and target <= 1:
            # within range, but a fraction given on a percentage's scale is a unit mistake
            # that would train to almost nothing and call it reached
            raise MetricError(
                f"target {target:g} on {self.name}'s 0-{high:g} scale is {target / high:.2%} "
                f"of it (a fraction? say {target * high:g}, or the metric {self.name}:1 if "
                "yours reports fractions)")
        return target

    def check_value(self, value: float) -> float:
        """A measured value, if it lies in the metric's range [low, high]; else a refusal
        (an accuracy of 87 is a percentage reported as a fraction's metric)."""
        high = math.inf if self.high is None else self.high
        if not (math.isfinite(value) and self.low <= value <= high):
            raise MetricError(f"{self.name} must be in [{self.low:g}, {high:g}], got {value}")
        return value

    @property
    def is_accuracy(self) -> bool:
        """Accuracy as a fraction (the default metric)."""
        return self == ACCURACY

    def value_text(self, value: float) -> str:
        """A value as a person reads it: '85%' for accuracy, 'loss 0.412' otherwise."""
        return f"{value:.0%}" if self.is_accuracy else f"{self.name} {value:.4g}"

    def goal_text(self, target: float) -> str:
        """A target value as a person reads it, to the precision it was given: '99.5%' for
        accuracy (`target_percent`), 'loss 0.412' otherwise."""
        return target_percent(target) if self.is_accuracy else f"{self.name} {target:.4g}"

    def target_text(self, target: float, digits: int | None = None) -> str:
        """A target as a sentence reads it: 'accuracy 99.5%' (`target_percent`, or to
        `digits` decimals where given), 'wer <= 0.15'."""
        if not self.is_accuracy:
            return self.describe(target)
        shown = target_percent(target) if digits is None else f"{target:.{digits}%}"
        return f"accuracy {shown}"

    def describe(self, target: float) -> str:
        """'accuracy >= 0.8', 'wer <= 0.15'."""
        return f"{self.name} {'>=' if self.direction == 'higher' else '<='} {target:g}"


def target_percent(target: float) -> str:
    """A target accuracy as a percentage with the digits it needs, never rounded to another
    target: 0.9 is '90%', 0.995 '99.5%' (not '100%', which no run reaches), 0.3183
    '31.83%'."""
    return f"{round(target * 100, 6):g}%"


#: metrics by name: (direction, low, high); NAME:MAX puts a bounded metric on another scale
KNOWN_METRICS: dict[str, tuple[Literal["higher", "lower"], float, float | None]] = {
    "accuracy": ("higher", 0.0, 1.0),
    "top5-accuracy": ("higher", 0.0, 1.0),
    "f1": ("higher", 0.0, 1.0),
    "bleu": ("higher", 0.0, 100.0),
    "wer": ("lower", 0.0, None),
    "cer": ("lower", 0.0, None),
    "loss": ("lower", 0.0, None),
    "perplexity": ("lower", 1.0, None),
}

ACCURACY = TargetMetric()


def metric_named(text: str) -> TargetMetric:
    """'accuracy', 'wer', 'f1:100' (F1 on 0-100), 'loss'. An unknown name is refused, listing
    the known ones."""
    name, _, scale = text.strip().lower().partition(":")
    if name not in KNOWN_METRICS:
        raise MetricError(f"unknown metric {name!r}; known: {', '.join(KNOWN_METRICS)} "
                          "(NAME:MAX for another scale, e.g. f1:100)")
    direction, low, high = KNOWN_METRICS[name]
    if scale:
        try:
            high = float(scale)
        except ValueError:
            raise MetricError(f"metric {text!r}: the scale after ':' must be a number, "
                              "e.g. f1:100") from None
        if not high > low:
            raise MetricError(f"metric {text!r}: the scale's top must be above {low:g}")
    return TargetMetric(name=name, direction=direction, low=low, high=high)
