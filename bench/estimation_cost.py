"""Estimation cost: the full proxy sweep vs the gradient-noise-scale (GNS) estimate, and the
sweep serially vs on Ray.

1. For every bundled proxy (digits32-cnn, pre-trained on digits-0-4-32 for 2 epochs as the
   demo and `compare` do): the full sweep (`estimate_efficiency`: 6 batch sizes x 3 seeds to the
   proxy's "auto" target, with its budget retries) and the GNS estimate (`estimate_efficiency_
   gns`: one run at b = 128, chunks of 4, `--gns-samples`; Adam-preconditioned as Pollux does,
   the default, and raw, as a second reading). Compute used by each: training
   samples (every run counted) and CPU seconds of this process (device-independent; both run
   serially with one torch thread). Goal (issue 20): <= 0.2x the sweep's compute.
2. Algorithm 1's choices from each vector on the emulated Jetson Nano (exhaustive digits32-cnn
   profile) at several caps, side by side; where they differ, the GNS choice's predicted time
   judged with the sweep's r_b, over the sweep's own choice (T/T*: 1.00 = no loss).
3. The same sweep serially and as Ray tasks on a local Ray of 2 CPUs (this machine): wall
   times, their ratio (with and without Ray's start-up), and whether the vectors are equal up
   to timing fields.

The sweeps take long (about 10-20 CPU minutes per proxy on a quiet core): results are kept in
OUT (default: the wattcap cache folder's bench-estimation-cost/) and reused on the next run,
which says so; --fresh recomputes. Prints; asserts nothing.

    python bench/estimation_cost.py            # 4 proxies, 5 caps, serial vs Ray on digits-32
    python bench/estimation_cost.py --quick    # 1 proxy (2 seeds), Ray part on a tiny sweep
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from wattcap.algorithms.planner import plan
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.profile import ProfileTable
from wattcap.devices import EmulatedDevice
from wattcap.measure.profiling import Profiler
from wattcap.measure.references import cache_dir, emulated_reference_profiles
from wattcap.train.efficiency import estimate_efficiency
from wattcap.train.executors import RayExecutor, SerialExecutor
from wattcap.train.noise_scale import DEFAULT_GNS_SAMPLES, estimate_efficiency_gns

MODEL = "digits32-cnn"
PRETRAIN = "digits-0-4-32"
PROXIES = ("digits-rotated-32", "digits-32", "shapes-32", "digits-5-9-32")
DEVICE = "jetson-nano"
CAPS_W: tuple[float | None, ...] = (4.0, 4.5, 5.0, 5.5, 6.5, None)
GOAL_SHARE = 0.2


def pretrained_weights(out: Path) -> Path:
    """digits32-cnn pre-trained on digits-0-4-32 for 2 epochs, made once in `out`."""
    from wattcap.train.loop import pretrain

    path = out / f"{MODEL}-pretrained.safetensors"
    if not path.exists():
        pretrain(MODEL, PRETRAIN, path, epochs=2)
    return path


def _profile(out: Path) -> ProfileTable:
    path = out / f"profile-{DEVICE}-{MODEL}.json"
    if path.exists():
        return ProfileTable.load(path)
    profile = Profiler(EmulatedDevice(DEVICE), MODEL).run(exhaustive=True)
    profile.save(path)
    return profile


def _timed(path: Path, fresh: bool, make) -> tuple[EfficiencyVector, dict, bool]:
    """The vector `make()` builds, with its CPU and wall seconds, cached as PATH and
    PATH.cost.json; (vector, cost, reused)."""
    cost_path = path.with_suffix(".cost.json")
    if not fresh and path.exists() and cost_path.exists():
        return EfficiencyVector.load(path), json.loads(cost_path.read_text()), True
    wall, cpu = time.perf_counter(), time.process_time()
    vector = make()
    cost = {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall}
    vector.save(path)
    cost_path.write_text(json.dumps(cost))
    return vector, cost, False


def _choice_label(choice) -> str:
    return f"b={choice.batch_size:<3d} {choice.knob_value / 1e6:5.1f} MHz"


def compare_proxies(out: Path, proxies: tuple[str, ...], seeds: int, gns_samples: int,
                    fresh: bool) -> None:
    weights = pretrained_weights(out)
    profile = _profile(out)
    references = emulated_reference_profiles(DEVICE)
    shares: dict[str, list[float]] = {}
    cpu_shares: dict[str, list[float]] = {}
    agree: dict[str, int] = {}
    worst: dict[str, float] = {}
    total = 0
    for proxy in proxies:
        sweep, sweep_cost, sweep_cached = _timed(
            out / f"sweep-{proxy}-s{seeds}.json", fresh,
            lambda p=proxy: estimate_efficiency(MODEL, p, "auto", weights=weights, seeds=seeds))
        gns_runs = {}
        for name, precondition in (("gns", True), ("gns-raw", False)):
            gns_runs[name] = _timed(
                out / f"{name}-{proxy}-{gns_samples}.json", fresh,
                lambda p=proxy, pre=precondition: estimate_efficiency_gns(
                    MODEL, p, None, weights=weights, sample_budget=gns_samples,
                    precondition=pre))
        cached = " (cached)" if sweep_cached or any(r[2] for r in gns_runs.values()) else ""
        print(f"\n== {proxy}{cached}: proxy target {sweep.target_accuracy:.3f} (auto), "
              f"{len(sweep.seeds)} seeds")
        fit = sweep.fit
        print(f"  sweep:   {sweep.training_samples:>7d} samples trained, "
              f"{sweep_cost['cpu_s']:7.1f} CPU s; {fit.describe() if fit else ''}")
        for name, (gns, gns_cost, _) in gns_runs.items():
            share_samples = gns.training_samples / sweep.training_samples
            share_cpu = gns_cost["cpu_s"] / sweep_cost["cpu_s"]
            shares.setdefault(name, []).append(share_samples)
            cpu_shares.setdefault(name, []).append(share_cpu)
            print(f"  {name + ':':8s} {gns.training_samples:>7d} samples trained, "
                  f"{gns_cost['cpu_s']:7.1f} CPU s ({share_samples:.3f}x the samples, "
                  f"{share_cpu:.3f}x the CPU); {gns.noise_scale.describe()}; accuracy reached "
                  f"{gns.target_accuracy:.3f}")
        print("  r_b      " + " ".join(f"{e.batch_size:>7d}" for e in sweep.entries))
        print("  sweep    " + " ".join(f"{e.ratio:7.3f}" for e in sweep.entries))
        for name, (gns, _, _) in gns_runs.items():
            print(f"  {name:8s} " + " ".join(f"{gns.ratio(e.batch_size):7.3f}"
                                             for e in sweep.entries))
        print(f"  {'cap':>6s}  {'sweep choice':19s}" + "".join(
            f" {name + ' choice':19s} same T/T*" for name in gns_runs))
        for cap in CAPS_W:
            ours = plan(profile, cap, efficiency=sweep,
                        reference_profiles=references).choices["wattcap"]
            label = "none" if cap is None else f"{cap:g} W"
            line = f"  {label:>6s}  {_choice_label(ours):19s}"
            for name, (gns, _, _) in gns_runs.items():
                theirs = plan(profile, cap, efficiency=gns,
                              reference_profiles=references).choices["wattcap"]
                same = (ours.batch_size, ours.knob_value) == (theirs.batch_size,
                                                                 theirs.knob_value)
                # both times judged with the sweep's r_b (its E(b)): what the GNS choice costs
                loss = (theirs.seconds_per_sample * sweep.samples(theirs.batch_size)) / (
                    ours.seconds_per_sample * sweep.samples(ours.batch_size))
                worst[name] = max(worst.get(name, 1.0), loss)
                agree[name] = agree.get(name, 0) + same
                line += f" {_choice_label(theirs):19s} {'yes' if same else 'NO ':4s} {loss:.3f}"
            total += 1
            print(line)
    print()
    for name in shares:
        print(f"{name}: {min(shares[name]):.3f}-{max(shares[name]):.3f}x the sweep's training "
              f"samples, {min(cpu_shares[name]):.3f}-{max(cpu_shares[name]):.3f}x its CPU "
              f"seconds (goal <= {GOAL_SHARE}x: "
              f"{'met' if max(shares[name]) <= GOAL_SHARE else 'NOT met'}); same choice as the "
              f"sweep in {agree[name]} of {total} (proxy, cap) cases; worst T/T* "
              f"{worst[name]:.3f}")


def serial_vs_ray(out: Path, proxy: str, seeds: int, sample_budget: int) -> None:
    weights = pretrained_weights(out)
    settings = dict(weights=weights, seeds=seeds, sample_budget=sample_budget)
    print(f"\n== the same sweep ({MODEL} on {proxy}, {seeds} seed(s), auto target, budget "
          f"{sample_budget}) serially and on a local Ray of 2 CPUs")
    wall = time.perf_counter()
    serial = estimate_efficiency(MODEL, proxy, "auto", executor=SerialExecutor(), **settings)
    serial_s = time.perf_counter() - wall
    wall = time.perf_counter()
    with RayExecutor(num_cpus=2) as ray:
        ray.start()
        started_s = time.perf_counter() - wall
        on_ray = estimate_efficiency(MODEL, proxy, "auto", executor=ray, **settings)
    ray_s = time.perf_counter() - wall

    def untimed(vector: EfficiencyVector) -> dict:
        data = json.loads(vector.to_json())
        data.pop("created_at")
        return data

    equal = untimed(serial) == untimed(on_ray)
    print(f"  serial {serial_s:7.1f} s wall; Ray {ray_s:7.1f} s wall ({started_s:.1f} s of it "
          f"starting Ray): {serial_s / ray_s:.2f}x faster on Ray "
          f"({serial_s / (ray_s - started_s):.2f}x without the start-up); vectors equal up "
          f"to timing fields: {'yes' if equal else 'NO'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 proxy, 2 seeds; tiny Ray part")
    parser.add_argument("--out", type=Path, default=None, help="where results are kept")
    parser.add_argument("--fresh", action="store_true", help="recompute cached results")
    parser.add_argument("--gns-samples", type=int, default=DEFAULT_GNS_SAMPLES)
    parser.add_argument("--skip-ray", action="store_true", help="only the GNS comparison")
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = args.out or cache_dir() / "bench-estimation-cost"
    out.mkdir(parents=True, exist_ok=True)
    if args.quick:
        compare_proxies(out, PROXIES[:1], 2, args.gns_samples, args.fresh)
    else:
        compare_proxies(out, PROXIES, 3, args.gns_samples, args.fresh)
    if not args.skip_ray:
        if args.quick:
            serial_vs_ray(out, "digits-32", 1, 4096)
        else:
            serial_vs_ray(out, "digits-32", 2, 20_000)


if __name__ == "__main__":
    main()
