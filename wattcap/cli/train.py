"""`wattcap pretrain` and `wattcap train`: pre-training, and training to a target at the chosen
(batch size, knob value) under the cap."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from wattcap.cli.common import (
    check_device_extra,
    console,
    fail,
    load_or_fail,
    parse_cap_spec,
    parse_drift,
    parse_objective,
    progress,
)
from wattcap.cli.inputs import (
    check_data,
    check_optimizer,
    check_risk,
    check_split_size,
    check_weights,
    check_workers,
    data_options,
    load_data,
    parse_loop_metric,
    resolve_model,
)
from wattcap.cli.options import (
    CAP_AND_DEVICE,
    OUTPUT,
    PLAN_INPUTS,
    TRAINING,
    BatchSizeRefOpt,
    CostMaxPowerOpt,
    DataOpt,
    DeadlineOpt,
    DeviceOpt,
    DevicePowerModeOpt,
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
    OnlineCorrectionOpt,
    OptimizerOpt,
    ProfileOpt,
    ProxyFilterOpt,
    RiskOpt,
    SeedOpt,
    ServerUrlOpt,
    SubsetFractionOpt,
    TargetAccuracyOpt,
    TargetEfficiencyOpt,
    TestFractionOpt,
    TokenOpt,
    TrainDeviceNameOpt,
    TrainSampleBudgetOpt,
    TransferFactorOpt,
    VocabSizeOpt,
    WeightDecayOpt,
    WeightsOpt,
    WorkersOpt,
)
from wattcap.core.defaults import DEFAULT_BATCH_SIZE_REF, DEFAULT_LR_REF, DEFAULT_MARGIN_SIGMAS
from wattcap.core.knob import clock_only, format_knob

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
    batch_size: Annotated[int, typer.Option(help="Batch size of the pre-training.")] = 32,
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
        # the progress starts before the data loads: the first line comes at once
        with progress(f"pre-training {spec.name} on {data} ({epochs} epoch(s))", None,
                      "samples") as report:
            meta = run_pretrain(spec.name, data_spec.text, out, epochs=epochs,
                                batch_size=batch_size, lr=lr, seed=seed, data_options=options,
                                num_workers=workers, progress=report.show)
    except (KeyError, ValueError, DatasetFormatError) as err:
        fail(f"--data: {str(err).strip(chr(39) + chr(34))}")
    console.print(f"wrote {out}: {model} pre-trained on {data}, test accuracy "
                  f"{float(meta['test_accuracy']):.1%}")


def train(
    power_cap: MovingPowerCapOpt,
    model: ModelOpt,
    data: DataOpt,
    target_accuracy: TargetAccuracyOpt,
    metric: MetricOpt = "accuracy",
    device: DeviceOpt = "emulated:jetson-nano",
    power_mode: DevicePowerModeOpt = None,
    profile: ProfileOpt = None,
    efficiency: EfficiencyOpt = None,
    target_efficiency: TargetEfficiencyOpt = None,
    margin_sigmas: MarginOpt = DEFAULT_MARGIN_SIGMAS,
    weights: WeightsOpt = None,
    method: Annotated[str, typer.Option(
        help="Whose choice to train with: wattcap, baseline-1, baseline-2 or fastest (needs "
        "--target-efficiency).", rich_help_panel=PLAN_INPUTS)] = "wattcap",
    sample_budget: TrainSampleBudgetOpt = 20_000,
    eval_every: EvalEveryOpt = 256,
    seed: SeedOpt = 0,
    lr_ref: LrRefOpt = None,
    batch_size_ref: BatchSizeRefOpt = None,
    optimizer: OptimizerOpt = None,
    weight_decay: WeightDecayOpt = 0.0,
    checkpoint_dir: Annotated[Path | None, typer.Option(
        help="Save the run here at every evaluation, and resume from it.",
        rich_help_panel=TRAINING)] = None,
    out: Annotated[Path | None, typer.Option(
        help="Write the run record (JSON): the choice, time, energy and power over the run.",
        rich_help_panel=OUTPUT)] = None,
    objective: ObjectiveOpt = "time",
    eta: EtaOpt = None,
    max_energy: MaxEnergyOpt = None,
    deadline: DeadlineOpt = None,
    cost_max_power: CostMaxPowerOpt = None,
    plot: Annotated[Path | None, typer.Option(
        help="With a moving cap: write power, cap, frequency and batch size over the run as "
        "a PNG.", rich_help_panel=OUTPUT)] = None,
    dry_run: DryRunOpt = False,
    drift_tolerance: Annotated[float, typer.Option(
        help="Relative difference of measured step time or power from the profile that counts "
        "as drift (or 3 sigmas of the measurement windows' noise, where larger): the row is "
        "re-measured and the frequency re-planned at the next checkpoint (0 = off).",
        rich_help_panel=CAP_AND_DEVICE)] = 0.1,
    drift: DriftOpt = None,
    server: ServerUrlOpt = None,
    device_name: TrainDeviceNameOpt = None,
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
    transfer_factor: TransferFactorOpt = None,
    online_correction: OnlineCorrectionOpt = False,
) -> None:
    """Select (batch size, knob value) under the cap, apply the knob (GPU clock, power
    limit or power mode), train to the target, restore.

    Under a cap that moves (--power-cap solar:seed=3,day_s=600, battery:..., schedule:FILE,
    file:PATH) the selection re-runs at every change: the frequency drops within one sensor
    period, the batch size (and its learning rate) changes at the next step, training pauses
    while nothing fits and resumes when the cap rises. On a battery, --objective time takes
    the fastest choice whose predicted energy for the rest of the run fits in what it has left.

    With --server URL the device fetches what it needs: e.g. `wattcap train --server URL
    --device emulated:jetson-nano --model resnet18 --data ... --power-cap 5 --target-accuracy
    0.8` gets the profile of this device model, the efficiency vector and the weights.
    """
    from wattcap.core.efficiency import EfficiencyVector

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
            weights, power_mode)
    elif profile is None:
        fail("--profile is required: the device's measured table of power and time",
             hint=f"measure it on the device with `wattcap profile --device {device} --model "
                  f"{model} --out profile.json` (`--dry-run` says how many points it "
                  "measures), or fetch one with --server URL")
    check_weights(weights, model)
    table = _train_profile(profile, source)
    dev = _train_device(device, power_mode, table, profile, model, dry_run=dry_run, seed=seed,
                        drift=drift_spec)
    train_split, test_split = load_data(data_spec, spec, options)
    plan_cap = _plan_cap(cap, source, table, margin_sigmas)
    choice = _choose(profile, efficiency, target_efficiency, plan_cap, goal, margin_sigmas,
                     method, risk, transfer_factor)
    check_split_size(len(train_split), [choice.batch_size])
    vector = load_or_fail(EfficiencyVector, efficiency) if efficiency else None
    config = _train_config(model, choice.batch_size, target_accuracy, sample_budget,
                           eval_every, seed, lr_ref, batch_size_ref, optimizer, weight_decay,
                           vector, metric)
    _print_choice(method, choice, table.knob_kind, cap, source, plan_cap,
                  dev.power_mode_names())
    # a run re-plans (a moving cap, its board, a clamp) with the oracle's r_b for fastest,
    # else the proxy's: the r_b its first plan was made with
    vector_path = target_efficiency if method == "fastest" else efficiency
    replan_efficiency = load_or_fail(EfficiencyVector, vector_path) if vector_path else None
    if online_correction:
        _check_correction(method, replan_efficiency)
    if dry_run:
        console.print("dry run: nothing changed, no training")
        return
    record = _run_training(
        dev, config, choice, train_split, test_split, label=f"{model} on {data}",
        weights=weights, power_cap_w=cap, power_cap=source, efficiency=replan_efficiency,
        objective=goal, checkpoint_dir=checkpoint_dir, method=method,
        profile=table if drift_tolerance > 0 or source is not None
        or table.knob_kind != "gpu_clock" or online_correction else None,
        drift_tolerance=drift_tolerance, margin_sigmas=margin_sigmas, num_workers=workers,
        risk=risk, transfer_factor=transfer_factor, online_correction=online_correction)
    _finish(record, out, plot)


#: `wattcap train`'s exit code for a run that ended without reaching its target
NOT_REACHED_EXIT_CODE = 1


def _power_summary(record: RunRecord) -> str:
    """', energy 1.34 J, peak 2.68 W vs cap 3 W', or what was not measured: a run shorter
    than the sensor's period has no reading to give a peak (nor a sensor energy)."""
    against = (f" under {record.cap_source}" if record.cap_source else
               f" vs cap {record.power_cap_w:g} W" if record.power_cap_w else "")
    if record.peak_power_w is None:
        return (", no power reading (the run was shorter than the sensor's period)"
                + (f"; cap {record.power_cap_w:g} W" if record.power_cap_w else ""))
    return f", energy {record.energy_j:.3g} J, peak {record.peak_power_w:.2f} W{against}"


def _finish(record: RunRecord, out: Path | None, plot: Path | None) -> None:
    """Write and print the run; a run that missed its target exits with NOT_REACHED_EXIT_CODE
    (the record written all the same), so a script can tell it from one that reached it (bad
    input exits 2 before any work)."""
    if out:
        record.save(out)
    print_run(record, plot)
    if not record.reached:
        raise typer.Exit(NOT_REACHED_EXIT_CODE)


def _check_correction(method: str, vector: EfficiencyVector | None) -> None:
    """--online-correction needs wattcap's plan and a vector with the proxy's reference."""
    if method != "wattcap" or vector is None or not vector.noise_reference:
        fail("--online-correction re-plans wattcap's choice from the proxy's efficiency vector "
             "and its noise-scale reference: give --efficiency made with `wattcap estimate "
             "--noise-reference` (or --method gns)")


def _print_choice(method: str, choice: Choice, kind: str, cap: float | None,
                  source: CapSource | None, plan_cap: float | None,
                  mode_names: dict[int, str] | None = None) -> None:
    """The method's configuration, in the profile's knob (a power mode named by the device's
    `mode_names`), and the cap it runs under."""
    under = (f", starting under {plan_cap:.2f} W of {source.describe()})" if source is not None
             else f", cap {cap:g} W)" if cap else ", no cap)")
    knob = format_knob(kind, choice.knob_value, mode_names)
    console.print(f"{method}: batch size {choice.batch_size} at {knob} (profile peak "
                  f"{choice.peak_power_w:.2f} W{under}")


def _train_device(device: str, power_mode: str | None, table: ProfileTable, profile: Path,
                  model: str, **options: Any) -> Device:
    """The device to train on, in `power_mode` where given (`get_device`: an emulated device
    runs in it, a Jetson must be in it); refused, before anything changes, where the profile
    was made for another device, model or power mode (its times and powers are its mode's)."""
    from wattcap.cli.common import open_device
    from wattcap.devices import DeviceError
    from wattcap.models import model_fingerprint

    try:
        dev = open_device(device, power_mode=power_mode, **options)
    except (DeviceError, KeyError, ValueError) as err:
        fail(str(err).strip("'\""))
    table.check_matches(device=dev.name, model=model, source=str(profile),
                        architecture_fingerprint=model_fingerprint(model),
                        power_mode=dev.power_mode, power_modes=dev.power_mode_names())
    return dev


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
                        power_mode: str | None = None,
                        ) -> tuple[Path, Path | None, Path | None]:
    """The profile of this device model (in the power mode it runs in: `power_mode` where
    given), the efficiency vector and the weights from a server; local files given win."""
    from wattcap.cli.server import device_identity, fetch_plan_inputs, fetch_train_weights

    # the mode by its own name (--power-mode may give an id or another case)
    name, mode = device_identity(device, power_mode) if power_mode or not device_name \
        else (device_name, None)
    name = device_name or name
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
    check_device_extra(device)
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
            risk: float | None = None, transfer_factor: float | None = None) -> Choice:
    """The method's (b, f) under the cap, or a clear exit when it has none; the plan's note
    on a cap that does not bind is said (one far above the board may be a typo)."""
    from wattcap.algorithms.plan_notes import CAP_DOES_NOT_BIND
    from wattcap.cli.plan import make_plan

    result = make_plan(profile, efficiency, cap, target_efficiency_path=target_efficiency,
                       objective=goal, margin_sigmas=margin_sigmas, risk=risk,
                       transfer_factor=transfer_factor)
    for note in result.notes:
        if note.startswith(CAP_DOES_NOT_BIND):
            console.print(f"  [dim]note: {escape(note)}[/]", highlight=False)
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
    included). With a checkpoint folder, a stopped run says how to go on (the device is
    restored first: the hint is printed as the stop leaves the outermost block)."""
    from wattcap.cli.resume import resumable
    from wattcap.core.schema import WattcapFileError
    from wattcap.devices import DeviceError, FrequencyNotFollowedError
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
        checkpoint_dir = session.get("checkpoint_dir")
        stops = resumable(f"the checkpoint in {checkpoint_dir} (written at every evaluation) "
                          "is kept") if checkpoint_dir else exit_cleanly_on_signals()
        with stops, dev, progress(
            f"training {label} (planned b={choice.batch_size}, target "
            f"{config.target_metric.goal_text(config.target_accuracy)})",
            config.sample_budget, "samples",
        ) as report:
            if clock:
                try:
                    dev.set_frequency_hz(choice.knob_value)
                except FrequencyNotFollowedError:
                    pass  # the lock stands; the Session records the board's hold, goes on under it
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
    goal = metric.goal_text(target or 0)
    final = (f"{record.final_accuracy:.1%}" if metric.is_accuracy
             else metric.value_text(record.final_accuracy))
    console.print(
        f"[bold]{record.method or 'run'}[/] b={record.batch_size}: "
        + (f"reached {goal} after {record.samples_to_target:.0f} samples"
           f", time-to-{'accuracy' if metric.is_accuracy else 'target'} {tta:.3g} s (device)"
           if record.reached and target and tta
           else f"did not reach {goal} "
           + (f"({record.stop_reason})" if record.stop_reason
              else f"within {record.sample_budget} samples")
           + f" (final {final})")
        + _power_summary(record)
    )
    if record.segments:
        print_segments(record)
    for step in record.frequency_steps:
        console.print(f"  [yellow]watchdog[/] t={step.time_s:.1f} s: {step.from_hz / 1e6:.1f} -> "
                      f"{step.to_hz / 1e6:.1f} MHz ({step.reason})")
    for event in record.events:
        console.print(f"  [dim]{escape(str(event))}[/]", highlight=False)
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
