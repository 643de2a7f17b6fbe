"""The device side of a Session (a Session part): the plan's frequency applied and checked
against the profile, the meter, watchdog and drift monitor started on the sensor ticks, the
device restored (and closed when the Session opened it)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from wattcap.algorithms.drift import BOARD_SWITCH_GAIN, board_calls_for_replan, time_gain
from wattcap.core.events import ClockClamp
from wattcap.devices.clock_clamp import lock_clock_within
from wattcap.devices.cuda import configure_cuda_backends
from wattcap.devices.errors import (
    DeviceError,
    DeviceNotSupportedError,
    DevicePermissionError,
    WatchError,
)
from wattcap.runtime.drift_monitor import DriftMonitor
from wattcap.runtime.watchdog import CapWatchdog

#: a sensor with no fresh reading for this many of its periods (of device time) is dead
STALE_SENSOR_PERIODS = 3
#: how often (seconds of device time) a run held under a clock clamp asks again for the clock
#: the board refused: a thermal governor lifts its clamp a level per polling interval (about a
#: second) once the board cools, so a cooled board is followed within this and a level or two
CLIMB_BACK_PROBE_S = 10.0


class DeviceGuard:
    """The device side of a Session: one job of the Session, on its state."""

    def __init__(self, session: Any) -> None:
        # the Session (typed Any: this module must not import it, or the two would cycle)
        self.session = session
        #: whether the events already say that this thread kept the sensor thread from running
        self._held_back_noted = False
        #: the device's clamps before this run (a device may serve several runs) and those of
        #: the run's earlier part (a resumed checkpoint)
        self._clamps_since = 0
        self.clamps_before: list[ClockClamp] = []
        #: the climb back after a clamp: the clock refused, the one locked under it, who asked,
        #: and the batch size of the plan re-planned under the ceiling (None: not re-planned);
        #: with when to ask again (device seconds); None: nothing to climb back to
        self._climb: tuple[int, int, str, int | None] | None = None
        self._climb_probe_s = 0.0
        self._clamps_seen = 0
        #: whether the plan was made again for this board's level (once a run)
        self._board_replanned = False
        #: [batch size, clock in Hz] the run re-planned to for its board (None: it did not);
        #: kept in the checkpoint, so that a resumed run goes on there and does not re-plan
        self.board_replanned_to: list[int] | None = None

    def run_clamps(self) -> list[ClockClamp]:
        """The clocks the board did not follow during this run, resumed parts included."""
        device = self.session.device
        now = [] if device is None else device.clock_clamps[self._clamps_since:]
        return self.clamps_before + now

    def apply_frequency(self, frequency_hz: int, why: str) -> None:
        session = self.session
        assert session.device is not None
        # a clock the board does not follow (hot, a power mode's clamp): the run goes on at
        # the board's ceiling, which is the plan's under it (power falls with the clock)
        frequency_hz = lock_clock_within(session.device, frequency_hz, why)
        if session.profile is not None and session.power_cap_w is not None:
            point = session.profile.lookup(session.batch_size, frequency_hz)
            if point is not None and point.peak_power_w > session.power_cap_w:
                session.events.append(
                    f"{why}: b={session.batch_size} at {frequency_hz / 1e6:.1f} MHz peaked at "
                    f"{point.peak_power_w:.2f} W in the profile, above the cap "
                    f"{session.power_cap_w:g} W: the watchdog will step it down")
        session.frequency_hz = frequency_hz  # the requested clock, never a live reading

    def replan_under_ceiling(self, requested_hz: int, why: str) -> None:
        """Where the board held the clock under the one `why` asked for, choose the batch size
        and clock again on the profile's points at or under that ceiling (wattcap's choice,
        where the run may change its batch size: a planned one, or the "replan" cap policy;
        not while the noise scale is measured at its batch size); elsewhere the batch size
        stays and the clock is the ceiling (`apply_frequency`)."""
        session = self.session
        ceiling_hz = session.frequency_hz
        if ceiling_hz is None or ceiling_hz >= requested_hz or not self.may_replan():
            return
        # nothing under the ceiling may meet the cap (None): the watchdog steps down
        choice = self.wattcap_choice(session.profile.up_to(ceiling_hz))
        if choice is None or (choice.batch_size, choice.knob_value) == (
                session.batch_size, ceiling_hz):
            return
        old_b = session.batch_size
        session.batch_size = choice.batch_size
        self.apply_frequency(choice.knob_value, f"{why} under the board's ceiling")
        if session._monitor is not None:
            session._monitor.batch_size = session.batch_size
        session.events.append(
            f"{why}: re-planned under the board's ceiling of {ceiling_hz / 1e6:.1f} MHz: "
            f"b={old_b} -> {session.batch_size} at {session.frequency_hz / 1e6:.1f} MHz")
        # once the board cools, back to the plan it refused (`climb_back_if_cooled`)
        assert session.device is not None and session.frequency_hz is not None
        self._clamps_seen = len(session.device.clock_clamps)
        self._climb = (requested_hz, session.frequency_hz, why, old_b)
        self._climb_probe_s = session.device.now_s() + CLIMB_BACK_PROBE_S

    def following_clamp(self) -> bool:
        """A clamp of the board's clock is being followed (a climb back is pending)."""
        return self._climb is not None

    def wattcap_choice(self, profile: Any, transfer: bool = True) -> Any:
        """wattcap's choice on `profile` with the run's cap, efficiency and settings (without
        the transfer factor when `transfer` is False: the target's own evidence stands in for
        it); None where nothing meets the cap."""
        from wattcap.algorithms.planner import plan
        from wattcap.core.plan import InfeasibleCapError

        session = self.session
        try:
            return plan(profile, session.power_cap_w, efficiency=session.efficiency,
                        reference_profiles=session._reference_profiles,
                        objective=session.objective, margin_sigmas=session.margin_sigmas,
                        risk=session.risk,
                        transfer_factor=session.transfer_factor if transfer else None,
                        ).choices.get("wattcap")
        except InfeasibleCapError:
            return None

    def resume_board_replan(self, to: list[int]) -> None:
        """A checkpoint written after the run re-planned for its board: go on at that batch
        size and clock (the watchdog's lower clock, if any, is put back after this), once."""
        session = self.session
        self._board_replanned, self.board_replanned_to = True, list(to)
        session.batch_size = int(to[0])
        if session.device is not None and int(to[1]) in session.device.frequencies_hz():
            self.apply_frequency(int(to[1]), "resumed the plan for this board")
        if session._monitor is not None:
            session._monitor.batch_size = session.batch_size

    def _gain_on_board(self, board: Any, choice: Any) -> float:
        """The share of the time to the target `choice` saves against the configuration in
        use, both on the profile scaled to this board (`algorithms.drift.time_gain`)."""
        from wattcap.algorithms.planner import Replanner

        session = self.session
        current = board.lookup(session.batch_size, session.frequency_hz)
        new = board.lookup(choice.batch_size, choice.knob_value)
        if current is None or new is None:
            return 0.0
        samples = Replanner(board, session.efficiency, margin_sigmas=session.margin_sigmas,
                            risk=session.risk).samples
        return time_gain(current, new, samples)

    def may_replan(self) -> bool:
        """Whether the run may choose its batch size and clock again: wattcap's plan on a clock
        profile, a planned batch size (or the "replan" cap policy), the noise scale not being
        measured at its batch size."""
        session = self.session
        planning = session.settings.planning
        return not (session.profile is None or session.measuring_noise_scale
                    or session.profile.knob_kind != "gpu_clock" or planning.method != "wattcap"
                    or (planning.batch_size is not None and session.cap_policy != "replan"))

    def replan_for_board(self) -> None:
        """Once the drift monitor knows this board's level, choose the batch size and clock
        again on the profile scaled to this board where that level puts the planned point
        over the cap (less the margin) or reads off the profile by more than the drift
        tolerance, or (time objective, r_b as it is) where the choice on it is a higher clock
        or a batch size that saves at least `BOARD_SWITCH_GAIN` of the time to the target
        (once; where the run may choose them again, and neither a clamp nor a moving cap is
        being followed: elsewhere the watchdog keeps the cap)."""
        session, monitor = self.session, self.session._monitor
        if monitor is None or self._board_replanned or monitor.board_scale is None:
            return
        self._board_replanned = True
        time_f, power_f = monitor.board_scale
        if not self.may_replan() or self._climb or self.run_clamps() \
                or session._follower is not None:
            return
        planned = session.profile.lookup(session.batch_size, session.frequency_hz)
        called = board_calls_for_replan(None if planned is None else planned.peak_power_w,
                                        (time_f, power_f), session.power_cap_w,
                                        monitor.margin_w, monitor.time_tolerance,
                                        monitor.power_tolerance)
        if not called and (not session.objective.is_paper_time
                           or session.transfer_factor is not None):
            return  # the gain below is in time to the target on r_b as it is
        if not called:  # a board read under the profile's power is trusted beyond its noise
            power_f = max(power_f, min(1.0, power_f + session.margin_sigmas
                                       * monitor.board_power_noise))
        board = session.profile.on_board(time_f, power_f)
        # nothing may meet the cap on this board (None): the watchdog steps down
        choice = self.wattcap_choice(board)
        if choice is None or (choice.batch_size, choice.knob_value) == (
                session.batch_size, session.frequency_hz):
            return
        if not called and choice.batch_size != session.batch_size \
                and self._gain_on_board(board, choice) < BOARD_SWITCH_GAIN:
            return  # within the tolerances, a new batch size only where clearly faster
        old_b, old_hz = session.batch_size, session.frequency_hz
        session.batch_size = choice.batch_size
        self.apply_frequency(choice.knob_value, "re-planned for this board")
        self.board_replanned_to = [session.batch_size, int(choice.knob_value)]
        if session._guard is not None:
            # another batch size, another clock: what the watchdog learnt of each level's power
            # was at the old one, and its ceiling is the new plan's clock (it may be higher)
            session._guard.restart(session.power_cap_w, ceiling_hz=session.frequency_hz)
        monitor.follow(session.batch_size, session.power_cap_w)
        session.events.append(
            f"re-planned for this board at t={session.device.now_s():.1f} s (it reads "
            f"{time_f - 1:+.0%} in time and "
            f"{power_f - 1:+.0%} in power against the profile): b={old_b} at "
            f"{(old_hz or 0) / 1e6:.1f} MHz -> b={session.batch_size} at "
            f"{session.frequency_hz / 1e6:.1f} MHz")

    def apply_knob(self, kind: str, value: int) -> None:
        """Apply a power limit or power mode from the plan (the clock is left to the board
        under it); the device restores what it found."""
        from wattcap.core.knob import format_knob

        session = self.session
        applied = session.device.apply_knob(kind, value)
        session.knob_value = applied
        names = session.device.power_mode_names()
        session.events.append(f"plan: {format_knob(kind, applied, names)} applied"
                              + ("" if applied == value else
                                 f" ({format_knob(kind, value, names)} planned, clamped to the "
                                 "board's range)")
                              + "; the clock is left to the board")

    def apply_backstop(self) -> None:
        """The hardware's own power limit set to a constant cap (clamped to the board's range),
        where the device has one and permits it: it holds average power whatever happens to
        this process; the watchdog keeps guarding peak power. Put back by restore."""
        session = self.session
        device = session.device
        if session.power_cap_w is None:
            return
        if session.knob_kind == "power_limit":
            return  # the plan's power limit, at or under the cap, is the hardware's hold
        if session.cap_source is not None:
            session.events.append("hardware backstop off: the cap moves (the power limit "
                                  "would hold the run below a higher cap); the watchdog "
                                  "keeps it")
            return
        try:
            limit_w = device.set_power_limit_w(session.power_cap_w)
        except DeviceNotSupportedError:
            return  # no hardware power limit (Jetson, the emulator): the watchdog keeps it
        except DevicePermissionError as err:
            session.events.append(
                f"hardware backstop off: {err.message} (fix: {err.hint}); the run goes on "
                "under the software watchdog alone")
            return
        clamped = ("" if abs(limit_w - session.power_cap_w) < 1e-6 else
                   " (clamped to the board's range)")
        if getattr(device, "dry_run", False):  # nothing was set: the record must not say so
            session.events.append(
                f"hardware backstop (dry run): a real run would set the power limit to "
                f"{limit_w:g} W for the cap {session.power_cap_w:g} W{clamped}; nothing was set")
            return
        session.events.append(
            f"hardware backstop: power limit {limit_w:g} W for the cap {session.power_cap_w:g} W"
            + clamped + "; it holds average power, the watchdog guards peaks")

    def apply_plan_and_watch(self, stack: ExitStack) -> None:
        """Apply the plan's frequency (or knob value) under the backstop, and start the power
        meter, the cap watchdog and the drift monitor on the sensor ticks (closed by `stack`)."""
        session = self.session
        device = session.device
        assert device is not None
        self._clamps_since = self._clamps_seen = len(device.clock_clamps)
        if session.frequency_hz is not None:
            planned_hz = session.frequency_hz
            self.apply_frequency(planned_hz, "plan")
            self.replan_under_ceiling(planned_hz, "plan")
        self.apply_backstop()
        if session.knob_value is not None:  # after the backstop: the plan's limit wins
            self.apply_knob(session.knob_kind, session.knob_value)
        configure_cuda_backends(device.torch_device)  # as the profile was timed
        session._counter_start_j = device.energy_counter_j()
        session._watch_since_s = device.now_s()  # liveness: a reading due from here on
        session._meter.start(session._watch_since_s)  # energy: the first reading's time too
        stack.enter_context(device.sensor_ticks(session._meter))
        if session._watchdog_on:
            session._guard = CapWatchdog(device, session.power_cap_w,
                                         frequency_for_cap=self.fstar_for_cap,
                                         profile_power_at=self.profile_peak_at,
                                         sensor_noise_w=None if session.profile is None
                                         else session.profile.power_noise_w,
                                         knob_for_cap=None if session.knob_kind == "gpu_clock"
                                         else self.knob_for_cap,
                                         stop_at_floor=session.cap_source is None)
            stack.enter_context(device.sensor_ticks(session._guard))
        if session.profile is not None and session._drift_tolerance > 0:
            session._monitor = self.make_monitor()
            if session._monitor is not None:
                stack.enter_context(device.sensor_ticks(session._monitor))

    def climb_back_if_cooled(self) -> None:
        """Between steps: where the board held the clock under a clamp and nothing moved the
        clock since, ask again for the clock it refused, once per CLIMB_BACK_PROBE_S of device
        time; the board follows as far as it allows now (a cooled board all the way), and the
        watchdog's ceiling rises with it. A clock moved by anything else (the watchdog, a
        re-plan) ends the climb: that path decided the clock."""
        session, device = self.session, self.session.device
        if device is None:
            return
        clamps = device.clock_clamps
        now_s = device.now_s()
        if len(clamps) > self._clamps_seen:  # a new clamp: climb back to what it refused
            last = clamps[-1]
            self._clamps_seen = len(clamps)
            self._climb = (last.requested_hz, last.ceiling_hz, last.by, None)
            self._climb_probe_s = now_s + CLIMB_BACK_PROBE_S
        if self._climb is None or now_s < self._climb_probe_s:
            return
        wanted_hz, locked_hz, by, planned_b = self._climb
        if session.frequency_hz != locked_hz or (planned_b is not None
                                                 and session._follower is not None):
            self._climb = None  # moved since, or a moving cap's follower owns the batch size
            return
        self._climb_probe_s = now_s + CLIMB_BACK_PROBE_S
        # asked between steps: the board idles, whatever clock the probe leaves locked
        applied_hz = lock_clock_within(device, wanted_hz, by, record=False)
        if planned_b is not None:  # re-planned under the ceiling: all the way back, or stay
            if applied_hz < wanted_hz:
                lock_clock_within(device, locked_hz, by, record=False)  # the re-plan's clock
                return
            old_b, session.batch_size = session.batch_size, planned_b
            if session._monitor is not None:
                session._monitor.batch_size = planned_b
            session.events.append(f"the board allows the plan's clock again: back to the plan, "
                                  f"b={old_b} -> {planned_b} at {wanted_hz / 1e6:.1f} MHz")
        if applied_hz <= locked_hz:
            return
        session.frequency_hz = applied_hz
        if session._guard is not None:
            session._guard.set_ceiling_hz(applied_hz)
        if session._follower is not None:
            session._follower.adopt_frequency(applied_hz)
        back = applied_hz >= wanted_hz
        self._climb = None if back else (wanted_hz, applied_hz, by, None)
        if planned_b is not None:
            return
        session.events.append(
            f"the board allows a higher clock again: {locked_hz / 1e6:.1f} -> "
            f"{applied_hz / 1e6:.1f} MHz" + (f" ({by}'s clock, which it had refused)" if back
                                            else f" (on the way back to {wanted_hz / 1e6:.1f} "
                                            "MHz)"))

    def replan_if_due(self) -> None:
        """Re-plan where the drift monitor found it due (between steps); climb back after a
        clamp where the board cooled."""
        session = self.session
        self.climb_back_if_cooled()
        if session._monitor is None:
            return
        self.replan_for_board()
        replan = session._monitor.replan_if_due()
        if replan is not None:
            # The re-measure interrupted training; its device time is paid by this run.
            session.device_time_s += replan.remeasure_device_s
            session.frequency_hz = replan.to_hz
            session._cap.after_drift_replan(replan.to_hz)

    def fstar_for_cap(self, power_cap_w: float) -> int | None:
        """f*(b) under `power_cap_w` at the run's batch size, from the profile with the run's
        margin; the row's lowest measured clock where none fits under it; None without a
        profile or a row for b: where a confirmed violation sends the clock at once."""
        session = self.session
        if session.profile is None or session.knob_kind != "gpu_clock":
            return None  # a table of limits or modes knows no clock: one level down
        from wattcap.algorithms.planner import with_power_margin

        margined = with_power_margin(session.profile, session.margin_sigmas)
        point = margined.frontier(power_cap_w).get(session.batch_size)
        if point is not None:
            return point.knob_value
        row = margined.rows().get(session.batch_size)
        return row[0].knob_value if row else None

    def profile_peak_at(self, frequency_hz: int) -> float | None:
        """The profile's peak power at the run's batch size and `frequency_hz`, linear between
        its measured clocks (a clock a power limit held the board at lies between them); None
        without a clock profile, or outside the row: what the watchdog compares this board's
        readings with."""
        session = self.session
        if session.profile is None or session.knob_kind != "gpu_clock":
            return None
        row = session.profile.rows().get(session.batch_size, [])
        for low, high in zip(row, row[1:], strict=False):
            if low.knob_value <= frequency_hz <= high.knob_value:
                share = (frequency_hz - low.knob_value) / (high.knob_value - low.knob_value)
                return low.peak_power_w + share * (high.peak_power_w - low.peak_power_w)
        return row[0].peak_power_w if len(row) == 1 and row[0].knob_value == frequency_hz \
            else None

    def knob_for_cap(self, power_cap_w: float) -> str | None:
        """For a run planned on a power limit or power mode: apply the profile's choice at the
        run's batch size for `power_cap_w` (margined; the value that draws least where none
        fits) where the profile says it draws less than the value in force, and say what
        changed; None where there is nothing lower to move to. Called by the watchdog, from
        the sensor thread, with the clock lock held."""
        from wattcap.algorithms.planner import with_power_margin
        from wattcap.core.knob import format_knob

        session = self.session
        kind, value = session.knob_kind, session.knob_value
        if session.profile is None or kind == "gpu_clock" or value is None:
            return None
        margined = with_power_margin(session.profile, session.margin_sigmas)
        row = margined.rows().get(session.batch_size, [])
        if not row:
            return None
        point = margined.frontier(power_cap_w).get(session.batch_size) or min(
            row, key=lambda p: p.peak_power_w)
        in_force = margined.lookup(session.batch_size, value)
        if point.knob_value == value or (in_force is not None
                                         and point.peak_power_w >= in_force.peak_power_w):
            return None
        applied = session.device.apply_knob(kind, point.knob_value)
        session.knob_value = applied
        names = session.device.power_mode_names()
        return f"{format_knob(kind, value, names)} -> {format_knob(kind, applied, names)}"

    def check_watch(self) -> None:
        """After each step: the power watch is alive (no failed callback, no dead sensor, a
        reading within the last `STALE_SENSOR_PERIODS` sensor periods of device time) and the
        cap held (no violation the watchdog could not answer). If not,
        the run stops in a safe state — the lowest clock, a checkpoint written where one can
        be — and the error says why; the device is restored when the session closes."""
        session = self.session
        device = session.device
        try:
            device.check_watch(session.power_cap_w)
            if session._guard is not None and session._guard.unmet is not None:
                raise session._guard.unmet  # a violation the watchdog could not answer
            silent_s = self.sensor_silence_s()
            if silent_s is not None:
                period_s = device.sensor_period_s
                raise WatchError(
                    f"no power reading for {silent_s:.2f} s ({STALE_SENSOR_PERIODS} sensor "
                    f"periods are {STALE_SENSOR_PERIODS * period_s:.2f} s): the sensor thread "
                    "stalled or died, so the run stops rather than go on unwatched",
                    hint="check the driver and the system load; resume from the checkpoint")
        except WatchError as err:
            self.stop_safely(err)
            raise

    def sensor_silence_s(self) -> float | None:
        """How long the sensor has delivered no reading, where that is more than
        `STALE_SENSOR_PERIODS` of its periods and the sensor itself is to blame; None while it
        keeps delivering.

        The gap since the last reading is measured on the device clock at this step boundary,
        but a long gap alone does not prove the sensor dead: this thread may have kept the
        sensor thread from running (a stretch of work holding the GIL), so the readings it was
        due to take are only late. The sensor is judged by what it does once it can run: this
        thread yields for one sensor period, and a reading taken from now on shows it alive; a
        dead or hung sensor delivers none, and the run stops."""
        session = self.session
        device = session.device
        meter = session._meter
        last = meter.last
        since_s = last.time_s if last is not None else session._watch_since_s
        period_s = device.sensor_period_s
        now_s = device.now_s()
        silent_s = now_s - since_s
        if silent_s <= STALE_SENSOR_PERIODS * period_s:
            return None
        if meter.last_thread_id == threading.get_ident():
            return silent_s  # readings come on this thread (an emulated clock): none is late
        if meter.wait_for_reading(after_s=now_s, timeout_s=period_s) is None:
            return max(silent_s, device.now_s() - since_s)
        if not self._held_back_noted:
            self._held_back_noted = True
            session.events.append(
                f"the sensor thread could not run for {silent_s:.2f} s (the training thread "
                "held the GIL): it read again as soon as it could; the hardware power limit, "
                "where set, held meanwhile")
        return None

    def stop_safely(self, err: DeviceError) -> None:
        """Put the run in a safe state before it stops: the lowest clock, a checkpoint."""
        session = self.session
        device = session.device
        session.events.append(f"stopped: {err.message}")
        try:
            with device.clock_lock:
                device.set_frequency_hz(min(device.frequencies_hz()))
            session.frequency_hz = device.requested_frequency_hz()
        except DeviceError as lower_err:
            session.events.append(f"could not lower the clock: {lower_err.message}")
        if session._checkpoint is not None and session._attached is not None:
            try:  # the state as it is: no re-plan on the way out
                model, optimizer = session._attached
                session._checkpoint.save(model, optimizer, session._checkpointing.state({}))
                session.events.append(f"checkpoint written at {session.samples} samples")
            except Exception as save_err:  # noqa: BLE001 - the stop must still happen
                session.events.append(f"could not write the checkpoint: {save_err}")

    def restore(self) -> None:
        session = self.session
        assert session.device is not None
        session.device.restore()
        if session._owns_device and hasattr(session.device, "close"):
            session.device.close()

    def make_monitor(self) -> DriftMonitor | None:
        session = self.session
        assert session.device is not None and session.profile is not None
        if session.model_name is None:
            session.events.append("drift monitor off: the session has no model to re-measure")
            return None
        if session.knob_kind != "gpu_clock":
            session.events.append("drift monitor off: it re-measures and re-plans GPU clocks, "
                                  "and this run's profile varies another knob")
            return None
        from wattcap.measure.profiling import Profiler

        profiler = Profiler(session.device, session.model_name, batch_sizes=(session.batch_size,),
                            workload=session.workload, step_factory=session._step_factory)
        return DriftMonitor(session.device, session.profile, session.batch_size,
                            power_cap_w=session.power_cap_w, tolerance=session._drift_tolerance,
                            watchdog=session._guard, profiler=profiler,
                            margin_sigmas=session.margin_sigmas,
                            offload=self.training_model_off_gpu)

    @contextmanager
    def training_model_off_gpu(self) -> Iterator[None]:
        """The attached model and its optimiser state on the CPU for the block (a re-measure
        puts its own copy on the GPU meanwhile), then back on the session's device."""
        session = self.session
        if session._attached is None or not session.torch_device.startswith("cuda"):
            yield
            return
        model, optimizer = session._attached
        _move(model, optimizer, "cpu")
        try:
            yield
        finally:
            _move(model, optimizer, session.torch_device)


def _move(model: Any, optimizer: Any, torch_device: str) -> None:
    """A model in place (the optimiser keeps its parameters) and its optimiser's state."""
    import torch

    model.to(torch_device)
    if optimizer is not None:
        for state in optimizer.state.values():
            for key, value in state.items():
                if torch.is_tensor(value) and key != "step":
                    state[key] = value.to(torch_device)
