"""The device side of a Session (a Session part): the plan's frequency applied and checked
against the profile, the drift monitor built, the device restored (and closed when the Session
opened it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wattcap.runtime.watchdog import DriftMonitor

if TYPE_CHECKING:

    pass


class DeviceGuard:
    """The device side of a Session: one job of the Session, on its state."""

    def __init__(self, session: Any) -> None:
        # the Session (typed Any: this module must not import it, or the two would cycle)
        self.session = session

    def apply_frequency(self, frequency_hz: int, why: str) -> None:
        session = self.session
        assert session.device is not None
        applied = session.device.set_frequency_hz(frequency_hz)
        if session.profile is not None and session.power_cap_w is not None:
            point = session.profile.lookup(session.batch_size, frequency_hz)
            if point is not None and point.peak_power_w > session.power_cap_w:
                session.events.append(
                    f"{why}: b={session.batch_size} at {frequency_hz / 1e6:.1f} MHz peaked at "
                    f"{point.peak_power_w:.2f} W in the profile, above the cap "
                    f"{session.power_cap_w:g} W: the watchdog will step it down")
        session.frequency_hz = applied

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
        from wattcap.measure.profiling import Profiler

        profiler = Profiler(session.device, session.model_name, batch_sizes=(session.batch_size,),
                            workload=session.workload, step_factory=session._step_factory)
        return DriftMonitor(session.device, session.profile, session.batch_size,
                            power_cap_w=session.power_cap_w, tolerance=session._drift_tolerance,
                            watchdog=session._guard, profiler=profiler,
                            margin_sigmas=session.margin_sigmas)
