"""Making the plan (a Session part): check the profile against the model and the device, resolve
the cap, run Algorithm 1 or take the given configuration, derive the learning rate and the
checkpoint identity; profile the device first for profile="auto"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wattcap.core.defaults import DEFAULT_BATCH_SIZE_REF, DEFAULT_LR_REF
from wattcap.core.knob import KnobKind, knob_unit, require_clock
from wattcap.core.schema import WattcapFileError
from wattcap.runtime.errors import SessionError

if TYPE_CHECKING:
    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.core.profile import ProfileTable
    from wattcap.runtime.gns_replan import GnsSettings


class PlanMaker:
    """Making the plan: one job of the Session, on its state."""

    def __init__(self, session: Any) -> None:
        # the Session (typed Any: this module must not import it, or the two would cycle)
        self.session = session

    def make(self) -> None:
        """Check the profile against the model (and the device, once open), resolve the cap,
        run Algorithm 1 (or take the given configuration), and derive the learning rate."""
        session = self.session
        # read once the profile is known (now, or in start())
        planning, cap = session.settings.planning, session.settings.cap
        if session.profile is not None:
            self.take_knob(session.profile.knob_kind, planning.frequency_hz)
        elif planning.knob_value is not None:
            raise SessionError("knob_value is a value of a profile's knob: give the profile")
        self.check_device()
        if session.profile is not None and session.model_name is not None:
            session.profile.check_matches(model=session.model_name, source="profile",
                                       architecture_fingerprint=session.architecture_fingerprint)
        session._cap.init(cap.moving, planning.objective, cap.policy,
                       cap.max_pause_s, batch_size_given=planning.batch_size is not None)
        if session.cap_source is not None:  # its re-plans act on clocks: refused now, not later
            require_clock(session.knob_kind, "following a moving cap")
        session.batch_size, value = self.decide(
            planning.batch_size,
            planning.frequency_hz if session.knob_kind == "gpu_clock" else session.knob_value,
            session._reference_profiles)
        if session.knob_kind == "gpu_clock":
            session.frequency_hz = value
        else:  # the clock is left to the board: the limit or the mode bounds it
            session.knob_value = value
        session.lr_ref = planning.lr_ref if planning.lr_ref is not None else (
            session.efficiency.lr_ref if session.efficiency is not None else DEFAULT_LR_REF)
        session.batch_size_ref = planning.batch_size_ref if planning.batch_size_ref is not None \
            else (session.efficiency.batch_size_ref if session.efficiency is not None
                  else DEFAULT_BATCH_SIZE_REF)
        identity = session.settings.checkpoint.identity
        session.identity = identity if identity is not None else {
            "model": session.model_name, "batch_size": session.batch_size,
            "learning_rate": session.learning_rate, "target_accuracy": session.target_accuracy,
        }
        if identity is None and not session.target_metric.is_accuracy:
            # named only where it is not accuracy: earlier checkpoints keep their identity
            session.identity["target_metric"] = session.target_metric.model_dump()
        if session._gns_settings is not None:
            session._noise.start(session._gns_settings, session._reference_profiles)
        session._noise.start_correction(planning.online_correction)

    def check_device(self) -> None:
        """Refuse, before anything changes, a profile made for another device or in another
        power mode than the one the device is in (its times and powers are that mode's): the
        command line's check, `ProfileTable.check_matches`. Nothing to check before the device
        is open, or without a profile."""
        session, device = self.session, self.session.device
        if session.profile is None or device is None:
            return
        given = session.settings.planning.profile  # its file names it, where it has one
        source = str(given) if isinstance(given, str | Path) and given != "auto" else "profile"
        session.profile.check_matches(device=device.name, source=source,
                                      power_mode=device.power_mode,
                                      power_modes=device.power_mode_names())

    def take_knob(self, kind: KnobKind, frequency_hz: int | None) -> None:
        """The profile's knob; another than the clock is refused where the Session would act
        on clocks (a given clock, the gradient-noise re-plan)."""
        session = self.session
        session.knob_kind = kind
        if kind == "gpu_clock":
            if session.settings.planning.knob_value is not None:
                raise SessionError("knob_value is for a profile of a power limit or power "
                                   "mode; this profile varies the GPU clock: give frequency_hz")
            return
        what = knob_unit(kind).label
        if frequency_hz is not None:
            raise SessionError(f"this profile varies the {what}, and the clock is left to the "
                               "board under it: give knob_value, not frequency_hz")
        if session._gns_settings is not None:
            require_clock(kind, 'efficiency="gns" (its re-plan)')
        if session.settings.planning.online_correction:
            require_clock(kind, "online_correction (its re-plan)")

    def decide(self, batch_size: int | None, frequency_hz: int | None,
                reference_profiles: list[ProfileTable] | None) -> tuple[int, int | None]:
        session = self.session
        profile = session.profile
        if profile is not None and (batch_size is None or frequency_hz is None):
            from wattcap.algorithms.planner import plan
            from wattcap.core.plan import InfeasibleCapError
            from wattcap.measure.references import reference_profiles_for

            refs = reference_profiles if reference_profiles is not None else \
                reference_profiles_for(profile)
            try:
                session.plan = plan(profile, session.power_cap_w, efficiency=session.efficiency,
                                 reference_profiles=refs, objective=session.objective,
                                 margin_sigmas=session.margin_sigmas, risk=session.risk,
                                 transfer_factor=session.transfer_factor)
            except InfeasibleCapError as err:
                raise SessionError(str(err)) from None
            session.events += [f"plan: {note}" for note in session.plan.notes]
            if batch_size is not None:
                from wattcap.algorithms.planner import with_power_margin

                margined = with_power_margin(profile, session.margin_sigmas)
                point = margined.frontier(session.power_cap_w).get(batch_size)
                if point is None:
                    raise SessionError(
                        f"batch size {batch_size} has no measured frequency under the cap "
                        f"{session.power_cap_w} W in the profile")
                return batch_size, frequency_hz if frequency_hz is not None else \
                    point.knob_value
            if session.method not in session.plan.choices:
                why = session.plan.unavailable.get(session.method, "unknown method")
                raise SessionError(f"{session.method} has no choice under this cap: {why}")
            session.choice = session.plan.choices[session.method]
            return session.choice.batch_size, frequency_hz if frequency_hz is not None else \
                session.choice.knob_value
        if batch_size is None:
            raise SessionError("give a profile to plan the batch size and frequency, or a "
                               "batch_size (and a frequency_hz)")
        if batch_size < 1:
            raise SessionError(f"batch size must be positive, got {batch_size}")
        return batch_size, frequency_hz

    def auto_profile(self, batch_size: int | None) -> ProfileTable:
        """Profile the model on the device now (pruned for the cap; every point without one),
        or reuse the profile an earlier session cached for the same device, power mode, model
        workload and cap."""
        session = self.session
        import hashlib

        from wattcap.core.profile import ProfileTable
        from wattcap.devices.workload import DEFAULT_BATCH_SIZES
        from wattcap.measure.profile_rounds import (
            DEFAULT_ROUNDS_MAX_FIRST_S,
            default_rounds,
            profile_in_rounds,
        )
        from wattcap.measure.profiling import Profiler
        from wattcap.measure.references import cache_dir

        device, workload = session.device, session.workload
        if device is None or session.model_name is None or workload is None:
            raise SessionError("profile='auto' needs a device and a model (an nn.Module with "
                               "example_input=, or a model name) to profile")
        sizes = DEFAULT_BATCH_SIZES if batch_size is None else (batch_size,)
        key = json.dumps([device.name, device.power_mode, session.model_name, workload.to_dict(),
                          session.power_cap_w, list(sizes)], sort_keys=True)
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        safe_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in session.model_name)
        path = cache_dir() / "profiles" / f"{device.name}-{safe_name}-{digest}.json"
        # the points are the session's workload (its module, its head), so the profile is of
        # its architecture, not of the name's default build (another number of classes)
        own = {"architecture_fingerprint": session.architecture_fingerprint}
        if path.exists():
            try:
                table = ProfileTable.load(path).model_copy(update=own)
                session.events.append(f"profile reused from {path}")
                return table
            except WattcapFileError:
                pass  # stale or corrupt: measure again
        profiler = Profiler(device, session.model_name, batch_sizes=tuple(sizes),
                            workload=workload, step_factory=session._step_factory)
        # 2 rounds on real hardware (the spread between them), 1 on the emulator
        result = profile_in_rounds(profiler, default_rounds(device),
                                   power_cap_w=session.power_cap_w,
                                   max_first_round_s=DEFAULT_ROUNDS_MAX_FIRST_S)
        table = result.table.model_copy(update=own)
        if result.skipped is not None:
            session.events.append(result.skipped)
        table.save(path)
        session.events.append(
            f"profiled {session.model_name} on {device.name}: {table.points_measured} points "
            f"({table.mode}" + (f", {table.rounds} rounds" if table.rounds > 1 else "")
            + f") in {table.profiling_device_s:.1f} s of device time; cached in {path}")
        return table


def gns_settings(efficiency: Any) -> GnsSettings | None:
    if efficiency is None or not (isinstance(efficiency, str) or
                                  type(efficiency).__name__ == "GnsSettings"):
        return None
    from wattcap.runtime.gns_replan import GnsSettings

    return GnsSettings.of(efficiency)


def fingerprint(model: Any, name: str | None) -> str | None:
    """The architecture fingerprint of what is trained: of the named spec as built with its
    default head (as profiles record it), or of the nn.Module itself."""
    from torch import nn

    from wattcap.models import architecture_fingerprint, model_fingerprint

    if isinstance(model, nn.Module):
        return architecture_fingerprint(model)
    if name is None:
        return None
    try:
        return model_fingerprint(name)
    except (KeyError, ValueError):
        return None




def load_profile(profile: Any) -> ProfileTable | None:
    if profile is None:
        return None
    from wattcap.core.profile import ProfileTable

    return profile if isinstance(profile, ProfileTable) else ProfileTable.load(profile)


def load_efficiency(efficiency: Any) -> EfficiencyVector | None:
    if efficiency is None:
        return None
    from wattcap.core.efficiency import EfficiencyVector

    return efficiency if isinstance(efficiency, EfficiencyVector) else \
        EfficiencyVector.load(efficiency)
