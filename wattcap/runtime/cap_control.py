"""Following a moving cap (a Session part): resolve the cap source, objective and policy, start the
CapFollower on the sensor ticks, adopt its targets between steps, idle while paused, resume it
from a checkpoint and write its history into the run record."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from wattcap.core.objective import Objective, ObjectiveError
from wattcap.core.run import RunRecord
from wattcap.core.schema import WattcapFileError
from wattcap.devices.caps import CapSource, CapSourceError, ConstantCap
from wattcap.runtime.cap_follower import (
    CapFollower,
    CapPolicy,
    ConfigChooser,
    Target,
    resolve_cap_source,
)
from wattcap.runtime.checkpoint import SessionState
from wattcap.runtime.errors import SessionError


class CapControl:
    """Following a moving cap: one job of the Session, on its state."""

    def __init__(self, session: Any) -> None:
        # the Session (typed Any: this module must not import it, or the two would cycle)
        self.session = session

    def init(self, power_cap: CapSource | str | float | None,
                         objective: Objective | str | None, cap_policy: CapPolicy | None,
                         max_pause_s: float | None, batch_size_given: bool) -> None:
        """Resolve the cap source, the objective and the policy; set `power_cap_w` to the cap
        the first plan is made for."""
        session = self.session
        try:
            session.objective = objective if isinstance(objective, Objective) else \
                Objective.of(objective or "time")
        except ObjectiveError as err:
            raise SessionError(str(err)) from None
        session.max_pause_s = max_pause_s
        session.cap_source = None
        session._follower = None
        session.cap_policy = cap_policy or (
            "safe-frequency" if session.method in ("baseline-1", "baseline-2")
            else "frequency" if batch_size_given else "replan")
        if power_cap is None:
            return
        try:
            source = resolve_cap_source(power_cap)
            initial_w = source.cap_w(0.0) if source is not None else None
        except CapSourceError as err:
            raise SessionError(str(err)) from None
        if isinstance(source, ConstantCap):
            if initial_w is not None and not initial_w > 0:
                raise SessionError(f"the power cap must be a positive number of watts or None, "
                                   f"got {initial_w!r}")
            session.power_cap_w = initial_w
            return
        if not session._has_device:
            raise SessionError("a moving power cap needs a device: its sensor ticks read the "
                               "cap and keep it")
        session.cap_source = source
        if session.profile is not None and initial_w is not None:
            # a run that starts below every configuration starts paused, but still needs a
            # first plan: the one for the lowest cap anything meets (with the margin)
            from wattcap.algorithms.planner import with_power_margin

            margined = with_power_margin(session.profile, session.margin_sigmas)
            initial_w = max(initial_w, min(p.peak_power_w for p in margined.points))
        session.power_cap_w = initial_w

    def start_follower(self, stack: ExitStack) -> None:
        session = self.session
        device, source = session.device, session.cap_source
        if device is None or source is None:
            return
        chooser = None
        if session.profile is not None:
            refs = session._reference_profiles
            if refs is None and session.cap_policy == "safe-frequency":
                from wattcap.measure.references import reference_profiles_for

                refs = reference_profiles_for(session.profile)
            chooser = ConfigChooser(
                session.profile, session.cap_policy, session.batch_size,
                session.frequency_hz or device.run_frequency_hz(),
                efficiency=session.efficiency, objective=session.objective,
                reference_profiles=refs, margin_sigmas=session.margin_sigmas,
                risk=session.risk, transfer_factor=session.transfer_factor)
        else:
            session.events.append("no profile: the moving cap is kept by the watchdog alone "
                               "(no re-plan, no pause)")
        follower = CapFollower(source, device, chooser, session.batch_size,
                               device.run_frequency_hz(), watchdog=session._guard,
                               batch_size_hold_s=session.batch_size_hold_s)
        session._follower = follower
        self.adopt_target(follower.begin())
        stack.enter_context(device.sensor_ticks(follower))

    def adopt_target(self, target: Target) -> None:
        session = self.session
        follower = session._follower
        assert follower is not None and session.device is not None
        changed_b = target.batch_size != session.batch_size
        session.batch_size = target.batch_size
        session.frequency_hz = session.device.run_frequency_hz()
        session.power_cap_w = follower.cap_w
        if session._monitor is not None and changed_b:
            session._monitor.follow(session.batch_size, session.power_cap_w)

    def before_step(self) -> None:
        session = self.session
        if session._follower is None:
            return
        self.wait_while_paused()
        if session._follower.stopped is not None:
            raise SessionError(f"the run has stopped: {session._follower.stopped} (check "
                               "`session.done` after each step)")

    def after_step(self, samples: int, busy_s: float) -> None:
        session = self.session
        follower = session._follower
        if follower is None:
            return
        follower.on_step(samples, busy_s)
        self.wait_while_paused()
        self.take_pending()

    def take_pending(self) -> None:
        session = self.session
        follower = session._follower
        if follower is None:
            return
        target = follower.take_pending()
        if target is not None:
            self.adopt_target(target)
        session.power_cap_w = follower.cap_w
        if session._monitor is not None:
            session._monitor.power_cap_w = follower.cap_w

    def wait_while_paused(self) -> None:
        """Idle the device, one sensor period at a time, while the cap is below every
        configuration (the ticks read the cap meanwhile)."""
        session = self.session
        follower, device = session._follower, session.device
        if follower is None or device is None or not follower.paused:
            return
        follower.start_idling()
        if session.progress is not None:
            session.progress(session.status())
        periods = 0
        while follower.paused and follower.stopped is None:
            before_s = device.now_s()
            device.idle(device.sensor_period_s)
            idled_s = device.now_s() - before_s
            session.device_time_s += idled_s
            follower.on_idle(idled_s)
            device.check_watch()
            periods += 1
            if session.max_pause_s is not None and follower.pause_s >= session.max_pause_s:
                follower.stop(follower.run_s(), f"paused for {follower.pause_s:.1f} s, "
                              f"longer than max_pause_s ({session.max_pause_s:g} s)")
            if session.progress is not None and periods % session.progress_every == 0:
                session.progress(session.status())
        if session.progress is not None:
            session.progress(session.status())

    def after_drift_replan(self, frequency_hz: int) -> None:
        session = self.session
        follower = session._follower
        if follower is None or session._monitor is None:
            return
        if follower.chooser is not None:
            follower.use_chooser(follower.chooser.with_profile(session._monitor.reference))
        follower.adopt_frequency(frequency_hz)

    def resume(self, state: SessionState) -> None:
        session = self.session
        follower = session._follower
        if follower is None:
            return
        if state.cap is None:
            raise WattcapFileError(
                f"{session._checkpoint.folder if session._checkpoint else 'the checkpoint'}: "
                "it was "
                "written without a moving cap; use another checkpoint folder or delete it")
        follower.load_state_dict(state.cap)
        self.adopt_target(Target(follower.batch_size, follower.target.frequency_hz))

    def add_history(self, record: RunRecord) -> None:
        session = self.session
        record.objective = session.objective.describe()
        follower = session._follower
        if follower is None:
            return
        segments, timeline = follower.finish()
        record.cap_source = follower.source.describe()
        record.segments = segments
        record.timeline = timeline
        record.paused_s = follower.paused_s
        record.stop_reason = follower.stopped
        record.events = record.events + follower.events
