"""`wattcap migrate` (files of earlier schema versions rewritten in the current one), `wattcap
import profile|efficiency` (measured tables in) and `wattcap export profile`."""

from __future__ import annotations

from pathlib import Path

import typer

from wattcap.cli.common import counted, say
from wattcap.cli.inputs import parse_input_shape
from wattcap.cli.options import ColumnsOpt, InputShapeOpt
from wattcap.core.knob import knob_unit


def migrate(
    files: list[Path] = typer.Argument(..., help="Profiles or efficiency vectors to rewrite."),
) -> None:
    """Rewrite profiles and efficiency vectors of earlier schema versions in the current one.

    Loading an earlier file already works (it is migrated in memory); this makes it
    permanent. The original is kept beside it as NAME.schema-vN.json. A file written by a
    newer wattcap is refused with its version named.
    """
    from wattcap.core.migrate import migrate_file

    for path in files:
        result = migrate_file(path)
        if result.backup is None:
            say(f"{path}: already schema version {result.to_version}; nothing to do")
        else:
            say(f"{path}: {result.kind} schema version {result.from_version} -> "
                f"{result.to_version} (the original kept as {result.backup})")


import_app = typer.Typer(help="Measured tables in: a CSV becomes a wattcap profile or "
                         "efficiency vector (each subcommand's --help gives its columns).",
                         no_args_is_help=True)
export_app = typer.Typer(help="A wattcap file out, in the layout `wattcap import` reads.",
                         no_args_is_help=True)


def _shape(text: str | None) -> list[int] | None:
    return None if text is None else list(parse_input_shape(text))


@import_app.command("profile")
def import_profile_command(
    table: Path = typer.Argument(..., help="CSV: batch_size, one knob (frequency_mhz, "
                                 "power_limit_w or power_mode), seconds_per_sample, "
                                 "avg_power_w[, peak_power_w]. Values may carry their "
                                 "unit ('148.1 W', '1410 MHz') or the header may "
                                 "('power.draw [W]'): it is converted. A bare value is in "
                                 "its column's unit (the header's, else the name's: s, W, "
                                 "MHz); cells in different units must agree once converted. "
                                 "Every problem of the table is listed in one run."),
    device: str = typer.Option(..., help="The device the table was measured on."),
    model: str = typer.Option(..., help="The model it was measured with."),
    power_sampling: str = typer.Option(..., help="How its power was measured: "
                                       "instant:PERIOD_S, average:WINDOW_S (nvidia-smi's "
                                       "power.draw: average:1) or energy."),
    out: Path = typer.Option(..., help="The profile JSON to write."),
    input_shape: InputShapeOpt = None,
    columns: ColumnsOpt = None,
) -> None:
    """Import a measured table of time and power over batch sizes and a knob (GPU clock,
    power limit or Jetson power mode)."""
    from wattcap.measure.imported_tables import import_profile

    profile = import_profile(table, device=device, model=model,
                             power_sampling=power_sampling, input_shape=_shape(input_shape),
                             columns=columns)
    profile.save(out)
    merged = (profile.imported_from or {}).get("repeated_rows_merged", 0)
    say(f"wrote {out}: {counted(len(profile.points), 'point')} of "
        f"{counted(len(profile.batch_sizes), 'batch size')} and "
        f"{counted(len(profile.knob_values), 'value')} of the "
        f"{knob_unit(profile.knob_kind).label}"
        + (f" ({counted(merged, 'repeated row')} merged into their mean and spread)"
           if merged else "")
        + {"measured": "",
           "averaged": f"; its peaks are of {profile.power_window_s} s averages: the planner "
                       "raises them for the instant peaks they hide",
           "average": "; no peak power in the table: a cap will apply to average power",
           }[profile.peak_power_source])


@import_app.command("efficiency")
def import_efficiency_command(
    table: Path = typer.Argument(..., help="CSV: batch_size, seed, samples_to_target (empty "
                                 "or 'not reached' for a miss), budget_samples; or each run's "
                                 "curve: batch_size, seed, samples_seen, metric_value, "
                                 "budget_samples. Every problem of the table is listed in one "
                                 "run."),
    model: str = typer.Option(..., help="The model the runs trained."),
    dataset: str = typer.Option(..., help="The data they trained on (the proxy)."),
    target_accuracy: float = typer.Option(..., "--target", "--target-accuracy",
                                          help="The target they were run to, in the metric's "
                                          "units."),
    metric: str = typer.Option("accuracy", help="The metric of the target: accuracy (0-1), "
                               "f1, f1:100 (F1 on 0-100), bleu, and falling ones: wer, cer, "
                               "loss, perplexity."),
    out: Path = typer.Option(..., help="The efficiency vector JSON to write."),
    task: str = typer.Option("image-classification", help="The task."),
    input_shape: InputShapeOpt = None,
    columns: ColumnsOpt = None,
) -> None:
    """Import the samples (or epochs) each batch size needed to reach a target."""
    from wattcap.measure.imported_tables import import_efficiency

    vector = import_efficiency(table, model=model, dataset=dataset,
                               target_accuracy=target_accuracy, task=task,
                               input_shape=_shape(input_shape), columns=columns,
                               metric=metric)
    vector.save(out)
    say(f"wrote {out}: r_b for batch sizes {[e.batch_size for e in vector.entries]} "
        f"({vector.ratio_source}) to "
        f"{vector.target_metric.describe(vector.target_accuracy)}")


@import_app.command("trace")
def import_trace_command(
    trace: Path = typer.Argument(..., help="A trace manifest (kind wattcap.trace): a measured "
                                 "profile table and the proxy's and targets' runs."),
    out: Path = typer.Option(..., help="The folder to write the wattcap files into."),
) -> None:
    """Turn a trace into the files `wattcap plan` reads: profile.json, efficiency-proxy.json
    and, per target, efficiency-target-NAME.json (its measured means, for
    --target-efficiency). `wattcap compare --device trace:FILE` replays it whole."""
    from wattcap.experiments.trace import load_trace, measured_oracle
    from wattcap.train.run_store import file_stem

    loaded = load_trace(trace)
    out.mkdir(parents=True, exist_ok=True)
    written = [loaded.profile.save(out / "profile.json"),
               loaded.proxy.save(out / "efficiency-proxy.json")]
    for name, vector in loaded.targets.items():
        oracle = measured_oracle(vector)
        if oracle is None:
            say(f"target {name}: no batch size reached the target in every seed: no file")
            continue
        written.append(oracle.save(out / f"efficiency-target-{file_stem(name)}.json"))
    say(f"{loaded.manifest.label}\nwrote " + ", ".join(str(p) for p in written))


@export_app.command("profile")
def export_profile_command(
    profile: Path = typer.Argument(..., help="A wattcap profile JSON."),
    out: Path = typer.Option(..., help="The CSV to write."),
) -> None:
    """Write a profile as a CSV in the layout `wattcap import profile` reads."""
    from wattcap.cli.common import load_or_fail
    from wattcap.core.files import write_file
    from wattcap.core.profile import ProfileTable
    from wattcap.measure.imported_tables import export_profile

    write_file(out, export_profile(load_or_fail(ProfileTable, profile)))
    say(f"wrote {out}")


@export_app.command("efficiency")
def export_efficiency_command(
    efficiency: Path = typer.Argument(..., help="A wattcap efficiency vector JSON."),
    out: Path = typer.Option(..., help="The CSV to write."),
) -> None:
    """Write an efficiency vector's runs (samples to target per batch size and seed, and each
    run's budget) as a CSV in the layout `wattcap import efficiency` reads."""
    from wattcap.cli.common import load_or_fail
    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.core.files import write_file
    from wattcap.measure.imported_tables import export_efficiency

    write_file(out, export_efficiency(load_or_fail(EfficiencyVector, efficiency)))
    say(f"wrote {out}")
