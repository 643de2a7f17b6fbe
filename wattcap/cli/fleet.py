"""`wattcap fleet plan FLEET`: a fleet file checked and planned; `wattcap fleet simulate FLEET`:
its federation run on Flower's simulation engine, or in this process."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from wattcap.cli.common import console, fail, require_extra, say
from wattcap.cli.options import TRAINING

if TYPE_CHECKING:
    from wattcap.experiments.federation import RoundRecord

fleet_app = typer.Typer(help="A fleet of power-capped devices training one model (federated): "
                        "its plans per client.", no_args_is_help=True)


def _methods_table(result: object) -> Table:
    from wattcap.experiments.fleet import FleetPlans

    assert isinstance(result, FleetPlans)
    table = Table(title=f"{result.fleet.model}: {len(result.fleet.clients)} clients, "
                  f"{result.fleet.samples_per_round} samples per round (predicted)")
    for column in ("method", "clients", "round (s)", "rounds", "time to target (s)",
                   "training energy (J)", "link energy (J)", "vs fleet"):
        table.add_column(column, justify="left" if column == "method" else "right")
    fleet_time = result.plans["fleet"].time_s
    for name, p in result.plans.items():
        table.add_row(name, f"{len(p.clients)}" + (f" ({len(p.left_out)} out)" if p.left_out
                                                    else ""),
                      f"{p.round_s:.2f}", f"{p.rounds:.1f}", f"{p.time_s:.1f}",
                      f"{p.energy_j:.0f}", f"{result.link_energy_j(name):.1f}",
                      f"{p.time_s / fleet_time:.2f}x")
    return table


def _clients_table(result: object) -> Table:
    from wattcap.core.knob import format_knob
    from wattcap.experiments.fleet import FleetPlans

    assert isinstance(result, FleetPlans)
    fleet = result.plans["fleet"]
    table = Table(title="the fleet plan, per client")
    for column in ("client", "cap", "batch", "knob", "samples", "compute (s)", "link (s)",
                   "waits (s)"):
        table.add_column(column, justify="left" if column == "client" else "right")
    def cap_text(name: str) -> str:
        cap = result.caps_w[name]
        return "none" if cap is None else f"{cap:g} W"

    for c in fleet.clients:
        table.add_row(c.name, cap_text(c.name), str(c.batch_size),
                      format_knob(result.knob_kinds[c.name], c.knob_value), f"{c.samples:.0f}",
                      f"{c.compute_s:.2f}", f"{c.comm_s:.2f}", f"{fleet.round_s - c.busy_s:.2f}")
    for name in fleet.left_out:
        table.add_row(name, cap_text(name), "—", "—", "0", "—", f"{result.comm_s[name]:.2f}",
                      "sits the rounds out")
    return table


@fleet_app.command("plan")
def plan_command(
    fleet: Annotated[Path, typer.Argument(
        help="The fleet file (YAML or JSON): the model, its efficiency vector, and each "
        "client's device, power cap, data shard and link (examples/fleet/fleet.yaml).")],
) -> None:
    """Check a fleet file and plan it: uniform (every client its largest batch at its safe
    clock, the round split equally), each client's own plan, and the fleet plan (choices and
    split together; clients off the critical path slowed to the round time)."""
    from wattcap.core.schema import WattcapFileError
    from wattcap.experiments.fleet import FleetError, plan_fleet_file

    _check_dependencies(fleet)
    say(f"planning {fleet} (a client without a profile is profiled first)")
    try:
        result = plan_fleet_file(fleet)
    except (FleetError, WattcapFileError) as err:
        fail(str(err))
    console.print(_methods_table(result))
    console.print(_clients_table(result))
    console.print("[dim]predicted from each client's profile and the proxy's r_b (rounds = "
                  "samples to target x the samples' mean r_b / samples per round); `wattcap "
                  "fleet simulate` runs the federation[/]")


def _runs_table(runs: list, predicted: dict[str, tuple[float, float]]) -> Table:
    from wattcap.experiments.fleet_report import MethodSummary, summarize

    summaries = summarize(runs)
    table = Table(title="federation to the target (emulated devices; mean ± std over the "
                  "seeds that reached it, over all where none did)")
    for column in ("method", "reached", "rounds", "time to target (s)", "energy (J)",
                   "vs fleet", "predicted rounds", "predicted (s)"):
        table.add_column(column, justify="left" if column == "method" else "right")
    fleet = next((m for m in summaries if m.method == "fleet" and m.reached), None)
    for m in summaries:
        rounds, time_s = predicted.get(m.method, (math.nan, math.nan))  # fedzero: none
        table.add_row(m.method, f"{m.reached}/{m.runs}", MethodSummary.text(m.rounds),
                      MethodSummary.text(m.time_s, 2) if m.reached else "not reached",
                      MethodSummary.text(m.energy_j),
                      f"{m.time_s[0] / fleet.time_s[0]:.2f}x" if fleet and m.reached else "—",
                      "—" if math.isnan(rounds) else f"{rounds:.1f}",
                      "—" if math.isnan(time_s) else f"{time_s:.2f}")
    return table


def _energy_table(runs: list) -> Table:
    table = Table(title="energy by client (J, training + link, first seed)")
    methods = list(dict.fromkeys(r.method for r in runs))
    first = {m: next(r for r in runs if r.method == m) for m in methods}
    table.add_column("client")
    for m in methods:
        table.add_column(m, justify="right")
    names = list(dict.fromkeys(n for r in first.values() for n in r.energy_by_client_j()))
    for name in names:
        table.add_row(name, *(f"{first[m].energy_by_client_j().get(name, 0.0):.1f}"
                              for m in methods))
    return table


@fleet_app.command("simulate")
def simulate_command(
    fleet: Annotated[Path, typer.Argument(
        help="The fleet file (YAML or JSON), as fleet plan reads it.")],
    method: Annotated[str, typer.Option(
        help="Comma-separated methods: uniform, own, fedzero (FedZero-style selection by "
        "forecast energy), fleet.")] = "uniform,own,fedzero,fleet",
    seeds: Annotated[int, typer.Option(
        help="Federations per method, seeds 0 to N-1 (each its own initial weights, client "
        "dropouts and forecast errors).", rich_help_panel=TRAINING)] = 1,
    engine: Annotated[str, typer.Option(
        help="flower: Flower's simulation engine (needs the fleet extra); local: the same "
        "rounds in this process, without Flower.")] = "flower",
    out: Annotated[Path, typer.Option(
        help="Folder for each run's record (JSON) and timeline plot.")] = Path("fleet-runs"),
) -> None:
    """Run the fleet's federation to its target accuracy with each method's plans, re-planned
    every round under each client's cap; stragglers past the round's deadline and dropouts are
    left out of the average. Prints time and energy to the target per method."""
    if engine not in ("flower", "local"):
        fail(f"--engine takes flower or local, got {engine!r}")
    if seeds < 1:
        fail(f"--seeds must be at least 1, got {seeds}")
    _check_dependencies(fleet, engine)  # before the clients are profiled and planned
    # said at once: loading the federation's code, profiling a client and planning take a while
    say(f"checking {fleet} and planning its clients (a client without a profile is profiled "
        "first)")
    from wattcap.core.schema import WattcapFileError
    from wattcap.experiments.federation import (
        FEDERATION_METHODS,
        FederationError,
        local_transport,
        run_federation,
    )
    from wattcap.experiments.fleet import FleetError, load_fleet, plan_at_caps
    from wattcap.experiments.fleet_report import plot_timeline

    methods = [m.strip() for m in method.split(",") if m.strip()]
    unknown = [m for m in methods if m not in FEDERATION_METHODS]
    if unknown or not methods:
        fail(f"--method takes {', '.join(FEDERATION_METHODS)} (got {method!r})")
    try:
        setup = load_fleet(fleet)  # refuses a bad file in one line before any engine starts
        plans = plan_at_caps(setup, setup.caps_at(0.0), strict=False).plans
        predicted = {m: (p.rounds, p.time_s) for m, p in plans.items()}  # beside the measured
        if engine == "flower":
            from wattcap.integrations.flower import simulate
        runs = []
        for m in methods:
            for seed in range(seeds):
                say(f"{m}, seed {seed}: federating (at most {setup.fleet.max_rounds} rounds, "
                    f"engine {engine})")
                run = (simulate(fleet, m, seed) if engine == "flower" else
                       run_federation(fleet, m, local_transport, seed=seed,
                                      progress=_round_line(m, seed)))
                say(f"{m}, seed {seed}: " + (f"reached the target in {len(run.rounds)} rounds"
                                            if run.reached else
                                            f"stopped after {len(run.rounds)} rounds"))
                stem = f"{m}-seed{seed}"
                run.save(out / f"{stem}.json")
                plot_timeline(run, out / f"{stem}-timeline.png")
                runs.append(run)
    except (FleetError, FederationError, WattcapFileError) as err:
        fail(str(err))
    console.print(_runs_table(runs, predicted))
    console.print(_energy_table(runs))
    console.print(f"[dim]records and timelines in {out}/; idle power while waiting is not "
                  "counted in the energy[/]")


def _check_dependencies(fleet: Path, engine: str | None = None) -> None:
    """What the command will need, before any client is profiled or planned: PyYAML for a
    YAML fleet file, Flower (and the Ray its simulation runs on) for --engine flower."""
    if fleet.suffix.lower() in (".yaml", ".yml"):
        require_extra("yaml", f"reading the fleet file {fleet}", "fleet")
    if engine == "flower":
        require_extra("flwr", "--engine flower (use --engine local to run without Flower)",
                      "fleet")
        require_extra("ray", "--engine flower (Flower's simulation runs on Ray)", "fleet")


def _round_line(method: str, seed: int) -> Callable[[RoundRecord], None]:
    """A line per round of a federation run here: it can take minutes."""

    def show(record: RoundRecord) -> None:
        trained = sum(1 for c in record.clients if c.status == "aggregated")
        say(f"  {method}, seed {seed}, round {record.round}: accuracy {record.accuracy:.1%}, "
            f"{record.round_s:.1f} s of fleet time, {trained}/{len(record.clients)} clients "
            "aggregated")

    return show
