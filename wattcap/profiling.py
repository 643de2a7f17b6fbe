"""Deprecated: moved to `wattcap.measure.profiling`
(the layered layout, see the README's Architecture).
This module re-exports its names and will be removed in a later release."""

import warnings

warnings.warn(
    "wattcap.profiling is deprecated: import from wattcap.measure.profiling",
    DeprecationWarning,
    stacklevel=2,
)

from wattcap.core.profile import (  # noqa: E402
    ProfilePoint,
    ProfileTable,
)
from wattcap.measure.profiling import (  # noqa: E402
    PointChange,
    PowerStats,
    Profiler,
    ProgressCallback,
    RefreshResult,
    build_training_step,
    refresh_profile,
    refresh_row,
)

__all__ = [
    "ProfilePoint",
    "ProfileTable",
    "PointChange",
    "PowerStats",
    "Profiler",
    "ProgressCallback",
    "RefreshResult",
    "build_training_step",
    "refresh_profile",
    "refresh_row",
]
