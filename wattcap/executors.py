"""Deprecated: moved to `wattcap.train.executors`
(the layered layout, see the README's Architecture).
This module re-exports its names and will be removed in a later release."""

import warnings

warnings.warn(
    "wattcap.executors is deprecated: import from wattcap.train.executors",
    DeprecationWarning,
    stacklevel=2,
)

from wattcap.train.executors import (  # noqa: E402
    DEFAULT_LOCAL_CPUS,
    Executor,
    ExecutorError,
    ProcessExecutor,
    R,
    RayExecutor,
    SerialExecutor,
    T,
    get_executor,
    ray_available,
)

__all__ = [
    "DEFAULT_LOCAL_CPUS",
    "Executor",
    "ExecutorError",
    "ProcessExecutor",
    "R",
    "RayExecutor",
    "SerialExecutor",
    "T",
    "get_executor",
    "ray_available",
]
