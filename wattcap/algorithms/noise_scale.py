"""Noise-scale arithmetic (McCandlish et al. 2018): B_simple from the norms of gradients at two
batch sizes, smoothed with an interval over blocks of steps, and r_b from it. No torch."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from scipy import stats

from wattcap.core.defaults import DEFAULT_BATCH_SIZE_REF, DEFAULT_LR_REF
from wattcap.core.noise_scale import NoiseScaleEstimate

if TYPE_CHECKING:

    from wattcap.core.efficiency import EfficiencyVector


#: smoothing of |G|² and tr(Σ) over measured steps: a window of about 1/(1 - decay) = 20
#: steps, since one step's |G|² (16 chunks) scatters by ±50 % and ~20 bring that to ~10 %
DEFAULT_EMA_DECAY = 0.95

#: contiguous blocks of measured steps whose spread gives the interval on B_noise
DEFAULT_BLOCKS = 4

#: confidence level of that interval
GNS_CONFIDENCE = 0.95

#: the planner's predicted times need samples to target; GNS does not measure them, so a GNS
#: vector states E(b) as r_b times this nominal count (choices depend on r_b only)
NOMINAL_SAMPLES = 10_000

def simple_noise_terms(small_sq: float, big_sq: float, b_small: int, b_big: int
                       ) -> tuple[float, float]:
    """Unbiased (|G|², tr(Σ)) from squared gradient norms at two batch sizes."""
    if not 0 < b_small < b_big:
        raise ValueError(f"need 0 < b_small < b_big, got {b_small} and {b_big}")
    gradient_sq = (b_big * big_sq - b_small * small_sq) / (b_big - b_small)
    trace_sigma = (small_sq - big_sq) / (1.0 / b_small - 1.0 / b_big)
    return gradient_sq, trace_sigma

def _b_simple(gradient_sq: float, trace_sigma: float) -> float | None:
    if gradient_sq <= 0:
        return None
    return max(trace_sigma, 0.0) / gradient_sq

def ratio_of_sums(terms: Sequence[tuple[float, float]]) -> float | None:
    """B_simple of some steps' (|G|², tr(Σ)) terms: the ratio of their sums."""
    return _b_simple(sum(t[0] for t in terms), sum(t[1] for t in terms))


def block_estimates(terms: Sequence[tuple[float, float]], blocks: int) -> list[float | None]:
    """B_simple of each of `blocks` contiguous blocks of `terms` (fewer when fewer terms)."""
    n = len(terms)
    count = min(blocks, n)
    bounds = [round(i * n / count) for i in range(count + 1)]
    return [ratio_of_sums(terms[lo:hi]) for lo, hi in zip(bounds, bounds[1:], strict=False)]


def blocked_interval(center: float | None, blocks: Sequence[float | None], confidence: float
                     ) -> tuple[float | None, float | None]:
    """t-interval around `center` from the spread of log B over `blocks`; an end is None
    where a block did not resolve B (B ≤ 0 or unbounded there)."""
    if center is None:
        return None, None
    if len(blocks) < 2 or any(b is None for b in blocks):
        return (None if len(blocks) < 2 else center), None
    if any(b == 0 for b in blocks) or center == 0:
        return None, (center if center > 0 else None)
    logs = [math.log(b) for b in blocks if b is not None]
    half = (stats.t.ppf(0.5 + confidence / 2, len(logs) - 1)
            * statistics.stdev(logs) / math.sqrt(len(logs)))
    return center * math.exp(-half), center * math.exp(half)


class NoiseScaleTracker:
    """Smooths per-step (|G|², tr(Σ)) estimates into B_simple, with an interval from blocks."""

    def __init__(self, ema_decay: float = DEFAULT_EMA_DECAY, blocks: int = DEFAULT_BLOCKS,
                 confidence: float = GNS_CONFIDENCE) -> None:
        if not 0 <= ema_decay < 1:
            raise ValueError(f"the EMA decay must be in [0, 1), got {ema_decay}")
        if blocks < 2:
            raise ValueError(f"at least 2 blocks are needed for an interval, got {blocks}")
        if not 0 < confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {confidence}")
        self.ema_decay = ema_decay
        self.blocks = blocks
        self.confidence = confidence
        self.terms: list[tuple[float, float]] = []
        self.sizes: list[tuple[int, int]] = []
        self._ema_g = self._ema_s = 0.0
        self._weight = 0.0

    @property
    def steps(self) -> int:
        """Steps observed."""
        return len(self.terms)

    def observe(self, small_sq: float, big_sq: float, b_small: int, b_big: int) -> None:
        """One step's mean squared chunk-gradient norm (at b_small) and squared batch-gradient
        norm (at b_big)."""
        if not (math.isfinite(small_sq) and math.isfinite(big_sq)):
            raise ValueError("gradient norms must be finite (the loss diverged?)")
        if not small_sq > 0:
            raise ValueError("the chunks' gradients are all zero: nothing to measure")
        g, s = simple_noise_terms(small_sq, big_sq, b_small, b_big)
        g, s = g / small_sq, s / small_sq  # scale-free (see the module docstring)
        self.terms.append((g, s))
        self.sizes.append((b_small, b_big))
        d = self.ema_decay
        self._ema_g = d * self._ema_g + (1 - d) * g
        self._ema_s = d * self._ema_s + (1 - d) * s
        self._weight = d * self._weight + (1 - d)

    @property
    def gradient_sq(self) -> float:
        """The bias-corrected moving average of |G|² (relative to |G_bs|²)."""
        return self._ema_g / self._weight if self._weight else 0.0

    @property
    def trace_sigma(self) -> float:
        """The bias-corrected moving average of tr(Σ) (relative to |G_bs|²)."""
        return self._ema_s / self._weight if self._weight else 0.0

    def b_simple(self) -> float | None:
        """B_simple now (None: |G|² not resolved, or nothing observed)."""
        if not self.terms:
            return None
        return _b_simple(self.gradient_sq, self.trace_sigma)

    def block_estimates(self) -> list[float | None]:
        """B_simple of each contiguous block of observed steps (ratio of the block's sums)."""
        return block_estimates(self.terms, self.blocks)

    def interval(self) -> tuple[float | None, float | None]:
        """t-interval on B_noise from the blocks' spread of log B, around the smoothed value;
        an end is None when a block did not resolve it (B_noise ≤ 0 or unbounded there)."""
        return blocked_interval(self.b_simple(), self.block_estimates(), self.confidence)

    def estimate(self, samples: int, warmup_steps: int = 0,
                 preconditioner: Literal["adam", "none"] = "none") -> NoiseScaleEstimate:
        """The estimate so far. Raises ValueError before any step was observed."""
        if not self.terms:
            raise ValueError("no step was measured: the noise scale needs at least one step "
                             "with two batch sizes")
        low, high = self.interval()
        b_small = min(s for s, _ in self.sizes)
        b_big = max(b for _, b in self.sizes)
        return NoiseScaleEstimate(
            b_noise=self.b_simple(), b_noise_low=low, b_noise_high=high,
            confidence=self.confidence, b_small=b_small, b_big=b_big, steps=self.steps,
            warmup_steps=warmup_steps, samples=samples, ema_decay=self.ema_decay,
            preconditioner=preconditioner, gradient_sq_rel=self.gradient_sq,
            trace_sigma_rel=self.trace_sigma, block_b_noise=self.block_estimates())

# -- the efficiency vector -----------------------------------------------------------------------
def gns_efficiency_vector(
    estimate: NoiseScaleEstimate,
    batch_sizes: Sequence[int],
    *,
    model: str,
    input_shape: list[int],
    dataset: str,
    task: str,
    target_accuracy: float,
    target_accuracy_source: Literal["given", "auto", "reached"] = "reached",
    target_accuracy_rule: str | None = None,
    optimizer: str = "adam",
    lr_ref: float = DEFAULT_LR_REF,
    batch_size_ref: int = DEFAULT_BATCH_SIZE_REF,
    seed: int = 0,
    eval_every_samples: int = 0,
    notes: Sequence[str] = (),
    architecture_fingerprint: str | None = None,
) -> EfficiencyVector:
    """The efficiency vector r(b) = (1 + b/B_noise) / (1 + b_max/B_noise) for `batch_sizes`,
    every entry with source "gns" and the interval from B_noise's; E(b) is r(b) times
    NOMINAL_SAMPLES (GNS measures no samples to target)."""
    from wattcap.core.efficiency import EfficiencyEntry, EfficiencyVector

    if not batch_sizes:
        raise ValueError("at least one batch size is needed")
    reference = max(batch_sizes)
    entries = []
    for b in sorted(set(batch_sizes)):
        ratio = estimate.ratio(b, reference)
        low, high = estimate.ratio_interval(b, reference)
        entries.append(EfficiencyEntry(
            batch_size=b, samples_per_seed=[], budget_per_seed=[], samples_mean=None,
            samples_std=None, samples=ratio * NOMINAL_SAMPLES, ratio=ratio, ratio_low=low,
            ratio_high=high, ratio_std=None, source="gns"))
    how = [f"r_b from the gradient noise scale: {estimate.describe()}",
           f"samples to target are not measured by GNS: E(b) = r_b x {NOMINAL_SAMPLES} "
           "(nominal; predicted times scale with it, choices do not)"]
    return EfficiencyVector(
        model=model, input_shape=list(input_shape), dataset=dataset, task=task,
        target_accuracy=target_accuracy, target_accuracy_source=target_accuracy_source,
        target_accuracy_rule=target_accuracy_rule, seeds=[seed], optimizer=optimizer,
        lr_ref=lr_ref, batch_size_ref=batch_size_ref, sample_budget=estimate.samples,
        eval_every_samples=eval_every_samples, reference_batch_size=reference, fit=None,
        ratio_source="gns", noise_scale=estimate, entries=entries, notes=[*notes, *how],
        training_samples=estimate.samples, architecture_fingerprint=architecture_fingerprint)
