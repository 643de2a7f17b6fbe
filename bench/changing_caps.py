"""Training under caps that change (issue 19): over seeded solar and battery traces on the
emulated Jetson Nano (digits32-cnn, pre-trained on digits 0-4, target digits 5-9), measured
time-to-accuracy of wattcap re-planning against

  (a) a fixed plan for the trace's lowest cap: the static (b, f) that is never above the cap
      whenever anything can train (the plan for the lowest cap the trace reaches that still
      lets some configuration run; below that every method pauses);
  (b) baseline-1 following the cap by frequency alone: the largest batch that fits, at the
      safe frequency of each new cap (pauses when there is none);

and the energy objective against the time objective (energy saved, time it costs), every
ratio measured side by side in one run. Time-to-accuracy is device time, pauses included.

    python bench/changing_caps.py [--quick | --scenario NAME ...] [--seeds N] [--out DIR]
        [--board kind|unkind]

Unkind boards (the default): each seed's runs train on a Nano drawn for that seed (speed,
power, host speed, a sensor that averages and lags; the same board for every method of the
seed) and the profile is measured on a board of its own draw; `--board kind` runs every method
on the emulator's one deterministic board.

Each (scenario, method) trains with N seeds of the target run (data order, initial head);
times are the mean over seeds (a method that misses the target in any seed is "not reached").

The pre-trained weights and the proxy efficiency vector are computed once and cached (in
WATTCAP_CACHE_DIR, else ~/.cache/wattcap/bench-changing-caps): the first run takes several
minutes longer.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from wattcap.algorithms.planner import Replanner
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.profile import ProfileTable
from wattcap.core.run import RunRecord
from wattcap.data import get_dataset
from wattcap.devices import EmulatedDevice
from wattcap.devices.caps import BatteryCap, CapSource, SolarCap
from wattcap.experiments.replay import PROFILE_BOARD_SEED, BoardMode, run_device
from wattcap.experiments.significance import compare_times
from wattcap.measure.profiling import Profiler
from wattcap.measure.references import cache_dir, emulated_reference_profiles
from wattcap.train.efficiency import estimate_efficiency
from wattcap.train.loop import TrainConfig, pretrain, train_to_accuracy

DEVICE = "jetson-nano"
MODEL = "digits32-cnn"
PRETRAIN_DATA, PROXY_DATA, TARGET_DATA = "digits-0-4-32", "digits-rotated-32", "digits-5-9-32"
TARGET_ACCURACY = 0.9
#: device seconds of each trace looked at for its lowest cap (longer than any run here)
HORIZON_S = 60.0
#: a day of 40 device seconds: clouds pass every second or so, on the time scale of a run
SOLAR_DAY_S = 40.0


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str  # solar | battery
    seed: int = 0
    capacity_wh: float = 0.0
    max_w: float = 0.0

    def source(self) -> CapSource:
        if self.kind == "solar":
            return SolarCap(seed=self.seed, day_length_s=SOLAR_DAY_S)
        return BatteryCap(capacity_wh=self.capacity_wh, max_power_w=self.max_w)

    def describe(self) -> str:
        return self.source().describe()


SCENARIOS = (
    Scenario("solar-1", "solar", seed=1),
    Scenario("solar-2", "solar", seed=2),
    Scenario("solar-3", "solar", seed=3),
    Scenario("battery-36J", "battery", capacity_wh=0.01, max_w=6.0),
    Scenario("battery-72J", "battery", capacity_wh=0.02, max_w=6.0),
)
QUICK = ("solar-2", "battery-72J")


def bench_inputs(folder: Path) -> tuple[Path, EfficiencyVector]:
    """Pre-trained weights and the proxy efficiency vector (cached)."""
    folder.mkdir(parents=True, exist_ok=True)
    weights = folder / f"{MODEL}-{PRETRAIN_DATA}.safetensors"
    if not weights.exists():
        print(f"pre-training {MODEL} on {PRETRAIN_DATA} (once) ...", flush=True)
        pretrain(MODEL, PRETRAIN_DATA, weights, epochs=2)
    vector_path = folder / f"efficiency-{MODEL}-{PROXY_DATA}.json"
    try:
        vector = EfficiencyVector.load(vector_path)
    except Exception:  # noqa: BLE001 - missing or stale cache: estimate again
        print(f"estimating r_b on {PROXY_DATA} (once, a few minutes) ...", flush=True)
        vector = estimate_efficiency(MODEL, PROXY_DATA, TARGET_ACCURACY, weights=weights,
                                     seeds=1)
        vector.save(vector_path)
    return weights, vector


def lowest_runnable_cap_w(scenario: Scenario, replanner: Replanner) -> float:
    """The lowest cap of the trace at which some configuration still runs: what a fixed plan
    must be made for so that it is never above the cap while training is possible. A battery's
    cap depends on what the run draws: it falls to below every configuration, so its fixed
    plan is the one for the lowest feasible cap."""
    floor_w = replanner.lowest_feasible_cap_w
    if scenario.kind != "solar":
        return floor_w
    source = scenario.source()
    caps = np.array([source.cap_w(t) for t in np.arange(0.0, HORIZON_S, 0.05)])
    runnable = caps[caps >= floor_w]
    return float(runnable.min()) if runnable.size else floor_w


@dataclass
class Runs:
    """One method's runs in one scenario, one per seed."""

    records: list[RunRecord]

    @property
    def time_s(self) -> float | None:
        times = [r.time_to_accuracy_s for r in self.records]
        return None if None in times else statistics.mean(times)  # type: ignore[arg-type]

    @property
    def energy_j(self) -> float:
        return statistics.mean(r.energy_j for r in self.records)

    @property
    def samples(self) -> str:
        return "/".join(f"{r.samples_to_target:.0f}" if r.samples_to_target is not None
                        else "-" for r in self.records)

    @property
    def paused_s(self) -> float:
        return statistics.mean(r.paused_s for r in self.records)


def run(scenario: Scenario, profile: ProfileTable, vector: EfficiencyVector, weights: Path,
        method: str, policy: str, batch_size: int, frequency_hz: int, seed: int,
        objective: str = "time", board: BoardMode = "unkind") -> RunRecord:
    train, test = get_dataset(TARGET_DATA).split(0.2, seed=0)
    config = TrainConfig(model=MODEL, batch_size=batch_size, target_accuracy=TARGET_ACCURACY,
                         seed=seed)
    with run_device(DEVICE, seed, board) as device:
        device.set_frequency_hz(frequency_hz)
        return train_to_accuracy(
            config, train, test, device=device, weights=weights, power_cap=scenario.source(),
            profile=profile, efficiency=vector, objective=objective, cap_policy=policy,
            method=method, drift_tolerance=0.0,
            reference_profiles=emulated_reference_profiles(DEVICE))


def ratio(numerator: Runs, denominator: Runs) -> float:
    if numerator.time_s is None or denominator.time_s is None:
        return math.inf if denominator.time_s is not None else math.nan
    return numerator.time_s / denominator.time_s


def separated(numerator: Runs, denominator: Runs) -> str:
    """Whether two methods' times differ beyond the seeds' noise (Welch on log time), where
    every seed of both reached the target: 'beyond noise', 'within noise' or '-'."""
    if numerator.time_s is None or denominator.time_s is None:
        return "-"
    comparison = compare_times([r.time_to_accuracy_s for r in numerator.records],  # type: ignore[misc]
                               [r.time_to_accuracy_s for r in denominator.records])  # type: ignore[misc]
    if comparison.separated is None:
        return "1 seed"
    return "beyond noise" if comparison.separated else "within noise"


def seconds(runs: Runs) -> str:
    return "not reached" if runs.time_s is None else f"{runs.time_s:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    parser.add_argument("--scenario", action="append", default=None,
                        choices=[s.name for s in SCENARIOS],
                        help="run only this scenario (repeat for several; default: all)")
    parser.add_argument("--seeds", type=int, default=1, help="training seeds per run")
    parser.add_argument("--out", type=Path, default=None, help="folder for the run records")
    parser.add_argument("--board", choices=("kind", "unkind"), default="unkind",
                        help="a Nano drawn per seed, the profile on its own (default), or the "
                             "emulator's one deterministic board")
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = args.out or Path(tempfile.mkdtemp(prefix="wattcap-changing-caps-"))
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    weights, vector = bench_inputs(cache_dir() / "bench-changing-caps")
    profile_board = EmulatedDevice(DEVICE) if args.board == "kind" else \
        run_device(DEVICE, PROFILE_BOARD_SEED, args.board)
    profile = Profiler(profile_board, MODEL).run(exhaustive=True)
    replanner = Replanner(profile, vector)
    b_max = profile.max_batch_size
    assert b_max is not None
    scenarios = [s for s in SCENARIOS if (not args.quick or s.name in QUICK)
                 and (args.scenario is None or s.name in args.scenario)]
    rows = []
    for scenario in scenarios:
        start_cap = scenario.source().cap_w(0.0)
        first = replanner.choose(max(start_cap, replanner.lowest_feasible_cap_w))
        fixed = replanner.choose(lowest_runnable_cap_w(scenario, replanner))
        # baseline-1 starts at the largest batch; its first frequency comes from the cap
        methods = {
            "wattcap": ("wattcap", "replan", first, "time"),
            "fixed": ("wattcap", "fixed", fixed, "time"),
            "baseline-1": ("baseline-1", "safe-frequency", None, "time"),
            "energy": ("wattcap", "replan", first, "energy"),
        }
        records: dict[str, Runs] = {}
        for label, (method, policy, choice, objective) in methods.items():
            b, f = (b_max, profile.knob_values[0]) if choice is None else \
                (choice.batch_size, choice.knob_value)
            records[label] = Runs([
                run(scenario, profile, vector, weights, method, policy, b, f, seed, objective,
                    args.board)
                for seed in range(args.seeds)])
            for seed, record in enumerate(records[label].records):
                record.save(out / f"{scenario.name}-{label}-seed{seed}.json")
        rows.append((scenario, fixed, records))
        print(f"{scenario.name}: done ({time.monotonic() - started:.0f} s)", flush=True)

    print(f"\n{MODEL} on the emulated {DEVICE} ({args.board} boards), target "
          f"{TARGET_ACCURACY:.0%} on {TARGET_DATA}; time-to-accuracy in device seconds (pauses "
          "included)")
    header = (f"{'scenario':12} {'T wattcap':>10} {'T fixed':>12} {'fixed b,MHz':>12} "
              f"{'T base-1':>12} {'fixed/W':>8} {'base-1/W':>9} {'paused W':>9} "
              f"{'E saved':>8} {'T cost':>7}  base-1 vs wattcap")
    print(header)
    fixed_ratios, b1_ratios, savings, costs = [], [], [], []
    for scenario, fixed, records in rows:
        ours, energy = records["wattcap"], records["energy"]
        a, b = ratio(records["fixed"], ours), ratio(records["baseline-1"], ours)
        saved = 1 - energy.energy_j / ours.energy_j if energy.time_s and ours.time_s \
            else math.nan
        cost = ratio(energy, ours)
        for values, value in ((fixed_ratios, a), (b1_ratios, b), (savings, saved),
                              (costs, cost)):
            values.append(value)
        print(f"{scenario.name:12} {seconds(ours):>10} {seconds(records['fixed']):>12} "
              f"{f'{fixed.batch_size},{fixed.knob_value / 1e6:.0f}':>12} "
              f"{seconds(records['baseline-1']):>12} {a:8.2f} {b:9.2f} "
              f"{ours.paused_s:9.2f} {saved:8.1%} {cost:7.2f}  "
              f"{separated(records['baseline-1'], ours)}")
    finite = [r for r in fixed_ratios if math.isfinite(r)]
    if finite:
        print(f"\nT(fixed plan for the lowest cap)/T(wattcap): median "
              f"{statistics.median(finite):.2f}, min {min(finite):.2f}"
              + (f" ({len(fixed_ratios) - len(finite)} fixed runs did not reach the target)"
                 if len(finite) < len(fixed_ratios) else ""))
    finite = [r for r in b1_ratios if math.isfinite(r)]
    if finite:
        print(f"T(baseline-1 following by frequency)/T(wattcap): median "
              f"{statistics.median(finite):.2f}, min {min(finite):.2f}"
              + (f" ({len(b1_ratios) - len(finite)} baseline-1 runs did not reach the target)"
                 if len(finite) < len(b1_ratios) else ""))
    finite = [(s, c) for s, c in zip(savings, costs, strict=True)
              if math.isfinite(s) and math.isfinite(c)]
    if finite:
        print(f"energy objective vs time: energy saved median "
              f"{statistics.median(s for s, _ in finite):.1%}, time cost median "
              f"{statistics.median(c for _, c in finite):.2f}x")
    print("\nsamples to target per seed (b changes with the plan; fixed and baseline-1 keep "
          "theirs):")
    print(f"{'scenario':12} {'wattcap':>16} {'fixed':>16} {'baseline-1':>16} {'energy':>16}")
    for scenario, _, records in rows:
        print(f"{scenario.name:12} " + " ".join(f"{records[m].samples:>16}" for m in
                                               ("wattcap", "fixed", "baseline-1", "energy")))
    print(f"\nrecords in {out}; {args.seeds} seed(s); bench took "
          f"{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
