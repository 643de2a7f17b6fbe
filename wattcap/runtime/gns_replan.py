"""r_b measured on the device, from the target data, during the first part of a run: the
Session's `efficiency="gns"` (or a `GnsSettings`).

The run starts with the plan for r_b = 1 (pure throughput, usually a large batch: what the
noise scale is best measured with) or with the batch size given. For its first
`GnsSettings.samples` samples every step's gradient is taken in `chunks` parts
(`wattcap.runtime.noise_scale.GradientNoiseScale`); then r(b) = (1 + b/B_noise)/(1 + b_max/B_noise)
over
the profile's batch sizes gives a GNS efficiency vector, Algorithm 1 re-plans with it, and the
run goes on at the new batch size and frequency: the learning rate re-scaled by the √ rule,
the optimiser's state (Adam's moments) kept.

A chunked step runs `chunks` forward and backward passes of b/chunks samples: on real hardware
it takes longer than one pass of b, which the Session measures; the emulated device charges it
as one batch of b (it models a step's time from the batch's workload), so on the emulator the
measurement's own cost is not counted. Few chunks (4 by default) keep that overhead small.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wattcap.algorithms.noise_scale import DEFAULT_EMA_DECAY, gns_efficiency_vector
from wattcap.core.defaults import DEFAULT_MARGIN_SIGMAS
from wattcap.runtime.noise_scale import GradientNoiseScale, check_chunks

if TYPE_CHECKING:
    import torch

    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.core.plan import Choice
    from wattcap.core.profile import ProfileTable
    from wattcap.runtime.noise_scale import LossOf

#: samples measured on the device before the re-plan
DEFAULT_DEVICE_GNS_SAMPLES = 2048
#: parts a measured batch is split into (the small batch is b / chunks)
DEFAULT_DEVICE_GNS_CHUNKS = 4
#: measured steps below which the estimate is not trusted for a re-plan
MIN_MEASURED_STEPS = 4


@dataclass(frozen=True)
class GnsSettings:
    """How a Session measures the noise scale before it re-plans (see the module)."""

    samples: int = DEFAULT_DEVICE_GNS_SAMPLES
    chunks: int = DEFAULT_DEVICE_GNS_CHUNKS
    ema_decay: float = DEFAULT_EMA_DECAY

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError(f"the GNS measurement needs samples > 0, got {self.samples}")
        check_chunks(self.chunks)

    @classmethod
    def of(cls, value: Any) -> GnsSettings | None:
        """`value` as settings: a GnsSettings, "gns" (the defaults), else None."""
        if isinstance(value, GnsSettings):
            return value
        if isinstance(value, str) and value.strip().lower() == "gns":
            return cls()
        return None


class NoiseScaleReplan:
    """The measurement and the re-plan of one run (the Session's glue calls it)."""

    def __init__(self, settings: GnsSettings, profile: ProfileTable,
                 power_cap_w: float | None, method: str = "wattcap",
                 reference_profiles: list[ProfileTable] | None = None,
                 margin_sigmas: float = DEFAULT_MARGIN_SIGMAS) -> None:
        self.settings = settings
        self.profile = profile
        self.power_cap_w = power_cap_w
        self.method = method
        self.reference_profiles = reference_profiles
        self.margin_sigmas = margin_sigmas
        self.gns: GradientNoiseScale | None = None
        self.vector: EfficiencyVector | None = None
        self.choice: Choice | None = None

    @property
    def measuring(self) -> bool:
        """Still measuring (no re-plan yet)."""
        return self.vector is None

    def attach(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
               batch_size: int) -> None:
        """Start measuring with the run's model and optimiser at `batch_size`."""
        chunk = max(1, batch_size // self.settings.chunks)
        self.gns = GradientNoiseScale(model, optimizer, chunk, ema_decay=self.settings.ema_decay)

    def backward(self, loss_of: LossOf, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        """The step's backward: chunked and measured while measuring, else plain."""
        if self.gns is None or not self.measuring:
            loss_of(inputs, targets).backward()
            return
        self.gns.backward(loss_of, inputs, targets)

    def due(self, samples: int) -> bool:
        """The window is trained and enough steps were measured."""
        return (self.measuring and self.gns is not None and samples >= self.settings.samples
                and self.gns.tracker.steps >= MIN_MEASURED_STEPS)

    def replan(self, model: str, input_shape: list[int], dataset: str | None, task: str,
               lr_ref: float, batch_size_ref: int, optimizer: str = "adam") -> Choice:
        """The GNS vector over the profile's batch sizes and Algorithm 1's choice with it."""
        from wattcap.algorithms.planner import plan
        from wattcap.core.plan import InfeasibleCapError
        from wattcap.measure.references import reference_profiles_for

        assert self.gns is not None
        estimate = self.gns.estimate()
        self.vector = gns_efficiency_vector(
            estimate, self.profile.batch_sizes, model=model, input_shape=input_shape,
            dataset=dataset or "target", task=task, target_accuracy=0.0,
            target_accuracy_source="reached",
            target_accuracy_rule="measured on the device during the run's first samples",
            optimizer=optimizer, lr_ref=lr_ref, batch_size_ref=batch_size_ref)
        refs = self.reference_profiles if self.reference_profiles is not None else \
            reference_profiles_for(self.profile)
        try:
            result = plan(self.profile, self.power_cap_w, efficiency=self.vector,
                          reference_profiles=refs, margin_sigmas=self.margin_sigmas)
        except InfeasibleCapError as err:  # the first plan worked: the cap did not move
            raise ValueError(str(err)) from None
        if self.method not in result.choices:
            raise ValueError(f"{self.method} has no choice with the GNS vector: "
                             f"{result.unavailable.get(self.method, 'unknown method')}")
        self.choice = result.choices[self.method]
        return self.choice
