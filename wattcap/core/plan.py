"""Plans: the configuration each method chooses for a cap, as a versioned file."""

from __future__ import annotations

import math
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from wattcap.core.errors import WattcapError
from wattcap.core.knob import KnobKind, format_knob
from wattcap.core.objective import FrontPoint, Objective
from wattcap.core.schema import Migration, VersionedFile, rename_key

METHODS = ("wattcap", "baseline-1", "baseline-2", "fastest")

class InfeasibleCapError(WattcapError, ValueError):
    """No configuration keeps the device under the power cap."""

    def __init__(self, cap_w: float, lowest_feasible_w: float, reason: str) -> None:
        self.cap_w = cap_w
        self.lowest_feasible_w = lowest_feasible_w
        # rounded up: a cap given as printed must be feasible (2.5712 W is "2.58", not "2.57")
        shown_w = math.ceil(lowest_feasible_w * 100 - 1e-6) / 100
        super().__init__(
            f"power cap {cap_w:.2f} W is infeasible: {reason}. The lowest feasible cap for this "
            f"profile is {shown_w:.2f} W."
        )

class Choice(BaseModel):
    """A selected configuration with its predictions."""

    model_config = ConfigDict(extra="forbid")
    method: str
    batch_size: int
    #: in the unit of the plan's knob kind (Plan.knob_kind)
    knob_value: int
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
    """`value` formatted with `spec` (or "sig": three significant digits, no exponent) and
    `suffix`, or `unknown` for a prediction that cannot be made."""
    if value is None:
        return unknown
    return (three_significant(value) if spec == "sig" else format(value, spec)) + suffix


def three_significant(value: float) -> str:
    """`value` to three significant digits, never in exponent form ('0.133', '7.20', '1234'):
    a datacenter GPU's predicted 0.13 s and a Jetson's 130 s both readable in one column."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    return f"{value:.{max(0, 2 - math.floor(math.log10(abs(value))))}f}"


def _knob_of_frequency(raw: dict[str, Any]) -> dict[str, Any]:
    """Schema 3 -> 4: a plan before knobs chose GPU clocks, in Hz."""
    raw["knob_kind"] = "gpu_clock"
    rename_key([raw], "safe_frequency_hz", "safe_knob_value")
    rename_key((raw.get("choices") or {}).values(), "frequency_hz", "knob_value")
    rename_key(raw.get("pareto_front"), "frequency_hz", "knob_value")
    return raw


class Plan(VersionedFile):
    """The outcome of planning: one choice per method, for one cap."""

    FILE_KIND = "wattcap.plan"
    #: 2: objective, pareto_front, Choice.on_pareto_front; 3: a choice's predictions may be
    #: unknown (None); 4: knobs (knob_kind; frequency_hz became knob_value, safe_frequency_hz
    #: safe_knob_value)
    SCHEMA_VERSION = 4
    MIGRATIONS: ClassVar[dict[int, Migration]] = {2: lambda raw: raw, 3: _knob_of_frequency}

    device: str
    model: str
    input_shape: list[int]
    power_cap_w: float | None
    efficiency_source: str | None
    #: the profile's knob: the unit of every choice's knob_value (wattcap.core.knob)
    knob_kind: KnobKind = "gpu_clock"
    #: the baselines' knob value: the highest value safe for every reference model (GPU clock),
    #: the cap itself (power limit, `nvidia-smi -pl CAP`), or None where none is safe
    safe_knob_value: int | None
    choices: dict[str, Choice]
    unavailable: dict[str, str] = {}
    notes: list[str] = []
    objective: Objective = Objective()
    #: feasible choices no other beats on both predicted time and energy (proxy r_b), by time
    pareto_front: list[FrontPoint] = []

    def describe_knob(self, value: int) -> str:
        """A knob value of this plan with its unit ('614.4 MHz', 'power limit 150 W')."""
        return format_knob(self.knob_kind, value)

    def speedup(self, baseline: str, method: str = "wattcap") -> float | None:
        """Predicted time of `baseline` ÷ time of `method`."""
        if baseline not in self.choices or method not in self.choices:
            return None
        numerator = self.choices[baseline].predicted_time_s
        denominator = self.choices[method].predicted_time_s
        return None if numerator is None or denominator is None else numerator / denominator
