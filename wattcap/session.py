"""Deprecated: moved to `wattcap.runtime.session`
(the layered layout, see the README's Architecture).
This module re-exports its names and will be removed in a later release."""

import warnings

warnings.warn(
    "wattcap.session is deprecated: import from wattcap.runtime.session",
    DeprecationWarning,
    stacklevel=2,
)

from wattcap.data.loader import (  # noqa: E402
    move_to_device,
)
from wattcap.devices.errors import (  # noqa: E402
    DeviceError,
)
from wattcap.runtime.checkpoint import (  # noqa: E402
    Checkpoint,
    SessionState,
)
from wattcap.runtime.meter import (  # noqa: E402
    MeterState,
    PowerMeter,
)
from wattcap.runtime.session import (  # noqa: E402
    REPLAN_WITHOUT_REPORT_STEPS,
    ProgressCallback,
    Session,
    SessionError,
    SessionStatus,
)

__all__ = [
    "move_to_device",
    "DeviceError",
    "Checkpoint",
    "SessionState",
    "MeterState",
    "PowerMeter",
    "ProgressCallback",
    "REPLAN_WITHOUT_REPORT_STEPS",
    "Session",
    "SessionError",
    "SessionStatus",
]
