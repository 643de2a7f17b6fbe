"""Batch-size efficiency r_b = N_acc(b) / N_acc(b_max): samples needed to reach the target
accuracy with batch size b, relative to the largest batch size, measured on a proxy dataset
(or, for the fastest-configuration oracle, on the target data itself).

Samples-to-target are read precisely from each run's accuracy curve (wattcap.curves), and r_b
comes from the large-batch relation E(b) = E_min·(1 + b/B_noise) fitted to every run
(wattcap.large_batch) when that fit is good, else from the raw means per batch size. A batch
size whose runs missed the target within the budget is kept: re-run with a larger budget, or
extrapolated from the fit, and every r_b says how it was obtained. A cheaper vector comes
from the gradient noise scale of one short run (wattcap.noise_scale: entries of source "gns").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from wattcap.defaults import DEFAULT_BATCH_SIZE_REF, DEFAULT_LR_REF
from wattcap.large_batch import LargeBatchFit, fit_large_batch
from wattcap.noise_scale import NoiseScaleEstimate
from wattcap.schema import VersionedFile, require_match

if TYPE_CHECKING:
    from wattcap.executors import Executor

#: how an r_b was obtained ("gns": from the gradient noise scale, wattcap.noise_scale)
RatioSource = Literal["fit", "mean", "extrapolated", "extended-budget", "gns"]


class EfficiencyEntry(BaseModel):
    """One batch size: the raw samples to target per seed, their summary, and the r_b used."""

    model_config = ConfigDict(extra="forbid")
    batch_size: int
    #: interpolated samples to target per seed; None: missed within that run's budget
    samples_per_seed: list[float | None]
    #: the sample budget of each seed's run (larger than the vector's where it was extended)
    budget_per_seed: list[int]
    #: mean and standard deviation over the seeds that reached the target
    samples_mean: float | None
    samples_std: float | None
    #: E(b) used by the planner: from the fit, the raw mean, or extrapolated
    samples: float
    #: r_b = samples / samples of the vector's largest batch size
    ratio: float
    #: the interval on r_b from the fit (None when r_b is not the good fit's own)
    ratio_low: float | None
    ratio_high: float | None
    #: spread of the per-seed ratios s_i / E(b_max) over the seeds that reached the target
    ratio_std: float | None
    source: RatioSource

    @property
    def reachable(self) -> bool:
        """Every seed reached the target within its (possibly extended) budget."""
        return all(s is not None for s in self.samples_per_seed)

    @property
    def ratio_mean(self) -> float:
        """The r_b used (the v1 name, kept for the callers that print it)."""
        return self.ratio


class EfficiencyVector(VersionedFile):
    """r_b for one model, task and target accuracy, with the raw samples and the fit."""

    FILE_KIND = "wattcap.efficiency"
    #: 2: the large-batch fit and raw samples; 3: architecture_fingerprint; 4: vectors from the
    #: gradient noise scale (noise_scale, ratio_source "gns", no fit), training_samples
    SCHEMA_VERSION = 4

    model: str
    input_shape: list[int]
    dataset: str
    task: str
    target_accuracy: float
    #: "given" by the caller, "auto": chosen from the largest batch size's accuracy, or
    #: "reached": the accuracy a GNS run reached (it needs no target)
    target_accuracy_source: Literal["given", "auto", "reached"] = "given"
    target_accuracy_rule: str | None = None
    seeds: list[int]
    optimizer: str = "adam"
    lr_ref: float = DEFAULT_LR_REF
    batch_size_ref: int = DEFAULT_BATCH_SIZE_REF
    sample_budget: int
    #: factor a missed batch size's budget was extended by for its retry (None: no retry)
    budget_extension: float | None = None
    eval_every_samples: int = 0
    #: the largest batch size: every r_b is relative to it
    reference_batch_size: int
    #: the large-batch fit of a sweep (None for a GNS vector)
    fit: LargeBatchFit | None
    #: "fit": r_b from the good large-batch fit; "mean": raw means (the fit is poor);
    #: "gns": from the gradient noise scale of one run (`noise_scale`)
    ratio_source: Literal["fit", "mean", "gns"]
    entries: list[EfficiencyEntry]
    notes: list[str] = []
    #: how B_noise was measured, for a GNS vector
    noise_scale: NoiseScaleEstimate | None = None
    #: samples trained to make this vector, every run counted (its compute; None: unknown)
    training_samples: int | None = None

    @model_validator(mode="after")
    def _one_origin(self) -> EfficiencyVector:
        gns = self.ratio_source == "gns"
        if gns != (self.noise_scale is not None) or (not gns and self.fit is None):
            raise ValueError("an efficiency vector comes from a sweep (ratio_source 'fit' or "
                             "'mean', with its fit) or from the gradient noise scale "
                             "(ratio_source 'gns', with noise_scale)")
        return self
    #: the model's architecture (wattcap.models.architecture_fingerprint); None: not recorded
    architecture_fingerprint: str | None = None

    def entry(self, batch_size: int) -> EfficiencyEntry | None:
        """The entry of b, or None when b was not estimated."""
        return next((e for e in self.entries if e.batch_size == batch_size), None)

    def ratio(self, batch_size: int) -> float | None:
        """r_b used for planning: the fitted r_b when the fit is good, else the raw mean
        (extrapolated from the fit where b missed the target); None when b was not
        estimated (never to be selected)."""
        entry = self.entry(batch_size)
        return None if entry is None else entry.ratio

    def samples(self, batch_size: int) -> float | None:
        """Samples to target E(b) behind r_b, or None when b was not estimated."""
        entry = self.entry(batch_size)
        return None if entry is None else entry.samples

    def ratio_notes(self) -> list[str]:
        """What a plan should say about where r_b came from."""
        if self.noise_scale is not None:
            return [f"r_b from the gradient noise scale on {self.dataset}: "
                    f"{self.noise_scale.describe()}"]
        fit = self.fit
        if fit is None:
            return [f"r_b on {self.dataset} without a large-batch fit"]
        if self.ratio_source == "fit":
            low = "0" if fit.b_noise_low is None else f"{fit.b_noise_low:.3g}"
            high = "inf" if fit.b_noise_high is None else f"{fit.b_noise_high:.3g}"
            notes = [f"r_b from the large-batch fit on {self.dataset}, B_noise = "
                     f"{fit.b_noise:.3g} [{low}, {high}] ({fit.confidence:.0%} CI)"]
        else:
            notes = [f"large-batch fit {fit.quality} on {self.dataset} "
                     f"({fit.quality_reason}): r_b from raw means"]
        extrapolated = [e.batch_size for e in self.entries if e.source == "extrapolated"]
        if extrapolated:
            notes.append(f"r_b extrapolated from the fit for b = {extrapolated} (the target "
                         f"was missed within the budget on {self.dataset})")
        extended = [e.batch_size for e in self.entries if e.source == "extended-budget"]
        if extended:
            notes.append(f"b = {extended} reached the target on {self.dataset} only with an "
                         "extended budget")
        return notes

    def check_matches(
        self, model: str | None = None, input_shape: list[int] | tuple[int, ...] | None = None,
        source: str = "efficiency vector", architecture_fingerprint: str | None = None,
    ) -> None:
        """Refuse a vector made for another model, input shape or architecture (fingerprints
        are compared when both are known)."""
        if model is not None:
            require_match("the efficiency vector", "model", model, self.model, source)
        if input_shape is not None:
            require_match(
                "the efficiency vector", "input shape", list(input_shape), self.input_shape, source
            )
        if architecture_fingerprint is not None and self.architecture_fingerprint is not None:
            require_match("the efficiency vector", "architecture fingerprint",
                          architecture_fingerprint, self.architecture_fingerprint, source)

    @classmethod
    def from_samples(
        cls,
        samples: dict[int, list[float | None]],
        sample_budget: int,
        budgets: dict[int, list[int]] | None = None,
        use_fit: bool = True,
        **metadata: object,
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
        notes = list(metadata.pop("notes", []))  # type: ignore[arg-type]
        notes.append(f"large-batch fit: {fit.describe()}")
        if any(s is None for s in samples[reference]):
            notes.append(f"b={reference} missed the target in some runs: its samples come from "
                         "the fit, and every r_b is still relative to it")
        return cls(
            sample_budget=sample_budget, reference_batch_size=reference, fit=fit,
            ratio_source="fit" if fit.good and use_fit else "mean", entries=entries,
            notes=notes,
            **metadata,
        )


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
    progress: Callable[[int, int, str], None] | None = None,
    dataset_seed: int = 0,
    budget_extension: float | None = 2.0,
    auto_target_share: float = AUTO_TARGET_SHARE,
    weight_decay: float = 0.0,
    data_options: dict | None = None,
    data: tuple | None = None,
    num_workers: int = 0,
    executor: Executor | None = None,
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
    the fit extrapolates it. `progress(done, total, label)` follows the runs; the total grows
    when retries are scheduled.

    ``proxy`` is a data spec (a bundled name, ``cifar10:PATH``...); ``data_options`` go to
    :func:`wattcap.data.load_splits` (subset_fraction, test_fraction, input_shape...), or
    ``data`` gives the (train, test) pair already loaded. ``num_workers``: DataLoader
    workers of every run; ``weight_decay``: the optimizer's (e.g. 0.01 with AdamW).

    The runs are independent: `executor` (default: serial, in this process) runs each group
    of them (the auto-target run, the sweep, the retries) as tasks, e.g. a
    `wattcap.executors.RayExecutor`; the vector is the same either way.
    """
    from wattcap.curves import max_smoothed_accuracy, samples_to_target, stopped_curve
    from wattcap.data import load_splits
    from wattcap.executors import SerialExecutor
    from wattcap.models import get_model_spec, model_fingerprint
    from wattcap.training import TrainConfig
    from wattcap.training_tasks import TrainingTask

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
    if not auto and not (isinstance(target_accuracy, int | float)
                         and 0 < float(target_accuracy) <= 1):
        raise ValueError(f"the proxy target accuracy must be in (0, 1] or 'auto', got "
                         f"{target_accuracy!r}")
    spec = get_model_spec(model)
    if data is not None:
        train, test = data
    else:
        train, test = load_splits(proxy, seed=dataset_seed, **(data_options or {}))
    b_max = max(batch_sizes)
    runs_total = len(batch_sizes) * seeds  # with "auto", its run is b_max's seed-0 run
    runs_done = 0
    trained = 0
    executor = executor or SerialExecutor()
    task = TrainingTask.shipping(train, test, weights,
                                 carry_weights=not isinstance(executor, SerialExecutor),
                                 num_workers=num_workers)

    def config(b: int, seed: int, target: float, budget: int) -> TrainConfig:
        return TrainConfig(
            model=model, batch_size=b, target_accuracy=target, sample_budget=budget,
            eval_every_samples=eval_every_samples, lr_ref=lr_ref,
            batch_size_ref=batch_size_ref, optimizer=optimizer, seed=seed,  # type: ignore[arg-type]
            weight_decay=weight_decay,
            evals_past_target=EVALS_PAST_TARGET,
        )

    def run_all(configs: list[TrainConfig], label: Callable[[TrainConfig, list], str]
                ) -> list[list]:
        """The curves of `configs`, in their order; progress as each run finishes."""
        def done(i: int, record: object) -> None:
            nonlocal runs_done, trained
            runs_done += 1
            trained += record.samples_seen  # type: ignore[attr-defined]
            report(label(configs[i], record.curve))  # type: ignore[attr-defined]

        return [r.curve for r in executor.map(task, configs, done)]

    def report(label: str) -> None:
        if progress is not None:
            progress(runs_done, runs_total, label)

    def reached_label(c: TrainConfig, curve: list) -> str:
        extra = "" if c.sample_budget == sample_budget else f" with {c.sample_budget} samples"
        return (f"b={c.batch_size} seed={c.seed}{extra}: "
                f"{_samples_label(samples_to_target(curve, c.target_accuracy))}")

    known: dict[tuple[int, int], float | None] = {}
    rule = None
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
        report(f"proxy target {target:.4f} ({rule})")
    else:
        target = float(target_accuracy)  # type: ignore[arg-type]

    pending = [(b, seed) for b in batch_sizes for seed in range(seeds)
               if (b, seed) not in known]
    curves = run_all([config(b, seed, target, sample_budget) for b, seed in pending],
                     reached_label)
    for (b, seed), curve in zip(pending, curves, strict=True):
        known[(b, seed)] = samples_to_target(curve, target)
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
            samples[b][seed] = samples_to_target(curve, target)
            budgets[b][seed] = extended

    return EfficiencyVector.from_samples(
        samples,
        sample_budget=sample_budget,
        budgets=budgets,
        model=model,
        input_shape=list(spec.input_shape),
        dataset=proxy,
        task=spec.task,
        target_accuracy=target,
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
    )


def _samples_label(samples: float | None) -> str:
    return "missed" if samples is None else f"{samples:.0f} samples"
