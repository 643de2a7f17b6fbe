"""Selection (DESIGN §1): Algorithm 1, the two baselines and the fastest-configuration oracle.

Algorithm 1: for each batch size b, f*(b) = the highest frequency with P(b, f) ≤ cap; choose
argmin_b T(b, f*(b)) · r_b. Each row is reduced once to its Pareto staircase (descending f,
strictly falling power), on which f*(b) is a binary search: O(|B| log |F|) per query.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from wattcap.efficiency import EfficiencyVector
from wattcap.profiling import ProfilePoint, ProfileTable
from wattcap.schema import VersionedFile

METHODS = ("wattcap", "baseline-1", "baseline-2", "fastest")

#: samples a prediction is made for when no efficiency vector gives samples to target
DEFAULT_SAMPLES = 10_000


class InfeasibleCapError(ValueError):
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
    efficiency_ratio: float
    samples: float
    predicted_time_s: float
    predicted_energy_j: float


class Plan(VersionedFile):
    """The outcome of planning: one choice per method, for one cap."""

    FILE_KIND = "wattcap.plan"
    SCHEMA_VERSION = 1

    device: str
    model: str
    input_shape: list[int]
    power_cap_w: float | None
    efficiency_source: str | None
    safe_frequency_hz: int | None
    choices: dict[str, Choice]
    unavailable: dict[str, str] = {}
    notes: list[str] = []

    def speedup(self, baseline: str, method: str = "wattcap") -> float | None:
        """Predicted time of `baseline` ÷ time of `method`."""
        if baseline not in self.choices or method not in self.choices:
            return None
        return self.choices[baseline].predicted_time_s / self.choices[method].predicted_time_s


@dataclass
class _Staircase:
    """One row reduced to the points no higher frequency beats on power."""

    powers_w: list[float]  # ascending
    points: list[ProfilePoint]  # same order: highest frequency last... per power

    @classmethod
    def of(cls, row: list[ProfilePoint]) -> _Staircase:
        kept: list[ProfilePoint] = []
        lowest = float("inf")
        for point in sorted(row, key=lambda p: -p.frequency_hz):
            if point.peak_power_w < lowest:
                kept.append(point)
                lowest = point.peak_power_w
        kept.reverse()  # ascending power, ascending frequency
        return cls([p.peak_power_w for p in kept], kept)

    def highest_under(self, cap_w: float | None) -> ProfilePoint | None:
        if cap_w is None:
            return self.points[-1] if self.points else None
        index = bisect.bisect_right(self.powers_w, cap_w) - 1
        return self.points[index] if index >= 0 else None


class Selector:
    """Algorithm 1 over a profile: rows prepared once, each query O(|B| log |F|)."""

    def __init__(self, profile: ProfileTable) -> None:
        self.profile = profile
        self._rows = {b: _Staircase.of(row) for b, row in profile.rows().items()}

    def frontier(self, cap_w: float | None) -> dict[int, ProfilePoint]:
        """f*(b) for every batch size that has a feasible frequency."""
        result = {}
        for b, staircase in self._rows.items():
            point = staircase.highest_under(cap_w)
            if point is not None:
                result[b] = point
        return result

    def select(
        self, cap_w: float | None, ratios: dict[int, float | None]
    ) -> ProfilePoint | None:
        """argmin_b T(b, f*(b)) · r_b over batch sizes with a known ratio; ties: larger b."""
        best: ProfilePoint | None = None
        best_cost = float("inf")
        for b, point in self.frontier(cap_w).items():
            ratio = ratios.get(b)
            if ratio is None:
                continue
            cost = point.seconds_per_sample * ratio
            if cost < best_cost or (cost == best_cost and best is not None and b > best.batch_size):
                best, best_cost = point, cost
        return best

    def lowest_feasible_cap_w(self) -> float:
        """The lowest peak power of any measured point."""
        return min(p.peak_power_w for p in self.profile.points)


def safe_frequency_hz(
    reference_profiles: list[ProfileTable], cap_w: float | None, frequencies_hz: list[int]
) -> int | None:
    """Baseline frequency: the highest f keeping every reference model at every batch size under
    the cap (model-agnostic worst case). Points a profile did not measure count as unsafe unless
    a measured higher frequency of the same row is safe (power rises with f)."""
    if cap_w is None:
        return max(frequencies_hz)
    safe = None
    for f in sorted(frequencies_hz):
        ok = True
        for profile in reference_profiles:
            for row in profile.rows().values():
                measured = {p.frequency_hz: p.peak_power_w for p in row}
                if f in measured:
                    ok = measured[f] <= cap_w
                else:
                    higher = [w for fr, w in measured.items() if fr > f]
                    ok = bool(higher) and min(higher) <= cap_w
                if not ok:
                    break
            if not ok:
                break
        if ok:
            safe = f
        else:
            break
    return safe


def _ratios(
    profile: ProfileTable, efficiency: EfficiencyVector | None
) -> tuple[dict[int, float | None], dict[int, float]]:
    """r_b and samples-to-target per batch size (r = 1, DEFAULT_SAMPLES without a vector)."""
    if efficiency is None:
        return ({b: 1.0 for b in profile.batch_sizes},
                {b: float(DEFAULT_SAMPLES) for b in profile.batch_sizes})
    ratios = {b: efficiency.ratio(b) for b in profile.batch_sizes}
    samples = {b: efficiency.samples(b) or 0.0 for b in profile.batch_sizes}
    return ratios, samples


def _choice(method: str, point: ProfilePoint, ratio: float, samples: float) -> Choice:
    time_s = point.time_for_samples_s(samples)
    return Choice(
        method=method,
        batch_size=point.batch_size,
        frequency_hz=point.frequency_hz,
        seconds_per_sample=point.seconds_per_sample,
        peak_power_w=point.peak_power_w,
        avg_power_w=point.avg_power_w,
        efficiency_ratio=ratio,
        samples=samples,
        predicted_time_s=time_s,
        predicted_energy_j=time_s * point.avg_power_w,
    )


def plan(
    profile: ProfileTable,
    power_cap_w: float | None,
    efficiency: EfficiencyVector | None = None,
    reference_profiles: list[ProfileTable] | None = None,
    target_efficiency: EfficiencyVector | None = None,
) -> Plan:
    """Choose (b, f) for every method under a cap (None: no cap).

    `efficiency` is the proxy r (None: r_b = 1, pure throughput, and the plan says so);
    `reference_profiles` give the safe frequency of the baselines (default: this profile only);
    `target_efficiency` enables the fastest-configuration oracle.
    """
    notes: list[str] = []
    unavailable: dict[str, str] = {}
    if efficiency is not None:
        efficiency.check_matches(model=profile.model, input_shape=profile.input_shape,
                                 architecture_fingerprint=profile.architecture_fingerprint)
    if target_efficiency is not None:
        target_efficiency.check_matches(
            model=profile.model, input_shape=profile.input_shape,
            architecture_fingerprint=profile.architecture_fingerprint)
    if not profile.points:
        raise ValueError("the profile has no measured points")
    selector = Selector(profile)
    lowest = selector.lowest_feasible_cap_w()
    if power_cap_w is not None and power_cap_w < lowest:
        raise InfeasibleCapError(
            power_cap_w, lowest, "every measured configuration draws more than that"
        )
    if power_cap_w is not None and profile.mode == "pruned" and profile.power_cap_w is not None:
        if power_cap_w > profile.power_cap_w:
            notes.append(
                f"the profile was pruned for a cap of {profile.power_cap_w:.2f} W; points above "
                "it were not measured, so higher frequencies may be missed at this cap"
            )

    ratios, samples = _ratios(profile, efficiency)
    if efficiency is None:
        notes.append(
            "no efficiency vector: assuming r_b = 1 for every batch size (pure throughput); "
            f"times are for {DEFAULT_SAMPLES} samples"
        )
    else:
        skipped = [b for b, r in ratios.items() if r is None]
        if skipped:
            notes.append(f"batch sizes never selected (target not reached on proxy): {skipped}")

    choices: dict[str, Choice] = {}
    best = selector.select(power_cap_w, ratios)
    if best is None:
        raise InfeasibleCapError(
            power_cap_w or 0.0, lowest, "no batch size with a known efficiency fits under it"
        )
    b = best.batch_size
    choices["wattcap"] = _choice("wattcap", best, ratios[b] or 1.0, samples[b])

    references = reference_profiles or [profile]
    if reference_profiles is None:
        notes.append("no reference profiles: the safe frequency is computed from this model only")
    f_safe = safe_frequency_hz(references, power_cap_w, profile.frequencies_hz)
    if f_safe is None:
        reason = "no frequency keeps every reference model under the cap"
        unavailable["baseline-1"] = unavailable["baseline-2"] = reason
    else:
        b_max = profile.max_batch_size
        point = profile.lookup(b_max, f_safe) if b_max is not None else None
        if point is None or (power_cap_w is not None and point.peak_power_w > power_cap_w):
            unavailable["baseline-1"] = (
                f"b={b_max} at the safe frequency {f_safe / 1e6:.1f} MHz was not measured or "
                "exceeds the cap"
            )
        else:
            choices["baseline-1"] = _choice("baseline-1", point, ratios.get(b_max) or 1.0,
                                            samples[b_max])
        candidates = []
        for bs in profile.batch_sizes:
            p = profile.lookup(bs, f_safe)
            r = ratios.get(bs)
            if p is None or r is None or (power_cap_w is not None and p.peak_power_w > power_cap_w):
                continue
            candidates.append((p.seconds_per_sample * r, -bs, p))
        if candidates:
            _, _, p2 = min(candidates, key=lambda c: (c[0], c[1]))
            choices["baseline-2"] = _choice("baseline-2", p2, ratios[p2.batch_size] or 1.0,
                                            samples[p2.batch_size])
        else:
            unavailable["baseline-2"] = "no measured batch size at the safe frequency"

    if target_efficiency is not None:
        target_ratios, target_samples = _ratios(profile, target_efficiency)
        oracle = selector.select(power_cap_w, target_ratios)
        if oracle is not None:
            ob = oracle.batch_size
            choices["fastest"] = _choice("fastest", oracle, target_ratios[ob] or 1.0,
                                         target_samples[ob])
    else:
        unavailable["fastest"] = "needs an efficiency vector measured on the target data"

    return Plan(
        device=profile.device,
        model=profile.model,
        input_shape=profile.input_shape,
        power_cap_w=power_cap_w,
        efficiency_source=efficiency.dataset if efficiency is not None else None,
        safe_frequency_hz=f_safe,
        choices=choices,
        unavailable=unavailable,
        notes=notes,
    )
