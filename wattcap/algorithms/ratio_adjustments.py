"""Adjustments of the proxy's r_b before a plan: the expected cost with restarts where some
seeds missed, and a quantile over r_b's uncertainty (`--risk`)."""

from __future__ import annotations

import math
from statistics import NormalDist

from wattcap.algorithms.efficiency import ratio_log_spread
from wattcap.algorithms.restarts import planned_samples_with_restarts
from wattcap.core.efficiency import EfficiencyVector


def at_risk(efficiency: EfficiencyVector, ratios: dict[int, float | None],
             samples: dict[int, float], risk: float) -> str:
    """r_b (and samples to target) at its `risk` quantile over its uncertainty, in place; the
    note that says so."""
    z = NormalDist().inv_cdf(risk)
    for b, ratio in ratios.items():
        if ratio is not None:
            factor = math.exp(z * ratio_log_spread(efficiency, b))
            ratios[b], samples[b] = ratio * factor, samples[b] * factor
    return (f"r_b at its {risk:.0%} quantile over its uncertainty (--risk {risk:g}): the plan "
            "minimises that quantile of the time to target, not its median")


def with_restarts(efficiency: EfficiencyVector, ratios: dict[int, float | None],
                   samples: dict[int, float]) -> str | None:
    """Where some of the proxy's seeds missed the target within their budget, r_b (and
    samples) become the expected cost with restarts, in place: the reaching seeds' mean plus
    (1 - p) / p missed budgets, never below the estimate it replaces. The note that says so."""
    changed = []
    reference = efficiency.entry(efficiency.reference_batch_size)
    for entry in efficiency.entries:
        b = entry.batch_size
        expected = planned_samples_with_restarts(entry.samples_per_seed, entry.budget_per_seed)
        ratio = ratios.get(b)
        if (expected is None or ratio is None or reference is None or samples[b] <= 0
                or expected <= samples[b]):
            continue
        ratios[b], samples[b] = ratio * expected / samples[b], expected
        reached = sum(s is not None for s in entry.samples_per_seed)
        changed.append(f"b={b} ({reached}/{len(entry.samples_per_seed)} seeds)")
    if not changed:
        return None
    return ("r_b with restarts where some proxy seeds missed the target within their budget: "
            f"{', '.join(changed)} — the expected cost is the reaching seeds' mean plus "
            "(1 - p)/p budgets, as a run that misses is restarted")
