"""Expected cost with restarts: a seed that misses the target within its budget is not a
run with no time. Whoever trains that configuration pays the budget, finds the target
missed, and starts again; with a share p of seeds reaching the target, a run to the target
costs on average the mean cost of a reaching run plus (1 - p) / p failed budgets (the failures
before the first success of a geometric series of tries)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def expected_with_restarts(reached: Sequence[float], missed: Sequence[float]) -> float | None:
    """The expected cost (seconds, joules, samples) of reaching the target: `reached` the costs
    of the seeds that reached it, `missed` the costs of the budgets of those that did not;
    None when no seed reached it (no number of restarts is known to help)."""
    if not reached:
        return None
    mean_reached = statistics.fmean(reached)
    if not missed:
        return mean_reached
    share = len(reached) / (len(reached) + len(missed))
    return mean_reached + (1 - share) / share * statistics.fmean(missed)


def expected_over_runs(values: Sequence[float | None],
                       budget_costs: Sequence[float | None]) -> float | None:
    """`expected_with_restarts` over runs given one per seed: each run's cost to the target
    (None: it missed) and, for a missed run, what its whole budget cost (the others' entries
    are not read); None where no run reached the target or a missed run's budget cost is
    unknown (a file written before it was recorded)."""
    reached = [v for v in values if v is not None]
    missed = [b for v, b in zip(values, budget_costs, strict=False)
              if v is None and b is not None]
    if len(missed) != len(values) - len(reached):
        return None
    return expected_with_restarts(reached, missed)


def samples_with_restarts(per_seed: Sequence[float | None],
                          budgets: Sequence[float]) -> list[float] | None:
    """Per-seed samples to target whose mean is the expected samples with restarts: each
    missed seed (None) counts the reaching seeds' mean plus its own budget over p, the share
    that reached (so the mean is that mean plus (1 - p) / p budgets); None when no seed
    reached the target."""
    reached = [float(s) for s in per_seed if s is not None]
    if not reached:
        return None
    share = len(reached) / len(per_seed)
    mean_reached = statistics.fmean(reached)
    return [mean_reached + budget / share if s is None else float(s)
            for s, budget in zip(per_seed, budgets, strict=True)]


def planned_samples_with_restarts(per_seed: Sequence[float | None],
                                  budgets: Sequence[float]) -> float | None:
    """What a plan should expect a run of this batch size to cost in samples when the proxy's
    seeds reached the target only in part: the reaching seeds' mean plus (1 - p) / p of the
    missed seeds' mean budget (a run with the proxy's budget that misses is restarted). None
    when every seed reached it (nothing to add) or none did (restarts are not known to help;
    the fit's extrapolation stays, flagged)."""
    reached = [float(s) for s in per_seed if s is not None]
    missed = [float(b) for s, b in zip(per_seed, budgets, strict=True) if s is None]
    if not reached or not missed:
        return None
    return expected_with_restarts(reached, missed)


__all__ = ["expected_with_restarts", "planned_samples_with_restarts", "samples_with_restarts"]
