"""The federation of a fleet (issue 29 items 3-6): clients train their shards on their emulated
devices under their caps, the server averages what came back within the round's deadline,
re-plans every round under the caps of that moment. On Flower's simulation engine and in
this process (the same rounds)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.cli import app
from wattcap.experiments.federation import (
    ClientTask,
    FleetRun,
    LocalReport,
    _counted,
    average,
    local_transport,
    run_federation,
)
from wattcap.experiments.fleet import load_fleet, plan_at_caps

MODEL = "digits-cnn"
LINK = {"bandwidth_mbps": 10.0, "latency_s": 0.05, "energy_j_per_mb": 0.5}


def _fleet(folder: Path, clients: list[dict] | None = None, flat: bool = False,
           profiles: Path | None = None, **fields: object) -> Path:
    """Three clients on bundled digits: a Nano at 4 W, a TX2 NX at 6 W, a Nano without a cap.
    r_b grows with b (a made-up proxy vector), or is 1 for every b with `flat`. `profiles`: a
    fleet-profiles folder to start with (see `fleet_profiles`)."""
    if profiles is not None:
        shutil.copytree(profiles, folder / "fleet-profiles")
    sizes = (4, 8, 16, 32, 64, 128)
    vector = vector_from_samples(
        {b: [900.0 * (1 if flat else 1 + b / 40)] * 2 for b in sizes}, sample_budget=20_000,
        use_fit=False, model=MODEL, input_shape=[1, 8, 8], dataset="digits-rotated",
        task="image-classification", target_accuracy=0.8, seeds=[0, 1])
    vector.save(folder / "efficiency-proxy.json")
    clients = clients if clients is not None else [
        {"name": "nano-a", "device": "emulated:jetson-nano", "power_cap": 4.0,
         "data": {"dataset": "digits", "labels": [0, 1, 2, 3, 4, 5, 6]}, "link": LINK},
        {"name": "tx2", "device": "emulated:jetson-tx2nx", "power_cap": 6.0,
         "data": {"dataset": "digits", "labels": [3, 4, 5, 6, 7, 8, 9]}, "link": LINK},
        {"name": "nano-b", "device": "emulated:jetson-nano", "power_cap": None,
         "data": {"dataset": "digits", "fraction": 0.5}, "link": LINK},
    ]
    path = folder / "fleet.json"
    path.write_text(json.dumps({"kind": "wattcap.fleet", "schema_version": 2, "model": MODEL,
                                "efficiency": "efficiency-proxy.json",
                                "samples_per_round": 1024, "target_accuracy": 0.8,
                                "max_rounds": 15, "clients": clients, **fields}))
    return path


@pytest.fixture(scope="module")
def fleet_profiles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The emulated Nano's and TX2 NX's digits-cnn profiles, made once for the module. A fleet
    profiles its emulated clients on first use into fleet-profiles/ beside its file (0.6 s of
    CPU a fleet file, 3 s the first time in a process) and reads them from there after; the
    profiling is deterministic (the tables differ only in created_at), so a test's fleet that
    starts with these copies runs on the tables it would have made."""
    folder = tmp_path_factory.mktemp("fleet-profiles")
    load_fleet(_fleet(folder))
    return folder / "fleet-profiles"


def _never_over_its_cap(run: FleetRun) -> None:
    for r in run.rounds:
        for c in r.clients:
            assert c.cap_violations == 0, (r.round, c)
            if c.cap_w is not None and c.peak_power_w is not None:
                assert c.peak_power_w <= c.cap_w, (r.round, c)


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_three_clients_reach_the_target_on_flower(tmp_path: Path, fleet_profiles: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("flwr")
    from wattcap.integrations.flower import simulate

    # Ray told of one CPU: one actor (simulate gives each one CPU) serves the three virtual
    # SuperNodes in turn. An actor is a process that imports torch and wattcap (~13 s of CPU
    # here); a round's training takes a fraction of a second, so a second actor cost more
    # than it overlapped
    monkeypatch.setenv("RAY_OVERRIDE_RESOURCES", '{"CPU": 1}')
    path = _fleet(tmp_path, profiles=fleet_profiles,
                  target_accuracy=0.7)  # a few rounds: each costs Ray's overhead
    run = simulate(path, "fleet", seed=0)
    assert run.engine == "flower" and run.reached
    assert run.rounds[-1].accuracy >= 0.7 > run.rounds[0].accuracy
    _never_over_its_cap(run)
    every = {c.name for r in run.rounds for c in r.clients if c.status == "aggregated"}
    assert every == {"nano-a", "tx2", "nano-b"}
    # Flower carried exactly the tasks and updates of the same rounds in this process
    local = run_federation(path, "fleet", local_transport, seed=0)
    assert [r.accuracy for r in local.rounds] == pytest.approx([r.accuracy for r in run.rounds])
    assert local.time_s == pytest.approx(run.time_s)


@pytest.mark.slow  # seconds of end-to-end work: make test runs it, test-fast does not
def test_the_fleet_plans_rounds_no_slower_than_uniform_on_the_same_seeds(
        tmp_path: Path, fleet_profiles: Path) -> None:
    """With r_b the same for every b, the fleet plan differs from uniform only in how it
    splits and slows: its rounds are never longer (measured on the emulated devices)."""
    path = _fleet(tmp_path, flat=True, profiles=fleet_profiles)
    for seed in (0, 1):
        uniform = run_federation(path, "uniform", local_transport, seed=seed)
        fleet = run_federation(path, "fleet", local_transport, seed=seed)
        mean = [sum(r.round_s for r in run.rounds) / len(run.rounds)
                for run in (uniform, fleet)]
        assert mean[1] <= mean[0] * 1.01, (seed, mean)
        assert fleet.reached and uniform.reached
        _never_over_its_cap(fleet)


def test_a_client_whose_cap_drops_sits_out_then_is_replanned(tmp_path: Path,
                                                             fleet_profiles: Path) -> None:
    # nano-a's cap: 4 W, then 2 W (below anything the Nano can run digits-cnn at, above its
    # idle draw) from 0.3 s to 1.2 s of fleet time, then 2.7 W (inside its 2.45-2.95 W span:
    # a slower setting)
    (tmp_path / "caps.csv").write_text("time_s,cap_w\n0,4.0\n0.3,2.0\n1.2,2.7\n")
    path = _fleet(tmp_path, profiles=fleet_profiles, max_rounds=20)
    raw = json.loads(path.read_text())
    raw["clients"][0]["power_cap"] = "schedule:caps.csv"
    path.write_text(json.dumps(raw))
    run = run_federation(path, "fleet", local_transport, seed=0)
    nano = [(r, next(c for c in r.clients if c.name == "nano-a")) for r in run.rounds]
    out = [(r, c) for r, c in nano if c.status == "sat out"]
    assert out and all(0.3 <= r.start_s < 1.2 and c.cap_w == 2.0 for r, c in out)
    assert all("infeasible" in (c.note or "") for _, c in out)
    before = [c for r, c in nano if r.start_s < 0.3]
    after = [c for r, c in nano if r.start_s >= 1.2]
    # (busy with its late update into the first rounds after it, it catches up)
    assert after and all(c.status in ("aggregated", "straggler") for c in after)
    assert after[-1].status == "aggregated"
    # the round the cap fell in: the client paused under 2 W (never over it) until 1.2 s and
    # its update came after the deadline; the rounds before it were counted
    spanning = next(r for r, c in nano if r.start_s < 0.3 < r.start_s + r.round_s)
    late = next(c for c in spanning.clients if c.name == "nano-a")
    assert late.status == "straggler" and late.compute_s > spanning.deadline_s
    assert spanning.start_s + late.compute_s >= 1.2 - 1e-6
    assert all(c.status == "aggregated" for c in before if c is not late)
    assert all(c.cap_w == 2.7 for c in after)
    slower = [c for c in after if (c.batch_size, c.knob_value) not in
              {(b.batch_size, b.knob_value) for b in before}]
    assert slower, "re-planned under 2.7 W: another setting than under 4 W"
    assert all(c.peak_power_w is None or c.peak_power_w <= 2.7 for c in after)
    _never_over_its_cap(run)
    # a straggler's device is busy until its late update is sent: a round that starts before
    # then has it start late
    end = 0.0
    for r, c in nano:
        if c.status == "sat out":
            continue
        assert c.busy_s == pytest.approx(max(0.0, end - r.start_s), abs=1e-9)
        arrival = c.busy_s + c.compute_s + c.comm_s
        if arrival > r.round_s:
            end = r.start_s + arrival
    assert any(c.busy_s > 0 for _, c in nano)


def test_dropouts_are_left_out_and_the_round_waits_for_its_deadline(tmp_path: Path,
                                                                     fleet_profiles: Path,
                                                                     ) -> None:
    path = _fleet(tmp_path, profiles=fleet_profiles)
    raw = json.loads(path.read_text())
    raw["clients"][1]["dropout"] = 0.5
    path.write_text(json.dumps(raw))
    run = run_federation(path, "fleet", local_transport, seed=0)
    dropped = [r for r in run.rounds if any(c.status == "dropped" for c in r.clients)]
    kept = [r for r in run.rounds if r not in dropped]
    assert dropped and kept
    for r in dropped:
        c = next(c for c in r.clients if c.status == "dropped")
        assert c.name == "tx2" and "dropped out after" in (c.note or "")
        assert r.round_s == pytest.approx(r.deadline_s)  # the server waited for it
        assert c.energy_j >= 0 and c.link_j < next(
            x for x in r.clients if x.status == "aggregated").link_j  # only the model came
    assert all(r.round_s <= r.deadline_s for r in kept)
    _never_over_its_cap(run)


def test_a_late_update_is_a_straggler_and_the_average_weighs_samples(tmp_path: Path,
                                                                     fleet_profiles: Path,
                                                                     ) -> None:
    setup = load_fleet(_fleet(tmp_path, profiles=fleet_profiles))
    task = ClientTask(str(setup.path), "tx2", 1, 32, 1_300_500_000, 320, 6.0, 0)
    report = LocalReport(client="tx2", round=1, samples=320, compute_s=2.0, energy_j=5.0,
                         peak_power_w=5.0, cap_w=6.0, cap_violations=0)
    weights = [np.zeros(2, dtype=np.float32)]
    late = _counted(setup, task, (weights, report), deadline_s=1.0)
    assert late.status == "straggler" and "after the 1.00 s deadline" in late.note
    on_time = _counted(setup, task, (weights, report), deadline_s=10.0)
    assert on_time.status == "aggregated" and on_time.energy_j == 5.0
    assert _counted(setup, task, None, deadline_s=10.0).status == "dropped"
    # still busy 0.5 s with its previous round's late update: it arrives 0.5 s later
    held = _counted(setup, task, (weights, report), deadline_s=2.2, busy_s=0.5)
    assert held.status == "straggler" and held.busy_s == 0.5
    assert "update at 2.6" in held.note
    mean = average([([np.array([0.0, 4.0]), np.array([1])], 100),
                    ([np.array([4.0, 0.0]), np.array([4])], 300)])
    assert mean[0] == pytest.approx([3.0, 1.0])
    assert mean[1].dtype == np.array([1]).dtype and int(mean[1][0]) == 3  # a counter, rounded


def test_fleet_simulate_on_the_command_line(tmp_path: Path, fleet_profiles: Path) -> None:
    path = _fleet(tmp_path, profiles=fleet_profiles)
    result = CliRunner().invoke(app, ["fleet", "simulate", str(path), "--engine", "local",
                                      "--method", "uniform,fleet", "--out",
                                      str(tmp_path / "runs")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "uniform" in result.output and "energy by client" in result.output
    for stem in ("uniform-seed0", "fleet-seed0"):
        assert FleetRun.load(tmp_path / "runs" / f"{stem}.json").reached
        assert (tmp_path / "runs" / f"{stem}-timeline.png").stat().st_size > 10_000
    bad = CliRunner().invoke(app, ["fleet", "simulate", str(path), "--method", "fedavg"])
    assert bad.exit_code != 0
    assert "--method takes uniform, own, fedzero, fleet" in " ".join(bad.output.split())


def test_a_bad_cap_source_is_refused_in_one_line(tmp_path: Path) -> None:
    path = _fleet(tmp_path)
    raw = json.loads(path.read_text())
    raw["clients"][0]["power_cap"] = "sunny:seed=1"
    path.write_text(json.dumps(raw))
    result = CliRunner().invoke(app, ["fleet", "simulate", str(path), "--engine", "local"],
                                env={"COLUMNS": "300"})
    assert result.exit_code != 0
    assert "client nano-a: cap source 'sunny:seed=1': unknown kind" in result.output
    assert "Traceback" not in result.output


def test_fedzero_chooses_by_forecast_energy_with_fairness(tmp_path: Path,
                                                          fleet_profiles: Path) -> None:
    """FedZero-style: half the fleet a round (2 of 3), those with the most energy over the
    round first, at the uniform plan's fixed settings; a client that took part in more than
    3/4 of the rounds waits while others can train."""
    from wattcap.algorithms.fedzero import select_clients

    energy = {"a": 50.0, "b": 20.0, "c": 5.0}
    needed = {"a": 1.0, "b": 1.0, "c": 10.0}
    assert select_clients(["a", "b", "c"], energy, needed, {}, 0) == ["a", "b"]
    # c cannot afford its share; a has taken part in every round: b, the fair one, comes
    # first, a fills the round
    assert select_clients(["a", "b", "c"], energy, needed, {"a": 4, "b": 2}, 4) == ["b", "a"]
    assert select_clients(["a", "b", "c"], energy, {**needed, "a": 99}, {}, 0) == ["b"]
    with pytest.raises(ValueError, match="fraction"):
        select_clients(["a"], energy, needed, {}, 0, fraction=0)
    path = _fleet(tmp_path, profiles=fleet_profiles)
    run = run_federation(path, "fedzero", local_transport, seed=0)
    # the uniform plan's settings: every round's, as this fleet's caps never move (a run of
    # the uniform method would train ten rounds to list the same three)
    setup = load_fleet(path)
    uniform = plan_at_caps(setup, setup.caps_at(0.0), strict=False).plans["uniform"]
    settings = {(c.name, c.batch_size, c.knob_value) for c in uniform.clients}
    for r in run.rounds:
        trained = [c for c in r.clients if c.status != "sat out"]
        assert len(trained) == 2
        assert {(c.name, c.batch_size, c.knob_value) for c in trained} <= settings
        waiting = next(c for c in r.clients if c.status == "sat out")
        assert "not chosen this round" in (waiting.note or "")
    share = {name: sum(any(c.name == name and c.status != "sat out" for c in r.clients)
                       for r in run.rounds) / len(run.rounds) for name in ("nano-a", "tx2")}
    assert all(0 < v < 1 for v in share.values())  # fairness rotates the capped clients in
    _never_over_its_cap(run)


def test_a_fleet_trains_on_a_data_spec_in_its_real_format(tmp_path: Path,
                                                           fleet_profiles: Path) -> None:
    """Clients' shards from a data spec (MNIST's IDX files, written here from the bundled
    digits), converted to the model's input shape; the global test split is the same for
    every client and none of its samples is in a shard."""
    from sklearn.datasets import load_digits

    from tests.data_files import write_mnist
    from wattcap.experiments.federation import _split, client_shard

    digits = load_digits()
    images = (digits.images / 16 * 255).astype(np.uint8)
    root = write_mnist(tmp_path / "mnist", images, digits.target)
    spec = f"mnist:{root}"
    clients = [{"name": f"nano-{i}", "device": "emulated:jetson-nano", "power_cap": 4.0,
                "data": {"dataset": spec, "fraction": 0.5, "seed": i}, "link": LINK}
               for i in range(2)]
    path = _fleet(tmp_path, clients, profiles=fleet_profiles, max_rounds=3,
                  target_accuracy=0.99)
    run = run_federation(path, "fleet", local_transport, seed=0)
    assert len(run.rounds) == 3 and run.rounds[-1].accuracy > 0.3  # ten classes: chance 0.1
    setup = load_fleet(path)
    train, test = _split(spec, MODEL)
    assert test.input_shape == (1, 8, 8) and len(train) + len(test) == len(images)
    shards = [client_shard(setup, f"nano-{i}") for i in range(2)]
    test_rows = {row.tobytes() for row in test.batch(np.arange(len(test)))[0]}
    for shard in shards:
        rows = shard.batch(np.arange(len(shard)))[0]
        assert not any(row.tobytes() in test_rows for row in rows)
    mixed = json.loads(path.read_text())
    mixed["clients"][1]["data"] = {"dataset": "digits"}
    path.write_text(json.dumps(mixed))
    result = CliRunner().invoke(app, ["fleet", "plan", str(path)], env={"COLUMNS": "300"})
    assert result.exit_code != 0 and "must come from one dataset" in result.output


def test_a_measured_device_replays_its_trace_in_a_fleet(tmp_path: Path) -> None:
    """A `trace:` client (examples/trace-nano: a table in the measured format, generated from
    the emulator) trains for real; its round's time, energy and peak are its table's."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    shutil.copytree(examples / "trace-nano", tmp_path / "trace-nano")
    for name in ("efficiency-proxy.json", "profile-jetson-nano.json"):
        shutil.copy(examples / "fleet" / name, tmp_path / name)
    clients = [
        {"name": "measured", "device": "trace:trace-nano/trace.json", "power_cap": 5.0,
         "data": {"dataset": "digits-5-9-32", "fraction": 0.5}, "link": LINK},
        {"name": "emulated", "device": "emulated:jetson-nano", "power_cap": 5.0,
         "data": {"dataset": "digits-5-9-32", "fraction": 0.5, "seed": 1}, "link": LINK,
         "profile": "profile-jetson-nano.json"},
    ]
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps({"kind": "wattcap.fleet", "schema_version": 2,
                                "model": "digits32-cnn", "efficiency": "efficiency-proxy.json",
                                "samples_per_round": 512, "target_accuracy": 0.99,
                                "max_rounds": 2, "clients": clients}))
    run = run_federation(path, "own", local_transport, seed=0)
    table = load_fleet(path).profiles["measured"]
    assert table.device == "jetson-nano" and len(run.rounds) == 2
    for r in run.rounds:
        c = next(c for c in r.clients if c.name == "measured")
        point = table.lookup(c.batch_size, c.knob_value)
        assert c.status == "aggregated" and c.samples >= 256
        assert c.compute_s == pytest.approx(c.samples * point.seconds_per_sample)
        assert c.energy_j == pytest.approx(c.compute_s * point.avg_power_w)
        assert c.peak_power_w == point.peak_power_w <= 5.0 and c.cap_violations == 0
    assert run.rounds[-1].accuracy > run.rounds[0].accuracy * 0.5
    missing = json.loads(path.read_text())
    missing["clients"][0]["device"] = "trace:nowhere.json"
    path.write_text(json.dumps(missing))
    out = CliRunner().invoke(app, ["fleet", "plan", str(path)], env={"COLUMNS": "300"})
    assert out.exit_code != 0 and "client measured: trace manifest nowhere.json not found" \
        in out.output
