"""Deprecated: moved to `wattcap.runtime.sampling`
(the layered layout, see the README's Architecture).
This module re-exports its names and will be removed in a later release."""

import warnings

warnings.warn(
    "wattcap.sampling is deprecated: import from wattcap.runtime.sampling",
    DeprecationWarning,
    stacklevel=2,
)

from wattcap.runtime.sampling import (  # noqa: E402
    BatchStream,
    SessionBatchSampler,
)

__all__ = [
    "BatchStream",
    "SessionBatchSampler",
]
