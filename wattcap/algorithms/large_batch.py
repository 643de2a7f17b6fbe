"""The empirical large-batch relation of McCandlish et al. 2018 ("An Empirical Model of
Large-Batch Training"), fitted to samples-to-target across batch sizes and seeds:

    E(b) = E_min · (1 + b / B_noise)

E_min is the number of samples needed with tiny batches, B_noise the batch size beyond which
larger batches stop saving steps. Every run (batch size, seed) is one observation; the fit
shares strength across all of them, so r_b = E(b) / E(b_ref) is not left to the noise of the
few seeds at one batch size.

Statistical model: log samples = log E(b) + σ·ε with ε standard normal. Log space because
samples-to-target scatters multiplicatively (a slow seed needs 30 % more at any b) and so one
slow seed weighs as much at b = 4 as at b = 128. A run that missed the target within its
budget is a censored observation (log samples > log budget), entering the likelihood through
the normal survival function (a Tobit model), so it pulls E(b) up instead of being dropped.

Fitted by maximum likelihood; B_noise by profiling the likelihood over a grid of log B_noise
(E_min and σ maximised at each point), which also gives its confidence interval: the B_noise
whose profile deviance stays under the small-sample threshold n·log(1 + F(1, n-2)/(n-2)) of
nonlinear least squares (Bates & Watts 1988), exact when nothing is censored. r_b depends on
B_noise only (E_min cancels) and monotonically, so each r_b's interval follows from it.

Fit quality is a lack-of-fit test against one free level per batch size (same σ): the
likelihood-ratio statistic, turned into the classic lack-of-fit F statistic with (k-2, n-k)
degrees of freedom (k batch sizes with a reached seed, n observations in them). Rule: the fit
is good when p ≥ 0.05 (the relation explains the differences between batch sizes within the
seeds' own spread); poor when p < 0.05; untestable (treated as not good) with fewer than 3
such batch sizes or without 2 seeds at one of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import optimize, special, stats

from wattcap.core.large_batch import LargeBatchFit

#: significance of the lack-of-fit test: below it the fit is poor
LACK_OF_FIT_ALPHA = 0.05
#: confidence level of the intervals on B_noise and r_b
CONFIDENCE = 0.95
#: smallest σ of log samples: samples-to-target is never known better than to 0.1 %, and a
#: perfect fit must not make the likelihood infinite
SIGMA_FLOOR = 1e-3
#: B_noise is searched from b_min / 1000 to b_max · 1000; an interval reaching either end is
#: unbounded on that side (the data cannot tell B_noise from 0 or from infinity)
SEARCH_FACTOR = 1000.0
_GRID_POINTS = 61
#: profile likelihoods closer than this are ties
_TIE_NLL = 1e-6
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)






@dataclass
class _Observations:
    """Runs as arrays: reached (log samples) and censored (log budget) with their batch size."""

    b_obs: np.ndarray
    y_obs: np.ndarray
    b_cen: np.ndarray
    c_cen: np.ndarray

    @property
    def n(self) -> int:
        return int(self.b_obs.size + self.b_cen.size)


def _observations(
    samples: Mapping[int, Sequence[float | None]], budgets: Mapping[int, Sequence[float]]
) -> _Observations:
    b_obs, y_obs, b_cen, c_cen = [], [], [], []
    for b, per_seed in samples.items():
        limits = budgets.get(b)
        if limits is None or len(limits) != len(per_seed):
            raise ValueError(f"b={b}: one budget per seed is needed, got {limits!r}")
        if b <= 0:
            raise ValueError(f"batch sizes must be positive, got {b}")
        for s, budget in zip(per_seed, limits, strict=True):
            if s is None:
                if not budget > 0:
                    raise ValueError(f"b={b}: a run that missed the target needs its budget "
                                     f"(> 0 samples), got {budget}")
                b_cen.append(b)
                c_cen.append(math.log(budget))
            else:
                if not (s > 0 and math.isfinite(s)):
                    raise ValueError(f"b={b}: samples to target must be positive, got {s}")
                b_obs.append(b)
                y_obs.append(math.log(s))
    return _Observations(np.array(b_obs, float), np.array(y_obs, float),
                         np.array(b_cen, float), np.array(c_cen, float))


def _censored_normal_mle(
    y: np.ndarray, y_group: np.ndarray, y_off: np.ndarray,
    c: np.ndarray, c_group: np.ndarray, c_off: np.ndarray, groups: int,
) -> tuple[float, np.ndarray, float]:
    """Minimum negative log-likelihood of y ~ N(θ[group] + off, σ²), c censored from above;
    returns (nll, θ, σ). Closed form without censoring, else BFGS with exact gradients."""
    counts = np.bincount(y_group, minlength=groups)
    theta = np.bincount(y_group, weights=y - y_off, minlength=groups) / np.maximum(counts, 1)
    resid = y - y_off - theta[y_group]
    sigma = max(math.sqrt(float(resid @ resid) / max(y.size, 1)), SIGMA_FLOOR)
    if c.size == 0:
        nll = y.size * (math.log(sigma) + _HALF_LOG_2PI) + float(resid @ resid) / (2 * sigma**2)
        return nll, theta, sigma

    def objective(params: np.ndarray) -> tuple[float, np.ndarray]:
        # σ = floor + e^t keeps σ above the floor without bounds (BFGS is unbounded)
        th, excess = params[:-1], math.exp(params[-1])
        s = SIGMA_FLOOR + excess
        z = (y - y_off - th[y_group]) / s
        w = (c - c_off - th[c_group]) / s
        log_sf = special.log_ndtr(-w)  # log P(ε > w), accurate far in the tail
        hazard = np.exp(-0.5 * w * w - _HALF_LOG_2PI - log_sf)
        nll = y.size * (math.log(s) + _HALF_LOG_2PI) + 0.5 * float(z @ z) - float(log_sf.sum())
        grad_theta = -(np.bincount(y_group, weights=z, minlength=groups)
                       + np.bincount(c_group, weights=hazard, minlength=groups)) / s
        grad_log_s = y.size - float(z @ z) - float(hazard @ w)
        return nll, np.append(grad_theta, grad_log_s * excess / s)

    start = np.append(theta, math.log(max(sigma - SIGMA_FLOOR, SIGMA_FLOOR)))
    result = optimize.minimize(objective, start, jac=True, method="BFGS")
    return float(result.fun), result.x[:-1], SIGMA_FLOOR + math.exp(float(result.x[-1]))


def _profile_nll(data: _Observations, log_b_noise: float) -> tuple[float, float, float]:
    """(nll, log E_min, σ) maximised over E_min and σ at a fixed B_noise."""
    b_noise = math.exp(log_b_noise)
    nll, theta, sigma = _censored_normal_mle(
        data.y_obs, np.zeros(data.y_obs.size, int), np.log1p(data.b_obs / b_noise),
        data.c_cen, np.zeros(data.c_cen.size, int), np.log1p(data.b_cen / b_noise), 1,
    )
    return nll, float(theta[0]), sigma


def _saturated_nll(data: _Observations) -> tuple[float, int, int]:
    """nll with one free level per batch size that has a reached run (batch sizes with only
    censored runs fit them perfectly: level → ∞); returns (nll, levels k, runs n in them)."""
    sizes = sorted(set(data.b_obs.tolist()))
    index = {b: i for i, b in enumerate(sizes)}
    keep = np.isin(data.b_cen, sizes)
    y_group = np.array([index[b] for b in data.b_obs.tolist()], int)
    c_group = np.array([index[b] for b in data.b_cen[keep].tolist()], int)
    nll, _, _ = _censored_normal_mle(
        data.y_obs, y_group, np.zeros(data.y_obs.size), data.c_cen[keep], c_group,
        np.zeros(int(keep.sum())), len(sizes),
    )
    return nll, len(sizes), int(data.y_obs.size + keep.sum())


def _lack_of_fit(
    nll_fit: float, data: _Observations
) -> tuple[float | None, Literal["good", "poor", "untestable"], str]:
    """(p-value, verdict, reason) of the lack-of-fit test."""
    nll_sat, k, n = _saturated_nll(data)
    df1, df2 = k - 2, n - k
    if df1 < 1 or df2 < 1:
        return None, "untestable", ("the lack-of-fit test needs at least 3 batch sizes that "
                                    "reached the target and 2 seeds at one of them")
    deviance = max(2.0 * (nll_fit - nll_sat), 0.0)
    f_stat = math.expm1(min(deviance / n, 700.0)) * df2 / df1
    p = float(stats.f.sf(f_stat, df1, df2))
    if p >= LACK_OF_FIT_ALPHA:
        return p, "good", (f"the relation explains the differences between batch sizes "
                           f"within the seeds' spread (lack-of-fit p = {p:.2f} >= "
                           f"{LACK_OF_FIT_ALPHA})")
    return p, "poor", (f"the samples depart from E(b) = E_min·(1 + b/B_noise) beyond the "
                       f"seeds' spread (lack-of-fit p = {p:.2g} < {LACK_OF_FIT_ALPHA})")


def _interval_end(profile, grid: np.ndarray, values: np.ndarray, best_x: float,
                  best_index: int, limit: float, step: int) -> float | None:
    """The log B_noise where the profile first rises above `limit`, walking the grid from the
    optimum in direction `step`; None when it never does within the search range."""
    j = best_index
    while 0 <= j + step < grid.size:
        j += step
        if values[j] > limit:
            inner = best_x if j - step == best_index else grid[j - step]
            return optimize.brentq(lambda x: profile(x) - limit, min(inner, grid[j]),
                                   max(inner, grid[j]), xtol=1e-6)
    return None


def fit_large_batch(
    samples: Mapping[int, Sequence[float | None]],
    budgets: Mapping[int, Sequence[float]],
    confidence: float = CONFIDENCE,
) -> LargeBatchFit:
    """Fit E(b) = E_min·(1 + b/B_noise) to samples-to-target per batch size and seed.

    `samples[b]` holds one value per seed (None: the run missed the target within its
    budget, a censored observation); `budgets[b]` the sample budget of each of those runs.
    Raises ValueError when no run reached the target or the input is malformed.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    data = _observations(samples, budgets)
    if data.y_obs.size == 0:
        raise ValueError("no run reached the target accuracy within its budget: nothing to fit")
    sizes = np.array(sorted(samples), float)
    grid = np.linspace(math.log(sizes[0] / SEARCH_FACTOR), math.log(sizes[-1] * SEARCH_FACTOR),
                       _GRID_POINTS)

    def profile(x: float) -> float:
        return _profile_nll(data, x)[0]

    values = np.array([profile(x) for x in grid])
    # Where the data cannot tell B_noise values apart (a flat profile: e.g. one batch size
    # reached, the others only bounded by their budgets), take the largest: the flattest E(b)
    # the data allow, the least extrapolation beyond what was measured.
    i = int(np.flatnonzero(values <= values.min() + _TIE_NLL)[-1])
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    refined = optimize.minimize_scalar(profile, bounds=(lo, hi), method="bounded",
                                       options={"xatol": 1e-6})
    best_x = float(refined.x) if refined.fun < values[i] - _TIE_NLL else float(grid[i])
    nll_fit, log_e_min, sigma = _profile_nll(data, best_x)

    n = data.n
    if n > 2:
        f_crit = float(stats.f.ppf(confidence, 1, n - 2))
        limit = nll_fit + 0.5 * n * math.log1p(f_crit / (n - 2))
        low = _interval_end(profile, grid, values, best_x, i, limit, -1)
        high = _interval_end(profile, grid, values, best_x, i, limit, +1)
    else:
        low = high = None
    p, quality, reason = _lack_of_fit(nll_fit, data)
    return LargeBatchFit(
        e_min=math.exp(log_e_min), b_noise=math.exp(best_x),
        b_noise_low=None if low is None else math.exp(low),
        b_noise_high=None if high is None else math.exp(high),
        confidence=confidence, sigma_log=sigma, observations=n, censored=int(data.c_cen.size),
        lack_of_fit_p=p, quality=quality, quality_reason=reason, good=quality == "good",
    )
