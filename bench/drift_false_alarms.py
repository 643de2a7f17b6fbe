"""Does the drift monitor cry wolf on boards that differ from the one profiled? Each run profiles
the model on an emulated board of one draw and trains for an hour of device time on another
(`emulated:<name>:unkind`, a board state per run: speed, power, host speed, a lagging sensor),
the Session's drift monitor watching; a steady board should cause no re-plan. Beside it, the same
runs on a board that really changes after 10 minutes (20 % slower: a heat soak) say how long the
monitor takes to re-plan. The steps are the emulator's model of the training step (no math runs:
the monitor sees only time and power), so an hour of device time takes seconds (a minute on the
H100, whose steps are short).

    python bench/drift_false_alarms.py [--runs 5] [--hours 1] [--kind] [--boards NAME ...]

Prints, per scenario, the re-plans on steady boards (goal: 0), the time from the change to
the first re-plan after it on the changing ones, and the steady runs' cap violations per hour
(how far over the cap at worst, how long the longest lasted in readings: goal, at most two
sensor periods) and, from the emulator's ground truth (`EmulatedDevice.true_period_w`: each
period's real power, no noise, window or lag), the longest run of periods really over the cap
and how many such runs no violation reported. `--kind` runs the kind board (the profile's own)
instead.
"""

from __future__ import annotations

import argparse
import math
import statistics
from dataclasses import dataclass

from wattcap.core.run import RunRecord
from wattcap.devices.emulated import Drift, EmulatedDevice
from wattcap.devices.emulated_board import draw_board_state
from wattcap.experiments.replay import PROFILE_BOARD_SEED
from wattcap.measure.profiling import Profiler
from wattcap.runtime.session import Session
from wattcap.runtime.session_config import CapSettings, DeviceHandling, PlanSettings

#: (board, model, batch size, cap): the bundled scenarios' boards with a host- and a GPU-bound b,
#: and the Orins, the H100 and the A100 at one point each
SCENARIOS = [("jetson-nano", "digits32-cnn", 32, 4.5), ("jetson-nano", "digits32-cnn", 128, None),
             ("jetson-tx2nx", "digits32-cnn", 32, 7.0), ("jetson-tx2nx", "resnet18", 64, None),
             ("jetson-orin-nano", "resnet18", 32, 10.0), ("jetson-agx-orin", "resnet18", 64, 30.0),
             ("h100-sxm", "resnet18", 256, None), ("a100-sxm4", "resnet18", 256, 300.0)]
CHANGE_AFTER_S = 600.0


@dataclass
class Outcome:
    """One run's record and, beside it, the emulator's ground truth: the power the board really
    drew in each sensor period (no noise, no window, no lag), and the period."""

    record: RunRecord
    true_period_w: list[tuple[float, float]]
    period_s: float


def run(board: str, model: str, batch_size: int, cap_w: float | None, seed: int, hours: float,
        kind: bool, drift: Drift | None) -> Outcome:
    """The record of `hours` of device time (its re-plans, its cap violations), and the truth."""
    profile_board = None if kind else draw_board_state(board, PROFILE_BOARD_SEED)
    profile = Profiler(EmulatedDevice(board, board=profile_board), model,
                       batch_sizes=(batch_size,)).run(exhaustive=True)
    device = EmulatedDevice(board, seed=seed, drift=drift,
                            board=None if kind else draw_board_state(board, seed))
    device.true_period_w = []
    with Session(device, model=model, planning=PlanSettings(profile=profile,
                                                            batch_size=batch_size),
                 cap=CapSettings(power_cap=cap_w),
                 device_handling=DeviceHandling(handle_signals=False)) as session:
        while device.now_s() < hours * 3600.0:
            with session.step():
                pass  # the emulator models the step's time and power from its cost
            if session.steps % 200 == 0:
                session.report(0.0)  # a re-plan is due between steps, at a report
    assert session.record is not None
    return Outcome(session.record, device.true_period_w, device.spec.sensor_period_s)


def true_violations(outcome: Outcome, cap_w: float) -> list[tuple[float, int]]:
    """(start time, periods) of each run of sensor periods whose true power was over the cap."""
    runs: list[tuple[float, int]] = []
    start_s, periods = 0.0, 0
    for tick_s, power_w in [*outcome.true_period_w, (math.inf, -math.inf)]:
        if power_w > cap_w:
            start_s, periods = (start_s, periods + 1) if periods else (tick_s, 1)
        elif periods:
            runs.append((start_s, periods))
            periods = 0
    return runs


def unreported(outcome: Outcome, cap_w: float) -> int:
    """True over-cap runs that no recorded violation overlaps, from a period before their
    first period to three after their last (the readings may lag that far; one run of readings
    over the cap may cover two true runs a short dip apart)."""
    period_s = outcome.period_s
    spans = [(v.start_s, v.start_s + v.duration_s) for v in outcome.record.cap_violations]
    return sum(not any(first_s <= start_s + (periods + 3) * period_s
                       and last_s >= start_s - period_s for first_s, last_s in spans)
               for start_s, periods in true_violations(outcome, cap_w))


def violations_line(outcomes: list[Outcome], cap_w: float, hours: float) -> str:
    """The steady runs' cap violations: how many per hour, how far over the cap at worst and
    how long the longest lasted, in sensor readings over the cap in a row (each reading
    averages its window; the watchdog acts at the second, or at the first beyond the sensor's
    noise); beside them the truth: the longest run of periods whose real power was over the
    cap, and how many such runs went unreported."""
    found = [v for o in outcomes for v in o.record.cap_violations]
    per_hour = len(found) / (len(outcomes) * hours)
    truth = [p for o in outcomes for _, p in true_violations(o, cap_w)]
    missed = sum(unreported(o, cap_w) for o in outcomes)
    true_text = (f"; truly over: longest {max(truth)} period(s), {missed} unreported"
                 if truth else "; truly over: never")
    if not found:
        return f"{per_hour:5.1f}/h{true_text}"
    worst_w = max(v.max_power_w for v in found) - cap_w
    longest = max(v.readings for v in found)
    return (f"{per_hour:5.1f}/h, worst +{worst_w:.2f} W ({worst_w / cap_w:+.1%}), longest "
            f"{longest} reading(s){true_text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--kind", action="store_true", help="the kind board instead")
    parser.add_argument("--boards", nargs="+", metavar="NAME",
                        help="only these boards' scenarios (e.g. a100-sxm4)")
    args = parser.parse_args()
    boards = "kind" if args.kind else "unkind"
    print(f"{args.runs} runs of {args.hours:g} h per scenario on {boards} boards")
    print(f"{'board':16} {'model':13} {'b':>4} {'cap':>5} {'steady re-plans':>16} "
          f"{'after a 20 % slowdown at 600 s: re-planned after':>50}   steady runs' cap "
          "violations")
    for board, model, b, cap in SCENARIOS:
        if args.boards and board not in args.boards:
            continue
        outcomes = [run(board, model, b, cap, seed, args.hours, args.kind, None)
                    for seed in range(args.runs)]
        steady = [len(o.record.replans) for o in outcomes]
        delays = []
        for seed in range(args.runs):
            times = [r.time_s for r in run(board, model, b, cap, seed, args.hours, args.kind,
                                           Drift(after_s=CHANGE_AFTER_S, speed_factor=0.8,
                                                 description="heat soak")).record.replans]
            after = [t - CHANGE_AFTER_S for t in times if t >= CHANGE_AFTER_S]
            delays.append(after[0] if after else None)
        found = [d for d in delays if d is not None]
        delay = (f"{statistics.median(found):.1f} s median ({len(found)}/{len(delays)} runs)"
                 if found else f"never (0/{len(delays)} runs)")
        cap_text = "none" if cap is None else f"{cap:g}"
        violations = "no cap" if cap is None else violations_line(outcomes, cap, args.hours)
        print(f"{board:16} {model:13} {b:>4} {cap_text:>5} {sum(steady):>8} in {len(steady)} runs"
              f" {delay:>50}   {violations}")


if __name__ == "__main__":
    main()
