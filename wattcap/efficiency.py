"""Batch-size efficiency r_b = N_acc(b) / N_acc(b_max): samples needed to reach the target
accuracy with batch size b, relative to the largest batch size, measured on a proxy dataset
(or, for the fastest-configuration oracle, on the target data itself).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from wattcap.schema import VersionedFile, require_match


class EfficiencyEntry(BaseModel):
    """Samples to target for one batch size, per seed (None: not reached within budget)."""

    model_config = ConfigDict(extra="forbid")
    batch_size: int
    samples_per_seed: list[int | None]
    samples_mean: float | None
    ratio_mean: float | None
    ratio_std: float | None

    @property
    def reachable(self) -> bool:
        """Every seed reached the target."""
        return self.samples_mean is not None


class EfficiencyVector(VersionedFile):
    """r_b for one model, task and target accuracy."""

    FILE_KIND = "wattcap.efficiency"
    SCHEMA_VERSION = 2  # 2: architecture_fingerprint

    model: str
    input_shape: list[int]
    dataset: str
    task: str
    target_accuracy: float
    seeds: list[int]
    optimizer: str = "adam"
    lr_ref: float = 1e-3
    batch_size_ref: int = 32
    sample_budget: int = 0
    eval_every_samples: int = 0
    reference_batch_size: int
    entries: list[EfficiencyEntry]
    notes: list[str] = []
    #: the model's architecture (wattcap.models.architecture_fingerprint); None: not recorded
    architecture_fingerprint: str | None = None

    def ratio(self, batch_size: int) -> float | None:
        """r_b, or None when b is unreachable or was not estimated (never to be selected)."""
        for entry in self.entries:
            if entry.batch_size == batch_size:
                return entry.ratio_mean
        return None

    def samples(self, batch_size: int) -> float | None:
        """Mean samples to target for b, or None."""
        for entry in self.entries:
            if entry.batch_size == batch_size:
                return entry.samples_mean
        return None

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
        samples: dict[int, list[int | None]],
        **metadata: object,
    ) -> EfficiencyVector:
        """Build the vector from samples-to-target per batch size and seed.

        A batch size is unreachable when any seed missed the target within the budget. Ratios
        are normalised by the largest reachable batch size.
        """
        means: dict[int, float | None] = {}
        for b, per_seed in samples.items():
            reached = [s for s in per_seed if s is not None]
            every_seed = reached and len(reached) == len(per_seed)
            means[b] = statistics.fmean(reached) if every_seed else None
        reachable = [b for b, m in means.items() if m is not None]
        notes = list(metadata.pop("notes", []))  # type: ignore[arg-type]
        if not reachable:
            raise ValueError("no batch size reached the target accuracy within the sample budget")
        reference = max(reachable)
        if reference != max(samples):
            notes.append(
                f"b={max(samples)} did not reach the target; ratios are relative to b={reference}"
            )
        ref_samples = means[reference]
        assert ref_samples is not None
        entries = []
        for b in sorted(samples):
            per_seed = samples[b]
            mean = means[b]
            if mean is None:
                entries.append(EfficiencyEntry(
                    batch_size=b, samples_per_seed=per_seed, samples_mean=None,
                    ratio_mean=None, ratio_std=None,
                ))
                continue
            ratios = [s / ref_samples for s in per_seed if s is not None]
            entries.append(EfficiencyEntry(
                batch_size=b,
                samples_per_seed=per_seed,
                samples_mean=mean,
                ratio_mean=mean / ref_samples,
                ratio_std=statistics.stdev(ratios) if len(ratios) > 1 else 0.0,
            ))
        return cls(reference_batch_size=reference, entries=entries, notes=notes, **metadata)


def estimate_efficiency(
    model: str,
    proxy: str,
    target_accuracy: float,
    weights: str | Path | None = None,
    batch_sizes: tuple[int, ...] = (4, 8, 16, 32, 64, 128),
    seeds: int = 3,
    sample_budget: int = 20_000,
    eval_every_samples: int = 256,
    lr_ref: float = 1e-3,
    batch_size_ref: int = 32,
    optimizer: str = "adam",
    weight_decay: float = 0.0,
    progress: Callable[[int, int, str], None] | None = None,
    dataset_seed: int = 0,
    data_options: dict | None = None,
    data: tuple | None = None,
    num_workers: int = 0,
) -> EfficiencyVector:
    """Fine-tune from the same weights with every batch size and seed on the proxy dataset
    until the target accuracy, and normalise the samples needed by the largest batch size.

    ``proxy`` is a data spec (a bundled name, ``cifar10:PATH``...); ``data_options`` go to
    :func:`wattcap.data.load_splits` (subset_fraction, test_fraction, input_shape...), or
    ``data`` gives the (train, test) pair already loaded. ``num_workers``: DataLoader
    workers of every run.
    """
    from wattcap.data import load_splits
    from wattcap.training import TrainConfig, train_to_accuracy

    if data is not None:
        train, test = data
    else:
        train, test = load_splits(proxy, seed=dataset_seed, **(data_options or {}))
    samples: dict[int, list[int | None]] = {}
    total = len(batch_sizes) * seeds
    done = 0
    for b in batch_sizes:
        samples[b] = []
        for seed in range(seeds):
            config = TrainConfig(
                model=model, batch_size=b, target_accuracy=target_accuracy,
                sample_budget=sample_budget, eval_every_samples=eval_every_samples,
                lr_ref=lr_ref, batch_size_ref=batch_size_ref, optimizer=optimizer, seed=seed,
                weight_decay=weight_decay,
            )
            record = train_to_accuracy(config, train, test, weights=weights,
                                       num_workers=num_workers)
            samples[b].append(record.samples_to_target)
            done += 1
            if progress is not None:
                progress(done, total, f"b={b} seed={seed}: {record.samples_to_target}")
    from wattcap.models import get_model_spec, model_fingerprint

    spec = get_model_spec(model)
    return EfficiencyVector.from_samples(
        samples,
        model=model,
        input_shape=list(spec.input_shape),
        dataset=proxy,
        task=spec.task,
        target_accuracy=target_accuracy,
        seeds=list(range(seeds)),
        optimizer=optimizer,
        lr_ref=lr_ref,
        batch_size_ref=batch_size_ref,
        sample_budget=sample_budget,
        eval_every_samples=eval_every_samples,
        architecture_fingerprint=model_fingerprint(model),
    )
