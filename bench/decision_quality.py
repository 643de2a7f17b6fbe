"""Decision quality over the default scenario grid (emulated Nano and TX2 NX, bundled tasks):
for each scenario T(wattcap)/T(fastest), T(baseline-1)/T(wattcap), T(baseline-2)/T(wattcap)
from measured time-to-accuracy, then the worst and median. Goal: worst
T(wattcap)/T(fastest) ≤ 1.02 (the reference paper's worst was 1.08).

    python bench/decision_quality.py [--out DIR] [--seeds 1] [--quick]

Runs `wattcap compare` into DIR (reusing what is recorded there) and reads its results.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from wattcap.experiments.compare import Comparison


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="wattcap-decision-"))
    command = [sys.executable, "-m", "wattcap.cli", "compare", "--out", str(out),
               "--seeds", str(args.seeds)] + (["--quick"] if args.quick else [])
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    comparison = Comparison.load(out / "comparison.json")
    keys = []
    for r in comparison.results:
        if (r.device, r.power_cap_w, r.target) not in keys:
            keys.append((r.device, r.power_cap_w, r.target))
    ours_vs_fastest, b1_vs_ours, b2_vs_ours = [], [], []
    print(f"{'device':14} {'cap':>7} {'target':16} {'W/fastest':>10} {'B1/W':>7} {'B2/W':>7}")
    for device, cap, target in keys:
        times = {}
        for method in ("wattcap", "baseline-1", "baseline-2", "fastest"):
            r = comparison.get(device, cap, target, method)
            times[method] = None if r is None else r.time_mean_s
        if None in times.values():
            print(f"{device:14} {str(cap):>7} {target:16}  (a method did not reach the target)")
            continue
        a = times["wattcap"] / times["fastest"]
        b = times["baseline-1"] / times["wattcap"]
        c = times["baseline-2"] / times["wattcap"]
        ours_vs_fastest.append(a)
        b1_vs_ours.append(b)
        b2_vs_ours.append(c)
        cap_label = "none" if cap is None else f"{cap:g} W"
        print(f"{device:14} {cap_label:>7} {target:16} {a:10.3f} {b:7.2f} {c:7.2f}")
    if ours_vs_fastest:
        print(f"\nT(wattcap)/T(fastest): worst {max(ours_vs_fastest):.3f}, median "
              f"{statistics.median(ours_vs_fastest):.3f}   (goal: worst <= 1.02; paper 1.08)")
        print(f"T(baseline-1)/T(wattcap): median {statistics.median(b1_vs_ours):.2f}, "
              f"min {min(b1_vs_ours):.2f}")
        print(f"T(baseline-2)/T(wattcap): median {statistics.median(b2_vs_ours):.2f}, "
              f"min {min(b2_vs_ours):.2f}")
    print(f"(results in {out})")


if __name__ == "__main__":
    main()
