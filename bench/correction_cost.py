"""What the online correction's measurement costs, per model and device: a measured step runs
the batch in 4 parts (`Workload.chunked_step_cost`, as the emulator charges it), so each of its
kernels launches 4 times at a quarter of the batch. On a launch-bound step (a tiny model, a fast
GPU) that is up to 4x the step; on a compute-bound one, little more than the step. Beside it,
the share of a run's steps the correction measures (its schedule: `OnlineCorrection.will_measure`,
up to 32 steps per doubling window of samples, none in a window under 16 steps), and so the
run's extra device time over a plain run of the same samples.

    python bench/correction_cost.py [--samples 16384] [--chunks 4]

Noise-free emulator step times at each device's top clock (no training runs; a second). The
Lightning callback's measured steps cost a plain step more (Lightning's own backward beside the
parts'): not in this table. Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
from types import SimpleNamespace

from wattcap.devices.emulated import EmulatedDevice
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=16_384)
    parser.add_argument("--chunks", type=int, default=4)
    args = parser.parse_args()
    settings = CorrectionSettings(chunks=args.chunks)
    print(f"a run of {args.samples} samples; measured steps in {args.chunks} parts; noise-free "
          "step times at each device's top clock; inputs: " + ", ".join(
              f"{m} {'x'.join(map(str, workload_for(m).input_shape))}" for m in MODELS))
    print(f"{'model':13} {'device':17} {'b':>4} {'plain ms':>9} {'measured / plain':>17} "
          f"{'measured steps':>15} {'run overhead':>13}")
    for model in MODELS:
        workload = workload_for(model)
        for name in DEVICES:
            device = EmulatedDevice(name)
            top_hz = max(device.frequencies_hz())
            overhead = device.spec.allocator_overhead_factor
            for b in BATCH_SIZES:
                plain = workload.step_cost(b, overhead)
                if plain.memory_needed_bytes > device.spec.memory_usable_bytes:
                    continue
                chunked = workload.chunked_step_cost(b, args.chunks, overhead)
                plain_s = device.model_step(plain, top_hz)[0]
                chunked_s = device.model_step(chunked, top_hz)[0]
                steps = args.samples // b
                measured = measured_steps(args.samples, b, settings)
                extra = measured * (chunked_s - plain_s) / (steps * plain_s)
                print(f"{model:13} {name:17} {b:>4} {plain_s * 1e3:>9.2f} "
                      f"{chunked_s / plain_s:>16.2f}x {measured:>6} of {steps:<6} "
                      f"{extra:>+12.0%}")


if __name__ == "__main__":
    main()
