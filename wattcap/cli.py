"""The `wattcap` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

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
# Wide tables when piped (rich assumes 80 columns without a terminal).
console = Console(width=None if sys.stdout.isatty() else 150)
err_console = Console(stderr=True)


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
    probe: bool = typer.Option(False, "--probe", help="Look for real hardware and report it."),
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
        console.print("[bold]Real hardware probe[/]")
        for line in report.found:
            console.print(f"  [green]found[/]   {line}")
        for line in report.missing:
            console.print(f"  [yellow]missing[/] {line}")
        if not report.found:
            console.print(
                "  No Jetson or NVIDIA GPU is present on this machine: use an emulated device "
                f"({', '.join('emulated:' + n for n in list_specs())})."
            )


# -- profile ------------------------------------------------------------------------------------
@app.command()
def profile(
    device: str = typer.Option("emulated:jetson-nano", help="auto, jetson, nvml:N, emulated:NAME"),
    model: str = typer.Option("resnet18", help="Registered model name."),
    out: Path = typer.Option(..., help="ProfileTable JSON to write."),
    power_cap: str | None = typer.Option(None, help="Cap in W for the pruned search."),
    exhaustive: bool = typer.Option(False, help="Measure every (b, f)."),
    power_mode: str | None = typer.Option(None, help="nvpmodel mode of an emulated device."),
    batch_sizes: str = typer.Option("4,8,16,32,64,128", help="Comma-separated batch sizes."),
) -> None:
    """Measure peak power and time per sample over (batch size, frequency)."""
    from wattcap.models import get_model_spec

    cap = parse_cap(power_cap)
    try:
        get_model_spec(model)
        sizes = tuple(sorted(int(b) for b in batch_sizes.split(",")))
        dev = get_device(device, power_mode=power_mode)
    except (KeyError, ValueError, DeviceError) as err:
        fail(str(err).strip("'\""))
    mode = "exhaustive" if exhaustive or cap is None else f"pruned for {cap:g} W"
    with dev, Progress(
        TextColumn("[bold]profiling[/] {task.description}"), BarColumn(),
        TextColumn("{task.completed} points"), TimeElapsedColumn(), console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(f"{model} on {dev.name} ({mode})",
                            total=len(sizes) * len(dev.frequencies_hz()))
        profiler = Profiler(dev, model, batch_sizes=sizes,
                            progress=lambda point, label: bar.advance(task))
        try:
            table = profiler.run(power_cap_w=cap, exhaustive=exhaustive)
        except DeviceError as err:
            fail(str(err))
    table.save(out)
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
    profile: Path = typer.Option(..., help="ProfileTable JSON."),
    power_cap: str = typer.Option(..., help="Cap in watts, or 'none'."),
    efficiency: Path | None = typer.Option(None, help="EfficiencyVector JSON (proxy r_b)."),
    target_efficiency: Path | None = typer.Option(None, help="r_b measured on the target: "
                                                  "adds the fastest-configuration oracle."),
    reference_profiles: Path | None = typer.Option(None, help="Folder of reference-model "
                                                   "profiles for the baselines' safe frequency."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    out: Path | None = typer.Option(None, help="Also write the Plan file."),
) -> None:
    """Choose (batch size, frequency) for each method under a power cap."""
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
    server: str | None = typer.Option(None, help="Fetch weights from a wattcap server."),
) -> None:
    """Estimate batch-size efficiency r_b on a proxy dataset (every b, K seeds)."""
    from wattcap.efficiency import estimate_efficiency

    sizes = tuple(sorted(int(b) for b in batch_sizes.split(",")))
    with Progress(TextColumn("[bold]estimating[/] {task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total} runs"), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task(f"{model} on {proxy}", total=len(sizes) * seeds)
        try:
            vector = estimate_efficiency(
                model, proxy, target_accuracy, weights=weights, batch_sizes=sizes, seeds=seeds,
                sample_budget=sample_budget, eval_every_samples=eval_every, lr_ref=lr_ref,
                batch_size_ref=batch_size_ref,
                progress=lambda done, total, label: bar.update(task, completed=done,
                                                               description=label),
            )
        except (KeyError, ValueError, WattcapFileError) as err:
            fail(str(err).strip("'\""))
    vector.save(out)
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
    profile: Path = typer.Option(..., help="ProfileTable JSON of this device and model."),
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
) -> None:
    """Select (b, f) under the cap, apply the frequency, train to the target, restore."""
    from wattcap.runtime import exit_cleanly_on_signals
    from wattcap.training import TrainConfig, train_to_accuracy

    if method not in METHODS:
        fail(f"--method must be one of {', '.join(METHODS)}")
    cap = parse_cap(power_cap)
    result = make_plan(profile, efficiency, cap, target_efficiency_path=target_efficiency)
    if method not in result.choices:
        fail(f"{method} has no choice under this cap: {result.unavailable.get(method, '')}")
    choice = result.choices[method]
    try:
        dev = get_device(device, dry_run=dry_run, seed=seed)
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
                                       checkpoint_dir=checkpoint_dir, method=method)
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


def main() -> None:
    """Entry point."""
    app()


if __name__ == "__main__":
    main()
