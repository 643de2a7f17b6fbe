"""`wattcap pretrain`, `wattcap estimate` and `wattcap train`: the commands that train."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from wattcap.cli.common import (
    DEVICE_HELP,
    MARGIN_HELP,
    OBJECTIVE_HELP,
    RAY_HELP,
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
    DATA_HELP,
    INPUT_SHAPE,
    MODEL_HELP,
    NUM_CLASSES,
    SUBSET_FRACTION,
    TEST_FRACTION,
    VOCAB_SIZE,
    WORKERS,
    check_data,
    check_target_accuracy,
    check_weights,
    check_workers,
    data_options,
    load_data,
    parse_target,
    resolve_model,
)
from wattcap.core.defaults import DEFAULT_BATCH_SIZE_REF, DEFAULT_LR_REF, DEFAULT_MARGIN_SIGMAS

if TYPE_CHECKING:
    from wattcap.core.cap_history import Segment
    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.core.run import RunRecord
    from wattcap.runtime.session import SessionStatus


def pretrain(
    model: str = typer.Option(..., help=MODEL_HELP),
    data: str = typer.Option(..., help=f"Dataset to pre-train on. {DATA_HELP}"),
    out: Path = typer.Option(..., help="Weights file (.safetensors)."),
    epochs: int = typer.Option(2, help="Epochs over the training split (the demo and "
                               "`compare` pre-train for 2 as well)."),
    batch_size: int = typer.Option(32),
    lr: float = typer.Option(1e-3, help="Adam learning rate."),
    seed: int = typer.Option(0),
    input_shape: str | None = INPUT_SHAPE,
    num_classes: int | None = NUM_CLASSES,
    vocab_size: int | None = VOCAB_SIZE,
    subset_fraction: float | None = SUBSET_FRACTION,
    test_fraction: float | None = TEST_FRACTION,
    workers: int = WORKERS,
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


def _run_detail(label: str) -> str:
    """estimate_efficiency's label of a finished run ('b=8 seed=0: 1536 samples', 'b=8 seed=0:
    missed') as a person reads it."""
    run, _, samples = label.rpartition(": ")
    if not run:
        return label
    if samples == "missed":
        return f"{run}: target not reached"
    return f"{run}: {samples} to target"


def estimate(
    model: str = typer.Option(..., help=MODEL_HELP),
    proxy: str = typer.Option(..., help=f"Proxy dataset. {DATA_HELP}"),
    target_accuracy: str = typer.Option("auto", help="The proxy's own target accuracy (0-1), "
                                        "or 'auto': 0.9 x the best accuracy the largest batch "
                                        "size reaches within the budget (recorded in the file)."),
    out: Path = typer.Option(..., help="EfficiencyVector JSON to write."),
    weights: Path | None = typer.Option(None, help="Pre-trained weights (.safetensors)."),
    batch_sizes: str = typer.Option("4,8,16,32,64,128"),
    seeds: int = typer.Option(3, help="Seeds per batch size (at least 2 for the large-batch "
                              "fit; 1 falls back to raw samples)."),
    sample_budget: int = typer.Option(20_000, help="Give up after this many samples (a batch "
                                      "size that misses gets one retry with twice the budget)."),
    eval_every: int = typer.Option(256, help="Evaluate every N samples (same for every b)."),
    lr_ref: float = typer.Option(DEFAULT_LR_REF, help="Learning rate at the reference batch "
                                 "size (the paper: Adam 5e-4 at b = 128)."),
    batch_size_ref: int = typer.Option(DEFAULT_BATCH_SIZE_REF, help="Reference batch size for "
                                       "sqrt LR scaling."),
    optimizer: str = typer.Option("adam", help="adam or adamw (both with sqrt LR scaling)."),
    weight_decay: float = typer.Option(0.0, help="Weight decay (e.g. 0.01 with adamw)."),
    server: str | None = typer.Option(None, help="wattcap server URL: start from its stored "
                                      "weights for --model (the newest, or --model-id) unless "
                                      "--weights is given.", rich_help_panel="Server"),
    model_id: int | None = typer.Option(None, help="With --server: the stored weights to use.",
                                        rich_help_panel="Server"),
    on_server: bool = typer.Option(False, help="With --server: run the sweep on the server (a "
                                   "background job; this command waits for it) and write its "
                                   "result to --out.", rich_help_panel="Server"),
    push: bool = typer.Option(False, help="With --server: upload the estimated vector, linked "
                              "to the weights it started from (needs the token).",
                              rich_help_panel="Server"),
    token: str | None = typer.Option(None, envvar="WATTCAP_SERVER_TOKEN", help="With --server: "
                                     "bearer token (env WATTCAP_SERVER_TOKEN).",
                                     rich_help_panel="Server"),
    method: str = typer.Option("sweep", help="'sweep': train every batch size and seed to the "
                               "target (the reference); 'gns': one run at the largest batch "
                               "size measuring the gradient noise scale, r_b = (1 + "
                               "b/B_noise) / (1 + b_max/B_noise), at a fraction of the "
                               "compute. With 'gns' a numeric --target-accuracy ends the run "
                               "when the proxy reaches it, 'auto' trains --gns-samples."),
    gns_samples: int = typer.Option(4096, help="With --method gns: samples the run trains "
                                    "(at most, with a numeric --target-accuracy)."),
    ray: str | None = typer.Option(None, "--ray", help=RAY_HELP, metavar="local|ADDRESS"),
    input_shape: str | None = INPUT_SHAPE,
    num_classes: int | None = NUM_CLASSES,
    vocab_size: int | None = VOCAB_SIZE,
    subset_fraction: float | None = SUBSET_FRACTION,
    test_fraction: float | None = TEST_FRACTION,
    workers: int = WORKERS,
) -> None:
    """Estimate batch-size efficiency r_b on a proxy dataset (every b, K seeds; or from the
    gradient noise scale of one run with --method gns)."""
    from wattcap.core.schema import WattcapFileError
    from wattcap.train.efficiency import estimate_efficiency

    check_workers(workers)
    sizes = parse_batch_sizes(batch_sizes)
    target = parse_target(target_accuracy)
    if method not in ("sweep", "gns"):
        fail(f"--method must be 'sweep' or 'gns', got {method!r}")
    if method == "gns":
        if len(sizes) < 2:
            fail("--method gns needs at least two batch sizes (it measures at the smallest "
                 "and the largest)")
        if gns_samples < max(sizes):
            fail(f"--gns-samples ({gns_samples}) must hold at least one batch of "
                 f"{max(sizes)}")
        if on_server:
            fail("--method gns runs here: drop --on-server (the server's jobs are sweeps)")
        if ray is not None:
            fail("--method gns is one run: --ray has nothing to spread")
    if seeds < 1:
        fail(f"--seeds must be at least 1, got {seeds}")
    if sample_budget < eval_every:
        fail(f"--sample-budget ({sample_budget}) must be at least --eval-every ({eval_every})")
    check_optimizer(optimizer, weight_decay, lr_ref, batch_size_ref)
    if (on_server or push or model_id is not None) and not server:
        fail("--on-server, --push and --model-id need --server URL")
    weights_id = None
    if server and on_server:
        from wattcap.cli.server import estimate_on_server

        if target == "auto":
            fail("--on-server needs a numeric --target-accuracy (the server job takes one)")
        if num_classes is not None or vocab_size is not None:
            fail("--on-server estimates a model stored on the server: --num-classes and "
                 "--vocab-size do not apply")
        if optimizer != "adam" or weight_decay:
            fail("--on-server runs the sweep with Adam: --optimizer and --weight-decay do "
                 "not apply")
        shape = None
        if input_shape is not None:
            from wattcap.data import ShapeConversionError, parse_image_shape

            try:
                shape = list(parse_image_shape(input_shape))
            except ShapeConversionError as err:
                fail(f"--input-shape: {err}")
        vector = estimate_on_server(
            server, token, model=model, model_id=model_id, proxy=proxy,
            target_accuracy=float(target), batch_sizes=sizes, seeds=seeds,
            sample_budget=sample_budget, eval_every=eval_every, lr_ref=lr_ref,
            batch_size_ref=batch_size_ref, subset_fraction=subset_fraction,
            test_fraction=test_fraction, input_shape=shape)
    else:
        spec = resolve_model(model, input_shape, num_classes, vocab_size)
        proxy_spec = check_data(proxy, "--proxy")
        options = data_options(spec, input_shape, subset_fraction, test_fraction)
        model = spec.name
        check_weights(weights, model)
        splits = load_data(proxy_spec, spec, options, option="--proxy")
        if server and weights is None:
            from wattcap.cli.server import fetch_estimate_weights

            weights, weights_id = fetch_estimate_weights(server, token, model, model_id)
        if method == "gns":
            vector = _estimate_gns(model, proxy_spec.text, target, weights, sizes, gns_samples,
                                   eval_every, lr_ref, batch_size_ref, splits, optimizer,
                                   weight_decay)
        else:
            from wattcap.train.executors import ExecutorError

            runs = len(sizes) * seeds
            where = executor_or_fail(ray)
            with where, progress(f"estimating r_b of {model} on {proxy}"
                                 + (f" ({where.describe()})" if ray else ""), runs,
                                 "runs") as report:
                try:
                    vector = estimate_efficiency(
                        model, proxy_spec.text, target, weights=weights, batch_sizes=sizes,
                        seeds=seeds, sample_budget=sample_budget,
                        eval_every_samples=eval_every, lr_ref=lr_ref,
                        batch_size_ref=batch_size_ref, executor=where,
                        progress=lambda done, total, label: report.update(
                            done, _run_detail(label), total=total),
                        data=splits, num_workers=workers, optimizer=optimizer,
                        weight_decay=weight_decay,
                    )
                except (KeyError, ValueError, WattcapFileError, ExecutorError) as err:
                    fail(str(err).strip("'\""))
    vector.save(out)
    if server and push and not on_server:  # a server-side sweep is stored there already
        from wattcap.cli.server import push_estimated

        push_estimated(server, token, vector, weights_id)
    print_efficiency(vector)
    console.print(f"wrote {out}")


def _estimate_gns(model: str, proxy: str, target: float | str, weights: Path | None,
                  sizes: tuple[int, ...], gns_samples: int, eval_every: int, lr_ref: float,
                  batch_size_ref: int, splits: tuple, optimizer: str,
                  weight_decay: float) -> EfficiencyVector:
    from wattcap.core.schema import WattcapFileError
    from wattcap.train.noise_scale import estimate_efficiency_gns

    with progress(f"measuring the gradient noise scale of {model} on {proxy} (b = "
                  f"{min(sizes)} and {max(sizes)})", gns_samples, "samples") as report:
        try:
            return estimate_efficiency_gns(
                model, proxy, target, weights=weights,  # type: ignore[arg-type]
                batch_sizes=sizes, sample_budget=gns_samples, eval_every_samples=eval_every,
                lr_ref=lr_ref, batch_size_ref=batch_size_ref, data=splits,
                optimizer=optimizer, weight_decay=weight_decay,  # type: ignore[arg-type]
                progress=lambda done, total, label: report.update(done, label))
        except (KeyError, ValueError, WattcapFileError) as err:
            fail(str(err).strip("'\""))


def print_efficiency(vector: EfficiencyVector) -> None:
    """The vector as a table, with the notes on where r_b came from."""
    from wattcap.experiments.tables import efficiency_table

    console.print(efficiency_table(vector))
    for note in vector.ratio_notes():
        console.print(f"  [dim]{note}[/]")



def train(
    device: str = typer.Option("emulated:jetson-nano", help=DEVICE_HELP),
    profile: Path | None = typer.Option(None, help="ProfileTable JSON of this device and model "
                                        "(required unless --server fetches it)."),
    power_cap: str = typer.Option(..., help="Cap in watts, or 'none', or a cap that moves "
                                  "during the run: solar:seed=N[,day_s=..,start=..,clouds=..], "
                                  "battery:capacity_wh=WH,max_w=W[,soc=..], schedule:FILE "
                                  "(.json or .csv: time_s,cap_w), file:PATH[,period_s=..] (a "
                                  "file another process rewrites)."),
    model: str = typer.Option(..., help=MODEL_HELP),
    data: str = typer.Option(..., help=f"Target dataset. {DATA_HELP}"),
    target_accuracy: float = typer.Option(..., help="Test accuracy to reach (0-1)."),
    efficiency: Path | None = typer.Option(None, help="EfficiencyVector JSON (proxy r_b)."),
    target_efficiency: Path | None = typer.Option(None, help="r_b on the target (for fastest)."),
    margin_sigmas: float = typer.Option(DEFAULT_MARGIN_SIGMAS, min=0.0, help=MARGIN_HELP),
    weights: Path | None = typer.Option(None, help="Pre-trained weights (.safetensors)."),
    method: str = typer.Option("wattcap", help="wattcap, baseline-1, baseline-2 or fastest."),
    sample_budget: int = typer.Option(20_000),
    eval_every: int = typer.Option(256),
    seed: int = typer.Option(0),
    lr_ref: float | None = typer.Option(None, help="Learning rate at the reference batch size "
                                        "(default: the efficiency vector's, else "
                                        f"{DEFAULT_LR_REF:g} as in the paper)."),
    batch_size_ref: int | None = typer.Option(None, help="Reference batch size for sqrt LR "
                                              "scaling (default: the efficiency vector's, "
                                              f"else {DEFAULT_BATCH_SIZE_REF})."),
    optimizer: str | None = typer.Option(None, help="adam or adamw (default: the efficiency "
                                         "vector's, else adam)."),
    weight_decay: float = typer.Option(0.0, help="Weight decay (e.g. 0.01 with adamw)."),
    checkpoint_dir: Path | None = typer.Option(None, help="Save/resume the run here."),
    out: Path | None = typer.Option(None, help="RunRecord JSON to write."),
    objective: str = typer.Option("time", help=OBJECTIVE_HELP),
    eta: float | None = typer.Option(None, help="With --objective cost: weight of energy "
                                     "against time, in [0, 1]."),
    max_energy: float | None = typer.Option(None, help="With --objective time: at most this "
                                            "many joules to the target (predicted)."),
    deadline: float | None = typer.Option(None, help="With --objective energy: reach the target "
                                          "within this many seconds (predicted)."),
    plot: Path | None = typer.Option(None, help="With a moving cap: write power, cap, frequency "
                                     "and batch size over the run as a PNG."),
    dry_run: bool = typer.Option(False, help="Read the hardware, change nothing (no training)."),
    drift_tolerance: float = typer.Option(0.1, help="Relative difference of measured step "
                                          "time or power from the profile that counts as "
                                          "drift: the row is re-measured and the frequency "
                                          "re-planned at the next checkpoint (0 = off)."),
    drift: str | None = typer.Option(None, help="Emulated devices only: AFTER_S,SPEED,POWER "
                                     "derating after AFTER_S device seconds (e.g. 5,0.8,1.2), "
                                     "to watch drift handling."),
    server: str | None = typer.Option(None, help="wattcap server URL: fetch this device's "
                                      "profile, the model's efficiency vector and its weights "
                                      "(local --profile, --efficiency, --weights still win).",
                                      rich_help_panel="Server"),
    device_name: str | None = typer.Option(None, help="With --server: the device model whose "
                                           "profile to fetch (default: --device's).",
                                           rich_help_panel="Server"),
    proxy: str | None = typer.Option(None, help="With --server: only an efficiency vector "
                                     "estimated on this proxy dataset.",
                                     rich_help_panel="Server"),
    model_id: int | None = typer.Option(None, help="With --server: the stored weights to start "
                                        "from (default: those the efficiency vector was "
                                        "estimated from, else the newest for --model).",
                                        rich_help_panel="Server"),
    token: str | None = typer.Option(None, envvar="WATTCAP_SERVER_TOKEN", help="With --server: "
                                     "bearer token, for a server with private reads (env "
                                     "WATTCAP_SERVER_TOKEN).", rich_help_panel="Server"),
    input_shape: str | None = INPUT_SHAPE,
    num_classes: int | None = NUM_CLASSES,
    vocab_size: int | None = VOCAB_SIZE,
    subset_fraction: float | None = SUBSET_FRACTION,
    test_fraction: float | None = TEST_FRACTION,
    workers: int = WORKERS,
) -> None:
    """Select (b, f) under the cap, apply the frequency, train to the target, restore.

    Under a cap that moves (--power-cap solar:seed=3,day_s=600, battery:..., schedule:FILE,
    file:PATH) the selection re-runs at every change: the frequency drops within one sensor
    period, the batch size (and its learning rate) changes at the next step, training pauses
    while nothing fits and resumes when the cap rises.

    With --server URL the device fetches what it needs: e.g. `wattcap train --server URL
    --device emulated:jetson-nano --model resnet18 --data ... --power-cap 5 --target-accuracy
    0.8` gets the profile of this device model, the efficiency vector and the weights.
    """
    from wattcap.cli.plan import make_plan
    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.core.plan import METHODS
    from wattcap.core.profile import ProfileTable
    from wattcap.core.schema import WattcapFileError
    from wattcap.devices import DeviceError, get_device
    from wattcap.devices.caps import CapSource, CapSourceError
    from wattcap.models import model_fingerprint

    # Every argument is checked before any work starts (no plan printed for a bad one).
    if method not in METHODS:
        fail(f"--method must be one of {', '.join(METHODS)}")
    goal = parse_objective(objective, eta, max_energy, deadline)
    cap_spec = parse_cap_spec(power_cap)
    source = cap_spec if isinstance(cap_spec, CapSource) else None
    cap: float | None = None if isinstance(cap_spec, CapSource) else cap_spec
    if plot is not None and source is None:
        fail("--plot draws a run under a moving cap: give --power-cap a cap source (e.g. "
             "solar:seed=3)")
    check_target_accuracy(target_accuracy)
    check_workers(workers)
    if sample_budget < 1 or eval_every < 1:
        fail("--sample-budget and --eval-every must be positive")
    if drift is not None and not device.startswith("emulated"):
        fail("--drift only applies to emulated devices")
    if drift_tolerance < 0:
        fail(f"--drift-tolerance must be >= 0, got {drift_tolerance}")
    drift_spec = parse_drift(drift)
    check_optimizer(optimizer or "adam", weight_decay, lr_ref or 1.0, batch_size_ref or 1)
    spec = resolve_model(model, input_shape, num_classes, vocab_size)
    model = spec.name
    data_spec = check_data(data)
    options = data_options(spec, input_shape, subset_fraction, test_fraction)
    if server:
        from wattcap.cli.server import device_identity, fetch_plan_inputs, fetch_train_weights

        # the profile must be this device model's, in the power mode it runs in
        name, mode = (device_name, None) if device_name else device_identity(device)
        profile, efficiency, efficiency_info = fetch_plan_inputs(
            server, token, profile=profile, efficiency=efficiency, device_name=name,
            model=model, power_mode=mode, proxy=proxy)
        if weights is None:
            weights = fetch_train_weights(server, token, model, model_id, efficiency_info)
    elif profile is None:
        fail("--profile is required (or --server URL)")
    check_weights(weights, model)
    table = load_or_fail(ProfileTable, profile)
    try:
        dev = get_device(device, dry_run=dry_run, seed=seed, drift=drift_spec)
    except (DeviceError, KeyError, ValueError) as err:
        fail(str(err).strip("'\""))
    table.check_matches(device=dev.name, model=model, source=str(profile),
                        architecture_fingerprint=model_fingerprint(model))
    train_split, test_split = load_data(data_spec, spec, options)
    plan_cap = cap
    if source is not None:
        try:
            plan_cap = source.cap_w(0.0)
        except CapSourceError as err:
            fail(f"--power-cap: {err}")
        if plan_cap is not None and table.points:
            # a run that starts below every configuration starts paused, with the plan for
            # the lowest cap anything meets
            from wattcap.algorithms.planner import with_power_margin

            margined = with_power_margin(table, margin_sigmas)
            plan_cap = max(plan_cap, min(p.peak_power_w for p in margined.points))
    result = make_plan(profile, efficiency, plan_cap, target_efficiency_path=target_efficiency,
                       objective=goal, margin_sigmas=margin_sigmas)
    if method not in result.choices:
        fail(f"{method} has no choice under this cap: {result.unavailable.get(method, '')}")
    choice = result.choices[method]
    from wattcap.train.loop import TrainConfig, train_to_accuracy

    vector = load_or_fail(EfficiencyVector, efficiency) if efficiency else None
    try:
        config = TrainConfig(
            model=model, batch_size=choice.batch_size, target_accuracy=target_accuracy,
            sample_budget=sample_budget, eval_every_samples=eval_every, seed=seed,
            # the optimiser settings r_b was estimated with hold it: the vector's, unless told
            lr_ref=lr_ref or (vector.lr_ref if vector else DEFAULT_LR_REF),
            batch_size_ref=batch_size_ref or (vector.batch_size_ref if vector
                                                 else DEFAULT_BATCH_SIZE_REF),
            optimizer=optimizer or (vector.optimizer if vector else "adam"),  # type: ignore[arg-type]  # checked by config.check()
            weight_decay=weight_decay)
        config.check()
    except ValueError as err:
        fail(str(err))
    under = (f", starting under {plan_cap:.2f} W of {source.describe()})" if source is not None
             else f", cap {cap:g} W)" if cap else ", no cap)")
    console.print(f"{method}: batch size {choice.batch_size} at "
                  f"{choice.frequency_hz / 1e6:.1f} MHz (profile peak {choice.peak_power_w:.2f} W"
                  + under)
    replan_efficiency = None
    if source is not None:
        # the r_b the run re-plans with: the oracle's for fastest, the proxy's otherwise
        vector_path = target_efficiency if method == "fastest" else efficiency
        replan_efficiency = load_or_fail(EfficiencyVector, vector_path) if vector_path \
            else None
    if dry_run:
        console.print("dry run: nothing changed, no training")
        return
    from wattcap.runtime.watchdog import exit_cleanly_on_signals

    try:
        with exit_cleanly_on_signals(), dev, progress(
            f"training {model} on {data} (b={choice.batch_size}, target "
            f"{target_accuracy:.0%})", sample_budget, "samples",
        ) as report:
            dev.set_frequency_hz(choice.frequency_hz)
            record = train_to_accuracy(
                config, train_split, test_split, device=dev, weights=weights, power_cap_w=cap,
                power_cap=source, efficiency=replan_efficiency, objective=goal,
                checkpoint_dir=checkpoint_dir, method=method,
                progress=lambda status: report.update(status.samples, _status_detail(status)),
                profile=table if drift_tolerance > 0 or source is not None else None,
                drift_tolerance=drift_tolerance, margin_sigmas=margin_sigmas,
                num_workers=workers)
    except (DeviceError, WattcapFileError, ValueError) as err:
        fail(str(err))
    if out:
        record.save(out)
    print_run(record)
    if plot is not None:
        from wattcap.experiments.cap_run import plot_cap_run

        plot_cap_run(record, plot)
        console.print(f"wrote {plot}")


def _status_detail(status: SessionStatus) -> str:
    """One progress line's detail: accuracy vs target, power vs cap, clock, device time."""
    parts = ["paused: the cap is below every configuration"] if status.paused else []
    if status.accuracy is not None:
        parts.append(f"accuracy {status.accuracy:.1%}"
                     + (f" (target {status.target_accuracy:.0%})"
                        if status.target_accuracy is not None else ""))
    if status.power_w is not None:
        parts.append(f"{status.power_w:.2f} W"
                     + (f" (cap {status.power_cap_w:g} W)" if status.power_cap_w else ""))
    if status.frequency_hz is not None:
        parts.append(f"{status.frequency_hz / 1e6:.0f} MHz")
    parts.append(f"{status.device_time_s:.1f} s of device time")
    return ", ".join(parts)


def print_run(record: RunRecord) -> None:
    """The run summary: time-to-accuracy, energy, peak power against the cap."""
    tta = record.time_to_accuracy_s
    target = record.target_accuracy
    console.print(
        f"[bold]{record.method or 'run'}[/] b={record.batch_size}: "
        + (f"reached {target:.0%} after {record.samples_to_target:.0f} samples"
           f", time-to-accuracy {tta:.1f} s (device)" if record.reached and target and tta
           else f"did not reach {target or 0:.0%} "
           + (f"({record.stop_reason})" if record.stop_reason
              else f"within {record.sample_budget} samples")
           + f" (final {record.final_accuracy:.1%})")
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
