"""Deprecated: moved to `wattcap.algorithms.planner`
(the layered layout, see the README's Architecture).
This module re-exports its names and will be removed in a later release."""

import warnings

warnings.warn(
    "wattcap.planner is deprecated: import from wattcap.algorithms.planner",
    DeprecationWarning,
    stacklevel=2,
)

from wattcap.algorithms.planner import (  # noqa: E402
    DEFAULT_SAMPLES,
    Replanner,
    Selector,
    plan,
    safe_knob_value,
    with_power_margin,
)

#: the name before knobs (a profile's knob values are frequencies when its kind is the clock)
safe_frequency_hz = safe_knob_value
from wattcap.core.plan import (  # noqa: E402
    METHODS,
    Choice,
    InfeasibleCapError,
    Plan,
)

__all__ = [
    "DEFAULT_SAMPLES",
    "Replanner",
    "Selector",
    "plan",
    "safe_frequency_hz",
    "safe_knob_value",
    "with_power_margin",
    "Choice",
    "InfeasibleCapError",
    "METHODS",
    "Plan",
]
