"""What a Session trains (a Session part): the model adopted (its name, architecture fingerprint
and workload, checked against the profile), and each step's device cost from that workload."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wattcap.runtime.errors import SessionError
from wattcap.runtime.model_source import (
    ModelSourceError,
    module_step_factory,
    module_workload,
    resolve_model,
)
from wattcap.runtime.plan_maker import fingerprint

if TYPE_CHECKING:
    from wattcap.devices.workload import StepCost


class ModelPart:
    """What a Session trains: one job of the Session, on its state."""

    def __init__(self, session: Any) -> None:
        # the Session (typed Any: this module must not import it, or the two would cycle)
        self.session = session

    def adopt(self, model: Any, example_input: Any = None) -> None:
        """Set what is trained (for sessions built before the model exists: the framework
        callbacks plan when they are built and get the model when training starts)."""
        session = self.session
        try:
            session.model_name, session._measure_workload = resolve_model(
                model, example_input, session._model_name_override)
        except ModelSourceError as err:
            raise SessionError(str(err)) from None
        session._workload = None
        session._costs.clear()
        import torch

        if isinstance(model, torch.nn.Module) and example_input is not None:
            session._step_factory = module_step_factory(model, example_input)
        session.architecture_fingerprint = fingerprint(model, session.model_name)
        profile = getattr(session, "profile", None)
        if profile is not None and session.model_name is not None:
            profile.check_matches(model=session.model_name, source="profile",
                                  architecture_fingerprint=session.architecture_fingerprint)
        if session.identity and session.identity.get("model") is None:
            session.identity["model"] = session.model_name

    def provide_example_input(self, model: Any, example_input: Any) -> None:
        """Give an example batch for an `nn.Module` model whose workload is not known yet (the
        framework callbacks pass the first training batch)."""
        session = self.session
        if session._measure_workload is None and session._workload is None:
            session._measure_workload = module_workload(model, example_input,
                                                     session.model_name or "model")
            if session._step_factory is None and example_input is not None:
                session._step_factory = module_step_factory(model, example_input)

    def step_cost(self, batch_size: int) -> StepCost:
        session = self.session
        cost = session._costs.get(batch_size)
        if cost is None:
            workload = session.workload
            if workload is not None:
                overhead = getattr(getattr(session.device, "spec", None),
                                   "allocator_overhead_factor", 1.0)
                cost = workload.step_cost(batch_size, overhead)
            elif session.device is not None and not session.device.timing_needs_real_work:
                raise SessionError(
                    f"the {session.device.kind} device models a step's time and power from the "
                    "model's workload: pass model= (a name, a ModelSpec, or an nn.Module with "
                    "example_input=, one batch of inputs)")
            else:
                from wattcap.devices.workload import StepCost

                cost = StepCost(batch_size=batch_size, flops=0.0, dram_bytes=0.0,
                                optimizer_bytes=0.0, kernels=0, flops_per_kernel_per_sample=0.0,
                                memory_needed_bytes=0)
            session._costs[batch_size] = cost
        return cost
