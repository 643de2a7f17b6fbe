"""Whether two methods' times separate beyond the noise of their seeds."""

from __future__ import annotations

import random

import pytest

from wattcap.experiments.significance import compare_times, mean_std_label


def test_clearly_different_times_separate() -> None:
    result = compare_times([20.0, 21.0, 19.5], [10.0, 10.4, 9.8])
    assert result.ratio == pytest.approx(60.5 / 30.2)
    assert result.separated is True and result.p_value < 0.05
    assert result.label == f"{result.ratio:.2f}x"


def test_overlapping_seeds_are_within_noise() -> None:
    result = compare_times([10.0, 14.0, 8.0], [11.0, 9.0, 13.5])
    assert result.separated is False
    assert "within noise" in result.label


def test_one_seed_says_nothing_about_noise() -> None:
    result = compare_times([10.0], [5.0])
    assert result.separated is None and result.p_value is None
    assert "1 seed" in result.label


def test_ratio_label_shows_the_decimals_asked_for() -> None:
    """To 3 decimals a 0.4 % loss and a 0.4 % gain read apart; to 2 both read 1.00x."""
    loss, gain = compare_times([10.04], [10.0]), compare_times([9.96], [10.0])
    assert loss.label == gain.label == "1.00x (1 seed: no spread)"
    assert loss.ratio_label(3) == "1.004x (1 seed: no spread)"
    assert gain.ratio_label(3) == "0.996x (1 seed: no spread)"
    assert compare_times([10.0, 14.0, 8.0], [11.0, 9.0, 13.5]).ratio_label(3) == \
        "0.955x (within noise)"


def test_identical_configurations_are_within_noise() -> None:
    assert compare_times([7.0, 7.0, 7.0], [7.0, 7.0, 7.0]).separated is False


def test_the_test_holds_its_level_on_equal_distributions() -> None:
    rng = random.Random(0)
    trials = 400
    false_alarms = sum(
        compare_times([rng.lognormvariate(2, 0.2) for _ in range(3)],
                      [rng.lognormvariate(2, 0.2) for _ in range(3)]).separated
        for _ in range(trials))
    assert false_alarms / trials < 0.1


def test_mean_std_labels() -> None:
    assert mean_std_label([10.0, 12.0, 14.0]) == "12.0 ± 2.0 (3 seeds)"
    assert mean_std_label([10.0]) == "10.0 (1 seed)"
    assert mean_std_label([]) == "—"
    with pytest.raises(ValueError):
        compare_times([], [1.0])
