"""Selection latency: Algorithm 1 (`Selector.select`) on the full profile grid of ResNet18 on
the emulated Jetson Nano, against a brute-force scan of every (b, f), over random caps.

Goal (DESIGN §1): well under 1 ms per selection (O(|B| log |F|)). Prints; asserts nothing.

    python bench/selection_latency.py
"""

from __future__ import annotations

import os
import random
import tempfile
import timeit

from wattcap.algorithms.planner import Selector
from wattcap.core.profile import ProfilePoint, ProfileTable
from wattcap.devices import EmulatedDevice
from wattcap.measure.profiling import Profiler

SELECTIONS = 2_000
REPEATS = 5
GOAL_US = 1_000.0


def brute_force(
    profile: ProfileTable, cap_w: float | None, ratios: dict[int, float | None]
) -> ProfilePoint | None:
    """Scan every measured point: the baseline Algorithm 1 is compared with."""
    best, best_cost = None, float("inf")
    for point in profile.points:
        ratio = ratios.get(point.batch_size)
        if ratio is None or (cap_w is not None and point.peak_power_w > cap_w):
            continue
        cost = point.seconds_per_sample * ratio
        if cost < best_cost:
            best, best_cost = point, cost
    return best


def main() -> None:
    os.environ.setdefault("WATTCAP_CACHE_DIR", tempfile.mkdtemp(prefix="wattcap-bench-"))
    profile = Profiler(EmulatedDevice("jetson-nano"), "resnet18").run(exhaustive=True)
    ratios = {b: 0.25 + 0.75 * b / max(profile.batch_sizes) for b in profile.batch_sizes}
    peaks = [p.peak_power_w for p in profile.points]
    rng = random.Random(0)
    caps = [rng.uniform(min(peaks), max(peaks) + 0.5) for _ in range(SELECTIONS)]

    selector = Selector(profile)
    # same decisions (objective values) before timing anything
    for cap in caps:
        fast, slow = selector.select(cap, ratios), brute_force(profile, cap, ratios)
        assert (fast is None) == (slow is None)
        if fast is not None:
            fast_cost = fast.seconds_per_sample * ratios[fast.batch_size]
            slow_cost = slow.seconds_per_sample * ratios[slow.batch_size]
            if abs(fast_cost - slow_cost) > 1e-12 * slow_cost:
                raise SystemExit(f"disagreement at cap {cap:.3f} W")

    def run_selector() -> None:
        for cap in caps:
            selector.select(cap, ratios)

    def run_brute() -> None:
        for cap in caps:
            brute_force(profile, cap, ratios)

    prepare_s = min(timeit.repeat(lambda: Selector(profile), number=20, repeat=REPEATS)) / 20
    selector_s = min(timeit.repeat(run_selector, number=1, repeat=REPEATS)) / SELECTIONS
    brute_s = min(timeit.repeat(run_brute, number=1, repeat=REPEATS)) / SELECTIONS

    print(f"profile: {profile.model} on {profile.device}, {len(profile.batch_sizes)} batch sizes"
          f" x {len(profile.knob_values)} frequencies = {len(profile.points)} points")
    print(f"{SELECTIONS} random caps, best of {REPEATS} runs")
    print(f"Selector preparation (once per profile): {prepare_s * 1e6:8.1f} us")
    print(f"Selector.select (Algorithm 1):           {selector_s * 1e6:8.1f} us per selection"
          f"  (goal < {GOAL_US:.0f} us: {'met' if selector_s * 1e6 < GOAL_US else 'NOT met'})")
    print(f"brute-force scan of every (b, f):         {brute_s * 1e6:8.1f} us per selection")
    print(f"ratio brute force / Algorithm 1:          {brute_s / selector_s:8.2f}x")


if __name__ == "__main__":
    main()
