"""Refreshing a stale profile: re-measure its feasible frontier (one point per batch size, more
only where a point now breaks the cap), in rounds as a profile is measured
(`wattcap.measure.profile_rounds`: each later round, after the gap, measures the first round's
points again, and the rounds are merged point by point), and say what changed."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from wattcap.core.profile import ProfilePoint, ProfileTable
from wattcap.devices.clock_clamp import ceiling_under_hz, record_clamp
from wattcap.devices.errors import DeviceOutOfMemoryError, FrequencyNotFollowedError
from wattcap.devices.signals import exit_cleanly_on_signals
from wattcap.measure.profile_rounds import measure_in_rounds
from wattcap.measure.profiling import Profiler, model_fingerprint_or_none

if TYPE_CHECKING:  # workload imports torch: loaded only when a profile is measured
    pass


def refresh_row(
    profiler: Profiler,
    batch_size: int,
    start_hz: int,
    power_cap_w: float | None,
    ceiling_hz: int | None = None,
    by: str = "re-measure",
) -> list[ProfilePoint]:
    """Re-measure one batch size's row from `start_hz` to find its highest feasible frequency
    cheaply: when the start point is above the cap, step down until one is under it; when it
    is under, step up while under, but never above `ceiling_hz` (default `start_hz`: only
    frequencies the caller has reason to believe might be feasible are tried; where the board
    holds the clock lower, from the board's ceiling, the clamp recorded for `by`). Returns the
    points measured, in measuring order. Without a cap every point is feasible, so only the
    start point (and the ones up to the ceiling) are measured."""
    frequencies = profiler.device.frequencies_hz()
    ceiling = start_hz if ceiling_hz is None else ceiling_hz

    def feasible(point: ProfilePoint) -> bool:
        return power_cap_w is None or point.peak_power_w <= power_cap_w

    try:
        points = [profiler.measure(batch_size, start_hz)]
    except FrequencyNotFollowedError as err:
        # the board holds the clock lower (hot, a power mode): measure from its ceiling, which
        # is also the highest clock worth trying now; the clamp goes to the device's record
        running_hz = err.running_hz if err.running_hz is not None else frequencies[0]
        requested_hz = start_hz
        start_hz = ceiling = ceiling_under_hz(frequencies, min(running_hz, start_hz))
        record_clamp(profiler.device, err, requested_hz, start_hz, running_hz, by)
        points = [profiler.measure(batch_size, start_hz)]
    index = frequencies.index(start_hz)
    if feasible(points[-1]):
        while index + 1 < len(frequencies) and frequencies[index + 1] <= ceiling:
            index += 1
            try:
                points.append(profiler.measure(batch_size, frequencies[index]))
            except FrequencyNotFollowedError:
                break  # the board's ceiling for now: nothing above it can run
            if not feasible(points[-1]):
                break
    else:
        while index > 0:
            index -= 1
            points.append(profiler.measure(batch_size, frequencies[index]))
            if feasible(points[-1]):
                break
    return points


class PointChange(BaseModel):
    """A re-measured point next to the one the profile had (None: not measured before)."""

    model_config = ConfigDict(extra="forbid")
    old: ProfilePoint | None
    new: ProfilePoint

    @property
    def time_change(self) -> float | None:
        """Relative change of the time per sample (+0.25: 25 % slower)."""
        if self.old is None:
            return None
        return self.new.seconds_per_sample / self.old.seconds_per_sample - 1.0

    @property
    def power_change(self) -> float | None:
        """Relative change of the peak power."""
        if self.old is None:
            return None
        return self.new.peak_power_w / self.old.peak_power_w - 1.0


@dataclass
class RefreshResult:
    """A refreshed profile and what changed."""

    previous: ProfileTable
    table: ProfileTable
    changes: list[PointChange]
    power_cap_w: float | None
    #: batch sizes whose frontier point could not be re-measured (out of memory, frequency
    #: no longer offered by the device)
    skipped: list[int] = field(default_factory=list)
    #: device seconds each round of the refresh took to measure
    round_device_s: list[float] = field(default_factory=list)
    #: idle seconds between consecutive rounds
    round_gap_s: float = 0.0
    #: why the later rounds were left out (the first took longer than allowed), or None
    rounds_skipped: str | None = None

    def frontier_moved(self) -> dict[int, tuple[int, int]]:
        """Batch sizes whose highest feasible frequency changed: b -> (old Hz, new Hz)."""
        before = self.previous.frontier(self.power_cap_w)
        after = self.table.frontier(self.power_cap_w)
        return {
            b: (before[b].knob_value, after[b].knob_value if b in after else 0)
            for b in before
            if b not in after or after[b].knob_value != before[b].knob_value
        }


def refresh_profile(
    profiler: Profiler,
    table: ProfileTable,
    power_cap_w: float | None = None,
    source: str = "profile",
    rounds: int = 1,
    round_gap_s: float | None = None,
    max_first_round_s: float | None = None,
) -> RefreshResult:
    """Re-measure the feasible frontier of `table` on the profiler's device: for each batch
    size, the highest measured frequency whose peak is under the cap (`power_cap_w`, else the
    cap the table was pruned for, else no cap: the highest measured frequency). A frontier
    point that now breaks the cap is followed down its row until a frequency is under it
    again. In `rounds` rounds (`measure_in_rounds`: the device idle for `round_gap_s` between
    them, the later ones left out where the first took over `max_first_round_s`), each later
    round measuring the first round's points again, merged point by point (`merge_point`).
    Returns the merged table (mode "refresh": the new points replace the old ones, and the
    other points of a re-measured row are scaled by the change measured on it, marked
    predicted: `ProfileTable.remeasured`; its `rounds` the refresh's where more than one) and
    the changes (each merged point next to the old one). The device's settings are restored
    afterwards; `source` names the table in error messages; `profiling_device_s` grows by the
    rounds' measuring, not the idle gaps.

    Raises WattcapFileError when the table was made for another device, model or power mode,
    ValueError for fewer than one round or a negative gap.
    """
    device = profiler.device
    table.check_matches(device=device.name, model=profiler.model, source=source,
                        architecture_fingerprint=model_fingerprint_or_none(profiler.model),
                        power_mode=device.power_mode, power_modes=device.power_mode_names())
    cap = power_cap_w if power_cap_w is not None else table.power_cap_w
    skipped: list[int] = []
    frequencies = device.frequencies_hz()

    def first_round() -> list[ProfilePoint]:
        with exit_cleanly_on_signals():
            return _refresh_frontier(profiler, table, cap, frequencies, skipped)

    measured = measure_in_rounds(profiler, first_round, rounds, round_gap_s, max_first_round_s)
    points = measured.merged()
    merged = table.remeasured(points).model_copy(update={
        "mode": "refresh",
        "power_cap_w": cap,
        "points_measured": table.points_measured + len(points),
        "profiling_device_s": table.profiling_device_s + sum(measured.round_device_s),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **({"rounds": len(measured.round_device_s)} if measured.later else {}),
    })
    changes = [PointChange(old=table.lookup(p.batch_size, p.knob_value), new=p) for p in points]
    return RefreshResult(previous=table, table=merged, changes=changes, power_cap_w=cap,
                         skipped=skipped, round_device_s=measured.round_device_s,
                         round_gap_s=measured.gap_s, rounds_skipped=measured.skipped)


def _refresh_frontier(
    profiler: Profiler, table: ProfileTable, cap: float | None, frequencies: list[int],
    skipped: list[int],
) -> list[ProfilePoint]:
    """One round of a refresh: each frontier point's row re-measured (`refresh_row`), the
    largest batch size first; the points measured, in measuring order. Batch sizes that no
    longer fit or whose frequency is no longer offered go to `skipped`."""
    measured: list[ProfilePoint] = []
    try:
        for b, old in sorted(table.frontier(cap).items(), reverse=True):
            if old.knob_value not in frequencies:
                skipped.append(b)
                continue
            try:
                measured += refresh_row(profiler, b, old.knob_value, cap)
            except DeviceOutOfMemoryError:
                skipped.append(b)
    finally:
        profiler.device.restore()
    return measured
