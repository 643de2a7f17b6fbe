"""What the selection minimises, always under the cap (peak power ≤ cap):

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

import numpy as np

from wattcap.core.objective import (
    OBJECTIVES,
    FrontPoint,
    InfeasibleObjectiveError,
    Objective,
    ObjectiveError,
    ObjectiveName,
)
from wattcap.core.profile import ProfilePoint, moves_off_the_knee, tie_headroom, time_key


class CandidateSet:
    """Every measured (b, knob value) whose r_b is known, with its predicted time and energy to
    target.

    `ratios` is r_b (None: never chosen), `samples` the samples to target per batch size, as the
    planner's `_ratios` gives them.
    """

    def __init__(self, points: list[ProfilePoint], ratios: dict[int, float | None],
                 samples: dict[int, float]) -> None:
        kept = [p for p in points if ratios.get(p.batch_size) is not None]
        self.points = kept
        self.batch_size = np.array([p.batch_size for p in kept], dtype=float)
        self.knob_value = np.array([p.knob_value for p in kept], dtype=float)
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

    def feasible(self, cap_w: float | None, knob_value: int | None = None) -> np.ndarray:
        """Mask of the points under the cap (and at one knob value, if given)."""
        mask = np.ones(len(self.points), dtype=bool)
        if cap_w is not None:
            mask &= self.peak_power_w <= cap_w
        if knob_value is not None:
            mask &= self.knob_value == knob_value
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
             knob_value: int | None = None,
             knob_kind: str = "gpu_clock") -> ProfilePoint | None:
        """The feasible point minimising the objective; None when nothing is under the cap.

        Ties: the faster, then the larger b, then the lower peak power and knob value (a clock
        that buys no time, or a limit that does not bind, only spends power); for time, of
        equally fast points not the lowest (the knee) but one `HOST_BOUND_HEADROOM` above it,
        as `Staircase` chooses.
        `knob_kind` names the knob in errors.
        Raises `InfeasibleObjectiveError` when points are under the cap but none meets the
        maximum energy or the deadline.
        """
        mask = self.feasible(cap_w, knob_value)
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
                                               self.points[index], knob_kind)
            mask = meets
        index = self._argmin(np.flatnonzero(mask), self.values(objective), self.time_key)
        if objective.name == "time":
            index = self._off_the_knee(index, mask, tie_headroom(knob_kind))
        return self.points[index]

    def _off_the_knee(self, index: int, mask: np.ndarray, headroom: float) -> int:
        """Of the points of `index`'s batch size as fast as it (the lowest-power one), the one
        `Staircase` takes: the first at least `headroom` above its knob value, or the highest
        under the cap short of that."""
        knee = self.points[index]
        same = [i for i in np.flatnonzero(mask)
                if self.points[i].batch_size == knee.batch_size
                and time_key(float(self.time_key[i])) == time_key(float(self.time_key[index]))]
        best = knee
        for i in sorted(same, key=lambda i: (self.points[i].peak_power_w,
                                             self.points[i].knob_value)):
            point = self.points[i]
            if moves_off_the_knee(best, knee, point, headroom):
                best, index = point, int(i)
        return index

    def _argmin(self, indices: np.ndarray, primary: np.ndarray, secondary: np.ndarray) -> int:
        # of equal values: the larger batch, then the lowest peak power and knob value (as
        # fast, less power: as `Staircase` chooses)
        knob = self.knob_value[indices]
        peak_w = self.peak_power_w[indices]
        # lexsort: the last key sorts first; values equal but for float rounding are ties
        order = np.lexsort((knob, peak_w, -self.batch_size[indices], _keyed(secondary[indices]),
                            _keyed(primary[indices])))
        return int(indices[order[0]])

    def pareto_front(self, cap_w: float | None) -> list[FrontPoint]:
        """The feasible points no other feasible point beats on both time and energy, in order
        of increasing time (decreasing energy). Equal (time, energy) points appear once."""
        indices = np.flatnonzero(self.feasible(cap_w))
        energy_j = _keyed(self.energy_j[indices])
        order = np.lexsort((energy_j, _keyed(self.time_s[indices])))
        front: list[FrontPoint] = []
        lowest_j = math.inf
        for k in order:
            i = indices[k]
            if energy_j[k] < lowest_j:
                lowest_j = float(energy_j[k])
                point = self.points[i]
                front.append(FrontPoint(
                    batch_size=point.batch_size,
                    knob_value=point.knob_value,
                    predicted_time_s=float(self.time_s[i]),
                    predicted_energy_j=float(self.energy_j[i]),
                    peak_power_w=point.peak_power_w,
                    avg_power_w=point.avg_power_w,
                ))
        return front


def _keyed(values: np.ndarray) -> np.ndarray:
    """Values as compared: rounded to `time_key`'s significant digits."""
    return np.array([time_key(float(v)) for v in values], dtype=float)


__all__ = [
    "OBJECTIVES",
    "CandidateSet",
    "FrontPoint",
    "InfeasibleObjectiveError",
    "Objective",
    "ObjectiveError",
    "ObjectiveName",
]
