"""A run's checkpoint: model and optimizer tensors in one safetensors file, and the typed
`SessionState` (samples, curve, device time, power sums, what the runtime did) in its metadata.
Written atomically, so a kill at any moment leaves the last complete checkpoint."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from wattcap.core.events import CapViolation, ClockClamp, DriftEvent, FrequencyStep, Replan
from wattcap.core.files import atomic_path
from wattcap.core.run import CurvePoint
from wattcap.core.schema import WattcapFileError
from wattcap.runtime.meter import MeterState

if TYPE_CHECKING:
    import torch


class SessionState(BaseModel):
    """Everything a checkpoint keeps besides the tensors: enough for a restarted run to go on
    exactly where the last checkpoint left it, with what the runtime did before the restart."""

    model_config = ConfigDict(extra="forbid")
    identity: dict[str, Any]
    samples: int
    steps: int
    curve: list[CurvePoint]
    device_time_s: float
    meter: MeterState
    events: list[str]
    counter_energy_j: float | None
    frequency_hz: int | None
    batch_size: int
    cap_violations: list[CapViolation] = []
    frequency_steps: list[FrequencyStep] = []
    drift_events: list[DriftEvent] = []
    replans: list[Replan] = []
    clock_clamps: list[ClockClamp] = []
    extra: dict[str, Any] = {}
    #: a moving cap's follower: its source's state, plan, segments and the run's clock
    cap: dict[str, Any] | None = None
    #: the random generators' states (torch CPU/CUDA, numpy, Python): see runtime.rng_state
    rng: dict[str, Any] | None = None


@dataclass
class Checkpoint:
    """Run state in one safetensors file: model and optimizer tensors, and the `SessionState`
    as JSON in its metadata, replaced atomically so a kill at any moment leaves a complete
    checkpoint."""

    folder: Path

    @property
    def path(self) -> Path:
        """The checkpoint file."""
        return self.folder / "checkpoint.safetensors"

    def exists(self) -> bool:
        """Whether a checkpoint was written."""
        return self.path.exists()

    def save(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None,
             state: SessionState) -> None:
        """Write model and optimizer tensors and the state (atomically)."""
        import torch
        from safetensors.torch import save_file

        tensors = {f"model.{k}": v.detach().to("cpu").clone().contiguous()
                   for k, v in model.state_dict().items()}
        param_groups: list = []
        if optimizer is not None:
            opt_state = optimizer.state_dict()
            for index, param_state in opt_state["state"].items():
                for key, value in param_state.items():
                    tensor = value if torch.is_tensor(value) else torch.tensor(value)
                    tensors[f"optim.{index}.{key}"] = tensor.detach().to("cpu").clone() \
                        .contiguous()
            param_groups = opt_state["param_groups"]
        metadata = {"state": state.model_dump_json(), "param_groups": json.dumps(param_groups)}
        with atomic_path(self.path) as tmp:  # synced: a kill or power loss keeps the last one
            save_file(tensors, str(tmp), metadata=metadata)

    def load(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None
             ) -> SessionState:
        """Load tensors into `model` and `optimizer` and return the state."""
        from pydantic import ValidationError
        from safetensors import SafetensorError, safe_open
        from safetensors.torch import load_file

        try:
            with safe_open(str(self.path), framework="pt") as handle:
                metadata = handle.metadata() or {}
            state = SessionState.model_validate_json(metadata["state"])
            param_groups = json.loads(metadata.get("param_groups", "[]"))
            tensors = load_file(str(self.path))
        except (OSError, ValueError, KeyError, SafetensorError, ValidationError) as err:
            raise WattcapFileError(
                f"{self.path}: unreadable checkpoint ({str(err).splitlines()[0]}); delete it "
                "to start the run afresh"
            ) from None
        device = next((p.device for p in model.parameters()), None)
        model.load_state_dict(
            {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
        )
        if optimizer is not None and param_groups:
            opt_state: dict = {"state": {}, "param_groups": param_groups}
            for key, value in tensors.items():
                if key.startswith("optim."):
                    _, index, name = key.split(".", 2)
                    if device is not None and name != "step":
                        value = value.to(device)
                    opt_state["state"].setdefault(int(index), {})[name] = value
            optimizer.load_state_dict(opt_state)
        return state
