"""What the online correction's measurement costs, per model and device: a measured step runs
the batch in 4 parts (`Workload.chunked_step_cost`, as the emulator charges it), so each of its
kernels launches 4 times at a quarter of the batch. On a launch-bound step (a tiny model, a fast
GPU) that is up to 4x the step; on a compute-bound one, little more than the step. Beside it,
the share of a run's steps the correction measures (its schedule: `OnlineCorrection.will_measure`,
up to 32 steps per doubling window of samples, none in a window under 16 steps), and so the
run's extra device time over a plain run of the same samples.

    python bench/correction_cost.py [--samples 16384] [--chunks 4] [--board kind|unkind]
                                    [--draws 5]

Emulator step times at each device's top clock (no training runs; seconds), without the
per-step jitter. On unkind boards (the default) each device draws `--draws` board states
(`draw_board_state`, seeds 0..draws-1: speed, power and host speed as measured on real GPUs),
and a cell is the mean ± standard deviation over them: the host factor moves a launch-bound
step, and with it what its 4 parts cost. `--board kind` prints the one deterministic board's
numbers. The Lightning callback's measured steps cost a plain step more (Lightning's own
backward beside the parts'): not in this table. Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
from types import SimpleNamespace

from wattcap.devices.emulated import EmulatedDevice
from wattcap.devices.emulated_board import BoardState, draw_board_state
from wattcap.devices.workload import workload_for
from wattcap.runtime.online_correction import CorrectionSettings, OnlineCorrection

MODELS = ("digits32-cnn", "mobilenetv2", "resnet18")
DEVICES = ("jetson-nano", "jetson-tx2nx", "jetson-orin-nano", "jetson-agx-orin", "h100-sxm")
BATCH_SIZES = (32, 64, 128)


def measured_steps(samples: int, batch_size: int, settings: CorrectionSettings) -> int:
    """How many of a run's steps the correction measures (its own schedule)."""
    state = SimpleNamespace(unmeasurable=False, settings=settings, _measuring=False,
                            _backward_called=False)
    return sum(OnlineCorrection.will_measure(state, done, batch_size)  # type: ignore[arg-type]
               for done in range(0, samples, batch_size))


def spread(values: list[float], fmt: str) -> str:
    """'mean' for one value, 'mean ± std' for several."""
    if len(values) == 1:
        return format(values[0], fmt)
    std = format(statistics.stdev(values), fmt.lstrip("+"))
    return f"{format(statistics.mean(values), fmt)} ± {std}"


def boards(name: str, board: str, draws: int) -> list[BoardState]:
    """The board states a device is measured on: the kind one, or `draws` unkind draws."""
    if board == "kind":
        return [BoardState()]
    return [draw_board_state(name, seed) for seed in range(draws)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=16_384)
    parser.add_argument("--chunks", type=int, default=4)
    parser.add_argument("--board", choices=("kind", "unkind"), default="unkind",
                        help="the emulated boards (default: unkind, --draws states per device)")
    parser.add_argument("--draws", type=int, default=5)
    args = parser.parse_args()
    if args.draws < 2:
        parser.error("--draws must be at least 2 (a spread needs two boards)")
    settings = CorrectionSettings(chunks=args.chunks)
    where = ("the kind board" if args.board == "kind"
             else f"mean ± std over {args.draws} unkind board states per device")
    print(f"a run of {args.samples} samples; measured steps in {args.chunks} parts; step times "
          f"at each device's top clock, {where}; inputs: " + ", ".join(
              f"{m} {'x'.join(map(str, workload_for(m).input_shape))}" for m in MODELS))
    print(f"{'model':13} {'device':17} {'b':>4} {'plain ms':>15} {'measured / plain':>17} "
          f"{'measured steps':>15} {'run overhead':>17}")
    for model in MODELS:
        workload = workload_for(model)
        for name in DEVICES:
            devices = [EmulatedDevice(name, board=state)
                       for state in boards(name, args.board, args.draws)]
            top_hz = max(devices[0].frequencies_hz())
            overhead = devices[0].spec.allocator_overhead_factor
            for b in BATCH_SIZES:
                plain = workload.step_cost(b, overhead)
                if plain.memory_needed_bytes > devices[0].spec.memory_usable_bytes:
                    continue
                chunked = workload.chunked_step_cost(b, args.chunks, overhead)
                steps = args.samples // b
                measured = measured_steps(args.samples, b, settings)
                plain_s = [device.model_step(plain, top_hz)[0] for device in devices]
                ratio = [device.model_step(chunked, top_hz)[0] / p
                         for device, p in zip(devices, plain_s, strict=True)]
                extra = [measured * (r - 1.0) / steps for r in ratio]
                print(f"{model:13} {name:17} {b:>4} "
                      f"{spread([p * 1e3 for p in plain_s], '.2f'):>15} "
                      f"{spread(ratio, '.2f'):>16}x {measured:>6} of {steps:<6} "
                      f"{spread([e * 100 for e in extra], '+.0f'):>16}%")


if __name__ == "__main__":
    main()
