"""B_noise by target level: does a proxy's large-batch relation depend on where its target lies?

Issue 28 item 10: wattcap's worst scenario (TX2 NX, no cap, digits-5-9-32) comes from every
proxy's r_b ranking the batch sizes otherwise than the target's (proxy B_noise 80-100, target
~25). One explanation would be a mismatch of target *levels*: the critical batch size grows as
training goes on (McCandlish et al. 2018), so a proxy judged at a later stage of its training
than the target would read a larger B_noise. This bench tests that on the sweeps themselves:
for every bundled dataset (digits32-cnn pre-trained on digits-0-4-32 for 2 epochs, as `compare`
does) the full sweep to the "auto" target (6 batch sizes x 3 seeds), its runs kept; then, from
the same recorded curves, the samples to lower targets (shares of the best accuracy the largest
batch size reached, up to the auto share) and the large-batch fit at each. Prints B_noise and
its interval per dataset and share; asserts nothing.

The sweeps take about 2 minutes per dataset on 2 cores; their runs are kept in OUT (default: the
wattcap cache folder's bench-noise-scale-by-target/) and reused.

    python bench/noise_scale_by_target.py [--out DIR] [--seeds 3] [--quick]
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from estimation_cost import MODEL, pretrained_weights

from wattcap.algorithms.curves import samples_to_target
from wattcap.algorithms.large_batch import CONFIDENCE, fit_large_batch
from wattcap.core.run import RunRecord
from wattcap.measure.references import cache_dir
from wattcap.train.efficiency import AUTO_TARGET_SHARE, estimate_efficiency
from wattcap.train.executors import get_executor

#: shares of the best accuracy of the largest batch size; the runs stop at the auto share
SHARES = (0.5, 0.6, 0.7, 0.8, 0.85, AUTO_TARGET_SHARE)
#: the worst scenario's target first, then the bundled proxies
DATASETS = ("digits-5-9-32", "digits-rotated-32", "digits-32", "shapes-32")


def noise_scales(runs: Path, best_accuracy: float) -> list[str]:
    """'B [low, high]' per share, fitted on the recorded runs' samples to each level."""
    longest: dict[tuple[int, int], RunRecord] = {}
    for path in sorted(runs.glob("*.json")):
        record = RunRecord.load(path)
        key = (record.config.batch_size, record.config.seed)
        if key not in longest or len(record.curve) > len(longest[key].curve):
            longest[key] = record  # the largest batch size's target probe ran longest
    cells = []
    for share in SHARES:
        samples: dict[int, list[float | None]] = defaultdict(list)
        budgets: dict[int, list[float]] = defaultdict(list)
        for (b, _), record in sorted(longest.items()):
            samples[b].append(samples_to_target(record.curve, share * best_accuracy))
            budgets[b].append(record.config.sample_budget)
        try:
            fit = fit_large_batch(samples, budgets)
        except ValueError:
            cells.append("none reached")
            continue
        interval = ("" if fit.b_noise_low is None or fit.b_noise_high is None
                    else f" [{fit.b_noise_low:.0f}, {fit.b_noise_high:.0f}]")
        cells.append(f"{fit.b_noise:.0f}{interval}")
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="where the runs are kept")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="two datasets, 2 seeds")
    args = parser.parse_args()
    out = args.out or cache_dir() / "bench-noise-scale-by-target"
    out.mkdir(parents=True, exist_ok=True)
    weights = pretrained_weights(out)
    seeds = 2 if args.quick else args.seeds
    executor = get_executor("processes:2")
    print(f"B_noise [{CONFIDENCE:.0%} interval] of the large-batch fit, by target level (share "
          "of the best accuracy of b = 128)")
    print("| dataset | auto target | " + " | ".join(f"{s:.0%}" for s in SHARES) + " |")
    print("|---|---|" + "---|" * len(SHARES))
    for dataset in DATASETS[:2] if args.quick else DATASETS:
        vector = estimate_efficiency(MODEL, dataset, "auto", weights=weights, seeds=seeds,
                                     executor=executor, runs_dir=out / f"runs-{dataset}")
        best = vector.target_accuracy / AUTO_TARGET_SHARE
        cells = noise_scales(out / f"runs-{dataset}", best)
        print(f"| {dataset} | {vector.target_accuracy:.1%} | " + " | ".join(cells) + " |",
              flush=True)


if __name__ == "__main__":
    main()
