"""Batch-size efficiency r_b = N_acc(b) / N_acc(b_max): samples needed to reach the target
accuracy with batch size b, relative to the largest batch size, measured on a proxy dataset
(or, for the fastest-configuration oracle, on the target data itself).

Samples-to-target are read precisely from each run's accuracy curve (wattcap.algorithms.curves),
and r_b
comes from the large-batch relation E(b) = E_min·(1 + b/B_noise) fitted to every run
(wattcap.algorithms.large_batch) when that fit is good, else from the raw means per batch size. A
batch
size whose runs missed the target within the budget is kept: re-run with a larger budget, or
extrapolated from the fit, and every r_b says how it was obtained. A cheaper vector comes
from the gradient noise scale of one short run (wattcap.train.noise_scale: entries of source "gns").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.core.defaults import DEFAULT_BATCH_SIZE_REF, DEFAULT_LR_REF
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.metric import ACCURACY, TargetMetric
from wattcap.core.progress import JobProgress, OnProgress

if TYPE_CHECKING:
    from wattcap.train.executors import Executor







#: share of the largest batch size's best accuracy that an "auto" proxy target asks for
AUTO_TARGET_SHARE = 0.9


#: evaluations a proxy run goes on after reaching the target, so that its samples-to-target is
#: read from a smoothed curve that does not end on one lucky evaluation
EVALS_PAST_TARGET = 2


def estimate_efficiency(
    model: str,
    proxy: str,
    target_accuracy: float | Literal["auto"] = "auto",
    weights: str | Path | None = None,
    batch_sizes: tuple[int, ...] = (4, 8, 16, 32, 64, 128),
    seeds: int = 3,
    sample_budget: int = 20_000,
    eval_every_samples: int = 256,
    lr_ref: float = DEFAULT_LR_REF,
    batch_size_ref: int = DEFAULT_BATCH_SIZE_REF,
    optimizer: str = "adam",
    progress: OnProgress | None = None,
    dataset_seed: int = 0,
    budget_extension: float | None = 2.0,
    auto_target_share: float = AUTO_TARGET_SHARE,
    weight_decay: float = 0.0,
    data_options: dict | None = None,
    data: tuple | None = None,
    num_workers: int = 0,
    executor: Executor | None = None,
    runs_dir: str | Path | None = None,
    run_counts: dict[str, int] | None = None,
    target_metric: TargetMetric = ACCURACY,
    shared_runs_dirs: tuple[Path, ...] = (),
) -> EfficiencyVector:
    """Fine-tune from the same weights with every batch size and seed on the proxy dataset
    until the proxy's target accuracy, and build the efficiency vector from the runs.

    The proxy has a target of its own: `target_accuracy` as given, or "auto": one run with the
    largest batch size (seed 0) trains for the whole budget, and the target is
    `auto_target_share` (0.9) of the highest accuracy of its smoothed curve, rounded down to
    0.0001. That run is also the largest batch size's seed-0 run (read up to its first
    crossing of the target, as a run stopping there would have been). Samples to target are
    interpolated on each run's smoothed curve. A batch size with a run that missed the target
    re-runs those seeds once with `budget_extension` times the budget (None: no retry) before
    the fit extrapolates it. `progress` gets a `JobProgress` per finished run (done and total
    in runs, the run's record as its item); the total grows when retries are scheduled. With
    `runs_dir`, every finished run is recorded there by the identity of what produced it
    (`wattcap.train.run_store`), and a restarted sweep reuses them ("k of n reused"), as
    it reuses the runs of the same identity in `shared_runs_dirs` (e.g. the cache's, where
    `wattcap estimate` keeps its runs);
    `run_counts["trained"]` and `run_counts["reused"]` are incremented per run when given.

    ``proxy`` is a data spec (a bundled name, ``cifar10:PATH``...); ``data_options`` go to
    :func:`wattcap.data.load_splits` (subset_fraction, test_fraction, input_shape...), or
    ``data`` gives the (train, test) pair already loaded. ``num_workers``: DataLoader
    workers of every run; ``weight_decay``: the optimizer's (e.g. 0.01 with AdamW).

    The runs are independent: `executor` (default: serial, in this process) runs each group
    of them (the auto-target run, the sweep, the retries) as tasks, e.g. a
    `wattcap.train.executors.RayExecutor`; the vector is the same either way.
    """
    from wattcap.algorithms.curves import max_smoothed_accuracy, samples_to_target, stopped_curve
    from wattcap.data import load_splits
    from wattcap.data.specs import check_batch_fits_split
    from wattcap.models import get_model_spec, model_fingerprint, model_source_sha256
    from wattcap.train.executors import SerialExecutor
    from wattcap.train.loop import TrainConfig
    from wattcap.train.run_store import RunStore, SweepInputs
    from wattcap.train.tasks import TrainingTask

    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    if not batch_sizes:
        raise ValueError("at least one batch size is needed")
    if budget_extension is not None and not budget_extension > 1:
        raise ValueError(f"the budget extension must be a factor > 1 (or None), got "
                         f"{budget_extension}")
    if not 0 < auto_target_share <= 1:
        raise ValueError(f"the auto target share must be in (0, 1], got {auto_target_share}")
    auto = target_accuracy == "auto"
    if auto and not target_metric.is_accuracy:
        raise ValueError(f"an automatic target is a share of the best accuracy; give the "
                         f"proxy's {target_metric.name} target as a number")
    if not auto and not (isinstance(target_accuracy, int | float)
                         and not isinstance(target_accuracy, bool)):
        raise ValueError(f"the proxy target must be a number or 'auto', got "
                         f"{target_accuracy!r}")
    if not auto:
        target_metric.check_target(float(target_accuracy))
    direction = target_metric.direction
    spec = get_model_spec(model)
    if data is not None:
        train, test = data
    else:
        train, test = load_splits(proxy, seed=dataset_seed, **(data_options or {}))
    b_max = max(batch_sizes)
    check_batch_fits_split(train, b_max)  # refused before any run, not in the middle
    runs_total = len(batch_sizes) * seeds  # with "auto", its run is b_max's seed-0 run
    runs_done = 0
    trained = 0
    executor = executor or SerialExecutor()
    task = TrainingTask.shipping(train, test, weights,
                                 carry_weights=not isinstance(executor, SerialExecutor),
                                 num_workers=num_workers)

    def config(b: int, seed: int, target: float, budget: int) -> TrainConfig:
        return TrainConfig(
            model=model, batch_size=b, target_accuracy=target, target_metric=target_metric,
            sample_budget=budget,
            eval_every_samples=eval_every_samples, lr_ref=lr_ref,
            batch_size_ref=batch_size_ref, optimizer=optimizer, seed=seed,  # type: ignore[arg-type]
            weight_decay=weight_decay,
            evals_past_target=EVALS_PAST_TARGET,
        )

    store = None if runs_dir is None else RunStore(
        Path(runs_dir), SweepInputs(model, None if weights is None else Path(weights), proxy,
                                    data_options), shared=tuple(shared_runs_dirs))
    reused = 0

    def run_all(configs: list[TrainConfig], label: Callable[[TrainConfig, list], str]
                ) -> list[list]:
        """The curves of `configs`, in their order; progress as each run finishes. Runs
        recorded in `runs_dir` with the same identity are reused, not trained again; each new
        one is recorded as it finishes (a killed sweep resumes with them)."""
        nonlocal reused
        records: list = [None] * len(configs)
        pending = []
        for i, c in enumerate(configs):
            found = store.recorded(c) if store is not None else None
            if found is None:
                pending.append(i)
                continue
            records[i] = found
            reused += 1
            if run_counts is not None:
                run_counts["reused"] += 1
            finished(f"{label(c, found.curve)} (reused: {reused} of {runs_total} runs)", found)

        def done(j: int, record: object) -> None:
            i = pending[j]
            if store is not None:
                store.save(configs[i], record)  # type: ignore[arg-type]
            if run_counts is not None:
                run_counts["trained"] += 1
            finished(label(configs[i], record.curve), record)  # type: ignore[attr-defined]

        for i, record in zip(pending, executor.map(task, [configs[i] for i in pending], done),
                             strict=True):
            records[i] = record
        return [r.curve for r in records]

    def finished(text: str, record: object) -> None:
        nonlocal runs_done, trained
        runs_done += 1
        trained += record.samples_seen  # type: ignore[attr-defined]
        report(text, record)

    def report(label: str, record: object) -> None:
        if progress is not None:
            progress(JobProgress(runs_done, runs_total, "runs", label, item=record))

    def reached_label(c: TrainConfig, curve: list) -> str:
        extra = "" if c.sample_budget == sample_budget else f" with {c.sample_budget} samples"
        return (f"b={c.batch_size} seed={c.seed}{extra}: "
                f"{_samples_label(samples_to_target(curve, c.target_accuracy, direction))}")

    known: dict[tuple[int, int], float | None] = {}
    rule = caution = None
    sweep = f"{runs_total} runs ({len(batch_sizes)} batch size(s) x {seeds} seed(s))"
    # said before the first run, which may be the longest: what the wait is for
    report(f"{sweep}; the first, b={b_max} seed 0, trains the whole {sample_budget}-sample "
           "budget to set the proxy's target" if auto
           else f"{sweep}, each to the target or {sample_budget} samples", None)
    if auto:
        [curve] = run_all([config(b_max, 0, 1.0, sample_budget)],
                          lambda c, curve: f"b={b_max} seed=0: the proxy's best accuracy")
        best = max_smoothed_accuracy(curve)
        if best is None or best <= 0:
            raise ValueError(f"b={b_max} learned nothing on {proxy} within {sample_budget} "
                             "samples: no automatic target accuracy can be chosen")
        target = math.floor(auto_target_share * best * 1e4) / 1e4
        rule = (f"auto: {auto_target_share:g} x {best:.4f}, the highest smoothed test accuracy "
                f"of b={b_max} (seed 0) within {sample_budget} samples")
        known[(b_max, 0)] = samples_to_target(
            stopped_curve(curve, target, EVALS_PAST_TARGET), target)
        caution = _near_chance(best, train.num_classes, spec.task, target_metric.is_accuracy,
                               sample_budget)
        report(f"proxy target {target:.4f} ({rule})" + (f"; {caution}" if caution else ""),
               None)
    else:
        target = float(target_accuracy)

    pending = [(b, seed) for b in batch_sizes for seed in range(seeds)
               if (b, seed) not in known]
    curves = run_all([config(b, seed, target, sample_budget) for b, seed in pending],
                     reached_label)
    for (b, seed), curve in zip(pending, curves, strict=True):
        known[(b, seed)] = samples_to_target(curve, target, direction)
    samples = {b: [known[(b, seed)] for seed in range(seeds)] for b in batch_sizes}
    budgets = {b: [sample_budget] * seeds for b in batch_sizes}

    if budget_extension is not None:
        extended = int(math.ceil(sample_budget * budget_extension / eval_every_samples)
                       * eval_every_samples)
        missed = [(b, i) for b in batch_sizes for i in range(seeds) if samples[b][i] is None]
        runs_total += len(missed)
        curves = run_all([config(b, seed, target, extended) for b, seed in missed],
                         reached_label)
        for (b, seed), curve in zip(missed, curves, strict=True):
            samples[b][seed] = samples_to_target(curve, target, direction)
            budgets[b][seed] = extended

    vector = vector_from_samples(
        samples,
        sample_budget=sample_budget,
        budgets=budgets,
        model=model,
        input_shape=list(spec.input_shape),
        dataset=proxy,
        task=spec.task,
        target_accuracy=target,
        target_metric=target_metric,
        target_accuracy_source="auto" if auto else "given",
        target_accuracy_rule=rule,
        seeds=list(range(seeds)),
        optimizer=optimizer,
        lr_ref=lr_ref,
        batch_size_ref=batch_size_ref,
        budget_extension=budget_extension,
        eval_every_samples=eval_every_samples,
        training_samples=trained,
        architecture_fingerprint=model_fingerprint(model),
        model_source_sha256=model_source_sha256(model),
    )
    cautions = [c for c in (caution, _unresolved(samples, eval_every_samples, target_metric))
                if c is not None]
    return vector.model_copy(update={"notes": [*vector.notes, *cautions]}) if cautions \
        else vector


def _unresolved(samples: dict[int, list[float | None]], eval_every_samples: int,
                metric: TargetMetric) -> str | None:
    """A caution where every run reached the target by its first evaluation: the samples
    each batch size needs are then not resolved, and r_b reads 1 for all of them."""
    reached = [s for runs in samples.values() for s in runs]
    if len(samples) < 2 or any(s is None or s > eval_every_samples for s in reached):
        return None
    return (f"caution: every batch size reached the target ({metric.name}) by its first "
            f"evaluation ({eval_every_samples} samples): r_b is not resolved (it reads about 1 "
            "for every batch size); evaluate more often (--eval-every) or give a higher "
            "--target-accuracy")


#: an automatic proxy target whose best accuracy is under this many times chance is cautioned
NEAR_CHANCE_FACTOR = 2.0


def _near_chance(best: float, num_classes: int, task: str, is_accuracy: bool,
                 sample_budget: int) -> str | None:
    """A caution where the largest batch's best accuracy on the proxy is near chance (an
    image classifier that barely learned within the budget): r_b measured to a fraction of
    such an accuracy says little about training to a real target."""
    if not is_accuracy or task != "image-classification" or num_classes < 2:
        return None
    chance = 1.0 / num_classes
    if best >= NEAR_CHANCE_FACTOR * chance:
        return None
    return (f"caution: the proxy's best accuracy {best:.1%} is near chance ({chance:.0%} for "
            f"{num_classes} classes) within {sample_budget} samples: r_b measured to such a "
            "target says little about training to a real one; give a larger --sample-budget, "
            "pre-trained --weights, or a proxy target accuracy the model reaches")


def _samples_label(samples: float | None) -> str:
    return "target not reached" if samples is None else f"{samples:.0f} samples to target"
