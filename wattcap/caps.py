"""Deprecated: moved to `wattcap.devices.caps`
(the layered layout, see the README's Architecture).
This module re-exports its names and will be removed in a later release."""

import warnings

warnings.warn(
    "wattcap.caps is deprecated: import from wattcap.devices.caps",
    DeprecationWarning,
    stacklevel=2,
)

from wattcap.devices.caps import (  # noqa: E402
    HAURWITZ_A_W_M2,
    HAURWITZ_B,
    BatteryCap,
    BatteryCurve,
    CallableCap,
    CapReading,
    CapSource,
    CapSourceError,
    ConstantCap,
    LowestCap,
    PolledFileCap,
    ScheduleCap,
    SolarCap,
    clear_sky_ghi_w_m2,
    parse_cap_source,
)

__all__ = [
    "BatteryCap",
    "BatteryCurve",
    "CallableCap",
    "CapReading",
    "CapSource",
    "CapSourceError",
    "ConstantCap",
    "HAURWITZ_A_W_M2",
    "HAURWITZ_B",
    "LowestCap",
    "PolledFileCap",
    "ScheduleCap",
    "SolarCap",
    "clear_sky_ghi_w_m2",
    "parse_cap_source",
]
