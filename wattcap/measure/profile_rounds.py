"""Profiles that know their own spread: every point measured in several rounds, apart in time.

One window's own standard error (`wattcap.algorithms.timing_spread`) sees the noise within the
window; it cannot see what changes between windows minutes apart: the board's temperature, a
background process, the clock the board settles at. Measuring every point again in later rounds
and merging the rounds gives each point the spread a later measurement would show, and the
planner reads it where it keeps its margin and says which choices are within noise
(`seconds_per_sample_std`).

The first round is an ordinary profile (exhaustive, pruned for the cap, or a few points); each
later round measures exactly the points the first one measured, in the table's order, each
after a lead-in step at its own point, so a pruned search that would climb a row differently
in another round still gives every point all its rounds; a few-point profile's predicted
points are then made again from the merged measured points (`refit_predictions`). A refresh
(`wattcap.measure.profile_refresh`) is measured in rounds the same way (`measure_in_rounds`):
its first round is the frontier search, each later one measures the points it found again.
Between rounds the device idles for the gap (on the emulator's virtual clock nothing changes
while it idles, so the default gap there is 0).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from wattcap.core.profile import ProfilePoint, ProfileTable
from wattcap.devices.base import Device
from wattcap.devices.errors import DeviceOutOfMemoryError, FrequencyNotFollowedError
from wattcap.devices.signals import exit_cleanly_on_signals
from wattcap.measure.profiling import Profiler

#: idle seconds between rounds on real hardware: long enough for the board to leave the
#: previous round's thermal state, short against a profile's own minutes
DEFAULT_ROUND_GAP_S = 60.0


#: rounds a profile measures on real hardware when --rounds is not given: a second round is
#: what shows a point's spread between windows minutes apart (1 on the emulator, whose board
#: is the same draw in every round of one profile)
DEFAULT_REAL_ROUNDS = 2

#: device seconds of a first round beyond which the default's later rounds are left out (said
#: so): a profile that took longer is already a visible share of most training runs, and a
#: second round doubles it; `--rounds 2` still asks for it
DEFAULT_ROUNDS_MAX_FIRST_S = 900.0


def default_rounds(device: Device) -> int:
    """The rounds a profile measures on `device` unless told: `DEFAULT_REAL_ROUNDS` on real
    hardware, 1 on a device whose time is modelled (the emulator)."""
    return DEFAULT_REAL_ROUNDS if device.timing_needs_real_work else 1


def default_round_gap_s(device: Device) -> float:
    """The gap between rounds on `device`: 0 where its time is modelled on a virtual clock (the
    emulator: idling changes nothing), `DEFAULT_ROUND_GAP_S` on real hardware."""
    return DEFAULT_ROUND_GAP_S if device.timing_needs_real_work else 0.0


def _checked_gap_s(device: Device, rounds: int, round_gap_s: float | None) -> float:
    """The gap between rounds (`default_round_gap_s` unless given); ValueError for fewer than
    one round or a negative gap."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, not {rounds}")
    gap_s = default_round_gap_s(device) if round_gap_s is None else round_gap_s
    if gap_s < 0:
        raise ValueError(f"the gap between rounds must be 0 s or more, not {gap_s:g} s")
    return gap_s


@dataclass(frozen=True)
class RoundsResult:
    """A profile measured in rounds, and how long each round took."""

    table: ProfileTable
    #: device seconds each round took to measure (the first with the sensor-noise window)
    round_device_s: list[float]
    #: idle seconds between consecutive rounds
    gap_s: float
    #: why later rounds were left out (the first took longer than the caller allowed), or None
    skipped: str | None = None


def _later_rounds_skipped(rounds: int, first_s: float, max_first_s: float | None) -> str | None:
    """Why the rounds after the first are left out: it took longer than `max_first_s`."""
    if rounds < 2 or max_first_s is None or first_s <= max_first_s:
        return None
    return (f"one round only: it took {first_s / 60:.1f} min of device time, more than the "
            f"{max_first_s / 60:.0f} min a default second round is measured after (it would "
            f"double the profile's cost); `wattcap profile --rounds {rounds}` measures them "
            "anyway")


@dataclass(frozen=True)
class MeasuredRounds:
    """The points a first round measured, the same points measured again in each later round,
    and how long each round took."""

    #: the points the first round measured (the ones each later round measures again)
    first: list[ProfilePoint]
    #: each later round's points, in the first round's order (fewer where one no longer fits)
    later: list[list[ProfilePoint]]
    #: device seconds each round took to measure
    round_device_s: list[float]
    #: idle seconds between consecutive rounds
    gap_s: float
    #: why later rounds were left out (the first took longer than the caller allowed), or None
    skipped: str | None = None

    def merged(self) -> list[ProfilePoint]:
        """The first round's points, each merged with its later rounds (`merge_measurements`)."""
        return merge_measurements(self.first, self.later)


def measure_in_rounds(profiler: Profiler, first_round: Callable[[], list[ProfilePoint]],
                      rounds: int, round_gap_s: float | None = None,
                      max_first_round_s: float | None = None) -> MeasuredRounds:
    """`first_round` (which measures and returns the points to measure again), then, the device
    idle for `round_gap_s` (default `default_round_gap_s`) before each, `rounds` - 1 later
    rounds that measure those points again (`_measure_again`): the rounds of a profile and of a
    refresh. The device stays claimed from the first round to the last. Where the first round
    took longer than `max_first_round_s` of device time the later ones are left out
    (`MeasuredRounds.skipped`). ValueError for fewer than one round or a negative gap, before
    anything is measured."""
    device = profiler.device
    gap_s = _checked_gap_s(device, rounds, round_gap_s)
    later: list[list[ProfilePoint]] = []
    with device.claimed():  # no other run takes the device in a gap
        start_s = device.now_s()
        first = first_round()
        round_device_s = [device.now_s() - start_s]
        skipped = _later_rounds_skipped(rounds, round_device_s[0], max_first_round_s)
        for _ in range(rounds - 1 if skipped is None else 0):
            if gap_s > 0:
                device.idle(gap_s)
            start_s = device.now_s()
            later.append(_measure_again(profiler, first))
            round_device_s.append(device.now_s() - start_s)
    return MeasuredRounds(first, later, round_device_s, gap_s, skipped)


def profile_in_rounds(profiler: Profiler, rounds: int, power_cap_w: float | None = None,
                      exhaustive: bool = False, round_gap_s: float | None = None,
                      max_first_round_s: float | None = None, few_points: bool = False,
                      max_points: int | None = None) -> RoundsResult:
    """Profile (exhaustive, pruned for `power_cap_w`, or a few points, as `Profiler.run`) in
    `rounds` rounds, the device idle for `round_gap_s` (default `default_round_gap_s`) between
    them, and merge the rounds point by point (`merge_rounds`); a few-point profile's predicted
    points are then predicted again from its merged measured points. One round is
    `Profiler.run` itself. The device stays claimed from the first round to the last; the
    merged table's `profiling_device_s` counts the rounds' measuring, not the idle gaps. Where
    the first round took longer than `max_first_round_s` of device time the later ones are
    left out (`RoundsResult.skipped`)."""
    tables: list[ProfileTable] = []

    def first_round() -> list[ProfilePoint]:
        tables.append(profiler.run(power_cap_w=power_cap_w, exhaustive=exhaustive,
                                   mode="model" if few_points else None,
                                   max_points=max_points))
        return [p for p in tables[0].points if not p.predicted]

    measured = measure_in_rounds(profiler, first_round, rounds, round_gap_s, max_first_round_s)
    first, round_device_s, gap_s = tables[0], measured.round_device_s, measured.gap_s
    if not measured.later:
        return RoundsResult(first, round_device_s, gap_s, measured.skipped)
    table = merge_rounds(first, measured.later).model_copy(update={
        "rounds": rounds,
        "profiling_device_s": first.profiling_device_s + sum(round_device_s[1:])})
    if table.mode == "model":
        from wattcap.measure.active_profiling import refit_predictions

        table = refit_predictions(profiler, table)
    return RoundsResult(table, round_device_s, gap_s)


def sweep_in_rounds(device: Device, sweep: Callable[[], ProfileTable], rounds: int,
                    round_gap_s: float | None = None, max_first_round_s: float | None = None,
                    ) -> RoundsResult:
    """A knob profile (every power limit or power mode: `sweep`, which measures every
    (batch size, knob value) and puts the device back) in `rounds` rounds, the device idle
    for `round_gap_s` (default `default_round_gap_s`) between them, merged point by point
    (`merge_rounds`). A sweep is exhaustive, so each round measures the same points. Where the
    first round took longer than `max_first_round_s` the later ones are left out."""
    gap_s = _checked_gap_s(device, rounds, round_gap_s)
    tables: list[ProfileTable] = []
    round_device_s: list[float] = []
    skipped = None
    with device.claimed():  # no other run takes the device in a gap
        for index in range(rounds):
            if index and gap_s > 0:
                device.idle(gap_s)
            start_s = device.now_s()
            tables.append(sweep())
            round_device_s.append(device.now_s() - start_s)
            skipped = _later_rounds_skipped(rounds, round_device_s[0], max_first_round_s)
            if skipped is not None:
                break
    first = tables[0]
    if len(tables) == 1:
        return RoundsResult(first, round_device_s, gap_s, skipped)
    table = merge_rounds(first, [list(t.points) for t in tables[1:]]).model_copy(update={
        "rounds": rounds,
        # the first round's own count (its sensor-noise window included) and the later
        # rounds' measuring, as `profile_in_rounds` counts
        "profiling_device_s": first.profiling_device_s + sum(round_device_s[1:])})
    return RoundsResult(table, round_device_s, gap_s)


def _measure_again(profiler: Profiler, points: list[ProfilePoint]) -> list[ProfilePoint]:
    """One later round: each of `points` measured again at its (batch size, clock), in the
    table's order, each after a lead-in step at its own point (a few-point profile's points lie
    far apart, and a lagging sensor's first reading would carry the previous point's power,
    which the merge's largest peak would keep); a batch size that no longer fits is left out of
    this round, and a point whose clock the board now holds lower (hot, a power limit) too: its
    merged point says it has fewer rounds, and the round measures the rest rather than stop a
    profile whose first round is done. The device is put back after, also on a signal."""
    again: list[ProfilePoint] = []
    out_of_memory: set[int] = set()
    lead_in = profiler.lead_in_steps
    profiler.lead_in_steps = max(lead_in, 1)
    with exit_cleanly_on_signals():
        try:
            for point in points:
                if point.batch_size in out_of_memory:
                    continue
                try:
                    again.append(profiler.measure(point.batch_size, point.knob_value))
                except DeviceOutOfMemoryError:
                    out_of_memory.add(point.batch_size)
                    profiler.release_steps()
                except FrequencyNotFollowedError:
                    # measured at another clock it would be another point: left out here
                    continue
        finally:
            profiler.lead_in_steps = lead_in
            profiler.release_steps()
            profiler.device.restore()
    return again


def merge_rounds(first: ProfileTable, later: list[list[ProfilePoint]]) -> ProfileTable:
    """`first` with each measured point merged with the same (batch size, knob value) of the
    `later` rounds (`merge_measurements`). Predicted points are kept as they are."""
    return first.model_copy(update={"points": merge_measurements(list(first.points), later)})


def merge_measurements(first: list[ProfilePoint],
                       later: list[list[ProfilePoint]]) -> list[ProfilePoint]:
    """Each measured point of `first` merged with the same (batch size, knob value) of the
    `later` rounds (`merge_point`); a round without the point leaves it fewer rounds (its
    `rounds` says how many). Predicted points are kept as they are."""
    merged = []
    for point in first:
        if point.predicted:
            merged.append(point)
            continue
        key = (point.batch_size, point.knob_value)
        merged.append(merge_point([point] + [p for round_ in later for p in round_
                                             if (p.batch_size, p.knob_value) == key]))
    return merged


def merge_point(measurements: list[ProfilePoint]) -> ProfilePoint:
    """One point from its measurements in several rounds: time per sample their mean, its
    spread the larger of the windows' own standard error (the largest round's) and the
    between-round standard deviation, peak power the largest, average power the mean, steps
    and readings the rounds' sums, the observed clock of the round whose mean clock was
    lowest (the one that held its label least), and each round's time kept."""
    first = measurements[0]
    if len(measurements) == 1:
        return first
    times = [p.seconds_per_sample for p in measurements]
    window_errors = [p.seconds_per_sample_std for p in measurements
                     if p.seconds_per_sample_std is not None]
    # rounded as the windows' own errors are: a noise-free device's rounds differ only in
    # the last bits of a float
    between_s = round(statistics.stdev(times), 12)
    clocks = [p.observed_frequency_hz for p in measurements if p.observed_frequency_hz]
    return first.model_copy(update={
        "seconds_per_sample": statistics.fmean(times),
        "seconds_per_sample_std": max([between_s, *window_errors]),
        "peak_power_w": max(p.peak_power_w for p in measurements),
        "avg_power_w": round(statistics.fmean(p.avg_power_w for p in measurements), 4),
        "steps": sum(p.steps for p in measurements),
        "readings": sum(p.readings for p in measurements),
        "observed_frequency_hz": min(clocks, key=lambda c: c.mean_hz) if clocks else None,
        "rounds": len(measurements),
        "round_seconds_per_sample": times,
    })


def largest_round_spread(table: ProfileTable) -> tuple[ProfilePoint, float] | None:
    """The measured point whose rounds differ most (relative between-round standard deviation
    of its time per sample), with that spread; None with fewer than two rounds."""
    spreads = [(p, statistics.stdev(p.round_seconds_per_sample) / p.seconds_per_sample)
               for p in table.points if len(p.round_seconds_per_sample) >= 2
               and math.isfinite(p.seconds_per_sample) and p.seconds_per_sample > 0]
    return max(spreads, key=lambda s: s[1]) if spreads else None
