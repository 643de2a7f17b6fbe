"""What the selection minimises (issue 19), always under the cap (peak power ≤ cap):

* `time` — the paper's objective: T(b, f) · r_b, the time to reach the target;
* `energy` — average power · time to target;
* `cost` — Zeus's cost η · E + (1 − η) · P_max · T (You et al., "Zeus", NSDI 2023), where
  P_max is a constant power that puts time in joules: Zeus uses the GPU's maximum power limit,
  the planner the highest peak power of the profile (`cost_power_w`), so η weighs the same
  under every cap;
* `time` with a maximum energy, `energy` with a deadline.

All come from the same profile (peak power for the cap, average power for energy) and the
same r_b. Predicted time to target is T(b, f) · samples(b) and energy that time · average power,
exactly as the planner's `Choice`. Energy may prefer a lower frequency than f*(b), so the search
is over every feasible (b, f), not only Algorithm 1's frontier: `CandidateSet` holds the points
as numpy arrays, built once per (profile, r_b), and each query is one vectorised scan of the
~72 points.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator

from wattcap.profiling import ProfilePoint

ObjectiveName = Literal["time", "energy", "cost"]
OBJECTIVES: tuple[str, ...] = ("time", "energy", "cost")


class ObjectiveError(ValueError):
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
           max_energy_j: float | None = None, deadline_s: float | None = None) -> Objective:
        """Build from user input: a bad combination is one `ObjectiveError` line."""
        _check(name, eta, max_energy_j, deadline_s, None)
        return cls(name=name, eta=eta, max_energy_j=max_energy_j,  # type: ignore[arg-type]
                   deadline_s=deadline_s)

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


class FrontPoint(BaseModel):
    """One choice on the time/energy Pareto front: no feasible choice is both faster and
    thriftier."""

    model_config = ConfigDict(extra="forbid")
    batch_size: int
    frequency_hz: int
    predicted_time_s: float
    predicted_energy_j: float
    peak_power_w: float
    avg_power_w: float


class InfeasibleObjectiveError(ValueError):
    """The cap leaves choices, but none meets the objective's constraint."""

    def __init__(self, objective: Objective, cap_w: float | None, best_value: float,
                 best_point: ProfilePoint) -> None:
        self.objective = objective
        self.cap_w = cap_w
        self.best_value = best_value
        under = "with no cap" if cap_w is None else f"under the {cap_w:.2f} W cap"
        at = f"b={best_point.batch_size} at {best_point.frequency_hz / 1e6:.1f} MHz"
        if objective.max_energy_j is not None:
            message = (f"no configuration {under} reaches the target with at most "
                       f"{objective.max_energy_j:g} J: the least energy achievable is "
                       f"{best_value:.1f} J ({at})")
        else:
            message = (f"no configuration {under} reaches the target within the deadline of "
                       f"{objective.deadline_s:g} s: the fastest achievable is {best_value:.1f} s "
                       f"({at})")
        super().__init__(message)


class CandidateSet:
    """Every measured (b, f) whose r_b is known, with its predicted time and energy to target.

    `ratios` is r_b (None: never chosen), `samples` the samples to target per batch size, as the
    planner's `_ratios` gives them.
    """

    def __init__(self, points: list[ProfilePoint], ratios: dict[int, float | None],
                 samples: dict[int, float]) -> None:
        kept = [p for p in points if ratios.get(p.batch_size) is not None]
        self.points = kept
        self.batch_size = np.array([p.batch_size for p in kept], dtype=float)
        self.frequency_hz = np.array([p.frequency_hz for p in kept], dtype=float)
        self.peak_power_w = np.array([p.peak_power_w for p in kept], dtype=float)
        self.avg_power_w = np.array([p.avg_power_w for p in kept], dtype=float)
        spp = np.array([p.seconds_per_sample for p in kept], dtype=float)
        ratio = np.array([ratios[p.batch_size] for p in kept], dtype=float)
        count = np.array([samples[p.batch_size] for p in kept], dtype=float)
        #: the paper's objective T(b, f) · r_b, as Algorithm 1 computes it
        self.time_key = spp * ratio
        #: predicted time and energy to target, as `Choice` computes them
        self.time_s = spp * count
        self.energy_j = self.time_s * self.avg_power_w

    def feasible(self, cap_w: float | None, frequency_hz: int | None = None) -> np.ndarray:
        """Mask of the points under the cap (and at one frequency, if given)."""
        mask = np.ones(len(self.points), dtype=bool)
        if cap_w is not None:
            mask &= self.peak_power_w <= cap_w
        if frequency_hz is not None:
            mask &= self.frequency_hz == frequency_hz
        return mask

    def values(self, objective: Objective) -> np.ndarray:
        """The quantity the objective minimises, per point."""
        if objective.name == "time":
            return self.time_key
        if objective.name == "energy":
            return self.energy_j
        assert objective.eta is not None
        if objective.cost_power_w is None:
            raise ObjectiveError("the cost objective needs its P_max (cost_power_w) set")
        eta = objective.eta
        return eta * self.energy_j + (1.0 - eta) * objective.cost_power_w * self.time_s

    def best(self, objective: Objective, cap_w: float | None,
             frequency_hz: int | None = None) -> ProfilePoint | None:
        """The feasible point minimising the objective; None when nothing is under the cap.

        Ties: the faster, then the larger b, then the higher f (Algorithm 1's choice for time).
        Raises `InfeasibleObjectiveError` when points are under the cap but none meets the
        maximum energy or the deadline.
        """
        mask = self.feasible(cap_w, frequency_hz)
        if not mask.any():
            return None
        if objective.max_energy_j is not None or objective.deadline_s is not None:
            if objective.max_energy_j is not None:
                limit, achieved = objective.max_energy_j, self.energy_j
            else:
                assert objective.deadline_s is not None
                limit, achieved = objective.deadline_s, self.time_s
            meets = mask & (achieved <= limit)
            if not meets.any():
                index = self._argmin(np.flatnonzero(mask), achieved, self.time_key)
                raise InfeasibleObjectiveError(objective, cap_w, float(achieved[index]),
                                               self.points[index])
            mask = meets
        index = self._argmin(np.flatnonzero(mask), self.values(objective), self.time_key)
        return self.points[index]

    def _argmin(self, indices: np.ndarray, primary: np.ndarray, secondary: np.ndarray) -> int:
        # lexsort: the last key sorts first
        order = np.lexsort((-self.frequency_hz[indices], -self.batch_size[indices],
                            secondary[indices], primary[indices]))
        return int(indices[order[0]])

    def pareto_front(self, cap_w: float | None) -> list[FrontPoint]:
        """The feasible points no other feasible point beats on both time and energy, in order
        of increasing time (decreasing energy). Equal (time, energy) points appear once."""
        indices = np.flatnonzero(self.feasible(cap_w))
        order = indices[np.lexsort((self.energy_j[indices], self.time_s[indices]))]
        front: list[FrontPoint] = []
        lowest_j = math.inf
        for i in order:
            if self.energy_j[i] < lowest_j:
                lowest_j = float(self.energy_j[i])
                point = self.points[i]
                front.append(FrontPoint(
                    batch_size=point.batch_size,
                    frequency_hz=point.frequency_hz,
                    predicted_time_s=float(self.time_s[i]),
                    predicted_energy_j=float(self.energy_j[i]),
                    peak_power_w=point.peak_power_w,
                    avg_power_w=point.avg_power_w,
                ))
        return front


__all__ = [
    "OBJECTIVES",
    "CandidateSet",
    "FrontPoint",
    "InfeasibleObjectiveError",
    "Objective",
    "ObjectiveError",
    "ObjectiveName",
]
