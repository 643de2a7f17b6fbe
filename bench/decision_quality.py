"""Decision quality over the default scenario grid (emulated Nano and TX2 NX, bundled tasks):
for each scenario T(wattcap)/T(fastest), T(baseline-1)/T(wattcap), T(baseline-2)/T(wattcap)
from measured time-to-accuracy (mean over seeds, with Welch's test on log times saying where
the seeds do not separate two methods), then the worst and median. Goals: worst
T(wattcap)/T(fastest) <= 1.02 (the reference paper's worst was 1.08), median
T(baseline-1)/T(wattcap) >= 1.5 and never below 1 beyond noise.

    python bench/decision_quality.py [--out DIR] [--seeds 3] [--quick] [--every-proxy]
                                     [--ray processes:2|local|ADDRESS|serial] [--risk Q]
                                     [--board kind|unkind] [--transfer-factor K]

Runs `wattcap compare` into DIR (reusing the runs recorded there) and reads its results;
`--risk 0.9` plans on r_b's 90 % quantile and `--transfer-factor 3` chooses robustly to a
target B_noise up to 3x from the proxy's (run either on the DIR of a run without: only the
replays are new). With
--every-proxy, every bundled proxy is paired with every target (one `compare` per proxy, the
target runs shared), so that no single pairing carries the result. The runs replay every seed
on a board state drawn for it and the fastest is found by replaying (compare --board unkind, the
default); `--board kind` replays them on the one deterministic board; on the DIR of a run of one
kind only the replays of the other are new.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from wattcap.experiments.compare import Comparison
from wattcap.experiments.significance import compare_times

#: the bundled 32x32 proxies (digits-0-4-32 pre-trains the model, so it is no proxy)
PROXIES = ("digits-rotated-32", "digits-32", "shapes-32")
METHODS = ("wattcap", "baseline-1", "baseline-2", "fastest")


def run_compare(out: Path, seeds: int, quick: bool, proxy: str | None,
                where: str, risk: float | None = None, board: str = "kind",
                transfer_factor: float | None = None) -> Comparison:
    command = [sys.executable, "-m", "wattcap.cli", "compare", "--out", str(out),
               "--seeds", str(seeds), "--ray", where, "--board", board] + (
                   ["--quick"] if quick else []) + (
                   ["--risk", str(risk)] if risk is not None else []) + (
                   ["--transfer-factor", str(transfer_factor)]
                   if transfer_factor is not None else [])
    if proxy is not None:
        command += ["--proxy", proxy]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return Comparison.load(out / "comparison.json")


def ratio(a: list[float | None], b: list[float | None]) -> tuple[float, str] | None:
    """mean(a)/mean(b) and its label to 3 decimals ('1.420x', '1.005x (within noise)': the
    goals are 2 % apart), or None when a seed missed the target."""
    if None in a or None in b:
        return None
    result = compare_times(a, b)  # type: ignore[arg-type]
    return result.ratio, result.ratio_label(3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one seed, the first target")
    parser.add_argument("--ray", default="processes:2",
                        help="where the trainings run (compare --ray; default: 2 local "
                        "processes, as the runs are independent)")
    parser.add_argument("--every-proxy", action="store_true",
                        help=f"pair every proxy ({', '.join(PROXIES)}) with every target")
    parser.add_argument("--risk", type=float, default=None,
                        help="plan on this quantile of r_b (compare --risk)")
    parser.add_argument("--transfer-factor", type=float, default=None,
                        help="wattcap chooses robustly to a target B_noise up to this factor "
                        "from the proxy's (compare --transfer-factor)")
    parser.add_argument("--board", choices=("kind", "unkind"), default="unkind",
                        help="the emulated boards the runs replay on (compare --board; "
                        "default: unkind, a board per seed)")
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    out = args.out or Path(tempfile.mkdtemp(prefix="wattcap-decision-"))
    proxies = PROXIES if args.every_proxy else (None,)
    ours_vs_fastest, b1_vs_ours, b2_vs_ours = [], [], []
    b1_losses = []
    print(f"{'proxy':18} {'device':13} {'cap':>6} {'target':15} {'W/fastest':>10} "
          f"{'B1/W':>24} {'B2/W':>24}")
    for proxy in proxies:
        # one folder per proxy (its comparison.json), the target runs reused through `runs`
        folder = out if proxy is None else out / proxy
        if proxy is not None and not (folder / "runs").exists():
            folder.mkdir(parents=True, exist_ok=True)
            shared = out / "runs"
            shared.mkdir(parents=True, exist_ok=True)
            (folder / "runs").symlink_to(shared.resolve(), target_is_directory=True)
        comparison = run_compare(folder, args.seeds, args.quick, proxy, args.ray, args.risk,
                                 args.board, args.transfer_factor)
        keys = list(dict.fromkeys((r.device, r.power_cap_w, r.target)
                                  for r in comparison.results))
        for device, cap, target in keys:
            times = {}
            for method in METHODS:
                r = comparison.get(device, cap, target, method)
                times[method] = None if r is None else r.time_s
            cap_label = "none" if cap is None else f"{cap:g} W"
            row = f"{comparison.proxy:18} {device:13} {cap_label:>6} {target:15}"
            if any(t is None for t in times.values()):
                print(f"{row}  (a method has no choice here)")
                continue
            vs_fastest = ratio(times["wattcap"], times["fastest"])
            vs_b1 = ratio(times["baseline-1"], times["wattcap"])
            vs_b2 = ratio(times["baseline-2"], times["wattcap"])
            if vs_fastest is None or vs_b1 is None or vs_b2 is None:
                print(f"{row}  (a method missed the target in a seed)")
                continue
            ours_vs_fastest.append(vs_fastest[0])
            b1_vs_ours.append(vs_b1[0])
            b2_vs_ours.append(vs_b2[0])
            if vs_b1[0] < 1 and "within noise" not in vs_b1[1]:
                b1_losses.append(row.strip())
            print(f"{row} {vs_fastest[0]:10.3f} {vs_b1[1]:>24} {vs_b2[1]:>24}")
    if ours_vs_fastest:
        print(f"\n{len(ours_vs_fastest)} scenarios, {args.seeds} seed(s) each, {args.board} "
              "boards")
        print(f"T(wattcap)/T(fastest): worst {max(ours_vs_fastest):.3f}, median "
              f"{statistics.median(ours_vs_fastest):.3f}   (goal: worst <= 1.02; paper 1.08)")
        print(f"T(baseline-1)/T(wattcap): median {statistics.median(b1_vs_ours):.3f}, "
              f"min {min(b1_vs_ours):.3f}   (goal: median >= 1.5, never below 1 beyond noise: "
              f"{len(b1_losses)} scenario(s) below)")
        print(f"T(baseline-2)/T(wattcap): median {statistics.median(b2_vs_ours):.3f}, "
              f"min {min(b2_vs_ours):.3f}")
    print(f"(results in {out})")


if __name__ == "__main__":
    main()
