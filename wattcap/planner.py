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
    safe_frequency_hz,
    with_power_margin,
)
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
    "with_power_margin",
    "Choice",
    "InfeasibleCapError",
    "METHODS",
    "Plan",
]
