"""The spread of a measured point's time per sample, from the window's own parts.

A profile point's window is accounted in parts, one per sensor period (on a GPU the host waits
for the queued steps once per period, as training does). The parts' times per sample scatter
with the host's and the board's noise (a host-bound step on a datacenter GPU: several per cent
from one period to the next); their spread gives the window's time per sample a standard
error, so that a plan can say when two choices are within the noise of the measurements that
rank them. A device whose timing is noise-free (the emulator) gives 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: fewer parts than this give no spread (None): two parts' difference says little of it
MIN_PARTS = 3


def window_time_std_s(parts: Sequence[tuple[float, int]], batch_size: int) -> float | None:
    """One standard error (seconds per sample) of a window's time per sample, Σs / (Σn · b),
    from its parts' (seconds, steps): the ratio estimator's, k/(k-1) Σ (n_i/N)² (r_i - R)²
    with r_i each part's time per sample, so that parts of fewer steps weigh less. None with
    fewer than `MIN_PARTS` parts (or no steps)."""
    parts = [(seconds, steps) for seconds, steps in parts if steps > 0]
    total_steps = sum(steps for _, steps in parts)
    if len(parts) < MIN_PARTS or total_steps == 0:
        return None
    mean = sum(seconds for seconds, _ in parts) / (total_steps * batch_size)
    k = len(parts)
    variance = k / (k - 1) * sum(
        (steps / total_steps) ** 2 * (seconds / (steps * batch_size) - mean) ** 2
        for seconds, steps in parts)
    # rounded to 1e-12 s: a noise-free device's parts differ only in the last bits of a float
    return round(math.sqrt(variance), 12)
