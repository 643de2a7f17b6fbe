"""What a Session trains, resolved to a name and a way to measure its workload (the emulated
device turns FLOPs and bytes into time and power), and how tensors reach the torch device."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from wattcap.core.errors import WattcapError

if TYPE_CHECKING:

    from wattcap.devices.workload import Workload


class ModelSourceError(WattcapError, ValueError):
    """`model=` is not something wattcap can train."""




def resolve_model(model: Any, example_input: Any, model_name: str | None
                   ) -> tuple[str | None, Callable[[], Workload] | None]:
    """(name, how to measure the workload) of what the session trains; the workload is
    measured only when a step's cost is needed (not for a device-less run)."""
    if model is None:
        return None, None
    from wattcap.devices.workload import workload_for

    if isinstance(model, str):
        return model, lambda: workload_for(model)
    name = getattr(model, "name", None)
    if isinstance(name, str) and hasattr(model, "build"):  # a ModelSpec
        return name, lambda: workload_for(name)
    import torch

    if isinstance(model, torch.nn.Module):
        name = model_name or f"{type(model).__module__}.{type(model).__qualname__}"
        return name, module_workload(model, example_input, name)
    raise ModelSourceError(f"model= must be a model name, a ModelSpec or an nn.Module, got "
                           f"{type(model).__name__}")


def module_workload(model: Any, example_input: Any, name: str
                    ) -> Callable[[], Workload] | None:
    """How to measure the workload of an `nn.Module` on `example_input` (one batch), or None
    without an example input (then only devices that time real work can run it)."""
    if example_input is None:
        return None
    import torch

    from wattcap.devices.workload import measure_workload

    inputs = example_input if isinstance(example_input, torch.Tensor) else \
        torch.as_tensor(example_input)
    # A copy, taken now: measuring runs an optimiser step, and the user's model must not move.
    probe = copy.deepcopy(model).to("cpu").train()
    inputs = inputs.detach().to("cpu")
    if inputs.shape[0] == 1:  # batch norm cannot train on one sample
        inputs = torch.cat([inputs, inputs])

    def measure() -> Workload:
        # The loss only decides where the backward graph starts: a sum reaches every
        # parameter, which is all the FLOP and byte census needs.
        return measure_workload(probe, inputs, None,
                                lambda out, _target: _as_tensor(out).float().sum(), name)

    return measure


def _as_tensor(output: Any) -> Any:
    # Hugging Face models return an output object or a dict holding the logits; tuples hold
    # them first.
    if isinstance(output, dict):
        output = output.get("logits", next(iter(output.values())))
    logits = getattr(output, "logits", None)
    if logits is not None:
        return logits
    if isinstance(output, (tuple, list)):
        return output[0]
    return output


def module_step_factory(model: Any, example_input: Any
                        ) -> Callable[[int, str], Callable[[], object]]:
    """Training steps of a copy of `model` on synthetic batches cut from `example_input` (rows
    repeated up to b): what a real device runs while a user's model is profiled or
    re-measured. The copy is made now, so the user's model is never touched."""
    import torch

    template = copy.deepcopy(model).to("cpu")
    rows = (example_input if isinstance(example_input, torch.Tensor)
            else torch.as_tensor(example_input)).detach().to("cpu")

    def factory(batch_size: int, torch_device: str) -> Callable[[], object]:
        net = copy.deepcopy(template).to(torch_device).train()
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-4)
        repeat = -(-batch_size // rows.shape[0])
        inputs = rows.repeat(repeat, *([1] * (rows.dim() - 1)))[:batch_size]
        inputs = inputs.to(torch_device, non_blocking=True)

        def step() -> None:  # nothing read back: training does not wait for every step
            optimizer.zero_grad(set_to_none=True)
            _as_tensor(net(inputs)).float().sum().backward()
            optimizer.step()

        return step

    return factory
