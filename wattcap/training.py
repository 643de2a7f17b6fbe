"""Deprecated: moved to `wattcap.train.loop`
(the layered layout, see the README's Architecture).
This module re-exports its names and will be removed in a later release."""

import warnings

warnings.warn(
    "wattcap.training is deprecated: import from wattcap.train.loop",
    DeprecationWarning,
    stacklevel=2,
)

from wattcap.core.run import (  # noqa: E402
    CurvePoint,
    RunRecord,
    TrainConfig,
    scaled_learning_rate,
)
from wattcap.runtime.checkpoint import (  # noqa: E402
    Checkpoint,
)
from wattcap.runtime.meter import (  # noqa: E402
    PowerMeter,
)
from wattcap.runtime.sampling import (  # noqa: E402
    BatchStream,
)
from wattcap.train.loop import (  # noqa: E402
    EvalCallback,
    evaluate,
    evaluate_dataset,
    pretrain,
    train_to_accuracy,
)

__all__ = [
    "CurvePoint",
    "RunRecord",
    "TrainConfig",
    "scaled_learning_rate",
    "Checkpoint",
    "PowerMeter",
    "BatchStream",
    "EvalCallback",
    "evaluate",
    "evaluate_dataset",
    "pretrain",
    "train_to_accuracy",
]
