"""Deprecated: moved to `wattcap.core.run`
(the layered layout, see the README's Architecture).
This module re-exports its names and will be removed in a later release."""

import warnings

warnings.warn(
    "wattcap.run is deprecated: import from wattcap.core.run",
    DeprecationWarning,
    stacklevel=2,
)

from wattcap.core.run import (  # noqa: E402
    CurvePoint,
    RunRecord,
    TrainConfig,
    scaled_learning_rate,
)

__all__ = [
    "CurvePoint",
    "RunRecord",
    "TrainConfig",
    "scaled_learning_rate",
]
