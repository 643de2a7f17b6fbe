"""Notes a plan adds about what it was asked: a cap that does not bind (and one above what the
board can draw at all, likely a typo), and a baseline whose choice misses the objective's
constraint (baseline-1 is the practice whatever the objective)."""

from __future__ import annotations

from wattcap.core.knob import knob_unit
from wattcap.core.objective import Objective
from wattcap.core.plan import Choice
from wattcap.core.profile import ProfileTable

#: where the board's maximum power is not known, a cap above this many times the profile's
#: highest peak is said to be a likely typo: a budget twice what the model ever drew on the
#: board is no trade-off against power at all, and more often a digit too many
TYPO_PEAK_FACTOR = 2.0

#: how the note on a cap that no measured point reaches begins
CAP_DOES_NOT_BIND = "the cap does not bind"


def board_max_power_w(profile: ProfileTable) -> float | None:
    """The most the board can draw, where the profile records it: an emulated device's spec
    (its highest power mode's budget, the top of its power limit range) or the board's largest
    power limit (NVML's); None where not recorded (a real Jetson's profile, an imported
    table)."""
    spec = profile.device_spec or {}
    candidates = [float(mode["budget_w"]) for mode in (spec.get("power_modes") or {}).values()
                  if isinstance(mode, dict) and mode.get("budget_w")]
    limits = spec.get("power_limit_range_w")
    if limits:
        candidates.append(float(limits[-1]))
    if profile.max_power_limit_w:
        candidates.append(profile.max_power_limit_w)
    return max(candidates, default=None)


def cap_does_not_bind(margined: ProfileTable, power_cap_w: float | None,
                      board_max_w: float | None = None) -> list[str]:
    """A note where no measured point reaches the cap (a site budget above the GPU's draw for
    this model): the choice is then no trade-off against power at all. A cap above the
    board's maximum power (`board_max_w`, `board_max_power_w`), or where that is not known
    above TYPO_PEAK_FACTOR x the profile's highest peak, is said to be a likely typo."""
    if power_cap_w is None or not margined.points:
        return []
    highest_w = max(p.peak_power_w for p in margined.points)
    if highest_w > power_cap_w:
        return []
    return [f"{CAP_DOES_NOT_BIND}: every profiled point peaks at {highest_w:.1f} W or less "
            f"(with the margin), under {power_cap_w:g} W, so each batch size takes its fastest "
            f"{knob_unit(margined.knob_kind).label}"
            + _likely_typo(power_cap_w, highest_w, board_max_w)]


def _likely_typo(power_cap_w: float, highest_w: float, board_max_w: float | None) -> str:
    """'; 5000 W is above the board's maximum power (60 W): it may be a typo', or nothing."""
    if board_max_w is not None:
        if power_cap_w <= max(board_max_w, highest_w):
            return ""
        return (f"; {power_cap_w:g} W is above the board's maximum power ({board_max_w:g} W): "
                "it may be a typo")
    if power_cap_w <= TYPO_PEAK_FACTOR * highest_w:
        return ""
    return (f"; {power_cap_w:g} W is more than {TYPO_PEAK_FACTOR:g}x the profile's highest "
            f"peak (the board's maximum power is not recorded in the profile): it may be a typo")


def missed_constraints(choices: dict[str, Choice], objective: Objective,
                       knob_label: str = "knob value") -> list[str]:
    """A note for each choice whose predictions break the objective's deadline or maximum
    energy (baseline-1: the largest batch at the safe `knob_label`, whatever the objective;
    the other methods keep to the constraint or are not available)."""
    notes = []
    for method, choice in choices.items():
        missed = objective.missed_by(choice.predicted_time_s, choice.predicted_energy_j)
        if missed is not None:
            why = (f" (the practice: the largest batch at the safe {knob_label}, whatever the "
                   "objective)" if method == "baseline-1" else "")
            notes.append(f"{method} misses the objective's constraint: {missed}{why}")
    return notes
