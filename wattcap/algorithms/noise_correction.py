"""Learning from the target while it trains: its noise scale against the proxy's, window by
window, and the r_b a re-plan uses when the two part.

The proxy's r_b rests on its critical batch size B_noise. A target may have another; the
simple noise scale B_simple = tr(Σ)/|G|² (McCandlish et al. 2018) tracks B_noise up to a factor
that depends on the model's curvature, which the target shares with the proxy (same model, same
pre-trained weights), so the *ratio* of the two B_simple, measured the same way at the same
samples trained, estimates the ratio of their B_noise without that factor. (B_simple itself is
3-10x below the fitted B_noise on the bundled tasks: it is never compared with the fit.)

Each closed window of the target gives evidence k = B_target / B_proxy over the same window of
the proxy's reference trajectory (measured at the batch size nearest the target's), with an
interval from both windows' intervals (half-widths in log B added in quadrature: each is a
jackknife t-interval over 8 blocks of steps, so the combined one is approximate). The windows'
evidence is pooled over the run so far (inverse-variance weights on log k): one window's factor
scatters by 2-3x, and the ratio of two tasks' noise scales moved little over training on the
bundled digits with label noise (2.3-4.0x over five windows, 10 seeds), so all of it counts.
The policy re-plans when the pooled interval excludes every factor within `RELEVANT_FACTOR` of
the factor already applied (1 at the start): a difference of noise scale below 1.5x moves r_b
by less than the spread of a sweep's r_b on the bundled tasks, and requiring a relevant
difference, not only a significant one, keeps a run whose proxy was right from re-planning on
the windows' chance excursions. One window closes per doubling of samples, so a run re-plans
at most once per doubling.

The re-plan's r_b is the proxy's moved along the large-batch relation to B' = k·B
(`wattcap.algorithms.transfer.shifted_ratios`), as the robust first choice moves it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from wattcap.algorithms.transfer import proxy_b_noise, relation_shift
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.noise_scale import NoiseScaleTrajectory, NoiseScaleWindow

#: the smallest change of the noise-scale factor worth a re-plan (see the module docstring)
RELEVANT_FACTOR = 1.5


@dataclass(frozen=True)
class FactorInterval:
    """A factor of the target's noise scale over the proxy's, with its interval."""

    factor: float
    factor_low: float
    factor_high: float

    @property
    def spread(self) -> float:
        """How far the factor may lie from `factor` either way: the interval's wider side, as
        a ratio (>= 1)."""
        return max(self.factor_high / self.factor, self.factor / self.factor_low)

    def beyond(self, factor: float, relevant: float = RELEVANT_FACTOR) -> bool:
        """The interval lies wholly outside [factor/relevant, factor·relevant]."""
        return self.factor_low > factor * relevant or self.factor_high < factor / relevant


@dataclass(frozen=True)
class TransferEvidence(FactorInterval):
    """One window's B_simple on the target over the proxy's, with an interval."""

    target: NoiseScaleWindow
    reference: NoiseScaleWindow
    #: the batch size the reference was measured at
    reference_batch_size: int

    def describe(self) -> str:
        """One line: the window, both B_simple and the factor with its interval."""
        t, r = self.target, self.reference
        return (f"samples ({t.samples_start}, {t.samples_end}]: target B_simple "
                f"{t.b_simple:.3g} over {t.steps} measured steps, proxy {r.b_simple:.3g} "
                f"(b={self.reference_batch_size}): factor {self.factor:.2f} "
                f"[{self.factor_low:.2f}, {self.factor_high:.2f}]")


def nearest_reference(references: list[NoiseScaleTrajectory], batch_size: int
                      ) -> NoiseScaleTrajectory | None:
    """The reference measured at the batch size nearest `batch_size` (in log), or None."""
    if not references:
        return None
    return min(references, key=lambda t: (abs(math.log(t.batch_size / batch_size)),
                                          -t.batch_size))


def transfer_evidence(target: NoiseScaleWindow, references: list[NoiseScaleTrajectory],
                      batch_size: int) -> TransferEvidence | str:
    """The evidence of a closed target window at `batch_size`, or why there is none."""
    reference = nearest_reference(references, batch_size)
    if reference is None:
        return ("no reference of the proxy's noise scale measured as this run measures (its "
                "preconditioning, as many parts per batch)")
    window = reference.window_ending(target.samples_end)
    if window is None:
        return (f"the proxy's reference ends at {reference.samples_covered} samples: "
                f"nothing to compare samples ({target.samples_start}, {target.samples_end}] "
                "with")
    half_t = _log_half_width(target)
    half_r = _log_half_width(window)
    if half_t is None or half_r is None:
        which = "target's" if half_t is None else "proxy's"
        return (f"samples ({target.samples_start}, {target.samples_end}]: the {which} noise "
                "scale is not resolved there (|G|² within its noise, or too few steps)")
    assert target.b_simple is not None and window.b_simple is not None
    log_k = math.log(target.b_simple / window.b_simple)
    half = math.hypot(half_t, half_r)
    return TransferEvidence(target=target, reference=window,
                            reference_batch_size=reference.batch_size,
                            factor=math.exp(log_k), factor_low=math.exp(log_k - half),
                            factor_high=math.exp(log_k + half))


def _log_half_width(window: NoiseScaleWindow) -> float | None:
    """The larger half-width of the window's interval in log B, None where unbounded."""
    b, low, high = window.b_simple, window.b_low, window.b_high
    if b is None or low is None or high is None or min(b, low) <= 0:
        return None
    return max(math.log(high / b), math.log(b / low))


@dataclass(frozen=True)
class PooledEvidence(FactorInterval):
    """The factor over every resolved window so far: log k weighted by the inverse square of
    each window's half-width (each a t-interval with the same degrees of freedom, so the
    pooled half-width keeps that quantile: conservative)."""

    windows: int
    samples_end: int

    def describe(self) -> str:
        """One line: the pooled factor with its interval."""
        return (f"factor {self.factor:.2f} [{self.factor_low:.2f}, {self.factor_high:.2f}] "
                f"over {self.windows} window(s) to {self.samples_end} samples")


def pooled_evidence(evidence: list[TransferEvidence]) -> PooledEvidence:
    """The inverse-variance pooled factor of `evidence` (at least one window)."""
    if not evidence:
        raise ValueError("no evidence to pool")
    weights, logs = [], []
    for e in evidence:
        half = math.log(e.factor_high / e.factor)
        weights.append(1.0 / max(half, 1e-9) ** 2)
        logs.append(math.log(e.factor))
    total = sum(weights)
    log_k = sum(w * v for w, v in zip(weights, logs, strict=True)) / total
    half = 1.0 / math.sqrt(total)
    return PooledEvidence(windows=len(evidence), samples_end=evidence[-1].target.samples_end,
                          factor=math.exp(log_k), factor_low=math.exp(log_k - half),
                          factor_high=math.exp(log_k + half))


@dataclass
class CorrectionPolicy:
    """When the target's evidence moves the factor a run plans with (see the module)."""

    #: the factor the run's r_b is moved by now (1: the proxy's r_b as it is), and how far
    #: the target's B_noise may still lie from it either way (its pooled interval's wider
    #: side, a ratio >= 1; None: nothing applied yet)
    applied_factor: float = 1.0
    applied_spread: float | None = None
    relevant: float = RELEVANT_FACTOR
    evidence: list[TransferEvidence] = field(default_factory=list)

    def consider(self, window: TransferEvidence) -> PooledEvidence | None:
        """Pool `window` with the evidence before it; the pooled evidence when it is beyond
        the applied factor (the run applies it with `apply` when it re-plans), else None."""
        self.evidence.append(window)
        pooled = pooled_evidence(self.evidence)
        if not pooled.beyond(self.applied_factor, self.relevant):
            return None
        return pooled

    def apply(self, pooled: PooledEvidence) -> None:
        """The run now plans with `pooled`'s factor."""
        self.applied_factor = pooled.factor
        self.applied_spread = pooled.spread


def corrected_vector(efficiency: EfficiencyVector, factor: float, why: str
                     ) -> EfficiencyVector:
    """The proxy's vector with every r_b (its interval and E(b)) moved to B' = factor·B along
    the large-batch relation; raises ValueError where the vector has no B_noise."""
    b_noise = proxy_b_noise(efficiency)
    if b_noise is None or b_noise <= 0:
        raise ValueError("the efficiency vector has no B_noise (no large-batch fit, no noise "
                         "scale) to move: the online correction needs one")
    ref = efficiency.reference_batch_size
    entries = []
    for entry in efficiency.entries:
        shift = relation_shift(entry.batch_size, b_noise, b_noise * factor, ref)

        def moved(value: float | None, shift: float = shift) -> float | None:
            return None if value is None else value * shift

        entries.append(entry.model_copy(update={
            "ratio": entry.ratio * shift, "ratio_low": moved(entry.ratio_low),
            "ratio_high": moved(entry.ratio_high), "samples": moved(entry.samples)}))
    note = (f"r_b moved to a target B_noise {factor:.2f}x the {efficiency.dataset} proxy's "
            f"{b_noise:.3g} (the large-batch relation), from the target's noise scale: {why}")
    return efficiency.model_copy(update={"entries": entries,
                                         "notes": [*efficiency.notes, note]})
