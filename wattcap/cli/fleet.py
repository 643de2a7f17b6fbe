"""`wattcap fleet plan FLEET`: a fleet file checked and planned (issue 29; the federation on
Flower is not built yet)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from wattcap.cli.common import console, fail

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
    fleet: Annotated[Path, typer.Argument(help="The fleet file (YAML or JSON; see "
                                          "wattcap.core.fleet).")],
) -> None:
    """Check a fleet file and plan it: uniform (every client its largest batch at its safe
    clock, the round split equally), each client's own plan, and the fleet plan (choices and
    split together; clients off the critical path slowed to the round time)."""
    from wattcap.core.schema import WattcapFileError
    from wattcap.experiments.fleet import FleetError, plan_fleet_file

    try:
        result = plan_fleet_file(fleet)
    except (FleetError, WattcapFileError) as err:
        fail(str(err))
    console.print(_methods_table(result))
    console.print(_clients_table(result))
    console.print("[dim]predicted from each client's profile and the proxy's r_b (rounds = "
                  "samples to target x the samples' mean r_b / samples per round); the "
                  "federation itself (Flower) is not built yet[/]")
