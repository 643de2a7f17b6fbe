"""The federation of a fleet, whatever carries its messages.

Every round the server reads each client's cap (its cap source at the fleet's elapsed time),
re-plans the method's configuration under those caps (`plan_at_caps`: a client with nothing
feasible sits the round out and says why), sends each participating client a `ClientTask`
with the global weights, and averages the updates that came back within the round's deadline
(the planned round time x (1 + slack)), weighted by samples: a straggler (its emulated
training plus link time past the deadline) and a client that dropped out are left out of the
average. The round lasts until its last counted update, or until the deadline when one is
missing. The global model is evaluated on the dataset's test split after every round; the run
stops at the target accuracy or after `max_rounds`.

`train_locally` is the client's side: its shard of the data, its emulated device under a
wattcap Session at the planned batch size and knob value with the round's cap watched, Adam at
the square-root-scaled learning rate, `samples` samples. Flower's apps
(`wattcap.integrations.flower`) call both sides; `LocalTransport` calls the client in this
process (tests of the round logic). Time is the emulated devices' (their clocks), not wall
time. Idle power while a client waits for the round's end is not counted (its waiting time
is).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel

from wattcap.algorithms.fedzero import DEFAULT_FRACTION, select_clients
from wattcap.algorithms.fleet import ClientPlan, FleetPlan
from wattcap.core.defaults import DEFAULT_BATCH_SIZE_REF, DEFAULT_LR_REF
from wattcap.core.errors import WattcapError
from wattcap.core.knob import KnobKind
from wattcap.core.profile import ProfilePoint, ProfileTable
from wattcap.core.run import scaled_learning_rate
from wattcap.core.schema import VersionedFile
from wattcap.devices.caps import CapSource
from wattcap.experiments.fleet import FleetError, FleetSetup, load_fleet, plan_at_caps

#: the methods a federation runs (`wattcap fleet simulate --method`): equal shares at fixed
#: settings, each client's own plan, FedZero-style selection, and the joint fleet plan
FEDERATION_METHODS = ("uniform", "own", "fedzero", "fleet")
#: test-split share of the fleet's dataset (the global model's accuracy is read on it)
TEST_FRACTION = 0.2

Weights = list[np.ndarray]
ClientStatus = Literal["aggregated", "straggler", "dropped", "sat out"]


@dataclass(frozen=True)
class ClientTask:
    """What one client trains in one round (a Flower ConfigRecord's content)."""

    fleet: str
    client: str
    round: int
    batch_size: int
    knob_value: int
    samples: int
    cap_w: float
    seed: int
    #: the round's start on the fleet's clock (a moving cap is read from there on)
    start_s: float = 0.0

    def to_config(self) -> dict[str, Any]:
        """The task as flat values (a cap of 0.0 stands for no cap)."""
        return {"fleet": self.fleet, "client": self.client, "round": self.round,
                "batch_size": self.batch_size, "knob_value": self.knob_value,
                "samples": self.samples, "cap_w": self.cap_w, "seed": self.seed,
                "start_s": self.start_s}

    @classmethod
    def from_config(cls, config: dict[str, object]) -> ClientTask:
        """The task back from `to_config`'s values."""
        return cls(str(config["fleet"]), str(config["client"]), int(str(config["round"])),
                   int(str(config["batch_size"])), int(str(config["knob_value"])),
                   int(str(config["samples"])), float(str(config["cap_w"])),
                   int(str(config["seed"])), float(str(config.get("start_s", 0.0))))


class LocalReport(BaseModel):
    """What a client reports of its round (emulated device time and energy)."""

    client: str
    round: int
    samples: int
    compute_s: float
    energy_j: float
    peak_power_w: float | None
    cap_w: float | None
    cap_violations: int
    dropped: bool = False


class ClientRound(BaseModel):
    """One client in one round, as the server counted it."""

    name: str
    status: ClientStatus
    cap_w: float | None
    batch_size: int | None = None
    knob_kind: KnobKind = "gpu_clock"
    knob_value: int | None = None
    samples: int = 0
    compute_s: float = 0.0
    comm_s: float = 0.0
    #: still busy with its previous round's late update this long after the round's start
    busy_s: float = 0.0
    waiting_s: float = 0.0
    energy_j: float = 0.0
    link_j: float = 0.0
    peak_power_w: float | None = None
    cap_violations: int = 0
    note: str | None = None


class RoundRecord(BaseModel):
    """One round: when it started (fleet time), how long it lasted, the global accuracy."""

    round: int
    start_s: float
    round_s: float
    deadline_s: float
    accuracy: float
    clients: list[ClientRound]


class FleetRun(VersionedFile):
    """A federation's record: every round of every client, what the fleet report reads."""

    FILE_KIND = "wattcap.fleet-run"
    SCHEMA_VERSION = 1

    fleet: str
    model: str
    method: str
    seed: int
    engine: str
    target_accuracy: float
    reached: bool
    rounds: list[RoundRecord]

    @property
    def time_s(self) -> float:
        """Fleet time to the target (or to the last round where it was not reached)."""
        return sum(r.round_s for r in self.rounds)

    @property
    def energy_j(self) -> float:
        """Training and link energy of every client over the run."""
        return sum(c.energy_j + c.link_j for r in self.rounds for c in r.clients)

    def energy_by_client_j(self) -> dict[str, float]:
        """Each client's training and link energy over the run."""
        out: dict[str, float] = {}
        for r in self.rounds:
            for c in r.clients:
                out[c.name] = out.get(c.name, 0.0) + c.energy_j + c.link_j
        return out


#: sends every (task, global weights) to its client and returns each client's reply:
#: (its weights, its report), or None for a client whose reply never came
Transport = Callable[[list[tuple[ClientTask, Weights]]],
                     dict[str, tuple[Weights | None, LocalReport] | None]]


class FederationError(WattcapError, RuntimeError):
    """A federation that cannot go on (no client can train, the engine failed)."""


# -- the client's side ---------------------------------------------------------------------------
@lru_cache(maxsize=4)
def _setup_as_of(fleet_path: str, modified_ns: int) -> FleetSetup:
    del modified_ns  # only the cache's key: another version of the file loads again
    return load_fleet(fleet_path)


def _setup(fleet_path: str) -> FleetSetup:
    """The checked fleet, loaded once per version of its file (a client process serves many
    rounds; an edited file is read again)."""
    return _setup_as_of(fleet_path, Path(fleet_path).stat().st_mtime_ns)


@lru_cache(maxsize=4)
def _split(dataset: str, model: str):  # noqa: ANN202 - (train, test) datasets
    """The dataset's one (train, test) split, the same for every client (a client's shard
    never holds a sample of the test split the global model is read on): a bundled task or a
    data spec (FORMAT:PATH), converted to the model's input shape."""
    from wattcap.data import load_splits
    from wattcap.models import get_model_spec

    return load_splits(dataset, seed=0, test_fraction=TEST_FRACTION,
                       input_shape=get_model_spec(model).input_shape)


def client_shard(setup: FleetSetup, name: str):  # noqa: ANN201 - a dataset
    """The client's training shard: its labels' samples of the train split, its fraction
    (drawn with the shard's seed)."""
    spec = setup.client(name)
    train, _ = _split(spec.data.dataset, setup.fleet.model)
    if spec.data.labels is not None:
        train = train.subset(np.isin(train.y, spec.data.labels))
    return train.take(max(1, int(len(train) * spec.data.fraction)), seed=spec.data.seed)


def _dropout_point(setup: FleetSetup, task: ClientTask) -> float | None:
    """The share of its samples after which the client drops out this round (None: it does
    not), drawn from (seed, client, round)."""
    spec = setup.client(task.client)
    draw = random.Random(f"{task.seed}/{task.client}/{task.round}")
    return draw.random() if draw.random() < spec.dropout else None


#: readings of a cap source over a window (a round): FedZero's forecast of the energy
#: available, a measured device's check against a falling cap
CAP_READINGS = 20


def _caps_over(source: CapSource, start_s: float, span_s: float) -> list[float | None]:
    """The source's cap at CAP_READINGS + 1 evenly spaced times of [start, start + span]."""
    return [source.cap_w(start_s + span_s * k / CAP_READINGS) for k in range(CAP_READINGS + 1)]


def _round_cap(setup: FleetSetup, task: ClientTask) -> CapSource | float | None:
    """The client's cap during its round: a constant, or its source read on the fleet's clock
    from the round's start (the device's clock starts at 0 each round), which the Session
    follows with the round's batch size (its clock lowered, training paused below anything
    feasible)."""
    from wattcap.devices.caps import CallableCap, ConstantCap

    source = setup.cap_sources[task.client]
    if isinstance(source, ConstantCap):
        return task.cap_w or None
    return CallableCap(lambda now_s: source.cap_w(task.start_s + now_s), source.describe())


def _trace_point(setup: FleetSetup, task: ClientTask) -> ProfilePoint:
    point = setup.profiles[task.client].lookup(task.batch_size, task.knob_value)
    if point is None:
        raise FederationError(f"client {task.client}: its trace has no point b="
                              f"{task.batch_size} at {task.knob_value} (a trace is not "
                              "extrapolated)")
    return point


def _replayed(setup: FleetSetup, task: ClientTask, done: int, goal: int) -> LocalReport:
    """A `trace:` client that trained `done` samples here for real: its device's time, energy
    and peak power are the measured table's at the task's point (nothing to watch: the
    table's peak was planned under the round's cap, and a cap that falls below it during the
    round is counted as a violation)."""
    point = _trace_point(setup, task)
    compute_s = done * point.seconds_per_sample
    caps = [w for w in _caps_over(setup.cap_sources[task.client], task.start_s, compute_s)
            if w is not None]
    lowest = min(caps, default=None)
    return LocalReport(client=task.client, round=task.round, samples=done, compute_s=compute_s,
                       energy_j=compute_s * point.avg_power_w, peak_power_w=point.peak_power_w,
                       cap_w=task.cap_w or None,
                       cap_violations=int(lowest is not None and point.peak_power_w > lowest),
                       dropped=goal < task.samples)


def _local_steps(net: Any, optimizer: Any, loss: Callable[..., Any], data: Any,
                 task: ClientTask, goal: int, session: Any = None) -> int:
    """Train `goal` samples (whole batches of the task's size, drawn from the shard with the
    round's seed), through the Session's steps where there is one; the samples trained (fewer
    where the Session stopped for its cap)."""
    import torch

    rng = np.random.default_rng(random.Random(f"{task.seed}/{task.client}/{task.round}/data")
                                .getrandbits(64))
    done = 0
    while done < goal and not (session is not None and session.cap_stopped):
        x, y = data.batch(rng.integers(0, len(data), task.batch_size))
        inputs, targets = torch.from_numpy(x), torch.from_numpy(y)
        if session is not None:
            inputs, targets = session.to_device(inputs, targets)
        with session.step() if session is not None else nullcontext():
            optimizer.zero_grad(set_to_none=True)
            loss(net(inputs), targets).backward()
            optimizer.step()
        done += task.batch_size
    return done


def _goal(setup: FleetSetup, task: ClientTask) -> int:
    """The samples the client trains this round: all of its task, or, where it drops out, the
    share after which it does."""
    stop = _dropout_point(setup, task)
    return task.samples if stop is None else int(task.samples * stop)


def train_locally(task: ClientTask, weights: Weights) -> tuple[Weights | None, LocalReport]:
    """Train the client's shard for the task on its device (see the module docstring); a
    client that drops out returns no weights, with the energy it spent."""
    import torch

    from wattcap.devices import get_device
    from wattcap.models import build_model, get_model_spec
    from wattcap.runtime.session import Session
    from wattcap.runtime.session_config import CapSettings, DeviceHandling, PlanSettings

    setup = _setup(task.fleet)
    spec = setup.client(task.client)
    profile = setup.profiles[task.client]
    data = client_shard(setup, task.client)
    net = build_model(setup.fleet.model, data.num_classes)
    net.load_state_dict({k: torch.from_numpy(np.array(w)) for k, w in
                         zip(net.state_dict(), weights, strict=True)})
    loss = get_model_spec(setup.fleet.model).loss
    goal = _goal(setup, task)
    if spec.device.startswith("trace:"):
        _trace_point(setup, task)  # a point the trace lacks is refused before training
        optimizer = torch.optim.Adam(net.parameters(), lr=scaled_learning_rate(
            DEFAULT_LR_REF, DEFAULT_BATCH_SIZE_REF, task.batch_size))
        report = _replayed(setup, task, _local_steps(net, optimizer, loss, data, task, goal), goal)
    else:
        clock = profile.knob_kind == "gpu_clock"
        session = Session(get_device(spec.device), model=setup.fleet.model,
                          planning=PlanSettings(
                              profile=profile, batch_size=task.batch_size,
                              frequency_hz=task.knob_value if clock else None,
                              knob_value=None if clock else task.knob_value),
                          cap=CapSettings(power_cap=_round_cap(setup, task),
                                          policy="frequency", drift_tolerance=0),
                          device_handling=DeviceHandling(handle_signals=False))
        net = session.prepare(net)
        optimizer = torch.optim.Adam(net.parameters(), lr=session.learning_rate)
        with session:
            done = _local_steps(net, optimizer, loss, data, task, goal, session)
        report = _measured(session, profile, task, done, goal)
    if report.dropped:
        return None, report
    return [t.detach().cpu().numpy() for t in net.state_dict().values()], report


def _measured(session: Any, profile: ProfileTable, task: ClientTask, done: int,
              goal: int) -> LocalReport:
    """What an emulated or real client's Session measured of its round."""
    record = session.record
    assert record is not None
    # energy = average power x step time (the sum of readings undercounts a round of a few
    # sensor periods; the two agree on real hardware within 2 %, bench/results); the profile's
    # average power where no reading fell inside the round
    point = profile.lookup(task.batch_size, task.knob_value)
    avg_w = record.avg_power_w or (point.avg_power_w if point is not None else 0.0)
    return LocalReport(client=task.client, round=task.round, samples=done,
                       compute_s=record.device_time_s, energy_j=avg_w * record.device_time_s,
                       peak_power_w=record.peak_power_w, cap_w=task.cap_w or None,
                       cap_violations=len(record.cap_violations), dropped=goal < task.samples)


def local_transport(tasks: list[tuple[ClientTask, Weights]],
                    ) -> dict[str, tuple[Weights | None, LocalReport] | None]:
    """Every client trained in this process, one after another."""
    return {task.client: train_locally(task, weights) for task, weights in tasks}


# -- the server's side ---------------------------------------------------------------------------
def initial_weights(setup: FleetSetup, seed: int) -> Weights:
    """The global model's first weights (seeded)."""
    import torch

    from wattcap.models import build_model

    _, test = _split(setup.fleet.clients[0].data.dataset, setup.fleet.model)
    torch.manual_seed(seed)
    net = build_model(setup.fleet.model, test.num_classes)
    return [t.detach().numpy().copy() for t in net.state_dict().values()]


def global_accuracy(setup: FleetSetup, weights: Weights) -> float:
    """The global model's accuracy on the test split of the fleet's (first client's) dataset."""
    import torch

    from wattcap.models import build_model, get_model_spec
    from wattcap.train.loop import evaluate_dataset

    _, test = _split(setup.fleet.clients[0].data.dataset, setup.fleet.model)
    net = build_model(setup.fleet.model, test.num_classes)
    net.load_state_dict({k: torch.from_numpy(np.array(w)) for k, w in
                         zip(net.state_dict(), weights, strict=True)})
    return evaluate_dataset(net, get_model_spec(setup.fleet.model), test, torch_device="cpu")


def average(updates: Sequence[tuple[Weights, int]]) -> Weights:
    """FedAvg: the updates' mean weighted by their samples (integer buffers rounded)."""
    total = sum(n for _, n in updates)
    out = []
    for tensors in zip(*(w for w, _ in updates), strict=True):
        mean = sum(t.astype(np.float64) * n for t, (_, n) in zip(tensors, updates,
                                                                  strict=True)) / total
        out.append(np.asarray(np.rint(mean) if np.issubdtype(tensors[0].dtype, np.integer)
                              else mean).astype(tensors[0].dtype))
    return out


@dataclass
class _History:
    """What a method remembers between rounds (FedZero's fairness: who took part how often)."""

    participated: dict[str, int]
    rounds: int = 0




def _forecast_j(setup: FleetSetup, name: str, start_s: float, horizon_s: float, seed: int,
                round_no: int) -> float:
    """The energy a client's cap allows over [start, start + horizon] (inf: no cap), with the
    fleet's relative forecast error drawn from (seed, client, round)."""
    caps = _caps_over(setup.cap_sources[name], start_s, horizon_s)
    if any(c is None for c in caps):
        return math.inf
    exact = sum(c for c in caps if c is not None) / len(caps) * horizon_s
    error = setup.fleet.forecast_error
    draw = random.Random(f"{seed}/{name}/{round_no}/forecast").gauss(0.0, 1.0)
    return exact * max(0.0, 1.0 + error * draw)


def _fedzero(setup: FleetSetup, uniform: FleetPlan, round_no: int, seed: int, start_s: float,
             history: _History) -> tuple[list[ClientPlan], float, dict[str, str]]:
    """FedZero-style (`wattcap.algorithms.fedzero`): the uniform plan's fixed settings, the
    clients chosen by forecast energy with fairness, the round's samples split among them."""
    total = setup.fleet.samples_per_round
    count = max(1, math.ceil(DEFAULT_FRACTION * len(uniform.clients)))
    scale = len(uniform.clients) / count  # each chosen client trains total / count samples
    energy = {c.name: _forecast_j(setup, c.name, start_s, uniform.round_s * scale, seed,
                                  round_no) for c in uniform.clients}
    needed = {c.name: c.energy_j * scale for c in uniform.clients}
    chosen = select_clients([c.name for c in uniform.clients], energy, needed,
                            history.participated, history.rounds)
    if not chosen:
        raise FederationError(f"round {round_no}: no client's forecast energy covers its share "
                              "of the round (FedZero-style selection)")
    scale = len(uniform.clients) / len(chosen)
    plans = [replace(c, samples=total / len(chosen), compute_s=c.compute_s * scale,
                     energy_j=c.energy_j * scale) for c in uniform.clients if c.name in chosen]
    waiting = {c.name: "not chosen this round (FedZero-style: forecast energy "
               f"{energy[c.name]:.1f} J, fairness)" for c in uniform.clients
               if c.name not in chosen}
    return plans, max(p.busy_s for p in plans), waiting


def _tasks(setup: FleetSetup, method: str, round_no: int, seed: int, start_s: float,
           caps_w: dict[str, float | None], history: _History,
           ) -> tuple[list[ClientTask], float, dict[str, str]]:
    """This round's tasks under these caps, the planned round time and who sits out (why)."""
    try:
        plans = plan_at_caps(setup, caps_w, strict=False)
    except FleetError as err:
        raise FederationError(f"round {round_no}: {err}") from None
    out = dict(plans.sitting_out)
    if method == "fedzero":
        clients, round_s, waiting = _fedzero(setup, plans.plans["uniform"], round_no, seed,
                                             start_s, history)
        out.update(waiting)
    else:
        chosen = plans.plans[method]
        clients, round_s = chosen.clients, chosen.round_s
        out.update({name: "its link alone outlasts the round" for name in chosen.left_out})
    tasks = [ClientTask(str(setup.path), c.name, round_no, c.batch_size, c.knob_value,
                        max(c.batch_size, int(round(c.samples))),
                        caps_w[c.name] or 0.0, seed, start_s)
             for c in clients]
    history.rounds += 1
    for task in tasks:
        history.participated[task.client] = history.participated.get(task.client, 0) + 1
    return tasks, round_s, out


def _counted(setup: FleetSetup, task: ClientTask, reply: tuple[Weights | None,
             LocalReport] | None, deadline_s: float, busy_s: float = 0.0) -> ClientRound:
    """How the server counts a client's reply: aggregated, a straggler (past the deadline) or
    dropped (no update; a dropout's energy and one way of its link are still spent). `busy_s`:
    how long the client was still busy with its previous round's late update (it starts this
    round's work after it)."""
    spec = setup.client(task.client)
    planned = ClientRound(name=task.client, status="dropped", cap_w=task.cap_w or None,
                          batch_size=task.batch_size, knob_value=task.knob_value,
                          knob_kind=setup.profiles[task.client].knob_kind,
                          comm_s=spec.link.round_trip_s(setup.payload_bytes), busy_s=busy_s,
                          note="no reply")
    if reply is None:
        return planned
    weights, report = reply
    link_j = spec.link.round_trip_j(setup.payload_bytes)
    done = planned.model_copy(update={
        "samples": report.samples, "compute_s": report.compute_s, "energy_j": report.energy_j,
        "peak_power_w": report.peak_power_w, "cap_violations": report.cap_violations,
        "link_j": link_j, "status": "aggregated", "note": None})
    if weights is None:
        return done.model_copy(update={"status": "dropped", "link_j": link_j / 2,
                                       "note": f"dropped out after {report.samples} samples"})
    arrival_s = busy_s + report.compute_s + done.comm_s
    if arrival_s > deadline_s:
        return done.model_copy(update={
            "status": "straggler",
            "note": f"update at {arrival_s:.2f} s, after the {deadline_s:.2f} s deadline"})
    return done


def run_federation(fleet_path: str | Path, method: str, transport: Transport,
                   seed: int = 0, engine: str = "local",
                   progress: Callable[[RoundRecord], None] | None = None) -> FleetRun:
    """Run the fleet's federation with `method`'s plans (module docstring)."""
    if method not in FEDERATION_METHODS:
        raise FederationError(f"unknown method {method!r}: one of "
                              f"{', '.join(FEDERATION_METHODS)}")
    setup = _setup(str(Path(fleet_path).resolve()))
    fleet = setup.fleet
    target = fleet.target_accuracy or setup.efficiency.target_accuracy
    weights = initial_weights(setup, seed)
    rounds: list[RoundRecord] = []
    now_s = 0.0
    reached = False
    history = _History({})
    busy_until: dict[str, float] = {}  # fleet time a straggler's late update ends
    for round_no in range(1, fleet.max_rounds + 1):
        caps = setup.caps_at(now_s)
        tasks, planned_s, sitting_out = _tasks(setup, method, round_no, seed, now_s, caps,
                                               history)
        deadline_s = planned_s * (1 + fleet.deadline_slack)
        replies = transport([(task, weights) for task in tasks])
        counted = [_counted(setup, t, replies.get(t.client), deadline_s,
                            max(0.0, busy_until.get(t.client, 0.0) - now_s)) for t in tasks]
        updates = [(replies[c.name][0], c.samples) for c in counted  # type: ignore[index]
                   if c.status == "aggregated"]
        complete = len(updates) == len(tasks)
        round_s = (max(c.busy_s + c.compute_s + c.comm_s for c in counted) if complete
                   else deadline_s)
        for c in counted:
            arrival_s = c.busy_s + c.compute_s + c.comm_s
            c.waiting_s = max(0.0, round_s - arrival_s)
            if arrival_s > round_s:  # a straggler: busy into the next round(s)
                busy_until[c.name] = now_s + arrival_s
            # a battery drains by what the client drew (the client's copy of the source
            # followed it during the round; this one plans the next)
            setup.cap_sources[c.name].record_energy(c.energy_j, now_s + round_s)
        counted += [ClientRound(name=n, status="sat out", cap_w=caps[n], note=why)
                    for n, why in sitting_out.items()]
        if updates:
            weights = average([(w, n) for w, n in updates if w is not None])
        accuracy = global_accuracy(setup, weights)
        record = RoundRecord(round=round_no, start_s=now_s, round_s=round_s,
                             deadline_s=deadline_s, accuracy=accuracy, clients=counted)
        rounds.append(record)
        if progress is not None:
            progress(record)
        now_s += round_s
        if accuracy >= target:
            reached = True
            break
    return FleetRun(fleet=str(fleet_path), model=fleet.model, method=method, seed=seed,
                    engine=engine, target_accuracy=target, reached=reached, rounds=rounds)


__all__ = ["FEDERATION_METHODS", "ClientRound", "ClientTask", "FederationError", "FleetRun",
           "LocalReport", "RoundRecord", "Transport", "average", "client_shard",
           "global_accuracy", "initial_weights", "local_transport", "run_federation",
           "train_locally"]
