"""Choosing the configuration for a cap (a moving cap's follower asks at every change): the
batch size and frequency its policy picks from the profile, and the lowest cap anything meets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

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


class ConfigChooser:
    """The configuration for any cap under one policy (see `CapPolicy`), from one profile.

    Every policy keeps the planner's margin below the cap (`margin_sigmas` standard
    deviations of the profiled sensor noise on every peak, the references' included).
    Under "replan", a batch-size change must promise at least `switch_margin` (5 %) on the
    objective over the best frequency for the batch size in use: near a threshold of the
    profile a cap that creeps (a battery, the morning sun) would otherwise flip the batch size
    (and its learning rate) every period for a gain within the profile's noise. Frequencies
    change freely: they cost nothing to the training.
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

    def choose(self, cap_w: float | None, batch_size: int) -> Target | None:
        """The configuration for the cap (`batch_size`: the one in use now, kept by every
        policy but replan); None when nothing under this policy fits (pause)."""
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

    def best_for_batch_size(self, batch_size: int, cap_w: float | None) -> Target | None:
        """The best frequency for `batch_size` under the cap (None: none meets it)."""
        return self._best_in_row(batch_size, cap_w)

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
