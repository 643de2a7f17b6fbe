"""The evaluation harness: wattcap vs baseline-1, baseline-2 and the fastest configuration over
power scenarios, target datasets and seeds, plus the proxy-sensitivity matrix.

For each target and batch size the training math runs once per seed (that also measures r_b on
the target for the oracle). On an emulated device the run's steps are then replayed on the
device at each method's frequency — the emulator's time and power depend on the step's cost
and the frequency, not on the values computed — so every (scenario, method) gets a real
device-clock time-to-accuracy, sampled energy and watchdog, without re-running the math.
Everything is recorded in DIR; `resume` reuses what is there.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from wattcap.algorithms.curves import samples_to_target
from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.algorithms.planner import plan
from wattcap.algorithms.restarts import expected_over_runs, samples_with_restarts
from wattcap.core.defaults import DEFAULT_BATCH_SIZE_REF, DEFAULT_LR_REF
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.files import write_file
from wattcap.core.knob import KnobKind, format_knob
from wattcap.core.metric import ACCURACY, TargetMetric
from wattcap.core.plan import METHODS, InfeasibleCapError, format_known
from wattcap.core.progress import JobProgress, OnProgress, ProgressUpdate
from wattcap.core.run import RunRecord, TrainConfig
from wattcap.core.schema import Migration, VersionedFile, WattcapFileError, rename_key
from wattcap.data import load_splits
from wattcap.devices.workload import workload_for
from wattcap.experiments.replay import (
    BoardMode,
    Replay,
    fastest_by_replay,
    load_or_profile,
    replay_on_device,
    replay_planned,
    run_device,
)
from wattcap.experiments.significance import TimeComparison, compare_times
from wattcap.measure.imported_tables import EXPORT_KNOB_COLUMNS, export_knob_value
from wattcap.measure.references import emulated_reference_profiles
from wattcap.runtime.session_config import PlanSettings
from wattcap.train.efficiency import EVALS_PAST_TARGET
from wattcap.train.executors import Executor, SerialExecutor
from wattcap.train.run_store import RunStore, SweepInputs, run_stem
from wattcap.train.tasks import TrainingTask


class MethodResult(BaseModel):
    """One (device, cap, target, method): the choice and its measured outcome over seeds."""

    model_config = ConfigDict(extra="forbid")
    device: str
    power_cap_w: float | None
    target: str
    method: str
    batch_size: int
    #: in the unit of the comparison's knob kind (Comparison.knob_kind)
    knob_value: int
    #: None: the proxy gave no r_b for the method's batch size (its time is still measured)
    predicted_time_s: float | None
    time_s: list[float | None]
    energy_j: list[float | None]
    peak_power_w: float
    cap_violations: int
    frequency_steps: int
    #: per seed, what a seed that missed the target spent on its whole budget (None where the
    #: seed reached it); empty in files written before restarts were scored
    budget_time_s: list[float | None] = []
    budget_energy_j: list[float | None] = []
    #: per seed, the batch size and knob value of the plan its run ended with: on unkind boards
    #: wattcap's run may choose again for the board it trains on once it knows the board's
    #: level (the choice above is the plan from the profile; the watchdog's clock steps under a
    #: plan are counted in frequency_steps); empty where every seed ran at the choice
    seed_batch_sizes: list[int] = []
    seed_knob_values: list[int] = []
    #: seeds whose run re-planned for its board
    board_replans: int = 0
    #: per seed, the peak power its run read (peak_power_w is their maximum); empty in files
    #: written before, and for a replayed trace (its table's peak is every seed's)
    seed_peak_power_w: list[float] = []

    @property
    def time_mean_s(self) -> float | None:
        """Mean time-to-accuracy; None unless every seed reached the target."""
        return _mean_if_all(self.time_s)

    @property
    def time_std_s(self) -> float:
        return _std(self.time_s)

    @property
    def energy_std_j(self) -> float:
        return _std(self.energy_j)

    @property
    def missed(self) -> int:
        """Seeds that missed the target within their budget."""
        return sum(t is None for t in self.time_s)

    @property
    def expected_time_s(self) -> float | None:
        """The time to the target a user should expect: the mean where every seed reached it;
        where some missed, the mean of those that reached it plus (1 - p) / p missed budgets
        (restarts, `wattcap.algorithms.restarts`); None where none reached it or a missed
        seed's budget time was not recorded."""
        return expected_over_runs(self.time_s, self.budget_time_s)

    @property
    def expected_energy_j(self) -> float | None:
        """Energy to the target with restarts, as `expected_time_s`."""
        return expected_over_runs(self.energy_j, self.budget_energy_j)

    def board_replan_label(self, describe_knob: Callable[[int], str]) -> str | None:
        """Where seeds re-planned for their boards: 're-planned on 2 of 3 boards: b=32 @ 921.6
        MHz' (each configuration they ended at, with its count where they differ); None where
        none did."""
        if not self.board_replans:
            return None
        ends = Counter(end for end in zip(self.seed_batch_sizes, self.seed_knob_values,
                                          strict=True)
                       if end != (self.batch_size, self.knob_value))
        where = ", ".join(f"b={b} @ {describe_knob(k)}" + (f" ({n})" if len(ends) > 1 else "")
                          for (b, k), n in ends.most_common())
        return f"re-planned on {self.board_replans} of {len(self.time_s)} boards: {where}"

    def missed_label(self, digits: int = 2) -> str:
        """For a result where seeds missed the target: '1.50 s expected with restarts (1 of 3
        seeds missed)', or 'not reached in 3 of 3 seeds' where no time can be expected."""
        n = len(self.time_s)
        expected = self.expected_time_s
        if expected is None:
            return f"not reached in {self.missed} of {n} seeds"
        return (f"{expected:.{digits}f} s expected with restarts ({self.missed} of {n} seeds "
                "missed)")

    def violations_label(self) -> str:
        """The cap violations recorded, as ' ⚠ 2 cap violations, peak 4.89 W' (empty where
        none): a time beside a broken cap is not a time under that cap, so a table says so."""
        if not self.cap_violations:
            return ""
        plural = "" if self.cap_violations == 1 else "s"
        return f" ⚠ {self.cap_violations} cap violation{plural}, peak {self.peak_power_w:.2f} W"


def _config_of(record: RunRecord) -> TrainConfig:
    """The training configuration of a recorded run (every run compare makes carries one)."""
    if record.config is None:
        raise ValueError(f"run record of {record.model} on {record.dataset} has no training "
                         "configuration: it was not written by a comparison")
    return record.config


def _mean_if_all(values: list[float | None]) -> float | None:
    done = [v for v in values if v is not None]
    return statistics.fmean(done) if done and len(done) == len(values) else None


def _std(values: list[float | None]) -> float:
    done = [v for v in values if v is not None]
    return statistics.stdev(done) if len(done) > 1 else 0.0


def _knob_of_frequency(raw: dict) -> dict:
    """Schema 2 -> 3: results before knobs ran at GPU clocks, in Hz."""
    rename_key(raw.get("results"), "frequency_hz", "knob_value")
    return raw


class Comparison(VersionedFile):
    """All results of one comparison."""

    FILE_KIND = "wattcap.comparison"
    #: 2: risk; 3: knob_kind and trace_label, MethodResult.frequency_hz became knob_value;
    #: 4: MethodResult.budget_time_s and budget_energy_j (missed seeds scored with restarts),
    #: cap_on, target_metric, proxy_target_metric; 5: board; 6: MethodResult.seed_batch_sizes,
    #: seed_knob_values and board_replans (wattcap's re-plan for the board a seed ran on);
    #: 7: transfer_factor, MethodResult.seed_peak_power_w
    SCHEMA_VERSION = 7
    MIGRATIONS: ClassVar[dict[int, Migration]] = {1: lambda raw: raw, 2: _knob_of_frequency,
                                                  3: lambda raw: raw, 4: lambda raw: raw,
                                                  5: lambda raw: raw, 6: lambda raw: raw}
    #: decimals of the time ratios its table and report print: the goals are stated to 1 %
    #: (T(wattcap)/T(fastest) at most 1.01), so 1.004x and 0.996x must not both read 1.00x
    RATIO_DIGITS: ClassVar[int] = 3

    model: str
    proxy: str
    targets: list[str]
    devices: list[str]
    seeds: int
    target_accuracy: float
    #: the proxy's own target accuracy (its r_b's), when recorded
    proxy_target_accuracy: float | None = None
    results: list[MethodResult]
    infeasible: list[str] = []
    runs_trained: int = 0
    runs_reused: int = 0
    #: the quantile of r_b wattcap planned on (`compare --risk`), None: r_b's value
    risk: float | None = None
    #: wattcap chose robustly to a target B_noise up to this factor from the proxy's
    #: (`compare --transfer-factor`), None: on the proxy's r_b as it is
    transfer_factor: float | None = None
    #: the knob of the profiles compared (wattcap.core.knob): the unit of knob_value
    knob_kind: KnobKind = "gpu_clock"
    #: what the numbers are, for a replayed trace (its manifest's label); None: trained here
    trace_label: str | None = None
    #: what the caps held: "peak" power, or "average" (a trace of a power-limited GPU)
    cap_on: Literal["peak", "average"] = "peak"
    #: the emulated boards the runs replayed on (`wattcap.experiments.replay`)
    board: BoardMode = "kind"
    #: the metrics of the targets' and the proxy's targets (a trace's runs may be to a word
    #: error rate or F1 on 0-100; a trained comparison's are accuracy)
    target_metric: TargetMetric = ACCURACY
    proxy_target_metric: TargetMetric = ACCURACY

    def describe_knob(self, value: int) -> str:
        """A knob value of this comparison with its unit."""
        return format_knob(self.knob_kind, value)

    def get(self, device: str, cap: float | None, target: str, method: str) -> MethodResult | None:
        for r in self.results:
            if (r.device, r.power_cap_w, r.target, r.method) == (device, cap, target, method):
                return r
        return None

    def versus_wattcap(self, result: MethodResult) -> TimeComparison | None:
        """The method's measured time over wattcap's in the same scenario, with whether the
        seeds separate them; None for wattcap itself or when a seed missed the target."""
        ours = self.get(result.device, result.power_cap_w, result.target, "wattcap")
        if result.method == "wattcap" or ours is None or None in ours.time_s + result.time_s:
            return None
        return compare_times(result.time_s, ours.time_s)  # type: ignore[arg-type]

    def over_fastest_pct(self, result: MethodResult) -> float | None:
        """Percentage time increase over the fastest configuration of the same scenario, on
        the expected times (restarts included where a seed missed)."""
        fastest = self.get(result.device, result.power_cap_w, result.target, "fastest")
        ours = result.expected_time_s
        best = None if fastest is None else fastest.expected_time_s
        if best is None or ours is None:
            return None
        return 100.0 * (ours / best - 1.0)


def _seed_choices(replays: list[Replay]) -> dict[str, Any]:
    """A planned replay's per-seed batch sizes and knob values (MethodResult's fields), where
    the replays were planned runs."""
    if any(r.batch_size is None or r.knob_value is None for r in replays):
        return {}
    return {"seed_batch_sizes": [r.batch_size for r in replays],
            "seed_knob_values": [r.knob_value for r in replays],
            "board_replans": sum(bool(r.events) for r in replays)}


@dataclass
class Scenario:
    """A device (emulated spec) and the caps to evaluate on it."""

    device: str
    caps_w: list[float | None]


#: the offline default grid: caps chosen so each binds at a different level on each device
DEFAULT_SCENARIOS = [
    Scenario("jetson-nano", [4.5, 5.5, None]),
    Scenario("jetson-tx2nx", [6.0, 7.0, None]),
]


_SPLITS: dict[str, tuple] = {}


def dataset_splits(dataset: str, data_options: dict | None = None) -> tuple:
    """The seeded (train, test) splits of a data spec (wattcap.data.load_splits with
    `data_options`), loaded once per process: a sweep trains on them many times."""
    key = json.dumps([dataset, data_options or {}], sort_keys=True, default=str)
    if key not in _SPLITS:
        _SPLITS[key] = load_splits(dataset, seed=0, **(data_options or {}))
    return _SPLITS[key]


def efficiency_from_runs(
    runs: dict[tuple[int, int], RunRecord], model: str, target: str, seeds: int,
    target_accuracy: float, input_shape: list[int], measured: bool = False,
) -> EfficiencyVector | None:
    """r_b from recorded math runs, with samples to target interpolated on each run's smoothed
    curve; None when no batch size reached the target. `measured=True` (the fastest
    configuration's knowledge of the target) keeps the raw means of what was measured and
    nothing modelled: a batch size where some seeds missed counts its expected samples with
    restarts (`wattcap.algorithms.restarts`), one where every seed missed is left out. The
    oracle is a brute force over the measured runs."""
    from wattcap.models import get_model_spec, model_fingerprint

    sizes = sorted({b for b, _ in runs})
    chosen = {b: [runs[(b, s)] for s in range(seeds)] for b in sizes}
    samples = {b: [samples_to_target(r.curve, target_accuracy) for r in records]
               for b, records in chosen.items()}
    if measured:
        with_restarts = {b: samples_with_restarts(v, [_config_of(r).sample_budget
                                                      for r in chosen[b]])
                         for b, v in samples.items()}
        samples = {b: list(v) for b, v in with_restarts.items() if v is not None}
        if not samples:
            return None
    configs = {b: [_config_of(r) for r in chosen[b]] for b in samples}
    budgets = {b: [c.sample_budget for c in configs[b]] for b in samples}
    first = _config_of(next(iter(chosen.values()))[0])
    try:
        return vector_from_samples(
            samples, sample_budget=min(min(v) for v in budgets.values()), budgets=budgets,
            use_fit=not measured,
            model=model, input_shape=input_shape, dataset=target,
            task=get_model_spec(model).task, target_accuracy=target_accuracy,
            seeds=list(range(seeds)), optimizer=first.optimizer, lr_ref=first.lr_ref,
            batch_size_ref=first.batch_size_ref, eval_every_samples=first.eval_every_samples,
            architecture_fingerprint=model_fingerprint(model),
        )
    except ValueError:
        return None


def math_runs(
    out: Path, model: str, weights: Path | None, dataset: str, batch_sizes: tuple[int, ...],
    seeds: int, target_accuracy: float, sample_budget: int, resume: bool, counters: dict,
    progress: OnProgress | None = None,
    data_options: dict | None = None, num_workers: int = 0,
    executor: Executor | None = None, shared_runs: tuple[Path, ...] = (),
) -> dict[tuple[int, int], RunRecord]:
    """Every (batch size, seed) run on a dataset (a data spec, loaded with `data_options`),
    reused when recorded (in OUT/runs, or in a `shared_runs` folder such as the cache's) with
    the same model, weights (by content), data, budget, seed and target, else trained by
    `executor` (default: serially here) and recorded as each finishes. `progress` gets a
    `JobProgress` per run (reused or trained; the record as its item) and a message before
    training starts."""
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    executor = executor or SerialExecutor()
    inputs = SweepInputs(model, weights, dataset, data_options)
    keys = [(b, seed) for b in batch_sizes for seed in range(seeds)]
    configs = {(b, seed): TrainConfig(model=model, batch_size=b, target_accuracy=target_accuracy,
                                      sample_budget=sample_budget, seed=seed,
                                      evals_past_target=EVALS_PAST_TARGET)
               for b, seed in keys}
    store = RunStore(out / "runs", inputs, shared=shared_runs)
    runs: dict[tuple[int, int], RunRecord] = {}
    pending = []

    def finished(record: RunRecord) -> None:
        if progress:
            progress(JobProgress(len(runs), len(keys), "runs", _run_detail(record),
                                 item=record))

    for key in keys:
        record = store.recorded(configs[key]) if resume else None
        if record is None:
            pending.append(key)
            continue
        counters["reused"] += 1
        runs[key] = record
        finished(record)
    if pending:
        if progress:
            progress(JobProgress(len(runs), len(keys), "runs", f"training {dataset}: "
                                 f"{len(pending)} runs ({executor.describe()})"))
        train, test = dataset_splits(dataset, data_options)
        task = TrainingTask.shipping(train, test, weights,
                                     carry_weights=not isinstance(executor, SerialExecutor),
                                     num_workers=num_workers)

        def done(i: int, record: RunRecord) -> None:
            store.save(configs[pending[i]], record)
            counters["trained"] += 1
            runs[pending[i]] = record
            finished(record)

        executor.map(task, [configs[key] for key in pending], done)
    return {key: runs[key] for key in keys}


def _run_detail(record: RunRecord) -> str:
    """A finished run as a person reads it: data, batch size, seed, samples to target."""
    reached = (f"{record.samples_to_target:.0f} samples to target"
               if record.samples_to_target is not None else "target not reached")
    seed = record.config.seed if record.config else "?"
    return f"{record.dataset} b={record.batch_size} seed={seed}: {reached}"


def estimate_proxy_efficiency(
    out: Path, model: str, weights: Path | None, proxy: str, batch_sizes: tuple[int, ...],
    seeds: int, target_accuracy: float | str, sample_budget: int, resume: bool,
    counters: dict, progress: OnProgress | None = None,
    data_options: dict | None = None, num_workers: int = 0, executor: Executor | None = None,
    shared_runs: tuple[Path, ...] = (),
) -> EfficiencyVector:
    """r_b on a proxy with the proxy's own target accuracy (a number, or "auto": chosen from
    the largest batch size's curve, see `estimate_efficiency`), recorded in OUT and reused
    only when model, weights, data, batch sizes, seeds, budget and target all match. Its
    runs are reused from OUT/runs and from `shared_runs` (the cache's, where `wattcap
    estimate` keeps them): a proxy already estimated with the same settings trains nothing."""
    from wattcap.train.efficiency import estimate_efficiency

    inputs = SweepInputs(model, weights, proxy, data_options)
    settings: dict[str, object] = dict(
        batch_sizes=list(batch_sizes), seeds=seeds, target=target_accuracy,
        sample_budget=sample_budget, lr_ref=DEFAULT_LR_REF, batch_size_ref=DEFAULT_BATCH_SIZE_REF)
    stem = f"efficiency-proxy-{run_stem(proxy, data_options)}"
    path = out / f"{stem}-{inputs.key(**settings)}.json"
    # the file of an earlier wattcap, whose key had the weights file's sha256
    earlier = inputs.earlier_key(**settings)
    for found in [path] + ([] if earlier is None else [out / f"{stem}-{earlier}.json"]):
        if resume and found.exists():
            try:
                vector = EfficiencyVector.load(found)
            except WattcapFileError:
                continue  # half-written: estimate again
            counters["reused"] += sum(len(e.samples_per_seed) for e in vector.entries)
            return vector
    # every (batch size, seed) run is kept in OUT/runs as it finishes: a killed sweep
    # resumes with them, and `sensitivity` in the same OUT reuses them
    vector = estimate_efficiency(
        model, proxy, "auto" if target_accuracy == "auto" else float(target_accuracy),
        weights=weights, batch_sizes=batch_sizes, seeds=seeds, sample_budget=sample_budget,
        progress=progress, data=dataset_splits(proxy, data_options),
        data_options=data_options, num_workers=num_workers, executor=executor,
        runs_dir=out / "runs" if resume else None, run_counts=counters,
        shared_runs_dirs=shared_runs if resume else ())
    vector.save(path)
    return vector


def run_comparison(
    out: Path,
    model: str,
    weights: Path | None,
    proxy_efficiency: EfficiencyVector,
    targets: list[str],
    scenarios: list[Scenario],
    seeds: int,
    target_accuracy: float,
    batch_sizes: tuple[int, ...],
    sample_budget: int = 20_000,
    resume: bool = True,
    progress: OnProgress | None = None,
    counters: dict | None = None,
    data_options: dict | None = None,
    num_workers: int = 0,
    executor: Executor | None = None,
    risk: float | None = None,
    shared_runs: tuple[Path, ...] = (),
    board: BoardMode = "kind",
    transfer_factor: float | None = None,
) -> Comparison:
    """Train, replay and record every (scenario, target, method); the training math runs on
    `executor` (default: serially here). `progress` counts the training runs of every target
    (a `JobProgress` per run, the record as its item) and says what is replayed. `risk` plans
    on r_b's quantile (`plan(risk=...)`); the oracle stays the brute force over measured
    runs. `transfer_factor` makes wattcap's choice robust to a target B_noise up to that
    factor from the proxy's (`plan(transfer_factor=...)`; its Session's re-plans too). Runs
    recorded in `shared_runs` folders are reused too (see `math_runs`). `board`
    "unkind" replays each seed on a board state of its own and finds the fastest by replaying
    (`wattcap.experiments.replay`)."""
    total = len(targets) * len(batch_sizes) * seeds
    done = [0]

    def relay(update: ProgressUpdate) -> None:  # one count over every target's runs
        done[0] += update.item is not None
        if progress:
            progress(JobProgress(done[0], total, "runs", update.detail, item=update.item))

    def say(message: str) -> None:
        if progress:
            progress(JobProgress(done[0], total, "runs", message))

    counters = counters if counters is not None else {"trained": 0, "reused": 0}
    results: list[MethodResult] = []
    infeasible: list[str] = []
    math = {target: math_runs(out, model, weights, target, batch_sizes, seeds, target_accuracy,
                              sample_budget, resume, counters, relay, data_options,
                              num_workers, executor, shared_runs)
            for target in targets}
    input_shape = list(workload_for(model).input_shape)
    for scenario in scenarios:
        profile = load_or_profile(out, scenario.device, model, batch_sizes, board)
        references = emulated_reference_profiles(scenario.device)
        for target in targets:
            oracle_r = efficiency_from_runs(math[target], model, target, seeds, target_accuracy,
                                         input_shape, measured=True)
            for cap in scenario.caps_w:
                try:
                    result = plan(profile, cap, efficiency=proxy_efficiency,
                                  reference_profiles=references, target_efficiency=oracle_r,
                                  risk=risk, transfer_factor=transfer_factor)
                except InfeasibleCapError as err:
                    infeasible.append(f"{scenario.device} at {cap} W: {err}")
                    continue
                for method in METHODS:
                    choice = result.choices.get(method)
                    cap_text = "no cap" if cap is None else f"cap {cap:g} W"
                    say(f"replaying {scenario.device} {cap_text} {target} {method}")
                    if method == "fastest" and board == "unkind":
                        found = fastest_by_replay(profile, cap, math[target], scenario.device,
                                                  seeds, board)
                        if found is None:
                            continue
                        b, knob_value, replays = found
                        predicted = None
                    elif choice is None:
                        continue
                    elif method == "wattcap" and board == "unkind":
                        # as `wattcap train` runs it: the Session may re-plan for its board
                        b, knob_value = choice.batch_size, choice.knob_value
                        predicted = choice.predicted_time_s
                        planning = PlanSettings(profile=profile, efficiency=proxy_efficiency,
                                                reference_profiles=references, risk=risk,
                                                transfer_factor=transfer_factor)
                        replays = [replay_planned(math[target], seed,
                                                  run_device(scenario.device, seed, board),
                                                  planning, cap) for seed in range(seeds)]
                    else:
                        b, knob_value = choice.batch_size, choice.knob_value
                        predicted = choice.predicted_time_s
                        replays = [replay_on_device(math[target][(b, seed)],
                                                    run_device(scenario.device, seed, board),
                                                    knob_value, cap, profile.power_noise_w)
                                   for seed in range(seeds)]
                    results.append(MethodResult(
                        device=scenario.device, power_cap_w=cap, target=target, method=method,
                        batch_size=b, knob_value=knob_value, predicted_time_s=predicted,
                        time_s=[r.time_s for r in replays],
                        energy_j=[r.energy_j for r in replays],
                        budget_time_s=[r.budget_time_s for r in replays],
                        budget_energy_j=[r.budget_energy_j for r in replays],
                        peak_power_w=max(r.peak_w for r in replays),
                        seed_peak_power_w=[r.peak_w for r in replays],
                        cap_violations=sum(len(r.violations) for r in replays),
                        frequency_steps=sum(len(r.frequency_steps) for r in replays),
                        **_seed_choices(replays),
                    ))
    comparison = Comparison(
        model=model, proxy=proxy_efficiency.dataset, targets=targets,
        proxy_target_accuracy=proxy_efficiency.target_accuracy,
        devices=[s.device for s in scenarios], seeds=seeds, target_accuracy=target_accuracy,
        results=results, infeasible=infeasible, runs_trained=counters["trained"],
        runs_reused=counters["reused"], risk=risk, board=board,
        transfer_factor=transfer_factor,
    )
    comparison.save(out / "comparison.json")
    write_csv(comparison, out / "results.csv")
    return comparison


def write_csv(comparison: Comparison, path: Path) -> None:
    """Raw results, one row per (scenario, target, method, seed)."""
    handle = io.StringIO(newline="")
    writer = csv.writer(handle)
    writer.writerow(["device", "power_cap_w", "target", "method", "batch_size",
                     EXPORT_KNOB_COLUMNS[comparison.knob_kind], "seed", "time_to_accuracy_s",
                     "energy_j", "peak_power_w", "predicted_time_s", "over_fastest_pct"])
    for r in comparison.results:
        over = comparison.over_fastest_pct(r)
        for seed, (t, e) in enumerate(zip(r.time_s, r.energy_j, strict=True)):
            # where the seed's run re-planned for its board, the configuration it ended at
            b = r.seed_batch_sizes[seed] if r.seed_batch_sizes else r.batch_size
            knob = r.seed_knob_values[seed] if r.seed_knob_values else r.knob_value
            peak_w = r.seed_peak_power_w[seed] if r.seed_peak_power_w else r.peak_power_w
            writer.writerow([
                r.device, "none" if r.power_cap_w is None else r.power_cap_w, r.target,
                r.method, b, export_knob_value(comparison.knob_kind, knob), seed,
                "" if t is None else f"{t:.4f}", "" if e is None else f"{e:.3f}",
                f"{peak_w:.3f}", format_known(r.predicted_time_s, ".4f", ""),
                "" if over is None else f"{over:.2f}",
            ])
    write_file(path, handle.getvalue())
