"""Samples-to-target read precisely from an accuracy curve.

A run is evaluated at the same sample counts for every batch size; reading samples-to-target
at the first evaluation past the target quantises it to the evaluation interval (±25 % on
tasks reached in 500-3,000 samples with an evaluation every 256). Here the crossing is
interpolated on a smoothed curve instead.

Smoothing: isotonic (non-decreasing) regression, the least-squares closest non-decreasing
curve to the evaluations. Why this one:
- accuracy under fine-tuning rises in expectation, so a monotone fit discards only noise;
- one evaluation that is too high (a lucky test batch) is pooled with the lower ones after it,
  so it does not trigger an early crossing; one too low is pooled with the ones before it;
- it has no window: a moving average lags a rising curve by half its window and moves the
  crossing late, by an amount that differs between batch sizes; isotonic regression is
  unbiased where the curve is strictly rising and needs no tuning parameter;
- its last value is the largest mean of a suffix of evaluations, so a curve that ends at its
  first evaluation past the target (how `train_to_accuracy` stops) still reaches the target.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import numpy as np
from scipy.optimize import isotonic_regression


class _CurvePoint(Protocol):
    samples: int
    accuracy: float


CurveLike = Sequence[tuple[float, float]] | Sequence[_CurvePoint]


def curve_arrays(curve: CurveLike) -> tuple[np.ndarray, np.ndarray]:
    """(samples, accuracy) arrays of a curve given as pairs or as points with `.samples` and
    `.accuracy` (a RunRecord's curve); refuses unordered or non-finite curves."""
    points: Sequence[Any] = curve  # pairs, or points with .samples and .accuracy
    pairs = [(p.samples, p.accuracy) if hasattr(p, "accuracy") else p for p in points]
    samples = np.array([float(s) for s, _ in pairs])
    accuracy = np.array([float(a) for _, a in pairs])
    if not (np.all(np.isfinite(samples)) and np.all(np.isfinite(accuracy))):
        raise ValueError("an accuracy curve must hold finite (samples, accuracy) pairs")
    if np.any(np.diff(samples) <= 0):
        raise ValueError("an accuracy curve's sample counts must be strictly increasing")
    return samples, accuracy


def smooth_accuracy(accuracy: Sequence[float] | np.ndarray) -> np.ndarray:
    """The isotonic (non-decreasing least-squares) fit of a sequence of evaluations."""
    values = np.asarray(accuracy, dtype=float)
    if values.size == 0:
        return values
    return np.asarray(isotonic_regression(values, increasing=True).x, dtype=float)


def samples_to_target(curve: CurveLike, target: float,
                      direction: Literal["higher", "lower"] = "higher") -> float | None:
    """Samples at which the smoothed curve crosses `target`, interpolated linearly between the
    two evaluations around the crossing; None when the smoothed curve never reaches the target
    (the run missed it within its budget). `direction` "lower": a metric that falls (a word
    error rate, a loss), smoothed non-increasing and reached at or below the target.

    A curve already at the target at its first evaluation gives that evaluation's sample
    count: nothing before it was measured, so it is an upper bound.
    """
    if not math.isfinite(target):
        raise ValueError(f"the target must be a finite number, got {target}")
    samples, accuracy = curve_arrays(curve)
    if samples.size == 0:
        return None
    if direction == "lower":  # a falling metric is a growing one, negated
        accuracy, target = -accuracy, -target
    smooth = smooth_accuracy(accuracy)
    above = np.flatnonzero(smooth >= target)
    if above.size == 0:
        return None
    i = int(above[0])
    if i == 0:
        return float(samples[0])
    lo, hi = smooth[i - 1], smooth[i]  # lo < target <= hi, so hi > lo
    share = (target - lo) / (hi - lo)
    return float(samples[i - 1] + share * (samples[i] - samples[i - 1]))


def stopped_curve(curve: Sequence, target: float, evals_past_target: int,
                  direction: Literal["higher", "lower"] = "higher") -> list:
    """The part of a longer run's curve that a run stopping at the target would have made:
    wattcap's loop trains on until the smoothed curve crosses the target, then for
    `evals_past_target` more evaluations while it stays crossed (`Session.reached`)."""
    past = 0
    for n in range(1, len(curve) + 1):
        if samples_to_target(curve[:n], target, direction) is None:
            past = 0
        elif past >= evals_past_target:
            return list(curve[:n])
        else:
            past += 1
    return list(curve)


def max_smoothed_accuracy(curve: CurveLike) -> float | None:
    """The highest accuracy of the smoothed curve (its last value), None for an empty curve."""
    _, accuracy = curve_arrays(curve)
    return float(smooth_accuracy(accuracy)[-1]) if accuracy.size else None


def reports_past_target(curve: Sequence[Any], target: float,
                        direction: Literal["higher", "lower"] = "higher") -> int:
    """Reports made since the one at which the smoothed curve crossed `target`, while it stayed
    crossed (0: not reached, or reached at the last report): the count a run resumed from a
    checkpoint carries on from, as the uninterrupted run counted."""
    crossed = 0
    for end in range(len(curve), 0, -1):  # once per resume: prefixes, newest first
        if samples_to_target(curve[:end], target, direction) is None:
            break
        crossed += 1
    return max(crossed - 1, 0)


def time_at_samples_s(curve: Sequence[Any], samples: float) -> float:
    """Device seconds when a run had trained `samples` samples, linear between the curve's
    points (each with `samples` and `device_time_s`): the device's time per sample is constant
    between reports."""
    points = [(0, 0.0)] + [(p.samples, p.device_time_s) for p in curve]
    for (s0, t0), (s1, t1) in zip(points, points[1:], strict=False):
        if s0 <= samples <= s1:
            return t0 if s1 == s0 else t0 + (t1 - t0) * (samples - s0) / (s1 - s0)
    return points[-1][1]
