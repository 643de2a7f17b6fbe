"""The fleet's federation on Flower (`pip install 'wattcap[fleet]'`).

`client_app()` is a Flower ClientApp: a SuperNode started with `--node-config
"partition-id=I"` is the fleet file's client I; it answers the server's query with that id and
trains each round's task (`wattcap.experiments.federation.train_locally`). `server_app(...)` is
the ServerApp: it asks every node its partition id, then runs the fleet's rounds
(`run_federation`), each one a Flower message per participating client carrying the global
weights (an ArrayRecord) and the client's plan (a ConfigRecord), and the replies' updates and
reports back. `simulate(...)` runs both in Flower's simulation engine (Ray) on this machine.

The same two apps run as a real deployment: `flwr run` with the app given by this module's
`server` and `client` objects (see the documentation's fleets page, docs/fleets.md).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

# The federation (torch, scipy: seconds) is imported where a message needs it: a deployed
# SuperNode starts a ClientApp process per message, and the partition-id query needs none of it
if TYPE_CHECKING:
    from wattcap.experiments.federation import ClientTask, FleetRun, LocalReport, Weights

#: seconds the server waits for every node to connect, and for one round's replies (also for
#: the first query's: a node's first reply pays its start, which in a simulation on a loaded
#: machine is a Ray actor importing torch and wattcap, and took over 2 minutes on 2 cores)
CONNECT_TIMEOUT_S = 120.0
ROUND_TIMEOUT_S = 600.0
#: seconds between the server's pulls for replies: Flower's own `send_and_receive` pulls every
#: 3 s, which every round of short local training (and the partition-id query) waits out
REPLY_POLL_S = 0.25


def send_and_receive(grid: Grid, messages: list[Message], timeout_s: float) -> list[Message]:
    """Push `messages` and pull their replies until every one came or `timeout_s` passed (the
    replies that came); as `Grid.send_and_receive`, polling every `REPLY_POLL_S`."""
    waiting = set(grid.push_messages(messages))
    replies: list[Message] = []
    deadline = time.monotonic() + timeout_s
    # the in-memory grid of a simulation has its own, shorter interval
    poll_s = min(REPLY_POLL_S, float(getattr(grid, "pull_interval", REPLY_POLL_S)))
    while waiting:
        pulled = list(grid.pull_messages(waiting))
        replies += pulled
        waiting -= {reply.metadata.reply_to_message_id for reply in pulled}
        if not waiting or time.monotonic() >= deadline:
            break
        time.sleep(poll_s)
    return replies


def _partition_id(context: Context) -> int:
    from wattcap.experiments.federation import FederationError

    try:
        return int(str(context.node_config["partition-id"]))
    except KeyError:
        raise FederationError("this SuperNode has no partition-id: start it with --node-config "
                              "\"partition-id=I\" (I: its client's index in the fleet file)"
                              ) from None


def client_app() -> ClientApp:
    """The fleet's ClientApp (module docstring)."""
    app = ClientApp()

    @app.query()
    def identify(message: Message, context: Context) -> Message:
        return Message(RecordDict({"node": ConfigRecord(
            {"partition-id": _partition_id(context)})}), reply_to=message)

    @app.train()
    def train(message: Message, context: Context) -> Message:
        from wattcap.experiments.federation import ClientTask, train_locally

        config = message.content.config_records["task"]
        task = ClientTask.from_config(dict(config))
        weights = message.content.array_records["arrays"].to_numpy_ndarrays()
        update, report = train_locally(task, weights)
        content = RecordDict({"report": ConfigRecord({"json": report.model_dump_json()})})
        if update is not None:
            content["arrays"] = ArrayRecord(update)
        return Message(content, reply_to=message)

    return app


class FlowerTransport:
    """Sends each round's tasks to the nodes of their clients through Flower's Grid."""

    def __init__(self, grid: Grid, clients: list[str],
                 timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        self.grid = grid
        self.node_of = self._identify(clients, timeout_s)

    def _identify(self, clients: list[str], timeout_s: float) -> dict[str, int]:
        """Map client names to node ids by the partition id every node answers with."""
        from wattcap.experiments.federation import FederationError

        deadline = time.monotonic() + timeout_s
        nodes = list(self.grid.get_node_ids())
        while len(nodes) < len(clients) and time.monotonic() < deadline:
            time.sleep(0.2)
            nodes = list(self.grid.get_node_ids())
        if len(nodes) < len(clients):
            raise FederationError(f"{len(nodes)} Flower nodes connected in {timeout_s:g} s; the "
                                  f"fleet has {len(clients)} clients")
        queries = [Message(RecordDict({"ask": ConfigRecord({"what": "partition-id"})}),
                           message_type=MessageType.QUERY, dst_node_id=n) for n in nodes]
        found: dict[str, int] = {}
        replies = send_and_receive(self.grid, queries, ROUND_TIMEOUT_S)
        for reply in replies:
            if reply.has_error():
                raise FederationError(f"node {reply.metadata.src_node_id}: "
                                      f"{reply.error.reason}")
            index = int(str(reply.content.config_records["node"]["partition-id"]))
            if not 0 <= index < len(clients):
                raise FederationError(f"node {reply.metadata.src_node_id} has partition-id "
                                      f"{index}; the fleet has clients 0..{len(clients) - 1}")
            found[clients[index]] = reply.metadata.src_node_id
        missing = [c for c in clients if c not in found]
        if missing:
            raise FederationError(f"no Flower node serves client(s) {', '.join(missing)} "
                                  f"({len(replies)} of {len(nodes)} nodes replied to the "
                                  f"partition-id query within {ROUND_TIMEOUT_S:g} s)")
        return found

    def __call__(self, tasks: list[tuple[ClientTask, Weights]],
                 ) -> dict[str, tuple[Weights | None, LocalReport] | None]:
        from wattcap.experiments.federation import LocalReport

        messages = [Message(RecordDict({"arrays": ArrayRecord(weights),
                                        "task": ConfigRecord(task.to_config())}),
                            message_type=MessageType.TRAIN,
                            dst_node_id=self.node_of[task.client])
                    for task, weights in tasks]
        client_of = {self.node_of[task.client]: task.client for task, _ in tasks}
        out: dict[str, tuple[Weights | None, LocalReport] | None] = {
            task.client: None for task, _ in tasks}
        for reply in send_and_receive(self.grid, messages, ROUND_TIMEOUT_S):
            # a failed client is one whose update never came (an error reply may come from the
            # SuperLink itself, not from a node)
            if reply.has_error():
                continue
            name = client_of[reply.metadata.src_node_id]
            report = LocalReport.model_validate_json(
                str(reply.content.config_records["report"]["json"]))
            arrays = reply.content.array_records.get("arrays")
            out[name] = (None if arrays is None else arrays.to_numpy_ndarrays(), report)
        return out


def _run_on(grid: Grid, fleet: str, method: str, seed: int) -> FleetRun:
    """The federation, its messages carried by this Grid."""
    from wattcap.experiments.federation import run_federation
    from wattcap.experiments.fleet import load_fleet

    clients = [c.name for c in load_fleet(fleet).fleet.clients]
    return run_federation(fleet, method, FlowerTransport(grid, clients), seed=seed,
                          engine="flower")


def server_app(fleet: str | Path, method: str, seed: int = 0,
               results: dict[str, FleetRun] | None = None) -> ServerApp:
    """The fleet's ServerApp: runs the federation with `method`'s plans; its record goes into
    `results["run"]` (a simulation in this process)."""
    app = ServerApp()
    path = str(Path(fleet).resolve())

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        run = _run_on(grid, path, method, seed)
        if results is not None:
            results["run"] = run

    return app


def simulate(fleet: str | Path, method: str, seed: int = 0) -> FleetRun:
    """Run the federation in Flower's simulation engine (one virtual SuperNode per client,
    one CPU each); the run's record."""
    from flwr.simulation import run_simulation

    from wattcap.experiments.federation import FederationError
    from wattcap.experiments.fleet import load_fleet

    setup = load_fleet(fleet)
    results: dict[str, FleetRun] = {}
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    backend: Any = {"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                    "init_args": {"logging_level": "ERROR", "log_to_driver": False}}
    run_simulation(server_app(fleet, method, seed, results), client_app(),
                   num_supernodes=len(setup.fleet.clients), backend_config=backend)
    if "run" not in results:
        raise FederationError("the Flower simulation ended without a record (see its log "
                              "above)")
    return results["run"]


#: the apps of a Flower deployment (`flwr run`): the fleet, method and seed from the run
#: config (`fleet`, `method`, `seed`), the record written beside the fleet file
def _deployed_server() -> ServerApp:
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        from wattcap.experiments.federation import FederationError

        config = context.run_config
        fleet = str(config["fleet"])
        if not Path(fleet).is_absolute():
            raise FederationError(f"run config fleet={fleet!r}: give the fleet file's absolute "
                                  "path (the ServerApp runs where the SuperLink runs): flwr "
                                  "run APP --run-config 'fleet=\"/abs/path/fleet.yaml\"'")
        method = str(config.get("method", "fleet"))
        seed = int(str(config.get("seed", 0)))
        run = _run_on(grid, fleet, method, seed)
        record = Path(fleet).with_name(f"fleet-run-{method}-seed{seed}.json")
        run.save(record)
        print(json.dumps({"record": str(record), "reached": run.reached,
                          "rounds": len(run.rounds), "time_s": run.time_s}))

    return app


server = _deployed_server()
client = client_app()

__all__ = ["FlowerTransport", "client", "client_app", "send_and_receive", "server", "server_app",
           "simulate"]
