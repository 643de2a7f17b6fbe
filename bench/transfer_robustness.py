"""The robust first choice (`plan --transfer-factor K`) over the decision-quality scenarios,
from the runs `bench/decision_quality.py --out DIR` recorded there: for each (device, cap,
target) and each K, the batch size the minimax-regret rule chooses, and its time to the target
over the fastest's (a brute force over the same target runs).

    python bench/transfer_robustness.py DIR [--factors 1 2 3 4 10] [--board unkind|kind]

On unkind boards (the default) each K is a `wattcap compare --board unkind --transfer-factor K`
on DIR's runs and profiles, in DIR/transfer-K<K> (only the replays are new: about a minute per K
on 2 cores): every seed's runs replay on a board state drawn for it, wattcap's run is a Session's
(it may choose again once its first windows read the board), and the fastest is the brute force
over the same replays, as in the decision-quality bench. On the kind board (seconds, nothing
replayed) a time is the target's mean samples to target at b (over its seeds) times the
profile's seconds per sample at f*(b), the highest clock under the cap and its margin. K = 1 is
Algorithm 1 on the proxy's r_b (the decision-quality bench's own rows); K comes from the
command line, and no K is a default of wattcap.
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

# a sibling script (bench/ is the script's own folder on sys.path)
from decision_quality import ratio, run_compare  # isort: skip

#: what a comparison writes of its own; every other entry of DIR is an input the K folders share
OWN_OUTPUTS = ("comparison.json", "results.csv", "report.md", "report.html")


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


def kind_table(out: Path, factors: list[float]) -> dict[float, list[float]]:
    """Each K's T(wattcap)/T(fastest) per scenario on the kind board (see the module)."""
    comparison = Comparison.load(out / "comparison.json")
    efficiency = EfficiencyVector.load(out / "efficiency-proxy.json")
    samples = target_samples(out)
    ratios: dict[float, list[float]] = {k: [] for k in factors}
    print(f"proxy {comparison.proxy}: {efficiency.ratio_notes()[0]}")
    print(f"{'device':14} {'cap':>6} {'target':16} "
          + " ".join(f"{f'K={k:g}: b  T/fastest':>18}" for k in factors))
    for scenario in DEFAULT_SCENARIOS:
        profile = ProfileTable.load(
            out / f"profile-{scenario.device}-{comparison.model}.json")
        replanner = Replanner(profile, efficiency)
        for cap, target in ((c, t) for c in scenario.caps_w for t in comparison.targets):
            frontier = replanner.selector.frontier(cap)
            time_s = {b: samples[(target, b)] * point.seconds_per_sample
                      for b, point in frontier.items() if (target, b) in samples}
            fastest_s = min(time_s.values())
            cells = []
            for factor in factors:
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
    return ratios


def factor_folder(out: Path, factor: float) -> Path:
    """DIR/transfer-K<K>: DIR's inputs (runs, profiles, the proxy's vector, the model) linked,
    so that a K's comparison reuses them and leaves DIR's own comparison as it was."""
    folder = out / f"transfer-K{factor:g}"
    folder.mkdir(exist_ok=True)
    for entry in out.iterdir():
        link = folder / entry.name
        if (entry.name in OWN_OUTPUTS or entry.name.startswith("transfer-")
                or entry.suffix == ".png" or link.exists() or link.is_symlink()):
            continue
        link.symlink_to(entry.resolve(), target_is_directory=entry.is_dir())
    return folder


def unkind_table(out: Path, factors: list[float], seeds: int) -> dict[float, list[float]]:
    """Each K's T(wattcap)/T(fastest) per scenario on unkind boards (see the module)."""
    comparisons = {k: run_compare(factor_folder(out, k), seeds, False, None, "serial",
                                  board="unkind", transfer_factor=None if k == 1 else k)
                   for k in factors}
    ratios: dict[float, list[float]] = {k: [] for k in factors}
    first = comparisons[factors[0]]
    print(f"proxy {first.proxy}; unkind boards, {seeds} seed(s); T(wattcap)/T(fastest), "
          "the batch size wattcap's plan chose")
    print(f"{'device':14} {'cap':>6} {'target':16} "
          + " ".join(f"{f'K={k:g}: b  T/fastest':>18}" for k in factors))
    keys = list(dict.fromkeys((r.device, r.power_cap_w, r.target) for r in first.results))
    for device, cap, target in keys:
        cells = []
        for factor, comparison in comparisons.items():
            ours = comparison.get(device, cap, target, "wattcap")
            fastest = comparison.get(device, cap, target, "fastest")
            measured = None if ours is None or fastest is None else ratio(ours.time_s,
                                                                           fastest.time_s)
            if ours is None or measured is None:
                cells.append(f"{'-':>9} {'missed':>8}")
                continue
            ratios[factor].append(measured[0])
            cells.append(f"{ours.batch_size:>9} {measured[0]:>8.3f}")
        cap_text = "none" if cap is None else f"{cap:g} W"
        print(f"{device:14} {cap_text:>6} {target:16} " + " ".join(cells))
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the folder of bench/decision_quality.py --out")
    parser.add_argument("--factors", type=float, nargs="+", default=[1.0, 2.0, 3.0, 4.0])
    parser.add_argument("--board", choices=("kind", "unkind"), default="unkind",
                        help="replay on unkind boards (default) or read the kind board's math")
    parser.add_argument("--seeds", type=int, default=3,
                        help="the seeds DIR's runs have (unkind: compare --seeds)")
    args = parser.parse_args()
    if args.board == "kind":
        ratios = kind_table(args.out, args.factors)
    else:
        ratios = unkind_table(args.out, args.factors, args.seeds)
    for factor, values in ratios.items():
        print(f"K={factor:g}: T(wattcap)/T(fastest) worst {max(values):.3f}, median "
              f"{statistics.median(values):.3f} over {len(values)} scenarios ({args.board} "
              "boards)")


if __name__ == "__main__":
    main()
