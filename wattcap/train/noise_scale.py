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

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from wattcap.algorithms.noise_scale import (
    DEFAULT_EMA_DECAY,
    gns_efficiency_vector,
)
from wattcap.algorithms.noise_windows import NoiseScaleWindows, combine_runs
from wattcap.core.defaults import DEFAULT_BATCH_SIZE_REF, DEFAULT_LR_REF
from wattcap.core.noise_scale import NoiseScaleEstimate, NoiseScaleTrajectory
from wattcap.core.progress import JobProgress, OnProgress
from wattcap.runtime.noise_scale import (
    GradientNoiseScale,
)

if TYPE_CHECKING:
    import torch

    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.data import Dataset

#: samples a proxy's GNS run trains when no target stops it earlier
DEFAULT_GNS_SAMPLES = 4096


























# -- on a proxy ----------------------------------------------------------------------------------
@dataclass
class GnsRun:
    """What a GNS measuring run did: the estimate, the accuracy curve and the work done."""

    estimate: NoiseScaleEstimate
    #: B_simple window by window over doublings of the run's samples (closed windows only)
    trajectory: NoiseScaleTrajectory
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
    progress: OnProgress | None = None,
    precondition: bool = True,
    weight_decay: float = 0.0,
) -> GnsRun:
    """Fine-tune `model` from `weights` on `train` at `batch_size` (√-scaled learning rate)
    and measure the noise scale at every step, for `sample_budget` samples, or until the
    smoothed test accuracy (evaluated every `eval_every_samples`) reaches `target_accuracy`
    when one is given; the test accuracy is also evaluated once at the end. The run goes
    through a device-less `Session`, like every loop."""
    import torch

    from wattcap.algorithms.curves import samples_to_target
    from wattcap.data import check_data_fits_model
    from wattcap.models import get_model_spec
    from wattcap.models.weights import load_weights
    from wattcap.runtime.session import Session
    from wattcap.runtime.session_config import DeviceHandling, Goal, PlanSettings, Reporting
    from wattcap.train.loop import BatchStream, evaluate_dataset

    if batch_size % chunk_size or batch_size < 2 * chunk_size:
        raise ValueError(f"the GNS batch size ({batch_size}) must be a multiple of the chunk "
                         f"size ({chunk_size}) and at least twice it")
    if sample_budget < batch_size:
        raise ValueError(f"the GNS sample budget ({sample_budget}) must hold at least one "
                         f"batch of {batch_size}")
    spec = get_model_spec(model)
    check_data_fits_model(train, spec)
    session = Session(None, model=spec,
                      planning=PlanSettings(batch_size=batch_size, lr_ref=lr_ref,
                                            batch_size_ref=batch_size_ref, method="gns"),
                      goal=Goal(target_accuracy=target_accuracy, sample_budget=sample_budget),
                      reporting=Reporting(dataset=train.name),
                      device_handling=DeviceHandling(handle_signals=False))
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
        windows = NoiseScaleWindows()
        while session.samples < sample_budget and not reached:
            x, y = train.batch(stream.indices(session.samples, batch_size))
            inputs, targets = session.to_device(torch.from_numpy(x), torch.from_numpy(y))
            with session.step():
                opt.zero_grad(set_to_none=True)
                measured = gns.backward(loss_of, inputs, targets)
                opt.step()
            if measured:
                windows.observe(session.samples, *gns.tracker.terms[-1])
            windows.advance(session.samples)
            if target_accuracy is not None and session.samples % eval_every_samples == 0:
                curve.append((session.samples, accuracy()))
                reached = samples_to_target(curve, target_accuracy) is not None
            if progress is not None:
                b = gns.tracker.b_simple()
                progress(JobProgress(session.samples, sample_budget, "samples",
                                     "B_noise " + ("unresolved" if b is None else f"{b:.3g}")))
        if not curve or curve[-1][0] != session.samples:
            curve.append((session.samples, accuracy()))
    trajectory = NoiseScaleTrajectory(
        batch_size=batch_size, chunk_size=chunk_size, preconditioner=gns.preconditioner,
        confidence=windows.confidence, windows=windows.windows)
    return GnsRun(gns.estimate(), trajectory, curve, session.samples, reached)


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
    progress: OnProgress | None = None,
    data: tuple[Dataset, Dataset] | None = None,
    precondition: bool = True,
    weight_decay: float = 0.0,
    data_options: dict | None = None,
) -> EfficiencyVector:
    """r_b on a proxy from one GNS run at the largest batch size, chunked into the smallest
    (`chunk_size`), instead of the sweep of `wattcap.train.efficiency.estimate_efficiency`.

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
    if target_accuracy not in (None, "auto") and not (
            numeric and 0 < float(target_accuracy) <= 1):
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
    vector = gns_efficiency_vector(
        run.estimate, batch_sizes, model=model, input_shape=list(spec.input_shape),
        dataset=proxy, task=spec.task, target_accuracy=target, target_accuracy_source=source,
        target_accuracy_rule=rule, optimizer=optimizer, lr_ref=lr_ref,
        batch_size_ref=batch_size_ref, seed=seed, eval_every_samples=eval_every_samples,
        notes=notes, architecture_fingerprint=model_fingerprint(model))
    return vector.model_copy(update={"noise_reference": [run.trajectory]})


def with_noise_reference(
    vector: EfficiencyVector,
    train: Dataset,
    test: Dataset,
    weights: str | Path | None = None,
    batch_size: int | None = None,
    chunks: int | None = None,
    sample_budget: int | None = None,
    seeds: Sequence[int] = (0,),
    progress: OnProgress | None = None,
) -> EfficiencyVector:
    """`vector` with the proxy's noise-scale reference added: one run at `batch_size` (default
    the vector's largest) measured in `chunks` parts per batch (default: as many as the online
    correction measures a target's batch in, `wattcap.runtime.online_correction`) over
    `sample_budget` samples (default the vector's budget), B_simple window by window over its
    samples: what a target run's correction compares its own with. The same number of parts
    matters: with BatchNorm each part normalises with its own statistics, so the gradient
    measured depends on the part's size. With several `seeds` the runs are combined
    (`combine_runs`): each window's interval then holds the runs' spread, not one run's luck."""
    from wattcap.runtime.online_correction import DEFAULT_CORRECTION_CHUNKS

    chunks = chunks or DEFAULT_CORRECTION_CHUNKS
    b = batch_size or vector.reference_batch_size
    if b % chunks or b // chunks < 2:
        raise ValueError(f"the reference's batch size ({b}) must split into {chunks} chunks "
                         "of 2 samples or more")
    if not seeds:
        raise ValueError("the reference needs at least one seed")
    runs = [measure_noise_scale(
        vector.model, train, test, weights=weights, batch_size=b, chunk_size=b // chunks,
        sample_budget=sample_budget or vector.sample_budget, lr_ref=vector.lr_ref,
        batch_size_ref=vector.batch_size_ref,
        optimizer="adamw" if vector.optimizer == "adamw" else "adam", seed=seed,
        progress=progress).trajectory for seed in seeds]
    reference = combine_runs(runs)
    others = [t for t in vector.noise_reference
              if (t.batch_size, t.chunk_size) != (b, reference.chunk_size)]
    return vector.model_copy(update={"noise_reference": [*others, reference]})
