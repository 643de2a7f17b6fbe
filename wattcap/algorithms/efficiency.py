"""An efficiency vector from samples-to-target per batch size and seed: the large-batch fit
over every run (missed runs censored), r_b relative to the largest batch size."""

from __future__ import annotations

import math
import statistics
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

from wattcap.algorithms.large_batch import fit_large_batch
from wattcap.core.efficiency import EfficiencyEntry, EfficiencyVector, RatioSource

if TYPE_CHECKING:
    from wattcap.core.large_batch import LargeBatchFit
    from wattcap.core.noise_scale import NoiseScaleEstimate


def vector_from_samples(
    samples: dict[int, list[float | None]],
    sample_budget: int,
    budgets: dict[int, list[int]] | None = None,
    use_fit: bool = True,
    **metadata: Any,
) -> EfficiencyVector:
    """Build the vector from samples-to-target per batch size and seed (None: that run
    missed the target within its budget) and the sample budget.

    `budgets[b]` gives each seed's budget where runs were re-run with a larger one
    (default: `sample_budget` for every run). The large-batch relation is fitted to every
    run (missed runs as censored). With a good fit r_b is the fit's; with a poor one the
    raw mean. Where a run missed the target r_b is extrapolated from the fit, never below
    the mean that counts the missed run at its budget (a floor the data proves).
    r_b is always relative to the largest batch size, also when it missed the target.
    `use_fit=False` keeps the raw means of what was measured (the fit is still recorded):
    the brute-force oracle over measured runs, which must not pick a batch size on a model
    of its samples. Raises ValueError when no run reached the target.
    """
    if not samples or any(not per_seed for per_seed in samples.values()):
        raise ValueError("samples to target are needed for at least one batch size and seed")
    if sample_budget <= 0:
        raise ValueError(f"the sample budget must be positive, got {sample_budget}")
    budgets = budgets or {b: [sample_budget] * len(per_seed)
                          for b, per_seed in samples.items()}
    if all(s is None for per_seed in samples.values() for s in per_seed):
        raise ValueError("no batch size reached the target accuracy within the sample budget")
    fit = fit_large_batch(samples, budgets)
    reference = max(samples)

    def used_samples(b: int) -> tuple[float, RatioSource]:
        per_seed = samples[b]
        reached = [s for s in per_seed if s is not None]
        extended = any(budget > sample_budget for budget in budgets[b])
        if not use_fit and len(reached) == len(per_seed):
            return statistics.fmean(reached), "extended-budget" if extended else "mean"
        if len(reached) < len(per_seed):
            # a missed run needed more than its budget: the mean counting it at its budget
            # is a hard floor, which keeps a batch size that failed a run from being
            # chosen on a fit that calls the failure noise
            floor = statistics.fmean(
                budget if s is None else s for s, budget in zip(per_seed, budgets[b],
                                                                strict=True))
            return max(fit.mean_samples(b), floor), "extrapolated"
        source: RatioSource = "extended-budget" if extended else (
            "fit" if fit.good else "mean")
        return (fit.mean_samples(b) if fit.good else statistics.fmean(reached)), source

    ref_samples, _ = used_samples(reference)
    entries = []
    for b in sorted(samples):
        per_seed = samples[b]
        reached = [float(s) for s in per_seed if s is not None]
        value, source = used_samples(b)
        low = high = None
        if fit.good and value == fit.mean_samples(b) and (
                ref_samples == fit.mean_samples(reference)):
            # the interval is the fit's; a floored E(b) or E(b_max) is not the fit's r_b
            low, high = fit.ratio_interval(b, reference)
        ratios = [s / ref_samples for s in reached]
        entries.append(EfficiencyEntry(
            batch_size=b,
            samples_per_seed=[None if s is None else float(s) for s in per_seed],
            budget_per_seed=[int(x) for x in budgets[b]],
            samples_mean=statistics.fmean(reached) if reached else None,
            samples_std=statistics.stdev(reached) if len(reached) > 1 else None,
            samples=value,
            ratio=value / ref_samples,
            ratio_low=low,
            ratio_high=high,
            ratio_std=statistics.stdev(ratios) if len(ratios) > 1 else None,
            source=source,
        ))
    notes = list(metadata.pop("notes", []))
    notes.append(f"large-batch fit: {fit.describe()}")
    if any(s is None for s in samples[reference]):
        notes.append(f"b={reference} missed the target in some runs: its samples come from "
                     "the fit, and every r_b is still relative to it")
    return EfficiencyVector(
        sample_budget=sample_budget, reference_batch_size=reference, fit=fit,
        ratio_source="fit" if fit.good and use_fit else "mean", entries=entries,
        notes=notes,
        **metadata,
    )


def ratios_for_batch_sizes(
    vector: EfficiencyVector, batch_sizes: list[int], extrapolate: bool = True,
) -> tuple[dict[int, float | None], dict[int, float], list[str]]:
    """r_b and samples-to-target for every batch size of a profile, also those the proxy did not
    run, so that a profile's grid need not match the proxy's. Between the proxy's batch sizes:
    the large-batch relation, from the fit when it is good (or from B_noise of a noise-scale
    vector), else r_b interpolated linearly in log b between the two neighbouring measured batch
    sizes. Outside the measured range: from a fitted relation (flagged: its uncertainty grows
    with the distance, `ratio_log_spread`), unless `extrapolate` is False; without a relation,
    or with `extrapolate` False, None (never chosen). The notes say which batch sizes were
    predicted and how."""
    measured = sorted(e.batch_size for e in vector.entries)
    ratios: dict[int, float | None] = {}
    samples: dict[int, float] = {}
    between: list[int] = []
    outside: list[int] = []
    extrapolated: list[int] = []
    reference = vector.entry(vector.reference_batch_size)
    for b in batch_sizes:
        entry = vector.entry(b)
        if entry is not None:
            ratios[b], samples[b] = entry.ratio, entry.samples
            continue
        inside = bool(measured) and measured[0] < b < measured[-1]
        ratio = _relation_ratio(vector, b) if inside or extrapolate else None
        if inside and ratio is None:
            ratio = _log_interpolated_ratio(vector, measured, b)
        if ratio is None or reference is None:
            ratios[b] = None
            samples[b] = 0.0
            if not inside:
                outside.append(b)
            continue
        ratios[b], samples[b] = ratio, ratio * reference.samples
        (between if inside else extrapolated).append(b)
    notes = []
    how = ("the large-batch relation" if _relation(vector) is not None
           else "r_b interpolated in log b between the neighbouring measured batch sizes")
    span = f"[{measured[0]}, {measured[-1]}]" if measured else "[]"
    if between:
        notes.append(f"r_b predicted for b = {between} (not run on {vector.dataset}) from {how}")
    if extrapolated:
        notes.append(f"r_b extrapolated from the large-batch relation for b = {extrapolated}, "
                     f"outside the batch sizes run on {vector.dataset} {span}: its uncertainty "
                     "widens with each doubling beyond them (--no-extrapolate keeps to them)")
    if outside:
        notes.append(f"b = {outside} lie outside the batch sizes run on {vector.dataset} "
                     f"{span}: not chosen" + (" (--no-extrapolate; without it they are "
                                              "predicted from the large-batch relation)"
                                              if _relation(vector) is not None
                                              else " (the vector has no fitted relation to "
                                              "extrapolate from)"))
    return ratios, samples, notes


def _relation(vector: EfficiencyVector) -> LargeBatchFit | NoiseScaleEstimate | None:
    """The large-batch relation that stands for the vector's r_b: a noise-scale vector's
    estimate, or a good fit; None when r_b comes from raw means."""
    if vector.noise_scale is not None:
        return vector.noise_scale
    return vector.fit if vector.ratio_source == "fit" else None


def _relation_ratio(vector: EfficiencyVector, batch_size: int) -> float | None:
    """r_b = (B_noise + b) / (B_noise + b_ref) of the vector's relation, or None."""
    relation = _relation(vector)
    return None if relation is None else relation.ratio(batch_size,
                                                        vector.reference_batch_size)


def _log_interpolated_ratio(vector: EfficiencyVector, measured: list[int],
                            batch_size: int) -> float | None:
    """r_b linear in log b between the measured neighbours of b (both must have an r_b)."""
    low = max(b for b in measured if b < batch_size)
    high = min(b for b in measured if b > batch_size)
    r_low, r_high = vector.ratio(low), vector.ratio(high)
    if r_low is None or r_high is None:
        return None
    weight = math.log(batch_size / low) / math.log(high / low)
    return r_low + weight * (r_high - r_low)


def doublings_outside(vector: EfficiencyVector, batch_size: int) -> float:
    """How many doublings b lies beyond the batch sizes the vector ran (0 within them)."""
    measured = [e.batch_size for e in vector.entries]
    if not measured or min(measured) <= batch_size <= max(measured):
        return 0.0
    edge = min(measured) if batch_size < min(measured) else max(measured)
    return abs(math.log2(batch_size / edge))


def ratio_log_spread(vector: EfficiencyVector, batch_size: int) -> float:
    """One standard deviation of the estimate of ln r_b: from the interval on r_b of the
    large-batch relation (the fit's, or a noise-scale vector's, at its confidence, read as
    normal in log r), else the standard error of the seeds' mean ratio; for a batch size that
    rests on a single run where others have more, one run's spread pooled over those; 0 for the
    reference batch size (r = 1 by definition) and where none is known (one seed). Outside the
    batch sizes the vector ran, a term grows with the distance: the spread across the whole
    measured range (that of the smallest batch size run, against the largest) once per
    doubling beyond it, added in quadrature. The relation was fitted where it was measured and
    nothing says how well it holds past that; a stated rule, not fitted on any bench."""
    within = _spread_within(vector, batch_size)
    doublings = doublings_outside(vector, batch_size)
    if doublings == 0:
        return within
    across = _spread_within(vector, min(e.batch_size for e in vector.entries))
    return math.hypot(within, doublings * across)


def _spread_within(vector: EfficiencyVector, batch_size: int) -> float:
    """`ratio_log_spread` before its widening beyond the measured range."""
    if batch_size == vector.reference_batch_size:
        return 0.0
    entry = vector.entry(batch_size)
    relation = _relation(vector)
    low = high = None
    if entry is not None:
        low, high = entry.ratio_low, entry.ratio_high
    elif relation is not None:  # a batch size predicted from the relation
        low, high = relation.ratio_interval(batch_size, vector.reference_batch_size)
    if relation is not None and low and high and high > low:
        z = NormalDist().inv_cdf(0.5 + relation.confidence / 2)
        return math.log(high / low) / (2 * z)
    if entry is not None and entry.ratio_std and entry.ratio:
        reached = sum(1 for s in entry.samples_per_seed if s is not None)
        return entry.ratio_std / entry.ratio / math.sqrt(max(reached, 1))
    if batch_size in vector.single_run_batch_sizes():
        # one run is not a mean: its spread is one run's, pooled over the batch sizes that
        # have more (the relative spread, read as a spread in log r)
        return vector.pooled_run_spread() or 0.0
    return 0.0
