"""Run-time guard while training: the power-cap watchdog (the profile-drift monitor, its
sibling, is `wattcap.runtime.drift_monitor`).

It is a sensor-tick callback (`Device.sensor_ticks`), so it acts on every backend, mid-step
included: from a polling thread on real hardware, from the virtual clock on the emulator.

* `CapWatchdog` keeps the cap: two consecutive readings above it (power above the cap for
  longer than one sensor period), or one above it by more than the sensor's noise explains or
  taken while the board's power limit (at the cap) was acting, step the GPU frequency down,
  and every run of readings above the cap is recorded as a `CapViolation`. Where it cannot
  step down (the lowest clock already, or the device refuses) the run stops (`unmet`) rather
  than go on over the cap.

`exit_cleanly_on_signals` (wattcap.devices.signals) turns SIGTERM/SIGINT/SIGHUP into an
exception, so device context managers put the clocks back however the run ends.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from wattcap.core.events import CapViolation, FrequencyStep
from wattcap.devices.base import Device, PowerReading
from wattcap.devices.clock_clamp import lock_clock_within
from wattcap.devices.errors import DeviceError, WatchError
from wattcap.devices.signals import EXIT_SIGNALS, Terminated, exit_cleanly_on_signals

__all__ = [
    "EXIT_SIGNALS", "CapViolation", "CapWatchdog", "FrequencyStep", "Terminated",
    "exit_cleanly_on_signals",
]


#: readings after a clock drop that may still carry power from before it: a sensor that
#: averages two periods and reports one period late (the unkind emulator's; NVML's instant
#: field reads about one period) holds the old clock's power for up to three readings
SETTLE_READINGS = 3

#: a single reading over the cap by more than this many standard deviations of the sensor's own
#: noise (the profile's `power_noise_w`) is not noise: it is decided at once instead of waiting
#: for the next reading, which on a sensor that averages and lags would still show the old
#: power (three readings over the cap where two suffice); 3 sigma: one reading in ~740 of pure
#: noise, and the plan keeps its margin below the cap besides
SINGLE_READING_SIGMAS = 3.0


def _ran_hz(set_hz: int, reading: PowerReading) -> int:
    """The clock the board ran a reading at: the one set, or the lower one it reported (a
    power limit or a clamp holding it)."""
    return min(set_hz, reading.clock_hz or set_hz)


@dataclass
class CapWatchdog:
    """Keeps the cap: steps the frequency down one level when power stays above the cap for
    longer than one sensor period (two consecutive readings), and records every violation. A
    single reading over the cap is noise until the next one confirms it, but it is still
    recorded: the cap is never exceeded silently; one over the cap by more than
    `SINGLE_READING_SIGMAS` of the sensor's noise (`sensor_noise_w`), or taken while the
    hardware said its power limit, at or above the cap, was acting, is decided at once. The
    first reading after a clock drop (or the watchdog's own step or knob move) carries the
    power from before it on a sensor that reports late: recorded, it never confirms. Each
    further confirmed violation steps down again.

    Hysteresis: a step-down caused by a transient (a noise spike, a burst of work) should not
    slow the rest of the run. After `recovery_readings` consecutive readings under the cap, the
    watchdog steps back up one level if the level above was, before the step, typically under
    the cap by a margin (its median reading + `margin_sigmas` x the readings' spread there,
    from the median absolute deviation);
    never above the frequency it started at (`ceiling_hz`, the plan's). A level that fails
    again after a step back up doubles the wait before the next try, so a level that really
    breaks the cap is left for good after a few tries instead of oscillating. What the watchdog
    cannot do (already at the lowest frequency, the device refused the change) goes to
    `notes` and to `unmet`, the error the Session stops the run with at the next step
    boundary: a violation it cannot answer is not left to go on (at the lowest clock, only
    where `stop_at_floor`: a moving cap's follower pauses the run there instead). Clock
    changes hold the device's `clock_lock`.

    `hold(reason)` keeps recording violations but leaves the frequency alone (a moving cap
    fell below every configuration: the step in flight finishes at the frequency that
    overdraws least, and stepping down would only stretch it); `hold(None)` releases."""

    device: Device
    power_cap_w: float | None
    recovery_readings: int = 20
    margin_sigmas: float = 2.0
    max_recovery_readings: int = 640
    violations: list[CapViolation] = field(default_factory=list)
    steps: list[FrequencyStep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ceiling_hz: int | None = None
    #: f*(b) for a cap from the profile (margined, at the run's batch size), or None where the
    #: profile has none: a confirmed violation goes straight to f*(b) for the cap less the
    #: excess it saw, instead of one level down
    frequency_for_cap: Callable[[float], int | None] | None = None
    #: the profile's peak power at the run's batch size at a clock (None where it has no
    #: point there): with it, a confirmed violation asks f*(b) for the cap scaled by what this
    #: board draws against the profile at the current clock (the plan for this board, its
    #: margin kept), or for the cap less the excess where that is lower
    profile_power_at: Callable[[int], float | None] | None = None
    #: for a run planned on a power limit or power mode: applies the plan's value for a cap
    #: (less the excess seen) where it draws less than the value in force, and says what it
    #: did (None: nothing to move to; the clock then steps down a level)
    knob_for_cap: Callable[[float], str | None] | None = None
    #: the sensor's noise (one standard deviation, W; the profile's): a single reading over the
    #: cap by more than `SINGLE_READING_SIGMAS` of it is a confirmed violation (None: every
    #: violation waits for a second reading)
    sensor_noise_w: float | None = None
    #: a confirmed violation at the lowest clock stops the run (False under a moving cap,
    #: whose follower pauses the run where the cap falls below every configuration)
    stop_at_floor: bool = True
    #: set once, when a confirmed violation could not be answered: the run must stop
    unmet: WatchError | None = None
    _run: list[PowerReading] = field(default_factory=list)
    #: readings of the current violation run already answered by a decision
    _decided: int = 0
    _noted: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _history: dict[int, deque[float]] = field(default_factory=dict)
    _typical_w: dict[int, tuple[float, float]] = field(default_factory=dict)
    _under: int = 0
    _wait: dict[int, int] = field(default_factory=dict)
    _held: str | None = None
    #: a re-measure that sets the clocks itself is in progress (`measuring`)
    _measuring: str | None = None
    #: readings since the clock last went down (by anyone), the watchdog last acted (a step or
    #: a knob move) or a new plan began; None: none of these yet. And the clock the last
    #: reading was taken at
    _since_drop: int | None = None
    _last_hz: int | None = None
    #: the steps before this index were of an earlier plan (`restart`)
    _plan_steps_from: int = 0

    def __call__(self, reading: PowerReading) -> None:
        if self.power_cap_w is None:
            return
        with self._lock:
            current = self.device.run_frequency_hz()
            # the clock the board ran this reading at: the one set, or lower where a power
            # limit or a clamp held it (the readings' power lags behind either)
            ran_hz = _ran_hz(current, reading)
            if self._last_hz is not None and ran_hz < self._last_hz \
                    and not reading.power_limited:
                # a drop whose old power may linger in the next readings; not the clock a
                # power limit moves as it holds the board (NVIDIA's dithers step by step):
                # that is the limit answering power over it, not a change to wait out
                self._since_drop = 0
            self._last_hz = ran_hz
            if self._since_drop is not None:
                self._since_drop += 1
            if self.ceiling_hz is None:
                self.ceiling_hz = current
            self._history.setdefault(current, deque(maxlen=64)).append(reading.power_w)
            if reading.power_w > self.power_cap_w:
                self._under = 0
                self._run.append(reading)
                if self._since_drop == 1:
                    # the first reading after a drop (or the watchdog's own step or knob move)
                    # still shows the power from before it on any sensor that reports late:
                    # recorded, never a confirmation
                    self._decided = len(self._run)
                # confirmed: two readings in a row over the cap since the last decision (one
                # decision per violation; a clock that still breaks it needs two new readings),
                # or one reading that says enough alone (`_single_reading_decides`)
                new_readings = len(self._run) - self._decided
                single = None if new_readings != 1 else self._single_reading_decides(reading)
                if new_readings >= 2 or single is not None:
                    # what the confirming readings were over by: the plan's choice for the cap
                    # less that much is what draws little enough (a single spike in a run of
                    # two does not count)
                    used = min(new_readings, 2)
                    excess_w = min(r.power_w for r in self._run[-used:]) - self.power_cap_w
                    self._decided = len(self._run)
                    if self.held is None:
                        self._step_down(reading, excess_w, used, single)
                    else:
                        self._note(f"held: {self.held}", f"power above the cap, frequency "
                                   f"held: {self.held}")
                return
            if self._run:
                self._close_run()
            self._under += 1
            if self.held is None:
                self._maybe_step_up(reading, current)

    def _single_reading_decides(self, reading: PowerReading) -> str | None:
        """Why one reading over the cap is a violation without a second (None: it waits):
        taken after the last clock drop settled (a reading that may still carry the power from
        before a step down waits for a second, as before: one step per violation), and either
        over the cap by more than the sensor's noise explains, or taken while the hardware
        said its power limit, at or above the cap, was acting: the board is then held at that
        limit, outside the plan's margin under the cap whatever the sensor's noise, and
        NVIDIA's limit holds a window's average and lets it pass the limit (up to ~20 % at
        low limits, published sweeps): waiting for a second reading only leaves it there a
        period longer. (Where the board held exactly at the cap would not have passed it,
        the step is the one the plan's margin asks for all the same.)"""
        assert self.power_cap_w is not None
        if self._since_drop is not None and self._since_drop <= SETTLE_READINGS:
            return None
        noise_w = self.sensor_noise_w
        if noise_w is not None and noise_w > 0 and \
                reading.power_w > self.power_cap_w + SINGLE_READING_SIGMAS * noise_w:
            return (f"by more than {SINGLE_READING_SIGMAS:g} standard deviations of the "
                    "sensor's noise")
        if reading.power_limited:
            limit_w = self.device.enforced_power_limit_w()
            if limit_w is not None and limit_w >= self.power_cap_w - 1e-9:
                return (f"while the board's power limit ({limit_w:g} W) was acting: the "
                        "board is held at it, outside the plan's margin")
        return None

    def _step_down(self, reading: PowerReading, excess_w: float = 0.0, used: int = 2,
                   single: str | None = None) -> None:
        """Answer a confirmed violation (`used` readings confirmed it, their least excess
        `excess_w`; one reading: `single` says why it sufficed): the plan's knob value or
        clock for a lower cap, else a level down."""
        assert self.power_cap_w is not None
        why = "for more than one sensor period" if used >= 2 or single is None else single
        with self.device.clock_lock:
            current = self.device.run_frequency_hz()
            if self.knob_for_cap is not None:
                moved = self.knob_for_cap(self.power_cap_w - excess_w)
                if moved is not None:  # the plan's power limit or mode for the lower cap
                    self.steps.append(FrequencyStep(
                        time_s=reading.time_s, from_hz=current, to_hz=current,
                        reason=f"power {reading.power_w:.2f} W above the cap "
                               f"{self.power_cap_w:.2f} W {why}: "
                               f"{moved} (the plan's for the cap less the {excess_w:.2f} W "
                               "over it)"))
                    self._under = 0
                    self._since_drop = 0  # the next readings may carry the power from before
                    return
            lower = [f for f in self.device.frequencies_hz() if f < current]
            if not lower:
                message = (f"power {reading.power_w:.2f} W above the cap "
                           f"{self.power_cap_w:.2f} W at the lowest frequency "
                           f"{current / 1e6:.1f} MHz: the cap cannot be met by the frequency "
                           "alone")
                self._note("floor", message)
                if self.stop_at_floor:
                    self._stop(message, "a smaller batch size draws less power (`wattcap "
                               "plan` for this cap), a stale profile is measured again with "
                               "`wattcap profile --refresh`, or the cap is raised (each a new "
                               "run); the checkpoint resumes this one as it is once the board "
                               "draws less again (cooled down)")
                return
            # straight to f*(b) for the cap less the excess seen, where the profile knows it
            # and it is lower (at the planned point too: the plan's choice for a lower cap);
            # one level down without a profile (or where f*(b) is not lower)
            target = None
            if self.frequency_for_cap is not None:
                # where the board ran under the clock set (a hardware power limit holding
                # it, a throttle), its power is compared with the profile at the clock it ran
                ran_hz = _ran_hz(current, reading)
                target = self.frequency_for_cap(self._cap_to_ask(ran_hz, excess_w, used))
            jump = target is not None and target < current and target in lower
            to_hz = target if jump and target is not None else lower[-1]
            try:
                # a clock the board does not follow (hot, held) is recorded as a clamp and
                # the lock goes to the board's ceiling: a step all the same
                applied = lock_clock_within(self.device, to_hz, "watchdog")
            except DeviceError as err:
                message = (f"could not step the frequency down to {to_hz / 1e6:.1f} MHz: "
                           f"{err.message}")
                self._note(f"refused {to_hz}", message)
                self._stop(f"power {reading.power_w:.2f} W above the cap "
                           f"{self.power_cap_w:.2f} W and {message}",
                           err.hint or "give wattcap the permission to set clocks (see "
                           "`wattcap devices --probe`), then resume from the checkpoint")
                return
        history = list(self._history.get(current, ()))
        before = history[:-len(self._run)] if len(history) > len(self._run) else history
        if before:
            # What the level was like before it broke the cap (the violating readings are the
            # transient in question, not its normal running): typical (median) and spread.
            # Median and MAD, not mean and standard deviation: earlier spikes at this level
            # must not make its normal running look worse than it is.
            median_w = statistics.median(before)
            spread_w = 1.4826 * statistics.median(abs(w - median_w) for w in before)
            self._typical_w[current] = (median_w, spread_w)
        if any(s.to_hz == current and s.reason.startswith("headroom") for s in self.steps[-1:]):
            # The level failed right after a step back up: wait twice as long next time.
            self._wait[current] = min(2 * self._wait.get(current, self.recovery_readings),
                                      self.max_recovery_readings)
        self._under = 0
        self._since_drop = 0  # the next readings may still carry the power from before it
        self.steps.append(FrequencyStep(
            time_s=reading.time_s, from_hz=current, to_hz=applied,
            reason=f"power {reading.power_w:.2f} W above the cap {self.power_cap_w:.2f} W "
                   + why
                   + (f"; straight to the plan's clock for the cap less the {excess_w:.2f} W "
                      "over it" if jump else ""),
        ))

    def _cap_to_ask(self, ran_hz: int, excess_w: float, used: int = 2) -> float:
        """The cap, in the profile's watts, whose f*(b) a confirmed violation goes to: the cap
        less the excess seen, or, where the profile knows the clock the board ran at
        (`ran_hz`), the cap scaled by the profile's power there over the power seen (a board
        drawing 4 % more than the profile gets the clock whose profiled peak is 4 % under the
        cap, margin included: one step instead of one level per two readings), whichever is
        lower."""
        assert self.power_cap_w is not None
        excess_w = max(excess_w, 0.0)
        ask_w = self.power_cap_w - excess_w
        # readings soon after the clock went down still carry the higher power from before it
        # (a sensor that averages and reports late): their ratio to the new clock's profiled
        # power would overstate the board; only readings all taken after the drop has settled
        # scale the cap (after a rise, or at the start, stale readings understate it: a ratio
        # from them asks too little, never too much)
        settled = self._since_drop is None or self._since_drop >= SETTLE_READINGS + used
        expected_w = None if self.profile_power_at is None or not settled \
            else self.profile_power_at(ran_hz)
        if expected_w is not None and expected_w > 0 and excess_w > 0:
            ask_w = min(ask_w, self.power_cap_w * expected_w / (self.power_cap_w + excess_w))
        return ask_w

    def _maybe_step_up(self, reading: PowerReading, current: int) -> None:
        assert self.power_cap_w is not None
        if self.ceiling_hz is None or current >= self.ceiling_hz:
            return
        higher = [f for f in self.device.frequencies_hz() if current < f <= self.ceiling_hz]
        if not higher:
            return
        up = higher[0]
        typical = self._typical_w.get(up)
        if typical is None:
            return  # never measured there by this watchdog: no evidence that it fits
        if self._under < self._wait.get(up, self.recovery_readings):
            return
        median_w, spread_w = typical
        if median_w + self.margin_sigmas * spread_w > self.power_cap_w:
            return  # the level breaks the cap in its normal running, not by a transient
        with self.device.clock_lock:
            if self.device.run_frequency_hz() != current:
                return  # someone else (a re-plan) changed the clock meanwhile
            try:
                applied = lock_clock_within(self.device, up, "watchdog")
            except DeviceError as err:
                self._note(f"refused {up}", f"could not step the frequency back up to "
                           f"{up / 1e6:.1f} MHz: {err.message}")
                return
        if applied <= current:
            # the board holds the clock (hot): the level is not reached; wait longer next time
            self._wait[up] = min(2 * self._wait.get(up, self.recovery_readings),
                                 self.max_recovery_readings)
            self._under = 0
            if applied < current:
                self.steps.append(FrequencyStep(
                    time_s=reading.time_s, from_hz=current, to_hz=applied,
                    reason="the board holds the clock lower than the level tried "
                           f"({up / 1e6:.1f} MHz): its ceiling for now"))
            return
        self._under = 0
        self.steps.append(FrequencyStep(
            time_s=reading.time_s, from_hz=current, to_hz=applied,
            reason=f"headroom: {self._wait.get(up, self.recovery_readings)} readings under the "
                   f"cap {self.power_cap_w:.2f} W, and {up / 1e6:.1f} MHz ran at a typical "
                   f"{median_w:.2f} W before its step down",
        ))

    def _stop(self, message: str, hint: str) -> None:
        if self.unmet is None:
            self.unmet = WatchError(f"{message}; the run stops rather than go on over the cap",
                                    hint=hint)

    def _note(self, key: str, message: str) -> None:
        # Once per kind of problem: a device stuck at its floor would otherwise log every tick.
        if key not in self._noted:
            self._noted.add(key)
            self.notes.append(message)

    def _close_run(self) -> None:
        self._decided = 0
        first, last = self._run[0], self._run[-1]
        self.violations.append(CapViolation(
            start_s=first.time_s,
            duration_s=last.time_s - first.time_s,
            readings=len(self._run),
            max_power_w=max(r.power_w for r in self._run),
        ))
        self._run = []

    def set_cap(self, power_cap_w: float | None, ceiling_hz: int | None = None) -> None:
        """A new cap (and the plan's frequency for it): what was learnt about levels under the
        old cap no longer says whether they fit."""
        with self._lock:
            self._set_cap_locked(power_cap_w, ceiling_hz)

    def _set_cap_locked(self, power_cap_w: float | None, ceiling_hz: int | None) -> None:
        if self._run:
            self._close_run()
        self.power_cap_w = power_cap_w
        self.ceiling_hz = ceiling_hz
        self._typical_w.clear()
        self._wait.clear()
        self._under = 0

    def restart(self, power_cap_w: float | None, ceiling_hz: int) -> None:
        """A new plan (another batch size: a re-plan for the board): what was learnt of each
        clock's power, and which clocks had to be left, was of the old one; the violations
        and steps stay in the record."""
        with self._lock:
            self._set_cap_locked(power_cap_w, ceiling_hz)
            self._history.clear()
            self._plan_steps_from = len(self.steps)
            # the next readings still carry the old batch size's power, which the profile's
            # points at the new one do not explain: no power ratio until they have passed
            self._since_drop = 0

    def hold(self, reason: str | None) -> None:
        """Record violations without changing the frequency (None: act again)."""
        with self._lock:
            self._held = reason
            self._under = 0

    @property
    def held(self) -> str | None:
        """Why the frequency is held (`hold`, or a re-measure in progress), or None."""
        return self._held or self._measuring

    @contextmanager
    def measuring(self, reason: str) -> Iterator[None]:
        """For the block, record violations without changing the frequency: a re-measure sets
        the clocks it measures (a step under it would label a point with a clock it did not
        run). Apart from `hold`: a moving cap's hold, set or released meanwhile, stays its
        own."""
        with self._lock:
            self._measuring = reason
            self._under = 0
        try:
            yield
        finally:
            with self._lock:
                self._measuring = None

    def update_cap(self, power_cap_w: float | None) -> None:
        """The cap moved a little but the plan stays (a battery draining): judge the next
        readings against it, keeping what was learnt about each level."""
        with self._lock:
            self.power_cap_w = power_cap_w

    def set_ceiling_hz(self, ceiling_hz: int) -> None:
        """The plan changed the frequency (a re-plan after drift): never step back up above it."""
        with self._lock:
            self.ceiling_hz = ceiling_hz
            self._under = 0

    @property
    def plan_steps_from(self) -> int:
        """How many of `steps` were of earlier plans (a run's checkpoint keeps it)."""
        return self._plan_steps_from

    def resume_steps(self, steps: list[FrequencyStep], plan_steps_from: int) -> None:
        """A resumed run's earlier steps, and how many of them were of earlier plans."""
        with self._lock:
            self.steps += steps
            self._plan_steps_from = plan_steps_from

    def lowest_infeasible_hz(self) -> int | None:
        """The lowest frequency this watchdog had to leave because of the cap and did not get
        back to since it last left it, if any."""
        with self._lock:
            left: set[int] = set()
            for step in self.steps[self._plan_steps_from:]:  # in order: regained, then left
                if step.reason.startswith("headroom"):
                    left.discard(step.to_hz)
                else:
                    left.add(step.from_hz)
            return min(left, default=None)

    def finish(self) -> None:
        """Close a violation still open at the end of the run."""
        with self._lock:
            if self._run:
                self._close_run()
