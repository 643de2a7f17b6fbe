"""Expected cost with restarts (issue 28 item 5): a seed that misses the target costs its
budget and a restart; a batch size is scored by the expected cost over tries."""

from __future__ import annotations

import random
import statistics

import pytest

from wattcap.algorithms.restarts import expected_with_restarts, samples_with_restarts
from wattcap.experiments.compare import Comparison, MethodResult


def test_the_expected_cost_is_the_mean_of_simulated_tries() -> None:
    """Train, and on a miss pay the budget and start again: the mean over many simulated
    users matches the formula (seeded, so the check is exact to its tolerance)."""
    reached, missed = [10.0, 12.0, 14.0], [30.0]
    rng = random.Random(7)
    totals = []
    for _ in range(40_000):
        total = 0.0
        while True:
            outcome = rng.randrange(4)  # 3 of 4 seeds reach the target
            if outcome < 3:
                total += reached[outcome]
                break
            total += missed[0]
        totals.append(total)
    expected = expected_with_restarts(reached, missed)
    assert expected == pytest.approx(12.0 + (1 / 3) * 30.0)
    assert statistics.fmean(totals) == pytest.approx(expected, rel=0.01)


def test_no_seed_reached_has_no_expected_cost_and_none_missed_is_the_mean() -> None:
    assert expected_with_restarts([], [30.0, 30.0]) is None
    assert expected_with_restarts([3.0, 5.0], []) == 4.0
    assert samples_with_restarts([None, None], [100, 100]) is None


def test_per_seed_samples_with_restarts_average_to_the_expected_samples() -> None:
    per_seed = [100.0, None, 140.0]
    budgets = [400, 500, 400]
    samples = samples_with_restarts(per_seed, budgets)
    assert samples is not None and samples[0] == 100.0 and samples[2] == 140.0
    assert statistics.fmean(samples) == pytest.approx(
        expected_with_restarts([100.0, 140.0], [500.0]))


def _result(method: str, times: list, budgets: list) -> MethodResult:
    return MethodResult(device="d", power_cap_w=None, target="t", method=method, batch_size=8,
                        knob_value=1, predicted_time_s=None, time_s=times,
                        energy_j=[None if t is None else 2 * t for t in times],
                        budget_time_s=budgets,
                        budget_energy_j=[None if b is None else 2 * b for b in budgets],
                        peak_power_w=1.0, cap_violations=0, frequency_steps=0)


def test_a_method_result_with_a_missed_seed_is_scored_with_restarts() -> None:
    ours = _result("wattcap", [10.0, None, 14.0], [None, 40.0, None])
    fastest = _result("fastest", [10.0, 11.0, 12.0], [None, None, None])
    comparison = Comparison(model="m", proxy="p", targets=["t"], devices=["d"], seeds=3,
                            target_accuracy=0.9, results=[ours, fastest])
    assert ours.time_mean_s is None and ours.missed == 1
    assert ours.expected_time_s == pytest.approx(12.0 + 0.5 * 40.0)
    assert ours.expected_energy_j == pytest.approx(2 * (12.0 + 0.5 * 40.0))
    assert ours.missed_label() == "32.00 s expected with restarts (1 of 3 seeds missed)"
    assert comparison.over_fastest_pct(ours) == pytest.approx(100 * (32.0 / 11.0 - 1))
    # a file written before restarts were scored has no budget times: nothing is invented
    old = _result("wattcap", [10.0, None, 14.0], [])
    assert old.expected_time_s is None and old.missed_label() == "not reached in 1 of 3 seeds"
