"""Drift or noise (`wattcap.algorithms.drift`): windows that vary as much as an H100's
host-bound resnet18 step does (12 % from one 0.5 s window to the next, against a point
measured over one such window) are not drift, a real change on a quiet device still is, from
its second window."""

from __future__ import annotations

import random

import pytest

from wattcap.algorithms.drift import (
    MIN_DIFFERENCES,
    DriftTest,
    WindowChange,
    noise_threshold,
    sigma_of_differences,
)


def window(time_change: float, power_change: float = 0.0) -> WindowChange:
    return WindowChange(time_change=time_change, power_change=power_change, steps=4, readings=5)


def false_drifts(windows: int, noise: float, seed: int) -> tuple[int, int]:
    """(drifts decided, windows a single-window rule at 10 % would have called drift) over
    `windows` windows of a device that never moves: each window reads the point's own
    measurement error (one window's noise, drawn afresh at each re-measure) plus its own."""
    rng = random.Random(seed)
    test = DriftTest(time_tolerance=0.1, power_tolerance=0.1)
    point_error = rng.gauss(0, noise)
    decided = single = 0
    for _ in range(windows):
        change = point_error + rng.gauss(0, noise)
        single += abs(change) > 0.1
        if test.add(window(change, rng.gauss(0, 0.03))) is not None:
            decided += 1
            point_error = rng.gauss(0, noise)  # re-measured: a new draw
            test.new_point()
    return decided, single


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_noisy_windows_are_not_drift(seed: int) -> None:
    """An hour of 0.5 s windows at 12 % noise: a window-by-window rule re-measured about a
    third of the time; the noise-aware one a handful of times."""
    decided, single = false_drifts(7200, noise=0.12, seed=seed)
    assert single > 2000
    assert decided <= 30


def test_a_change_on_a_quiet_device_is_drift_from_its_second_window() -> None:
    rng = random.Random(0)
    test = DriftTest(time_tolerance=0.1, power_tolerance=0.1)
    verdicts = []
    for index in range(30):
        change = (0.25 if index >= 10 else 0.0) + rng.gauss(0, 0.005)
        verdicts.append(test.add(window(change)))
    assert verdicts[:11] == [None] * 11  # the window holding the change alone does not decide
    verdict = verdicts[11]
    assert verdict is not None and verdict.time_change == pytest.approx(0.25, abs=0.02)
    assert verdict.time_threshold == pytest.approx(0.1)  # the change is not taken for noise
    assert verdict.steps == 3 * 4 and verdict.readings == 3 * 5


def test_one_slow_window_is_not_drift() -> None:
    test = DriftTest(time_tolerance=0.1, power_tolerance=0.1)
    changes = [0.0] * 10 + [0.6] + [0.0] * 10
    assert all(test.add(window(change)) is None for change in changes)


def test_power_drifts_alone() -> None:
    test = DriftTest(time_tolerance=0.1, power_tolerance=0.05)
    verdicts = [test.add(window(0.0, 0.08 if index >= 6 else 0.0)) for index in range(10)]
    assert verdicts[6] is None and verdicts[7] is not None
    assert verdicts[7].power_change == pytest.approx(0.08)


def test_no_decision_before_the_noise_is_known_and_it_outlives_a_point() -> None:
    """A run's first windows only show the noise (a first window 40 % off may be the point's
    error alone); a new point (another clock, a re-measure) starts its level afresh but keeps
    the noise learnt."""
    test = DriftTest(time_tolerance=0.1, power_tolerance=0.1)
    assert [test.add(window(0.4)) for _ in range(MIN_DIFFERENCES)] == [None] * MIN_DIFFERENCES
    assert not test.ready
    assert test.add(window(0.4)) is not None and test.ready
    test.new_point()
    assert test.add(window(0.4)) is None  # one window at the new point
    assert test.add(window(0.4)) is not None


def test_the_noise_sets_the_threshold_above_the_tolerance() -> None:
    assert sigma_of_differences([]) == 0.0
    # differences of a normal noise sigma have a median |d| of 0.954 sigma
    rng = random.Random(3)
    draws = [rng.gauss(0, 0.12) for _ in range(4001)]
    sigma = sigma_of_differences([b - a for a, b in zip(draws, draws[1:], strict=False)])
    assert sigma == pytest.approx(0.12, rel=0.05)
    assert noise_threshold(0.1, 0.0) == 0.1
    assert noise_threshold(0.1, 0.12) == pytest.approx(3 * 0.12 * (4 / 3) ** 0.5)
