"""Decision quality over imported tables, per knob kind (issue 28's benchmark).

From the runs a `wattcap compare` recorded (its folder: the target runs in runs/, the proxy's
vector), this writes traces in the documented measured format (`wattcap import` CSV layouts and
a trace manifest; the numbers are generated from the emulator, not measured hardware) for each
emulated device and knob kind: the GPU clock (every locked clock), the emulated power limit
(8 limits over the board's range; the caps then hold average power, as a limit does) and the
power modes. Each trace is replayed with `compare --device trace:`'s code (no training) at caps
spread over its table's power, and the bench prints, per knob kind, the time over the
brute-force fastest of wattcap, baseline-1 (for the power limit: the largest batch at
limit = cap, `nvidia-smi -pl CAP`) and baseline-2: median and worst over the scenarios.

    python bench/decision_quality.py --out DQ         # records the runs (or any compare DIR)
    python bench/trace_quality.py --runs DQ/digits-rotated-32 [--out DIR]

Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.profile import ProfileTable
from wattcap.core.run import RunRecord
from wattcap.devices import EmulatedDevice
from wattcap.experiments.compare import Comparison, efficiency_from_runs
from wattcap.experiments.trace import (
    TraceManifest,
    TraceRuns,
    TraceTable,
    load_trace,
    replay_trace,
)
from wattcap.measure.imported_tables import export_efficiency, export_profile
from wattcap.measure.profiling import Profiler

DEVICES = ("jetson-nano", "jetson-tx2nx")
KNOBS = ("gpu_clock", "power_limit", "power_mode")
METHODS = ("wattcap", "baseline-1", "baseline-2")


def profile_for(device: str, model: str, knob: str) -> ProfileTable:
    """The emulated device's table of `knob` for the model."""
    emulated = EmulatedDevice(device)
    profiler = Profiler(emulated, model)
    if knob == "power_limit":
        emulated.power_limit_emulated = True
        return profiler.run_power_limits()
    if knob == "power_mode":
        return profiler.run_power_modes()
    return profiler.run(exhaustive=True)


def write_trace(folder: Path, profile: ProfileTable, proxy: EfficiencyVector,
                targets: dict[str, EfficiencyVector]) -> Path:
    """A trace in the documented format (CSV tables and a manifest)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "profile.csv").write_text(export_profile(profile))
    (folder / "proxy.csv").write_text(export_efficiency(proxy))
    for name, vector in targets.items():
        (folder / f"target-{name}.csv").write_text(export_efficiency(vector))
    manifest = TraceManifest(
        label=f"generated from the emulated {profile.device} (not measured hardware)",
        device=profile.device, model=profile.model, input_shape=profile.input_shape,
        profile=TraceTable(file="profile.csv",
                           power_sampling=f"instant:{profile.sensor_period_s:g}"),
        proxy=TraceRuns(file="proxy.csv", dataset=proxy.dataset, target=proxy.target_accuracy),
        targets=[TraceRuns(file=f"target-{name}.csv", dataset=name,
                           target=vector.target_accuracy)
                 for name, vector in targets.items()],
        # a power limit holds average power: the caps of such a device do too
        cap_on="average" if profile.knob_kind == "power_limit" else "peak")
    return manifest.save(folder / "trace.json")


def caps_for(profile: ProfileTable, on_average: bool) -> list[float | None]:
    """Three caps spread inside the table's power range (where they bind), and no cap."""
    powers = sorted(p.avg_power_w if on_average else p.peak_power_w for p in profile.points)
    low, high = powers[0], powers[-1]
    return [round(low + (high - low) * q, 2) for q in (0.35, 0.6, 0.85)] + [None]


def target_vectors(runs_dir: Path, comparison: Comparison,
                   input_shape: list[int]) -> dict[str, EfficiencyVector]:
    """Each target's runs as a vector of per-seed samples (misses kept as misses)."""
    vectors = {}
    for target in comparison.targets:
        runs = {}
        for path in runs_dir.glob(f"math-{target}-b*-s*.json"):
            record = RunRecord.load(path)
            if record.config is not None and record.config.seed < comparison.seeds:
                runs[(record.batch_size, record.config.seed)] = record
        vector = efficiency_from_runs(runs, comparison.model, target, comparison.seeds,
                                      comparison.target_accuracy, input_shape, measured=False)
        if vector is not None:
            vectors[target] = vector
    return vectors


def ratios(comparison: Comparison) -> dict[str, list[float]]:
    """Per method, expected time (restarts included where a seed missed) over the fastest's,
    over the scenarios where both are known."""
    found: dict[str, list[float]] = {m: [] for m in METHODS}
    for r in comparison.results:
        fastest = comparison.get(r.device, r.power_cap_w, r.target, "fastest")
        best = None if fastest is None else fastest.expected_time_s
        ours = r.expected_time_s
        if r.method in found and best and ours is not None:
            found[r.method].append(ours / best)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, required=True,
                        help="a `wattcap compare` folder (comparison.json, runs/, "
                        "efficiency-proxy.json), or one above it holding runs/")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    comparison = Comparison.load(args.runs / "comparison.json")
    proxy = EfficiencyVector.load(args.runs / "efficiency-proxy.json")
    runs_dir = args.runs / "runs" if (args.runs / "runs").is_dir() else args.runs.parent / "runs"
    targets = target_vectors(runs_dir, comparison, proxy.input_shape)
    out = args.out or Path(tempfile.mkdtemp(prefix="wattcap-traces-"))
    print(f"{comparison.model}, proxy {proxy.dataset}, targets {', '.join(targets)}, "
          f"{comparison.seeds} seeds; traces in {out}")
    print(f"{'knob':12} {'scenarios':>9} " + " ".join(
        f"{m + ' median':>17} {m + ' worst':>16}" for m in METHODS))
    for knob in KNOBS:
        found: dict[str, list[float]] = {m: [] for m in METHODS}
        for device in DEVICES:
            profile = profile_for(device, comparison.model, knob)
            path = write_trace(out / f"{device}-{knob}", profile, proxy, targets)
            trace = load_trace(path)
            replayed = replay_trace(trace, caps_for(profile, trace.manifest.cap_on == "average"))
            for method, values in ratios(replayed).items():
                found[method] += values
        cells = []
        for method in METHODS:
            values = found[method]
            cells += [f"{statistics.median(values):>17.3f}" if values else f"{'-':>17}",
                      f"{max(values):>16.3f}" if values else f"{'-':>16}"]
        print(f"{knob:12} {len(found['wattcap']):>9} " + " ".join(cells))


if __name__ == "__main__":
    main()
