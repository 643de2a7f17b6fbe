"""Federated fleets side by side (issue 29's benchmark): time to the target accuracy and energy
of the fleet plan, uniform (every client its largest batch at its safe clock) and each
client's own wattcap plan, on fleets of 3, 8 and 32 emulated clients, every method on the
same fleets and seeds in one run; and how the cost of one round grows with the clients (the
planner's wall time per round, the in-process round's wall time).

The model is digits-cnn on bundled digits (each client a seeded shard: 7 of the 10 labels, an
equal share), r_b from a proxy estimate on digits-rotated (estimated on first use and kept in
--out). Clients alternate emulated Jetson Nanos (caps 3.0 W, 4.0 W, none) and TX2 NXs
(5.0 W, 6.0 W, none), behind links of 2, 10 or 50 Mbps; a round trains max(1024, 128 x
clients) samples. Rounds run in this process
(`local_transport`: the same rounds as Flower's engine, tests/experiments/test_federation.py);
time is the emulated devices'. The FedZero-style selection is not built (issue 29 open).

    python bench/fleet.py                       # 3, 8, 32 clients, 2 seeds, unkind boards
    python bench/fleet.py --clients 3 --seeds 1 # quick
    python bench/fleet.py --board kind          # every client the emulator's board of its kind
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

from wattcap.core.efficiency import EfficiencyVector
from wattcap.experiments.federation import FEDERATION_METHODS, local_transport, run_federation
from wattcap.experiments.fleet import load_fleet, plan_at_caps
from wattcap.experiments.fleet_report import MethodSummary, summarize

MODEL = "digits-cnn"
NANO_CAPS = (3.0, 4.0, None)
TX2_CAPS = (5.0, 6.0, None)
BANDWIDTHS_MBPS = (2.0, 10.0, 50.0)


def _efficiency(folder: Path) -> Path:
    path = folder / "efficiency-digits-rotated.json"
    if not path.is_file():
        from wattcap.train.efficiency import estimate_efficiency

        print("estimating r_b on digits-rotated (first use; kept for later runs) ...")
        estimate_efficiency(MODEL, "digits-rotated", target_accuracy=0.8, seeds=2).save(path)
    return path


def _device(i: int, board: str) -> str:
    """Client i's emulated board: the kind one of its kind, or one drawn for the client (its
    speed, power, host speed and a sensor that averages and lags: each client another board)."""
    name = "jetson-nano" if i % 2 == 0 else "jetson-tx2nx"
    return f"emulated:{name}" + (f":unkind={i}" if board == "unkind" else "")


def _fleet_file(folder: Path, clients: int, efficiency: Path, seed: int = 0,
                board: str = "unkind") -> Path:
    draw = random.Random(seed * 1000 + clients)
    specs = []
    for i in range(clients):
        nano = i % 2 == 0
        labels = sorted(draw.sample(range(10), 7))
        specs.append({
            "name": f"{'nano' if nano else 'tx2'}-{i}",
            "device": _device(i, board),
            "power_cap": draw.choice(NANO_CAPS if nano else TX2_CAPS),
            "data": {"dataset": "digits", "labels": labels,
                     "fraction": min(1.0, 5.0 / clients), "seed": i},
            "link": {"bandwidth_mbps": draw.choice(BANDWIDTHS_MBPS), "latency_s": 0.02,
                     "energy_j_per_mb": 0.1},
        })
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"fleet-{clients}-{board}.json"
    path.write_text(json.dumps({
        "kind": "wattcap.fleet", "schema_version": 2, "model": MODEL,
        # at least one largest batch per client and round, so that no method's clients train
        # more than the round's samples (a client trains at least one batch)
        "efficiency": str(efficiency.resolve()), "samples_per_round": max(1024, 128 * clients),
        "target_accuracy": 0.8, "max_rounds": 40, "clients": specs}, indent=1))
    return path


def _plan_ms(path: Path, repeats: int = 3) -> float:
    setup = load_fleet(path)
    caps = setup.caps_at(0.0)
    start = time.perf_counter()
    for _ in range(repeats):
        plan_at_caps(setup, caps, strict=False)
    return (time.perf_counter() - start) / repeats * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="3,8,32")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("/tmp/wattcap-bench-fleet"))
    parser.add_argument("--board", choices=("kind", "unkind"), default="unkind",
                        help="each client a board drawn for it (default), or the emulator's one "
                             "deterministic board of its kind")
    args = parser.parse_args(argv)
    efficiency = _efficiency(args.out)
    vector = EfficiencyVector.load(efficiency)
    print(f"r_b from {vector.dataset} (target {vector.target_accuracy:g}): "
          + ", ".join(f"b={e.batch_size}: {e.ratio:.2f}" for e in vector.entries))
    for n in (int(c) for c in args.clients.split(",")):
        path = _fleet_file(args.out, n, efficiency, board=args.board)
        runs, walls = [], []
        for method in FEDERATION_METHODS:
            for seed in range(args.seeds):
                start = time.perf_counter()
                run = run_federation(path, method, local_transport, seed=seed)
                walls.append((time.perf_counter() - start) / len(run.rounds))
                runs.append(run)
        fleet = next(m for m in summarize(runs) if m.method == "fleet")
        print(f"\n{n} clients ({args.seeds} seeds; time and energy over the seeds that reached "
              f"0.8; planning {_plan_ms(path):.1f} ms per round, a round "
              f"{statistics.fmean(walls):.2f} s wall in this process)")
        print(f"{'method':>8} {'reached':>8} {'rounds':>12} {'time to target s':>18} "
              f"{'energy J':>14} {'time vs fleet':>14} {'energy vs fleet':>16}")
        for m in summarize(runs):
            both = m.reached and fleet.reached  # a ratio only between runs that reached it
            print(f"{m.method:>8} {m.reached:>5}/{m.runs:<2} {MethodSummary.text(m.rounds):>12} "
                  + (f"{MethodSummary.text(m.time_s, 2):>18} "
                     f"{MethodSummary.text(m.energy_j):>14} " if m.reached
                     else f"{'not reached':>18} {'':>14} ")
                  + (f"{m.time_s[0] / fleet.time_s[0]:>13.2f}x "
                     f"{m.energy_j[0] / fleet.energy_j[0]:>15.2f}x" if both
                     else f"{'—':>14} {'—':>16}"))
        sat_out = {c.name for r in runs if r.method == "fleet" for rr in r.rounds
                   for c in rr.clients if c.status == "sat out"}
        if sat_out:
            print(f"  the fleet plan left out: {', '.join(sorted(sat_out))} (links or caps)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
