"""Deprecated: moved to `wattcap.runtime.gns_replan`
(the layered layout, see the README's Architecture).
This module re-exports its names and will be removed in a later release."""

import warnings

warnings.warn(
    "wattcap.gns_replan is deprecated: import from wattcap.runtime.gns_replan",
    DeprecationWarning,
    stacklevel=2,
)

from wattcap.runtime.gns_replan import (  # noqa: E402
    DEFAULT_DEVICE_GNS_CHUNKS,
    DEFAULT_DEVICE_GNS_SAMPLES,
    MIN_MEASURED_STEPS,
    GnsSettings,
    NoiseScaleReplan,
)

__all__ = [
    "DEFAULT_DEVICE_GNS_CHUNKS",
    "DEFAULT_DEVICE_GNS_SAMPLES",
    "GnsSettings",
    "MIN_MEASURED_STEPS",
    "NoiseScaleReplan",
]
