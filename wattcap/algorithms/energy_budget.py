"""The time objective on a finite energy store (a battery): minimise time to the target subject
to the predicted energy of the rest of the run fitting in the energy the store has left.

The energy of the rest of the run on a configuration (b', f') is its predicted energy to
target, E(b', f') = T(b', f') · samples(b') · average power (`CandidateSet.energy_j`, with the
planner's samples to target: at the `risk` quantile of r_b where it plans on one), scaled by
the share of the run still to go:

    rest(b', f') = E(b', f') · max(0, 1 − n / samples(b))

where n is the number of samples trained so far and b the batch size in use. The share is an
approximation: it measures progress in samples of the batch size in use (samples trained at
other batch sizes count as if trained at b), and it assumes the rest of the run on b' needs
the same share of b''s samples to target as of b's. Once n passes samples(b) (the target is
later than predicted) the share is 0: nothing is left to predict, and the plain time choice
applies. rest ≤ left is E ≤ left / share: the time objective with a maximum energy to target
(`Objective.max_energy_j`), searched over every configuration under the cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from wattcap.algorithms.objectives import CandidateSet
from wattcap.core.objective import InfeasibleObjectiveError, Objective
from wattcap.core.profile import ProfilePoint


@dataclass(frozen=True)
class EnergyBudget:
    """What a run on a finite energy store has left: `energy_left_j` the store can still
    deliver to the device, `samples_done` trained so far, `batch_size` the one in use."""

    energy_left_j: float
    samples_done: float
    batch_size: int

    def rest_share(self, samples: dict[int, float]) -> float:
        """The share of the run still to go, 1 − n / samples(b in use), in [0, 1] (see the
        module docstring); 1 where the batch size in use has no prediction."""
        expected = samples.get(self.batch_size)
        if not expected or not math.isfinite(expected) or expected <= 0:
            return 1.0
        return min(max(1.0 - self.samples_done / expected, 0.0), 1.0)

    def max_energy_to_target_j(self, samples: dict[int, float]) -> float | None:
        """The largest predicted energy to target whose rest-of-run share fits in the energy
        left (left / share); None when nothing is left to predict (share 0: no limit)."""
        share = self.rest_share(samples)
        if share <= 0:
            return None
        return max(self.energy_left_j, 0.0) / share


def fastest_within_energy(candidates: CandidateSet, cap_w: float | None, max_energy_j: float,
                          knob_kind: str = "gpu_clock") -> tuple[ProfilePoint, bool] | None:
    """The point under the cap that minimises the time objective (T · r_b, ties as
    `CandidateSet.best`) among those whose predicted energy to target is at most
    `max_energy_j`, with True; where none is, the point with the least energy to target, with
    False; None when no point is under the cap."""
    if max_energy_j > 0 and math.isfinite(max_energy_j):
        try:
            point = candidates.best(Objective(name="time", max_energy_j=max_energy_j), cap_w,
                                    knob_kind=knob_kind)
        except InfeasibleObjectiveError:
            pass
        else:
            return None if point is None else (point, True)
    elif max_energy_j > 0:  # no finite limit: every point fits
        point = candidates.best(Objective(), cap_w, knob_kind=knob_kind)
        return None if point is None else (point, True)
    least = candidates.best(Objective(name="energy"), cap_w, knob_kind=knob_kind)
    return None if least is None else (least, False)


__all__ = ["EnergyBudget", "fastest_within_energy"]
