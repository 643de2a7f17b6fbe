"""The online correction on a target whose noise scale differs from its proxy's by design:
digits with a share of the training labels drawn at random (40 %: B_simple about 3x the clean
task's) against the clean task, both ways, and the clean task against itself; on the emulated
Nano at 3 W, digits-cnn from scratch, proxies whose fitted B_noise makes the choice move with a
factor of 3. Prints, per setting of the measurement and scenario, each seed's pooled factor at
the end (@ the samples of a re-plan), its batch size at the end, and its device time over the
same run without the measurement (the first seed's). tests/runtime/test_online_correction.py
asserts on the default setting's rows, on the kind board. Unkind boards by default (the
profile on a board of its own draw, each seed's runs with and without the measurement on the
board drawn for that seed, as the other benches); `--board kind` for the emulator's one
deterministic board.

    python bench/online_correction.py [--seeds 1 2 3] [--budget 16384] [--all-settings]
        [--board unkind|kind]
    python bench/online_correction.py --decision-scenario DQ [--seeds 0 1 2]
    python bench/online_correction.py --reference-spread 14

About 1.5 min for the default setting on 2 cores, about 8 with --all-settings. With
--reference-spread N (about 15 s per seed): N runs of the reference's own measurement (clean
digits, b = 128 in 4 parts, seeds 0 to N-1), each window's B_simple over the geometric mean of
the seeds that are not the reference's: how far a reference of REFERENCE_SEEDS lies from the
population by chance. With --decision-scenario DQ (a folder of bench/decision_quality.py): the
decision-quality bench's worst scenario with the correction on and off, trained here side by
side.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from wattcap.algorithms.efficiency import vector_from_samples
from wattcap.algorithms.planner import plan
from wattcap.data import get_dataset
from wattcap.devices import EmulatedDevice
from wattcap.experiments.replay import PROFILE_BOARD_SEED, BoardMode, run_device
from wattcap.experiments.significance import compare_times
from wattcap.measure.profiling import Profiler
from wattcap.runtime.online_correction import CorrectionSettings
from wattcap.train.loop import TrainConfig, train_to_accuracy
from wattcap.train.noise_scale import with_noise_reference

MODEL = "digits-cnn"
DEVICE = "jetson-nano"
CAP_W = 3.0
BUDGET = 16_384
#: a share of labels drawn at random: B_simple about 3x the clean task's (measured over 10
#: seeds: 2.3-4.0x per window of samples)
LABEL_NOISE = 0.4
#: the reference runs' seeds and the targets': a target run is never a reference run
REFERENCE_SEEDS = (0, 4, 5)
TARGET_SEEDS = (1, 2, 3)
#: the proxies' fitted B_noise: a factor of 3 moves the choice between b = 64 and 128 here
B_SMALL, B_LARGE = 10.0, 30.0
SETTINGS = (CorrectionSettings(), CorrectionSettings(chunks=2),
            CorrectionSettings(measured_steps_per_window=16),
            CorrectionSettings(chunks=2, measured_steps_per_window=16))


def splits() -> tuple[Any, Any, Any]:
    """(clean train, noisy train, test): the noisy one with LABEL_NOISE of its labels drawn
    at random (seeded), the test set clean."""
    train, test = get_dataset("digits").split(0.2, seed=0)
    rng = np.random.default_rng(1)
    flip = rng.random(len(train.y)) < LABEL_NOISE
    noisy = dataclasses.replace(
        train, y=np.where(flip, rng.integers(0, train.num_classes, len(train.y)), train.y),
        name="digits-label-noise")
    return train, noisy, test


def profile(board: BoardMode = "kind") -> Any:
    """The emulated device's exhaustive profile of the model: on the kind board, or (unkind)
    on a board of its own draw, as the other benches measure theirs."""
    return Profiler(_board(PROFILE_BOARD_SEED, board), MODEL).run(exhaustive=True)


def proxy_vector(b_noise: float, reference_train: Any, test: Any, budget: int = BUDGET,
                 chunks: int | None = None) -> Any:
    """A proxy vector following the large-batch relation at `b_noise`, with the noise-scale
    reference measured on `reference_train` (b = 64, REFERENCE_SEEDS combined, in `chunks`
    parts: default the correction's)."""
    sizes = (4, 8, 16, 32, 64, 128)
    samples = {b: [2000 * (1 + b / b_noise) * f for f in (0.95, 1.0, 1.05)] for b in sizes}
    vector = vector_from_samples(samples, 400_000, model=MODEL, input_shape=[1, 8, 8],
                                 dataset="proxy", task="image-classification",
                                 target_accuracy=0.9, seeds=[0, 1, 2])
    return with_noise_reference(vector, reference_train, test, batch_size=64,
                                sample_budget=budget, chunks=chunks, seeds=REFERENCE_SEEDS)


def runs(table: Any, vector: Any, target_train: Any, test: Any,
         correction: bool | CorrectionSettings = True, seeds: tuple[int, ...] = TARGET_SEEDS,
         budget: int = BUDGET, board: BoardMode = "kind") -> tuple[Any, list[Any]]:
    """wattcap's first choice and one run per seed from it, on a fresh emulated board each
    (unkind: the board drawn for the seed, the same with and without the correction)."""
    first = plan(table, CAP_W, efficiency=vector).choices["wattcap"]
    records = []
    for seed in seeds:
        config = TrainConfig(model=MODEL, batch_size=first.batch_size, target_accuracy=0.999,
                             sample_budget=budget, eval_every_samples=256, seed=seed)
        records.append(train_to_accuracy(
            config, target_train, test, device=_board(seed, board), profile=table,
            efficiency=vector, power_cap_w=CAP_W, online_correction=correction))
    return first, records


def _board(seed: int, board: BoardMode) -> EmulatedDevice:
    """The kind board as the tests have it, or the board drawn for `seed`."""
    return EmulatedDevice(DEVICE) if board == "kind" else run_device(DEVICE, seed, board)


def last_pooled(record: Any) -> float:
    """The pooled factor the run's record states last."""
    found = [float(m.group(1)) for e in record.events
             if (m := re.search(r"pooled factor ([0-9.]+) \[", e))]
    if not found:
        raise ValueError(f"no pooled factor in the record: {record.events}")
    return found[-1]


def replans(record: Any) -> list[str]:
    """The record's re-plans by the correction."""
    return [e for e in record.events if e.startswith("online correction (factor")]


def decision_scenario(folder: Path, seeds: tuple[int, ...]) -> None:
    """The decision-quality bench's worst scenario (TX2 NX, no cap, digits32-cnn from the
    folder's pre-trained weights, proxy digits-rotated-32, target digits-5-9-32 to 90 %) on the
    kind board at its highest clock: the fixed b = 128 (wattcap's choice from the proxy), the
    fixed b = 64 (the fastest), and b = 128 with the correction on (the proxy's reference
    measured first); time to the target per seed, and mean ± std."""
    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.core.profile import ProfileTable
    from wattcap.data import load_splits

    model, weights = "digits32-cnn", folder / "digits32-cnn-pretrained.safetensors"
    table = ProfileTable.load(folder / "profile-jetson-tx2nx-digits32-cnn.json")
    vector = EfficiencyVector.load(folder / "efficiency-proxy.json")
    proxy_train, proxy_test = load_splits("digits-rotated-32", seed=0)
    vector = with_noise_reference(vector, proxy_train, proxy_test, weights=weights,
                                  seeds=REFERENCE_SEEDS)
    train, test = load_splits("digits-5-9-32", seed=0)
    rows = {"b=64 fixed (the fastest)": (64, False),
            "b=128 fixed (wattcap's choice)": (128, False),
            "b=128, online correction": (128, True)}
    print("| configuration | time to 90 % per seed (s) | mean ± std | vs the fastest | record |")
    print("|---|---|---|---|---|")
    fastest: list[float] = []
    for name, (b, correction) in rows.items():
        times, notes = [], []
        for seed in seeds:
            device = EmulatedDevice("jetson-tx2nx")
            device.set_frequency_hz(max(device.frequencies_hz()))
            config = TrainConfig(model=model, batch_size=b, target_accuracy=0.9,
                                 sample_budget=vector.sample_budget, seed=seed,
                                 lr_ref=vector.lr_ref, batch_size_ref=vector.batch_size_ref)
            record = train_to_accuracy(config, train, test, device=device, weights=weights,
                                       profile=table, efficiency=vector,
                                       online_correction=correction)
            times.append(record.time_to_accuracy_s)
            if correction:
                judged = [e for e in record.events if "pooled factor" in e]
                moved = replans(record)
                notes.append(f"{record.samples_seen} samples, " + (
                    f"pooled {last_pooled(record):.2f}" if judged else "no window judged") + (
                    f", {moved[0][:60]}" if moved else ", no re-plan"))
        done = [t for t in times if t is not None]
        spread = (f"{statistics.fmean(done):.2f} ± {statistics.stdev(done):.2f}"
                  if len(done) > 1 else "-")
        if b == 64:
            fastest = done
        versus = compare_times(done, fastest).label if done and fastest else "-"
        print(f"| {name} | {', '.join('-' if t is None else f'{t:.2f}' for t in times)} | "
              f"{spread} | {versus} | {'; '.join(notes)} |", flush=True)


def reference_spread(seeds: int, budget: int) -> None:
    """Each window of `seeds` runs of the reference's measurement over the geometric mean of
    the runs that are not REFERENCE_SEEDS, and the reference's own (its runs' geometric
    mean) over the same; the run-to-run spread of log B_simple."""
    from wattcap.train.noise_scale import measure_noise_scale

    clean, _, test = splits()
    runs = {seed: {w.samples_end: w.b_simple for w in measure_noise_scale(
        MODEL, clean, test, batch_size=128, chunk_size=32, sample_budget=budget,
        seed=seed).trajectory.windows} for seed in range(seeds)}
    others = [s for s in runs if s not in REFERENCE_SEEDS]

    def geomean(of: list[int], end: int) -> float:
        return math.exp(statistics.fmean(math.log(runs[s][end]) for s in of))  # type: ignore[arg-type]

    print("| window ends at | population B_simple (seeds not the reference's) | reference over it "
          "| each seed over it | sd of log B per run |")
    print("|---|---|---|---|---|")
    for end in sorted({e for r in runs.values() for e, b in r.items() if b}):
        if any(not runs[s].get(end) for s in runs):
            continue  # a run that did not resolve it
        population = geomean(others, end)
        each = ", ".join(f"{s}: {runs[s][end] / population:.2f}" for s in runs)  # type: ignore[operator]
        spread = statistics.stdev(math.log(runs[s][end]) for s in runs)  # type: ignore[arg-type]
        print(f"| {end} | {population:.3g} | "
              f"{geomean(list(REFERENCE_SEEDS), end) / population:.2f} | {each} | "
              f"{spread:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(TARGET_SEEDS))
    parser.add_argument("--budget", type=int, default=BUDGET)
    parser.add_argument("--board", choices=("kind", "unkind"), default="unkind",
                        help="unkind (default): the profile on a board of its own draw, each "
                        "seed's runs on a board drawn for the seed; kind: the emulator's one "
                        "deterministic board (what the tests assert on)")
    parser.add_argument("--all-settings", action="store_true",
                        help="the four settings of the results page, not only the default")
    parser.add_argument("--decision-scenario", type=Path, metavar="DQ",
                        help="instead: the decision-quality bench's worst scenario, with the "
                        "pre-trained weights, profiles and proxy vector of its folder DQ")
    parser.add_argument("--reference-spread", type=int, metavar="N",
                        help="instead: N runs of the reference's measurement, each window "
                        "against the runs that are not the reference's")
    args = parser.parse_args()
    if args.reference_spread is not None:
        reference_spread(args.reference_spread, args.budget)
        return
    if args.decision_scenario is not None:
        decision_scenario(args.decision_scenario, tuple(args.seeds))
        return
    table = profile(args.board)
    clean, noisy, test = splits()
    scenarios = {"target 1/3 of the proxy": (noisy, clean, B_LARGE),
                 "3x (target noisy)": (clean, noisy, B_SMALL),
                 "same task": (clean, clean, B_SMALL)}
    settings_run = SETTINGS if args.all_settings else (CorrectionSettings(),)
    # each setting's reference in its own number of parts (the same as its runs')
    vectors = {(name, chunks): proxy_vector(b, ref, test, args.budget, chunks)
               for name, (ref, _, b) in scenarios.items()
               for chunks in sorted({s.chunks for s in settings_run})}
    plain = {name: runs(table, vectors[name, settings_run[0].chunks], target, test, False,
                        tuple(args.seeds[:1]), args.budget, args.board)[1][0].device_time_s
             for name, (_, target, _) in scenarios.items()}
    print(f"| chunks, steps per window | {' | '.join(scenarios)} |")
    print("|---" * (len(scenarios) + 1) + "|")
    for settings in settings_run:
        cells = []
        for name, (_, target, _) in scenarios.items():
            _, records = runs(table, vectors[name, settings.chunks], target, test, settings,
                              tuple(args.seeds), args.budget, args.board)
            cells.append(", ".join(_cell(r, plain[name]) for r in records))
        print(f"| {settings.chunks}, {settings.measured_steps_per_window} | "
              + " | ".join(cells) + " |", flush=True)


def _cell(record: Any, plain_s: float) -> str:
    at = [re.search(r"at (\d+) samples", e).group(1) for e in replans(record)]  # type: ignore[union-attr]
    moved = f"@{','.join(at)}" if at else ""
    return (f"{last_pooled(record):.2f}{moved}/{record.batch_size}/"
            f"{record.device_time_s / plain_s:.2f}x")


if __name__ == "__main__":
    main()
