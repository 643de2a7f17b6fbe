"""NVML's raw values as wattcap reads them: strings, field values, the clock event reasons'
cause, and a GPU's name as a device name."""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any

__all__ = ["field_value", "slugify", "text", "throttle_cause"]


def throttle_cause(reasons: list[str]) -> str:
    """What holds the clock, from NVML's clock event reasons: "thermal" (a slowdown for
    temperature), "power limit" (the power cap or brake), else "unknown"."""
    if any("Thermal" in reason for reason in reasons):
        return "thermal"
    if any("Power" in reason for reason in reasons):
        return "power limit"
    return "unknown"


def slugify(name: str) -> str:
    """``"NVIDIA H100 80GB HBM3"`` -> ``"nvidia-h100-80gb-hbm3"``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def text(value: str | bytes) -> str:
    """A string NVML returned (old nvidia-ml-py releases return bytes from string getters)."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def field_value(nvml: ModuleType, field: Any) -> float:
    """A field value's number (c_nvmlFieldValue_t.value is a union; valueType says which
    member is meaningful)."""
    members = {
        getattr(nvml, "NVML_VALUE_TYPE_DOUBLE", 0): "dVal",
        getattr(nvml, "NVML_VALUE_TYPE_UNSIGNED_INT", 1): "uiVal",
        getattr(nvml, "NVML_VALUE_TYPE_UNSIGNED_LONG", 2): "ulVal",
        getattr(nvml, "NVML_VALUE_TYPE_UNSIGNED_LONG_LONG", 3): "ullVal",
        getattr(nvml, "NVML_VALUE_TYPE_SIGNED_LONG_LONG", 4): "sllVal",
        getattr(nvml, "NVML_VALUE_TYPE_SIGNED_INT", 5): "siVal",
    }
    return float(getattr(field.value, members.get(field.valueType, "uiVal")))
