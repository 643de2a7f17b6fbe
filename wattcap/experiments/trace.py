"""Replaying a measured device: `wattcap compare --device trace:FILE`.

A trace is what someone measured: a profile table and the runs of each batch size on a proxy
and on target data, in the CSV layouts of `wattcap import` (wattcap.measure.imported_tables),
named by a small JSON manifest (`TraceManifest`, kind "wattcap.trace"):

    {"kind": "wattcap.trace", "schema_version": 1,
     "label": "measured on ... (or: generated from wattcap's emulator, not hardware)",
     "device": "a100-pcie", "model": "resnet50",
     "profile": {"file": "profile.csv", "power_sampling": "average:1"},
     "proxy": {"file": "proxy-runs.csv", "dataset": "imagenet-subset", "target": 0.7},
     "targets": [{"file": "target-runs.csv", "dataset": "my-data", "target": 0.8}],
     "cap_on": "average"}

Files are read relative to the manifest; `cap_on` (optional) says what the device's caps hold,
peak power (the default) or average power (a power-limited GPU), and `--cap-on` overrides it.
Every method is planned under each cap from the table and the proxy's r_b, as `compare`
plans, and scored on the target's measured runs: a seed's time is T(b, knob) from the table
times the samples that seed needed; a seed that missed the target costs its budget at the same
T and a restart (`wattcap.algorithms.restarts`), and a batch size the target never ran gives
its method no time (said, not invented). The oracle is the brute force over the target's
measured means, with restarts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.algorithms.planner import plan
from wattcap.algorithms.power_margin import cap_on_average
from wattcap.algorithms.restarts import samples_with_restarts
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.plan import METHODS, InfeasibleCapError, Plan
from wattcap.core.profile import ProfileTable
from wattcap.core.schema import VersionedFile, WattcapFileError
from wattcap.experiments.compare import Comparison, MethodResult
from wattcap.measure.imported_tables import import_efficiency, import_profile


class TraceTable(BaseModel):
    """The trace's profile: a CSV in `wattcap import profile`'s layout."""

    model_config = ConfigDict(extra="forbid")
    file: str
    #: how its power was measured (`--power-sampling`)
    power_sampling: str
    columns: str | None = None


class TraceRuns(BaseModel):
    """Runs on one dataset: a CSV in `wattcap import efficiency`'s layout."""

    model_config = ConfigDict(extra="forbid")
    file: str
    dataset: str
    #: the target, in the metric's units
    target: float
    metric: str = "accuracy"
    columns: str | None = None


class TraceManifest(VersionedFile):
    """What a trace is made of (see the module docstring)."""

    FILE_KIND = "wattcap.trace"
    SCHEMA_VERSION = 1

    #: what the numbers are: measured on what, or generated from the emulator
    label: str
    device: str
    model: str
    input_shape: list[int] = []
    profile: TraceTable
    proxy: TraceRuns
    targets: list[TraceRuns]
    #: what the device's caps hold: "peak" power (a Jetson's supply) or "average" (what a GPU
    #: power limit enforces); None: peak, unless the command says otherwise
    cap_on: Literal["peak", "average"] | None = None


@dataclass
class Trace:
    """A loaded trace: the manifest and the wattcap files made from its tables."""

    path: Path
    manifest: TraceManifest
    profile: ProfileTable
    proxy: EfficiencyVector
    targets: dict[str, EfficiencyVector]


def load_trace(path: str | Path) -> Trace:
    """Read a trace manifest and import its tables; a missing or malformed file is one
    `WattcapFileError` / `TableImportError` naming it."""
    path = Path(path)
    manifest = TraceManifest.load(path)
    folder = path.parent
    shape = manifest.input_shape or None

    def runs(entry: TraceRuns) -> EfficiencyVector:
        return import_efficiency(folder / entry.file, model=manifest.model,
                                 dataset=entry.dataset, target_accuracy=entry.target,
                                 input_shape=shape, columns=entry.columns, metric=entry.metric)

    profile = import_profile(folder / manifest.profile.file, device=manifest.device,
                             model=manifest.model, input_shape=shape,
                             power_sampling=manifest.profile.power_sampling,
                             columns=manifest.profile.columns)
    if not manifest.targets:
        raise WattcapFileError(f"{path}: the trace names no target runs")
    return Trace(path, manifest, profile, runs(manifest.proxy),
                 {entry.dataset: runs(entry) for entry in manifest.targets})


def measured_oracle(vector: EfficiencyVector) -> EfficiencyVector | None:
    """The target's knowledge for the brute force: the raw mean samples of each batch size
    some seed brought to the target, nothing fitted, a seed that missed counted with restarts
    (`wattcap.algorithms.restarts`); None: no batch size reached it."""
    samples: dict[int, list[float | None]] = {}
    for e in vector.entries:
        expected = samples_with_restarts(e.samples_per_seed, e.budget_per_seed) \
            if e.samples_per_seed else None
        if expected is not None:
            samples[e.batch_size] = list(expected)
    if not samples:
        return None
    budgets = {e.batch_size: list(e.budget_per_seed) for e in vector.entries
               if e.batch_size in samples}
    return vector_from_samples(
        samples, sample_budget=min(min(b) for b in budgets.values()), budgets=budgets,
        use_fit=False, model=vector.model, input_shape=vector.input_shape,
        dataset=vector.dataset, task=vector.task, target_accuracy=vector.target_accuracy,
        target_metric=vector.target_metric, seeds=vector.seeds)


def replay_trace(trace: Trace, caps_w: list[float | None], risk: float | None = None,
                 cap_on: Literal["peak", "average"] | None = None,
                 transfer_factor: float | None = None) -> Comparison:
    """Every method under every cap, scored on the target's measured runs (no training);
    `cap_on` "average": the cap holds average power (what a power limit enforces); None: the
    manifest's, else peak. `transfer_factor`: wattcap chooses robustly to a target B_noise up
    to that factor from the proxy's."""
    cap_on = cap_on or trace.manifest.cap_on or "peak"
    results: list[MethodResult] = []
    infeasible: list[str] = []
    device = trace.manifest.device
    profile = cap_on_average(trace.profile) if cap_on == "average" else trace.profile
    for target, vector in trace.targets.items():
        oracle = measured_oracle(vector)
        for cap in caps_w:
            try:
                result = plan(profile, cap, efficiency=trace.proxy,
                              target_efficiency=oracle, risk=risk,
                              transfer_factor=transfer_factor)
            except InfeasibleCapError as err:
                infeasible.append(f"{device} at {cap} W: {err}")
                continue
            scored, unmeasured = _scored(result, vector, device, target)
            results += scored
            infeasible += unmeasured
    seeds = max(len(e.samples_per_seed) for v in trace.targets.values() for e in v.entries)
    return Comparison(
        model=trace.manifest.model, proxy=trace.proxy.dataset,
        targets=list(trace.targets), devices=[device], seeds=seeds,
        target_accuracy=next(iter(trace.targets.values())).target_accuracy,
        proxy_target_accuracy=trace.proxy.target_accuracy, results=results,
        infeasible=infeasible, risk=risk, transfer_factor=transfer_factor,
        knob_kind=trace.profile.knob_kind,
        trace_label=trace.manifest.label, cap_on=cap_on,
        target_metric=next(iter(trace.targets.values())).target_metric,
        proxy_target_metric=trace.proxy.target_metric)


def _scored(result: Plan, vector: EfficiencyVector, device: str,
            target: str) -> tuple[list[MethodResult], list[str]]:
    """Each method's choice with the times and energies of the target's measured runs, and
    the methods whose batch size the target never ran (no time is invented for them)."""
    scored, unmeasured = [], []
    for method in METHODS:
        choice = result.choices.get(method)
        if choice is None:
            continue
        entry = next((e for e in vector.entries if e.batch_size == choice.batch_size), None)
        if entry is None:
            cap = "no cap" if result.power_cap_w is None else f"{result.power_cap_w:g} W"
            unmeasured.append(f"{device} at {cap} on {target}: {method} chose b="
                              f"{choice.batch_size}, which the target's runs never ran: no "
                              "time (nothing is invented)")
            continue
        per_seed = entry.samples_per_seed
        times = [None if s is None else choice.seconds_per_sample * s for s in per_seed]
        # a seed that missed trained its whole budget at the same time per sample
        budgets = [None if s is not None else choice.seconds_per_sample * budget
                   for s, budget in zip(per_seed, entry.budget_per_seed, strict=True)]
        scored.append(MethodResult(
            device=device, power_cap_w=result.power_cap_w, target=target, method=method,
            batch_size=choice.batch_size, knob_value=choice.knob_value,
            predicted_time_s=choice.predicted_time_s, time_s=times,
            energy_j=[None if t is None else t * choice.avg_power_w for t in times],
            budget_time_s=budgets,
            budget_energy_j=[None if t is None else t * choice.avg_power_w for t in budgets],
            peak_power_w=choice.peak_power_w, cap_violations=0, frequency_steps=0))
    return scored, unmeasured


__all__ = ["Trace", "TraceManifest", "TraceRuns", "TraceTable", "load_trace",
           "measured_oracle", "replay_trace"]
