"""Choosing the configuration for a cap (a moving cap's follower asks at every change): the
batch size and frequency its policy picks from the profile, and the lowest cap anything meets.

On a finite energy store (a battery: the follower passes an `EnergyBudget`), the time
objective is time subject to the predicted energy of the rest of the run fitting in the energy
left (`wattcap.algorithms.energy_budget`): where the plain time choice would need more, the
fastest configuration that fits is taken instead, and where none fits, the one that needs the
least. `ConfigChooser.energy_rule` says what the rule did at the last choice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from wattcap.algorithms.energy_budget import EnergyBudget, fastest_within_energy
from wattcap.algorithms.objectives import CandidateSet
from wattcap.algorithms.planner import Replanner, safe_knob_value, with_power_margin
from wattcap.core.defaults import DEFAULT_MARGIN_SIGMAS
from wattcap.core.knob import require_clock
from wattcap.core.objective import InfeasibleObjectiveError, Objective
from wattcap.core.plan import InfeasibleCapError

if TYPE_CHECKING:
    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.core.profile import ProfileTable


#: how a run follows its cap:
#: replan — wattcap: batch size and frequency re-selected (Algorithm 1, or the objective);
#: frequency — the batch size stays (a framework's dataloader), f re-selected for it;
#: safe-frequency — baseline-1/2: the batch size stays, f is the safe frequency for the cap;
#: fixed — nothing re-selected: the run's (b, f), paused while the cap is below its power
CapPolicy = Literal["replan", "frequency", "safe-frequency", "fixed"]
CAP_POLICIES: tuple[str, ...] = ("replan", "frequency", "safe-frequency", "fixed")


@dataclass(frozen=True)
class Target:
    """A configuration the follower wants: batch size and frequency."""

    batch_size: int
    frequency_hz: int

    def describe(self) -> str:
        """'b=32 at 614.4 MHz'."""
        return f"b={self.batch_size} at {self.frequency_hz / 1e6:.1f} MHz"


@dataclass(frozen=True)
class EnergyRule:
    """What the energy rule did at a choice: the plain time choice (`plain`) would need
    `plain_rest_j` for the rest of the run, more than the `energy_left_j` the store has, so
    `chosen` (`chosen_rest_j`) was taken: the fastest that fits (`fits`), else the one that
    needs the least."""

    energy_left_j: float
    plain: Target
    plain_rest_j: float
    chosen: Target
    chosen_rest_j: float
    fits: bool

    def describe(self) -> str:
        """One line for the run's events."""
        text = (f"energy left {self.energy_left_j:.1f} J: {self.plain.describe()} would need "
                f"{self.plain_rest_j:.1f} J for the rest of the run")
        if self.fits:
            return f"{text}, {self.chosen.describe()} fits ({self.chosen_rest_j:.1f} J)"
        return (f"{text}; no configuration fits, the least energy is "
                f"{self.chosen.describe()} ({self.chosen_rest_j:.1f} J)")


class ConfigChooser:
    """The configuration for any cap under one policy (see `CapPolicy`), from one profile.

    Every policy keeps the planner's margin below the cap (`margin_sigmas` standard
    deviations of the profiled sensor noise on every peak, the references' included).
    Under "replan", a batch-size change must promise at least `switch_margin` (5 %) on the
    objective over the best frequency for the batch size in use: near a threshold of the
    profile a cap that creeps (a battery, the morning sun) would otherwise flip the batch size
    (and its learning rate) every period for a gain within the profile's noise. Frequencies
    change freely: they cost nothing to the training.

    Under "replan" and "frequency" with the time objective, an `EnergyBudget` makes the choice
    respect the energy left (see the module docstring; the batch size in use is kept as above
    when both fit). The baselines' policies ("safe-frequency", "fixed") and the other
    objectives ignore it.
    """

    def __init__(
        self,
        profile: ProfileTable,
        policy: CapPolicy,
        batch_size: int,
        frequency_hz: int | None,
        efficiency: EfficiencyVector | None = None,
        objective: Objective | None = None,
        reference_profiles: list[ProfileTable] | None = None,
        switch_margin: float = 0.05,
        margin_sigmas: float = DEFAULT_MARGIN_SIGMAS,
        risk: float | None = None,
        transfer_factor: float | None = None,
    ) -> None:
        if policy not in CAP_POLICIES:
            raise ValueError(f"unknown cap policy {policy!r}; expected one of "
                             f"{', '.join(CAP_POLICIES)}")
        require_clock(profile.knob_kind, "following a moving cap")
        self.measured_profile = profile
        self.margin_sigmas = margin_sigmas
        #: the peaks the cap is compared with: measured peak + the margin
        self.profile = with_power_margin(profile, margin_sigmas)
        self.policy = policy
        self.batch_size = batch_size
        self.frequency_hz = frequency_hz
        self.efficiency = efficiency
        self.objective = objective or Objective()
        self.references = [with_power_margin(r, margin_sigmas)
                           for r in (reference_profiles or [profile])]
        self.reference_profiles = reference_profiles
        self.switch_margin = switch_margin
        self.risk = risk
        self.transfer_factor = transfer_factor
        self.replanner = Replanner(profile, efficiency, self.objective, margin_sigmas,
                                   risk=risk, transfer_factor=transfer_factor)
        candidates = self.replanner.candidates
        scores = candidates.time_key if self.objective.is_paper_time else \
            candidates.values(self.replanner.objective)
        self._score = {(p.batch_size, p.knob_value): float(v)
                       for p, v in zip(candidates.points, scores, strict=True)}
        self._energy_j = {(p.batch_size, p.knob_value): float(e)
                          for p, e in zip(candidates.points, candidates.energy_j, strict=True)}
        #: what the energy rule did at the last `choose` (None: it did not bind)
        self.energy_rule: EnergyRule | None = None
        self.frequencies_hz = sorted(profile.knob_values)
        self.notes: list[str] = []
        self._rows: dict[tuple[int, bool], CandidateSet] = {}
        self.lowest_cap_w = self._lowest_cap_w()

    def with_profile(self, profile: ProfileTable) -> ConfigChooser:
        """The same policy over another profile (re-measured points after drift)."""
        return ConfigChooser(profile, self.policy, self.batch_size, self.frequency_hz,
                             self.efficiency, self.objective, self.reference_profiles,
                             self.switch_margin, self.margin_sigmas, self.risk,
                             self.transfer_factor)

    def with_efficiency(self, efficiency: EfficiencyVector | None,
                        transfer_factor: float | None) -> ConfigChooser:
        """The same policy with another r_b and transfer factor (an online correction: r_b
        moved by the target's evidence, the factor narrowed to what it leaves uncertain)."""
        return ConfigChooser(self.measured_profile, self.policy, self.batch_size,
                             self.frequency_hz, efficiency, self.objective,
                             self.reference_profiles, self.switch_margin, self.margin_sigmas,
                             self.risk, transfer_factor)

    def highest_under(self, batch_size: int, cap_w: float | None) -> int | None:
        """f*(b): the highest frequency of b's row under the cap, None when none is."""
        point = self.replanner.selector.frontier(cap_w).get(batch_size)
        return point.knob_value if point is not None else None

    def least_overdraw_hz(self, batch_size: int, cap_w: float) -> int | None:
        """For a step that must finish under a cap nothing meets: the frequency of b's row that
        draws the least energy above the cap per sample ((peak - cap) x time per sample)."""
        row = [p for p in self.measured_profile.points if p.batch_size == batch_size]
        if not row:
            return None
        best = min(row, key=lambda p: (max(p.peak_power_w - cap_w, 0.0) * p.seconds_per_sample,
                                       p.knob_value))
        return best.knob_value

    def choose(self, cap_w: float | None, batch_size: int,
               budget: EnergyBudget | None = None) -> Target | None:
        """The configuration for the cap (`batch_size`: the one in use now, kept by every
        policy but replan); None when nothing under this policy fits (pause). With `budget`
        (a finite energy store), the energy rule of the module docstring; `energy_rule` says
        whether it bound."""
        self.energy_rule = None
        plain = self._plain_choice(cap_w, batch_size)
        limit_j = self._energy_limit_j(budget)
        if plain is None or limit_j is None or budget is None:
            return plain
        plain_j = self._energy_j.get((plain.batch_size, plain.frequency_hz))
        if plain_j is None or plain_j <= limit_j:
            return plain
        found = self._within_energy(cap_w, batch_size, limit_j)
        if found is None:
            return plain
        chosen, fits = found
        share = budget.rest_share(self.replanner.samples)
        self.energy_rule = EnergyRule(
            energy_left_j=budget.energy_left_j, plain=plain, plain_rest_j=plain_j * share,
            chosen=chosen, chosen_rest_j=self.rest_energy_j(chosen, budget) or 0.0, fits=fits)
        return chosen

    def rest_energy_j(self, target: Target, budget: EnergyBudget) -> float | None:
        """The predicted energy of the rest of the run on `target` (its energy to target times
        the share of the run still to go), J; None where it has no prediction."""
        energy_j = self._energy_j.get((target.batch_size, target.frequency_hz))
        return None if energy_j is None else energy_j * budget.rest_share(self.replanner.samples)

    @property
    def uses_energy_budget(self) -> bool:
        """Whether an `EnergyBudget` can change this chooser's choices: the time objective
        under "replan" or "frequency"."""
        return self.policy in ("replan", "frequency") and self.objective.name == "time"

    def _energy_limit_j(self, budget: EnergyBudget | None) -> float | None:
        """The largest energy to target the budget allows a configuration (None: no limit,
        or the rule does not apply to this policy or objective)."""
        if budget is None or not self.uses_energy_budget:
            return None
        return budget.max_energy_to_target_j(self.replanner.samples)

    def _within_energy(self, cap_w: float | None, batch_size: int,
                       limit_j: float) -> tuple[Target, bool] | None:
        """The fastest configuration under the cap whose energy to target is within `limit_j`
        (and the user's maximum energy, if any), True; else the least energy, False. Under
        "frequency" within the batch size in use; under "replan" a batch-size change must
        promise `switch_margin` over the batch size in use, where both fit."""
        limit_j = self._with_users_limit(limit_j)
        if self.policy == "frequency":
            return self._row_within(batch_size, cap_w, limit_j)
        found = fastest_within_energy(self.replanner.candidates, cap_w, limit_j,
                                      self.profile.knob_kind)
        if found is None:
            return None
        target = Target(found[0].batch_size, found[0].knob_value)
        if found[1] and target.batch_size != batch_size and self.switch_margin > 0:
            keep = self._row_within(batch_size, cap_w, limit_j)
            if keep is not None and keep[1] and self._score[(
                    target.batch_size, target.frequency_hz)] > self._score[(
                    keep[0].batch_size, keep[0].frequency_hz)] * (1 - self.switch_margin):
                return keep
        return target, found[1]

    def _with_users_limit(self, limit_j: float) -> float:
        """The budget's limit, or the objective's maximum energy where that is lower."""
        if self.objective.max_energy_j is not None:
            return min(limit_j, self.objective.max_energy_j)
        return limit_j

    def _row_within(self, batch_size: int, cap_w: float | None,
                    limit_j: float) -> tuple[Target, bool] | None:
        """`_within_energy` over the batch size's row alone."""
        found = fastest_within_energy(self._row(batch_size, True), cap_w, limit_j,
                                      self.profile.knob_kind)
        if found is None:
            return None
        return Target(batch_size, found[0].knob_value), found[1]

    def _plain_choice(self, cap_w: float | None, batch_size: int) -> Target | None:
        """`choose` without an energy budget."""
        if self.policy == "replan":
            target = self._replan(cap_w)
            if target is None or target.batch_size == batch_size or self.switch_margin <= 0 \
                    or self.replanner.transfer is not None:
                # (the transfer rule's choice need not be the nominally fastest: the margin
                # on nominal time would keep a batch size that rule left)
                return target
            keep = self._best_in_row(batch_size, cap_w)
            new_score = self._score.get((target.batch_size, target.frequency_hz))
            keep_score = None if keep is None else \
                self._score.get((keep.batch_size, keep.frequency_hz))
            if new_score is not None and keep_score is not None and \
                    new_score > keep_score * (1 - self.switch_margin):
                return keep
            return target
        if self.policy == "frequency":
            return self._best_in_row(batch_size, cap_w)
        if self.policy == "safe-frequency":
            safe_hz = safe_knob_value(self.references, cap_w, self.frequencies_hz)
            if safe_hz is None:
                return None
            point = self.profile.lookup(batch_size, safe_hz)
            if point is None or (cap_w is not None and point.peak_power_w > cap_w):
                return None
            return Target(batch_size, safe_hz)
        assert self.frequency_hz is not None
        point = self.profile.lookup(self.batch_size, self.frequency_hz)
        if cap_w is not None and (point is None or point.peak_power_w > cap_w):
            return None
        return Target(self.batch_size, self.frequency_hz)

    def _replan(self, cap_w: float | None) -> Target | None:
        try:
            choice = self.replanner.choose(cap_w)
        except InfeasibleCapError:
            return None
        except InfeasibleObjectiveError as err:
            fallback = Replanner(self.measured_profile, self.efficiency,
                                 margin_sigmas=self.margin_sigmas, risk=self.risk)
            self._note(f"{err}; choosing for time alone under this cap")
            try:
                choice = fallback.choose(cap_w)
            except InfeasibleCapError:
                return None
        return Target(choice.batch_size, choice.knob_value)

    def best_for_batch_size(self, batch_size: int, cap_w: float | None,
                            budget: EnergyBudget | None = None) -> Target | None:
        """The best frequency for `batch_size` under the cap (None: none meets it). With
        `budget`, the fastest whose rest-of-run energy fits the energy left; None when none of
        the row's does but another batch size's would (the energy left is obeyed as a cap
        is), the row's least energy when nothing fits anywhere."""
        plain = self._best_in_row(batch_size, cap_w)
        limit_j = self._energy_limit_j(budget)
        if plain is None or limit_j is None:
            return plain
        plain_j = self._energy_j.get((plain.batch_size, plain.frequency_hz))
        if plain_j is None or plain_j <= limit_j:
            return plain
        limit_j = self._with_users_limit(limit_j)
        found = self._row_within(batch_size, cap_w, limit_j)
        if found is None or found[1]:
            return None if found is None else found[0]
        anywhere = fastest_within_energy(self.replanner.candidates, cap_w, limit_j,
                                         self.profile.knob_kind)
        return None if anywhere is not None and anywhere[1] else found[0]

    def _best_in_row(self, batch_size: int, cap_w: float | None) -> Target | None:
        if self.objective.is_paper_time:
            frequency_hz = self.highest_under(batch_size, cap_w)
            return Target(batch_size, frequency_hz) if frequency_hz is not None else None
        for constrained in (True, False):
            row = self._row(batch_size, constrained)
            try:
                point = row.best(self.objective if constrained else Objective(), cap_w)
            except InfeasibleObjectiveError as err:
                self._note(f"{err}; choosing for time alone under this cap")
                continue
            return Target(batch_size, point.knob_value) if point is not None else None
        return None

    def _row(self, batch_size: int, constrained: bool) -> CandidateSet:
        key = (batch_size, constrained)
        if key not in self._rows:
            replanner = self.replanner
            self._rows[key] = CandidateSet(
                [p for p in self.profile.points if p.batch_size == batch_size],
                replanner.ratios, replanner.samples)
        return self._rows[key]

    def _lowest_cap_w(self) -> float:
        """The lowest cap under which `choose` finds a configuration: below it the run
        pauses."""
        levels = sorted({p.peak_power_w for table in [self.profile, *self.references]
                         for p in table.points})
        for cap_w in levels:
            if self.choose(cap_w, self.batch_size) is not None:
                return cap_w
        return float("inf")

    def _note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)
