"""`wattcap compare` and `wattcap sensitivity`: the evaluation harness on the command line."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from wattcap.cli.common import executor_or_fail, fail, parse_cap
from wattcap.cli.console import make_console
from wattcap.cli.errors import print_error
from wattcap.cli.inputs import (
    check_data,
    check_risk,
    check_seeds,
    check_split_size,
    check_target_accuracy,
    check_weights,
    check_workers,
    data_error_text,
    data_options,
    fitting_batch_sizes,
    parse_target,
    resolve_model,
)
from wattcap.cli.options import (
    Board,
    BoardOpt,
    CapOn,
    CapOnOpt,
    InputShapeOpt,
    ModelOpt,
    NumClassesOpt,
    PowerCapsOpt,
    ProxyOpt,
    ProxyTargetOpt,
    RayOpt,
    ResumeOpt,
    RiskOpt,
    SampleBudgetOpt,
    SeedsOpt,
    SensitivitySeedsOpt,
    SharedRunsDirOpt,
    SubsetFractionOpt,
    TargetAccuracyOpt,
    TargetsOpt,
    TestFractionOpt,
    TransferFactorOpt,
    VocabSizeOpt,
    WeightsOpt,
    WorkersOpt,
)
from wattcap.cli.resume import resumable
from wattcap.core.batches import DEFAULT_BATCH_SIZES
from wattcap.core.files import write_file
from wattcap.core.progress import make_progress

if TYPE_CHECKING:

    from rich.console import Console

    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.core.progress import ProgressUpdate
    from wattcap.experiments.compare import Comparison, Scenario
    from wattcap.train.executors import Executor

DEFAULT_MODEL = "digits32-cnn"
DEFAULT_PRETRAIN = "digits-0-4-32"
DEFAULT_PROXY = "digits-rotated-32"
DEFAULT_TARGETS = "digits-5-9-32,shapes-32"


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _caps(text: str) -> list[float | None]:
    caps: list[float | None] = []
    for item in _split(text):
        caps.append(parse_cap(item, "--power-caps"))
    return caps


def _scenarios(devices: str | None, caps: str | None) -> list[Scenario]:
    from wattcap.experiments.compare import DEFAULT_SCENARIOS, Scenario

    if devices is None:
        scenarios = [Scenario(s.device, list(s.caps_w)) for s in DEFAULT_SCENARIOS]
    else:
        names = [d.removeprefix("emulated:") for d in _split(devices)]
        defaults = {s.device: s.caps_w for s in DEFAULT_SCENARIOS}
        scenarios = [Scenario(n, list(defaults.get(n, [None]))) for n in names]
    if caps is not None:
        for scenario in scenarios:
            scenario.caps_w = _caps(caps)
    return scenarios


def _check_inputs(
    model: str, datasets: list[str], target_accuracy: float, seeds: int, workers: int,
    input_shape: str | None, num_classes: int | None, vocab_size: int | None,
    subset_fraction: float | None, test_fraction: float | None, weights: Path | None,
) -> tuple[str, dict]:
    """Resolve the model and check every dataset before any run: (model name, data options).
    Each dataset is loaded once here (and kept for the sweep) to refuse data that does not
    fit the model, or whose training split is smaller than a batch size the sweep trains."""
    from wattcap.data import DataMismatchError, DatasetFormatError, check_data_fits_model
    from wattcap.experiments.compare import dataset_splits

    check_target_accuracy(target_accuracy)
    check_seeds(seeds)
    check_workers(workers)
    spec = resolve_model(model, input_shape, num_classes, vocab_size)
    check_weights(weights, spec.name)
    options = data_options(spec, input_shape, subset_fraction, test_fraction)
    for dataset in datasets:
        check_data(dataset, option=f"dataset {dataset}")
    for dataset in datasets:
        try:
            train = dataset_splits(dataset, options)[0]
            check_data_fits_model(train, spec)
        except (DatasetFormatError, DataMismatchError, ValueError) as err:
            fail(f"dataset {dataset}: {data_error_text(err, spec)}")
        check_split_size(len(train), DEFAULT_BATCH_SIZES, f"dataset {dataset}",
                         hint=_split_size_hint(len(train)))
    return spec.name, options


def _split_size_hint(train_samples: int) -> str:
    """What to do about a data set too small for every batch size compare and sensitivity
    train (they have no option to leave one out)."""
    largest = max(DEFAULT_BATCH_SIZES)
    sizes = ",".join(map(str, DEFAULT_BATCH_SIZES))
    hint = (f"this command trains every batch size of {sizes}, so each data set needs at least "
            f"{largest} training samples: add data (or hold out less with --test-fraction)")
    fit = fitting_batch_sizes(train_samples)
    if fit:
        hint += (f"; or run the steps with batch sizes of at most {train_samples}: `wattcap "
                 f"profile ... --batch-sizes {fit}`, `wattcap estimate ... --batch-sizes {fit}`, "
                 "then `wattcap train ...`")
    return hint


def pretrained_weights_path(out: Path, model: str) -> Path:
    """Where compare keeps the weights it pre-trains for `model`: in `out`, under the model's
    name where that is a plain file name (a registered model), else (your own model, named by
    an absolute path, ':' and options) a safe stem with a short hash of the text and of the
    architecture, so that an edited model file is pre-trained again."""
    from wattcap.models import model_fingerprint
    from wattcap.train.run_store import file_stem

    stem = file_stem(model)
    if stem != model:
        stem = f"{stem}-{model_fingerprint(model)[:8]}"
    return out / f"{stem}-pretrained.safetensors"


def _weights(out: Path, model: str, weights: Path | None, console: Console,
             options: dict[str, Any]) -> Path | None:
    """--weights, or the model pre-trained on the bundled digits 0-4 (once per --out), its
    images converted as `options` convert the proxy's and the targets'."""
    if weights is not None:
        return weights
    from wattcap.train.loop import pretrain

    path = pretrained_weights_path(out, model)
    if not path.exists():
        console.print(escape(f"no --weights: pre-training {model} on {DEFAULT_PRETRAIN} -> "
                             f"{path}"), highlight=False)
        # only the conversion to the model's input: the fractions are the user's data's
        shape = {k: v for k, v in options.items() if k in ("input_shape", "context")}
        pretrain(model, DEFAULT_PRETRAIN, path, epochs=2, data_options=shape)
    return path


def _report(out: Path, comparison: Comparison, console: Console,
            weights: Path | None = None) -> None:
    from wattcap.algorithms.planner import plan
    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.core.plan import METHODS
    from wattcap.experiments.compare import load_or_profile
    from wattcap.experiments.plots import plot_profile
    from wattcap.experiments.report import bar_chart, input_files, write_report
    from wattcap.measure.references import emulated_reference_profiles

    images = [("Time-to-accuracy per method and scenario", bar_chart(comparison, out, "time")),
              ("Energy per method and scenario", bar_chart(comparison, out, "energy"))]
    proxy = out / "efficiency-proxy.json"
    vector = EfficiencyVector.load(proxy) if proxy.exists() else None
    for device in comparison.devices:
        profile = load_or_profile(out, device, comparison.model, tuple(DEFAULT_BATCH_SIZES))
        caps = [r.power_cap_w for r in comparison.results if r.device == device]
        tight = min((c for c in caps if c is not None), default=None)
        target = comparison.targets[0]
        result = plan(profile, tight, efficiency=vector,
                      reference_profiles=emulated_reference_profiles(device))
        # Mark the choices actually evaluated (incl. the oracle) for this scenario.
        for method in METHODS:
            r = comparison.get(device, tight, target, method)
            if r is not None and method in result.choices:
                result.choices[method] = result.choices[method].model_copy(
                    update={"batch_size": r.batch_size, "knob_value": r.knob_value})
            elif r is not None:
                base = result.choices["wattcap"]
                result.choices[method] = base.model_copy(update={
                    "method": method, "batch_size": r.batch_size,
                    "knob_value": r.knob_value})
        path = plot_profile(profile, out / f"heatmap-{device}.png", power_cap_w=tight,
                            plan=result)
        images.append((f"Profile of {comparison.model} on {device} with each method's choice "
                       f"at {tight if tight is not None else 'no'} W ({target})", path))
    sensitivity = None
    if (out / "sensitivity.json").exists():
        sensitivity = json.loads((out / "sensitivity.json").read_text())
        images += [(f"Proxy sensitivity at {cap}", out / name)
                   for cap, name in sensitivity.get("images", {}).items()]
    inputs = input_files(out, [weights] if weights is not None else None)
    md, html_path = write_report(comparison, out, images, sensitivity, inputs,
                                 vector.cautions() if vector is not None else [])
    console.print(f"wrote {md}, {html_path}, {out / 'results.csv'} and {len(images)} figures")


def compare(
    out: Annotated[Path, typer.Option(
        help="Folder for profiles, runs, results and the report.")],
    device: Annotated[str | None, typer.Option(
        help="Comma-separated emulated devices (default: jetson-nano,jetson-tx2nx).")] = None,
    model: ModelOpt = DEFAULT_MODEL,
    weights: WeightsOpt = None,
    proxy: ProxyOpt = DEFAULT_PROXY,
    targets: TargetsOpt = DEFAULT_TARGETS,
    power_caps: PowerCapsOpt = None,
    seeds: SeedsOpt = 3,
    target_accuracy: TargetAccuracyOpt = 0.9,
    proxy_target_accuracy: ProxyTargetOpt = "auto",
    sample_budget: SampleBudgetOpt = 20_000,
    resume: ResumeOpt = True,
    quick: Annotated[bool, typer.Option(
        help="One seed and the first target only (the tables then show no spread).")] = False,
    ray: RayOpt = None,
    input_shape: InputShapeOpt = None,
    num_classes: NumClassesOpt = None,
    vocab_size: VocabSizeOpt = None,
    subset_fraction: SubsetFractionOpt = None,
    test_fraction: TestFractionOpt = None,
    workers: WorkersOpt = 0,
    risk: RiskOpt = None,
    cap_on: CapOnOpt = None,
    board: BoardOpt = Board.UNKIND,
    transfer_factor: TransferFactorOpt = None,
    runs_dir: SharedRunsDirOpt = None,
) -> None:
    """Compare wattcap with baseline-1, baseline-2 and the fastest configuration: measured
    time-to-accuracy and energy for every scenario, and a report. Without --weights the runs
    start from the model pre-trained on the bundled digits 0-4; --risk plans wattcap and
    baseline-2 on r_b's quantile; --transfer-factor makes wattcap's choice robust to a
    target whose critical batch size lies that far from the proxy's."""
    from wattcap.core.schema import WattcapFileError
    from wattcap.devices.workload import workload_for
    from wattcap.experiments.compare import run_comparison

    check_risk(risk)
    if device is not None and device.startswith("trace:"):
        _compare_trace(out, Path(device.partition(":")[2]), power_caps, risk, cap_on,
                       transfer_factor)
        return
    if cap_on == CapOn.AVERAGE:
        fail("--cap-on average is for a trace (--device trace:FILE): the emulated Jetsons' "
             "caps hold peak power")
    console = make_console()
    target_list = _split(targets)
    proxy_target = parse_target(proxy_target_accuracy, "--proxy-target-accuracy")
    check_seeds(seeds)
    if quick:
        seeds, target_list = 1, target_list[:1]
    model, options = _check_inputs(model, [proxy, *target_list], target_accuracy, seeds,
                                   workers,
                                   input_shape, num_classes, vocab_size, subset_fraction,
                                   test_fraction, weights)
    out.mkdir(parents=True, exist_ok=True)
    try:
        scenarios = _scenarios(device, power_caps)
        workload_for(model)
        weights_path = _weights(out, model, weights, console, options)
    except (KeyError, ValueError, WattcapFileError) as err:
        fail(str(err).strip(chr(39)))
    sweep = _ProxySweep(out, model, weights_path, seeds, sample_budget, resume, options,
                        workers, counters={"trained": 0, "reused": 0}, runs_dir=runs_dir)
    where = executor_or_fail(ray)
    with resumable(sweep.kept), where:
        proxy_vector = _proxy_vector(sweep, proxy, proxy_target, where, console)
        if proxy_vector is None:
            raise typer.Exit(2)
        proxy_vector.save(out / "efficiency-proxy.json")
        console.print(f"proxy {proxy}: target accuracy {proxy_vector.target_accuracy:.2%} "
                      f"({proxy_vector.target_accuracy_rule or 'given'})")
        print_cautions(proxy_vector, console)
        runs = len(target_list) * len(sweep.sizes) * seeds
        with make_progress(console, f"comparing {model}: training runs on "
                           f"{len(target_list)} target(s)", runs, "runs") as report:
            comparison = run_comparison(out, model, weights_path, proxy_vector, target_list,
                                        scenarios, seeds, target_accuracy, sweep.sizes,
                                        sample_budget, resume, report.show, sweep.counters,
                                        options, workers, where, risk=risk,
                                        shared_runs=sweep.shared_runs, board=board.value,
                                        transfer_factor=transfer_factor)
    if board is Board.UNKIND:
        console.print("unkind boards: each seed replayed on a board drawn for it, the profile "
                      "on one of its own; the fastest found by replaying")
    print_summary(comparison, console)
    _report(out, comparison, console, weights_path)


def _compare_trace(out: Path, path: Path, power_caps: str | None, risk: float | None,
                   cap_on: CapOn | None = None, transfer_factor: float | None = None) -> None:
    """compare --device trace:FILE: every method planned from the trace's table and proxy
    runs, scored on its target runs; nothing is trained (wattcap.experiments.trace)."""
    from wattcap.core.schema import WattcapFileError
    from wattcap.experiments.compare import write_csv
    from wattcap.experiments.plots import plot_profile
    from wattcap.experiments.report import bar_chart, input_files, write_report
    from wattcap.experiments.trace import load_trace, replay_trace

    console = make_console()
    if power_caps is None:
        fail("a trace has no default caps: give --power-caps (e.g. 150,200,none)")
    try:
        trace = load_trace(path)
        caps = _caps(power_caps)
    except (WattcapFileError, ValueError) as err:
        fail(str(err))
    out.mkdir(parents=True, exist_ok=True)
    comparison = replay_trace(trace, caps, risk, None if cap_on is None else cap_on.value,
                              transfer_factor)
    comparison.save(out / "comparison.json")
    write_csv(comparison, out / "results.csv")
    trace.profile.save(out / "profile-trace.json")
    trace.proxy.save(out / "efficiency-proxy.json")
    console.print(f"[bold]{trace.manifest.label}[/]")
    print_cautions(trace.proxy, console)
    print_summary(comparison, console)
    tight = min((c for c in caps if c is not None), default=None)
    images = [("Time-to-accuracy per method and scenario", bar_chart(comparison, out, "time")),
              ("Energy per method and scenario", bar_chart(comparison, out, "energy")),
              (f"The trace's profile of {comparison.model}", plot_profile(
                  trace.profile, out / "heatmap-trace.png", power_cap_w=tight))]
    manifest = trace.manifest
    files = [path, path.parent / manifest.profile.file, path.parent / manifest.proxy.file,
             *(path.parent / t.file for t in manifest.targets)]
    md, html_path = write_report(comparison, out, images, None, input_files(out, files),
                                 trace.proxy.cautions())
    console.print(f"wrote {md}, {html_path} and {out / 'results.csv'} (replayed, nothing "
                  "trained)")


@dataclass
class _ProxySweep:
    """What every proxy's efficiency estimate of one harness run shares."""

    out: Path
    model: str
    weights: Path | None
    seeds: int
    sample_budget: int
    resume: bool
    options: dict[str, Any]
    workers: int
    counters: dict[str, int]
    sizes: tuple[int, ...] = tuple(DEFAULT_BATCH_SIZES)
    #: --runs-dir: where `wattcap estimate --runs-dir` kept its runs
    runs_dir: Path | None = None

    @property
    def shared_runs(self) -> tuple[Path, ...]:
        """Folders whose recorded runs are reused besides OUT/runs: --runs-dir, and the
        cache's, where `wattcap estimate` keeps its runs by default (a proxy estimated there
        with the same model, weights, data and settings trains nothing again); none with
        --no-resume."""
        from wattcap.core.cache import cache_dir

        if not self.resume:
            return ()
        given = () if self.runs_dir is None else (self.runs_dir,)
        return (*given, cache_dir() / "runs")

    @property
    def kept(self) -> str:
        """What a stopped run of the harness leaves for the next one."""
        return f"each finished run is kept in {self.out / 'runs'} and reused"


def _proxy_vector(sweep: _ProxySweep, proxy: str, proxy_target: float | str, where: Executor,
                  console: Console, *, leave_out: bool = False) -> EfficiencyVector | None:
    """r_b of the model on one proxy (runs reused where recorded); a proxy that cannot be
    estimated is an error, or with `leave_out` a warning, and None."""
    from wattcap.experiments.compare import estimate_proxy_efficiency

    with make_progress(console, f"r_b of {sweep.model} on the proxy {proxy} ({sweep.seeds} "
                       f"seed(s), target {proxy_target})", len(sweep.sizes) * sweep.seeds,
                       "runs") as report:
        try:
            return estimate_proxy_efficiency(
                sweep.out, sweep.model, sweep.weights, proxy, sweep.sizes, sweep.seeds,
                proxy_target, sweep.sample_budget, sweep.resume, sweep.counters,
                report.show, sweep.options, sweep.workers, where, sweep.shared_runs)
        except ValueError as err:
            if leave_out:
                console.print(f"[yellow]proxy {escape(proxy)} left out:[/] {escape(str(err))}",
                              highlight=False)
            else:
                print_error(f"the proxy {proxy}: {err}")
            return None


def print_cautions(vector: EfficiencyVector, console: Console) -> None:
    """The cautions of the proxy's r_b (a near-chance target), as `estimate` and `plan` say
    them (`EfficiencyVector.cautions`, in its `ratio_notes`)."""
    for caution in vector.cautions():
        console.print(f"[yellow]{escape(caution)}[/]", highlight=False)


def print_summary(comparison: Comparison, console: Console) -> None:
    """The comparison as a rich table: time-to-accuracy per method, % over fastest."""
    from wattcap.core.plan import METHODS
    from wattcap.experiments.significance import mean_std_label, signed_pct

    spread = (f"mean ± std over {comparison.seeds} seeds" if comparison.seeds > 1
              else "one seed: no spread, nothing is within or beyond noise")
    table = Table(title=f"Measured time-to-accuracy (s) of {comparison.model} ({spread}); % "
                        "over the fastest configuration; time over wattcap's")
    for column in ("device", "cap", "target", *METHODS):
        table.add_column(column)
    keys = []
    for r in comparison.results:
        if (r.device, r.power_cap_w, r.target) not in keys:
            keys.append((r.device, r.power_cap_w, r.target))
    for device, cap, target in keys:
        cells = []
        for method in METHODS:
            found = comparison.get(device, cap, target, method)
            if found is None:
                cells.append("—")
                continue
            r = found
            choice = f"b={r.batch_size}, {comparison.describe_knob(r.knob_value)}"
            times = [t for t in r.time_s if t is not None]
            text = (f"{r.missed_label()} ({choice})" if r.missed
                    else f"{mean_std_label(times, digits=2, seeds=False)} ({choice})")
            over = comparison.over_fastest_pct(r)
            if over is not None and method != "fastest":
                text += f" {signed_pct(over)}%"
            versus = comparison.versus_wattcap(r)
            if versus is not None:
                text += f"; {versus.ratio_label(comparison.RATIO_DIGITS)}"
            text += r.violations_label()
            cells.append(text)
        table.add_row(device, "none" if cap is None else f"{cap:g} W", target, *cells)
    console.print(table)
    console.print(f"{comparison.runs_trained} training runs trained, {comparison.runs_reused} "
                  "reused from earlier runs")


def sensitivity(
    out: Annotated[Path, typer.Option(help="Folder (shared with `compare` to reuse runs).")],
    proxies: Annotated[str, typer.Option(
        help="Comma-separated proxy datasets (data specs).")] = \
        "digits-rotated-32,digits-32,shapes-32",
    targets: TargetsOpt = DEFAULT_TARGETS,
    device: Annotated[str, typer.Option(help="Emulated device.")] = "jetson-nano",
    model: ModelOpt = DEFAULT_MODEL,
    weights: WeightsOpt = None,
    power_caps: PowerCapsOpt = None,
    seeds: SensitivitySeedsOpt = 3,
    target_accuracy: TargetAccuracyOpt = 0.9,
    proxy_target_accuracy: ProxyTargetOpt = "auto",
    sample_budget: SampleBudgetOpt = 20_000,
    resume: ResumeOpt = True,
    quick: Annotated[bool, typer.Option(
        help="One seed and the first target only, as `compare --quick` (the runs of a "
        "`compare --quick` in the same --out are reused; the matrix then shows no "
        "spread).")] = False,
    input_shape: InputShapeOpt = None,
    num_classes: NumClassesOpt = None,
    vocab_size: VocabSizeOpt = None,
    subset_fraction: SubsetFractionOpt = None,
    test_fraction: TestFractionOpt = None,
    workers: WorkersOpt = 0,
    ray: RayOpt = None,
    runs_dir: SharedRunsDirOpt = None,
) -> None:
    """The proxy × target matrix of wattcap's % time increase over the fastest configuration,
    per power scenario."""
    from wattcap.experiments.compare import Comparison, load_or_profile
    from wattcap.experiments.sensitivity import sensitivity_matrix
    from wattcap.measure.references import emulated_reference_profiles

    console = make_console()
    proxy_list, target_list = _split(proxies), _split(targets)
    proxy_target = parse_target(proxy_target_accuracy, "--proxy-target-accuracy")
    if quick:
        check_seeds(seeds)
        seeds, target_list = 1, target_list[:1]
    model, options = _check_inputs(model, list(dict.fromkeys(proxy_list + target_list)),
                                   target_accuracy, seeds, workers, input_shape, num_classes,
                                   vocab_size, subset_fraction, test_fraction, weights)
    out.mkdir(parents=True, exist_ok=True)
    device = device.removeprefix("emulated:")
    scenario = _scenarios(device, power_caps)[0]
    sweep = _ProxySweep(out, model, _weights(out, model, weights, console, options), seeds,
                        sample_budget, resume, options, workers,
                        counters={"trained": 0, "reused": 0}, runs_dir=runs_dir)
    where = executor_or_fail(ray)
    with resumable(sweep.kept), where:
        proxy_vectors = {}
        for proxy in proxy_list:
            vector = _proxy_vector(sweep, proxy, proxy_target, where, console, leave_out=True)
            if vector is not None:
                proxy_vectors[proxy] = vector
        target_vectors = _target_vectors(sweep, target_list, target_accuracy, where, console)
    profile = load_or_profile(out, device, model, sweep.sizes)
    references = emulated_reference_profiles(device)
    matrices = sensitivity_matrix(profile, references, proxy_vectors, target_vectors,
                                  scenario.caps_w)
    images = _print_matrices(matrices, device, proxy_vectors, target_vectors, seeds, out,
                             console)
    write_file(out / "sensitivity.json", json.dumps({
        "device": device, "model": model, "proxies": list(proxy_vectors),
        "targets": list(target_vectors), "matrices": matrices, "images": images,
        "seeds": seeds, "target_accuracy": target_accuracy,
        "proxy_target_accuracy": {p: v.target_accuracy for p, v in proxy_vectors.items()},
        "runs_trained": sweep.counters["trained"], "runs_reused": sweep.counters["reused"],
    }, indent=2))
    if (out / "comparison.json").exists():
        _report(out, Comparison.load(out / "comparison.json"), console, sweep.weights)
    else:
        console.print(f"wrote {out / 'sensitivity.json'} and {len(images)} heatmaps")


def _target_vectors(sweep: _ProxySweep, target_list: list[str], target_accuracy: float,
                    where: Executor, console: Console) -> dict[str, EfficiencyVector]:
    """r_b measured on each target (the sensitivity's truth); a target where no batch size
    reached the accuracy in every seed is left out, with a warning."""
    from wattcap.core.metric import target_percent
    from wattcap.devices.workload import workload_for
    from wattcap.experiments.compare import efficiency_from_runs, math_runs

    model_shape = list(workload_for(sweep.model).input_shape)
    vectors = {}
    runs = len(target_list) * len(sweep.sizes) * sweep.seeds
    with make_progress(console, f"r_b of {sweep.model} measured on {len(target_list)} "
                       "target(s)", runs, "runs") as report:
        for i, target in enumerate(target_list):
            runs_before = i * len(sweep.sizes) * sweep.seeds  # one bar over every target

            def show(update: ProgressUpdate, runs_before: int = runs_before) -> None:
                report.update(runs_before + int(update.done), update.detail)

            runs_of = math_runs(sweep.out, sweep.model, sweep.weights, target, sweep.sizes,
                                sweep.seeds, target_accuracy, sweep.sample_budget,
                                sweep.resume, sweep.counters, show, sweep.options,
                                sweep.workers, where, sweep.shared_runs)
            vector = efficiency_from_runs(runs_of, sweep.model, target, sweep.seeds,
                                          target_accuracy, model_shape, measured=True)
            if vector is None:
                console.print(f"[yellow]target {escape(target)} left out:[/] no batch size "
                              f"reached {target_percent(target_accuracy)} in every seed",
                              highlight=False)
            else:
                vectors[target] = vector
    return vectors


def _print_matrices(matrices: dict[str, Any], device: str,
                    proxy_vectors: dict[str, EfficiencyVector],
                    target_vectors: dict[str, EfficiencyVector], seeds: int, out: Path,
                    console: Console) -> dict[str, str]:
    """Each scenario's matrix as a table and a heatmap; returns the heatmaps' file names."""
    from wattcap.experiments.report import sensitivity_heatmap

    images = {}
    for cap, matrix in matrices.items():
        label = "no cap" if cap == "none" else f"{cap} W"
        path = sensitivity_heatmap(matrix, list(proxy_vectors), list(target_vectors), label, out)
        images[label] = path.name
        table = Table(title=f"{device}, {label if cap == 'none' else 'cap ' + label}: "
                            f"% time over fastest ({seeds} seed(s) per proxy and target)")
        table.add_column("proxy \\ target")
        for t in target_vectors:
            table.add_column(t)
        for p, row in zip(proxy_vectors, matrix, strict=True):
            table.add_row(p, *("n/a" if v is None else f"{v:.1f}" for v in row))
        console.print(table)
    return images
