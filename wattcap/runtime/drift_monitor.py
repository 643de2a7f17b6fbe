"""The profile-drift monitor: keeps the plan honest while training.

`DriftMonitor` compares the power and step time measured at the applied (b, f) with the
profile's point; when they differ by more than a tolerance (the device heated up, changed power
mode, aged) it records a `DriftEvent`, and at the next evaluation it re-measures that batch
size's row around the current frequency and re-plans f*(b) — the batch size stays, since
changing it mid-run would change the samples needed to reach the target. A run's board that
differs from the profile's from the start (another board of the same kind, another day) is not a
drift: within the spread boards show, the run's first level at a profile point becomes its
reference (`wattcap.algorithms.drift`), and only a change from it is drift.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from wattcap.algorithms.drift import DriftTest, WindowChange
from wattcap.core.defaults import DEFAULT_MARGIN_SIGMAS
from wattcap.core.events import DriftEvent, Replan
from wattcap.core.observed_clock import ObservedFrequency
from wattcap.core.profile import CLOCK_HELD_TOLERANCE, ProfileTable
from wattcap.devices.base import Device, PowerReading
from wattcap.devices.clock_clamp import lock_clock_within
from wattcap.measure.profile_refresh import refresh_row
from wattcap.measure.profiling import Profiler
from wattcap.runtime.watchdog import CapWatchdog

__all__ = ["DriftEvent", "DriftMonitor", "Replan"]


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
        #: batch sizes whose row this run re-measured: their points are this board's own
        self._own_rows: set[int] = set()
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
        #: the clocks the hardware reported with those readings (where it reports one)
        self._window_clock_hz: list[int | None] = []

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
                self._window_clock_hz.append(reading.clock_hz)
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

    def _clock_not_held(self) -> bool:
        """Whether the board ran this window's steps below the clock set (a power limit that
        binds, a throttle): such a window does not teach the board's level (a binding limit
        flattens its power), though it is judged (a throttle is a change). Said once per
        point."""
        assert self._window_hz is not None
        observed = ObservedFrequency.of(self._window_clock_hz)
        if observed is None or not observed.below_hz(self._window_hz, CLOCK_HELD_TOLERANCE):
            return False
        note = (f"windows at b={self.batch_size}, {self._window_hz / 1e6:.1f} MHz where the "
                "board held a lower clock (a power limit that binds, a throttle) do not teach "
                "this board's level")
        if note not in self.notes:
            self.notes.append(note)
        return True

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
        from_profile = self.batch_size not in self._own_rows
        known_board = self._test.board_scale
        verdict = self._test.add(WindowChange(
            time_change=measured_sps / expected.seconds_per_sample - 1.0,
            power_change=measured_w / expected.avg_power_w - 1.0,
            steps=self._window_steps, readings=len(self._window_power_w)), from_profile,
            teaches_board=not self._clock_not_held())
        self._note_noise()
        if known_board is None and self._test.board_scale is not None:
            self._note_board(self._test.board_scale)
        if verdict is None:
            return None
        # the verdict's changes are against what this board reads at the point
        time_scale, power_scale = (self._test.board_scale or (1.0, 1.0)) if from_profile \
            else (1.0, 1.0)
        expected_sps = expected.seconds_per_sample * time_scale
        expected_w = expected.avg_power_w * power_scale
        event = DriftEvent(
            time_s=time_s, batch_size=self.batch_size, frequency_hz=self._window_hz,
            expected_seconds_per_sample=expected_sps,
            measured_seconds_per_sample=expected_sps * (1 + verdict.time_change),
            expected_avg_power_w=expected_w,
            measured_avg_power_w=expected_w * (1 + verdict.power_change),
            time_change=verdict.time_change, power_change=verdict.power_change,
            steps=verdict.steps, readings=verdict.readings,
        )
        self.events.append(event)
        self.pending = event
        return event

    def _note_board(self, scale: tuple[float, float]) -> None:
        """Say what this run's board reads against the profile, where it is more than the
        tolerance: drift is judged against it from now on, not against the profile."""
        time_scale, power_scale = scale
        if abs(time_scale - 1) <= self.time_tolerance and \
                abs(power_scale - 1) <= self.power_tolerance:
            return
        assert self._window_hz is not None
        self.notes.append(
            f"this board reads {time_scale - 1:+.0%} in time per sample and "
            f"{power_scale - 1:+.0%} in average power against the profile in its first windows "
            f"(at b={self.batch_size}, {self._window_hz / 1e6:.1f} MHz; within the spread "
            "boards of one kind show): drift is judged against this board's level from here on")

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
        # the re-measure sets the clocks it measures: a watchdog moving the clock under it would
        # label a point with a clock it did not run (violations are still recorded; the climb
        # stops at the first point over the cap, one measuring window)
        pause = self.watchdog.measuring("the drift re-plan re-measures the row") \
            if self.watchdog is not None else nullcontext()
        with pause, self.offload() if self.offload is not None else nullcontext():
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
        self._own_rows.add(self.batch_size)
        what = []
        if abs(event.time_change) > self.time_tolerance:
            what.append(f"time per sample {event.expected_seconds_per_sample * 1e3:.3f} -> "
                        f"{event.measured_seconds_per_sample * 1e3:.3f} ms "
                        f"({event.time_change:+.0%})")
        if abs(event.power_change) > self.power_tolerance:
            what.append(f"average power {event.expected_avg_power_w:.2f} -> "
                        f"{event.measured_avg_power_w:.2f} W ({event.power_change:+.0%})")
        reason = (f"drift at b={event.batch_size}, {event.frequency_hz / 1e6:.1f} MHz: "
                  f"{' and '.join(what)} vs "
                  f"{'the profile' if self._test.board_scale is None else 'this board'}")
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

    @property
    def board_scale(self) -> tuple[float, float] | None:
        """This board's (time, power) level against the profile, once learnt (None before, or
        where it was farther off than boards differ)."""
        return self._test.board_scale

    @property
    def board_power_noise(self) -> float:
        """One standard deviation of this board's power level, relative (`DriftTest`)."""
        return self._test.board_power_noise()

    @property
    def board(self) -> dict[str, list[float] | None] | None:
        """This board's level against the profile, once decided (None before): what a
        checkpoint keeps, for `adopt`."""
        scale = self._test.board_scale
        return {"scale": list(scale) if scale else None} if self._test.board_decided else None

    def adopt(self, replans: list[Replan],
              board: dict[str, list[float] | None] | None = None) -> None:
        """Take the re-measured points of earlier re-plans (a resumed run) as the reference,
        and this board's level as the run before the restart decided it (`board`)."""
        if board is not None:
            scale = board.get("scale")
            self._test.take_board((scale[0], scale[1]) if scale else None)
        for replan in replans:
            self.reference = self.reference.remeasured(replan.points)
            self._own_rows.add(replan.batch_size)
