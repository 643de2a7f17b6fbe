"""The gradient noise scale during the run (a Session part): efficiency='gns' (the chunked
backward that measures it, the one re-plan when enough samples are measured, its resume) and
the online correction (online_correction=True: the target's noise scale against the proxy's
all run long, a re-plan when they part)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wattcap.runtime.checkpoint import SessionState
from wattcap.runtime.errors import SessionError

if TYPE_CHECKING:
    import torch

    from wattcap.core.profile import ProfileTable
    from wattcap.devices.workload import StepCost
    from wattcap.runtime.gns_replan import GnsSettings
    from wattcap.runtime.noise_scale import LossOf
    from wattcap.runtime.online_correction import OnlineCorrection


class NoiseScalePart:
    """r_b from the gradient noise scale during the run: one job of the Session, on its
    state."""

    def __init__(self, session: Any) -> None:
        # the Session (typed Any: this module must not import it, or the two would cycle)
        self.session = session
        self.correction: OnlineCorrection | None = None

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
        (efficiency='gns', a measured step of the online correction), the chunked backward
        that measures it (same gradient in `.grad`, each chunk normalised on its own). Needs
        `attach(model, optimizer)` first."""
        session = self.session
        gns, correction = session._gns, self.correction
        if correction is not None and correction.measuring:
            if correction.gns is None:
                correction.attach(*self._model_and_optimizer("online_correction"))
            correction.backward(loss_of, inputs, targets)
            return
        if gns is None or not gns.measuring:
            loss_of(inputs, targets).backward()
            return
        if gns.gns is None:
            gns.attach(*self._model_and_optimizer("efficiency='gns'"), session.batch_size)
        gns.backward(loss_of, inputs, targets)

    def measure_beside(self, model: Any, optimizer: Any, loss_of_batch: Any,
                       batch: Any) -> None:
        """The online correction's measurement beside a framework's own backward (see
        `Session.measure_beside`); nothing on a step it does not measure."""
        correction = self.correction
        if correction is None or not correction.measuring:
            return
        if correction.gns is None:
            correction.attach(model, optimizer)
        ran = correction.measure_beside(loss_of_batch, batch)
        session, workload = self.session, self.session.workload
        if ran is not None and session._timer is not None and workload is not None:
            # the step in flight ran the batch's own backward and then its parts' passes:
            # where the device models a step's time from its cost (the emulator), it is
            # charged both (it was begun as a chunked step, as `session.backward` runs one)
            size, chunks = ran
            session._timer.cost = workload.step_cost(size, self._overhead())
            session._timer.extra_costs.append(
                workload.chunk_passes_cost(size, chunks, self._overhead()))

    def _model_and_optimizer(self, what: str) -> tuple[Any, Any]:
        attached = self.session._attached
        if attached is None or attached[1] is None:
            raise SessionError(f"{what} measures with the optimiser's state: call "
                               "session.attach(model, optimizer) first")
        return attached[0], attached[1]

    # -- the online correction -----------------------------------------------------------------
    def start_correction(self, value: Any) -> None:
        """Measure the target's noise scale against the proxy's all run long (see
        wattcap.runtime.online_correction)."""
        from wattcap.runtime.online_correction import CorrectionSettings, OnlineCorrection

        settings = CorrectionSettings.of(value)
        session = self.session
        if settings is None:
            return
        if session._gns_settings is not None or session.profile is None \
                or session.efficiency is None or session.settings.planning.method != "wattcap":
            raise SessionError("online_correction re-plans wattcap's choice with Algorithm 1 "
                               "from a profile and an efficiency vector of the proxy (not "
                               "efficiency='gns', not a baseline)")
        from wattcap.algorithms.transfer import proxy_b_noise

        if not proxy_b_noise(session.efficiency):
            raise SessionError("online_correction moves the proxy's r_b along the large-batch "
                               "relation: the efficiency vector needs a B_noise (a large-batch "
                               "fit or a resolved noise scale), and this one has none")
        try:
            self.correction = OnlineCorrection(settings, session.efficiency)
        except ValueError as err:
            raise SessionError(str(err)) from None
        session.events.append(
            f"online correction: the target's noise scale is measured over doubling windows of "
            f"samples ({settings.measured_steps_per_window} chunked steps per window, "
            f"{settings.chunks} chunks) and compared with the {session.efficiency.dataset} "
            f"proxy's; a re-plan when they part by more than {settings.relevant_factor:g}x")

    def before_step(self, samples: int | None) -> None:
        """Decide whether the step about to run is measured (its cost depends on it)."""
        if self.correction is not None:
            session = self.session
            self.correction.will_measure(session.samples, samples or session.batch_size)

    @property
    def measuring_step(self) -> bool:
        """The current step runs chunked to measure the noise scale."""
        return (self.correction is not None and self.correction.measuring) \
            or self.session.measuring_noise_scale

    def step_cost(self, samples: int) -> StepCost:
        """The device cost of the step: chunked when the online correction measures it."""
        session = self.session
        from wattcap.runtime.online_correction import chunks_for

        chunks = None if self.correction is None or not self.correction.measuring else \
            chunks_for(samples, self.correction.settings.chunks)
        workload = session.workload
        if chunks is None or workload is None:
            return session._model_part.step_cost(samples)
        return workload.chunked_step_cost(samples, chunks, self._overhead())

    def _overhead(self) -> float:
        """The emulated device's allocator overhead factor (1 elsewhere)."""
        return getattr(getattr(self.session.device, "spec", None), "allocator_overhead_factor",
                       1.0)

    def after_step(self) -> None:
        """The correction's evidence when the step closed a window (in the run record)."""
        if self.correction is None:
            return
        from wattcap.algorithms.noise_correction import pooled_evidence

        session = self.session
        for evidence in self.correction.after_step(session.samples, session.batch_size):
            text = evidence if isinstance(evidence, str) else (
                f"{evidence.describe()}; pooled "
                f"{pooled_evidence(self.correction.policy.evidence).describe()}")
            skipped = self.correction.skipped_steps
            session.events.append(
                f"online correction: {text} ({self.correction.measured_steps} chunked steps "
                "so far" + (f", {skipped} with norms not finite or zero, not counted)"
                            if skipped else ")"))

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
        self._correct_if_due()
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

    def _correct_if_due(self) -> None:
        """Re-plan with the proxy's r_b moved by the pending evidence's factor: wattcap's
        choice on the profile (scaled to this board where the drift monitor knows its level,
        never below the profile's power), the moved r_b, the run's cap and settings (a
        transfer factor narrowed to the evidence's interval); a moving cap plans again with
        the moved r_b at the cap in force. Where the run may not choose its
        batch size and clock again (a given batch size, a clamp being followed), or nothing
        meets the cap on this board, the record says so and the plan stays."""
        correction, session = self.correction, self.session
        if correction is None or correction.pending is None or session.reached:
            return
        from wattcap.algorithms.noise_correction import corrected_vector

        pooled, correction.pending = correction.pending, None
        where = f"online correction at {session.samples} samples: r_b moved by factor " \
            f"{pooled.factor:.2f}"
        guard = session._guard_part
        if not guard.may_replan() or guard.following_clamp():
            session.events.append(f"{where}, not applied: this run may not choose its batch "
                                  "size and clock again now (a given batch size, a clamp)")
            return
        vector = corrected_vector(correction.proxy, pooled.factor, f"pooled {pooled.describe()}")
        if session._follower is not None:
            correction.policy.apply(pooled)
            session.events.append(f"{where}; the moving cap plans again with it")
            self._use_corrected(vector, replan_why="online correction")
            return
        monitor = session._monitor
        profile = session.profile
        if monitor is not None and monitor.board_scale is not None:
            time_f, power_f = monitor.board_scale
            profile = profile.on_board(time_f, max(power_f, 1.0))
        previous = session.efficiency, session.transfer_factor
        session.efficiency = vector
        session.transfer_factor = narrowed_transfer_factor(session.transfer_factor,
                                                           pooled.spread)
        choice = guard.wattcap_choice(profile)
        if choice is None:
            session.efficiency, session.transfer_factor = previous
            session.events.append(f"{where}, not applied: nothing meets the cap "
                                  f"{session.power_cap_w} W on this board with it")
            return
        correction.policy.apply(pooled)
        self._say_narrowed(previous[1])
        if (choice.batch_size, choice.knob_value) == (session.batch_size, session.frequency_hz):
            session.events.append(f"{where}; the choice stays b={session.batch_size}")
            return
        self.adopt_choice(choice.batch_size, choice.knob_value,
                          f"online correction (factor {pooled.factor:.2f})")
        if guard.board_replanned_to is not None:  # a resume goes on from this plan
            guard.board_replanned_to = [session.batch_size, int(session.frequency_hz or 0)]
        if session._guard is not None:  # another point: what the watchdog learnt was the old's
            session._guard.restart(session.power_cap_w, ceiling_hz=session.frequency_hz)
        if monitor is not None:
            monitor.follow(session.batch_size, session.power_cap_w)

    def _use_corrected(self, vector: Any, replan_why: str | None = None) -> None:
        """r_b moved by the target's evidence and the transfer factor narrowed to what the
        evidence leaves uncertain, for the run and a moving cap's chooser (with `replan_why`,
        the cap in force is planned again with them at once)."""
        session, correction = self.session, self.correction
        assert correction is not None  # only a correction moves r_b
        session.efficiency = vector
        self._narrow_transfer_factor(correction.policy.applied_spread)
        follower = session._follower
        if follower is not None and follower.chooser is not None:
            follower.use_chooser(follower.chooser.with_efficiency(
                vector, session.transfer_factor), replan_why)

    def _narrow_transfer_factor(self, spread: float | None) -> None:
        """The transfer factor (how far the target's B_noise may lie from the proxy's) is no
        wider, once r_b is moved by the evidence, than the evidence's interval (`spread`): the
        run's later choices (under a clamp, for its board, under a moving cap) plan with that.
        Unknown spread (an older checkpoint): the factor stays."""
        session = self.session
        old = session.transfer_factor
        if spread is not None:
            session.transfer_factor = narrowed_transfer_factor(old, spread)
        self._say_narrowed(old)

    def _say_narrowed(self, old: float | None) -> None:
        session = self.session
        if old is not None and session.transfer_factor != old:
            now = session.transfer_factor
            session.events.append(
                f"online correction: the transfer factor {old:g} narrowed to "
                + ("none" if now is None else f"{now:.2f}")
                + " (the target's evidence: its pooled interval)")

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

    def resume_correction(self, state: SessionState) -> None:
        """A checkpoint written after a correction: its factor, the vector moved by it and
        the plan it chose; the windows start afresh from the resumed samples."""
        from wattcap.algorithms.noise_correction import corrected_vector

        session, correction = self.session, self.correction
        assert correction is not None
        factor = float(state.extra["correction_factor"])
        correction.policy.applied_factor = factor
        spread = state.extra.get("correction_spread")
        correction.policy.applied_spread = None if spread is None else float(spread)
        self._use_corrected(corrected_vector(
            correction.proxy, factor, f"resumed (window ending at "
            f"{state.extra.get('correction_samples', '?')} samples)"))
        self._resume_at(state, "resumed correction")
        session.events.append(f"online correction: resumed with r_b moved by factor "
                              f"{factor:.2f}")

    def resume(self, state: SessionState, model: Any, optimizer: Any) -> None:
        """A checkpoint written after the re-plan: the measured vector and its choice."""
        session = self.session
        from wattcap.core.efficiency import EfficiencyVector

        assert session._gns is not None
        vector = EfficiencyVector.model_validate(state.extra["gns_vector"])
        session._gns.vector = session.efficiency = vector
        self._resume_at(state, "resumed gns plan")

    def _resume_at(self, state: SessionState, why: str) -> None:
        """The checkpoint's batch size and clock, where the clock is one the device has."""
        session = self.session
        session.batch_size = state.batch_size
        if session.device is not None and state.frequency_hz is not None \
                and state.frequency_hz in session.device.frequencies_hz():
            session._guard_part.apply_frequency(state.frequency_hz, why)
        if session._monitor is not None:
            session._monitor.batch_size = session.batch_size


def _mhz(frequency_hz: int | None) -> str:
    return "-" if frequency_hz is None else f"{frequency_hz / 1e6:.1f} MHz"


def narrowed_transfer_factor(transfer_factor: float | None, spread: float) -> float | None:
    """A transfer factor no wider than the evidence's `spread` (its interval's wider side as
    a ratio); None where there was none, or where the interval is a point."""
    if transfer_factor is None:
        return None
    narrowed = min(transfer_factor, spread)
    return narrowed if narrowed > 1.0 + 1e-9 else None
