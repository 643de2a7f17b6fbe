"""A note on a choice held back by a prediction: a few-point profile predicts most of its points,
each peak with a standard deviation, and the planner keeps that uncertainty as margin below the
cap (`power_margin.with_power_margin`). Where that margin alone turns away a point that would
otherwise be chosen (a faster one, for time), the plan says which point, what its predicted
power and its uncertainty are against the cap, and how to measure it, instead of leaving a
lower clock chosen unexplained.

Only the margin on peak power holds a point back: a predicted time's uncertainty never does
(the planner ranks on the predicted time; `Replanner.near_ties` names what is within it)."""

from __future__ import annotations

from collections.abc import Callable

from wattcap.core.knob import knob_unit
from wattcap.core.objective import InfeasibleObjectiveError, Objective
from wattcap.core.plan import Choice, InfeasibleCapError
from wattcap.core.profile import ProfileTable

#: how the note on a point held back by its prediction's uncertainty begins
HELD_BY_PREDICTION = "held back by a prediction's uncertainty"


def as_if_measured(profile: ProfileTable) -> ProfileTable | None:
    """The profile with its predicted points' peak-power uncertainty removed (as certain as a
    measured point: only the sensor's noise left for their margin); None where no predicted
    point carries one (nothing would change)."""
    if not any(p.predicted and p.peak_power_std_w for p in profile.points):
        return None
    points = [p.model_copy(update={"peak_power_std_w": None})
              if p.predicted and p.peak_power_std_w else p for p in profile.points]
    return profile.model_copy(update={"points": points})


def held_by_prediction(
    profile: ProfileTable, margined: ProfileTable, margin_sigmas: float,
    power_cap_w: float | None, chosen: Choice, objective: Objective,
    choose: Callable[[ProfileTable], Choice],
) -> list[str]:
    """A note where the plan would choose a predicted point but for its prediction's
    uncertainty: `choose` (the planner's choice on a profile, same inputs otherwise) run on
    the profile with predicted peaks as certain as measured ones (`as_if_measured`) picks
    another point than `chosen`, one that `margined` (the peaks the cap is compared with)
    puts over the cap. Empty otherwise: no cap, no margin, no uncertain prediction, or the
    same choice either way."""
    certain = as_if_measured(profile)
    if power_cap_w is None or margin_sigmas <= 0 or certain is None:
        return []
    try:
        other = choose(certain)
    except (InfeasibleCapError, InfeasibleObjectiveError):
        return []
    key = (other.batch_size, other.knob_value)
    point, raised = profile.lookup(*key), margined.lookup(*key)
    if (key == (chosen.batch_size, chosen.knob_value) or point is None or raised is None
            or not point.predicted or raised.peak_power_w <= power_cap_w):
        return []
    power = "average power" if profile.peak_power_source == "average" else "peak power"
    at = f"b={other.batch_size} at {profile.describe_knob(other.knob_value)}"
    return [f"{HELD_BY_PREDICTION}: {at} would be wattcap's choice "
            f"({_better(other, chosen, objective, profile)}), but its {power} is predicted, "
            f"not measured: {point.peak_power_w:.2f} W ± {point.peak_power_std_w or 0:.2f} W "
            f"(1 sigma), {raised.peak_power_w:.2f} W with the {margin_sigmas:g}-sigma margin "
            f"(sensor noise and prediction), over the {power_cap_w:g} W cap; measuring it "
            f"settles whether it fits: {settle_command(profile, power_cap_w)}"]


def _better(other: Choice, chosen: Choice, objective: Objective,
            profile: ProfileTable) -> str:
    """'predicted time 21% shorter than b=32 at 816.0 MHz', or the objective it is better for."""
    than = f"b={chosen.batch_size} at {profile.describe_knob(chosen.knob_value)}"
    if objective.is_paper_time and other.predicted_time_s and chosen.predicted_time_s:
        shorter = 1 - other.predicted_time_s / chosen.predicted_time_s
        return f"predicted time {shorter:.0%} shorter than {than}"
    return f"better for {objective.describe()} than {than}"


def settle_command(profile: ProfileTable, power_cap_w: float) -> str:
    """The profiles that measure a cap's frontier: a pruned profile for the cap (each batch size
    measured around its highest knob value under it), or a few-point one with more points."""
    device = {"emulated": f"emulated:{profile.device}", "jetson": "jetson"}.get(
        profile.device_kind, "DEVICE")
    mode = f" --power-mode {profile.power_mode}" if profile.power_mode else ""
    more = profile.model_fit.get("max_points")
    return (f"`wattcap profile --device {device}{mode} --model {profile.model} --power-cap "
            f"{power_cap_w:g} --out FILE` (pruned for the cap: each batch size measured around "
            f"its highest {knob_unit(profile.knob_kind).label} under it)"
            + (f", or --few-points with --max-points above {more}" if more else ""))
