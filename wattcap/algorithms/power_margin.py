"""What the planner plans on instead of a profile's raw peaks: the peaks raised by a margin of
the sensor's noise, made monotone in the clock, or the averages where the cap is on average
power."""

from __future__ import annotations

import math

from wattcap.core.defaults import INSTANT_POWER_PERIOD_S
from wattcap.core.knob import knob_unit
from wattcap.core.profile import ProfileTable


def averaging_gain(profile: ProfileTable) -> float:
    """For a peak of readings averaged over a window W: sqrt(W / instant period), the factor
    by which averaging shrank the excursion of the instant peak above the average (1 when the
    peak is of instant readings, or absent)."""
    if profile.peak_power_source != "averaged" or not profile.power_window_s:
        return 1.0
    return max(1.0, (profile.power_window_s / INSTANT_POWER_PERIOD_S) ** 0.5)


def with_power_margin(profile: ProfileTable, margin_sigmas: float) -> ProfileTable:
    """The peaks the cap is compared with: every peak, first raised to its row's highest
    measured peak at a lower knob value where power does not fall as the knob rises (the
    clock, a power limit; `monotone_peaks`), then by `margin_sigmas` standard deviations (of
    the sensor's noise seen while profiling and, for predicted points, of the prediction).
    Planning against the cap on these values keeps that margin below it. A peak of averaged
    readings is also raised to the instant peak it hides (see `averaging_gain`), whatever the
    sigmas."""
    return _raised_by_margin(monotone_peaks(profile), margin_sigmas)


def _raised_by_margin(profile: ProfileTable, margin_sigmas: float) -> ProfileTable:
    """`with_power_margin` of a profile whose peaks are monotone already (`monotone_peaks`)."""
    noise_w = profile.power_noise_w or 0.0
    gain = averaging_gain(profile)
    if gain == 1.0 and (margin_sigmas <= 0
                        or (noise_w == 0 and not any(p.predicted for p in profile.points))):
        return profile
    points = []
    for point in profile.points:
        sigma_w = (noise_w ** 2 + (point.peak_power_std_w or 0.0) ** 2) ** 0.5
        hidden_w = (gain - 1.0) * max(point.peak_power_w - point.avg_power_w, 0.0)
        points.append(point.model_copy(update={
            "peak_power_w": point.peak_power_w + hidden_w + margin_sigmas * sigma_w}))
    return profile.model_copy(update={"points": points})


def monotone_peaks(profile: ProfileTable) -> ProfileTable:
    """The profile with each point's peak at least every measured peak of its row at a lower
    knob value, for knobs whose power does not fall as the value rises (`KnobUnit.
    power_rises_with_value`: the clock, a power limit); unchanged for power modes.

    Why: at one batch size a higher clock runs every phase of the step at a higher V²·f, so a
    reading that says otherwise is the sensor's noise or its averaging. A peak is the largest
    of a window's readings, and a window holds more readings at a low clock (its steps are
    longer), so near the noise floor a higher clock can read lower by chance. Without this a
    profile that measured such a point (an exhaustive one) plans caps that one which did not
    (a pruned search climbing from the lowest clock) refuses; with it a row's lowest peak is
    its lowest measured value's, which every profile mode measures the same way. Predicted
    points raise nothing (a smooth model's value is not a reading). Conservative: no peak is
    lowered."""
    if not knob_unit(profile.knob_kind).power_rises_with_value:
        return profile
    raised: dict[tuple[int, int], float] = {}
    for b, row in profile.rows().items():
        highest_w = -math.inf  # the highest measured peak so far along the row
        for point in row:
            if highest_w > point.peak_power_w:
                raised[(b, point.knob_value)] = highest_w
            if not point.predicted:
                highest_w = max(highest_w, point.peak_power_w)
    if not raised:
        return profile
    points = [p.model_copy(update={"peak_power_w": raised[(p.batch_size, p.knob_value)]})
              if (p.batch_size, p.knob_value) in raised else p for p in profile.points]
    return profile.model_copy(update={"points": points})


def default_cost_power(profile: ProfileTable) -> tuple[float, str]:
    """The cost objective's P_max when the user gives none, and where it came from: the board's
    largest power limit (Zeus's choice) where the profile recorded one, else the largest power
    limit the table measured (a power-limit table), else the profile's highest peak power."""
    if profile.max_power_limit_w is not None:
        return profile.max_power_limit_w, "the board's largest power limit"
    if profile.knob_kind == "power_limit":
        return (knob_unit("power_limit").shown(max(profile.knob_values)),
                "the largest power limit in the table")
    return max(p.peak_power_w for p in profile.points), "the profile's highest peak power"


def cap_on_average(profile: ProfileTable) -> ProfileTable:
    """The profile with each point's average power where its peak was: planned against it, a
    cap holds average power (what a GPU power limit enforces, what a site's budget means)
    instead of peak power (a Jetson's supply). The plan says which (see `plan`)."""
    points = [p.model_copy(update={"peak_power_w": p.avg_power_w,
                                   "peak_power_std_w": p.avg_power_std_w})
              for p in profile.points]
    return profile.model_copy(update={"points": points, "peak_power_source": "average"})
