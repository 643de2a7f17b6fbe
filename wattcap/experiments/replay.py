"""Replaying recorded training runs on emulated boards: a run's steps at a knob value on a
board, the profile of a board, and, on unkind boards, the fastest configuration found by
replaying them all.

A comparison's boards are either the kind emulator (`board="kind"`: one deterministic board,
the profile's) or unkind ones (`board="unkind"`): each seed's runs replay on a board state
drawn for that seed (`wattcap.devices.emulated_board`), the same for every method of the
seed, and the profile the plans come from is measured on a board of its own draw. On unkind
boards "fastest" is the brute force over the replays themselves, not a choice from the
profile: for every batch size the target ran, its highest clocks the profile allows under the
cap (`FASTEST_CLOCKS_PER_BATCH_SIZE`; time falls with the clock on a board's own row) are
replayed on every seed's board, and the lowest expected time wins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from wattcap.algorithms.restarts import expected_over_runs
from wattcap.core.events import CapViolation, FrequencyStep
from wattcap.core.profile import ProfileTable
from wattcap.core.run import RunRecord
from wattcap.core.schema import WattcapFileError
from wattcap.devices.emulated import EmulatedDevice
from wattcap.devices.emulated_board import draw_board_state
from wattcap.devices.errors import DeviceNotSupportedError, WatchError
from wattcap.devices.spec import load_spec
from wattcap.devices.workload import workload_for
from wattcap.measure.profiling import Profiler
from wattcap.runtime.meter import PowerMeter
from wattcap.runtime.session_config import CapSettings, DeviceHandling, PlanSettings
from wattcap.runtime.watchdog import CapWatchdog
from wattcap.train.run_store import file_stem

#: which boards a comparison replays on (see the module)
BoardMode = Literal["kind", "unkind"]
#: the unkind profile's own board draw: another run than any training run's seed
PROFILE_BOARD_SEED = 1_000_003
#: clocks per batch size the unkind brute force replays (the highest the profile allows)
FASTEST_CLOCKS_PER_BATCH_SIZE = 3


def run_device(device: str, seed: int, board: BoardMode) -> EmulatedDevice:
    """The board seed `seed`'s runs replay on: the kind one, or a board state drawn for it."""
    state = None if board == "kind" else draw_board_state(load_spec(device).name, seed)
    return EmulatedDevice(device, seed=seed, board=state)


@dataclass
class Replay:
    """A recorded run's steps replayed on an emulated device at a knob value."""

    #: time and energy to the target; None: the run missed it
    time_s: float | None
    energy_j: float | None
    peak_w: float
    #: what the watchdog saw and did: cap violations and its clock steps
    violations: list[CapViolation]
    frequency_steps: list[FrequencyStep]
    #: a missed run: what its whole budget cost (the price of a restart); None: reached
    budget_time_s: float | None = None
    budget_energy_j: float | None = None
    #: a planned run (`replay_planned`): the batch size and knob value it ended at, and what
    #: its Session said it did (a re-plan for its board)
    batch_size: int | None = None
    knob_value: int | None = None
    events: list[str] = field(default_factory=list)


def replay_on_device(
    record: RunRecord, device: EmulatedDevice, frequency_hz: int, power_cap_w: float | None,
    sensor_noise_w: float | None = None,
) -> Replay:
    """Run a recorded run's steps on an emulated device at a frequency: up to its target, or,
    for a run that missed it, every sample it trained (the budget a restart pays). The
    watchdog decides on one reading beyond `sensor_noise_w` (the profile's), as a run's; the
    power limit is set to the cap where the board has one, as a Session's backstop is."""
    b = record.batch_size
    reached = record.samples_to_target
    cost = workload_for(record.model).step_cost(b, device.spec.allocator_overhead_factor)
    meter = PowerMeter(device.sensor_period_s)
    guard = CapWatchdog(device, power_cap_w, sensor_noise_w=sensor_noise_w)
    set_backstop(device, power_cap_w)
    device.set_frequency_hz(frequency_hz)
    start = device.now_s()
    meter.start(start)  # the first reading measures from here, as a Session's meter
    steps = max(1, math.ceil((record.samples_seen if reached is None else reached) / b))
    with device.sensor_ticks(meter), device.sensor_ticks(guard):
        for _ in range(steps):
            device.execute(None, cost)
    guard.finish()
    # to the replay's end, as a run's record (None: a replay shorter than the sensor's period
    # read nothing, not 0 J)
    energy_j = meter.measured_energy_to_j(device.now_s())
    device.restore()
    elapsed_s = device.now_s() - start
    if reached is None:
        return Replay(None, None, meter.peak_w or 0.0, guard.violations, guard.steps,
                      budget_time_s=elapsed_s, budget_energy_j=energy_j)
    # The crossing falls inside the last step: time and energy up to it, not to the step's end
    # (the device's time per sample is constant over the replay).
    share = reached / (steps * b)
    return Replay(elapsed_s * share, None if energy_j is None else energy_j * share,
                  meter.peak_w or 0.0, guard.violations, guard.steps)


def set_backstop(device: EmulatedDevice, power_cap_w: float | None) -> None:
    """The power limit a Session sets under a constant cap (its hardware backstop), set for a
    replayed configuration too, so that every method of a comparison runs under the same hold
    as wattcap's run (a board without a power limit has none). Put back by `restore`."""
    if power_cap_w is None:
        return
    try:
        device.set_power_limit_w(power_cap_w)
    except DeviceNotSupportedError:
        return


def replay_planned(runs: dict[tuple[int, int], RunRecord], seed: int, device: EmulatedDevice,
                   planning: PlanSettings, power_cap_w: float | None) -> Replay:
    """wattcap's run on this board as `wattcap train` makes it: a Session plans from
    `planning`, its watchdog and drift monitor watch the board, and where the board's level
    (the run's first windows) calls for it, the Session chooses its batch size and clock again
    once (`DeviceGuard.replan_for_board`). Each step's math is that of the recorded run (of
    `runs`, by batch size and `seed`) of the batch size in use: a step of b samples goes
    b / (the samples that run needed) of the way to the target (its budget, for a run that
    missed it), so a run that re-plans after its first windows goes the rest of the way at the
    new batch size. The Session reports at the recorded runs' evaluation cadence (a re-plan
    happens at a report, as in training)."""
    from wattcap.runtime.session import Session

    if not isinstance(planning.profile, ProfileTable):
        raise ValueError("a planned replay plans from a ProfileTable")
    meter = PowerMeter(device.sensor_period_s)
    reached, stopped = False, None
    session = Session(
        device, model=planning.profile.model, planning=planning,
        cap=CapSettings(power_cap=power_cap_w),
        device_handling=DeviceHandling(handle_signals=False))
    start_s = device.now_s()
    meter.start(start_s)
    try:
        with device.sensor_ticks(meter), session:
            end_s, energy_j, reached = _steps_to_target(runs, seed, device, meter, session)
    except WatchError as err:
        # the run stopped with the cap unmet (the lowest clock draws more than the cap on this
        # board, the Session's watchdog stops it): it never reaches the target, and what it
        # trained until then is the price of trying (as a missed run's budget). Any other
        # failure of the watch (a callback that raised, a silent sensor) is a fault, not a
        # result.
        guard = session._guard  # the watchdog whose unmet violation stopped the run
        if guard is None or err is not guard.unmet:
            raise
        stopped = f"stopped: {err.message}"
        end_s = device.now_s()
        energy_j = meter.measured_energy_to_j(end_s)
    record = session.record
    assert record is not None
    elapsed_s = end_s - start_s
    replanned = [e for e in record.events if e.startswith("re-planned for this board")]
    return Replay(elapsed_s if reached else None, energy_j if reached else None,
                  meter.peak_w or 0.0, list(record.cap_violations),
                  list(record.frequency_steps),
                  budget_time_s=None if reached else elapsed_s,
                  budget_energy_j=None if reached else energy_j,
                  batch_size=record.batch_size, knob_value=session.frequency_hz,
                  events=replanned + ([stopped] if stopped else []))


def _steps_to_target(runs: dict[tuple[int, int], RunRecord], seed: int, device: EmulatedDevice,
                     meter: PowerMeter, session: Any) -> tuple[float, float | None, bool]:
    """Empty steps at the Session's batch size in use until the way to the target (or the
    budget, for a run that missed it) is gone: the device time and energy where it ended, and
    whether the run of the batch size it ended at reached the target (energy None: no
    reading in the whole replay). (A run that re-plans
    between a batch size whose run reached the target and one whose run missed it counts the
    share of the one's way as a share of the other's.)"""
    progress = 0.0
    while True:
        b = session.batch_size
        run = runs.get((b, seed))
        if run is None:
            raise ValueError(f"the Session chose b={b}, which has no recorded run of seed "
                             f"{seed}")
        every = run.config.eval_every_samples if run.config is not None else 256
        needed = run.samples_to_target if run.samples_to_target is not None \
            else float(run.samples_seen)
        before_s = device.now_s()
        before_j = meter.energy_to_j(before_s)
        with session.step():
            pass  # the emulator models the step's time and power from its cost
        gain = b / max(needed, 1.0)
        if progress + gain >= 1.0:
            # the way ends inside this step: time and energy up to there, not to its end
            share = (1.0 - progress) / gain
            after_j = meter.measured_energy_to_j(device.now_s())
            return (before_s + share * (device.now_s() - before_s),
                    None if after_j is None else before_j + share * (after_j - before_j),
                    run.samples_to_target is not None)
        progress += gain
        if session.samples // every > (session.samples - b) // every:
            session.report(0.0)


def load_or_profile(out: Path, device: str, model: str, batch_sizes: tuple[int, ...],
                    board: BoardMode = "kind") -> ProfileTable:
    """The exhaustive profile of `model` on an emulated device (a bundled spec's name or a spec
    file's path), reused from DIR if present and made for the same spec and architecture; on
    unkind boards, measured on a board of its own draw (`PROFILE_BOARD_SEED`)."""
    # the kind board's profile is the one it always was (seed 0's sensor noise)
    emulated = EmulatedDevice(device) if board == "kind" else \
        run_device(device, PROFILE_BOARD_SEED, board)
    suffix = "" if board == "kind" else "-unkind"
    path = out / f"profile-{file_stem(emulated.name)}-{file_stem(model)}{suffix}.json"
    if path.exists():
        try:
            profile = ProfileTable.load(path)
            profile.check_matches(device=emulated.name, model=model)
            if profile.device_spec == emulated.spec.model_dump(mode="json"):
                return profile
        except WattcapFileError:
            pass
    profile = Profiler(emulated, model, batch_sizes=batch_sizes).run(exhaustive=True)
    profile.save(path)
    return profile


def expected_time_s(replays: list[Replay]) -> float | None:
    """The time to the target a user should expect over these replays, restarts included
    (None where none reached it)."""
    return expected_over_runs([r.time_s for r in replays], [r.budget_time_s for r in replays])


def fastest_by_replay(profile: ProfileTable, power_cap_w: float | None,
                      runs: dict[tuple[int, int], RunRecord], device: str, seeds: int,
                      board: BoardMode) -> tuple[int, int, list[Replay]] | None:
    """The brute force over replays (see the module): (b, clock, each seed's replay) of the
    lowest expected time; None where no configuration the profile allows has runs."""
    from wattcap.algorithms.power_margin import with_power_margin
    from wattcap.core.defaults import DEFAULT_MARGIN_SIGMAS

    best: tuple[float, int, int, list[Replay]] | None = None
    # the same margin below the cap as every method's plan
    margined = with_power_margin(profile, DEFAULT_MARGIN_SIGMAS)
    for b, row in sorted(margined.rows().items()):
        if any((b, seed) not in runs for seed in range(seeds)):
            continue
        allowed = [p.knob_value for p in row
                   if power_cap_w is None or p.peak_power_w <= power_cap_w]
        for knob_value in sorted(allowed)[-FASTEST_CLOCKS_PER_BATCH_SIZE:]:
            replays = [replay_on_device(runs[(b, seed)], run_device(device, seed, board),
                                        knob_value, power_cap_w, profile.power_noise_w)
                       for seed in range(seeds)]
            expected = expected_time_s(replays)
            if expected is not None and (best is None or expected < best[0]):
                best = (expected, b, knob_value, replays)
    return None if best is None else (best[1], best[2], best[3])


__all__ = ["FASTEST_CLOCKS_PER_BATCH_SIZE", "PROFILE_BOARD_SEED", "BoardMode", "Replay",
           "expected_time_s", "fastest_by_replay", "load_or_profile", "replay_on_device",
           "replay_planned", "run_device", "set_backstop"]
