"""A fleet is a file, planned per client (issue 29: the file and the plans; the federation:
test_federation.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.algorithms.planner import with_power_margin
from wattcap.cli import app
from wattcap.core.profile import ProfileTable
from wattcap.experiments.fleet import plan_fleet_file

runner = CliRunner()
MODEL = "digits-cnn"


def _fleet(folder: Path, clients: list[dict] | None = None) -> Path:
    vector = vector_from_samples(
        {b: [900.0 * (1 + b / 40), 950.0 * (1 + b / 40)] for b in (4, 8, 16, 32, 64, 128)},
        sample_budget=20_000, use_fit=False, model=MODEL, input_shape=[1, 8, 8],
        dataset="digits-rotated", task="image-classification", target_accuracy=0.8,
        seeds=[0, 1])
    vector.save(folder / "efficiency-proxy.json")
    link = {"bandwidth_mbps": 10.0, "latency_s": 0.05}
    clients = clients if clients is not None else [
        {"name": "nano-a", "device": "emulated:jetson-nano", "power_cap": 4.0,
         "data": {"dataset": "digits", "labels": [0, 1, 2]},
         "link": {**link, "energy_j_per_mb": 2.0}},
        {"name": "tx2", "device": "emulated:jetson-tx2nx", "power_cap": 6.0,
         "data": {"dataset": "digits", "labels": [3, 4, 5, 6]}, "link": link},
        {"name": "nano-b", "device": "emulated:jetson-nano", "power_cap": None,
         "data": {"dataset": "digits", "fraction": 0.3},
         "link": {"bandwidth_mbps": 0.5, "latency_s": 0.2}},
    ]
    path = folder / "fleet.json"
    path.write_text(json.dumps({"kind": "wattcap.fleet", "schema_version": 1, "model": MODEL,
                                "efficiency": "efficiency-proxy.json",
                                "samples_per_round": 2048, "clients": clients}))
    return path


def test_a_three_client_fleet_is_planned_under_every_clients_cap(tmp_path: Path) -> None:
    path = _fleet(tmp_path)
    result = plan_fleet_file(path)
    plans = result.plans
    assert set(plans) == {"uniform", "own", "fleet"}
    fleet = plans["fleet"]
    assert fleet.time_s <= plans["uniform"].time_s and fleet.time_s <= plans["own"].time_s
    assert sum(c.samples for c in fleet.clients) == pytest.approx(2048)
    # every client at a point its profile, with the planner's margin, keeps under its cap
    for c in fleet.clients:
        cap = result.caps_w[c.name]
        device = "jetson-tx2nx" if c.name == "tx2" else "jetson-nano"
        table = ProfileTable.load(tmp_path / "fleet-profiles" / f"{device}-{MODEL}.json")
        point = with_power_margin(table, 2.0).lookup(c.batch_size, c.knob_value)
        assert point is not None and (cap is None or point.peak_power_w <= cap)
    # nano-b's slow link alone outlasts the others' whole round: by default the split is equal
    # (every client's data weighs the same, the round waits for its link); by speed its data
    # stay in with one batch a round; where the fleet allows it too, the fleet plan leaves it
    # out (the uniform plan waits for it every round either way)
    assert result.comm_s["nano-b"] > 5 * result.comm_s["nano-a"]
    assert fleet.left_out == [] and fleet.round_s >= result.comm_s["nano-b"]
    assert [c.samples for c in fleet.clients] == pytest.approx([2048 / 3] * 3)
    raw = json.loads(path.read_text())
    path.write_text(json.dumps({**raw, "schema_version": 2, "split": "by-speed"}))
    kept = next(c for c in plan_fleet_file(path).plans["fleet"].clients if c.name == "nano-b")
    assert kept.samples == kept.batch_size
    path.write_text(json.dumps({**raw, "schema_version": 2, "split": "by-speed",
                                "clients_may_sit_out": True}))
    result = plan_fleet_file(path)
    plans, fleet = result.plans, result.plans["fleet"]
    assert fleet.left_out == ["nano-b"]
    assert plans["uniform"].round_s >= result.comm_s["nano-b"] > fleet.round_s
    # nano-a's link costs 2 J per MB each way, every round it takes part in
    assert result.link_j["nano-a"] > 0 == result.link_j["tx2"]
    assert result.link_energy_j("fleet") == pytest.approx(fleet.rounds * result.link_j["nano-a"])
    out = runner.invoke(app, ["fleet", "plan", str(path)], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "uniform" in out.output and "the fleet plan, per client" in out.output
    assert "Traceback" not in out.output


@pytest.mark.parametrize(("edit", "message"), [
    ({"device": "emulated:jetson-nanoo"}, "client nano-a: unknown emulated device"),
    ({"device": "gpu0"}, "client nano-a: unknown device 'gpu0'"),
    ({"power_cap": -3}, "client nano-a: power cap must be a positive number of watts"),
    ({"data": {"dataset": "digits", "labels": [42]}},
     "client nano-a: empty data shard: digits has no samples with labels [42] (its labels, "
     "by index (class): 0 (0), 1 (1)"),
    ({"data": {"dataset": "nope"}}, "client nano-a: unknown dataset 'nope'"),
    ({"device": "nvml:0"}, "client nano-a: device 'nvml:0' needs its measured profile"),
    ({"device": "emulated:jetson-nano:mean"}, "client nano-a: unknown board 'mean' of "
     "emulated:jetson-nano:mean"),
    ({"device": "emulated:jetson-nano:unkind"}, "client nano-a: emulated:jetson-nano:unkind: "
     "give each client its own board, emulated:jetson-nano:unkind=SEED"),
])
def test_a_bad_fleet_file_is_refused_in_one_line(tmp_path: Path, edit: dict,
                                                 message: str) -> None:
    client = {"name": "nano-a", "device": "emulated:jetson-nano", "power_cap": 4.0,
              "data": {"dataset": "digits"}, "link": {"bandwidth_mbps": 10.0}}
    path = _fleet(tmp_path, [{**client, **edit}])
    out = runner.invoke(app, ["fleet", "plan", str(path)], env={"COLUMNS": "300"})
    assert out.exit_code != 0
    flat = " ".join(out.output.split())
    assert message in flat and "Traceback" not in out.output


def test_clients_on_boards_drawn_for_them_are_each_profiled_on_their_own(
        tmp_path: Path) -> None:
    """`emulated:SPEC:unkind=SEED` clients: each its own board, so each its own profile (as
    each real board of a fleet is profiled on itself); the kind board's profile is apart."""
    client = {"device": "emulated:jetson-nano", "power_cap": 4.0,
              "data": {"dataset": "digits"}, "link": {"bandwidth_mbps": 10.0}}
    path = _fleet(tmp_path, [{**client, "name": "a", "device": "emulated:jetson-nano:unkind=1"},
                             {**client, "name": "b", "device": "emulated:jetson-nano:unkind=2"},
                             {**client, "name": "c"}])
    assert set(plan_fleet_file(path).plans) == {"uniform", "own", "fleet"}
    profiles = sorted(p.name for p in (tmp_path / "fleet-profiles").iterdir())
    assert len(profiles) == 3 and any("unkind1" in p for p in profiles) \
        and any("unkind2" in p for p in profiles)
    tables = [ProfileTable.load(tmp_path / "fleet-profiles" / p) for p in profiles]
    assert len({t.points[0].peak_power_w for t in tables}) == 3  # three boards, three readings


def test_a_fleet_file_in_yaml_and_a_malformed_one(tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    path = _fleet(tmp_path)
    raw = json.loads(path.read_text())
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(raw))
    assert set(plan_fleet_file(tmp_path / "fleet.yaml").plans) == {"uniform", "own", "fleet"}
    (tmp_path / "broken.yaml").write_text("clients: [\n")
    out = runner.invoke(app, ["fleet", "plan", str(tmp_path / "broken.yaml")])
    assert out.exit_code != 0 and "not valid YAML" in out.output
    raw["clients"] = []
    (tmp_path / "empty.json").write_text(json.dumps(raw))
    out = runner.invoke(app, ["fleet", "plan", str(tmp_path / "empty.json")])
    assert out.exit_code != 0 and "clients" in out.output


def test_the_bundled_example_fleet_plans(tmp_path: Path) -> None:
    """examples/fleet: two Nanos with the demo's profile, a TX2 NX profiled on first use (in a
    copy of the folder, so the checkout is left as it was)."""
    import shutil

    pytest.importorskip("yaml")
    example = Path(__file__).resolve().parents[2] / "examples" / "fleet"
    folder = tmp_path / "fleet"
    shutil.copytree(example, folder)
    result = plan_fleet_file(folder / "fleet.yaml")
    assert [c.name for c in result.fleet.clients] == ["camera-1", "camera-2", "robot"]
    plans = result.plans
    assert plans["fleet"].time_s <= min(plans["uniform"].time_s, plans["own"].time_s)
    assert (folder / "fleet-profiles" / "jetson-tx2nx-digits32-cnn.json").is_file()
    assert not (example / "fleet-profiles").exists()
