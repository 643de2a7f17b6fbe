"""Samples to target read on a smoothed accuracy curve, on curves with a known crossing."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from wattcap.algorithms.curves import max_smoothed_accuracy, samples_to_target, smooth_accuracy

EVERY = 256


def _curve(accuracy_at, evaluations: int = 40) -> list[tuple[int, float]]:
    return [(EVERY * k, float(accuracy_at(EVERY * k))) for k in range(1, evaluations + 1)]


def _stop_at_target(curve: list[tuple[int, float]], target: float) -> list[tuple[int, float]]:
    """The curve as a run that stops at its first evaluation at the target records it."""
    first = next(i for i, (_, a) in enumerate(curve) if a >= target)
    return curve[:first + 1]


def test_linear_curve_gives_the_exact_crossing() -> None:
    curve = _curve(lambda x: 0.1 + x / 10_000)
    # 0.1 + x / 10,000 = 0.55 at x = 4,500, between the evaluations at 4,352 and 4,608
    assert samples_to_target(curve, 0.55) == pytest.approx(4500)
    assert samples_to_target(_stop_at_target(curve, 0.55), 0.55) == pytest.approx(4500)


def test_saturating_curve_is_read_within_the_chord_error() -> None:
    tau = 1500.0

    def accuracy(x: float) -> float:
        return 0.95 * (1 - math.exp(-x / tau))

    target = 0.8
    true = -tau * math.log(1 - target / 0.95)
    curve = _stop_at_target(_curve(accuracy), target)
    read = samples_to_target(curve, target)
    # a concave curve lies above its chord, so the chord crosses later, but before the first
    # evaluation past the target; the chord's lag is at most h²·|f''| / (8·f') on the interval
    lag_bound = EVERY**2 * (0.95 / tau**2) / (8 * (0.95 / tau) * math.exp(-curve[-1][0] / tau))
    assert true <= read <= curve[-1][0]
    assert read - true <= lag_bound < EVERY / 4


def test_one_high_evaluation_does_not_trigger_an_early_crossing() -> None:
    """A lucky evaluation followed by more evaluations is pooled with them. (A run that stops
    at that lucky evaluation has nothing after it to pool with.)"""
    curve = _curve(lambda x: 0.3 + x / 10_000, evaluations=30)  # crosses 0.8 at 5,000
    spiked = list(curve)
    spiked[9] = (spiked[9][0], 0.82)  # 2,560 samples: a lucky test batch
    read = samples_to_target(spiked, 0.8)
    first_past = next(s for s, a in spiked if a >= 0.8)
    assert first_past == 2560
    assert abs(read - 5000) < EVERY


def test_one_low_evaluation_delays_the_reading_less_than_the_first_evaluation_past() -> None:
    curve = _curve(lambda x: 0.3 + x / 10_000, evaluations=30)
    dipped = list(curve)
    dipped[19] = (dipped[19][0], 0.70)  # at 5,120, the first evaluation past 0.8
    read = samples_to_target(dipped, 0.8)
    first_past = next(s for s, a in dipped if a >= 0.8)
    assert first_past == 5376
    # the dip is pooled with the evaluations before it: the reading is late, but by less
    assert 5000 < read < first_past


def test_noisy_curves_are_read_without_the_quantisation_bias() -> None:
    """Noisy linear curves with a known crossing, each stopped at its first evaluation at the
    target: the interpolated reading is unbiased, the first-evaluation reading is late by
    half an interval on average."""
    rng = np.random.default_rng(7)
    xs = np.arange(1, 60) * EVERY
    interpolated, first_eval = [], []
    for _ in range(200):
        true = 3000 + rng.uniform(0, EVERY)
        accuracy = 0.8 + (xs - true) / 8000 + 0.01 * rng.standard_normal(xs.size)
        curve = _stop_at_target(list(zip(xs.tolist(), accuracy.tolist(), strict=True)), 0.8)
        interpolated.append(samples_to_target(curve, 0.8) - true)
        first_eval.append(curve[-1][0] - true)
    interpolated, first_eval = np.array(interpolated), np.array(first_eval)
    assert abs(interpolated.mean()) < 0.15 * EVERY
    assert first_eval.mean() > 0.35 * EVERY
    assert np.abs(interpolated).mean() < 0.6 * np.abs(first_eval).mean()


def test_missed_target_empty_curve_and_first_evaluation() -> None:
    curve = _curve(lambda x: 0.2 + x / 100_000, evaluations=10)
    assert samples_to_target(curve, 0.9) is None
    assert samples_to_target([], 0.9) is None
    # already at the target at the first evaluation: nothing earlier was measured
    assert samples_to_target([(256, 0.95), (512, 0.97)], 0.9) == 256


def test_run_record_points_are_accepted() -> None:
    points = [SimpleNamespace(samples=s, accuracy=a) for s, a in _curve(lambda x: x / 10_000)]
    assert samples_to_target(points, 0.5) == pytest.approx(5000)
    assert max_smoothed_accuracy(points) == pytest.approx(points[-1].accuracy)


def test_bad_curves_are_refused() -> None:
    with pytest.raises(ValueError, match="strictly increasing"):
        samples_to_target([(512, 0.5), (256, 0.6)], 0.55)
    with pytest.raises(ValueError, match="finite"):
        samples_to_target([(256, float("nan"))], 0.55)
    with pytest.raises(ValueError, match="finite"):
        samples_to_target([(256, 0.5)], float("nan"))


def test_smoothing_is_monotone_and_keeps_a_monotone_curve() -> None:
    rising = [0.1, 0.2, 0.4, 0.8]
    assert smooth_accuracy(rising).tolist() == rising
    noisy = smooth_accuracy([0.5, 0.7, 0.6, 0.9, 0.8])
    assert np.all(np.diff(noisy) >= 0)
    assert noisy.mean() == pytest.approx(np.mean([0.5, 0.7, 0.6, 0.9, 0.8]))


def test_a_run_stops_where_the_smoothed_curve_stays_crossed() -> None:
    """A lucky evaluation taken back by the next ones does not stop the run; once the smoothed
    curve crosses, the run makes `evals_past_target` more evaluations."""
    from wattcap.algorithms.curves import stopped_curve

    accuracy = [0.5, 0.82, 0.7, 0.7, 0.9, 0.92, 0.93, 0.95]
    curve = [(EVERY * (k + 1), a) for k, a in enumerate(accuracy)]
    assert samples_to_target(curve[:4], 0.8) is None  # stopping at 0.82 would record a miss
    stopped = stopped_curve(curve, 0.8, 2)
    assert stopped == curve[:7]
    assert samples_to_target(stopped, 0.8) == samples_to_target(curve[:5], 0.8)
    assert stopped_curve(curve, 0.99, 2) == curve  # never crossed: the whole run
