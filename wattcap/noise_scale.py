"""The gradient noise scale: r_b from one short run instead of a sweep over batch sizes.

McCandlish et al. 2018 ("An Empirical Model of Large-Batch Training") relate the samples a run
needs to its batch size through the noise scale B_noise, E(b) = E_min·(1 + b/B_noise), and
show that the *simple* noise scale

    B_simple = tr(Σ) / |G|²        (Σ: per-sample gradient covariance, G: the true gradient)

predicts B_noise. Both terms follow from gradient norms measured at two batch sizes, because
E|G_b|² = |G|² + tr(Σ)/b. Unbiased estimators from a small batch b_s and a big batch b_B
(their Appendix A.1):

    |G|²   ≈ (b_B·|G_bB|² − b_s·|G_bs|²) / (b_B − b_s)
    tr(Σ)  ≈ (|G_bs|² − |G_bB|²) / (1/b_s − 1/b_B)

One training step gives both for free: its batch (b_B) is split into chunks of b_s, each chunk's
gradient is taken on its own (|G_bs|² is their mean squared norm) and their mean is the
batch's gradient (|G_bB|²), which the optimiser then applies, so the run trains as usual.
Each estimate is noisy, and their ratio biased, so numerator and denominator are smoothed
separately over steps (bias-corrected exponential moving averages) and divided at the end.
Before smoothing, each step's pair is divided by that step's mean squared chunk norm |G_bs|²,
so that every step weighs the same whatever the scale of its gradients: with Adam the
preconditioner changes that scale by orders of magnitude over the first steps (after one step
its second-moment estimate is a single squared gradient), and the loss changes it too.

For Adam and AdamW the noise that matters is the one in the preconditioned update, so, as
Pollux (Qiao et al., OSDI 2021) does, gradients are measured after the optimiser's diagonal
preconditioner P = 1/(sqrt(v̂) + ε), v̂ the bias-corrected second-moment estimate: B =
tr(PΣP)/|PG|². Steps before the optimiser has a second-moment estimate are trained but not
measured (their units would differ from the later ones'). Plain SGD is measured unpreconditioned.

Chunks of a batch normalise with their own statistics (BatchNorm sees b_s samples, as in
"ghost batch normalisation") while the noise scale is measured; that is the run's only change.

The uncertainty on B_noise comes from its variation over steps: the measured steps are cut
into contiguous blocks, B is computed in each, and the spread of log B across blocks gives a
t-interval around the smoothed estimate. The noise scale grows as training goes on, so this
spread also says how much B_noise moved during the measurement.

r(b) = (1 + b/B_noise) / (1 + b_max/B_noise) then stands in for the sweep's r_b
(`gns_efficiency_vector`); `estimate_efficiency_gns` measures it on a proxy data set.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict
from scipy import stats

from wattcap.defaults import DEFAULT_BATCH_SIZE_REF, DEFAULT_LR_REF

if TYPE_CHECKING:
    import torch

    from wattcap.data import Dataset
    from wattcap.efficiency import EfficiencyVector

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
#: samples a proxy's GNS run trains when no target stops it earlier
DEFAULT_GNS_SAMPLES = 4096


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
        n = len(self.terms)
        count = min(self.blocks, n)
        bounds = [round(i * n / count) for i in range(count + 1)]
        out = []
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            g = sum(t[0] for t in self.terms[lo:hi])
            s = sum(t[1] for t in self.terms[lo:hi])
            out.append(_b_simple(g, s))
        return out

    def interval(self) -> tuple[float | None, float | None]:
        """t-interval on B_noise from the blocks' spread of log B, around the smoothed value;
        an end is None when a block did not resolve it (B_noise ≤ 0 or unbounded there)."""
        center = self.b_simple()
        blocks = self.block_estimates()
        if center is None:
            return None, None
        if len(blocks) < 2 or any(b is None for b in blocks):
            return (None if len(blocks) < 2 else center), None
        if any(b == 0 for b in blocks) or center == 0:
            return None, (center if center > 0 else None)
        logs = [math.log(b) for b in blocks if b is not None]
        half = (stats.t.ppf(0.5 + self.confidence / 2, len(logs) - 1)
                * statistics.stdev(logs) / math.sqrt(len(logs)))
        return center * math.exp(-half), center * math.exp(half)

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


# -- gradients -----------------------------------------------------------------------------------
@dataclass
class GradientNorms:
    """One step's squared gradient norms at two batch sizes."""

    small_sq: float
    big_sq: float
    b_small: int
    b_big: int


LossOf = Callable[["torch.Tensor", "torch.Tensor"], "torch.Tensor"]


def adam_preconditioner(optimizer: torch.optim.Optimizer, params: Sequence[torch.Tensor]
                        ) -> list[torch.Tensor] | None:
    """Per-parameter weights P² with P = 1/(sqrt(v̂) + ε) from Adam's or AdamW's state, so
    that |Pg|² = Σ P²·g²; None while the optimiser has no second-moment estimate yet."""
    import torch

    settings = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            settings[id(p)] = group
    weights = []
    for p in params:
        state = optimizer.state.get(p)
        if not state or "exp_avg_sq" not in state:
            return None
        group = settings[id(p)]
        step = float(state["step"]) if "step" in state else 1.0
        correction = 1.0 - group["betas"][1] ** max(step, 1.0)
        with torch.no_grad():
            v_hat = state["exp_avg_sq"] / correction
            weights.append((v_hat.sqrt() + group["eps"]).reciprocal().square())
    return weights


def uses_second_moments(optimizer: torch.optim.Optimizer) -> bool:
    """Adam-family optimisers (they keep `exp_avg_sq`) are measured preconditioned."""
    import torch

    return isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW)


def chunked_backward(
    params: Sequence[torch.Tensor], loss_of: LossOf, inputs: torch.Tensor,
    targets: torch.Tensor, chunks: int, weights: Sequence[torch.Tensor] | None = None,
) -> GradientNorms:
    """Backward over `chunks` equal parts of the batch: each part's gradient is taken on its
    own, their mean (the batch's gradient for a mean-reduced loss) is added to each
    parameter's `.grad`, and the squared norms (weighted by `weights`, a preconditioner's P²)
    are returned: the chunks' mean |g_c|² and the batch's |mean g_c|²."""
    import torch

    n = len(inputs)
    if chunks < 2 or n % chunks:
        raise ValueError(f"a batch of {n} cannot be split into {chunks} equal chunks (>= 2)")
    size = n // chunks
    total = [torch.zeros_like(p) for p in params]
    small_sq = 0.0
    for i in range(chunks):
        piece = slice(i * size, (i + 1) * size)
        loss = loss_of(inputs[piece], targets[piece])
        grads = torch.autograd.grad(loss, list(params), allow_unused=True)
        with torch.no_grad():
            for j, g in enumerate(grads):
                if g is None:
                    continue
                total[j].add_(g)
                sq = g.square()
                small_sq += float((sq if weights is None else sq * weights[j]).sum())
    big_sq = 0.0
    with torch.no_grad():
        for j, p in enumerate(params):
            mean = total[j].div_(chunks)
            sq = mean.square()
            big_sq += float((sq if weights is None else sq * weights[j]).sum())
            if p.grad is None:
                p.grad = mean
            else:
                p.grad.add_(mean)
    return GradientNorms(small_sq / chunks, big_sq, size, n)


class GradientNoiseScale:
    """Measures the noise scale inside a training loop: call `backward` instead of
    `loss.backward()` (after `zero_grad`, before `optimizer.step()`); `estimate()` at the end.

    `chunk_size` is the small batch size b_s: a batch of b samples is split into b / b_s
    chunks (b must be a multiple of it and at least 2·b_s, else that step is trained with one
    backward and not measured). `precondition=False` measures Adam's raw gradients (the
    noise scale of SGD) instead of the preconditioned ones."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 chunk_size: int, ema_decay: float = DEFAULT_EMA_DECAY,
                 blocks: int = DEFAULT_BLOCKS, precondition: bool = True) -> None:
        if chunk_size < 1:
            raise ValueError(f"the chunk size must be positive, got {chunk_size}")
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = optimizer
        self.chunk_size = chunk_size
        self.tracker = NoiseScaleTracker(ema_decay=ema_decay, blocks=blocks)
        self.preconditioner: Literal["adam", "none"] = (
            "adam" if precondition and uses_second_moments(optimizer) else "none")
        self.warmup_steps = 0
        self.samples = 0

    def backward(self, loss_of: LossOf, inputs: torch.Tensor, targets: torch.Tensor) -> bool:
        """Accumulate the batch's gradient into `.grad` and measure it; True when measured."""
        n = len(inputs)
        self.samples += n
        weights = None
        if self.preconditioner == "adam":
            weights = adam_preconditioner(self.optimizer, self.params)
        measurable = n % self.chunk_size == 0 and n >= 2 * self.chunk_size
        if not measurable or (self.preconditioner == "adam" and weights is None):
            loss_of(inputs, targets).backward()
            self.warmup_steps += 1
            return False
        norms = chunked_backward(self.params, loss_of, inputs, targets, n // self.chunk_size,
                                 weights)
        self.tracker.observe(norms.small_sq, norms.big_sq, norms.b_small, norms.b_big)
        return True

    def estimate(self) -> NoiseScaleEstimate:
        """B_noise so far (raises ValueError before any measured step)."""
        return self.tracker.estimate(self.samples, self.warmup_steps, self.preconditioner)


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
    from wattcap.efficiency import EfficiencyEntry, EfficiencyVector

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


# -- on a proxy ----------------------------------------------------------------------------------
@dataclass
class GnsRun:
    """What a GNS measuring run did: the estimate, the accuracy curve and the work done."""

    estimate: NoiseScaleEstimate
    #: (samples, test accuracy) at every evaluation, the last one at the end of the run
    curve: list[tuple[int, float]]
    samples: int
    reached: bool

    @property
    def final_accuracy(self) -> float:
        """The test accuracy at the end of the run."""
        return self.curve[-1][1]


def measure_noise_scale(
    model: str,
    train: Dataset,
    test: Dataset,
    weights: str | Path | None = None,
    batch_size: int = 128,
    chunk_size: int = 8,
    sample_budget: int = DEFAULT_GNS_SAMPLES,
    target_accuracy: float | None = None,
    eval_every_samples: int = 256,
    lr_ref: float = DEFAULT_LR_REF,
    batch_size_ref: int = DEFAULT_BATCH_SIZE_REF,
    optimizer: Literal["adam", "adamw"] = "adam",
    seed: int = 0,
    ema_decay: float = DEFAULT_EMA_DECAY,
    progress: Callable[[int, int, str], None] | None = None,
    precondition: bool = True,
    weight_decay: float = 0.0,
) -> GnsRun:
    """Fine-tune `model` from `weights` on `train` at `batch_size` (√-scaled learning rate)
    and measure the noise scale at every step, for `sample_budget` samples, or until the
    smoothed test accuracy (evaluated every `eval_every_samples`) reaches `target_accuracy`
    when one is given; the test accuracy is also evaluated once at the end. The run goes
    through a device-less `Session`, like every loop."""
    import torch

    from wattcap.curves import samples_to_target
    from wattcap.data import check_data_fits_model
    from wattcap.models import get_model_spec
    from wattcap.session import Session
    from wattcap.training import BatchStream, evaluate_dataset
    from wattcap.weights import load_weights

    if batch_size % chunk_size or batch_size < 2 * chunk_size:
        raise ValueError(f"the GNS batch size ({batch_size}) must be a multiple of the chunk "
                         f"size ({chunk_size}) and at least twice it")
    if sample_budget < batch_size:
        raise ValueError(f"the GNS sample budget ({sample_budget}) must hold at least one "
                         f"batch of {batch_size}")
    spec = get_model_spec(model)
    check_data_fits_model(train, spec)
    session = Session(None, model=spec, batch_size=batch_size, lr_ref=lr_ref,
                      batch_size_ref=batch_size_ref, sample_budget=sample_budget,
                      target_accuracy=target_accuracy, dataset=train.name, method="gns",
                      handle_signals=False)
    torch.manual_seed(seed)
    net = spec.build(num_classes=train.num_classes)
    if weights is not None:
        load_weights(net, weights, expect_model=model, new_head_classes=train.num_classes)
    curve: list[tuple[int, float]] = []
    with session:
        device = session.torch_device
        net = net.to(device).train()
        cls = torch.optim.AdamW if optimizer == "adamw" else torch.optim.Adam
        opt = cls(net.parameters(), lr=session.learning_rate, weight_decay=weight_decay)
        gns = GradientNoiseScale(net, opt, chunk_size, ema_decay=ema_decay,
                                 precondition=precondition)
        stream = BatchStream(len(train), seed)

        def accuracy() -> float:
            return evaluate_dataset(net, spec, test, torch_device=device)

        def loss_of(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return spec.loss(net(x), y)

        reached = False
        while session.samples < sample_budget and not reached:
            x, y = train.batch(stream.indices(session.samples, batch_size))
            inputs, targets = session.to_device(torch.from_numpy(x), torch.from_numpy(y))
            with session.step():
                opt.zero_grad(set_to_none=True)
                gns.backward(loss_of, inputs, targets)
                opt.step()
            if target_accuracy is not None and session.samples % eval_every_samples == 0:
                curve.append((session.samples, accuracy()))
                reached = samples_to_target(curve, target_accuracy) is not None
            if progress is not None:
                b = gns.tracker.b_simple()
                progress(session.samples, sample_budget,
                         "B_noise " + ("unresolved" if b is None else f"{b:.3g}"))
        if not curve or curve[-1][0] != session.samples:
            curve.append((session.samples, accuracy()))
    return GnsRun(gns.estimate(), curve, session.samples, reached)


def estimate_efficiency_gns(
    model: str,
    proxy: str,
    target_accuracy: float | Literal["auto"] | None = None,
    weights: str | Path | None = None,
    batch_sizes: tuple[int, ...] = (4, 8, 16, 32, 64, 128),
    chunk_size: int | None = None,
    sample_budget: int = DEFAULT_GNS_SAMPLES,
    eval_every_samples: int = 256,
    lr_ref: float = DEFAULT_LR_REF,
    batch_size_ref: int = DEFAULT_BATCH_SIZE_REF,
    optimizer: Literal["adam", "adamw"] = "adam",
    seed: int = 0,
    dataset_seed: int = 0,
    ema_decay: float = DEFAULT_EMA_DECAY,
    progress: Callable[[int, int, str], None] | None = None,
    data: tuple[Dataset, Dataset] | None = None,
    precondition: bool = True,
    weight_decay: float = 0.0,
    data_options: dict | None = None,
) -> EfficiencyVector:
    """r_b on a proxy from one GNS run at the largest batch size, chunked into the smallest
    (`chunk_size`), instead of the sweep of `wattcap.efficiency.estimate_efficiency`.

    With a numeric `target_accuracy` the run stops when the proxy reaches it (the stretch of
    training the sweep's r_b describes), else after `sample_budget` samples; "auto" and None
    measure for the whole budget and record the accuracy reached as the vector's target.
    `precondition=False` measures raw gradients even with Adam (see `GradientNoiseScale`).
    `proxy` is a data spec (loaded with `data_options`), or `data` the (train, test) pair.
    """
    from wattcap.data import load_splits
    from wattcap.models import get_model_spec, model_fingerprint

    if not batch_sizes:
        raise ValueError("at least one batch size is needed")
    numeric = isinstance(target_accuracy, int | float) and not isinstance(target_accuracy, bool)
    if target_accuracy not in (None, "auto") and not (numeric and 0 < target_accuracy <= 1):
        raise ValueError(f"the proxy target accuracy must be in (0, 1], 'auto' or None, got "
                         f"{target_accuracy!r}")
    spec = get_model_spec(model)
    train, test = data if data is not None else load_splits(proxy, seed=dataset_seed,
                                                            **(data_options or {}))
    b_max = max(batch_sizes)
    chunk = chunk_size or min(batch_sizes)
    if chunk >= b_max:
        raise ValueError(f"the chunk size ({chunk}) must be below the largest batch size "
                         f"({b_max}): GNS needs two batch sizes")
    target = float(target_accuracy) if numeric else None  # type: ignore[arg-type]
    run = measure_noise_scale(
        model, train, test, weights=weights, batch_size=b_max, chunk_size=chunk,
        sample_budget=sample_budget, target_accuracy=target,
        eval_every_samples=eval_every_samples, lr_ref=lr_ref, batch_size_ref=batch_size_ref,
        optimizer=optimizer, seed=seed, ema_decay=ema_decay, progress=progress,
        precondition=precondition, weight_decay=weight_decay)
    notes = []
    if target is not None:
        source: Literal["given", "auto", "reached"] = "given"
        rule = None
        notes.append(f"the GNS run measured until the proxy reached {target:.2%}"
                     if run.reached else
                     f"the GNS run did not reach {target:.2%} within {sample_budget} samples: "
                     "B_noise is the one of the training measured")
    else:
        source, rule = "reached", (f"GNS needs no target: the test accuracy its run reached "
                                   f"after {run.samples} samples")
        target = run.final_accuracy
    return gns_efficiency_vector(
        run.estimate, batch_sizes, model=model, input_shape=list(spec.input_shape),
        dataset=proxy, task=spec.task, target_accuracy=target, target_accuracy_source=source,
        target_accuracy_rule=rule, optimizer=optimizer, lr_ref=lr_ref,
        batch_size_ref=batch_size_ref, seed=seed, eval_every_samples=eval_every_samples,
        notes=notes, architecture_fingerprint=model_fingerprint(model))
