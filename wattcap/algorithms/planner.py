"""Selection (DESIGN §1): Algorithm 1, the two baselines and the fastest-configuration oracle.

Algorithm 1: for each batch size b, f*(b) = the highest frequency with P(b, f) ≤ cap; choose
argmin_b T(b, f*(b)) · r_b. Generalised to any knob (wattcap.core.knob) and to measured
tables: each row's best point under the cap is its fastest feasible one (time need not be
monotone in a power limit or a power mode, nor in a noisy or re-measured clock row), which is
Algorithm 1's f*(b) for the clock where time falls as the clock rises. Each row is reduced
once to its staircase (ascending power, the fastest point so far), on which the best point is
a binary search: O(|B| log |F|) per query.

Other objectives (energy, Zeus's cost, time with a maximum energy, energy with a deadline;
wattcap/objectives.py) search every feasible (b, knob value). The fastest-configuration oracle
is a brute force over every feasible (b, knob value) with the target's measured r_b. Every plan
records its objective and the time/energy Pareto front of the feasible choices, each method's
choice marked on it or not.
"""

from __future__ import annotations

import math

from wattcap.algorithms.efficiency import (
    doublings_outside,
    ratio_log_spread,
    ratios_for_batch_sizes,
)
from wattcap.algorithms.objectives import CandidateSet
from wattcap.algorithms.plan_notes import board_max_power_w, cap_does_not_bind, missed_constraints
from wattcap.algorithms.power_margin import (
    _raised_by_margin,
    averaging_gain,
    default_cost_power,
    monotone_peaks,
    with_power_margin,
)
from wattcap.algorithms.prediction_notes import held_by_prediction
from wattcap.algorithms.ratio_adjustments import at_risk, with_restarts
from wattcap.algorithms.transfer import TransferRule
from wattcap.core.defaults import DEFAULT_MARGIN_SIGMAS
from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.knob import knob_unit
from wattcap.core.objective import InfeasibleObjectiveError, Objective
from wattcap.core.plan import Choice, InfeasibleCapError, Plan
from wattcap.core.profile import ProfilePoint, ProfileTable, Staircase, tie_headroom, time_key

#: samples a prediction is made for when no efficiency vector gives samples to target
DEFAULT_SAMPLES = 10_000


class Selector:
    """Algorithm 1 over a profile: rows prepared once, each query O(|B| log |F|)."""

    def __init__(self, profile: ProfileTable) -> None:
        self.profile = profile
        self._rows = {b: Staircase.of(row, tie_headroom(profile.knob_kind))
                      for b, row in profile.rows().items()}

    def frontier(self, cap_w: float | None) -> dict[int, ProfilePoint]:
        """f*(b) (the row's best feasible point) for every batch size that has one."""
        result = {}
        for b, staircase in self._rows.items():
            point = staircase.best_under(cap_w)
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
            cost = time_key(point.seconds_per_sample * ratio)
            if cost < best_cost or (cost == best_cost and best is not None and b > best.batch_size):
                best, best_cost = point, cost
        return best

    def lowest_feasible_cap_w(self) -> float:
        """The lowest peak power of any measured point."""
        return min(p.peak_power_w for p in self.profile.points)


def safe_knob_value(
    reference_profiles: list[ProfileTable], cap_w: float | None, knob_values: list[int],
    knob_kind: str = "gpu_clock",
) -> int | None:
    """The baselines' knob value. GPU clock: the highest f keeping every reference model at
    every batch size under the cap (model-agnostic worst case); points a profile did not measure
    count as unsafe unless a measured higher frequency of the same row is safe (power rises
    with f). Power limit: the practice, `nvidia-smi -pl CAP`: the highest limit at or below the
    cap. Power mode: the mode keeping every reference under the cap whose points draw the most
    on average (the most powerful safe mode); a mode a reference did not measure is unsafe."""
    if cap_w is None:
        return max(knob_values)
    if knob_kind == "power_limit":
        under = [v for v in knob_values if knob_unit(knob_kind).shown(v) <= cap_w]
        return max(under) if under else None
    if knob_kind == "power_mode":
        return _most_powerful_safe_mode(reference_profiles, cap_w, knob_values)
    safe = None
    for f in sorted(knob_values):
        ok = True
        for profile in reference_profiles:
            for row in profile.rows().values():
                measured = {p.knob_value: p.peak_power_w for p in row}
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


def _most_powerful_safe_mode(reference_profiles: list[ProfileTable], cap_w: float,
                             modes: list[int]) -> int | None:
    """The power mode every reference measured under the cap at every batch size, of the
    highest mean peak power over the references' points (None: no mode is safe)."""
    best, best_w = None, -math.inf
    rows = [row for profile in reference_profiles for row in profile.rows().values()]
    for mode in modes:
        peaks = [p.peak_power_w for row in rows for p in row if p.knob_value == mode]
        measured_everywhere = all(any(p.knob_value == mode for p in row) for row in rows)
        if peaks and measured_everywhere and max(peaks) <= cap_w:
            mean_w = sum(peaks) / len(peaks)
            if mean_w > best_w:
                best, best_w = mode, mean_w
    return best


def _ratios(
    profile: ProfileTable, efficiency: EfficiencyVector | None, extrapolate: bool = True,
    predict: bool = True, risk: float | None = None,
) -> tuple[dict[int, float | None], dict[int, float], list[str]]:
    """r_b and samples-to-target per batch size (r = 1, DEFAULT_SAMPLES without a vector),
    and the notes that say where r_b came from. With `predict`, a batch size the vector did not
    run is predicted between its batch sizes (outside them unless `extrapolate` is False);
    without (the
    target's measured runs, which the oracle's brute force must not invent), it is skipped."""
    if efficiency is None:
        return ({b: 1.0 for b in profile.batch_sizes},
                {b: float(DEFAULT_SAMPLES) for b in profile.batch_sizes},
                ["no efficiency vector: assuming r_b = 1 for every batch size (pure "
                 f"throughput); times are for {DEFAULT_SAMPLES} samples"])
    notes = efficiency.ratio_notes()
    if efficiency.target_metric.name != "accuracy" or efficiency.target_metric.high != 1.0:
        notes.append(f"r_b to {efficiency.target_metric.describe(efficiency.target_accuracy)}"
                     f" on {efficiency.dataset}")
    if predict:
        ratios, samples, predicted = ratios_for_batch_sizes(efficiency, profile.batch_sizes,
                                                            extrapolate)
        restarts = with_restarts(efficiency, ratios, samples)
        if restarts is not None:
            predicted.append(restarts)
        if risk is not None:
            predicted.append(at_risk(efficiency, ratios, samples, risk))
        return ratios, samples, notes + predicted
    ratios = {b: efficiency.ratio(b) for b in profile.batch_sizes}
    samples = {b: efficiency.samples(b) or 0.0 for b in profile.batch_sizes}
    skipped = [b for b, r in ratios.items() if r is None]
    if skipped:
        notes.append(f"batch sizes never selected (not estimated on {efficiency.dataset}): "
                     f"{skipped}")
    return ratios, samples, notes


def _choice(method: str, point: ProfilePoint, ratio: float | None,
            samples: float | None) -> Choice:
    """A method's choice at `point`; without samples to target its predictions are None."""
    time_s = None if samples is None else point.time_for_samples_s(samples)
    return Choice(
        method=method,
        batch_size=point.batch_size,
        knob_value=point.knob_value,
        seconds_per_sample=point.seconds_per_sample,
        peak_power_w=point.peak_power_w,
        avg_power_w=point.avg_power_w,
        efficiency_ratio=ratio,
        samples=samples,
        predicted_time_s=time_s,
        predicted_energy_j=None if time_s is None else time_s * point.avg_power_w,
    )


class Replanner:
    """wattcap's choice for any cap, prepared once per (profile, r_b, objective): what a run
    calls each time its cap moves. `choose(cap)` is `plan(...).choices["wattcap"]` for the same
    inputs, in microseconds (Algorithm 1 for time; one scan of the points otherwise)."""

    def __init__(self, profile: ProfileTable, efficiency: EfficiencyVector | None = None,
                 objective: Objective | None = None,
                 margin_sigmas: float = DEFAULT_MARGIN_SIGMAS, extrapolate: bool = True,
                 risk: float | None = None, transfer_factor: float | None = None) -> None:
        if not profile.points:
            raise ValueError("the profile has no measured points")
        if risk is not None and not 0 < risk < 1:
            raise ValueError(f"risk must be a quantile in (0, 1), got {risk}")
        if margin_sigmas < 0:
            raise ValueError(f"margin_sigmas must be >= 0, got {margin_sigmas}")
        self.original = profile
        self.margin_sigmas = margin_sigmas
        #: the peaks before the margin: measured, each at least its row's at a lower knob value
        self.monotone = monotone_peaks(self.original)
        #: the peaks the cap is compared with: measured peak + the margin (`with_power_margin`)
        profile = _raised_by_margin(self.monotone, margin_sigmas)
        self.profile = profile
        self.selector = Selector(profile)
        self.lowest_feasible_cap_w = self.selector.lowest_feasible_cap_w()
        self.efficiency = efficiency
        self.ratios, self.samples, self.ratio_notes = _ratios(profile, efficiency, extrapolate,
                                                              risk=risk)
        objective = objective or Objective()
        rule = TransferRule.of(efficiency, self.ratios, transfer_factor)
        if isinstance(rule, TransferRule) and not objective.is_paper_time:
            rule = ("transfer factor ignored: it applies to the plain time objective, not "
                    f"{objective.describe()}")
        if isinstance(rule, str):
            self.ratio_notes.append(rule)
        #: minimax regret over a target B_noise within --transfer-factor (None: r_b as it is)
        self.transfer = rule if isinstance(rule, TransferRule) else None
        #: where the cost's P_max came from when the user gave none (None: the user's)
        self.cost_power_source: str | None = None
        if objective.name == "cost" and objective.cost_power_w is None:
            # Zeus's P_max: a constant of the device, so eta weighs the same under every cap
            power_w, self.cost_power_source = default_cost_power(self.original)
            objective = objective.model_copy(update={"cost_power_w": power_w})
        self.objective = objective
        self.candidates = CandidateSet(profile.points, self.ratios, self.samples)
        #: batch sizes chosen on an r_b extrapolated beyond those the vector ran (flagged)
        self.extrapolated = {b for b, r in self.ratios.items() if r is not None and efficiency
                             is not None and doublings_outside(efficiency, b) > 0}

    def measured(self, point: ProfilePoint) -> ProfilePoint:
        """The profile's own point (its measured peak) for a point of the margined table."""
        return self.original.lookup(point.batch_size, point.knob_value) or point

    @property
    def margin_note(self) -> str:
        """What the margin is, for the plan's notes."""
        noise_w = self.original.power_noise_w
        gain = averaging_gain(self.original)
        if gain == 1.0:
            return self._sigma_note(noise_w)
        hidden_w = max((gain - 1.0) * (p.peak_power_w - p.avg_power_w)
                       for p in self.original.points)
        return (f"the peaks are of readings averaged over {self.original.power_window_s:g} s: "
                f"each is raised by {gain - 1:.2f}x its excursion above the average power, for "
                f"the instant peaks averaging hides (up to {hidden_w:.2f} W); "
                + self._sigma_note(noise_w))

    def _sigma_note(self, noise_w: float | None) -> str:
        """The part of the margin that is sensor noise and prediction uncertainty."""
        if self.margin_sigmas == 0:
            return "no margin below the cap (margin 0 sigma)"
        if noise_w is None and not any(p.predicted for p in self.original.points):
            return ("no margin below the cap: the profile has no sensor-noise estimate ("
                    + ("an imported table records none" if self.original.mode == "imported"
                       else "profiled with an older wattcap") + ")")
        return (f"a safety margin of {(noise_w or 0) * self.margin_sigmas:.2f} W below the cap "
                f"({self.margin_sigmas:g} sigma of the sensor noise, {noise_w or 0:.3f} W"
                + (", plus the prediction's uncertainty on predicted points"
                   if any(p.predicted for p in self.original.points) else "")
                + f"): every choice's profiled {self._capped_power} stays at or below the cap "
                "minus it")

    @property
    def _capped_power(self) -> str:
        """What the cap holds in this profile: its peaks, or its average power (--cap-on
        average, or an imported table without peaks)."""
        return "average power" if self.original.peak_power_source == "average" else \
            "peak power"

    def near_ties(self, power_cap_w: float | None, choice: Choice) -> str | None:
        """The batch sizes whose predicted time at f*(b) is within one standard deviation of
        the uncertainty of r_b and of the point's time per sample (theirs and the choice's,
        combined) of wattcap's choice: between them the choice is within noise. A point's time
        has an uncertainty where it is predicted, comes from repeated rows of an imported table
        or was measured over three sensor periods or more (`seconds_per_sample_std`). None
        without an efficiency vector or for objectives other than time."""
        if self.efficiency is None or not self.objective.is_paper_time:
            return None
        efficiency = self.efficiency
        frontier = self.selector.frontier(power_cap_w)
        times = {b: point.seconds_per_sample * self.samples[b] for b, point in frontier.items()
                 if self.ratios.get(b) is not None and self.samples.get(b)}
        chosen = choice.batch_size
        if chosen not in times:
            return None

        def time_spread(b: int) -> float:  # relative, as a log spread
            point = frontier[b]
            return (point.seconds_per_sample_std or 0.0) / point.seconds_per_sample

        def log_spread(b: int) -> float:
            return math.hypot(ratio_log_spread(efficiency, b), time_spread(b))

        close = [f"b={b} at {self.original.describe_knob(frontier[b].knob_value)} "
                 f"({time_s / times[chosen] - 1:+.1%})"
                 for b, time_s in sorted(times.items()) if b != chosen
                 and abs(math.log(time_s / times[chosen]))
                 <= math.hypot(log_spread(chosen), log_spread(b))]
        if not close:
            return None
        of_time = any(time_spread(b) > 0 for b in times)
        return ("within noise of wattcap's choice (predicted time within one sigma of r_b's "
                + ("and the points' time's " if of_time else "") + "uncertainty): "
                + ", ".join(close))

    def check_cap(self, power_cap_w: float | None) -> None:
        """Raise `InfeasibleCapError` if every configuration draws more than the cap."""
        if power_cap_w is not None and power_cap_w < self.lowest_feasible_cap_w:
            raise InfeasibleCapError(power_cap_w, self.lowest_feasible_cap_w,
                                     self._infeasible_reason(power_cap_w))

    def _infeasible_reason(self, power_cap_w: float) -> str:
        """Why nothing fits: the margin kept below the cap, and a reading that alone would
        meet the cap but that the plan holds at a lower knob value's peak (`monotone_peaks`)."""
        lowest = min(self.profile.points, key=lambda p: p.peak_power_w)
        before = self.monotone.lookup(lowest.batch_size, lowest.knob_value)
        margin = lowest.peak_power_w - (before.peak_power_w if before else lowest.peak_power_w)
        reason = "every measured configuration draws more than that" + (
            f" with the margin of {margin:.2f} W kept below the cap" if margin > 0 else "")
        held = self.held_below(power_cap_w)
        if held:
            reason += f" ({held[0]})"
        return reason

    def held_below(self, power_cap_w: float) -> list[str]:
        """The measured points whose own reading (with the margin) meets the cap but which the
        plan holds at a lower knob value's peak of their row (`monotone_peaks`), lowest
        reading first, in words."""
        label = knob_unit(self.original.knob_kind).label
        held = sorted(
            ((p, q) for p, q, m in zip(self.original.points, self.monotone.points,
                                       self.profile.points, strict=True)
             if not p.predicted and p.peak_power_w < q.peak_power_w
             and m.peak_power_w - q.peak_power_w + p.peak_power_w <= power_cap_w
             < m.peak_power_w),
            key=lambda pq: pq[0].peak_power_w)
        return [f"b={p.batch_size} at {self.original.describe_knob(p.knob_value)} read "
                f"{p.peak_power_w:.2f} W, but a lower {label} of its row read "
                f"{q.peak_power_w:.2f} W, and a higher one draws no less: it is planned at that"
                for p, q in held]

    def choose(self, power_cap_w: float | None) -> Choice:
        """wattcap's choice under the cap. Raises `InfeasibleCapError` (pause: nothing fits) or
        `InfeasibleObjectiveError` (nothing meets the maximum energy or deadline)."""
        self.check_cap(power_cap_w)
        if self.transfer is not None:
            robust = self.transfer.choose(self.selector.frontier(power_cap_w))
            best = None if robust is None else robust.point
        elif self.objective.is_paper_time:
            best = self.selector.select(power_cap_w, self.ratios)
        else:
            best = self.candidates.best(self.objective, power_cap_w,
                                        knob_kind=self.profile.knob_kind)
        if best is None:
            raise InfeasibleCapError(power_cap_w or 0.0, self.lowest_feasible_cap_w,
                                     "no batch size with a known efficiency fits under it")
        b = best.batch_size
        choice = _choice("wattcap", self.measured(best), self.ratios[b] or 1.0,
                         self.samples[b])
        choice.on_pareto_front = any(
            (p.batch_size, p.knob_value) == (b, best.knob_value)
            for p in self.candidates.pareto_front(power_cap_w)
        )
        return choice


def plan(
    profile: ProfileTable,
    power_cap_w: float | None,
    efficiency: EfficiencyVector | None = None,
    reference_profiles: list[ProfileTable] | None = None,
    target_efficiency: EfficiencyVector | None = None,
    objective: Objective | None = None,
    margin_sigmas: float = DEFAULT_MARGIN_SIGMAS,
    extrapolate: bool = True,
    risk: float | None = None,
    transfer_factor: float | None = None,
) -> Plan:
    """Choose (b, f) for every method under a cap (None: no cap).

    `efficiency` is the proxy r (None: r_b = 1, pure throughput, and the plan says so);
    `reference_profiles` give the safe frequency of the baselines (default: this profile only);
    `target_efficiency` enables the fastest-configuration oracle; `objective` (default: time,
    the paper's) is what wattcap, baseline-2 (at the safe frequency) and the oracle minimise.
    baseline-1 is the state of practice whatever the objective. Every method is held to the
    same margin below the cap: `margin_sigmas` standard deviations of the sensor noise seen
    while profiling (and of the prediction, for predicted points). A batch size the proxy did
    not run is planned with r_b predicted between the proxy's batch sizes and, flagged, outside
    them from the large-batch relation (`extrapolate` False keeps to them; baseline-2, the best
    proxy batch, always does; the oracle uses the target's measured runs only). `risk` q plans on
    r_b's q quantile over its uncertainty instead of its value (q = 0.9: guard against a batch
    size whose r_b is poorly known). `transfer_factor` K chooses by minimax regret over a
    target whose B_noise lies within K times the proxy's either way (time objective;
    `algorithms.transfer`). The notes name the batch sizes whose predicted time is
    within r_b's uncertainty of wattcap's choice.

    Raises `InfeasibleCapError` when nothing fits under the cap, and `InfeasibleObjectiveError`
    when wattcap finds no choice within the objective's maximum energy or deadline.
    """
    objective = objective or Objective()
    notes: list[str] = []
    unavailable: dict[str, str] = {}
    if efficiency is not None:
        efficiency.check_matches(model=profile.model, input_shape=profile.input_shape,
                                 architecture_fingerprint=profile.architecture_fingerprint)
    if target_efficiency is not None:
        target_efficiency.check_matches(
            model=profile.model, input_shape=profile.input_shape,
            architecture_fingerprint=profile.architecture_fingerprint)
    replanner = Replanner(profile, efficiency, objective, margin_sigmas, extrapolate, risk,
                          transfer_factor)
    objective = replanner.objective
    margined = replanner.profile
    notes.append(replanner.margin_note)
    if profile.peak_power_source == "average":
        no_peak = profile.mode == "imported" and "peak_power_w" not in (
            profile.imported_from or {}).get("columns", {})
        notes.append("the cap is applied to average power" + (
            " (the imported table has no peak power)" if no_peak else
            " (--cap-on average: the peak W columns show average power)"))
    replanner.check_cap(power_cap_w)
    notes += cap_does_not_bind(margined, power_cap_w, board_max_power_w(profile))
    held = [] if power_cap_w is None else replanner.held_below(power_cap_w)
    if held:
        notes.append(f"{len(held)} measured point(s) under the cap held at a lower "
                     f"{knob_unit(profile.knob_kind).label}'s peak: {held[0]}"
                     + (f"; and {len(held) - 1} more" if len(held) > 1 else ""))
    if power_cap_w is not None and profile.mode == "pruned" and profile.power_cap_w is not None:
        if power_cap_w > profile.power_cap_w:
            notes.append(
                f"the profile was pruned for a cap of {profile.power_cap_w:.2f} W; points above "
                "it were not measured, so higher frequencies may be missed at this cap"
            )
        elif power_cap_w < profile.power_cap_w:
            notes.append(
                f"the profile was pruned for a cap of {profile.power_cap_w:.2f} W: each batch "
                "size was measured around its highest clock under that cap, so points that fit "
                f"under {power_cap_w:g} W may be missing (profile again with --power-cap "
                f"{power_cap_w:g}, or --exhaustive)"
            )

    notes += replanner.ratio_notes

    if objective.name == "cost":
        source = f", {replanner.cost_power_source}" if replanner.cost_power_source else ""
        notes.append(f"cost: P_max = {objective.cost_power_w:.2f} W{source}")
    candidates = replanner.candidates

    choices: dict[str, Choice] = {"wattcap": replanner.choose(power_cap_w)}
    tie_note = replanner.near_ties(power_cap_w, choices["wattcap"])
    if tie_note:
        notes.append(tie_note)
    chosen = choices["wattcap"]
    if replanner.transfer is not None:  # what the rule chose and what each choice risks
        robust = replanner.transfer.choose(replanner.selector.frontier(power_cap_w))
        if robust is not None:
            notes.append(replanner.transfer.note(robust))
    if chosen.batch_size in replanner.extrapolated and efficiency is not None:
        notes.append(f"wattcap's choice b={chosen.batch_size} lies "
                     f"{doublings_outside(efficiency, chosen.batch_size):g} doubling(s) beyond the "
                     f"batch sizes run on {efficiency.dataset}: its r_b is extrapolated")
    clock_note = profile.clock_not_held_note(
        chosen=(chosen.batch_size, chosen.knob_value), chosen_by="wattcap")
    if clock_note:
        notes.append(clock_note)
    notes += held_by_prediction(profile, margined, margin_sigmas, power_cap_w, chosen, objective,
                                lambda table: Replanner(table, efficiency, objective, margin_sigmas,
                                                        extrapolate, risk, transfer_factor
                                                        ).choose(power_cap_w))

    references = [with_power_margin(r, margin_sigmas)
                  for r in (reference_profiles or [profile]) if r.knob_kind == profile.knob_kind]
    if reference_profiles is None and profile.knob_kind != "power_limit":
        notes.append(f"no reference profiles: the safe {knob_unit(profile.knob_kind).label} is "
                     "computed from this model only")
    elif len(references) < len(reference_profiles or []):
        notes.append(f"reference profiles of another knob than the {profile.knob_kind} are not "
                     "used for the baselines")
    f_safe = safe_knob_value(references or [margined], power_cap_w, profile.knob_values,
                             profile.knob_kind)
    _baselines(replanner, power_cap_w, f_safe, choices, unavailable, notes)
    notes += missed_constraints(choices, objective, knob_unit(profile.knob_kind).label)

    if target_efficiency is not None:
        target_ratios, target_samples, target_notes = _ratios(profile, target_efficiency,
                                                              predict=False)
        notes += [f"fastest (target data): {note}" for note in target_notes]
        oracle: ProfilePoint | None = None
        try:
            # a brute force over every feasible (b, knob value) with the target's r_b
            oracle = CandidateSet(margined.points, target_ratios, target_samples).best(
                objective, power_cap_w, knob_kind=profile.knob_kind)
        except InfeasibleObjectiveError as err:
            unavailable["fastest"] = f"with the target's r_b, {err}"
        if oracle is not None:
            ob = oracle.batch_size
            choices["fastest"] = _choice("fastest", replanner.measured(oracle),
                                         target_ratios[ob] or 1.0, target_samples[ob])
    else:
        unavailable["fastest"] = "needs an efficiency vector measured on the target data"

    # the front is searched on the margined peaks, and reports the measured ones (as choices do)
    front = [fp.model_copy(update={"peak_power_w": replanner.original.lookup(
        fp.batch_size, fp.knob_value).peak_power_w})  # type: ignore[union-attr]
        for fp in candidates.pareto_front(power_cap_w)]
    on_front = {(p.batch_size, p.knob_value) for p in front}
    for choice in choices.values():
        choice.on_pareto_front = (choice.batch_size, choice.knob_value) in on_front

    return Plan(
        device=profile.device,
        model=profile.model,
        input_shape=profile.input_shape,
        power_cap_w=power_cap_w,
        efficiency_source=efficiency.dataset if efficiency is not None else None,
        knob_kind=profile.knob_kind,
        safe_knob_value=f_safe,
        choices=choices,
        unavailable=unavailable,
        notes=notes,
        objective=objective,
        pareto_front=front,
    )


def _baselines(replanner: Replanner, power_cap_w: float | None, f_safe: int | None,
               choices: dict[str, Choice], unavailable: dict[str, str], notes: list[str]) -> None:
    """baseline-1 (the largest batch at the safe knob value: the practice) and baseline-2 (the
    best proxy batch there), into `choices`, or why not into `unavailable`."""
    profile, margined = replanner.original, replanner.profile
    ratios, samples = replanner.ratios, replanner.samples
    if f_safe is None:
        reason = ("no power limit at or below the cap" if profile.knob_kind == "power_limit"
                  else f"no {knob_unit(profile.knob_kind).label} keeps every reference model "
                  "under the cap")
        unavailable["baseline-1"] = unavailable["baseline-2"] = reason
        return
    safe = profile.describe_knob(f_safe)
    if profile.knob_kind == "power_limit" and power_cap_w is not None:
        notes.append(f"the baselines run at {safe}: the practice sets the power limit to the "
                     "cap (nvidia-smi -pl), which holds average power, not peak")
    b_max = profile.max_batch_size
    point = margined.lookup(b_max, f_safe) if b_max is not None else None
    if point is None or b_max is None:
        unavailable["baseline-1"] = f"b={b_max} at the safe {safe} was not measured"
    elif power_cap_w is not None and point.peak_power_w > power_cap_w:
        margined_w = "" if point.peak_power_w == replanner.measured(point).peak_power_w else \
            " with the margin"
        unavailable["baseline-1"] = (
            f"b={b_max} at the safe {safe} draws {point.peak_power_w:.2f} W{margined_w}, over "
            f"the {power_cap_w:.2f} W cap" + (
                ": a power limit holds average power, not peak (--cap-on average holds the "
                "average)" if profile.knob_kind == "power_limit"
                and profile.peak_power_source != "average" else ""))
    elif ratios.get(b_max) is None or not samples.get(b_max):
        # the practice's choice needs no r_b: it stands, only its time is unknown
        choices["baseline-1"] = _choice("baseline-1", replanner.measured(point), None, None)
        notes.append(f"baseline-1's predicted time is unknown: the efficiency vector gives "
                     f"no r_b for b={b_max} (it was not estimated there)")
    else:
        choices["baseline-1"] = _choice("baseline-1", replanner.measured(point),
                                        ratios[b_max] or 1.0, samples[b_max])
    # for time: argmin_b T(b, f_safe) · r_b, ties to the larger b, over the proxy's range (the
    # best proxy batch: never one extrapolated beyond what the proxy ran)
    proxy_range = replanner.candidates if not replanner.extrapolated else CandidateSet(
        margined.points, {b: None if b in replanner.extrapolated else r
                          for b, r in ratios.items()}, samples)
    try:
        p2 = proxy_range.best(replanner.objective, power_cap_w, knob_value=f_safe,
                              knob_kind=profile.knob_kind)
    except InfeasibleObjectiveError as err:
        unavailable["baseline-2"] = f"at the safe {knob_unit(profile.knob_kind).label}, {err}"
        return
    if p2 is not None:
        choices["baseline-2"] = _choice("baseline-2", replanner.measured(p2),
                                        ratios[p2.batch_size] or 1.0, samples[p2.batch_size])
    else:
        unavailable["baseline-2"] = f"no measured batch size at the safe {safe} is under the cap"
