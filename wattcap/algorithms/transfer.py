"""A choice that holds when the proxy's critical batch size does not transfer to the target.

The proxy's r_b rests on its B_noise (the large-batch relation E(b) = E_min (1 + b/B_noise),
McCandlish et al. 2018). A target may have another: Shallue et al. 2019 measured the largest
useful batch size of one model differ between data sets. With a stated transfer factor K the
target's B_noise is taken to lie anywhere in [B/K, B·K] around the proxy's B, and each
scenario's r_b is the proxy's own r_b times the relation's shift,

    r_b(B') = r_b · [(B' + b)/(B' + b_ref)] / [(B + b)/(B + b_ref)],

so that the proxy's measured shape is kept and only the critical batch size moves. The
choice minimises the worst regret over the scenarios (Savage's minimax regret): for each
batch size at its best feasible knob value, T(b, f*(b))·r_b(B') over the best time any batch
size reaches in the same scenario, maximised over B'. It is the choice that stays closest to
the fastest whichever B' the target turns out to have; where the proxy is right it may cost a
little (that cost is the choice's regret at B' = B, reported beside it).

K is the user's statement of how far the target may lie from the proxy: no default is taken
from our own benches.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.profile import ProfilePoint

#: scenarios over log B' in [log B - log K, log B + log K], the proxy's own B in the middle
TRANSFER_GRID_POINTS = 9


@dataclass(frozen=True)
class RobustChoice:
    """The minimax-regret point and what it and the proxy's own choice risk."""

    point: ProfilePoint
    #: the choice's largest T/T(best) over the scenarios (1.0: best in every one)
    worst_regret: float
    #: its T/T(best) where the target's B_noise is the proxy's (the cost of hedging)
    regret_if_proxy_right: float
    #: the proxy's own choice (argmin T·r_b) and its largest T/T(best) over the scenarios
    nominal: ProfilePoint
    nominal_worst_regret: float


def check_factor(factor: float) -> None:
    """A transfer factor is a finite ratio >= 1 (1: the proxy's B_noise as it is)."""
    if not (math.isfinite(factor) and factor >= 1):
        raise ValueError(f"the transfer factor is a finite ratio >= 1, got {factor:g}")


def transfer_scenarios(
    ratios: Mapping[int, float | None], b_noise: float, reference_batch_size: int,
    factor: float, points: int = TRANSFER_GRID_POINTS,
) -> list[tuple[float, dict[int, float | None]]]:
    """(B', r_b under B') for B' log-spaced over [B/K, B·K] (odd `points`: B itself in the
    middle). A batch size without an r_b stays without one."""
    check_factor(factor)
    if b_noise <= 0:
        raise ValueError(f"B_noise must be positive, got {b_noise:g}")
    if points < 1 or points % 2 == 0:
        raise ValueError(f"an odd number of scenarios keeps B itself among them, got {points}")

    half = points // 2
    scenarios = []
    for i in range(-half, half + 1):
        b_prime = b_noise * factor ** (i / half) if half else b_noise
        scenarios.append((b_prime, shifted_ratios(ratios, b_noise, b_prime,
                                                  reference_batch_size)))
    return scenarios


def shifted_ratios(ratios: Mapping[int, float | None], b_noise: float, b_prime: float,
                   reference_batch_size: int) -> dict[int, float | None]:
    """The proxy's r_b where the target's B_noise is `b_prime` instead of its `b_noise`: each
    r_b times the relation's shift (see the module); None stays None."""
    return {b: None if r is None else r * relation_shift(b, b_noise, b_prime,
                                                          reference_batch_size)
            for b, r in ratios.items()}


def relation_shift(batch_size: int, b_noise: float, b_prime: float,
                   reference_batch_size: int) -> float:
    """[(B' + b)/(B' + b_ref)] / [(B + b)/(B + b_ref)]: how r_b moves when B becomes B'."""
    def relation(b_n: float) -> float:
        return (b_n + batch_size) / (b_n + reference_batch_size)

    return relation(b_prime) / relation(b_noise)


def minimax_regret_choice(
    frontier: Mapping[int, ProfilePoint],
    scenarios: list[tuple[float, dict[int, float | None]]],
) -> RobustChoice | None:
    """The frontier point (one per batch size: f*(b) under the cap) whose worst regret over
    `scenarios` is least; ties go to the smaller regret where the proxy is right, then the
    larger batch size (as Algorithm 1's ties do). None when no batch size has an r_b."""
    candidates = [b for b in frontier
                  if all(ratios.get(b) is not None for _, ratios in scenarios)]
    if not candidates or not scenarios:
        return None
    regrets: dict[int, list[float]] = {b: [] for b in candidates}
    for _, ratios in scenarios:
        cost = {b: frontier[b].seconds_per_sample * (ratios[b] or 1.0) for b in candidates}
        best = min(cost.values())
        for b in candidates:
            regrets[b].append(cost[b] / best)
    middle = len(scenarios) // 2

    def key(b: int) -> tuple[float, float, int]:
        return (_rounded(max(regrets[b])), _rounded(regrets[b][middle]), -b)

    chosen = min(candidates, key=key)
    nominal = min(candidates, key=lambda b: (_rounded(regrets[b][middle]), -b))
    return RobustChoice(point=frontier[chosen], worst_regret=max(regrets[chosen]),
                        regret_if_proxy_right=regrets[chosen][middle],
                        nominal=frontier[nominal],
                        nominal_worst_regret=max(regrets[nominal]))


def _rounded(regret: float) -> float:
    """Regrets compared to 1e-9: float noise in T·r_b must not break a tie."""
    return math.floor(regret * 1e9 + 0.5) / 1e9


def proxy_b_noise(efficiency: EfficiencyVector) -> float | None:
    """The proxy's B_noise the scenarios move: a noise-scale vector's, else its sweep's fit
    (also a poor one: only the centre of the scenarios is taken from it); None where neither
    gives one."""
    if efficiency.noise_scale is not None:
        return efficiency.noise_scale.b_noise
    return efficiency.fit.b_noise if efficiency.fit is not None else None


@dataclass(frozen=True)
class TransferRule:
    """Minimax regret over a target B_noise within a stated factor of the proxy's."""

    factor: float
    b_noise: float
    dataset: str
    scenarios: list[tuple[float, dict[int, float | None]]]

    @classmethod
    def of(cls, efficiency: EfficiencyVector | None, ratios: Mapping[int, float | None],
           factor: float | None) -> TransferRule | str | None:
        """The rule for `factor` over these r_b; None without a factor; a note (str) where the
        vector has no B_noise to move (the proxy's r_b is then used as it is)."""
        if factor is None:
            return None
        check_factor(factor)
        if efficiency is None:
            return "transfer factor ignored: no efficiency vector (r_b = 1 has no B_noise)"
        b_noise = proxy_b_noise(efficiency)
        if b_noise is None:
            return ("transfer factor ignored: the efficiency vector has no B_noise (no "
                    "large-batch fit, no noise scale) to move")
        return cls(factor=factor, b_noise=b_noise, dataset=efficiency.dataset,
                   scenarios=transfer_scenarios(ratios, b_noise,
                                                efficiency.reference_batch_size, factor))

    def choose(self, frontier: Mapping[int, ProfilePoint]) -> RobustChoice | None:
        """The minimax-regret point of the frontier (see `minimax_regret_choice`)."""
        return minimax_regret_choice(frontier, self.scenarios)

    def note(self, choice: RobustChoice) -> str:
        """What the rule chose and what each choice risks, in one line."""
        b, proxy_b = choice.point.batch_size, choice.nominal.batch_size
        span = (f"a target B_noise anywhere in [{self.b_noise / self.factor:.3g}, "
                f"{self.b_noise * self.factor:.3g}] (x/{self.factor:g} around the "
                f"{self.dataset} proxy's {self.b_noise:.3g}, --transfer-factor)")
        if (b, choice.point.knob_value) == (proxy_b, choice.nominal.knob_value):
            return (f"robust to {span}: the proxy's own choice b={b} is also the minimax-regret "
                    f"one, at most {_pct(choice.worst_regret)} slower than the best choice of "
                    "any such target (per the large-batch relation)")
        return (f"robust to {span}: b={b} (minimax regret: at most "
                f"{_pct(choice.worst_regret)} slower than the best choice of any such target; "
                f"{_pct(choice.regret_if_proxy_right)} slower where the proxy is right) instead "
                f"of the proxy's own b={proxy_b} (up to {_pct(choice.nominal_worst_regret)} "
                "slower)")


def _pct(regret: float) -> str:
    return f"{(regret - 1) * 100:.1f} %"
