"""`wattcap pretrain`, `wattcap estimate` and `wattcap train`: the commands that train."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from wattcap.cli.common import (
    console,
    executor_or_fail,
    fail,
    load_or_fail,
    parse_batch_sizes,
    parse_cap_spec,
    parse_drift,
    parse_objective,
    progress,
)
from wattcap.cli.inputs import (
    check_data,
    check_risk,
    check_split_size,
    check_weights,
    check_workers,
    data_options,
    load_data,
    parse_loop_metric,
    parse_target,
    resolve_model,
)
from wattcap.cli.options import (
    PROXY_TARGET_HELP,
    SERVER,
    BatchSizeRefOpt,
    BatchSizesOpt,
    CostMaxPowerOpt,
    DataOpt,
    DeadlineOpt,
    DeviceNameOpt,
    DeviceOpt,
    DriftOpt,
    DryRunOpt,
    EfficiencyOpt,
    EtaOpt,
    EvalEveryOpt,
    InputShapeOpt,
    LrRefOpt,
    MarginOpt,
    MaxEnergyOpt,
    MetricOpt,
    ModelIdOpt,
    ModelOpt,
    MovingPowerCapOpt,
    NumClassesOpt,
    ObjectiveOpt,
    OptimizerOpt,
    ProfileOpt,
    ProxyFilterOpt,
    ProxyOpt,
    RayOpt,
    RiskOpt,
    SampleBudgetOpt,
    SeedOpt,
    SeedsOpt,
    ServerUrlOpt,
    SubsetFractionOpt,
    TargetAccuracyOpt,
    TargetEfficiencyOpt,
    TestFractionOpt,
    TokenOpt,
    VocabSizeOpt,
    WeightDecayOpt,
    WeightsOpt,
    WorkersOpt,
)
from wattcap.core.defaults import DEFAULT_BATCH_SIZE_REF, DEFAULT_LR_REF, DEFAULT_MARGIN_SIGMAS
from wattcap.core.knob import clock_only, format_knob
from wattcap.core.metric import ACCURACY, TargetMetric

if TYPE_CHECKING:
    from wattcap.core.cap_history import Segment
    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.core.objective import Objective
    from wattcap.core.plan import Choice
    from wattcap.core.profile import ProfileTable
    from wattcap.core.progress import ProgressReporter
    from wattcap.core.run import RunRecord, TrainConfig
    from wattcap.data.specs import AnyDataset
    from wattcap.devices import Device, Drift
    from wattcap.devices.caps import CapSource
    from wattcap.runtime.session import SessionStatus


def pretrain(
    model: ModelOpt,
    data: DataOpt,
    out: Annotated[Path, typer.Option(help="Weights file (.safetensors).")],
    epochs: Annotated[int, typer.Option(help="Epochs over the training split (the demo and "
                                        "`compare` pre-train for 2 as well).")] = 2,
    batch_size: Annotated[int, typer.Option()] = 32,
    lr: Annotated[float, typer.Option(help="Adam learning rate.")] = 1e-3,
    seed: SeedOpt = 0,
    input_shape: InputShapeOpt = None,
    num_classes: NumClassesOpt = None,
    vocab_size: VocabSizeOpt = None,
    subset_fraction: SubsetFractionOpt = None,
    test_fraction: TestFractionOpt = None,
    workers: WorkersOpt = 0,
) -> None:
    """Pre-train a model on a dataset; every later run starts from these weights."""
    from wattcap.data import DatasetFormatError
    from wattcap.train.loop import pretrain as run_pretrain

    check_workers(workers)
    if epochs < 1 or batch_size < 1:
        fail(f"--epochs and --batch-size must be positive, got {epochs} and {batch_size}")
    spec = resolve_model(model, input_shape, num_classes, vocab_size)
    data_spec = check_data(data)
    options = data_options(spec, input_shape, subset_fraction, test_fraction)
    try:
        meta = run_pretrain(spec.name, data_spec.text, out, epochs=epochs,
                            batch_size=batch_size, lr=lr, seed=seed, data_options=options,
                            num_workers=workers)
    except (KeyError, ValueError, DatasetFormatError) as err:
        fail(f"--data: {str(err).strip(chr(39) + chr(34))}")
    console.print(f"wrote {out}: {model} pre-trained on {data}, test accuracy "
                  f"{float(meta['test_accuracy']):.1%}")


def check_optimizer(optimizer: str, weight_decay: float, lr_ref: float,
                    batch_size_ref: int) -> None:
    """The optimizer settings, before anything runs."""
    if optimizer not in ("adam", "adamw"):
        fail(f"--optimizer must be adam or adamw, got {optimizer!r}")
    if weight_decay < 0 or lr_ref <= 0 or batch_size_ref < 1:
        fail("--weight-decay must be >= 0, --lr-ref and --batch-size-ref positive")


def estimate(
    model: ModelOpt,
    proxy: ProxyOpt,
    out: Annotated[Path, typer.Option(help="EfficiencyVector JSON to write.")],
    target_accuracy: Annotated[str, typer.Option(help=PROXY_TARGET_HELP + " Recorded in the "
                                                 "file.")] = "auto",
    metric: MetricOpt = "accuracy",
    weights: WeightsOpt = None,
    batch_sizes: BatchSizesOpt = "4,8,16,32,64,128",
    seeds: SeedsOpt = 3,
    sample_budget: SampleBudgetOpt = 20_000,
    eval_every: EvalEveryOpt = 256,
    lr_ref: LrRefOpt = None,
    batch_size_ref: BatchSizeRefOpt = None,
    optimizer: OptimizerOpt = None,
    weight_decay: WeightDecayOpt = 0.0,
    server: ServerUrlOpt = None,
    model_id: ModelIdOpt = None,
    on_server: Annotated[bool, typer.Option(
        help="With --server: run the sweep on the server (a background job; this command "
        "waits for it) and write its result to --out.", rich_help_panel=SERVER)] = False,
    push: Annotated[bool, typer.Option(
        help="With --server: upload the estimated vector, linked to the weights it started "
        "from (needs the token).", rich_help_panel=SERVER)] = False,
    token: TokenOpt = None,
    method: Annotated[str, typer.Option(
        help="'sweep': train every batch size and seed to the target (the reference); 'gns': "
        "one run at the largest batch size measuring the gradient noise scale, r_b = (1 + "
        "b/B_noise) / (1 + b_max/B_noise), at a fraction of the compute. With 'gns' a numeric "
        "--target-accuracy ends the run when the proxy reaches it, 'auto' trains "
        "--gns-samples.")] = "sweep",
    gns_samples: Annotated[int, typer.Option(
        help="With --method gns: samples the run trains (at most, with a numeric "
        "--target-accuracy).")] = 4096,
    ray: RayOpt = None,
    runs_dir: Annotated[Path | None, typer.Option(
        help="Where each finished (batch size, seed) run is kept, named by everything it "
        "depends on: a killed estimate run again reuses them, and compare/sensitivity share "
        "them (default: the runs folder of the wattcap cache).")] = None,
    input_shape: InputShapeOpt = None,
    num_classes: NumClassesOpt = None,
    vocab_size: VocabSizeOpt = None,
    subset_fraction: SubsetFractionOpt = None,
    test_fraction: TestFractionOpt = None,
    workers: WorkersOpt = 0,
) -> None:
    """Estimate batch-size efficiency r_b on a proxy dataset (every b, K seeds; or from the
    gradient noise scale of one run with --method gns)."""
    check_workers(workers)
    target_metric = parse_loop_metric(metric)
    sweep = _Sweep(
        sizes=parse_batch_sizes(batch_sizes), seeds=seeds, metric=target_metric,
        target=parse_target(target_accuracy, metric=target_metric),
        sample_budget=sample_budget, eval_every=eval_every,
        lr_ref=DEFAULT_LR_REF if lr_ref is None else lr_ref,
        batch_size_ref=DEFAULT_BATCH_SIZE_REF if batch_size_ref is None else batch_size_ref,
        optimizer=optimizer or "adam", weight_decay=weight_decay,
        subset_fraction=subset_fraction, test_fraction=test_fraction)
    _check_estimate(sweep, method, gns_samples, on_server=on_server, ray=ray)
    if (on_server or push or model_id is not None) and not server:
        fail("--on-server, --push and --model-id need --server URL")
    weights_id = None
    if server and on_server:
        vector = _estimate_on_server(sweep, server, token, model, model_id, proxy, input_shape,
                                     num_classes, vocab_size)
    else:
        spec = resolve_model(model, input_shape, num_classes, vocab_size)
        proxy_spec = check_data(proxy, "--proxy")
        options = data_options(spec, input_shape, subset_fraction, test_fraction)
        model = spec.name
        check_weights(weights, model)
        splits = load_data(proxy_spec, spec, options, option="--proxy")
        check_split_size(len(splits[0]), sweep.sizes, "--proxy")
        if server and weights is None:
            from wattcap.cli.server import fetch_estimate_weights

            weights, weights_id = fetch_estimate_weights(server, token, model, model_id)
        if method == "gns":
            vector = _estimate_gns(sweep, model, proxy_spec.text, weights, gns_samples, splits)
        else:
            vector = _estimate_sweep(sweep, model, proxy_spec.text, weights, splits, ray,
                                     workers, options, runs_dir)
    vector.save(out)
    if server and push and not on_server:  # a server-side sweep is stored there already
        from wattcap.cli.server import push_estimated

        push_estimated(server, token, vector, weights_id)
    print_efficiency(vector)
    console.print(f"wrote {out}")


@dataclass(frozen=True)
class _Sweep:
    """The settings of an efficiency estimate, checked."""

    sizes: tuple[int, ...]
    target: float | Literal["auto"]
    seeds: int
    sample_budget: int
    eval_every: int
    lr_ref: float
    batch_size_ref: int
    optimizer: str
    weight_decay: float
    subset_fraction: float | None
    test_fraction: float | None
    metric: TargetMetric = ACCURACY


def _check_estimate(sweep: _Sweep, method: str, gns_samples: int, *, on_server: bool,
                    ray: str | None) -> None:
    """Every estimate argument that can be wrong, before anything runs."""
    if method not in ("sweep", "gns"):
        fail(f"--method must be 'sweep' or 'gns', got {method!r}")
    if not sweep.metric.is_accuracy and (method == "gns" or on_server):
        fail(f"--metric {sweep.metric.name} needs a sweep run here: --method gns and "
             "--on-server train to accuracy")
    if method == "gns":
        if len(sweep.sizes) < 2:
            fail("--method gns needs at least two batch sizes (it measures at the smallest "
                 "and the largest)")
        if gns_samples < max(sweep.sizes):
            fail(f"--gns-samples ({gns_samples}) must hold at least one batch of "
                 f"{max(sweep.sizes)}")
        if on_server:
            fail("--method gns runs here: drop --on-server (the server's jobs are sweeps)")
        if ray is not None:
            fail("--method gns is one run: --ray has nothing to spread")
    if sweep.seeds < 1:
        fail(f"--seeds must be at least 1, got {sweep.seeds}")
    if sweep.sample_budget < sweep.eval_every:
        fail(f"--sample-budget ({sweep.sample_budget}) must be at least --eval-every "
             f"({sweep.eval_every})")
    check_optimizer(sweep.optimizer, sweep.weight_decay, sweep.lr_ref, sweep.batch_size_ref)


def _estimate_on_server(sweep: _Sweep, server: str, token: str | None, model: str,
                        model_id: int | None, proxy: str, input_shape: str | None,
                        num_classes: int | None, vocab_size: int | None) -> EfficiencyVector:
    """The proxy sweep as a server job, for weights stored there."""
    from wattcap.cli.server import estimate_on_server

    if sweep.target == "auto":
        fail("--on-server needs a numeric --target-accuracy (the server job takes one)")
    if num_classes is not None or vocab_size is not None:
        fail("--on-server estimates a model stored on the server: --num-classes and "
             "--vocab-size do not apply")
    if sweep.optimizer != "adam" or sweep.weight_decay:
        fail("--on-server runs the sweep with Adam: --optimizer and --weight-decay do not "
             "apply")
    shape = None
    if input_shape is not None:
        from wattcap.data import ShapeConversionError, parse_image_shape

        try:
            shape = list(parse_image_shape(input_shape))
        except ShapeConversionError as err:
            fail(f"--input-shape: {err}")
    return estimate_on_server(
        server, token, model=model, model_id=model_id, proxy=proxy,
        target_accuracy=float(sweep.target), batch_sizes=sweep.sizes, seeds=sweep.seeds,
        sample_budget=sweep.sample_budget, eval_every=sweep.eval_every, lr_ref=sweep.lr_ref,
        batch_size_ref=sweep.batch_size_ref, subset_fraction=sweep.subset_fraction,
        test_fraction=sweep.test_fraction, input_shape=shape)


def _estimate_sweep(sweep: _Sweep, model: str, proxy: str, weights: Path | None,
                    splits: tuple, ray: str | None, workers: int, options: dict[str, Any],
                    runs_dir: Path | None) -> EfficiencyVector:
    """Every batch size and seed trained to the proxy's target, here or on --ray; each
    finished run kept in the runs folder, so a killed estimate resumes with them."""
    from wattcap.core.cache import cache_dir
    from wattcap.core.schema import WattcapFileError
    from wattcap.train.efficiency import estimate_efficiency
    from wattcap.train.executors import ExecutorError

    where = executor_or_fail(ray)
    with where, progress(f"estimating r_b of {model} on {proxy}"
                         + (f" ({where.describe()})" if ray else ""),
                         len(sweep.sizes) * sweep.seeds, "runs") as report:
        try:
            return estimate_efficiency(
                model, proxy, sweep.target, weights=weights, batch_sizes=sweep.sizes,
                seeds=sweep.seeds, sample_budget=sweep.sample_budget,
                eval_every_samples=sweep.eval_every, lr_ref=sweep.lr_ref,
                batch_size_ref=sweep.batch_size_ref, executor=where,
                progress=report.show,
                data=splits, data_options=options, num_workers=workers,
                optimizer=sweep.optimizer, weight_decay=sweep.weight_decay,
                target_metric=sweep.metric,
                runs_dir=runs_dir if runs_dir is not None else cache_dir() / "runs",
            )
        except (KeyError, ValueError, WattcapFileError, ExecutorError) as err:
            fail(str(err).strip("'\""))


def _estimate_gns(sweep: _Sweep, model: str, proxy: str, weights: Path | None,
                  gns_samples: int, splits: tuple) -> EfficiencyVector:
    """r_b from the gradient noise scale of one run at the largest batch size."""
    from wattcap.core.schema import WattcapFileError
    from wattcap.train.noise_scale import estimate_efficiency_gns

    sizes = sweep.sizes
    with progress(f"measuring the gradient noise scale of {model} on {proxy} (b = "
                  f"{min(sizes)} and {max(sizes)})", gns_samples, "samples") as report:
        try:
            return estimate_efficiency_gns(
                model, proxy, sweep.target, weights=weights,
                batch_sizes=sizes, sample_budget=gns_samples,
                eval_every_samples=sweep.eval_every, lr_ref=sweep.lr_ref,
                batch_size_ref=sweep.batch_size_ref, data=splits,
                optimizer=sweep.optimizer, weight_decay=sweep.weight_decay,  # type: ignore[arg-type]
                progress=report.show)
        except (KeyError, ValueError, WattcapFileError) as err:
            fail(str(err).strip("'\""))


def print_efficiency(vector: EfficiencyVector) -> None:
    """The vector as a table, with the notes on where r_b came from."""
    from wattcap.experiments.tables import efficiency_table

    console.print(efficiency_table(vector))
    for note in vector.ratio_notes():
        console.print(f"  [dim]{note}[/]")



def train(
    power_cap: MovingPowerCapOpt,
    model: ModelOpt,
    data: DataOpt,
    target_accuracy: TargetAccuracyOpt,
    metric: MetricOpt = "accuracy",
    device: DeviceOpt = "emulated:jetson-nano",
    profile: ProfileOpt = None,
    efficiency: EfficiencyOpt = None,
    target_efficiency: TargetEfficiencyOpt = None,
    margin_sigmas: MarginOpt = DEFAULT_MARGIN_SIGMAS,
    weights: WeightsOpt = None,
    method: Annotated[str, typer.Option(help="wattcap, baseline-1, baseline-2 or "
                                        "fastest.")] = "wattcap",
    sample_budget: SampleBudgetOpt = 20_000,
    eval_every: EvalEveryOpt = 256,
    seed: SeedOpt = 0,
    lr_ref: LrRefOpt = None,
    batch_size_ref: BatchSizeRefOpt = None,
    optimizer: OptimizerOpt = None,
    weight_decay: WeightDecayOpt = 0.0,
    checkpoint_dir: Annotated[Path | None, typer.Option(help="Save/resume the run "
                                                        "here.")] = None,
    out: Annotated[Path | None, typer.Option(help="RunRecord JSON to write.")] = None,
    objective: ObjectiveOpt = "time",
    eta: EtaOpt = None,
    max_energy: MaxEnergyOpt = None,
    deadline: DeadlineOpt = None,
    cost_max_power: CostMaxPowerOpt = None,
    plot: Annotated[Path | None, typer.Option(
        help="With a moving cap: write power, cap, frequency and batch size over the run as "
        "a PNG.")] = None,
    dry_run: DryRunOpt = False,
    drift_tolerance: Annotated[float, typer.Option(
        help="Relative difference of measured step time or power from the profile that counts "
        "as drift (or 3 sigmas of the measurement windows' noise, where larger): the row is "
        "re-measured and the frequency re-planned at the next checkpoint (0 = off).")] = 0.1,
    drift: DriftOpt = None,
    server: ServerUrlOpt = None,
    device_name: DeviceNameOpt = None,
    proxy: ProxyFilterOpt = None,
    model_id: ModelIdOpt = None,
    token: TokenOpt = None,
    input_shape: InputShapeOpt = None,
    num_classes: NumClassesOpt = None,
    vocab_size: VocabSizeOpt = None,
    subset_fraction: SubsetFractionOpt = None,
    test_fraction: TestFractionOpt = None,
    workers: WorkersOpt = 0,
    risk: RiskOpt = None,
) -> None:
    """Select (batch size, knob value) under the cap, apply the knob (GPU clock, power
    limit or power mode), train to the target, restore.

    Under a cap that moves (--power-cap solar:seed=3,day_s=600, battery:..., schedule:FILE,
    file:PATH) the selection re-runs at every change: the frequency drops within one sensor
    period, the batch size (and its learning rate) changes at the next step, training pauses
    while nothing fits and resumes when the cap rises.

    With --server URL the device fetches what it needs: e.g. `wattcap train --server URL
    --device emulated:jetson-nano --model resnet18 --data ... --power-cap 5 --target-accuracy
    0.8` gets the profile of this device model, the efficiency vector and the weights.
    """
    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.devices import DeviceError, get_device
    from wattcap.models import model_fingerprint

    # Every argument is checked before any work starts (no plan printed for a bad one).
    goal, cap, source, drift_spec = _check_train(
        method, objective, eta, max_energy, deadline, power_cap, plot=plot, device=device,
        target_accuracy=target_accuracy, workers=workers, sample_budget=sample_budget,
        eval_every=eval_every, drift=drift, drift_tolerance=drift_tolerance,
        cost_max_power=cost_max_power, risk=risk, metric=metric)
    check_optimizer(optimizer or "adam", weight_decay, lr_ref or 1.0, batch_size_ref or 1)
    spec = resolve_model(model, input_shape, num_classes, vocab_size)
    model = spec.name
    data_spec = check_data(data)
    options = data_options(spec, input_shape, subset_fraction, test_fraction)
    if server:
        profile, efficiency, weights = _fetch_train_inputs(
            server, token, device, device_name, model, model_id, proxy, profile, efficiency,
            weights)
    elif profile is None:
        fail("--profile is required (or --server URL)")
    check_weights(weights, model)
    table = _train_profile(profile, source)
    try:
        dev = get_device(device, dry_run=dry_run, seed=seed, drift=drift_spec)
    except (DeviceError, KeyError, ValueError) as err:
        fail(str(err).strip("'\""))
    table.check_matches(device=dev.name, model=model, source=str(profile),
                        architecture_fingerprint=model_fingerprint(model))
    train_split, test_split = load_data(data_spec, spec, options)
    plan_cap = _plan_cap(cap, source, table, margin_sigmas)
    choice = _choose(profile, efficiency, target_efficiency, plan_cap, goal, margin_sigmas,
                     method, risk)
    check_split_size(len(train_split), [choice.batch_size])
    vector = load_or_fail(EfficiencyVector, efficiency) if efficiency else None
    config = _train_config(model, choice.batch_size, target_accuracy, sample_budget,
                           eval_every, seed, lr_ref, batch_size_ref, optimizer, weight_decay,
                           vector, metric)
    _print_choice(method, choice, table.knob_kind, cap, source, plan_cap)
    # under a moving cap the run re-plans with the oracle's r_b for fastest, else the proxy's
    vector_path = target_efficiency if method == "fastest" else efficiency
    replan_efficiency = load_or_fail(EfficiencyVector, vector_path) \
        if source is not None and vector_path else None
    if dry_run:
        console.print("dry run: nothing changed, no training")
        return
    record = _run_training(
        dev, config, choice, train_split, test_split, label=f"{model} on {data}",
        weights=weights, power_cap_w=cap, power_cap=source, efficiency=replan_efficiency,
        objective=goal, checkpoint_dir=checkpoint_dir, method=method,
        profile=table if drift_tolerance > 0 or source is not None
        or table.knob_kind != "gpu_clock" else None,
        drift_tolerance=drift_tolerance, margin_sigmas=margin_sigmas, num_workers=workers,
        risk=risk)
    if out:
        record.save(out)
    print_run(record, plot)


def _print_choice(method: str, choice: Choice, kind: str, cap: float | None,
                  source: CapSource | None, plan_cap: float | None) -> None:
    """The method's configuration, in the profile's knob, and the cap it runs under."""
    under = (f", starting under {plan_cap:.2f} W of {source.describe()})" if source is not None
             else f", cap {cap:g} W)" if cap else ", no cap)")
    knob = format_knob(kind, choice.knob_value)
    console.print(f"{method}: batch size {choice.batch_size} at {knob} (profile peak "
                  f"{choice.peak_power_w:.2f} W{under}")


def _train_profile(path: Path, source: CapSource | None) -> ProfileTable:
    """The profile to train with; one of a power limit or power mode is refused under a
    moving cap (its re-plans act on clocks)."""
    from wattcap.core.profile import ProfileTable

    table = load_or_fail(ProfileTable, path)
    if table.knob_kind != "gpu_clock" and source is not None:
        fail(clock_only(table.knob_kind, "following a moving cap"))
    return table


def _fetch_train_inputs(server: str, token: str | None, device: str, device_name: str | None,
                        model: str, model_id: int | None, proxy: str | None,
                        profile: Path | None, efficiency: Path | None, weights: Path | None,
                        ) -> tuple[Path, Path | None, Path | None]:
    """The profile of this device model (in the power mode it runs in), the efficiency vector
    and the weights from a server; local files given win."""
    from wattcap.cli.server import device_identity, fetch_plan_inputs, fetch_train_weights

    name, mode = (device_name, None) if device_name else device_identity(device)
    profile, efficiency, efficiency_info = fetch_plan_inputs(
        server, token, profile=profile, efficiency=efficiency, device_name=name,
        model=model, power_mode=mode, proxy=proxy)
    if weights is None:
        weights = fetch_train_weights(server, token, model, model_id, efficiency_info)
    return profile, efficiency, weights


def _check_train(method: str, objective: str, eta: float | None, max_energy: float | None,
                 deadline: float | None, power_cap: str, *, plot: Path | None, device: str,
                 target_accuracy: float, workers: int, sample_budget: int, eval_every: int,
                 drift: str | None, drift_tolerance: float,
                 cost_max_power: float | None = None, risk: float | None = None,
                 metric: str = "accuracy",
                 ) -> tuple[Objective, float | None, CapSource | None, Drift | None]:
    """The train arguments that need no file: (objective, constant cap, moving cap, drift)."""
    check_risk(risk)
    from wattcap.core.plan import METHODS
    from wattcap.devices.caps import CapSource

    if method not in METHODS:
        fail(f"--method must be one of {', '.join(METHODS)}")
    goal = parse_objective(objective, eta, max_energy, deadline, cost_max_power)
    cap_spec = parse_cap_spec(power_cap)
    source = cap_spec if isinstance(cap_spec, CapSource) else None
    cap: float | None = None if isinstance(cap_spec, CapSource) else cap_spec
    if plot is not None and source is None:
        fail("--plot draws a run under a moving cap: give --power-cap a cap source (e.g. "
             "solar:seed=3)")
    parse_loop_metric(metric, target_accuracy)
    check_workers(workers)
    if sample_budget < 1 or eval_every < 1:
        fail("--sample-budget and --eval-every must be positive")
    if drift is not None and not device.startswith("emulated"):
        fail("--drift only applies to emulated devices")
    if drift_tolerance < 0:
        fail(f"--drift-tolerance must be >= 0, got {drift_tolerance}")
    return goal, cap, source, parse_drift(drift)


def _plan_cap(cap: float | None, source: CapSource | None, table: ProfileTable,
              margin_sigmas: float) -> float | None:
    """The cap the first plan is made for: the constant cap, or a moving cap's first value (a
    run that starts below every configuration starts paused, with the plan for the lowest
    cap anything meets)."""
    if source is None:
        return cap
    from wattcap.devices.caps import CapSourceError

    try:
        plan_cap = source.cap_w(0.0)
    except CapSourceError as err:
        fail(f"--power-cap: {err}")
    if plan_cap is not None and table.points:
        from wattcap.algorithms.planner import with_power_margin

        margined = with_power_margin(table, margin_sigmas)
        plan_cap = max(plan_cap, min(p.peak_power_w for p in margined.points))
    return plan_cap


def _choose(profile: Path, efficiency: Path | None, target_efficiency: Path | None,
            cap: float | None, goal: Objective, margin_sigmas: float, method: str,
            risk: float | None = None) -> Choice:
    """The method's (b, f) under the cap, or a clear exit when it has none."""
    from wattcap.cli.plan import make_plan

    result = make_plan(profile, efficiency, cap, target_efficiency_path=target_efficiency,
                       objective=goal, margin_sigmas=margin_sigmas, risk=risk)
    if method not in result.choices:
        fail(f"{method} has no choice under this cap: {result.unavailable.get(method, '')}")
    return result.choices[method]


def _train_config(model: str, batch_size: int, target_accuracy: float, sample_budget: int,
                  eval_every: int, seed: int, lr_ref: float | None, batch_size_ref: int | None,
                  optimizer: str | None, weight_decay: float,
                  vector: EfficiencyVector | None, metric: str = "accuracy") -> TrainConfig:
    """The run's config; the optimiser settings r_b was estimated with hold it (the vector's,
    unless told)."""
    from wattcap.core.run import TrainConfig

    try:
        config = TrainConfig(
            model=model, batch_size=batch_size, target_accuracy=target_accuracy,
            target_metric=parse_loop_metric(metric),
            sample_budget=sample_budget, eval_every_samples=eval_every, seed=seed,
            lr_ref=lr_ref or (vector.lr_ref if vector else DEFAULT_LR_REF),
            batch_size_ref=batch_size_ref or (vector.batch_size_ref if vector
                                              else DEFAULT_BATCH_SIZE_REF),
            optimizer=optimizer or (vector.optimizer if vector else "adam"),  # type: ignore[arg-type]  # checked by config.check()
            weight_decay=weight_decay)
        config.check()
    except ValueError as err:
        fail(str(err))
    return config


def _run_training(dev: Device, config: TrainConfig, choice: Choice, train_split: AnyDataset,
                  test_split: AnyDataset, label: str, **session: Any) -> RunRecord:
    """Apply the choice's frequency (or have the Session apply its power limit or power mode)
    and train to the target; the device is restored however the run ends (signals
    included)."""
    from wattcap.core.schema import WattcapFileError
    from wattcap.devices import DeviceError
    from wattcap.runtime.watchdog import exit_cleanly_on_signals
    from wattcap.train.loop import train_to_accuracy

    kind = getattr(session.get("profile"), "knob_kind", "gpu_clock")
    clock = kind == "gpu_clock"
    try:
        if not clock:  # the Session applies the limit or mode, and restores it
            if kind == "power_limit":
                from wattcap.cli.profile import emulate_power_limit

                emulate_power_limit(dev)  # as it was profiled, on an emulated board
            dev.check_knob(kind, choice.knob_value)
            session["knob_value"] = choice.knob_value
        with exit_cleanly_on_signals(), dev, progress(
            f"training {label} (b={choice.batch_size}, target "
            f"{config.target_metric.value_text(config.target_accuracy)})",
            config.sample_budget, "samples",
        ) as report:
            if clock:
                dev.set_frequency_hz(choice.knob_value)
            return train_to_accuracy(
                config, train_split, test_split, device=dev,
                progress=lambda status: _show_status(report, status), **session)
    except (DeviceError, WattcapFileError, ValueError) as err:
        fail(str(err))


def _show_status(report: ProgressReporter, status: SessionStatus) -> None:
    """A Session's status on the progress display; a resume is said at once, on its own line."""
    if status.resumed_from_samples is not None:
        report.note(status.detail)
    report.show(status)


def print_run(record: RunRecord, plot: Path | None = None) -> None:
    """The run summary: time-to-accuracy, energy, peak power against the cap; with `plot`,
    the run under its moving cap as a PNG."""
    tta = record.time_to_accuracy_s
    target = record.target_accuracy
    metric = record.target_metric
    goal = metric.value_text(target or 0)
    final = (f"{record.final_accuracy:.1%}" if metric.is_accuracy
             else metric.value_text(record.final_accuracy))
    console.print(
        f"[bold]{record.method or 'run'}[/] b={record.batch_size}: "
        + (f"reached {goal} after {record.samples_to_target:.0f} samples"
           f", time-to-{'accuracy' if metric.is_accuracy else 'target'} {tta:.1f} s (device)"
           if record.reached and target and tta
           else f"did not reach {goal} "
           + (f"({record.stop_reason})" if record.stop_reason
              else f"within {record.sample_budget} samples")
           + f" (final {final})")
        + f", energy {record.energy_j:.0f} J, peak {record.peak_power_w or 0:.2f} W"
        + (f" under {record.cap_source}" if record.cap_source else
           f" vs cap {record.power_cap_w:g} W" if record.power_cap_w else "")
    )
    if record.segments:
        print_segments(record)
    for step in record.frequency_steps:
        console.print(f"  [yellow]watchdog[/] t={step.time_s:.1f} s: {step.from_hz / 1e6:.1f} -> "
                      f"{step.to_hz / 1e6:.1f} MHz ({step.reason})")
    for event in record.events:
        console.print(f"  [dim]{event}[/]")
    if plot is not None:
        from wattcap.experiments.cap_run import plot_cap_run

        plot_cap_run(record, plot)
        console.print(f"wrote {plot}")


#: segments printed in full; a longer run shows its first and last ones
MAX_SEGMENT_ROWS = 24


def print_segments(record: RunRecord) -> None:
    """The segments of a run under a moving cap: one row per plan."""
    from rich.table import Table

    table = Table(title=f"segments under {record.cap_source} ({record.paused_s:.1f} s paused)")
    for column in ("from (s)", "to (s)", "cap (W)", "batch", "MHz", "samples", "energy (J)",
                   "peak W", "note"):
        table.add_column(column, justify="left" if column == "note" else "right")
    segments: list[Segment | None] = list(record.segments)
    shown = segments if len(segments) <= MAX_SEGMENT_ROWS else \
        segments[:MAX_SEGMENT_ROWS // 2] + [None] + segments[-MAX_SEGMENT_ROWS // 2:]
    for segment in shown:
        if segment is None:
            table.add_row("...", "", "", "", "", "", "", "",
                          f"{len(segments) - MAX_SEGMENT_ROWS} more")
            continue
        cap = "none" if segment.cap_w is None else f"{segment.cap_w:.2f}"
        table.add_row(f"{segment.start_s:.1f}", f"{segment.end_s:.1f}", cap,
                      str(segment.batch_size), f"{segment.frequency_hz / 1e6:.1f}",
                      str(segment.samples), f"{segment.energy_j:.1f}",
                      f"{segment.peak_power_w or 0:.2f}", "paused" if segment.paused else "")
    console.print(table)
