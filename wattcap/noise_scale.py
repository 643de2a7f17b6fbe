"""Deprecated: moved to `wattcap.train.noise_scale`
(the layered layout, see the README's Architecture).
This module re-exports its names and will be removed in a later release."""

import warnings

warnings.warn(
    "wattcap.noise_scale is deprecated: import from wattcap.train.noise_scale",
    DeprecationWarning,
    stacklevel=2,
)

from wattcap.algorithms.noise_scale import (  # noqa: E402
    DEFAULT_BLOCKS,
    DEFAULT_EMA_DECAY,
    GNS_CONFIDENCE,
    NOMINAL_SAMPLES,
    NoiseScaleTracker,
    gns_efficiency_vector,
    simple_noise_terms,
)
from wattcap.core.noise_scale import (  # noqa: E402
    NoiseScaleEstimate,
)
from wattcap.runtime.noise_scale import (  # noqa: E402
    GradientNoiseScale,
    GradientNorms,
    LossOf,
    adam_preconditioner,
    chunked_backward,
    uses_second_moments,
)
from wattcap.train.noise_scale import (  # noqa: E402
    DEFAULT_GNS_SAMPLES,
    GnsRun,
    estimate_efficiency_gns,
    measure_noise_scale,
)

__all__ = [
    "DEFAULT_BLOCKS",
    "DEFAULT_EMA_DECAY",
    "GNS_CONFIDENCE",
    "NOMINAL_SAMPLES",
    "NoiseScaleTracker",
    "gns_efficiency_vector",
    "simple_noise_terms",
    "NoiseScaleEstimate",
    "GradientNoiseScale",
    "GradientNorms",
    "LossOf",
    "adam_preconditioner",
    "chunked_backward",
    "uses_second_moments",
    "DEFAULT_GNS_SAMPLES",
    "GnsRun",
    "estimate_efficiency_gns",
    "measure_noise_scale",
]
