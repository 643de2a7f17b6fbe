"""Deprecated: moved to `wattcap.train.efficiency`
(the layered layout, see the README's Architecture).
This module re-exports its names and will be removed in a later release."""

import warnings

warnings.warn(
    "wattcap.efficiency is deprecated: import from wattcap.train.efficiency",
    DeprecationWarning,
    stacklevel=2,
)

from wattcap.core.efficiency import (  # noqa: E402
    EfficiencyEntry,
    EfficiencyVector,
    RatioSource,
)
from wattcap.train.efficiency import (  # noqa: E402
    AUTO_TARGET_SHARE,
    EVALS_PAST_TARGET,
    estimate_efficiency,
)

__all__ = [
    "EfficiencyEntry",
    "EfficiencyVector",
    "RatioSource",
    "AUTO_TARGET_SHARE",
    "EVALS_PAST_TARGET",
    "estimate_efficiency",
]
