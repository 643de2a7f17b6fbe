"""r_b from the gradient noise scale during the run (a Session part, efficiency='gns'): the chunked
backward that measures it, the one re-plan when enough samples are measured, its resume."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wattcap.runtime.checkpoint import SessionState
from wattcap.runtime.errors import SessionError

if TYPE_CHECKING:
    import torch

    from wattcap.core.profile import ProfileTable
    from wattcap.runtime.gns_replan import GnsSettings
    from wattcap.runtime.noise_scale import LossOf


class NoiseScalePart:
    """r_b from the gradient noise scale during the run: one job of the Session, on its
    state."""

    def __init__(self, session: Any) -> None:
        # the Session (typed Any: this module must not import it, or the two would cycle)
        self.session = session

    def start(self, settings: GnsSettings,
                   reference_profiles: list[ProfileTable] | None) -> None:
        session = self.session
        from wattcap.runtime.gns_replan import NoiseScaleReplan

        if session.profile is None:
            raise SessionError("efficiency='gns' re-plans with Algorithm 1: it needs a profile")
        session._gns = NoiseScaleReplan(settings, session.profile, session.power_cap_w,
                                        session.method,
                                     reference_profiles, session.margin_sigmas)
        session.events.append(
            f"gns: r_b is measured from the gradient noise scale over the first "
            f"{settings.samples} samples at b={session.batch_size} ({settings.chunks} chunks per "
            "batch), then the run re-plans")

    def backward(self, loss_of: LossOf, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        """`loss_of(inputs, targets).backward()`; while the noise scale is measured
        (efficiency='gns'), the chunked backward that measures it (same gradient in `.grad`,
        each chunk normalised on its own). Needs `attach(model, optimizer)` first."""
        session = self.session
        gns = session._gns
        if gns is None or not gns.measuring:
            loss_of(inputs, targets).backward()
            return
        if gns.gns is None:
            if session._attached is None or session._attached[1] is None:
                raise SessionError("efficiency='gns' measures with the optimiser's state: call "
                                   "session._checkpointing.attach(model, optimizer) first")
            gns.attach(session._attached[0], session._attached[1], session.batch_size)
        gns.backward(loss_of, inputs, targets)

    def context(self) -> dict[str, Any]:
        session = self.session
        from wattcap.models import get_model_spec

        try:
            task = get_model_spec(session.model_name or "").task
        except (KeyError, ValueError):
            task = "custom"
        workload = session.workload
        return {"model": session.model_name or "unknown",
                "input_shape": list(workload.input_shape) if workload is not None else [],
                "dataset": session.dataset, "task": task, "lr_ref": session.lr_ref,
                "batch_size_ref": session.batch_size_ref}

    def replan_if_due(self) -> None:
        session = self.session
        gns = session._gns
        if gns is None or not gns.due(session.samples):
            return
        try:
            choice = gns.replan(**self.context())
        except ValueError as err:
            raise SessionError(f"gns re-plan: {err}") from None
        assert gns.vector is not None and gns.vector.noise_scale is not None
        session.efficiency = gns.vector
        session.events.append(f"gns: {gns.vector.noise_scale.describe()}")
        self.adopt_choice(choice.batch_size, choice.knob_value, "gns re-plan")

    def adopt_choice(self, batch_size: int, frequency_hz: int, why: str) -> None:
        session = self.session
        old_b, old_hz, old_lr = session.batch_size, session.frequency_hz, session.learning_rate
        session.batch_size = batch_size
        if session.device is not None:
            session._guard_part.apply_frequency(frequency_hz, why)
            session._guard_part.replan_under_ceiling(frequency_hz, why)
            if session._guard is not None:
                session._guard.set_ceiling_hz(session.frequency_hz or frequency_hz)
        else:
            session.frequency_hz = frequency_hz
        if session._monitor is not None:
            session._monitor.batch_size = batch_size  # drift is checked at the new row
        if session._attached is not None and session._attached[1] is not None:
            for group in session._attached[1].param_groups:  # √ rule; Adam's moments are kept
                group["lr"] = session.learning_rate
        session.events.append(
            f"{why} at {session.samples} samples: b={old_b} -> {session.batch_size}, "
            f"{_mhz(old_hz)} -> {_mhz(session.frequency_hz)}, learning rate {old_lr:.3g} -> "
            f"{session.learning_rate:.3g}")

    def resume(self, state: SessionState, model: Any, optimizer: Any) -> None:
        """A checkpoint written after the re-plan: the measured vector and its choice."""
        session = self.session
        from wattcap.core.efficiency import EfficiencyVector

        assert session._gns is not None
        vector = EfficiencyVector.model_validate(state.extra["gns_vector"])
        session._gns.vector = session.efficiency = vector
        session.batch_size = state.batch_size
        if session.device is not None and state.frequency_hz is not None \
                and state.frequency_hz in session.device.frequencies_hz():
            session._guard_part.apply_frequency(state.frequency_hz, "resumed gns plan")
        if session._monitor is not None:
            session._monitor.batch_size = session.batch_size


def _mhz(frequency_hz: int | None) -> str:
    return "-" if frequency_hz is None else f"{frequency_hz / 1e6:.1f} MHz"
