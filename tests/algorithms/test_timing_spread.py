"""A measured point's time spread from its window's parts (`window_time_std_s`)."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from wattcap.algorithms.timing_spread import window_time_std_s


def test_parts_that_agree_give_no_spread_and_too_few_parts_give_none() -> None:
    assert window_time_std_s([(0.3, 3), (0.1, 1), (0.2, 2)], batch_size=8) == 0.0
    assert window_time_std_s([(0.3, 3), (0.5, 3)], batch_size=8) is None
    # a part with no accounted step (a wait that found nothing queued) is not a part
    assert window_time_std_s([(0.3, 3), (0.0, 0), (0.5, 3)], batch_size=8) is None


@pytest.mark.parametrize("equal_parts", [True, False])
def test_the_standard_error_matches_the_spread_of_windows(equal_parts: bool) -> None:
    """Windows of noisy steps (10 % per step), cut into parts of equal or unequal step
    counts: the standard error a window states for itself (its root mean square) is the
    spread of the windows' times per sample, measured over many windows."""
    rng = random.Random(4)
    batch_size, step_s = 16, 0.01
    means, stated = [], []
    for _ in range(3000):
        sizes = [6] * 5 if equal_parts else [rng.randint(1, 12) for _ in range(5)]
        parts = [(sum(rng.gauss(step_s, 0.1 * step_s) for _ in range(n)), n) for n in sizes]
        means.append(sum(s for s, _ in parts) / (sum(n for _, n in parts) * batch_size))
        stated.append(window_time_std_s(parts, batch_size))
    spread = statistics.stdev(means)
    stated_rms = math.sqrt(statistics.fmean(s * s for s in stated if s is not None))
    assert stated_rms == pytest.approx(spread, rel=0.08)
