"""Efficiency vectors: r_b = samples to target at b over samples at the largest b, with where each
r_b came from, as a versioned file."""

from __future__ import annotations

import math
import statistics
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from wattcap.core.defaults import DEFAULT_BATCH_SIZE_REF, DEFAULT_LR_REF
from wattcap.core.large_batch import LargeBatchFit
from wattcap.core.metric import ACCURACY, TargetMetric
from wattcap.core.noise_scale import NoiseScaleEstimate, NoiseScaleTrajectory
from wattcap.core.profile import portable_model_name
from wattcap.core.schema import Migration, VersionedFile, WattcapFileError, require_match

#: how an r_b was obtained ("gns": from the gradient noise scale, wattcap.train.noise_scale)
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
    #: gradient noise scale (noise_scale, ratio_source "gns", no fit), training_samples;
    #: 5: model_source_sha256 (a user model's source); 6: target_metric (a falling metric, a
    #: metric on 0-100); 7: noise_reference (the proxy's noise scale over its samples)
    SCHEMA_VERSION = 7
    MIGRATIONS: ClassVar[dict[int, Migration]] = {
        1: lambda raw: _entries_of_version_2(raw),
        # a version-2 file of the fingerprint's line of work still has version-1 entries
        2: lambda raw: _entries_of_version_2(raw),
        3: lambda raw: raw,  # 4 added noise_scale and training_samples (absent: not recorded)
        4: lambda raw: raw,  # 5 added model_source_sha256 (absent: not recorded)
        5: lambda raw: raw,  # 6 added target_metric (absent: accuracy, as every earlier file)
        6: lambda raw: raw,  # 7 added noise_reference (absent: none measured)
    }

    model: str
    input_shape: list[int]
    dataset: str
    task: str
    #: the target, in `target_metric`'s units (the name predates other metrics than accuracy)
    target_accuracy: float
    #: the metric the target is on and the direction in which it improves
    target_metric: TargetMetric = ACCURACY
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
    #: the proxy's B_simple window by window over its samples, at one or more batch sizes:
    #: what a target run's online correction compares its own with (empty: not measured)
    noise_reference: list[NoiseScaleTrajectory] = []

    @model_validator(mode="after")
    def _one_origin(self) -> EfficiencyVector:
        gns = self.ratio_source == "gns"
        # a sweep's vector has its fit, unless it predates the fit (r_b from raw means)
        no_fit_allowed = self.ratio_source == "mean" or gns
        if gns != (self.noise_scale is not None) or (self.fit is None and not no_fit_allowed):
            raise ValueError("an efficiency vector comes from a sweep (ratio_source 'fit' or "
                             "'mean', with its fit) or from the gradient noise scale "
                             "(ratio_source 'gns', with noise_scale)")
        if self.target_accuracy_source == "given":  # a GNS run in a session has no target
            self.target_metric.check_target(self.target_accuracy)
        return self
    #: the model's architecture (wattcap.models.architecture_fingerprint); None: not recorded
    architecture_fingerprint: str | None = None
    #: a user model's source file by content (wattcap.models.model_source_sha256); None: a
    #: registered model, or not recorded
    model_source_sha256: str | None = None

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

    def runs_per_batch_size(self) -> dict[int, int]:
        """How many runs each batch size has (a sweep's: its seeds; an imported table's may
        differ between batch sizes)."""
        return {e.batch_size: len(e.samples_per_seed) for e in self.entries}

    def runs_label(self) -> str:
        """'3 seed(s)', or '1-5 runs per batch size' where batch sizes have different numbers
        of runs."""
        counts = set(self.runs_per_batch_size().values()) or {len(self.seeds)}
        if len(counts) == 1:
            return f"{counts.pop()} seed(s)"
        return f"{min(counts)}-{max(counts)} runs per batch size"

    def pooled_run_spread(self) -> float | None:
        """One run's relative spread of samples to target (standard deviation over mean),
        pooled over the batch sizes where two or more runs reached the target (each weighted by
        its runs less one); None where no batch size has two. The spread given to a batch size
        that rests on a single run."""
        weighted = [((n - 1), (e.samples_std / e.samples_mean) ** 2)
                    for e in self.entries
                    if e.samples_std is not None and e.samples_mean
                    and (n := sum(s is not None for s in e.samples_per_seed)) > 1]
        if not weighted:
            return None
        return math.sqrt(sum(w * v for w, v in weighted) / sum(w for w, _ in weighted))

    def single_run_batch_sizes(self) -> list[int]:
        """Batch sizes resting on one run where others have more: their r_b's spread is the
        pooled spread of one run (`pooled_run_spread`), not a mean's."""
        counts = self.runs_per_batch_size()
        if len(set(counts.values())) < 2:
            return []
        return [b for b, n in counts.items() if n == 1 and b != self.reference_batch_size]

    def ratio_notes(self) -> list[str]:
        """What a plan should say about where r_b came from, and the cautions the estimate
        left in the notes (`cautions`)."""
        return self._origin_notes() + self._run_count_notes() + self.cautions()

    def cautions(self) -> list[str]:
        """The cautions the estimate left in the notes (a near-chance proxy target, r_b not
        resolved): what every command showing this vector's r_b says."""
        return [note for note in self.notes if note.startswith("caution:")]

    def _run_count_notes(self) -> list[str]:
        """What a plan should say where batch sizes have different numbers of runs."""
        counts = self.runs_per_batch_size()
        if self.noise_scale is not None or len(set(counts.values())) < 2:
            return []
        notes = [f"runs per batch size differ on {self.dataset} ("
                 + ", ".join(f"b={b}: {n}" for b, n in sorted(counts.items()))
                 + "): each r_b comes from its own batch size's runs, its spread from their "
                 "number"]
        single = self.single_run_batch_sizes()
        spread = self.pooled_run_spread()
        if not single:
            return notes
        if self.ratio_source == "fit":
            how = "their r_b is the large-batch fit's, whose interval counts every run"
        elif spread is not None:
            how = (f"the spread of their r_b is one run's, {spread:.0%} (pooled over the batch "
                   "sizes with more runs)")
        else:
            how = "no batch size has two runs to take a spread from"
        notes.append(f"a single run for b = {single}: {how}")
        return notes

    def _origin_notes(self) -> list[str]:
        """Where r_b came from: the noise scale, the large-batch fit or raw means."""
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
        model_source_sha256: str | None = None,
    ) -> None:
        """Refuse a vector made for another model, input shape, architecture or user-model
        source (shapes, fingerprints and source hashes are compared when both are known). A user
        model's file may move: the same file name, factory and architecture match."""
        same_architecture = (architecture_fingerprint is not None
                             and architecture_fingerprint == self.architecture_fingerprint)
        if model is not None and not (same_architecture and portable_model_name(model)
                                      == portable_model_name(self.model) is not None):
            require_match("the efficiency vector", "model", model, self.model, source,
                          other_architecture=not same_architecture and None not in (
                              architecture_fingerprint, self.architecture_fingerprint))
        if model_source_sha256 is not None and self.model_source_sha256 is not None \
                and model_source_sha256 != self.model_source_sha256:
            raise WattcapFileError(
                f"{source}: the efficiency vector was estimated with another version of the "
                f"model's source ({self.model}: sha256 {self.model_source_sha256[:12]}…, now "
                f"{model_source_sha256[:12]}…). Estimate r_b again for the changed model.")
        # an empty shape is one a file did not record (an imported table without
        # --input-shape): nothing to compare it with
        if input_shape is not None and list(input_shape) and self.input_shape:
            require_match(
                "the efficiency vector", "input shape", list(input_shape), self.input_shape, source
            )
        if architecture_fingerprint is not None and self.architecture_fingerprint is not None:
            require_match("the efficiency vector", "architecture fingerprint",
                          architecture_fingerprint, self.architecture_fingerprint, source)



def _entries_of_version_2(raw: dict[str, Any]) -> dict[str, Any]:
    """Version 1 kept per batch size the samples per seed and the mean ratio only: the entry
    gets the fields of version 2 from those numbers (the budget of every seed is the vector's;
    r_b stays the raw mean it was, with no fit). A batch size no seed reached had no r_b in
    version 1: it is left out, and a note says so (re-estimate to extrapolate it)."""
    entries = raw.get("entries", [])
    if not any(isinstance(e, dict) and "ratio_mean" in e for e in entries):
        return raw
    budget = int(raw.get("sample_budget", 0))
    converted, dropped = [], []
    for entry in entries:
        if entry.get("ratio_mean") is None:
            dropped.append(entry.get("batch_size"))
            continue
        reached = [s for s in entry["samples_per_seed"] if s is not None]
        mean = entry.get("samples_mean")
        converted.append({
            "batch_size": entry["batch_size"],
            "samples_per_seed": entry["samples_per_seed"],
            "budget_per_seed": [budget] * len(entry["samples_per_seed"]),
            "samples_mean": mean,
            "samples_std": statistics.stdev(reached) if len(reached) > 1 else None,
            "samples": mean,
            "ratio": entry["ratio_mean"],
            "ratio_low": None,
            "ratio_high": None,
            "ratio_std": entry.get("ratio_std"),
            "source": "mean",
        })
    notes = list(raw.get("notes", []))
    if dropped:
        notes.append(f"migrated from schema 1: b = {dropped} did not reach the target and had "
                     "no r_b; re-estimate to extrapolate them")
    raw.setdefault("fit", None)
    raw.setdefault("ratio_source", "mean")
    return {**raw, "entries": converted, "notes": notes}
