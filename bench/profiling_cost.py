"""Profiling cost: points measured by the cap-pruned search against the exhaustive grid, and
profiling device time as a share of the training run it serves.

The run: ResNet18 on the emulated Jetson Nano, 20 epochs x 12,500 samples (250,000 samples)
at wattcap's chosen (b, f) for the cap (r_b = 1); its time is seconds_per_sample x 250,000 from
the profile. Goal: profiling <= 1 % of the run (the reference paper reports 1.9 %).
Prints; asserts nothing.

    python bench/profiling_cost.py
"""

from __future__ import annotations

import os
import tempfile

from wattcap.devices import EmulatedDevice
from wattcap.planner import plan
from wattcap.profiling import Profiler

MODEL = "resnet18"
DEVICE = "jetson-nano"
CAPS_W = (5.0, 6.5)
EPOCHS = 20
SAMPLES_PER_EPOCH = 12_500
GOAL_SHARE = 0.01
PAPER_SHARE = 0.019


def main() -> None:
    os.environ.setdefault("WATTCAP_CACHE_DIR", tempfile.mkdtemp(prefix="wattcap-bench-"))
    samples = EPOCHS * SAMPLES_PER_EPOCH
    exhaustive = Profiler(EmulatedDevice(DEVICE), MODEL).run(exhaustive=True)
    print(f"{MODEL} on the emulated {DEVICE}: training run of {EPOCHS} epochs x "
          f"{SAMPLES_PER_EPOCH:,} samples = {samples:,} samples")
    print(f"exhaustive profile: {exhaustive.points_measured} points, "
          f"{exhaustive.profiling_device_s:.1f} s of device time")
    header = (f"{'cap':>6} {'pruned pts':>10} {'exh. pts':>8} {'pts ratio':>9} "
              f"{'choice (b, MHz)':>16} {'run (s)':>9} {'pruned s':>9} {'share':>7} "
              f"{'exh. share':>10} {'same choice':>11}")
    print(header)
    print("-" * len(header))
    for cap in CAPS_W:
        pruned = Profiler(EmulatedDevice(DEVICE), MODEL).run(power_cap_w=cap)
        choice = plan(pruned, cap).choices["wattcap"]
        reference = plan(exhaustive, cap).choices["wattcap"]
        run_s = choice.seconds_per_sample * samples
        share = pruned.profiling_device_s / run_s
        exhaustive_share = exhaustive.profiling_device_s / run_s
        same = (choice.batch_size, choice.frequency_hz) == (
            reference.batch_size, reference.frequency_hz
        )
        print(f"{cap:5.1f}W {pruned.points_measured:>10} {exhaustive.points_measured:>8} "
              f"{pruned.points_measured / exhaustive.points_measured:>9.2f} "
              f"{f'b={choice.batch_size}, {choice.frequency_hz / 1e6:.1f}':>16} "
              f"{run_s:>9.0f} {pruned.profiling_device_s:>9.1f} {share:>7.2%} "
              f"{exhaustive_share:>10.2%} {'yes' if same else 'no':>11}")
    print(f"goal: pruned profiling <= {GOAL_SHARE:.0%} of the run "
          f"(reference paper: {PAPER_SHARE:.1%})")


if __name__ == "__main__":
    main()
