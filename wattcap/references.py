"""Deprecated: moved to `wattcap.measure.references`
(the layered layout, see the README's Architecture).
This module re-exports its names and will be removed in a later release."""

import warnings

warnings.warn(
    "wattcap.references is deprecated: import from wattcap.measure.references",
    DeprecationWarning,
    stacklevel=2,
)

from wattcap.core.cache import (  # noqa: E402
    cache_dir,
)
from wattcap.measure.references import (  # noqa: E402
    emulated_reference_profiles,
    load_reference_profiles,
    reference_profiles_for,
    spec_digest,
)

__all__ = [
    "cache_dir",
    "emulated_reference_profiles",
    "load_reference_profiles",
    "reference_profiles_for",
    "spec_digest",
]
