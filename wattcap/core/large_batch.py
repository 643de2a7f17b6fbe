"""The fitted large-batch relation E(b) = E_min (1 + b/B_noise) as a record (the fit itself:
wattcap.algorithms.large_batch)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict


class LargeBatchFit(BaseModel):
    """E(b) = E_min·(1 + b/B_noise) fitted to every run, with its interval and quality."""

    model_config = ConfigDict(extra="forbid")
    e_min: float
    b_noise: float
    #: interval on B_noise at `confidence`; None: unbounded on that side
    b_noise_low: float | None
    b_noise_high: float | None
    confidence: float
    #: spread of log samples around the relation (0.1 ≈ 10 % between seeds)
    sigma_log: float
    observations: int
    censored: int
    lack_of_fit_p: float | None
    #: "good" (lack-of-fit p >= 0.05), "poor" (p < 0.05) or "untestable" (too few runs)
    quality: Literal["good", "poor", "untestable"]
    quality_reason: str
    #: quality == "good": the fit may stand in for the raw means
    good: bool

    def median_samples(self, batch_size: float) -> float:
        """E(b): the median samples to target at b."""
        return self.e_min * (1.0 + batch_size / self.b_noise)

    def mean_samples(self, batch_size: float) -> float:
        """The mean samples to target at b (a log-normal's mean: median · exp(σ²/2)), on the
        same scale as a plain mean over seeds."""
        return self.median_samples(batch_size) * math.exp(0.5 * self.sigma_log**2)

    def ratio(self, batch_size: float, reference: float) -> float:
        """r_b = E(b) / E(reference)."""
        return _ratio_at(self.b_noise, batch_size, reference)

    def ratio_interval(self, batch_size: float, reference: float) -> tuple[float, float]:
        """The interval on r_b implied by the interval on B_noise (r_b is monotone in it)."""
        # limits of (B + b) / (B + b_ref): b / b_ref as B → 0, 1 as B → ∞
        at_low = (batch_size / reference if self.b_noise_low is None
                  else _ratio_at(self.b_noise_low, batch_size, reference))
        at_high = 1.0 if self.b_noise_high is None else _ratio_at(self.b_noise_high, batch_size,
                                                                  reference)
        return min(at_low, at_high), max(at_low, at_high)

    def describe(self) -> str:
        """One line: B_noise with its interval and the quality verdict."""
        low = "0" if self.b_noise_low is None else f"{self.b_noise_low:.3g}"
        high = "inf" if self.b_noise_high is None else f"{self.b_noise_high:.3g}"
        return (f"B_noise = {self.b_noise:.3g} [{low}, {high}] ({self.confidence:.0%} CI), "
                f"E_min = {self.e_min:.4g} samples; fit {self.quality}: {self.quality_reason}")

def _ratio_at(b_noise: float, batch_size: float, reference: float) -> float:
    """E(b) / E(b_ref) = (B + b) / (B + b_ref): E_min cancels."""
    return (b_noise + batch_size) / (b_noise + reference)
