"""A gradient-noise-scale measurement as a record: B_noise with its interval and how it was
measured."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class NoiseScaleEstimate(BaseModel):
    """B_noise measured from gradient norms during a run, with how it was measured."""

    model_config = ConfigDict(extra="forbid")
    #: the smoothed B_simple; None: |G|² was not resolved above the noise (B_noise beyond
    #: anything measurable: every batch size is as efficient as the largest)
    b_noise: float | None
    #: interval at `confidence` from the variation across blocks; None: unbounded that side
    b_noise_low: float | None
    b_noise_high: float | None
    confidence: float
    #: the chunk (small) and batch (big) sizes the norms were measured at
    b_small: int
    b_big: int
    #: steps measured, and steps trained before measuring (no preconditioner yet)
    steps: int
    warmup_steps: int
    #: samples trained by the run while measuring (warm-up included)
    samples: int
    ema_decay: float
    #: "adam": gradients preconditioned by the optimiser's second moments; "none": raw
    preconditioner: Literal["adam", "none"]
    #: the smoothed |G|² and tr(Σ), each step's divided by its mean squared chunk norm
    gradient_sq_rel: float
    trace_sigma_rel: float
    #: B_simple of each block of measured steps (None: |G|² not resolved in that block)
    block_b_noise: list[float | None]

    def ratio(self, batch_size: float, reference: float) -> float:
        """r(b) = (1 + b/B_noise) / (1 + b_ref/B_noise) = (B + b) / (B + b_ref)."""
        return _ratio(self.b_noise, batch_size, reference)

    def ratio_interval(self, batch_size: float, reference: float) -> tuple[float, float]:
        """The interval on r(b) implied by the one on B_noise (r is monotone in B)."""
        at_low = _ratio(self.b_noise_low, batch_size, reference)
        at_high = _ratio(self.b_noise_high, batch_size, reference)
        return min(at_low, at_high), max(at_low, at_high)

    def describe(self) -> str:
        """One line: B_noise with its interval and how it was measured."""
        value = "unbounded" if self.b_noise is None else f"{self.b_noise:.3g}"
        low = "0" if self.b_noise_low is None else f"{self.b_noise_low:.3g}"
        high = "inf" if self.b_noise_high is None else f"{self.b_noise_high:.3g}"
        how = "Adam-preconditioned" if self.preconditioner == "adam" else "raw"
        return (f"B_noise = {value} [{low}, {high}] ({self.confidence:.0%} interval over "
                f"{len(self.block_b_noise)} blocks of steps) from {how} gradient norms at "
                f"b = {self.b_small} and {self.b_big}, {self.steps} steps measured after "
                f"{self.warmup_steps} warm-up ({self.samples} samples), EMA decay "
                f"{self.ema_decay:g}")

def _ratio(b_noise: float | None, batch_size: float, reference: float) -> float:
    if b_noise is None:  # B_noise → ∞: no batch size needs more samples than another
        return 1.0
    return (b_noise + batch_size) / (b_noise + reference)


class NoiseScaleWindow(BaseModel):
    """B_simple over one window of a run's samples, (samples_start, samples_end], with its
    interval from the spread of the window's blocks of steps."""

    model_config = ConfigDict(extra="forbid")
    samples_start: int
    samples_end: int
    #: measured steps in the window
    steps: int
    #: None: |G|² not resolved over the window
    b_simple: float | None
    #: interval at the trajectory's confidence; None: unbounded that side (or too few blocks)
    b_low: float | None
    b_high: float | None


class NoiseScaleTrajectory(BaseModel):
    """B_simple of one run, window by window over doublings of its samples: the reference a
    target run's own measurement is compared with (wattcap.algorithms.noise_correction)."""

    model_config = ConfigDict(extra="forbid")
    #: the batch size the run trained at, and the chunk (small batch) it was measured with
    batch_size: int
    chunk_size: int
    #: "adam": gradients preconditioned by the optimiser's second moments; "none": raw
    preconditioner: Literal["adam", "none"]
    confidence: float
    windows: list[NoiseScaleWindow]
    #: runs (seeds) the windows combine: with more than one, each window's interval holds
    #: the runs' spread too (`wattcap.algorithms.noise_windows.combine_runs`)
    runs: int = 1

    def window_ending(self, samples_end: int) -> NoiseScaleWindow | None:
        """The window that ends at `samples_end` (windows end at powers of two), or None."""
        return next((w for w in self.windows if w.samples_end == samples_end), None)

    @property
    def samples_covered(self) -> int:
        """The end of the last window (0: none)."""
        return max((w.samples_end for w in self.windows), default=0)
