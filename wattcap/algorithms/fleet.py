"""Plans for a fleet of power-capped devices training one model by synchronous federated
averaging (the planning part; the federation runs in wattcap.experiments.federation).

Each round trains S samples in total, shared among the clients: client i trains s_i samples at
its batch size b_i and knob value k_i (one of its points feasible under its own cap), in
s_i · T_i(b_i, k_i) seconds, plus c_i seconds of communication; the round lasts as long as its
slowest client. The rounds to the target come from r_b: a sample trained at local batch size b
counts as in a single run at b, so the fleet needs N · r̄ / S rounds, with N the samples to
target at the reference batch size and r̄ = Σ s_i r_{b_i} / S the samples' mean r (a model, and
said to be one). The time to target is rounds × round time.

Methods, compared on the same fleet:
- uniform: every client its largest batch at its safe knob value (today's practice), S split
  equally;
- own: every client its own single-device wattcap choice (min T · r_b under its cap), S split
  equally;
- fleet: the (b_i, k_i) chosen together for the round, S split equally, or (`SplitPolicy`,
  where the fleet allows it) by speed, so that every client finishes together (water-filling:
  s_i = (τ - c_i) / T_i; a client whose link takes most of the round trains one batch, or
  sits the rounds out where that is allowed too); each client's choice improved in turn
  while the time to target falls (coordinate descent from both the own and the uniform
  choices, so it is never worse than either), then each client off the critical path moved to
  its least-energy point of the same batch size that still meets the round time (same time,
  less energy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from wattcap.core.profile import ProfilePoint

#: coordinate-descent sweeps over the clients, at most (each strictly lowers the time)
MAX_SWEEPS = 20


@dataclass(frozen=True)
class FleetClient:
    """One client as the planner sees it: its feasible points under its cap (margined by the
    caller), its communication time per round, and the two single-device choices."""

    name: str
    options: tuple[ProfilePoint, ...]
    comm_s: float
    #: the practice: the largest batch at the safe knob value
    uniform: ProfilePoint
    #: its own single-device wattcap choice (min T · r_b)
    own: ProfilePoint


@dataclass(frozen=True)
class ClientPlan:
    """What one client does each round."""

    name: str
    batch_size: int
    knob_value: int
    samples: float
    compute_s: float
    comm_s: float
    energy_j: float

    @property
    def busy_s(self) -> float:
        return self.compute_s + self.comm_s


@dataclass
class FleetPlan:
    """Every client's round and what the fleet takes to the target."""

    method: str
    clients: list[ClientPlan]
    #: clients that sit the rounds out (their communication alone is longer than a round)
    left_out: list[str] = field(default_factory=list)
    round_s: float = 0.0
    rounds: float = 0.0

    @property
    def time_s(self) -> float:
        """Time to target: rounds × round time."""
        return self.rounds * self.round_s

    @property
    def energy_j(self) -> float:
        """Training energy to target (computation only: idle and links are the caller's)."""
        return self.rounds * sum(c.energy_j for c in self.clients)


def _equal_split(chosen: Sequence[ProfilePoint], clients: Sequence[FleetClient],
                 total: float) -> list[float]:
    return [total / len(clients)] * len(clients)


def _water_filled(chosen: Sequence[ProfilePoint], clients: Sequence[FleetClient],
                  total: float, may_leave_out: bool = False) -> list[float]:
    """The split that makes every participating client finish at the same time τ:
    s_i = (τ - c_i) / T_i, Σ s_i = total. A client that would train less than one batch at τ
    (its link alone takes most of the round) trains nothing with `may_leave_out`, else one
    batch (its data stays in the average; the round waits for it)."""
    active = list(range(len(clients)))
    fixed: dict[int, float] = {}
    while True:
        rate = sum(1.0 / chosen[i].seconds_per_sample for i in active)
        left = total - sum(fixed.values())
        tau = (left + sum(clients[i].comm_s / chosen[i].seconds_per_sample
                          for i in active)) / rate
        floor = 0.0 if may_leave_out else 1.0
        out = [i for i in active if (tau - clients[i].comm_s) / chosen[i].seconds_per_sample
               < floor * chosen[i].batch_size]
        if not out or len(out) == len(active):
            break
        for i in out:
            fixed[i] = 0.0 if may_leave_out else float(chosen[i].batch_size)
        active = [i for i in active if i not in out]
    return [fixed[i] if i in fixed else max(0.0, (tau - clients[i].comm_s)
                                            / chosen[i].seconds_per_sample)
            for i in range(len(clients))]


def _evaluate(method: str, chosen: Sequence[ProfilePoint], clients: Sequence[FleetClient],
              split: Sequence[float], ratios: dict[int, float], samples_to_target: float,
              total: float) -> FleetPlan:
    plans, left_out = [], []
    for client, point, samples in zip(clients, chosen, split, strict=True):
        if samples <= 0:
            left_out.append(client.name)
            continue
        compute_s = samples * point.seconds_per_sample
        plans.append(ClientPlan(client.name, point.batch_size, point.knob_value, samples,
                                compute_s, client.comm_s, compute_s * point.avg_power_w))
    mean_ratio = sum(p.samples * ratios[p.batch_size] for p in plans) / total
    return FleetPlan(method, plans, left_out, max(p.busy_s for p in plans),
                     samples_to_target * mean_ratio / total)


@dataclass(frozen=True)
class SplitPolicy:
    """How the fleet plan may share a round's samples: equally (every client's data weighs the
    same in each round, as in the uniform and own plans), or also by speed (water-filling:
    faster clients train more, right where the clients hold alike data; measured, with shards
    of different labels it can keep the global model from its target), and then whether a
    client whose link takes most of a round may sit the rounds out."""

    by_speed: bool = False
    may_leave_out: bool = False


def _best_split(method: str, chosen: Sequence[ProfilePoint], clients: Sequence[FleetClient],
                ratios: dict[int, float], samples_to_target: float,
                total: float, policy: SplitPolicy) -> FleetPlan:
    """The better of the equal and (where the policy allows) the water-filled split."""
    splits = [_equal_split(chosen, clients, total)]
    if policy.by_speed:
        splits.append(_water_filled(chosen, clients, total, policy.may_leave_out))
    plans = [_evaluate(method, chosen, clients, split, ratios, samples_to_target, total)
             for split in splits]
    return min(plans, key=lambda p: p.time_s)


def _descend(start: list[ProfilePoint], clients: Sequence[FleetClient],
             ratios: dict[int, float], samples_to_target: float, total: float,
             policy: SplitPolicy) -> FleetPlan:
    """Coordinate descent on the clients' choices from `start`: each client in turn takes the
    option that lowers the fleet's time to target most, until no client can."""
    chosen = list(start)
    best = _best_split("fleet", chosen, clients, ratios, samples_to_target, total, policy)
    for _ in range(MAX_SWEEPS):
        improved = False
        for i, client in enumerate(clients):
            for option in client.options:
                if option.batch_size not in ratios or option == chosen[i]:
                    continue
                trial = chosen[:i] + [option] + chosen[i + 1:]
                plan = _best_split("fleet", trial, clients, ratios, samples_to_target, total,
                                   policy)
                if plan.time_s < best.time_s * (1 - 1e-12):
                    best, chosen, improved = plan, trial, True
        if not improved:
            break
    return best


def _slowed(plan: FleetPlan, clients: Sequence[FleetClient]) -> FleetPlan:
    """Each participating client at its least-energy point of the same batch size that still
    finishes within the round time: the fleet's time is unchanged, its energy falls."""
    by_name = {c.name: c for c in clients}
    slowed = []
    for c in plan.clients:
        same_b = [p for p in by_name[c.name].options if p.batch_size == c.batch_size
                  and c.samples * p.seconds_per_sample + c.comm_s <= plan.round_s * (1 + 1e-9)]
        point = min(same_b, key=lambda p: p.seconds_per_sample * p.avg_power_w)
        compute_s = c.samples * point.seconds_per_sample
        slowed.append(ClientPlan(c.name, c.batch_size, point.knob_value, c.samples, compute_s,
                                 c.comm_s, compute_s * point.avg_power_w))
    return FleetPlan(plan.method, slowed, plan.left_out, plan.round_s, plan.rounds)


def plan_fleet(clients: Sequence[FleetClient], ratios: dict[int, float],
               samples_per_round: float, samples_to_target: float,
               policy: SplitPolicy | None = None) -> dict[str, FleetPlan]:
    """The uniform, own and fleet plans of one fleet (module docstring). `ratios`: r_b of every
    batch size a client may choose (from the proxy); `samples_to_target`: N at the reference
    batch size; `policy`: how the fleet plan may split a round (`SplitPolicy`; default:
    equally). Raises ValueError for an empty fleet, a
    client with no feasible point or a batch size without r_b among the two single-device
    choices."""
    if not clients:
        raise ValueError("the fleet has no clients")
    if not samples_per_round > 0 or not samples_to_target > 0:
        raise ValueError("samples per round and samples to target must be positive")
    for client in clients:
        if not client.options:
            raise ValueError(f"client {client.name}: no configuration is feasible under its "
                             "cap (it sits the run out)")
        for point in (client.uniform, client.own):
            if point.batch_size not in ratios or not math.isfinite(ratios[point.batch_size]):
                raise ValueError(f"client {client.name}: no r_b for batch size "
                                 f"{point.batch_size}")
    uniform = [c.uniform for c in clients]
    own = [c.own for c in clients]
    plans = {
        "uniform": _evaluate("uniform", uniform, clients,
                             _equal_split(uniform, clients, samples_per_round), ratios,
                             samples_to_target, samples_per_round),
        "own": _evaluate("own", own, clients, _equal_split(own, clients, samples_per_round),
                         ratios, samples_to_target, samples_per_round),
    }
    policy = policy or SplitPolicy()
    fleet = min((_descend(start, clients, ratios, samples_to_target, samples_per_round, policy)
                 for start in (own, uniform)), key=lambda p: p.time_s)
    plans["fleet"] = _slowed(fleet, clients)
    return plans


__all__ = ["ClientPlan", "FleetClient", "FleetPlan", "SplitPolicy", "plan_fleet"]
