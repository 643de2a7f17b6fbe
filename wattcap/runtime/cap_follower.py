"""Following a cap that moves during a run: the runtime side of `wattcap.devices.caps`.

`CapFollower` is a sensor-tick callback of the Session. Once per sensor period, on the device
clock, it tells the cap source the energy drawn (a battery drains by it) and reads the cap.
On every change it re-runs the selection for the new cap (`ConfigChooser`, with the session's
objective) and:

* obeys a lower cap within one sensor period: in the tick itself it steps the frequency to
  the new plan's f*(b) for the batch size in flight (or lower, never higher: the rest of the
  step runs there);
* changes the batch size at the next step boundary (`take_pending`, called by the Session
  between steps), where the new plan's frequency is applied too; the Session's batch size and
  its √-scaled learning rate follow, the optimiser state is the user's and is kept;
* moves the watchdog's cap and ceiling with it (`CapWatchdog.set_cap`);
* on a source with a finite energy store (a battery: `CapSource.energy_left_j`), passes the
  chooser what is left for the rest of the run (`EnergyBudget`), so that the time objective
  keeps the predicted energy of the rest of the run within it; the events say when that
  moved the choice (from what to what, and the energy left), and once when nothing fits;
* pauses training when the cap is below what any configuration can meet: the frequency drops
  to the lowest at once, the Session idles the device between steps until a tick finds the
  cap high enough again, and the run stops for good when the source says its cap can never
  rise again (`CapSource.may_exceed`: a battery that only drains).

Everything it did is kept as `Segment`s (one per plan) and a compact `CapTimeline`, both in
the run record. On real hardware the tick runs in the sensor thread: the follower's state sits
behind its own lock, clock writes hold the device's `clock_lock`, and a tick costs one source
read and, on a change, one selection (microseconds).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from wattcap.algorithms.energy_budget import EnergyBudget
from wattcap.core.cap_history import CapTimeline, Segment, TimelineRecorder
from wattcap.core.defaults import DEFAULT_BATCH_SIZE_HOLD_S
from wattcap.devices.base import Device, PowerReading
from wattcap.devices.caps import CapSource, CapSourceError, ConstantCap, parse_cap_source
from wattcap.devices.clock_clamp import lock_clock_within

if TYPE_CHECKING:
    from wattcap.runtime.watchdog import CapWatchdog
from wattcap.runtime.config_chooser import (
    CAP_POLICIES,
    CapPolicy,
    ConfigChooser,
    EnergyRule,
    Target,
)


def resolve_cap_source(value: CapSource | str | float | None) -> CapSource | None:
    """A cap source from what a user passes: a `CapSource`, a spec for `parse_cap_source`
    ("solar:seed=3", "schedule:caps.json", "5"), a number of watts, or None (no cap)."""
    if value is None or isinstance(value, CapSource):
        return value
    if isinstance(value, str):
        return parse_cap_source(value)
    return ConstantCap(value)  # a number; refused clearly if not


def _cap_text(cap_w: float | None) -> str:
    return "no cap" if cap_w is None else f"{cap_w:.2f} W"


class CapFollower:
    """Follows a moving cap during a run: a sensor-tick callback (see the module docstring).

    `chooser` None (no profile): the cap is kept by the watchdog alone, without re-planning
    and without pauses. `batch_size`/`frequency_hz` are the configuration the run starts with.
    """

    def __init__(
        self,
        source: CapSource,
        device: Device,
        chooser: ConfigChooser | None,
        batch_size: int,
        frequency_hz: int,
        watchdog: CapWatchdog | None = None,
        max_points: int = 800,
        batch_size_hold_s: float = DEFAULT_BATCH_SIZE_HOLD_S,
    ) -> None:
        self.source = source
        #: a new batch size is held this long (run seconds) before another change; see
        #: `_choose`
        self.batch_size_hold_s = batch_size_hold_s
        self._batch_size_since_s = 0.0
        #: a batch-size change the hold put off: re-planned when the hold ends
        self._held_back = False
        self.device = device
        self.chooser = chooser
        self.watchdog = watchdog
        self.period_s = device.sensor_period_s
        self.max_points = max_points
        self.lock = threading.RLock()
        self.origin_s = device.now_s()
        self.cap_w: float | None = None
        self.batch_size = batch_size
        self.target = Target(batch_size, frequency_hz)
        self.pending: Target | None = None
        self.paused = False
        self.stopped: str | None = None
        #: why the cap source could no longer be read (the run stopped for it), if it could not
        self._source_error: str | None = None
        self.paused_s = 0.0
        self.pause_started_s: float | None = None
        #: samples trained in this run (across resumes), for the energy budget
        self.samples_done = 0
        #: what the energy rule did at the last choice (None: it did not bind)
        self._energy_rule: EnergyRule | None = None
        #: the run's events said that no configuration fits the energy left
        self._energy_short_noted = False
        #: the energy left at the last choice (J; None: no store, or not asked yet)
        self._energy_seen_j: float | None = None
        self.events: list[str] = []
        self.segments: list[Segment] = []
        self.timeline = TimelineRecorder(self.period_s, max_points)
        self._idle_note_given = False
        self._idling = False
        self._idle_since_s = 0.0

    # -- the run's clock -------------------------------------------------------------------------
    def run_s(self, now_s: float | None = None) -> float:
        """Seconds on the run's clock: device seconds since the run started, across resumes."""
        return (self.device.now_s() if now_s is None else now_s) - self.origin_s

    # -- start -----------------------------------------------------------------------------------
    def begin(self) -> Target:
        """Read the cap at the start of the run and choose for it (nothing runs yet, so the
        batch size changes at once); returns the configuration to start with."""
        with self.lock:
            t_s = self.run_s()
            reading = self.source.read(t_s)
            self._warnings(t_s, reading.warnings)
            self.cap_w = reading.cap_w
            target = self._choose(reading.cap_w)
            if target is None:
                self._pause(t_s, reading.cap_w)
                return Target(self.batch_size, self.device.frequencies_hz()[0])
            self.target = target
            self.batch_size = target.batch_size
            self._batch_size_since_s = t_s
            reason = f"start under {_cap_text(reading.cap_w)}"
            if self._energy_rule is not None and self._energy_rule.fits:
                reason += f"; {self._energy_rule.describe()}"
                self._event(t_s, reason)
            self.segments.append(self._segment(t_s, reading.cap_w, target, reason))
            self._set_frequency(target.frequency_hz)
            if self.watchdog is not None:
                self.watchdog.set_cap(reading.cap_w, ceiling_hz=target.frequency_hz)
            return target

    # -- the tick --------------------------------------------------------------------------------
    def __call__(self, reading: PowerReading) -> None:
        with self.lock:
            t_s = self.run_s(reading.time_s)
            self.source.record_energy(reading.power_w * self.period_s, t_s)
            if self.stopped is not None and self._source_error is not None:
                return  # the source stopped reporting: nothing more to read or follow
            try:
                cap = self.source.read(t_s)
            except CapSourceError as err:
                self._source_stopped(t_s, err)
                return
            self._warnings(t_s, cap.warnings)
            self.cap_w = cap.cap_w
            # the reading averages the period before it, when the previous cap was in force
            in_force_w = cap.previous_w if cap.changed and self.segments else cap.cap_w
            if self.segments:
                self.segments[-1].see(reading.power_w, in_force_w, self.period_s)
            self.timeline.add(t_s, reading.power_w, cap.cap_w,
                              self.device.run_frequency_hz(), self.batch_size,
                              self.source.supply_power_w)
            # only readings whose whole averaging period was idle say what idling draws
            idle_reading = self._idling and reading.time_s - self.period_s >= \
                self._idle_since_s - 1e-9
            if self._idling and self._idle_since_s <= reading.time_s + 1e-9 \
                    and self.watchdog is not None and self.watchdog.power_cap_w is not None:
                # The next reading averages idling alone: nothing is left to step down, and
                # what the idle device draws above the cap is counted in the pause segment.
                # (This reading, with the end of the step in flight, was judged already.)
                self.watchdog.set_cap(None, ceiling_hz=self.device.run_frequency_hz())
                self.watchdog.hold(None)
            if idle_reading and cap.cap_w is not None and reading.power_w > cap.cap_w \
                    and not self._idle_note_given:
                self._idle_note_given = True
                self._event(t_s, f"the device idles at {reading.power_w:.2f} W, above the cap "
                            f"{cap.cap_w:.2f} W: no setting can meet it while the device is on")
            if cap.changed:
                self._on_change(t_s, cap.cap_w, cap.previous_w)
            elif self._held_back and not self.paused and not self._holding(t_s):
                self._held_back = False  # the hold ended: what it put off is planned now
                self._on_change(t_s, cap.cap_w, cap.cap_w, why="batch-size hold ended")
            elif not self.paused and self._energy_moved():
                self._on_change(t_s, cap.cap_w, cap.cap_w, why="energy left changed")
            if self.paused and self.stopped is None and self.chooser is not None \
                    and not self.source.may_exceed(self.chooser.lowest_cap_w, t_s):
                self.stop(t_s, f"the cap ({self.source.describe()}) can never rise to the "
                          f"{self.chooser.lowest_cap_w:.2f} W training needs again")

    def _on_change(self, t_s: float, cap_w: float | None, previous_w: float | None,
                   why: str | None = None) -> None:
        target = self._choose(cap_w, t_s)
        if target is None:
            if not self.paused:
                self._pause(t_s, cap_w)
            return
        if self.paused:
            self._resume(t_s, cap_w, target)
            return
        if target == self.target:
            if self.watchdog is not None:
                self.watchdog.update_cap(cap_w)  # same plan: the watchdog keeps what it learnt
            return
        cause = why or f"cap {_cap_text(previous_w)} -> {_cap_text(cap_w)}"
        if self._energy_rule is not None and self._energy_rule.fits:
            cause += f"; {self._energy_rule.describe()}"
        self._event(t_s, f"{cause}: re-planned {self.target.describe()} -> {target.describe()}")
        self._close_segment(t_s)
        self.segments.append(self._segment(t_s, cap_w, target, cause))
        self.target = target
        if target.batch_size == self.batch_size:
            self.pending = None
            applied = self._set_frequency(target.frequency_hz)
        else:
            # The step in flight keeps its batch: its rest runs at f*(b) for the new cap (or the
            # lowest frequency), never higher than now; the new plan starts at the boundary.
            self.pending = target
            interim = self._interim_frequency(cap_w)
            applied = self._set_frequency(min(interim, self.device.run_frequency_hz()))
        if self.watchdog is not None:
            self.watchdog.set_cap(cap_w, ceiling_hz=applied)

    def _interim_frequency(self, cap_w: float | None) -> int:
        assert self.chooser is not None
        highest = self.chooser.highest_under(self.batch_size, cap_w)
        return highest if highest is not None else self.device.frequencies_hz()[0]

    def _holding(self, t_s: float) -> bool:
        return t_s - self._batch_size_since_s < self.batch_size_hold_s

    def _choose(self, cap_w: float | None, t_s: float | None = None) -> Target | None:
        """The configuration for `cap_w`. Within `batch_size_hold_s` of the last batch-size
        change, a new batch size is put off (re-planned when the hold ends) while the current
        one meets the cap at some clock: a cap that moves every few seconds (clouds over a
        solar panel) would otherwise change the batch size, and its learning rate, as often.
        A cap the current batch size cannot meet is obeyed at once."""
        if self.chooser is None:
            return self.target  # no profile: the watchdog alone keeps the cap
        notes_before = len(self.chooser.notes)
        budget = self._energy_budget()
        target = self.chooser.choose(cap_w, self.batch_size, budget)
        rule = self.chooser.energy_rule
        if target is not None and target.batch_size != self.batch_size and t_s is not None \
                and self._holding(t_s) and not self.paused:
            keep = self.chooser.best_for_batch_size(self.batch_size, cap_w, budget)
            if keep is not None:
                if not self._held_back:
                    self._event(t_s, f"{target.describe()} would be faster under "
                                f"{_cap_text(cap_w)}; the batch size is held until "
                                f"t={self._batch_size_since_s + self.batch_size_hold_s:.0f} s "
                                f"(at most one change per {self.batch_size_hold_s:g} s)")
                self._held_back = True
                target = keep
        elif target is not None and target.batch_size == self.batch_size:
            self._held_back = False
        for note in self.chooser.notes[notes_before:]:
            self._event(self.run_s(), note)
        self._note_energy_rule(rule, target, budget)
        return target

    def _energy_budget(self) -> EnergyBudget | None:
        """What the source's energy store has left for the rest of the run: its energy while
        its cap stays at or above the lowest cap anything meets (below it training pauses),
        the samples trained and the batch size in use. None without a store or a chooser."""
        if self.chooser is None or not self.chooser.uses_energy_budget:
            return None
        left_j = self._energy_seen_j = self.source.energy_left_j(self.chooser.lowest_cap_w)
        if left_j is None:
            return None
        return EnergyBudget(left_j, float(self.samples_done), self.batch_size)

    def _energy_moved(self) -> bool:
        """Whether the energy left changed since the last choice while the cap did not (a real
        battery under a steady ceiling, read once per its period): then the energy rule is
        checked again. Never for sources without a store or choosers that ignore it."""
        if self.chooser is None or not self.chooser.uses_energy_budget:
            return False
        left_j = self.source.energy_left_j(self.chooser.lowest_cap_w)
        return left_j is not None and left_j != self._energy_seen_j

    def _note_energy_rule(self, rule: EnergyRule | None, target: Target | None,
                          budget: EnergyBudget | None) -> None:
        """Keep what the energy rule did for the next segment's reason (with the target the
        batch-size hold left, where it kept one); say once per run when nothing fits."""
        if rule is not None and target is not None and target != rule.chosen \
                and self.chooser is not None and budget is not None:
            rest_j = self.chooser.rest_energy_j(target, budget)
            rule = replace(rule, chosen=target,
                           chosen_rest_j=rule.chosen_rest_j if rest_j is None else rest_j)
        self._energy_rule = rule if target is not None else None
        if rule is not None and not rule.fits and not self._energy_short_noted:
            self._energy_short_noted = True
            self._event(self.run_s(), f"{rule.describe()}: while no configuration fits, the "
                        "run takes the one that needs the least energy (noted once)")

    # -- pause -----------------------------------------------------------------------------------
    def _pause(self, t_s: float, cap_w: float | None) -> None:
        """Nothing fits under the cap. The step in flight (if any) cannot be stopped half-way:
        it finishes at the frequency that draws the least energy above the cap, and the
        watchdog keeps counting what it draws; then the Session idles the device at the lowest
        frequency (`start_idling`)."""
        self.paused = True
        self.pause_started_s = t_s
        self._idling = False
        self._idle_note_given = False
        self.pending = None
        lowest_hz = self.device.frequencies_hz()[0]
        finish_hz = None
        if self.chooser is not None and cap_w is not None:
            finish_hz = self.chooser.least_overdraw_hz(self.batch_size, cap_w)
        applied = self._set_frequency(finish_hz if finish_hz is not None else lowest_hz)
        if self.watchdog is not None:
            self.watchdog.set_cap(cap_w, ceiling_hz=applied)
            self.watchdog.hold("training paused under a cap below every configuration; the "
                               "step in flight finishes at the frequency that overdraws least")
        need = self.chooser.lowest_cap_w if self.chooser is not None else float("nan")
        self._event(t_s, f"cap {_cap_text(cap_w)} is below the {need:.2f} W the lowest "
                    f"configuration needs: training paused after the step in flight, the "
                    f"device idles at {lowest_hz / 1e6:.1f} MHz until the cap rises")
        self._close_segment(t_s)
        self.segments.append(self._segment(t_s, cap_w, Target(self.batch_size, lowest_hz),
                                           "paused: cap below every configuration",
                                           paused=True))

    def start_idling(self) -> None:
        """The Session starts idling through a pause (no step in flight): lowest frequency."""
        with self.lock:
            if not self.paused or self._idling:
                return
            self._idling = True
            self._idle_since_s = self.device.now_s()
            self._set_frequency(self.device.frequencies_hz()[0])

    def _resume(self, t_s: float, cap_w: float | None, target: Target) -> None:
        self.paused = False
        paused_for = t_s - (self.pause_started_s if self.pause_started_s is not None else t_s)
        self.pause_started_s = None
        self._event(t_s, f"cap {_cap_text(cap_w)}: training resumed with {target.describe()} "
                    f"after a {paused_for:.1f} s pause")
        self._close_segment(t_s)
        self.segments.append(self._segment(t_s, cap_w, target, f"resumed under "
                                           f"{_cap_text(cap_w)}"))
        self.target = target
        self.pending = target  # applied between steps, where the Session's wait ends
        if self._idling:
            applied = self.device.run_frequency_hz()  # the plan's comes between steps
        else:
            # a step still in flight (the pause had not begun idling) finishes under the cap
            applied = self._set_frequency(self._interim_frequency(cap_w))
        self._idling = False
        if self.watchdog is not None:
            self.watchdog.hold(None)
            self.watchdog.set_cap(cap_w, ceiling_hz=applied)

    def _source_stopped(self, t_s: float, err: CapSourceError) -> None:
        """The cap can no longer be known (a battery's gauge stopped reporting): the step in
        flight finishes at the lowest clock, and the run stops with the reason in its record
        (its checkpoint, where it has one, resumes it once the source reads again)."""
        self._source_error = str(err)
        self.paused, self._idling, self.pending = True, False, None
        applied = self._set_frequency(self.device.frequencies_hz()[0])
        if self.watchdog is not None:
            self.watchdog.hold("the cap source stopped reporting: the step in flight finishes "
                               "at the lowest clock")
        self._close_segment(t_s)
        self.segments.append(self._segment(t_s, self.cap_w, Target(self.batch_size, applied),
                                           "stopped: the cap source stopped reporting",
                                           paused=True))
        self.stop(t_s, f"the cap source stopped reporting: {err}")

    def stop(self, t_s: float, reason: str) -> None:
        """End the run for good (the cap can never rise again, or a pause lasted too long)."""
        with self.lock:
            if self.stopped is None:
                self.stopped = reason
                self._event(t_s, f"run stopped: {reason}")

    @property
    def pause_s(self) -> float:
        """How long the current pause has lasted (0 when running)."""
        if self.pause_started_s is None:
            return 0.0
        return self.run_s() - self.pause_started_s

    # -- the Session's hooks ----------------------------------------------------------------------
    def take_pending(self) -> Target | None:
        """At a step boundary: apply the plan's new batch size and frequency, if any (returns
        it). Nothing while paused."""
        with self.lock:
            if self.paused or self.pending is None:
                return None
            target, self.pending = self.pending, None
            applied = self._set_frequency(target.frequency_hz)
            if target.batch_size != self.batch_size:
                self._batch_size_since_s = self.run_s()
            self.batch_size = target.batch_size
        if self.watchdog is not None:
            self.watchdog.set_ceiling_hz(applied)
        return target

    def on_step(self, samples: int, busy_s: float) -> None:
        """A training step ended."""
        with self.lock:
            self.samples_done += samples
            if self.segments:
                segment = self.segments[-1]
                segment.samples += samples
                segment.steps += 1
                segment.device_time_s += busy_s

    def on_idle(self, seconds: float) -> None:
        """The Session idled the device for `seconds` while paused."""
        with self.lock:
            self.paused_s += seconds
            if self.segments:
                self.segments[-1].device_time_s += seconds

    def use_chooser(self, chooser: Any, why: str | None = None) -> None:
        """Another chooser (re-measured points after drift, r_b moved by the target's
        evidence), swapped under the lock the ticks hold; with `why`, the cap in force is
        planned again with it at once (the batch-size hold still applies), not at its next
        move."""
        with self.lock:
            self.chooser = chooser
            if why is not None and self.stopped is None and not self.paused:
                self._on_change(self.run_s(), self.cap_w, self.cap_w, why=why)

    def adopt_frequency(self, frequency_hz: int) -> None:
        """A drift re-plan chose another frequency for the current batch size."""
        with self.lock:
            self.target = Target(self.target.batch_size, frequency_hz)

    # -- the record and checkpoints ---------------------------------------------------------------
    def finish(self) -> tuple[list[Segment], CapTimeline]:
        """Close the last segment; the segments and the timeline for the run record."""
        with self.lock:
            self._close_segment(self.run_s())
            return list(self.segments), self.timeline.finish()

    def state_dict(self) -> dict[str, Any]:
        """JSON-compatible state for a checkpoint (the source's state included)."""
        with self.lock:
            return {
                "run_s": self.run_s(),
                "clock_phase_s": self.device.now_s() % self.period_s,
                "source": self.source.state_dict(),
                "cap_w": self.cap_w,
                "batch_size": self.batch_size,
                "frequency_hz": self.device.run_frequency_hz(),
                "target": [self.target.batch_size, self.target.frequency_hz],
                "pending": None if self.pending is None else
                [self.pending.batch_size, self.pending.frequency_hz],
                "paused": self.paused,
                "idling": self._idling,
                "pause_started_s": self.pause_started_s,
                "paused_s": self.paused_s,
                "stopped": self.stopped,
                "batch_size_since_s": self._batch_size_since_s,
                "held_back": self._held_back,
                "energy_short_noted": self._energy_short_noted,
                "events": list(self.events),
                "segments": [s.model_dump() for s in self.segments],
                "timeline": self.timeline.state(),
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue a checkpointed run: the source, the plan, the segments, the run's clock.

        On a virtual clock (the emulator), the device first idles for less than one sensor
        period so that its ticks fall at the same moments of the run's clock as before the
        restart: a resumed run is then the run that was never stopped."""
        with self.lock:
            if not self.device.timing_needs_real_work:
                # the emulator ticks at multiples of the period on its clock
                wait_s = (state["clock_phase_s"] - self.device.now_s()) % self.period_s
                if 1e-9 < wait_s < self.period_s - 1e-9:
                    self.device.idle(wait_s)
            self.origin_s = self.device.now_s() - state["run_s"]
            self.source.load_state_dict(state["source"])
            self.cap_w = state["cap_w"]
            self.batch_size = state["batch_size"]
            self.target = Target(*state["target"])
            self.pending = None if state["pending"] is None else Target(*state["pending"])
            self.paused = state["paused"]
            self._idling = state.get("idling", False)
            self.pause_started_s = state["pause_started_s"]
            self.paused_s = state["paused_s"]
            self.stopped = state["stopped"]
            self._batch_size_since_s = state.get("batch_size_since_s", 0.0)
            self._held_back = state.get("held_back", False)
            self._energy_short_noted = state.get("energy_short_noted", False)
            self.events = list(state["events"])
            self.segments = [Segment.model_validate(s) for s in state["segments"]]
            self.samples_done = sum(s.samples for s in self.segments)
            self.timeline = TimelineRecorder.from_state(state["timeline"], self.period_s,
                                                        self.max_points)
            applied = self._set_frequency(state["frequency_hz"])
        if self.watchdog is not None:
            self.watchdog.set_cap(None if self._idling else self.cap_w, ceiling_hz=applied)
            self.watchdog.hold("training paused; the step in flight finishes" if self.paused
                               and not self._idling else None)

    # -- helpers ---------------------------------------------------------------------------------
    def _segment(self, t_s: float, cap_w: float | None, target: Target, reason: str,
                 paused: bool = False) -> Segment:
        return Segment(start_s=t_s, end_s=t_s, cap_w=cap_w, batch_size=target.batch_size,
                       frequency_hz=target.frequency_hz, paused=paused, reason=reason)

    def _close_segment(self, t_s: float) -> None:
        if self.segments:
            self.segments[-1].end_s = max(t_s, self.segments[-1].start_s)

    def _set_frequency(self, frequency_hz: int) -> int:
        with self.device.clock_lock:
            if self.device.run_frequency_hz() == frequency_hz:
                return frequency_hz
            # a clock the board does not follow (hot, held) is recorded as a clamp and the
            # run goes on at the board's ceiling: never a failure of the tick
            return lock_clock_within(self.device, frequency_hz, "moving cap")

    def _event(self, t_s: float, message: str) -> None:
        self.events.append(f"t={t_s:.2f} s: {message}")

    def _warnings(self, t_s: float, warnings: tuple[str, ...]) -> None:
        for warning in warnings:
            self._event(t_s, f"cap source: {warning}")


__all__ = [
    "CAP_POLICIES",
    "CapFollower",
    "CapPolicy",
    "CapSourceError",
    "ConfigChooser",
    "Target",
    "resolve_cap_source",
]
