"""Gradient-noise-scale measurement inside a training step: per-chunk gradients, Adam
preconditioning, the tracker fed each step (a Session part)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from wattcap.algorithms.noise_scale import (
    DEFAULT_BLOCKS,
    DEFAULT_EMA_DECAY,
    NoiseScaleTracker,
)
from wattcap.core.noise_scale import NoiseScaleEstimate

if TYPE_CHECKING:
    import torch



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
    that |Pg|² = Σ P²·g²; None while the optimiser has no second-moment estimate yet. A
    parameter without one while others have it (never given a gradient, or not in this
    optimiser) weighs 0: it is not measured."""
    import torch

    settings = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            settings[id(p)] = group
    weights = []
    for p in params:
        state = optimizer.state.get(p)
        if not state or "exp_avg_sq" not in state or id(p) not in settings:
            weights.append(torch.zeros_like(p))
            continue
        group = settings[id(p)]
        step = float(state["step"]) if "step" in state else 1.0
        correction = 1.0 - group["betas"][1] ** max(step, 1.0)
        with torch.no_grad():
            v_hat = state["exp_avg_sq"] / correction
            weights.append((v_hat.sqrt() + group["eps"]).reciprocal().square())
    if all(id(p) not in settings or "exp_avg_sq" not in (optimizer.state.get(p) or {})
           for p in params):
        return None
    return weights

def uses_second_moments(optimizer: torch.optim.Optimizer) -> bool:
    """Adam-family optimisers (they keep `exp_avg_sq`) are measured preconditioned."""
    import torch

    return isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW)

def check_chunks(chunks: int) -> None:
    """A measured batch is split into at least 2 chunks (the noise scale needs two sizes)."""
    if chunks < 2:
        raise ValueError(f"a measured batch needs at least 2 chunks, got {chunks}")


def chunked_backward(
    params: Sequence[torch.Tensor], loss_of: LossOf, inputs: torch.Tensor,
    targets: torch.Tensor, chunks: int, weights: Sequence[torch.Tensor] | None = None,
) -> GradientNorms:
    """Backward over `chunks` equal parts of the batch: each part's gradient is taken on its
    own, their mean (the batch's gradient for a mean-reduced loss) is added to each
    parameter's `.grad`, and the squared norms (weighted by `weights`, a preconditioner's P²)
    are returned: the chunks' mean |g_c|² and the batch's |mean g_c|²."""
    n = len(inputs)
    if chunks < 2 or n % chunks:
        raise ValueError(f"a batch of {n} cannot be split into {chunks} equal chunks (>= 2)")
    size = n // chunks

    def part_loss(i: int) -> torch.Tensor:
        piece = slice(i * size, (i + 1) * size)
        return loss_of(inputs[piece], targets[piece])

    return chunk_norms(params, part_loss, chunks, size, weights, accumulate=True)


def chunk_norms(
    params: Sequence[torch.Tensor], part_loss: Callable[[int], torch.Tensor], chunks: int,
    part_size: int, weights: Sequence[torch.Tensor] | None = None, accumulate: bool = False,
) -> GradientNorms:
    """The squared norms of `chunks` parts' gradients (part i's loss: `part_loss(i)`, each
    mean-reduced over `part_size` samples) and of their mean; with `accumulate` the mean is
    added to each parameter's `.grad` (the step's gradient), else `.grad` is left alone (a
    measurement beside a framework's own backward)."""
    import torch

    total = [torch.zeros_like(p) for p in params]
    small_sq = 0.0
    for i in range(chunks):
        grads = torch.autograd.grad(part_loss(i), list(params), allow_unused=True)
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
            if not accumulate:
                continue
            if p.grad is None:
                p.grad = mean
            else:
                p.grad.add_(mean)
    return GradientNorms(small_sq / chunks, big_sq, part_size, part_size * chunks)

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

    def measure_parts(self, part_loss: Callable[[int], torch.Tensor], chunks: int,
                      part_size: int) -> bool:
        """Measure a batch given as `chunks` parts of `part_size` samples (part i's mean loss:
        `part_loss(i)`) without touching `.grad`: beside a framework's own backward. True when
        measured (not before the optimiser has second moments, with Adam)."""
        self.samples += chunks * part_size
        weights = None
        if self.preconditioner == "adam":
            weights = adam_preconditioner(self.optimizer, self.params)
            if weights is None:
                self.warmup_steps += 1
                return False
        norms = chunk_norms(self.params, part_loss, chunks, part_size, weights)
        self.tracker.observe(norms.small_sq, norms.big_sq, norms.b_small, norms.b_big)
        return True

    def estimate(self) -> NoiseScaleEstimate:
        """B_noise so far (raises ValueError before any measured step)."""
        return self.tracker.estimate(self.samples, self.warmup_steps, self.preconditioner)
