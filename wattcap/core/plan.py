"""Plans: the configuration each method chooses for a cap, as a versioned file."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from wattcap.core.errors import WattcapError
from wattcap.core.objective import FrontPoint, Objective
from wattcap.core.schema import Migration, VersionedFile

METHODS = ("wattcap", "baseline-1", "baseline-2", "fastest")

class InfeasibleCapError(WattcapError, ValueError):
    """No configuration keeps the device under the power cap."""

    def __init__(self, cap_w: float, lowest_feasible_w: float, reason: str) -> None:
        self.cap_w = cap_w
        self.lowest_feasible_w = lowest_feasible_w
        super().__init__(
            f"power cap {cap_w:.2f} W is infeasible: {reason}. The lowest feasible cap for this "
            f"profile is {lowest_feasible_w:.2f} W."
        )

class Choice(BaseModel):
    """A selected configuration with its predictions."""

    model_config = ConfigDict(extra="forbid")
    method: str
    batch_size: int
    frequency_hz: int
    seconds_per_sample: float
    peak_power_w: float
    avg_power_w: float
    #: r_b, samples to target and the predictions; None where the efficiency vector gives no
    #: r_b for the batch size (baseline-1's largest batch, outside what the proxy ran): the
    #: choice stands, only its time is unknown
    efficiency_ratio: float | None
    samples: float | None
    predicted_time_s: float | None
    predicted_energy_j: float | None
    #: on the plan's time/energy Pareto front (no feasible choice is faster and thriftier)
    on_pareto_front: bool = False

def format_known(value: float | None, spec: str, unknown: str = "unknown",
                 suffix: str = "") -> str:
    """`value` formatted with `spec` and `suffix`, or `unknown` for a prediction that cannot be
    made."""
    return unknown if value is None else format(value, spec) + suffix


class Plan(VersionedFile):
    """The outcome of planning: one choice per method, for one cap."""

    FILE_KIND = "wattcap.plan"
    #: 2: objective, pareto_front, Choice.on_pareto_front; 3: a choice's predictions may be
    #: unknown (None)
    SCHEMA_VERSION = 3
    MIGRATIONS: ClassVar[dict[int, Migration]] = {2: lambda raw: raw}

    device: str
    model: str
    input_shape: list[int]
    power_cap_w: float | None
    efficiency_source: str | None
    safe_frequency_hz: int | None
    choices: dict[str, Choice]
    unavailable: dict[str, str] = {}
    notes: list[str] = []
    objective: Objective = Objective()
    #: feasible choices no other beats on both predicted time and energy (proxy r_b), by time
    pareto_front: list[FrontPoint] = []

    def speedup(self, baseline: str, method: str = "wattcap") -> float | None:
        """Predicted time of `baseline` ÷ time of `method`."""
        if baseline not in self.choices or method not in self.choices:
            return None
        numerator = self.choices[baseline].predicted_time_s
        denominator = self.choices[method].predicted_time_s
        return None if numerator is None or denominator is None else numerator / denominator
