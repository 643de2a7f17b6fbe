"""Knobs: what a profile varies beside the batch size, with its unit.

A knob is a kind and integer values in the kind's unit: the GPU clock in Hz (what wattcap
sets on a Jetson or with NVML's locked clocks), the GPU power limit in mW (`nvidia-smi -pl`,
NVML's unit) or a Jetson power mode by its nvpmodel id (a bundle of clock caps and online
cores). Files store the kind beside the values, so nothing downstream assumes MHz.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from wattcap.core.errors import WattcapError
from wattcap.core.power_mode import power_mode_label

KnobKind = Literal["gpu_clock", "power_limit", "power_mode"]

KNOB_KINDS: tuple[str, ...] = ("gpu_clock", "power_limit", "power_mode")


@dataclass(frozen=True)
class KnobUnit:
    """How a kind's values are stored and shown."""

    #: the unit of the stored integer values
    stored_unit: str
    #: the unit a person reads (`knob_number`), and stored values per shown one
    shown_unit: str
    scale: float
    #: how a shown value is written ("{:.1f}" for MHz) and the value with its unit
    number_format: str
    template: str
    #: what the knob is, in words
    label: str
    #: a table's column heading for the knob's values
    column: str
    #: whether power, at one batch size, does not fall as the value rises (a higher clock
    #: runs every phase of the step at a higher V²·f; a higher limit allows higher clocks);
    #: power modes are bundles of caps, not ordered by their id
    power_rises_with_value: bool

    def stored(self, shown: float) -> int:
        """A value in the shown unit (MHz, W, id) as stored (Hz, mW, id)."""
        return round(shown * self.scale)

    def shown(self, stored: int) -> float:
        """A stored value in the shown unit."""
        return stored / self.scale


KNOB_UNITS: dict[str, KnobUnit] = {
    "gpu_clock": KnobUnit("Hz", "MHz", 1e6, "{:.1f}", "{} MHz", "GPU clock", "MHz", True),
    "power_limit": KnobUnit("mW", "W", 1e3, "{:g}", "power limit {} W", "GPU power limit",
                            "limit W", True),
    "power_mode": KnobUnit("id", "nvpmodel id", 1, "{:g}", "power mode {}", "power mode",
                           "mode", False),
}


def knob_unit(kind: str) -> KnobUnit:
    """The unit of `kind`; a kind wattcap does not know is a ValueError naming the known."""
    try:
        return KNOB_UNITS[kind]
    except KeyError:
        raise ValueError(f"unknown knob kind {kind!r}; expected one of "
                         f"{', '.join(KNOB_KINDS)}") from None


class KnobError(WattcapError, ValueError):
    """A knob a part of wattcap cannot act on (moving caps and re-plans act on clocks)."""


def clock_only(kind: str, what: str = "training") -> str:
    """Why `what` (which acts on the GPU clock) refuses a table of another knob, and what
    works instead."""
    label = knob_unit(kind).label
    return (f"{what} acts on the GPU clock, and this profile varies the {label}: train with "
            f"it under a constant cap (the planned {label} is applied and restored), or "
            "profile the GPU clock for this")


def require_clock(kind: str, what: str) -> None:
    """Refuse, in one line (`clock_only`), to run `what` on a table of another knob."""
    if kind != "gpu_clock":
        raise KnobError(clock_only(kind, what))


def knob_number(kind: str, value: int, mode_names: Mapping[int, str] | None = None) -> str:
    """The value in the unit a person reads, without the unit: '614.4' (MHz), '150' (W); a
    power mode by id with its name where `mode_names` (id -> name) knows it: '2 (MODE_30W)',
    else '2'."""
    if kind == "power_mode":
        return power_mode_label(value, mode_names)
    unit = knob_unit(kind)
    return unit.number_format.format(unit.shown(value))


def format_knob(kind: str, value: int, mode_names: Mapping[int, str] | None = None) -> str:
    """The value with its unit: '614.4 MHz', 'power limit 150 W', 'power mode 2 (MODE_30W)'
    (a power mode's name where `mode_names` knows it, else 'power mode 2')."""
    return knob_unit(kind).template.format(knob_number(kind, value, mode_names))


def knob_axis_label(kind: str, named: bool = False) -> str:
    """A plot axis's label for the knob: 'GPU clock (MHz)', 'power mode (nvpmodel id)'; with
    `named` power modes, 'power mode (nvpmodel id and name)'."""
    unit = knob_unit(kind)
    shown = f"{unit.shown_unit} and name" if named and kind == "power_mode" else unit.shown_unit
    return f"{unit.label} ({shown})"
