"""A fleet file checked and planned (the federation that runs the plans is
`wattcap.experiments.federation`).

`check_fleet` refuses what cannot work, one line per problem naming the client (an unknown
device, a cap that is not a positive number of watts, a shard with no samples, a missing file,
two clients of one name). `plan_fleet_file` builds each client's options from its profile (a
measured one, or the emulated device profiled on first use and cached beside the fleet file)
under its cap with the planner's margin, its single-device plans (baseline-1: the largest batch
at the safe knob value; wattcap: its own choice), its communication time per round from the
model's size and its link, and returns the uniform, own and fleet plans
(`wattcap.algorithms.fleet`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from wattcap.algorithms.efficiency import ratios_for_batch_sizes
from wattcap.algorithms.fleet import FleetClient, FleetPlan, SplitPolicy, plan_fleet
from wattcap.algorithms.planner import plan, with_power_margin
from wattcap.core.defaults import DEFAULT_MARGIN_SIGMAS
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.errors import WattcapError
from wattcap.core.fleet import FleetClientSpec, FleetFile
from wattcap.core.knob import KnobKind
from wattcap.core.plan import InfeasibleCapError
from wattcap.core.profile import ProfilePoint, ProfileTable
from wattcap.core.schema import WattcapFileError
from wattcap.devices.caps import CapSource

#: bytes per parameter sent each way every round (float32 weights and updates)
BYTES_PER_PARAMETER = 4


class FleetError(WattcapError, ValueError):
    """A fleet that cannot be planned or run, in one line naming the client."""


def _device_problem(client: FleetClientSpec, folder: Path) -> str | None:
    from wattcap.devices.spec import list_specs

    device = client.device
    if device.startswith("emulated:"):
        # emulated:SPEC, or emulated:SPEC:unkind[=SEED] (a board drawn for the client)
        spec, _, board = device.partition(":")[2].partition(":")
        if not (spec in list_specs() or (folder / spec).is_file()):
            return (f"unknown emulated device {spec!r} (known: {', '.join(list_specs())}, or "
                    "a spec file)")
        if board == "unkind":
            # a fleet's boards are drawn once each: without a seed every such client would
            # be the same board
            return (f"{device}: give each client its own board, emulated:{spec}:unkind=SEED "
                    "(a seed per client)")
        if board not in ("", "kind") and re.fullmatch(r"unkind=\d+", board) is None:
            return (f"unknown board {board!r} of {device}: emulated:{spec} (the kind board) or "
                    f"emulated:{spec}:unkind=SEED")
        return None
    if device.startswith("trace:"):
        found = (folder / device.partition(":")[2]).is_file()
        return None if found else f"trace manifest {device.partition(':')[2]} not found"
    if device in ("jetson",) or device.startswith("nvml"):
        return None if client.profile else (f"device {device!r} needs its measured profile "
                                            "(profile: FILE): it is not profiled from here")
    return (f"unknown device {device!r}: expected emulated:SPEC, trace:MANIFEST, jetson or "
            "nvml:N (with a profile)")


def _shard_size(client: FleetClientSpec) -> tuple[int, str]:
    """The samples of the client's shard, and the labels its dataset has (for a message);
    KeyError for an unknown dataset."""
    from wattcap.data import load_dataset

    data = load_dataset(client.data.dataset)
    labels = np.asarray(data.y)
    held = labels.size if client.data.labels is None else int(
        np.isin(labels, client.data.labels).sum())
    present = [int(v) for v in np.unique(labels)]
    names = getattr(data, "classes", None)
    known = ", ".join(f"{v} ({names[v]})" if names and v < len(names) else str(v)
                      for v in present)
    return int(held * client.data.fraction), known


def cap_source_of(client: FleetClientSpec, folder: Path) -> CapSource:
    """The client's cap as a source read at each round's start (a number: constant); a
    schedule's file is read relative to the fleet file."""
    from wattcap.devices.caps import ConstantCap, parse_cap_source

    cap = client.power_cap
    if cap is None or isinstance(cap, (int, float)):
        return ConstantCap(cap)
    kind, sep, rest = cap.partition(":")
    if sep and kind.strip().lower() == "schedule" and not Path(rest).is_absolute():
        cap = f"{kind}:{folder / rest}"
    return parse_cap_source(cap)


def _cap_problem(client: FleetClientSpec, folder: Path) -> str | None:
    from wattcap.devices.caps import ConstantCap

    if isinstance(client.power_cap, (int, float)):
        if client.power_cap > 0:
            return None
        return ("power cap must be a positive number of watts, a cap source or null (no "
                f"cap), got {client.power_cap:g}")
    try:
        source = cap_source_of(client, folder)
    except WattcapError as err:
        return str(err)
    if isinstance(source, ConstantCap) and client.power_cap is not None:
        watts = source.cap_w(0.0)
        if watts is not None and not watts > 0:
            return f"power cap must be a positive number of watts, got {watts:g}"
    return None


def check_fleet(fleet: FleetFile, folder: Path) -> None:
    """Refuse a fleet that cannot be planned (FleetError, the first problem in one line)."""
    names = [c.name for c in fleet.clients]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise FleetError(f"fleet: client names must differ; twice: {', '.join(twice)}")
    if not (folder / fleet.efficiency).is_file():
        raise FleetError(f"fleet: efficiency file {fleet.efficiency} not found (next to the "
                         "fleet file; `wattcap estimate` writes one)")
    datasets = sorted({c.data.dataset for c in fleet.clients})
    if len(datasets) > 1:
        raise FleetError(f"fleet: every client's data must come from one dataset (the global "
                         f"model is read on its test split); found {', '.join(datasets)}")
    for client in fleet.clients:
        problem = _device_problem(client, folder) or _cap_problem(client, folder)
        if problem is None and client.profile and not (folder / client.profile).is_file():
            problem = f"profile {client.profile} not found"
        if problem is None:
            try:
                size, known = _shard_size(client)
            except (KeyError, WattcapError) as err:
                problem = str(err).strip("'\"")
            else:
                if size < 1:
                    labels = client.data.labels
                    problem = (f"empty data shard: {client.data.dataset}"
                               + (f" has no samples with labels {labels} (its labels, by "
                                  f"index (class): {known})" if labels else "")
                               + (f" at fraction {client.data.fraction:g}"
                                  if labels is None else ""))
        if problem is not None:
            raise FleetError(f"client {client.name}: {problem}")


def _profile(client: FleetClientSpec, model: str, folder: Path) -> ProfileTable:
    """The client's measured profile, or its emulated device profiled once and kept beside
    the fleet file (`fleet-profiles/`)."""
    if client.profile:
        return ProfileTable.load(folder / client.profile)
    if client.device.startswith("trace:"):  # a measured device: its table, nothing profiled
        from wattcap.experiments.trace import load_trace

        return load_trace(folder / client.device.partition(":")[2]).profile
    from wattcap.devices import get_device
    from wattcap.measure.profiling import Profiler

    device = get_device(client.device)
    # a board drawn for the client is profiled on itself, as each real board of a fleet is
    drawn = getattr(device, "board", None)
    board = "" if drawn is None or drawn.kind else f"-unkind{drawn.seed}"
    cache = folder / "fleet-profiles" / f"{device.name}{board}-{model.replace('/', '_')}.json"
    if cache.is_file():
        try:
            return ProfileTable.load(cache)
        except WattcapFileError:
            pass  # half-written: profile again
    table = Profiler(device, model).run(exhaustive=True)
    table.save(cache)
    return table


def _payload_bytes(model: str) -> int:
    from wattcap.models import get_model_spec

    net = get_model_spec(model).build()
    return BYTES_PER_PARAMETER * sum(p.numel() for p in net.parameters())


@dataclass
class FleetPlans:
    """A fleet file's plans, with what they were made from."""

    fleet: FleetFile
    plans: dict[str, FleetPlan]
    #: per client: its cap and its communication seconds per round
    caps_w: dict[str, float | None]
    comm_s: dict[str, float]
    #: per client: the knob its profile varies (`wattcap.core.knob`)
    knob_kinds: dict[str, KnobKind]
    #: per client: joules its link spends per round (the model down, the update up)
    link_j: dict[str, float]
    #: clients with nothing feasible under their cap now, and why (they sit the round out)
    sitting_out: dict[str, str] = field(default_factory=dict)

    def link_energy_j(self, method: str) -> float:
        """The links' energy to target of a method's plan (clients left out send nothing)."""
        found = self.plans[method]
        return found.rounds * sum(self.link_j[c.name] for c in found.clients)


@dataclass
class FleetSetup:
    """A checked fleet with what planning and running it need: each client's profile and
    cap source, the proxy's r_b, the model's size on the links."""

    path: Path
    fleet: FleetFile
    efficiency: EfficiencyVector
    profiles: dict[str, ProfileTable]
    cap_sources: dict[str, CapSource]
    payload_bytes: int

    def client(self, name: str) -> FleetClientSpec:
        """The fleet file's entry of the client `name`."""
        return next(c for c in self.fleet.clients if c.name == name)

    @property
    def folder(self) -> Path:
        """The fleet file's folder (its relative paths start here)."""
        return self.path.parent

    def caps_at(self, now_s: float) -> dict[str, float | None]:
        """Every client's cap at the fleet's elapsed time `now_s`."""
        return {name: source.cap_w(now_s) for name, source in self.cap_sources.items()}


def load_fleet(path: str | Path) -> FleetSetup:
    """Check a fleet file and gather what it needs (profiling emulated clients on first use);
    FleetError or WattcapFileError in one line for what cannot work."""
    path = Path(path)
    fleet = FleetFile.load(path)
    folder = path.parent
    check_fleet(fleet, folder)
    efficiency = EfficiencyVector.load(folder / fleet.efficiency)
    profiles = {}
    for spec in fleet.clients:
        table = _profile(spec, fleet.model, folder)
        table.check_matches(model=fleet.model, source=f"client {spec.name}'s profile")
        profiles[spec.name] = table
    return FleetSetup(path, fleet, efficiency, profiles,
                      {spec.name: cap_source_of(spec, folder) for spec in fleet.clients},
                      _payload_bytes(fleet.model))


def _client(spec: FleetClientSpec, table: ProfileTable, efficiency: EfficiencyVector,
            cap_w: float | None, comm_s: float) -> FleetClient:
    """The client as the planner sees it under `cap_w`; InfeasibleCapError where nothing
    fits."""
    single = plan(table, cap_w, efficiency=efficiency)
    margined = with_power_margin(table, DEFAULT_MARGIN_SIGMAS)
    options = tuple(p for p in margined.points if cap_w is None or p.peak_power_w <= cap_w)
    measured = {(p.batch_size, p.knob_value): p for p in table.points}

    def point_of(method: str) -> ProfilePoint:
        choice = single.choices.get(method) or single.choices["wattcap"]
        return measured[(choice.batch_size, choice.knob_value)]

    # the options carry the measured points (the cap was checked on the margined peaks)
    feasible = tuple(measured[(p.batch_size, p.knob_value)] for p in options)
    return FleetClient(spec.name, feasible, comm_s, point_of("baseline-1"), point_of("wattcap"))


def plan_at_caps(setup: FleetSetup, caps_w: dict[str, float | None],
                 strict: bool = True) -> FleetPlans:
    """The uniform, own and fleet plans under these caps. A client with nothing feasible is a
    FleetError with `strict` (planning a file), else it sits out, with the reason (a round
    of a running federation)."""
    fleet, efficiency = setup.fleet, setup.efficiency
    clients: list[FleetClient] = []
    comm: dict[str, float] = {}
    sitting_out: dict[str, str] = {}
    for spec in fleet.clients:
        comm[spec.name] = spec.link.round_trip_s(setup.payload_bytes)
        try:
            clients.append(_client(spec, setup.profiles[spec.name], efficiency,
                                   caps_w[spec.name], comm[spec.name]))
        except InfeasibleCapError as err:
            if strict:
                raise FleetError(f"client {spec.name}: {err}") from None
            sitting_out[spec.name] = str(err)
    if not clients:
        raise FleetError("no client can train under its cap now: "
                         + "; ".join(f"{n}: {why}" for n, why in sitting_out.items()))
    sizes = sorted({p.batch_size for c in clients for p in c.options})
    ratios, _, _ = ratios_for_batch_sizes(efficiency, sizes)
    known = {b: r for b, r in ratios.items() if r is not None}
    reference = efficiency.samples(efficiency.reference_batch_size)
    if reference is None:
        raise FleetError(f"{fleet.efficiency}: no samples to target at its reference batch size")
    try:
        policy = SplitPolicy(by_speed=fleet.split == "by-speed",
                             may_leave_out=fleet.clients_may_sit_out)
        plans = plan_fleet(clients, known, fleet.samples_per_round, reference, policy)
    except ValueError as err:
        raise FleetError(str(err)) from None
    return FleetPlans(fleet, plans, dict(caps_w), comm,
                      {n: t.knob_kind for n, t in setup.profiles.items()},
                      {spec.name: spec.link.round_trip_j(setup.payload_bytes)
                       for spec in fleet.clients}, sitting_out)


def plan_fleet_file(path: str | Path) -> FleetPlans:
    """Check a fleet file and plan it (uniform, own, fleet) under its caps at the start;
    FleetError or WattcapFileError in one line for what cannot be planned."""
    setup = load_fleet(path)
    return plan_at_caps(setup, setup.caps_at(0.0))


__all__ = ["FleetError", "FleetPlans", "FleetSetup", "cap_source_of", "check_fleet",
           "load_fleet", "plan_at_caps", "plan_fleet_file"]
