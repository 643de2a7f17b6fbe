"""Objectives as records: what a plan minimises (time, energy, or their weighted cost) and its
constraint, and a point of the time/energy front."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from wattcap.core.errors import WattcapError
from wattcap.core.knob import format_knob
from wattcap.core.profile import ProfilePoint

ObjectiveName = Literal["time", "energy", "cost"]

OBJECTIVES: tuple[str, ...] = ("time", "energy", "cost")

class ObjectiveError(WattcapError, ValueError):
    """An objective that does not make sense (unknown name, η outside [0, 1], ...)."""

def _check(name: str, eta: float | None, max_energy_j: float | None,
           deadline_s: float | None, cost_power_w: float | None) -> None:
    if name not in OBJECTIVES:
        raise ObjectiveError(f"unknown objective {name!r}; expected one of {', '.join(OBJECTIVES)}")
    if name == "cost":
        if eta is None or not (math.isfinite(eta) and 0.0 <= eta <= 1.0):
            raise ObjectiveError(f"the cost objective needs eta in [0, 1] (weight of energy "
                                 f"against time), got {eta}")
    elif eta is not None:
        raise ObjectiveError(f"eta only applies to the cost objective, not {name!r}")
    if max_energy_j is not None:
        if name != "time":
            raise ObjectiveError("a maximum energy applies to the time objective only "
                                 "(energy with a deadline is the other way round)")
        if not (math.isfinite(max_energy_j) and max_energy_j > 0):
            raise ObjectiveError(f"the maximum energy must be > 0 J, got {max_energy_j}")
    if deadline_s is not None:
        if name != "energy":
            raise ObjectiveError("a deadline applies to the energy objective only "
                                 "(time with a maximum energy is the other way round)")
        if not (math.isfinite(deadline_s) and deadline_s > 0):
            raise ObjectiveError(f"the deadline must be > 0 s, got {deadline_s}")
    if cost_power_w is not None and name != "cost":
        raise ObjectiveError("a maximum power P_max applies to the cost objective only")
    if cost_power_w is not None and not (math.isfinite(cost_power_w) and cost_power_w > 0):
        raise ObjectiveError(f"the cost's P_max must be > 0 W, got {cost_power_w}")

class Objective(BaseModel):
    """What to minimise, with its constraint. The default is the paper's time objective."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: ObjectiveName = "time"
    eta: float | None = None
    max_energy_j: float | None = None
    deadline_s: float | None = None
    #: P_max of the cost (W); the planner fills in the profile's highest peak power
    cost_power_w: float | None = None

    @model_validator(mode="after")
    def _valid(self) -> Objective:
        _check(self.name, self.eta, self.max_energy_j, self.deadline_s, self.cost_power_w)
        return self

    @classmethod
    def of(cls, name: str = "time", *, eta: float | None = None,
           max_energy_j: float | None = None, deadline_s: float | None = None,
           cost_power_w: float | None = None) -> Objective:
        """Build from user input: a bad combination is one `ObjectiveError` line.
        `cost_power_w`: the cost's P_max (default: the profile's highest peak power)."""
        _check(name, eta, max_energy_j, deadline_s, cost_power_w)
        return cls(name=name, eta=eta, max_energy_j=max_energy_j,  # type: ignore[arg-type]
                   deadline_s=deadline_s, cost_power_w=cost_power_w)

    @property
    def is_paper_time(self) -> bool:
        """Plain time to target (Algorithm 1 answers it on the frontier alone)."""
        return self.name == "time" and self.max_energy_j is None

    def describe(self) -> str:
        """One line: 'time', 'energy within 300 s', 'cost (eta 0.5, P_max 9.8 W)', ..."""
        if self.name == "cost":
            power = f", P_max {self.cost_power_w:.2f} W" if self.cost_power_w else ""
            return f"cost (eta {self.eta:g}{power})"
        if self.max_energy_j is not None:
            return f"time with at most {self.max_energy_j:g} J"
        if self.deadline_s is not None:
            return f"energy within {self.deadline_s:g} s"
        return self.name

    def missed_by(self, time_s: float | None, energy_j: float | None) -> str | None:
        """How predictions break this objective's constraint ('predicted 2.03 s, over the
        deadline of 1.5 s'); None where they meet it, there is none, or they are unknown."""
        if self.deadline_s is not None and time_s is not None and time_s > self.deadline_s:
            return f"predicted {time_s:.3g} s, over the deadline of {self.deadline_s:g} s"
        if (self.max_energy_j is not None and energy_j is not None
                and energy_j > self.max_energy_j):
            return (f"predicted {energy_j:.3g} J, over the maximum energy of "
                    f"{self.max_energy_j:g} J")
        return None

    def missed_short(self, time_s: float | None, energy_j: float | None) -> str | None:
        """`missed_by` for a table cell: 'over the 1.5 s deadline', 'over the 6 J maximum'."""
        if self.missed_by(time_s, energy_j) is None:
            return None
        return (f"over the {self.deadline_s:g} s deadline" if self.deadline_s is not None
                else f"over the {self.max_energy_j:g} J maximum")

class FrontPoint(BaseModel):
    """One choice on the time/energy Pareto front: no feasible choice is both faster and
    thriftier."""

    model_config = ConfigDict(extra="forbid")
    batch_size: int
    #: in the unit of the plan's knob kind
    knob_value: int
    predicted_time_s: float
    predicted_energy_j: float
    peak_power_w: float
    avg_power_w: float

class InfeasibleObjectiveError(WattcapError, ValueError):
    """The cap leaves choices, but none meets the objective's constraint."""

    def __init__(self, objective: Objective, cap_w: float | None, best_value: float,
                 best_point: ProfilePoint, knob_kind: str = "gpu_clock") -> None:
        self.objective = objective
        self.cap_w = cap_w
        self.best_value = best_value
        under = "with no cap" if cap_w is None else f"under the {cap_w:.2f} W cap"
        at = f"b={best_point.batch_size} at {format_knob(knob_kind, best_point.knob_value)}"
        if objective.max_energy_j is not None:
            message = (f"no configuration {under} reaches the target with at most "
                       f"{objective.max_energy_j:g} J: the least energy achievable is "
                       f"{best_value:.1f} J ({at})")
        else:
            message = (f"no configuration {under} reaches the target within the deadline of "
                       f"{objective.deadline_s:g} s: the fastest achievable is {best_value:.1f} s "
                       f"({at})")
        super().__init__(message)
