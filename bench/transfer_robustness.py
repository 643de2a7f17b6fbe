"""The robust first choice (`plan --transfer-factor K`) over the decision-quality scenarios,
on the kind board, from the runs `bench/decision_quality.py --out DIR` recorded there: for each
(device, cap, target) and each K, the batch size the minimax-regret rule chooses, and its time
to the target over the fastest's (a brute force over the same measured target runs).

    python bench/transfer_robustness.py DIR [--factors 1 2 3 4 10]

Times are the kind board's: the target's mean samples to target at b (over its seeds) times the
profile's seconds per sample at f*(b), the highest clock under the cap and its margin; K = 1 is
Algorithm 1 on the proxy's r_b (the decision-quality bench's kind rows). Nothing is trained or
replayed (seconds); K comes from the command line, and no K is a default of wattcap.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from wattcap.algorithms.planner import Replanner
from wattcap.algorithms.transfer import TransferRule
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.profile import ProfileTable
from wattcap.core.run import RunRecord
from wattcap.experiments.compare import DEFAULT_SCENARIOS, Comparison


def target_samples(out: Path) -> dict[tuple[str, int], float]:
    """(target dataset, b) -> mean samples to target over the seeds, where every seed
    reached it."""
    per_seed: dict[tuple[str, int], list[float | None]] = {}
    for path in sorted((out / "runs").glob("math-*.json")):
        run = RunRecord.load(path)
        key = (run.dataset, run.batch_size)
        per_seed.setdefault(key, []).append(run.samples_to_target if run.reached else None)
    return {key: statistics.mean(s) for key, s in per_seed.items()  # type: ignore[arg-type]
            if None not in s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the folder of bench/decision_quality.py --out")
    parser.add_argument("--factors", type=float, nargs="+", default=[1.0, 2.0, 3.0, 4.0])
    args = parser.parse_args()
    comparison = Comparison.load(args.out / "comparison.json")
    efficiency = EfficiencyVector.load(args.out / "efficiency-proxy.json")
    samples = target_samples(args.out)
    ratios: dict[float, list[float]] = {k: [] for k in args.factors}
    print(f"proxy {comparison.proxy}: {efficiency.ratio_notes()[0]}")
    print(f"{'device':14} {'cap':>6} {'target':16} "
          + " ".join(f"{f'K={k:g}: b  T/fastest':>18}" for k in args.factors))
    for scenario in DEFAULT_SCENARIOS:
        profile = ProfileTable.load(
            args.out / f"profile-{scenario.device}-{comparison.model}.json")
        replanner = Replanner(profile, efficiency)
        for cap, target in ((c, t) for c in scenario.caps_w for t in comparison.targets):
            frontier = replanner.selector.frontier(cap)
            time_s = {b: samples[(target, b)] * point.seconds_per_sample
                      for b, point in frontier.items() if (target, b) in samples}
            fastest_s = min(time_s.values())
            cells = []
            for factor in args.factors:
                rule = TransferRule.of(efficiency, replanner.ratios, factor)
                assert isinstance(rule, TransferRule), rule
                choice = rule.choose(frontier)
                assert choice is not None
                b = choice.point.batch_size
                if b not in time_s:  # a seed of the target missed at b: no mean time
                    cells.append(f"{b:>9} {'missed':>8}")
                    continue
                ratios[factor].append(time_s[b] / fastest_s)
                cells.append(f"{b:>9} {time_s[b] / fastest_s:>8.3f}")
            cap_text = "none" if cap is None else f"{cap:g} W"
            print(f"{scenario.device:14} {cap_text:>6} {target:16} " + " ".join(cells))
    print()
    proxy = {e.batch_size: round(e.ratio, 3) for e in efficiency.entries if e.ratio}
    print(f"r_b, proxy {comparison.proxy}: {proxy}")
    for target in comparison.targets:
        own = {b: s for (t, b), s in sorted(samples.items()) if t == target}
        print(f"r_b, target {target} (its own runs): "
              f"{ {b: round(s / own[max(own)], 3) for b, s in own.items()} }")
    for factor, values in ratios.items():
        print(f"K={factor:g}: T(wattcap)/T(fastest) worst {max(values):.3f}, median "
              f"{statistics.median(values):.3f} over {len(values)} scenarios")


if __name__ == "__main__":
    main()
