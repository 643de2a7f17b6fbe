"""What `wattcap profile` says about a --power-cap nothing can meet: a cap below the board's
draw with nothing running (before measuring, and in a dry run), and one below every point
measured (after): the plan made from such a profile is infeasible, so the profile says so
while it is made, with the lowest cap worth trying."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich.markup import escape

from wattcap.cli.common import console

if TYPE_CHECKING:
    from wattcap.core.profile import ProfileTable
    from wattcap.devices import Device


def warn_if_cap_below_idle(dev: Device, cap: float | None) -> None:
    """A warning where the cap lies below the board's power read now (idle, before anything
    runs): training only adds to it, so no configuration will be feasible. Nothing is said
    where the sensor cannot be read."""
    from wattcap.devices import DeviceError

    if cap is None:
        return
    try:
        idle_w = dev.read_power_w()
    except (DeviceError, OSError):
        return
    if cap < idle_w:
        _warn(f"the cap {cap:g} W is below the board's power now ({idle_w:.2f} W, before "
              "anything runs): training only adds to it, so no configuration will be "
              f"feasible under {cap:g} W; try a cap above {idle_w:.2f} W (the lowest cap "
              "that plans is the lowest peak the profile measures)")


def warn_if_cap_below_every_point(table: ProfileTable, cap: float | None) -> None:
    """A warning where every measured point peaks above the cap (with the planner's margin,
    as `wattcap plan` compares them): nothing the profile holds is feasible, and the lowest
    cap to try is its lowest peak, rounded up as `InfeasibleCapError` says it."""
    from wattcap.algorithms.power_margin import with_power_margin
    from wattcap.core.defaults import DEFAULT_MARGIN_SIGMAS

    if cap is None or not table.points:
        return
    margined = with_power_margin(table, DEFAULT_MARGIN_SIGMAS)
    lowest = min(margined.points, key=lambda p: p.peak_power_w)
    if cap >= lowest.peak_power_w:
        return
    shown_w = math.ceil(lowest.peak_power_w * 100 - 1e-6) / 100
    _warn(f"every measured point peaks above the cap {cap:g} W: nothing will be feasible "
          f"under it (plan says infeasible); the lowest cap to try is {shown_w:.2f} W (b="
          f"{lowest.batch_size} at {table.describe_knob(lowest.knob_value)}, with the "
          "planner's margin)")


def _warn(message: str) -> None:
    console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False)
