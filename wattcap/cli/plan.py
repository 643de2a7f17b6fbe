"""`wattcap plan`: every method's (batch size, knob value) under a power cap."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from wattcap.cli.common import (
    console,
    fail,
    load_or_fail,
    parse_caps,
    parse_objective,
)
from wattcap.cli.inputs import check_risk
from wattcap.cli.options import (
    CAP_AND_DEVICE,
    OUTPUT,
    PLAN_INPUTS,
    SERVER,
    CapOn,
    CapOnOpt,
    CostMaxPowerOpt,
    DeadlineOpt,
    EfficiencyOpt,
    EtaOpt,
    MarginOpt,
    MaxEnergyOpt,
    ObjectiveOpt,
    PlanDeviceNameOpt,
    PlanPowerModeOpt,
    ProfileOpt,
    ProxyFilterOpt,
    RiskOpt,
    ServerUrlOpt,
    TargetEfficiencyOpt,
    TargetFilterOpt,
    TokenOpt,
    TransferFactorOpt,
)
from wattcap.core.defaults import DEFAULT_MARGIN_SIGMAS
from wattcap.core.knob import format_knob, knob_number, knob_unit

if TYPE_CHECKING:
    from wattcap.core.objective import Objective
    from wattcap.core.plan import Choice, Plan


def make_plan(
    profile_path: Path,
    efficiency_path: Path | None,
    cap: float | None,
    reference_profiles: Path | None = None,
    target_efficiency_path: Path | None = None,
    objective: Objective | None = None,
    margin_sigmas: float | None = None,
    cap_on: str = "peak",
    extrapolate: bool = True,
    risk: float | None = None,
    transfer_factor: float | None = None,
) -> Plan:
    """Load files and plan, turning every expected problem into a clear exit. `cap_on`
    "average": the cap holds average power (the references' too), not peak power."""
    (result,) = make_plans(profile_path, efficiency_path, [cap], reference_profiles,
                           target_efficiency_path, objective, margin_sigmas, cap_on,
                           extrapolate, risk, transfer_factor).values()
    if isinstance(result, str):
        fail(result)
    return result


def make_plans(
    profile_path: Path,
    efficiency_path: Path | None,
    caps: list[float | None],
    reference_profiles: Path | None = None,
    target_efficiency_path: Path | None = None,
    objective: Objective | None = None,
    margin_sigmas: float | None = None,
    cap_on: str = "peak",
    extrapolate: bool = True,
    risk: float | None = None,
    transfer_factor: float | None = None,
) -> dict[float | None, Plan | str]:
    """`make_plan` for several caps, the files read once: each cap's plan, or why nothing
    runs under it (a cap below every configuration is an answer here, not an exit)."""
    from wattcap.algorithms.planner import plan
    from wattcap.algorithms.power_margin import cap_on_average
    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.core.plan import InfeasibleCapError
    from wattcap.core.profile import ProfileTable
    from wattcap.core.schema import WattcapFileError
    from wattcap.measure.references import reference_profiles_for

    table = load_or_fail(ProfileTable, profile_path)
    eff = load_or_fail(EfficiencyVector, efficiency_path) if efficiency_path else None
    target = load_or_fail(EfficiencyVector, target_efficiency_path) if target_efficiency_path \
        else None
    check_risk(risk)
    try:
        refs = reference_profiles_for(table, reference_profiles)
        if cap_on == CapOn.AVERAGE:
            table = cap_on_average(table)
            refs = None if refs is None else [cap_on_average(r) for r in refs]
    except (WattcapFileError, ValueError) as err:
        fail(str(err))
    margin = {} if margin_sigmas is None else {"margin_sigmas": margin_sigmas}
    plans: dict[float | None, Plan | str] = {}
    for cap in caps:
        try:
            plans[cap] = plan(table, cap, efficiency=eff, reference_profiles=refs,
                              target_efficiency=target, objective=objective,
                              extrapolate=extrapolate, risk=risk,
                              transfer_factor=transfer_factor, **margin)
        except InfeasibleCapError as err:
            plans[cap] = str(err)
        except (WattcapFileError, ValueError) as err:
            fail(str(err))
    return plans


#: what `plan --json` prints: a summary of a Plan (its own kind, with its own version)
PLAN_JSON_KIND = "wattcap.plan-summary"
#: 2: knobs (knob_kind; frequency_hz became knob_value, safe_frequency_hz safe_knob_value)
PLAN_JSON_SCHEMA_VERSION = 2


def profile_power_mode(profile_path: Path) -> tuple[str | None, dict[int, str]]:
    """The power mode a profile was measured in (None: not recorded, or the profile varies the
    mode: its knob) and the names of the device's modes where it knows them
    (`ProfileTable.power_mode_names`): what a plan of it says it holds for."""
    from wattcap.core.profile import ProfileTable

    table = load_or_fail(ProfileTable, profile_path)
    mode = None if table.knob_kind == "power_mode" else table.power_mode
    return mode, table.power_mode_names()


def _in_mode(result: Plan, power_mode: str | None) -> str:
    """'resnet18 on jetson-nano in power mode MAXN' (without a mode where none is known)."""
    return f"{result.model} on {result.device}" + (f" in power mode {power_mode}"
                                                   if power_mode else "")


def plan_to_json(result: Plan, power_mode: str | None = None) -> dict:
    """The flat JSON of `plan --json`: wattcap's choice at the top, the others under methods;
    the profile's `power_mode` where it has one (the plan holds in that mode only)."""
    main = result.choices["wattcap"]
    return {
        # a file another tool reads: what it is and which layout (the full Plan: --out)
        "kind": PLAN_JSON_KIND,
        "schema_version": PLAN_JSON_SCHEMA_VERSION,
        "method": "wattcap",
        "knob_kind": result.knob_kind,
        "knob_unit": knob_unit(result.knob_kind).stored_unit,
        "batch_size": main.batch_size,
        "knob_value": main.knob_value,
        "predicted_time_s": main.predicted_time_s,
        "predicted_energy_j": main.predicted_energy_j,
        "peak_power_w": main.peak_power_w,
        "power_cap_w": result.power_cap_w,
        "device": result.device,
        **({"power_mode": power_mode} if power_mode else {}),
        "model": result.model,
        "safe_knob_value": result.safe_knob_value,
        "methods": {
            name: {
                "method": c.method,
                "batch_size": c.batch_size,
                "knob_value": c.knob_value,
                "predicted_time_s": c.predicted_time_s,
                "predicted_energy_j": c.predicted_energy_j,
                "peak_power_w": c.peak_power_w,
                "speedup_of_wattcap": result.speedup(name),
            }
            for name, c in result.choices.items()
        },
        "unavailable": result.unavailable,
        "notes": result.notes,
        "objective": result.objective.model_dump(),
        "pareto_front": [p.model_dump() for p in result.pareto_front],
    }


def print_plan(result: Plan, title: str | None = None, power_mode: str | None = None,
               mode_names: dict[int, str] | None = None) -> None:
    """A rich table of every method's choice and predicted speed-up (in the profile's
    `power_mode` where known; a power mode knob named by `mode_names`)."""
    from wattcap.core.plan import METHODS, format_known

    cap = "no cap" if result.power_cap_w is None else f"cap {result.power_cap_w:g} W"
    objective = "" if result.objective.is_paper_time else \
        f", objective {result.objective.describe()}"
    table = Table(title=title or f"{_in_mode(result, power_mode)}, {cap}{objective}")
    for column in ("method", "batch", knob_unit(result.knob_kind).column, "peak W", "avg W",
                   "r_b", "pred. time (s)", "pred. energy (J)", "wattcap speed-up"):
        table.add_column(column, justify="right" if column != "method" else "left")
    main = result.choices.get("wattcap")
    for method in METHODS:
        c = result.choices.get(method)
        if c is None:
            table.add_row(method, "—", "—", "—", "—", "—", "—", "—", "n/a (see notes)")
            continue
        speedup = "" if main is None else format_known(result.speedup(method), ".2f", suffix="x")
        table.add_row(method, str(c.batch_size),
                      knob_number(result.knob_kind, c.knob_value, mode_names),
                      f"{c.peak_power_w:.2f}", f"{c.avg_power_w:.2f}",
                      format_known(c.efficiency_ratio, ".2f"),
                      *_prediction_cells(result, method), speedup)
    console.print(table)
    for method, reason in result.unavailable.items():
        console.print(f"  [dim]note: {method} not available: {escape(reason)}[/]",
                      highlight=False)
    for note in result.notes:
        console.print(f"  [dim]note: {escape(note)}[/]", highlight=False)


def _prediction_cells(result: Plan, method: str) -> tuple[str, str]:
    """A choice's predicted time and energy cells; the one over the objective's deadline or
    maximum energy flagged ('2.03 (over the 1.5 s deadline)'), as a baseline that misses it
    is (baseline-1 is the practice whatever the objective; the notes say so)."""
    from wattcap.core.plan import format_known

    c = result.choices[method]
    time_s, energy_j = format_known(c.predicted_time_s, "sig"), \
        format_known(c.predicted_energy_j, "sig")
    flag = _missed_flag(result, method)
    if flag and result.objective.deadline_s is not None:
        return f"[red]{time_s}{flag}[/]", energy_j
    return time_s, f"[red]{energy_j}{flag}[/]" if flag else energy_j


def _missed_flag(result: Plan, method: str) -> str:
    """' (over the 1.5 s deadline)' where the method's choice misses the objective's
    constraint, else nothing."""
    c = result.choices[method]
    missed = result.objective.missed_short(c.predicted_time_s, c.predicted_energy_j)
    return f" ({missed})" if missed else ""


def infeasible_to_json(cap: float | None, reason: str) -> dict:
    """`plan --json` with several caps: the entry of a cap nothing runs under."""
    return {"kind": PLAN_JSON_KIND, "schema_version": PLAN_JSON_SCHEMA_VERSION,
            "method": "wattcap", "power_cap_w": cap, "infeasible": reason}


def fail_if_none_feasible(plans: dict[float | None, Plan | str]) -> None:
    """A clear exit (2) when nothing runs under any of the caps, saying why per cap: the
    table and the JSON agree on it (with one cap feasible both exit 0 and mark the others)."""
    if all(isinstance(result, str) for result in plans.values()):
        fail("no configuration fits under any of the caps: "
             + "; ".join(f"{_cap_text(cap)}: {why}" for cap, why in plans.items()))


def _cap_text(cap: float | None) -> str:
    return "none" if cap is None else f"{cap:g} W"


def print_plans(plans: dict[float | None, Plan | str], power_mode: str | None = None,
                mode_names: dict[int, str] | None = None) -> None:
    """Several caps in one table: a row per cap with wattcap's choice and its predicted
    speed-up over each other method; then each cap's notes (`print_plan` says what
    `power_mode` and `mode_names` are)."""
    from wattcap.core.plan import METHODS, format_known

    first = next((r for r in plans.values() if not isinstance(r, str)), None)
    if first is None:
        fail_if_none_feasible(plans)
        return
    others = [m for m in METHODS if m != "wattcap"]
    objective = "" if first.objective.is_paper_time else \
        f", objective {first.objective.describe()}"
    table = Table(title=f"{_in_mode(first, power_mode)}: wattcap's choice per cap{objective}")
    for column in ("cap", "batch", knob_unit(first.knob_kind).column, "peak W", "avg W", "r_b",
                   "pred. time (s)", "pred. energy (J)", *(f"speed-up vs {m}" for m in others)):
        table.add_column(column, justify="right")
    for cap, result in plans.items():
        c = None if isinstance(result, str) else result.choices.get("wattcap")
        if isinstance(result, str) or c is None:
            table.add_row(_cap_text(cap), "—", "—", "—", "—", "—", "—", "—",
                          *("—" for _ in others))
            continue
        table.add_row(_cap_text(cap), str(c.batch_size),
                      knob_number(result.knob_kind, c.knob_value, mode_names),
                      f"{c.peak_power_w:.2f}",
                      f"{c.avg_power_w:.2f}", format_known(c.efficiency_ratio, ".2f"),
                      format_known(c.predicted_time_s, "sig"),
                      format_known(c.predicted_energy_j, "sig"),
                      *(format_known(result.speedup(m), ".2f", suffix="x")
                        + _missed_flag(result, m) if m in result.choices else "n/a"
                        for m in others))
    console.print(table)
    notes = {cap: [result] if isinstance(result, str) else [
        *(f"{m} not available: {why}" for m, why in result.unavailable.items()),
        *result.notes] for cap, result in plans.items()}
    # a note every cap has is said once, the others with their cap
    shared = [n for n in next(iter(notes.values())) if all(n in ns for ns in notes.values())]
    for note in shared:
        console.print(f"  [dim]note: {escape(note)}[/]", highlight=False)
    for cap, cap_notes in notes.items():
        for note in cap_notes:
            if note not in shared:
                console.print(f"  [dim]{_cap_text(cap)}: {escape(note)}[/]", highlight=False)


def print_pareto_front(result: Plan, mode_names: dict[int, str] | None = None) -> None:
    """The time/energy Pareto front of the feasible choices, each method's point marked (a
    power mode knob named by `mode_names`)."""
    from wattcap.core.plan import format_known, three_significant
    basis = "proxy r_b" if result.efficiency_source else "r_b = 1: no efficiency vector"
    table = Table(title=f"Time/energy Pareto front of the feasible choices (predicted, {basis})")
    for column in ("batch", knob_unit(result.knob_kind).column, "pred. time (s)",
                   "pred. energy (J)", "peak W", "avg W", "methods here"):
        table.add_column(column, justify="left" if column == "methods here" else "right")
    at: dict[tuple[int, int], list[str]] = {}
    for name, choice in result.choices.items():
        at.setdefault((choice.batch_size, choice.knob_value), []).append(name)
    for point in result.pareto_front:
        here = at.get((point.batch_size, point.knob_value), [])
        table.add_row(str(point.batch_size),
                      knob_number(result.knob_kind, point.knob_value, mode_names),
                      three_significant(point.predicted_time_s),
                      three_significant(point.predicted_energy_j),
                      f"{point.peak_power_w:.2f}", f"{point.avg_power_w:.2f}", ", ".join(here))
    console.print(table)
    off = [name for name, c in result.choices.items()
           if not c.on_pareto_front and c.predicted_time_s is not None]
    for name in off:
        c = result.choices[name]
        knob = format_knob(result.knob_kind, c.knob_value, mode_names)
        console.print(f"  [dim]{name} (b={c.batch_size}, {knob}: "
                      f"{format_known(c.predicted_time_s, 'sig')} s, "
                      f"{format_known(c.predicted_energy_j, 'sig')} J) is off the front: "
                      f"{_dominating(result, c, mode_names)}"
                      + _why_off(name) + "[/]", highlight=False)


def _why_off(name: str) -> str:
    """Why a method's choice may be off the front: the oracle ranks on the target's r_b;
    wattcap's time choice is off it only among equally fast points, where it keeps clear of
    the knee (`HOST_BOUND_HEADROOM`)."""
    if name == "fastest":
        return " (the oracle's point uses the target's r_b)"
    if name == "wattcap":
        from wattcap.core.defaults import HOST_BOUND_HEADROOM

        return (f" (of equally fast points wattcap keeps {HOST_BOUND_HEADROOM:.0%} clear of the "
                "knee, the lowest of them: a host faster on the day makes the GPU the "
                "bottleneck there)")
    return ""


def _dominating(result: Plan, choice: Choice, mode_names: dict[int, str] | None = None) -> str:
    """Which front point is at least as fast as `choice` and thriftier, and by how much (so
    that a saving within the power readings' noise reads as what it is)."""
    time_s, energy_j = choice.predicted_time_s, choice.predicted_energy_j
    better = [p for p in result.pareto_front if time_s is not None and energy_j
              and p.predicted_time_s <= time_s * (1 + 1e-9) and p.predicted_energy_j < energy_j]
    if not better or energy_j is None:
        return "another choice is at least as fast and thriftier"
    best = min(better, key=lambda p: p.predicted_energy_j)
    saving = 1 - best.predicted_energy_j / energy_j
    at = format_knob(result.knob_kind, best.knob_value, mode_names)
    return (f"b={best.batch_size} at {at} is at least as "
            f"fast and {saving:.1%} thriftier (predicted)")


def plan_command(
    power_cap: Annotated[str, typer.Option(
        help="Power cap in watts (4.5, 4.5W, 0.25kW), or 'none'; several, comma-separated "
        "(4,5,none), plan each in one table (with --json: a list, an unplannable cap as "
        "an entry with 'infeasible').", rich_help_panel=CAP_AND_DEVICE)],
    profile: ProfileOpt = None,
    efficiency: EfficiencyOpt = None,
    target_efficiency: TargetEfficiencyOpt = None,
    reference_profiles: Annotated[Path | None, typer.Option(
        help="Folder of reference-model profiles for the baselines' safe frequency.",
        rich_help_panel=PLAN_INPUTS)] = None,
    objective: ObjectiveOpt = "time",
    eta: EtaOpt = None,
    max_energy: MaxEnergyOpt = None,
    deadline: DeadlineOpt = None,
    cost_max_power: CostMaxPowerOpt = None,
    plot: Annotated[Path | None, typer.Option(
        help="Write the Pareto front with each method's point as a PNG.",
        rich_help_panel=OUTPUT)] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the plan as JSON instead of tables.",
        rich_help_panel=OUTPUT)] = False,
    out: Annotated[Path | None, typer.Option(
        help="Also write the whole plan (JSON): every method's choice, the front, the notes.",
        rich_help_panel=OUTPUT)] = None,
    margin_sigmas: MarginOpt = DEFAULT_MARGIN_SIGMAS,
    cap_on: CapOnOpt = None,
    extrapolate: Annotated[bool, typer.Option(
        "--extrapolate/--no-extrapolate", help="Choose also among batch sizes outside those the "
        "efficiency vector ran, their r_b extrapolated from its large-batch relation with an "
        "uncertainty that widens with the distance (flagged in the notes); --no-extrapolate "
        "keeps to the batch sizes it ran.", rich_help_panel=PLAN_INPUTS)] = True,
    risk: RiskOpt = None,
    transfer_factor: TransferFactorOpt = None,
    server: ServerUrlOpt = None,
    device_name: PlanDeviceNameOpt = None,
    model: Annotated[str | None, typer.Option(
        help="With --server: the model to plan for (default: the local profile's).",
        rich_help_panel=SERVER)] = None,
    power_mode: PlanPowerModeOpt = None,
    proxy: ProxyFilterOpt = None,
    target_accuracy: TargetFilterOpt = None,
    token: TokenOpt = None,
) -> None:
    """Choose (batch size, knob value: GPU clock, power limit or power mode) for each
    method under a power cap.

    From local files (--profile, --efficiency), or from a wattcap server: `wattcap plan
    --server URL --device-name jetson-nano --model resnet18 --power-cap 5` fetches the newest
    profile of that device for the model and the model's newest efficiency vector.
    """
    caps = parse_caps(power_cap)  # every argument checked before a server is asked
    if len(caps) > 1 and (out or plot):
        fail("--out and --plot take one --power-cap (a plan file and a plot are of one cap)")
    goal = parse_objective(objective, eta, max_energy, deadline, cost_max_power)
    if server:
        from wattcap.cli.server import fetch_plan_inputs

        profile, efficiency, _ = fetch_plan_inputs(
            server, token, profile=profile, efficiency=efficiency, device_name=device_name,
            model=model, power_mode=power_mode, proxy=proxy, target_accuracy=target_accuracy)
    elif profile is None:
        fail("--profile is required: the device's measured table of power and time",
             hint="measure it on the device with `wattcap profile --device DEVICE --model "
                  "MODEL --out profile.json`, or fetch one with --server URL, --device-name "
                  "and --model")
    if len(caps) > 1:
        plans = make_plans(profile, efficiency, caps, reference_profiles, target_efficiency,
                           objective=goal, margin_sigmas=margin_sigmas,
                           cap_on=(cap_on or CapOn.PEAK).value, extrapolate=extrapolate,
                           risk=risk, transfer_factor=transfer_factor)
        fail_if_none_feasible(plans)
        mode, names = profile_power_mode(profile)
        if as_json:
            print(json.dumps([plan_to_json(r, mode) if not isinstance(r, str)
                              else infeasible_to_json(cap, r) for cap, r in plans.items()],
                             indent=2))
        else:
            print_plans(plans, mode, names)
        return
    result = make_plan(profile, efficiency, caps[0], reference_profiles,
                       target_efficiency, objective=goal, margin_sigmas=margin_sigmas,
                       cap_on=(cap_on or CapOn.PEAK).value, extrapolate=extrapolate,
                       risk=risk, transfer_factor=transfer_factor)
    mode, names = profile_power_mode(profile)
    if out:
        result.save(out)
    if plot:
        from wattcap.experiments.pareto import plot_pareto

        plot_pareto(result, plot, names)
    if as_json:
        print(json.dumps(plan_to_json(result, mode), indent=2))
    else:
        print_plan(result, power_mode=mode, mode_names=names)
        print_pareto_front(result, names)
        if plot:
            console.print(f"wrote {plot}")
