"""The `wattcap` command line."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from wattcap.console import make_console
from wattcap.devices import DeviceError, get_device, list_specs
from wattcap.efficiency import EfficiencyVector
from wattcap.planner import METHODS, InfeasibleCapError, Plan, plan
from wattcap.profiling import Profiler, ProfileTable
from wattcap.schema import WattcapFileError

app = typer.Typer(
    help="wattcap: choose batch size and GPU frequency together, for the fastest training "
    "under a power cap.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = make_console()
err_console = make_console(stderr=True)


def fail(message: str, code: int = 2) -> None:
    """Print a clear error (no traceback) and exit."""
    err_console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def parse_cap(value: str | None) -> float | None:
    """'none' (or no value) means no cap; otherwise watts."""
    if value is None or value.strip().lower() in ("none", "off", ""):
        return None
    try:
        cap = float(value)
    except ValueError:
        fail(f"--power-cap must be a number of watts or 'none', got {value!r}")
    if cap <= 0:
        fail(f"--power-cap must be positive, got {value}")
    return cap


def load_or_fail(cls, path: Path):  # noqa: ANN001, ANN201
    """Load a wattcap file or exit with its message."""
    try:
        return cls.load(path)
    except WattcapFileError as err:
        fail(str(err))


# -- devices ------------------------------------------------------------------------------------
@app.command()
def devices(
    probe: bool = typer.Option(False, "--probe", help="Look for real hardware (Jetson devfreq "
                               "and INA3221, NVIDIA GPUs through NVML) and report it; only "
                               "reads, never changes a setting."),
    sysfs_root: str = typer.Option("/", hidden=True, help="Root of sysfs (for tests)."),
) -> None:
    """List emulated devices, and real hardware when present."""
    table = Table(title="Emulated devices (use --device emulated:<name>)")
    for column in ("name", "GPU frequencies (MHz)", "memory usable", "power modes", "sensor"):
        table.add_column(column)
    from wattcap.devices.spec import load_spec

    for name in list_specs():
        spec = load_spec(name)
        freqs = [f / 1e6 for f in spec.frequencies_hz]
        table.add_row(
            name,
            f"{len(freqs)}: {freqs[0]:.1f} … {freqs[-1]:.1f}",
            f"{spec.memory_usable_bytes / 2**30:.1f} GiB",
            ", ".join(f"{m} ({p.budget_w:g} W)" for m, p in spec.power_modes.items()),
            f"{spec.sensor_rail} every {spec.sensor_period_s * 1e3:.0f} ms",
        )
    console.print(table)
    if probe:
        from wattcap.devices.probe import probe as run_probe

        report = run_probe(sysfs_root=sysfs_root)
        console.print("[bold]Real hardware probe[/] (read only: nothing is changed)")
        for line in report.found:
            console.print(f"  [green]found[/]   {line}")
        for line in report.missing:
            console.print(f"  [yellow]missing[/] {line}")
        emulated = ", ".join("emulated:" + n for n in list_specs())
        if not report.found:
            console.print(
                "[bold]Result:[/] no Jetson or NVIDIA GPU is present on this machine; wattcap "
                f"can use the emulated devices instead: {emulated}."
            )


# -- profile ------------------------------------------------------------------------------------
def _parse_drift(value: str | None):  # noqa: ANN202
    """'AFTER_S,SPEED,POWER' (e.g. '0,0.8,1.15') -> an emulated Drift, or None."""
    from wattcap.devices import Drift

    if value is None:
        return None
    try:
        after_s, speed, power = (float(v) for v in value.split(","))
    except ValueError:
        fail(f"--drift must be AFTER_S,SPEED_FACTOR,POWER_FACTOR (e.g. 0,0.8,1.15), got {value!r}")
    if after_s < 0 or speed <= 0 or power <= 0:
        fail(f"--drift needs AFTER_S >= 0 and positive factors, got {value!r}")
    return Drift(after_s=after_s, speed_factor=speed, power_factor=power)


def _print_device_readout(dev) -> None:  # noqa: ANN001
    """What a dry run reads from the device: identity, clocks, sensor, memory."""
    freqs = dev.frequencies_hz()
    mode = getattr(dev, "power_mode", None)
    mode = mode() if callable(mode) else mode
    console.print(f"device {dev.name} ({dev.kind}" + (f", power mode {mode})" if mode else ")"))
    console.print(f"  {len(freqs)} GPU frequencies: "
                  + ", ".join(f"{f / 1e6:.1f}" for f in freqs) + " MHz")
    try:
        console.print(f"  current frequency {dev.current_frequency_hz() / 1e6:.1f} MHz")
    except (DeviceError, OSError) as err:
        console.print(f"  current frequency unreadable: {err}")
    try:
        console.print(f"  power now {dev.read_power_w():.2f} W on {dev.sensor_rail}, a new "
                      f"reading every {dev.sensor_period_s * 1e3:.0f} ms")
    except DeviceError as err:
        console.print(f"  [yellow]power unreadable:[/] {err}")
    console.print(f"  memory usable for training {dev.memory_bytes() / 2**30:.2f} GiB")


def _print_refresh(result, source: Path, out: Path) -> None:  # noqa: ANN001
    """The re-measured points next to the old ones, and what that means for planning."""
    cap = result.power_cap_w
    title = (f"{result.table.model} on {result.table.device}: frontier re-measured "
             + (f"for a cap of {cap:g} W" if cap is not None else "(no cap)"))
    table = Table(title=title)
    for column in ("batch", "MHz", "old peak W", "new peak W", "peak change",
                   "old ms/sample", "new ms/sample", "time change", "under cap"):
        table.add_column(column, justify="right")
    for change in result.changes:
        old, new = change.old, change.new
        table.add_row(
            str(new.batch_size), f"{new.frequency_hz / 1e6:.1f}",
            f"{old.peak_power_w:.2f}" if old else "—", f"{new.peak_power_w:.2f}",
            f"{change.power_change:+.1%}" if old else "new",
            f"{old.seconds_per_sample * 1e3:.3f}" if old else "—",
            f"{new.seconds_per_sample * 1e3:.3f}",
            f"{change.time_change:+.1%}" if old else "new",
            "yes" if cap is None or new.peak_power_w <= cap else "[red]no[/]",
        )
    console.print(table)
    for b, (old_hz, new_hz) in sorted(result.frontier_moved().items()):
        now = f"{new_hz / 1e6:.1f} MHz" if new_hz else "none measured under the cap"
        console.print(f"  [yellow]b={b}: highest feasible frequency {old_hz / 1e6:.1f} MHz -> "
                      f"{now}[/]")
    if result.skipped:
        console.print(f"  [dim]not re-measured (no longer fits or frequency not offered): "
                      f"batch sizes {result.skipped}[/]")
    largest = max((abs(c) for ch in result.changes
                   for c in (ch.time_change, ch.power_change) if c is not None), default=0.0)
    if largest > 0.1:
        console.print(f"[bold yellow]the device changed since {source} was measured[/] (up to "
                      f"{largest:.0%}): plan again with {out}")
    else:
        console.print(f"no change beyond 10 % (largest {largest:.1%}): the profile still holds")


@app.command()
def profile(
    device: str = typer.Option("emulated:jetson-nano", help="auto, jetson, nvml:N, emulated:NAME"),
    model: str | None = typer.Option(None, help="Registered model name (default resnet18; "
                                     "with --refresh, the profile's model)."),
    out: Path | None = typer.Option(None, help="ProfileTable JSON to write (with --refresh, "
                                    "default: overwrite FILE)."),
    power_cap: str | None = typer.Option(None, help="Cap in W for the pruned search (with "
                                         "--refresh: the cap whose frontier is re-measured)."),
    exhaustive: bool = typer.Option(False, help="Measure every (b, f)."),
    few_points: bool = typer.Option(False, "--few-points", help="Measure a few points (10 % "
                                    "of the grid) and predict the rest with a fitted device "
                                    "model, measuring where the cap's frontier is uncertain."),
    max_points: int | None = typer.Option(None, help="With --few-points: most points to "
                                          "measure (default 10 % of the grid)."),
    power_mode: str | None = typer.Option(None, help="nvpmodel mode of an emulated device."),
    batch_sizes: str = typer.Option("4,8,16,32,64,128", help="Comma-separated batch sizes."),
    refresh: Path | None = typer.Option(None, "--refresh", metavar="FILE", help="Re-measure "
                                        "only the feasible frontier of this profile and show "
                                        "what changed (the device may have drifted)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Read the device and say what "
                                 "would be measured; change no setting, write no file."),
    drift: str | None = typer.Option(None, help="Emulated devices only: AFTER_S,SPEED,POWER "
                                     "derating after AFTER_S device seconds (e.g. 0,0.8,1.15), "
                                     "to try --refresh and drift handling."),
) -> None:
    """Measure peak power and time per sample over (batch size, frequency)."""
    from wattcap.models import get_model_spec
    from wattcap.profiling import refresh_profile
    from wattcap.workload import workload_for

    cap = parse_cap(power_cap)
    previous = load_or_fail(ProfileTable, refresh) if refresh is not None else None
    if previous is not None:
        model = model or previous.model
        emulated_spec = device.partition(":")[2] or "jetson-nano"
        if device.startswith("emulated") and emulated_spec == previous.device:
            # The emulated device in the profile's power mode (its frequency list) by default.
            power_mode = power_mode or previous.power_mode
    model = model or "resnet18"
    if out is None and refresh is None and not dry_run:
        fail("--out is required (the ProfileTable JSON to write)")
    if few_points and (exhaustive or refresh is not None):
        fail("--few-points cannot be combined with --exhaustive or --refresh")
    if max_points is not None and (not few_points or max_points < 3):
        fail("--max-points needs --few-points and at least 3 points")
    try:
        get_model_spec(model)
        sizes = tuple(sorted(int(b) for b in batch_sizes.split(",")))
        if drift is not None and not device.startswith("emulated"):
            raise ValueError("--drift only applies to emulated devices")
        dev = get_device(device, power_mode=power_mode, dry_run=dry_run,
                         drift=_parse_drift(drift))
    except (KeyError, ValueError, DeviceError) as err:
        fail(str(err).strip("'\""))
    if previous is not None:
        try:
            previous.check_matches(device=dev.name, model=model, source=str(refresh))
        except WattcapFileError as err:
            fail(str(err))

    if dry_run:
        _print_device_readout(dev)
        if previous is not None:
            frontier = previous.frontier(cap if cap is not None else previous.power_cap_w)
            console.print(f"--refresh would re-measure {len(frontier)} frontier points of "
                          f"{refresh} (more where one now breaks the cap): "
                          + ", ".join(f"b={b} at {p.frequency_hz / 1e6:.1f} MHz"
                                      for b, p in sorted(frontier.items())))
        else:
            work = workload_for(model)
            overhead = getattr(getattr(dev, "spec", None), "allocator_overhead_factor", 1.0)
            fits = [b for b in sizes
                    if work.memory_needed_bytes(b, overhead) <= dev.memory_bytes()]
            too_big = [b for b in sizes if b not in fits]
            points = len(fits) * len(dev.frequencies_hz())
            if few_points:
                from wattcap.active_profiling import default_budget

                budget = max_points or default_budget(fits, dev.frequencies_hz())
                how = f"a few points: at most {budget} of {points}, the rest predicted"
            else:
                how = ("exhaustive: " if exhaustive or cap is None else
                       f"pruned for {cap:g} W: at most ") + f"{points} points"
            console.print(f"{model}: batch sizes that fit {fits}"
                          + (f", too big for memory {too_big}" if too_big else "")
                          + f"; would measure {how}")
        console.print("dry run: no setting changed, no file written")
        return

    what = "refresh" if previous is not None else "few points" if few_points else (
        "exhaustive" if exhaustive or cap is None else f"pruned for {cap:g} W")
    with dev, Progress(
        TextColumn("[bold]profiling[/] {task.description}"), BarColumn(),
        TextColumn("{task.completed} points"), TimeElapsedColumn(), console=console,
        transient=True,
    ) as bar:
        rows = len(previous.batch_sizes) if previous is not None else len(sizes)
        task = bar.add_task(f"{model} on {dev.name} ({what})",
                            total=rows * len(dev.frequencies_hz()))
        profiler = Profiler(
            dev, model,
            batch_sizes=tuple(previous.batch_sizes) if previous is not None else sizes,
            progress=lambda point, label: bar.advance(task),
        )
        try:
            if previous is not None:
                result = refresh_profile(profiler, previous, power_cap_w=cap,
                                         source=str(refresh))
            else:
                table = profiler.run(power_cap_w=cap, exhaustive=exhaustive,
                                     mode="model" if few_points else None,
                                     max_points=max_points)
        except (DeviceError, WattcapFileError) as err:
            fail(str(err))
    if previous is not None:
        assert refresh is not None
        target = out or refresh
        result.table.save(target)
        _print_refresh(result, refresh, target)
        console.print(f"wrote {target}: {len(result.changes)} points re-measured (refresh)")
        return
    assert out is not None
    table.save(out)
    if table.mode == "model":
        fit = table.model_fit
        console.print(f"{table.points_predicted} points predicted from the {table.points_measured}"
                      " measured" + ("" if fit.get("settled", True) else
                                     f"; frontier not settled within {fit.get('max_points')} "
                                     f"points for batch sizes {fit.get('undecided_batch_sizes')}"
                                     " (predicted values carry their uncertainty)"))
    console.print(
        f"wrote {out}: {table.points_measured} points ({table.mode}), "
        f"{table.profiling_device_s:.1f} s of device time; max batch size {table.max_batch_size}"
        + (f"; out of memory: {table.oom_batch_sizes}" if table.oom_batch_sizes else "")
    )


# -- plan ---------------------------------------------------------------------------------------
def make_plan(
    profile_path: Path,
    efficiency_path: Path | None,
    cap: float | None,
    reference_profiles: Path | None = None,
    target_efficiency_path: Path | None = None,
) -> Plan:
    """Load files and plan, turning every expected problem into a clear exit."""
    from wattcap.references import reference_profiles_for

    table = load_or_fail(ProfileTable, profile_path)
    eff = load_or_fail(EfficiencyVector, efficiency_path) if efficiency_path else None
    target = load_or_fail(EfficiencyVector, target_efficiency_path) if target_efficiency_path \
        else None
    try:
        refs = reference_profiles_for(table, reference_profiles)
        return plan(table, cap, efficiency=eff, reference_profiles=refs, target_efficiency=target)
    except (InfeasibleCapError, WattcapFileError, ValueError) as err:
        fail(str(err))
        raise  # unreachable: fail exits


def plan_to_json(result: Plan) -> dict:
    """The flat JSON of `plan --json`: wattcap's choice at the top, the others under methods."""
    main = result.choices["wattcap"]
    return {
        "method": "wattcap",
        "batch_size": main.batch_size,
        "frequency_hz": main.frequency_hz,
        "predicted_time_s": main.predicted_time_s,
        "predicted_energy_j": main.predicted_energy_j,
        "peak_power_w": main.peak_power_w,
        "power_cap_w": result.power_cap_w,
        "device": result.device,
        "model": result.model,
        "safe_frequency_hz": result.safe_frequency_hz,
        "methods": {
            name: {
                "method": c.method,
                "batch_size": c.batch_size,
                "frequency_hz": c.frequency_hz,
                "predicted_time_s": c.predicted_time_s,
                "predicted_energy_j": c.predicted_energy_j,
                "peak_power_w": c.peak_power_w,
                "speedup_of_wattcap": c.predicted_time_s / main.predicted_time_s,
            }
            for name, c in result.choices.items()
        },
        "unavailable": result.unavailable,
        "notes": result.notes,
    }


def print_plan(result: Plan, title: str | None = None) -> None:
    """A rich table of every method's choice and predicted speed-up."""
    cap = "no cap" if result.power_cap_w is None else f"cap {result.power_cap_w:g} W"
    table = Table(title=title or f"{result.model} on {result.device}, {cap}")
    for column in ("method", "batch", "MHz", "peak W", "avg W", "r_b", "pred. time (s)",
                   "pred. energy (J)", "wattcap speed-up"):
        table.add_column(column, justify="right" if column != "method" else "left")
    main = result.choices.get("wattcap")
    for method in METHODS:
        c = result.choices.get(method)
        if c is None:
            table.add_row(method, "—", "—", "—", "—", "—", "—", "—", "n/a (see notes)")
            continue
        speedup = f"{c.predicted_time_s / main.predicted_time_s:.2f}x" if main else ""
        table.add_row(method, str(c.batch_size), f"{c.frequency_hz / 1e6:.1f}",
                      f"{c.peak_power_w:.2f}", f"{c.avg_power_w:.2f}", f"{c.efficiency_ratio:.2f}",
                      f"{c.predicted_time_s:.1f}", f"{c.predicted_energy_j:.0f}", speedup)
    console.print(table)
    for method, reason in result.unavailable.items():
        console.print(f"  [dim]note: {method} not available: {reason}[/]")
    for note in result.notes:
        console.print(f"  [dim]note: {note}[/]")


@app.command("plan")
def plan_command(
    profile: Path | None = typer.Option(None, help="ProfileTable JSON (required unless --server "
                                        "fetches it)."),
    power_cap: str = typer.Option(..., help="Cap in watts, or 'none'."),
    efficiency: Path | None = typer.Option(None, help="EfficiencyVector JSON (proxy r_b)."),
    target_efficiency: Path | None = typer.Option(None, help="r_b measured on the target: "
                                                  "adds the fastest-configuration oracle."),
    reference_profiles: Path | None = typer.Option(None, help="Folder of reference-model "
                                                   "profiles for the baselines' safe frequency."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    out: Path | None = typer.Option(None, help="Also write the Plan file."),
    server: str | None = typer.Option(None, help="wattcap server URL: fetch the profile and the "
                                      "efficiency vector from it (a local --profile or "
                                      "--efficiency still wins).", rich_help_panel="Server"),
    device_name: str | None = typer.Option(None, help="With --server: the device model whose "
                                           "profile to fetch, e.g. jetson-nano.",
                                           rich_help_panel="Server"),
    model: str | None = typer.Option(None, help="With --server: the model to plan for "
                                     "(default: the local profile's).",
                                     rich_help_panel="Server"),
    power_mode: str | None = typer.Option(None, help="With --server: only a profile made in "
                                          "this power mode (e.g. MAXN).",
                                          rich_help_panel="Server"),
    proxy: str | None = typer.Option(None, help="With --server: only an efficiency vector "
                                     "estimated on this proxy dataset.",
                                     rich_help_panel="Server"),
    target_accuracy: float | None = typer.Option(None, help="With --server: only an efficiency "
                                                 "vector for this target accuracy.",
                                                 rich_help_panel="Server"),
    token: str | None = typer.Option(None, envvar="WATTCAP_SERVER_TOKEN", help="With --server: "
                                     "bearer token, for a server with private reads (env "
                                     "WATTCAP_SERVER_TOKEN).", rich_help_panel="Server"),
) -> None:
    """Choose (batch size, frequency) for each method under a power cap.

    From local files (--profile, --efficiency), or from a wattcap server: `wattcap plan
    --server URL --device-name jetson-nano --model resnet18 --power-cap 5` fetches the newest
    profile of that device for the model and the model's newest efficiency vector.
    """
    if server:
        from wattcap.server.commands import fetch_plan_inputs

        profile, efficiency, _ = fetch_plan_inputs(
            server, token, profile=profile, efficiency=efficiency, device_name=device_name,
            model=model, power_mode=power_mode, proxy=proxy, target_accuracy=target_accuracy)
    elif profile is None:
        fail("--profile is required (or --server URL with --device-name and --model)")
    result = make_plan(profile, efficiency, parse_cap(power_cap), reference_profiles,
                       target_efficiency)
    if out:
        result.save(out)
    if as_json:
        print(json.dumps(plan_to_json(result), indent=2))
    else:
        print_plan(result)


@app.command("plot-profile")
def plot_profile_command(
    profile: Path = typer.Option(..., help="ProfileTable JSON."),
    out: Path = typer.Option(..., help="PNG to write."),
    power_cap: str | None = typer.Option(None, help="Cap in watts: draws the frontier and "
                                         "every method's choice."),
    efficiency: Path | None = typer.Option(None, help="EfficiencyVector JSON."),
) -> None:
    """Heatmaps of peak power and time per sample with the cap frontier and the choices."""
    from wattcap.experiments.plots import plot_profile

    cap = parse_cap(power_cap)
    table = load_or_fail(ProfileTable, profile)
    result = make_plan(profile, efficiency, cap) if cap is not None else None
    plot_profile(table, out, power_cap_w=cap, plan=result)
    console.print(f"wrote {out}")


def _data_splits(name: str, seed: int = 0):  # noqa: ANN202
    from wattcap.data import get_dataset

    try:
        return get_dataset(name).split(0.2, seed=seed)
    except KeyError as err:
        fail(str(err).strip("'\""))


@app.command()
def pretrain(
    model: str = typer.Option(..., help="Registered model name."),
    data: str = typer.Option(..., help="Bundled dataset to pre-train on."),
    out: Path = typer.Option(..., help="Weights file (.safetensors)."),
    epochs: int = typer.Option(3, help="Epochs over the training split."),
    batch_size: int = typer.Option(32),
    lr: float = typer.Option(1e-3, help="Adam learning rate."),
    seed: int = typer.Option(0),
) -> None:
    """Pre-train a model on an offline task; every later run starts from these weights."""
    from wattcap.training import pretrain as run_pretrain

    try:
        meta = run_pretrain(model, data, out, epochs=epochs, batch_size=batch_size, lr=lr,
                            seed=seed)
    except (KeyError, ValueError) as err:
        fail(str(err).strip("'\""))
    console.print(f"wrote {out}: {model} pre-trained on {data}, test accuracy "
                  f"{float(meta['test_accuracy']):.1%}")


@app.command()
def estimate(
    model: str = typer.Option(..., help="Registered model name."),
    proxy: str = typer.Option(..., help="Bundled proxy dataset."),
    target_accuracy: float = typer.Option(..., help="Test accuracy to reach (0-1)."),
    out: Path = typer.Option(..., help="EfficiencyVector JSON to write."),
    weights: Path | None = typer.Option(None, help="Pre-trained weights (.safetensors)."),
    batch_sizes: str = typer.Option("4,8,16,32,64,128"),
    seeds: int = typer.Option(3, help="Seeds per batch size."),
    sample_budget: int = typer.Option(20_000, help="Give up after this many samples."),
    eval_every: int = typer.Option(256, help="Evaluate every N samples (same for every b)."),
    lr_ref: float = typer.Option(1e-3, help="Learning rate at the reference batch size."),
    batch_size_ref: int = typer.Option(32, help="Reference batch size for sqrt LR scaling."),
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
) -> None:
    """Estimate batch-size efficiency r_b on a proxy dataset (every b, K seeds)."""
    from wattcap.efficiency import estimate_efficiency

    sizes = tuple(sorted(int(b) for b in batch_sizes.split(",")))
    if (on_server or push or model_id is not None) and not server:
        fail("--on-server, --push and --model-id need --server URL")
    weights_id = None
    if server and on_server:
        from wattcap.server.commands import estimate_on_server

        vector = estimate_on_server(
            server, token, model=model, model_id=model_id, proxy=proxy,
            target_accuracy=target_accuracy, batch_sizes=sizes, seeds=seeds,
            sample_budget=sample_budget, eval_every=eval_every, lr_ref=lr_ref,
            batch_size_ref=batch_size_ref)
    else:
        if server and weights is None:
            from wattcap.server.commands import fetch_estimate_weights

            weights, weights_id = fetch_estimate_weights(server, token, model, model_id)
        with Progress(TextColumn("[bold]estimating[/] {task.description}"), BarColumn(),
                      TextColumn("{task.completed}/{task.total} runs"), TimeElapsedColumn(),
                      console=console, transient=True) as bar:
            task = bar.add_task(f"{model} on {proxy}", total=len(sizes) * seeds)
            try:
                vector = estimate_efficiency(
                    model, proxy, target_accuracy, weights=weights, batch_sizes=sizes,
                    seeds=seeds, sample_budget=sample_budget, eval_every_samples=eval_every,
                    lr_ref=lr_ref, batch_size_ref=batch_size_ref,
                    progress=lambda done, total, label: bar.update(task, completed=done,
                                                                   description=label),
                )
            except (KeyError, ValueError, WattcapFileError) as err:
                fail(str(err).strip("'\""))
    vector.save(out)
    if server and push and not on_server:  # a server-side sweep is stored there already
        from wattcap.server.commands import push_estimated

        push_estimated(server, token, vector, weights_id)
    table = Table(title=f"r_b of {model} on {proxy} (target {target_accuracy:.0%})")
    for column in ("batch", "samples per seed", "r_b mean", "r_b std"):
        table.add_column(column, justify="right")
    for e in vector.entries:
        table.add_row(str(e.batch_size), ", ".join(str(s) for s in e.samples_per_seed),
                      "unreachable" if e.ratio_mean is None else f"{e.ratio_mean:.3f}",
                      "" if e.ratio_std is None else f"{e.ratio_std:.3f}")
    console.print(table)
    console.print(f"wrote {out}")


@app.command()
def train(
    device: str = typer.Option("emulated:jetson-nano", help="auto, jetson, nvml:N, emulated:NAME"),
    profile: Path | None = typer.Option(None, help="ProfileTable JSON of this device and model "
                                        "(required unless --server fetches it)."),
    power_cap: str = typer.Option(..., help="Cap in watts, or 'none'."),
    model: str = typer.Option(..., help="Registered model name."),
    data: str = typer.Option(..., help="Bundled target dataset."),
    target_accuracy: float = typer.Option(..., help="Test accuracy to reach (0-1)."),
    efficiency: Path | None = typer.Option(None, help="EfficiencyVector JSON (proxy r_b)."),
    target_efficiency: Path | None = typer.Option(None, help="r_b on the target (for fastest)."),
    weights: Path | None = typer.Option(None, help="Pre-trained weights (.safetensors)."),
    method: str = typer.Option("wattcap", help="wattcap, baseline-1, baseline-2 or fastest."),
    sample_budget: int = typer.Option(20_000),
    eval_every: int = typer.Option(256),
    seed: int = typer.Option(0),
    checkpoint_dir: Path | None = typer.Option(None, help="Save/resume the run here."),
    out: Path | None = typer.Option(None, help="RunRecord JSON to write."),
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
) -> None:
    """Select (b, f) under the cap, apply the frequency, train to the target, restore.

    With --server URL the device fetches what it needs: e.g. `wattcap train --server URL
    --device emulated:jetson-nano --model resnet18 --data ... --power-cap 5 --target-accuracy
    0.8` gets the profile of this device model, the efficiency vector and the weights.
    """
    from wattcap.runtime import exit_cleanly_on_signals
    from wattcap.training import TrainConfig, train_to_accuracy

    if method not in METHODS:
        fail(f"--method must be one of {', '.join(METHODS)}")
    cap = parse_cap(power_cap)
    if server:
        from wattcap.server.commands import (
            device_identity,
            fetch_plan_inputs,
            fetch_train_weights,
        )

        # the profile must be this device model's, in the power mode it runs in
        name, mode = (device_name, None) if device_name else device_identity(device)
        profile, efficiency, efficiency_info = fetch_plan_inputs(
            server, token, profile=profile, efficiency=efficiency, device_name=name,
            model=model, power_mode=mode, proxy=proxy)
        if weights is None:
            weights = fetch_train_weights(server, token, model, model_id, efficiency_info)
    elif profile is None:
        fail("--profile is required (or --server URL)")
    result = make_plan(profile, efficiency, cap, target_efficiency_path=target_efficiency)
    if method not in result.choices:
        fail(f"{method} has no choice under this cap: {result.unavailable.get(method, '')}")
    choice = result.choices[method]
    if drift is not None and not device.startswith("emulated"):
        fail("--drift only applies to emulated devices")
    if drift_tolerance < 0:
        fail(f"--drift-tolerance must be >= 0, got {drift_tolerance}")
    try:
        dev = get_device(device, dry_run=dry_run, seed=seed, drift=_parse_drift(drift))
    except DeviceError as err:
        fail(str(err))
    table = load_or_fail(ProfileTable, profile)
    try:
        table.check_matches(device=dev.name, model=model, source=str(profile))
    except WattcapFileError as err:
        fail(str(err))
    train_split, test_split = _data_splits(data, seed=0)
    config = TrainConfig(model=model, batch_size=choice.batch_size,
                         target_accuracy=target_accuracy, sample_budget=sample_budget,
                         eval_every_samples=eval_every, seed=seed)
    console.print(f"{method}: batch size {choice.batch_size} at "
                  f"{choice.frequency_hz / 1e6:.1f} MHz (profile peak {choice.peak_power_w:.2f} W"
                  + (f", cap {cap:g} W)" if cap else ", no cap)"))
    if dry_run:
        console.print("dry run: nothing changed, no training")
        return
    try:
        with exit_cleanly_on_signals(), dev:
            dev.set_frequency_hz(choice.frequency_hz)
            record = train_to_accuracy(config, train_split, test_split, device=dev,
                                       weights=weights, power_cap_w=cap,
                                       checkpoint_dir=checkpoint_dir, method=method,
                                       profile=table if drift_tolerance > 0 else None,
                                       drift_tolerance=drift_tolerance)
    except (DeviceError, WattcapFileError, ValueError) as err:
        fail(str(err))
    if out:
        record.save(out)
    print_run(record)


def print_run(record) -> None:  # noqa: ANN001
    """The run summary: time-to-accuracy, energy, peak power against the cap."""
    tta = record.time_to_accuracy_s
    console.print(
        f"[bold]{record.method or 'run'}[/] b={record.config.batch_size}: "
        + (f"reached {record.config.target_accuracy:.0%} after {record.samples_to_target} samples"
           f", time-to-accuracy {tta:.1f} s (device)" if record.reached else
           f"did not reach {record.config.target_accuracy:.0%} within "
           f"{record.config.sample_budget} samples (final {record.final_accuracy:.1%})")
        + f", energy {record.energy_j:.0f} J, peak {record.peak_power_w or 0:.2f} W"
        + (f" vs cap {record.power_cap_w:g} W" if record.power_cap_w else "")
    )
    for step in record.frequency_steps:
        console.print(f"  [yellow]watchdog[/] t={step.time_s:.1f} s: {step.from_hz / 1e6:.1f} -> "
                      f"{step.to_hz / 1e6:.1f} MHz ({step.reason})")
    for event in record.events:
        console.print(f"  [dim]{event}[/]")


@app.command()
def demo(
    out: Path = typer.Option(Path("demo-output"), help="Folder for the files and plots."),
    quick: bool = typer.Option(False, help="Smaller run (used by the tests)."),
) -> None:
    """The main job on the embedded default: the emulated Jetson Nano and bundled data."""
    from wattcap.demo import run_demo

    run_demo(out, console=console, quick=quick)


from wattcap.experiments.commands import register as _register_experiments  # noqa: E402

_register_experiments(app)

# serve / push / pull: the module imports only typer; fastapi, uvicorn and httpx (the optional
# wattcap[server] extra) load when a server command runs, so the core CLI works without them.
from wattcap.server.commands import register as _register_server  # noqa: E402

_register_server(app)


def main() -> None:
    """Entry point."""
    app()


if __name__ == "__main__":
    main()
