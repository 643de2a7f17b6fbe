"""Checkpoints of a run (a Session part): the attached model and optimiser with the run state,
saved at every report and resumed after a restart (the file format: wattcap.runtime.checkpoint)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from wattcap.core.schema import WattcapFileError
from wattcap.devices.clock_clamp import lock_clock_within
from wattcap.runtime.checkpoint import SessionState
from wattcap.runtime.errors import SessionError
from wattcap.runtime.rng_state import capture_rng, restore_rng

if TYPE_CHECKING:
    import torch


class Checkpointing:
    """Checkpoints of a run: one job of the Session, on its state."""

    def __init__(self, session: Any) -> None:
        # the Session (typed Any: this module must not import it, or the two would cycle)
        self.session = session

    def attach(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None
               ) -> bool:
        """Let the session checkpoint `model` and `optimizer` at every `report` (with a
        checkpoint_dir), and resume them now from an earlier checkpoint of this run; True when
        it resumed."""
        session = self.session
        session._attached = (model, optimizer)
        if session._checkpoint is None or not session._checkpoint.exists():
            return False
        self.resume(model, optimizer)
        return True

    def save(self, extra: dict[str, Any] | None = None) -> None:
        """Write the attached model and optimizer and the run state (atomically)."""
        session = self.session
        if session._checkpoint is None or session._attached is None:
            raise SessionError("save_checkpoint needs a checkpoint_dir and attach(model, ...)")
        if not session.reached:
            session._replan_if_due()
        model, optimizer = session._attached
        session._checkpoint.save(model, optimizer, self.state(extra or {}))

    def state(self, extra: dict[str, Any]) -> SessionState:
        session = self.session
        guard, monitor = session._guard, session._monitor
        if session._gns is not None and session._gns.vector is not None:
            extra = {**extra, "gns_vector": session._gns.vector.model_dump(mode="json")}
        correction = session._noise.correction
        if correction is not None and correction.policy.applied_factor != 1.0:
            evidence = correction.policy.evidence
            extra = {**extra, "correction_factor": correction.policy.applied_factor,
                     "correction_spread": correction.policy.applied_spread,
                     "correction_samples": evidence[-1].target.samples_end if evidence
                     else session.samples}
        if monitor is not None and monitor.board is not None:
            extra = {**extra, "drift_board": monitor.board}
        if guard is not None and guard.plan_steps_from:
            extra = {**extra, "watch_plan_steps_from": guard.plan_steps_from}
        if session._guard_part.board_replanned_to is not None:
            extra = {**extra, "board_replanned_to": session._guard_part.board_replanned_to}
        return SessionState(
            identity=session.identity, samples=session.samples, steps=session.steps,
            curve=session.curve, device_time_s=session.device_time_s,
            meter=session._meter.state(session.device.now_s() if session.device else None),
            events=session.events,
            counter_energy_j=session._records.counter_energy_j(),
            frequency_hz=session.device.run_frequency_hz() if session.device else None,
            batch_size=session.batch_size,
            cap_violations=guard.violations if guard else [],
            frequency_steps=guard.steps if guard else [],
            drift_events=monitor.events if monitor else [],
            replans=monitor.replans if monitor else [],
            clock_clamps=session._guard_part.run_clamps(), extra=extra,
            cap=session._follower.state_dict() if session._follower is not None else None,
            rng=capture_rng())

    def resume(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None
               ) -> SessionState:
        """Load the checkpoint into `model`/`optimizer` and the run state into the session."""
        session = self.session
        if session._checkpoint is None or not session._checkpoint.exists():
            raise SessionError("no checkpoint to resume from")
        state = session._checkpoint.load(model, optimizer)
        wanted = _jsonable(session.identity)
        if state.identity != wanted:
            raise WattcapFileError(
                f"{session._checkpoint.folder}: the checkpoint belongs to another run (it "
                f"differs in {', '.join(_differences(state.identity, wanted))}); use another "
                "checkpoint folder, or delete this one to start afresh")
        if state.rng is not None:  # dropout and augmentation draw on as if never stopped
            restore_rng(state.rng)
        session.samples = session.resumed_from_samples = state.samples
        session.steps = state.steps
        session.curve = list(state.curve)
        session._crossing = None
        session.device_time_s = state.device_time_s
        session._meter.resume(state.meter,
                              session.device.now_s() if session.device is not None else None)
        if session.device is not None:  # an emulated sensor's noise goes on, not from its start
            session.device.begin_measurement(f"run resumed at {state.samples} samples")
        session.events = state.events + [f"resumed from checkpoint at {state.samples} samples"]
        session._resumed_at_steps = state.steps
        if session.progress is not None:  # said when it starts, not only in the record
            session.progress(session.status())
        if state.counter_energy_j is not None:
            session._energy_before_j = state.counter_energy_j
            if session.device is not None:
                session._counter_start_j = session.device.energy_counter_j()
        else:
            session._energy_before_j = session._meter.energy_j
        if session._guard is not None:
            session._guard.violations += state.cap_violations
            # the steps of plans before a re-plan for the board do not bound this one's
            session._guard.resume_steps(state.frequency_steps,
                                        int(state.extra.get("watch_plan_steps_from", 0)))
        session._guard_part.clamps_before = list(state.clock_clamps)
        if session._monitor is not None:
            session._monitor.events += state.drift_events
            session._monitor.replans += state.replans
            session._monitor.adopt(state.replans, state.extra.get("drift_board"))
        device = session.device
        saved_hz = state.frequency_hz
        if session._gns is not None and "gns_vector" in state.extra:
            session._noise.resume(state, model, optimizer)
        if session._noise.correction is not None and "correction_factor" in state.extra:
            session._noise.resume_correction(state)
        if "board_replanned_to" in state.extra:
            session._guard_part.resume_board_replan(state.extra["board_replanned_to"])
        # A re-plan's or the watchdog's lower frequency is put back (only ever lowered: the
        # frequency applied now may be the plan's).
        if (device is not None and saved_hz is not None
                and saved_hz < device.run_frequency_hz()
                and saved_hz in device.frequencies_hz()):
            applied_hz = lock_clock_within(device, saved_hz, "resume")
            session.frequency_hz = applied_hz
            if session._guard is not None:
                session._guard.set_ceiling_hz(applied_hz)
        session._cap.resume(state)
        return state


def _differences(found: Any, wanted: Any, prefix: str = "") -> list[str]:
    """The fields (dotted) in which two identities differ."""
    if isinstance(found, dict) and isinstance(wanted, dict):
        keys = sorted(set(found) | set(wanted))
        return [d for k in keys for d in _differences(found.get(k), wanted.get(k),
                                                        f"{prefix}{k}.")]
    return [] if found == wanted else [prefix.rstrip(".") or "identity"]


def _jsonable(value: dict[str, Any]) -> dict[str, Any]:
    # The identity goes through JSON in the checkpoint: compare like with like.
    return json.loads(json.dumps(value))
