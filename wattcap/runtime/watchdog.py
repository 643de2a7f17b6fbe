"""Run-time guards while training: the power-cap watchdog and the profile-drift monitor.

Both are sensor-tick callbacks (`Device.sensor_ticks`), so they act on every backend, mid-step
included: from a polling thread on real hardware, from the virtual clock on the emulator.

* `CapWatchdog` keeps the cap: two consecutive readings above it (power above the cap for
  longer than one sensor period) step the GPU frequency down one level, and every run of
  readings above the cap is recorded as a `CapViolation`. Where it cannot step down (the
  lowest clock already, or the device refuses) the run stops (`unmet`) rather than go on
  over the cap.
* `DriftMonitor` keeps the plan honest: it compares the power and step time measured at the
  applied (b, f) with the profile's point; when they differ by more than a tolerance (the device
  heated up, changed power mode, aged) it records a `DriftEvent`, and at the next evaluation it
  re-measures that batch size's row around the current frequency and re-plans f*(b) — the batch
  size stays, since changing it mid-run would change the samples needed to reach the target.

`exit_cleanly_on_signals` (wattcap.devices.signals) turns SIGTERM/SIGINT/SIGHUP into an exception,
so
device context managers put the clocks back however the run ends.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from wattcap.algorithms.drift import DriftTest, WindowChange
from wattcap.core.defaults import DEFAULT_MARGIN_SIGMAS
from wattcap.core.events import CapViolation, DriftEvent, FrequencyStep, Replan
from wattcap.core.profile import ProfileTable
from wattcap.devices.base import Device, PowerReading
from wattcap.devices.clock_clamp import lock_clock_within
from wattcap.devices.errors import DeviceError, WatchError
from wattcap.devices.signals import EXIT_SIGNALS, Terminated, exit_cleanly_on_signals
from wattcap.measure.profile_refresh import refresh_row
from wattcap.measure.profiling import Profiler

__all__ = [
    "EXIT_SIGNALS", "CapViolation", "CapWatchdog", "DriftEvent", "DriftMonitor",
    "FrequencyStep", "Replan", "Terminated", "exit_cleanly_on_signals",
]


@dataclass
class CapWatchdog:
    """Keeps the cap: steps the frequency down one level when power stays above the cap for
    longer than one sensor period (two consecutive readings), and records every violation. A
    single reading over the cap is noise until the next one confirms it, but it is still
    recorded: the cap is never exceeded silently. Each further reading above the cap steps down
    one more level, so a violation lasts one sensor period per level needed to get back under.

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
    #: for a run planned on a power limit or power mode: applies the plan's value for a cap
    #: (less the excess seen) where it draws less than the value in force, and says what it
    #: did (None: nothing to move to; the clock then steps down a level)
    knob_for_cap: Callable[[float], str | None] | None = None
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

    def __call__(self, reading: PowerReading) -> None:
        if self.power_cap_w is None:
            return
        with self._lock:
            current = self.device.run_frequency_hz()
            if self.ceiling_hz is None:
                self.ceiling_hz = current
            self._history.setdefault(current, deque(maxlen=64)).append(reading.power_w)
            if reading.power_w > self.power_cap_w:
                self._under = 0
                self._run.append(reading)
                # confirmed: two readings in a row over the cap since the last decision (one
                # decision per violation; a clock that still breaks it needs two new readings)
                if len(self._run) - self._decided >= 2:
                    # what both confirming readings were over by: the plan's choice for the
                    # cap less that much is what draws little enough (a single spike in the run
                    # does not count)
                    excess_w = min(r.power_w for r in self._run[-2:]) - self.power_cap_w
                    self._decided = len(self._run)
                    if self._held is None:
                        self._step_down(reading, excess_w)
                    else:
                        self._note(f"held: {self._held}", f"power above the cap, frequency "
                                   f"held: {self._held}")
                return
            if self._run:
                self._close_run()
            self._under += 1
            if self._held is None:
                self._maybe_step_up(reading, current)

    def _step_down(self, reading: PowerReading, excess_w: float = 0.0) -> None:
        assert self.power_cap_w is not None
        with self.device.clock_lock:
            current = self.device.run_frequency_hz()
            if self.knob_for_cap is not None:
                moved = self.knob_for_cap(self.power_cap_w - excess_w)
                if moved is not None:  # the plan's power limit or mode for the lower cap
                    self.steps.append(FrequencyStep(
                        time_s=reading.time_s, from_hz=current, to_hz=current,
                        reason=f"power {reading.power_w:.2f} W above the cap "
                               f"{self.power_cap_w:.2f} W for more than one sensor period: "
                               f"{moved} (the plan's for the cap less the {excess_w:.2f} W "
                               "over it)"))
                    self._under = 0
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
                target = self.frequency_for_cap(self.power_cap_w - max(excess_w, 0.0))
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
        self.steps.append(FrequencyStep(
            time_s=reading.time_s, from_hz=current, to_hz=applied,
            reason=f"power {reading.power_w:.2f} W above the cap {self.power_cap_w:.2f} W "
                   "for more than one sensor period"
                   + (f"; straight to the plan's clock for the cap less the {excess_w:.2f} W "
                      "over it" if jump else ""),
        ))

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
            if self._run:
                self._close_run()
            self.power_cap_w = power_cap_w
            self.ceiling_hz = ceiling_hz
            self._typical_w.clear()
            self._wait.clear()
            self._under = 0

    def hold(self, reason: str | None) -> None:
        """Record violations without changing the frequency (None: act again)."""
        with self._lock:
            self._held = reason
            self._under = 0

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

    def lowest_infeasible_hz(self) -> int | None:
        """The lowest frequency this watchdog had to leave because of the cap and never got
        back to, if any."""
        with self._lock:
            left = {s.from_hz for s in self.steps if not s.reason.startswith("headroom")}
            regained = {s.to_hz for s in self.steps if s.reason.startswith("headroom")}
            return min(left - regained, default=None)

    def finish(self) -> None:
        """Close a violation still open at the end of the run."""
        with self._lock:
            if self._run:
                self._close_run()


class DriftMonitor:
    """Compares what the run measures at the applied (b, f) with the profile, and re-plans the
    frequency when the device drifted.

    Use it as a sensor-tick callback (it collects readings) and call `on_step` after every
    training step with the step's device-time span. Readings taken outside steps (evaluation,
    checkpoints) are ignored, and so are steps during which the frequency changed. Every
    `min_readings` readings (and at least `min_steps` steps) at one frequency closes a window,
    whose seconds per sample and average power are compared with the profile point; when the
    windows at the point say it moved beyond `time_tolerance` or `power_tolerance`, or beyond
    the noise the windows show where that is larger (`wattcap.algorithms.drift`: the median of
    the last windows at the point, once the run's windows showed their noise), a `DriftEvent`
    is recorded and a re-plan is due. `replan_if_due`, called by the trainer at the next
    evaluation, re-measures the row of the batch size with the profiler, from the current
    frequency down until a point is under the cap (up only to frequencies that are not known
    to break it), applies the highest feasible frequency and records a `Replan`. Re-measured
    points replace the profile's, so a drift is reported once, not at every window.

    On real hardware the re-measure runs the profiler's synthetic training step of the model,
    which needs memory for a second copy of the model next to the one being trained.
    """

    def __init__(
        self,
        device: Device,
        profile: ProfileTable,
        batch_size: int,
        power_cap_w: float | None = None,
        tolerance: float = 0.1,
        power_tolerance: float | None = None,
        watchdog: CapWatchdog | None = None,
        min_readings: int = 5,
        min_steps: int = 2,
        profiler: Profiler | None = None,
        margin_sigmas: float = DEFAULT_MARGIN_SIGMAS,
        offload: Callable[[], AbstractContextManager[None]] | None = None,
    ) -> None:
        if tolerance <= 0 or (power_tolerance is not None and power_tolerance <= 0):
            raise ValueError("drift tolerances must be positive fractions (0.1 = 10 %)")
        profile.check_matches(device=device.name)
        self.device = device
        self.reference = profile
        self.batch_size = batch_size
        self.power_cap_w = power_cap_w
        #: re-planning keeps the planner's margin below the cap (sensor noise x sigmas)
        self.margin_w = margin_sigmas * (profile.power_noise_w or 0.0)
        self.time_tolerance = tolerance
        self.power_tolerance = tolerance if power_tolerance is None else power_tolerance
        self.watchdog = watchdog
        self.min_readings = min_readings
        self.min_steps = min_steps
        self.profiler = profiler or Profiler(device, profile.model, batch_sizes=(batch_size,))
        #: takes the training model off the GPU while the re-measure's own copy is on it (a
        #: run never holds two copies of the model on the GPU)
        self.offload = offload
        self.events: list[DriftEvent] = []
        self.replans: list[Replan] = []
        self.notes: list[str] = []
        #: the windows at the point in use, and whether they say drift or noise
        self._test = DriftTest(self.time_tolerance, self.power_tolerance)
        self.pending: DriftEvent | None = None
        self._lock = threading.Lock()
        self._incoming: list[PowerReading] = []
        #: the next accounted time holds steps from before a restart of the window (CUDA
        #: steps are timed in batches, when the host waits for the GPU): it is left out
        self._mixed_time_due = False
        self._reset_window(None, float("-inf"))

    # -- collecting ----------------------------------------------------------------------------
    def __call__(self, reading: PowerReading) -> None:
        with self._lock:
            self._incoming.append(reading)

    def _reset_window(self, frequency_hz: int | None, start_s: float) -> None:
        self._window_hz = frequency_hz
        self._window_start_s = start_s
        self._window_steps = 0
        #: steps whose time is in `_window_busy_s` (on CUDA fewer than `_window_steps`: the
        #: last ones' time is accounted at the next wait, in the next window)
        self._window_timed_steps = 0
        self._window_busy_s = 0.0
        self._window_power_w: list[float] = []

    def restart_window(self) -> None:
        """Start the window afresh after steps that are not the profile's point (the Session's
        noise-scale measurement runs chunked steps, slower by design, not drift)."""
        with self._lock:
            self._incoming = []
        self._reset_window(self._window_hz, self.device.now_s())
        self._mixed_time_due = self.device.pending_steps > 0

    def on_step(self, start_s: float, end_s: float, busy_s: float,
                samples: int | None = None, timed_steps: int = 1) -> DriftEvent | None:
        """Account one training step that ran over device time [start_s, end_s]; `busy_s` is
        the device time accounted at its end, that of `timed_steps` steps (on CUDA 0 and 0
        while the step is still queued, then every step the host's wait timed: the device's
        `accounted_steps`). Returns the drift event if this step completed a window that
        left the tolerance. A step of another size than the batch size (`samples`: a short
        last batch) is not the profile's point: the window restarts after it."""
        frequency_hz = self._table_frequency(self.device.run_frequency_hz())
        period_s = self.device.sensor_period_s
        with self._lock:
            incoming, self._incoming = self._incoming, []
        if frequency_hz != self._window_hz or (samples is not None
                                               and samples != self.batch_size):
            # The frequency changed (watchdog, re-plan) during or before this step (its time
            # and readings mix two frequencies), or the step was not of the batch size: the
            # window restarts after it (and the time still queued, of steps before the restart,
            # is left out when it is accounted).
            if frequency_hz != self._window_hz:
                self._test.new_point()  # another point: its level starts afresh
            self._reset_window(frequency_hz, end_s)
            self._mixed_time_due = self.device.pending_steps > 0
            return None
        for reading in incoming:
            # A reading averages the sensor period before it: keep only those whose whole
            # period lies inside the window, and only those taken while steps ran.
            if start_s < reading.time_s <= end_s + 1e-9 and (
                reading.time_s - period_s >= self._window_start_s - 1e-9
            ):
                self._window_power_w.append(reading.power_w)
        self._window_steps += 1
        if timed_steps > 0:
            if self._mixed_time_due:
                self._mixed_time_due = False  # steps of before the restart: not this window's
            else:
                # time and steps counted together: a window's time per sample is that of the
                # steps whose time it holds, wherever the waits for the GPU fall
                self._window_busy_s += busy_s
                self._window_timed_steps += timed_steps
        if len(self._window_power_w) < self.min_readings or self._window_steps < self.min_steps \
                or self._window_timed_steps < self.min_steps:
            return None
        event = self._check(end_s)
        self._reset_window(frequency_hz, end_s)
        return event

    def _table_frequency(self, frequency_hz: int) -> int:
        # Clock dividers report values a few kHz off the table (Jetson cur_freq): the profile
        # is keyed by table entries.
        frequencies = self.device.frequencies_hz()
        if frequency_hz in frequencies:
            return frequency_hz
        return min(frequencies, key=lambda f: abs(f - frequency_hz))

    def _check(self, time_s: float) -> DriftEvent | None:
        assert self._window_hz is not None
        expected = self.reference.lookup(self.batch_size, self._window_hz)
        if expected is None:
            note = (f"the profile has no point at b={self.batch_size}, "
                    f"{self._window_hz / 1e6:.1f} MHz: drift is not checked there")
            if note not in self.notes:
                self.notes.append(note)
            return None
        measured_sps = self._window_busy_s / (self._window_timed_steps * self.batch_size)
        measured_w = sum(self._window_power_w) / len(self._window_power_w)
        verdict = self._test.add(WindowChange(
            time_change=measured_sps / expected.seconds_per_sample - 1.0,
            power_change=measured_w / expected.avg_power_w - 1.0,
            steps=self._window_steps, readings=len(self._window_power_w)))
        self._note_noise()
        if verdict is None:
            return None
        event = DriftEvent(
            time_s=time_s, batch_size=self.batch_size, frequency_hz=self._window_hz,
            expected_seconds_per_sample=expected.seconds_per_sample,
            measured_seconds_per_sample=expected.seconds_per_sample * (1 + verdict.time_change),
            expected_avg_power_w=expected.avg_power_w,
            measured_avg_power_w=expected.avg_power_w * (1 + verdict.power_change),
            time_change=verdict.time_change, power_change=verdict.power_change,
            steps=verdict.steps, readings=verdict.readings,
        )
        self.events.append(event)
        self.pending = event
        return event

    def _note_noise(self) -> None:
        """Say once per point when the windows' noise, not the tolerance, sets what counts
        as drift there (once it is known: a first difference or two are no estimate)."""
        if not self._test.ready:
            return
        time_threshold, power_threshold = self._test.thresholds()
        if time_threshold <= self.time_tolerance and power_threshold <= self.power_tolerance:
            return
        assert self._window_hz is not None
        where = f"b={self.batch_size}, {self._window_hz / 1e6:.1f} MHz"
        if any(note.startswith(f"drift at {where} is reported beyond") for note in self.notes):
            return
        self.notes.append(
            f"drift at {where} is reported beyond {time_threshold:.0%} in time and "
            f"{power_threshold:.0%} in power, not the tolerance's {self.time_tolerance:.0%} / "
            f"{self.power_tolerance:.0%}: the measurement windows there vary that much from "
            "one to the next (a host-bound step, a busy host or a board moving its clock)")

    # -- re-planning ---------------------------------------------------------------------------
    def _ceiling_hz(self, current_hz: int) -> int:
        """The highest frequency worth re-measuring: no higher than the profile's old f*(b) (a
        derated device does not get faster), and below any frequency the watchdog had to leave
        (known to break the cap)."""
        frequencies = self.device.frequencies_hz()
        ceiling = current_hz
        if self.power_cap_w is not None:
            old = self.reference.frontier(self.power_cap_w - self.margin_w).get(self.batch_size)
            if old is not None:
                ceiling = max(ceiling, old.knob_value)
        infeasible = self.watchdog.lowest_infeasible_hz() if self.watchdog else None
        if infeasible is not None:
            below = [f for f in frequencies if f < infeasible]
            ceiling = min(ceiling, below[-1] if below else frequencies[0])
        return ceiling

    def replan_if_due(self) -> Replan | None:
        """If drift was found since the last call: re-measure the batch size's row around the
        current frequency, lock the highest frequency that keeps it under the cap, record and
        return the re-plan. Device time spent re-measuring is in `remeasure_device_s`."""
        event, self.pending = self.pending, None
        if event is None:
            return None
        start_s = self.device.now_s()
        from_hz = self._table_frequency(self.device.run_frequency_hz())
        frequencies = self.device.frequencies_hz()
        cap = None if self.power_cap_w is None else self.power_cap_w - self.margin_w
        with self.offload() if self.offload is not None else nullcontext():
            try:
                points = refresh_row(self.profiler, self.batch_size, from_hz, cap,
                                     ceiling_hz=max(from_hz, self._ceiling_hz(from_hz)),
                                     by="drift re-plan")
            finally:
                self.profiler.release_steps()  # its copy leaves before the model comes back
        feasible = [p for p in points if cap is None or p.peak_power_w <= cap]
        best = max(feasible, key=lambda p: p.knob_value) if feasible else None
        to_hz = best.knob_value if best is not None else frequencies[0]
        applied_hz = lock_clock_within(self.device, to_hz, "drift re-plan")
        if self.watchdog is not None:
            self.watchdog.set_ceiling_hz(applied_hz)
        self.reference = self.reference.remeasured(points)
        what = []
        if abs(event.time_change) > self.time_tolerance:
            what.append(f"time per sample {event.expected_seconds_per_sample * 1e3:.3f} -> "
                        f"{event.measured_seconds_per_sample * 1e3:.3f} ms "
                        f"({event.time_change:+.0%})")
        if abs(event.power_change) > self.power_tolerance:
            what.append(f"average power {event.expected_avg_power_w:.2f} -> "
                        f"{event.measured_avg_power_w:.2f} W ({event.power_change:+.0%})")
        reason = (f"drift at b={event.batch_size}, {event.frequency_hz / 1e6:.1f} MHz: "
                  f"{' and '.join(what)} vs the profile")
        if best is None:
            reason += "; no re-measured frequency keeps this batch size under the cap"
        replan = Replan(
            time_s=self.device.now_s(), batch_size=self.batch_size, from_hz=from_hz,
            to_hz=applied_hz, power_cap_w=cap, points=points,
            remeasure_device_s=self.device.now_s() - start_s,
            predicted_seconds_per_sample=best.seconds_per_sample if best else None,
            reason=reason,
        )
        self.replans.append(replan)
        self._test.new_point()  # the point is measured afresh
        self._reset_window(None, self.device.now_s())
        return replan

    def follow(self, batch_size: int, power_cap_w: float | None) -> None:
        """The run moved to another batch size or cap (a moving cap): compare the new point
        from the next window on, and re-plan for the new cap."""
        with self._lock:
            self._incoming.clear()
        self.batch_size = batch_size
        self.power_cap_w = power_cap_w
        self._test.new_point()
        self._reset_window(None, self.device.now_s())

    def adopt(self, replans: list[Replan]) -> None:
        """Take the re-measured points of earlier re-plans (a resumed run) as the reference."""
        for replan in replans:
            self.reference = self.reference.remeasured(replan.points)
