"""`SessionConfig`: everything a Session is built from, as one checked value.

`Session(...)` takes these fields as keywords (the documented API) and packs them into a
`SessionConfig`; `Session.from_config(config)` takes one directly, e.g. to keep a run's settings
in one object, copy them with `dataclasses.replace`, or build several sessions alike. Building
a config, like building a Session, touches no hardware: a device named here is opened by
`Session.start()`. The meaning of each field is documented on `Session`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wattcap.core.defaults import DEFAULT_BATCH_SIZE_HOLD_S, DEFAULT_MARGIN_SIGMAS
from wattcap.core.metric import MetricError, TargetMetric, metric_named
from wattcap.runtime.cap_follower import CAP_POLICIES
from wattcap.runtime.errors import SessionError

if TYPE_CHECKING:
    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.core.objective import Objective
    from wattcap.core.profile import ProfileTable
    from wattcap.core.run import TrainConfig
    from wattcap.devices.base import Device
    from wattcap.devices.caps import CapSource
    from wattcap.runtime.cap_follower import CapPolicy
    from wattcap.runtime.gns_replan import GnsSettings


@dataclass(frozen=True)
class SessionConfig:
    """The settings of one Session (see `Session` for each field's meaning)."""

    device: Device | str | None = "emulated:jetson-nano"
    model: Any = None
    example_input: Any = None
    model_name: str | None = None
    profile: ProfileTable | str | Path | None = None  # or "auto"
    efficiency: EfficiencyVector | GnsSettings | str | Path | None = None
    power_cap_w: float | None = None
    power_cap: CapSource | str | float | None = None
    objective: Objective | str | None = None
    cap_policy: CapPolicy | None = None
    max_pause_s: float | None = None
    method: str = "wattcap"
    reference_profiles: list[ProfileTable] | None = None
    batch_size: int | None = None
    frequency_hz: int | None = None
    knob_value: int | None = None
    target_accuracy: float | None = None
    #: the metric reported and its direction: "accuracy" (default), "loss", "wer", "f1:100"...
    target_metric: TargetMetric | str = "accuracy"
    sample_budget: int | None = None
    lr_ref: float | None = None
    batch_size_ref: int | None = None
    watchdog: bool = True
    drift_tolerance: float = 0.1
    margin_sigmas: float = DEFAULT_MARGIN_SIGMAS
    risk: float | None = None
    batch_size_hold_s: float = DEFAULT_BATCH_SIZE_HOLD_S
    checkpoint_dir: str | Path | None = None
    identity: dict[str, Any] | None = None
    dataset: str | None = None
    handle_signals: bool = True
    restore: bool = True
    progress: Callable[[Any], None] | None = None
    progress_every: int = 50
    config: TrainConfig | None = None
    weights_source: str | None = None

    def __post_init__(self) -> None:
        if self.power_cap_w is not None and not self.power_cap_w > 0:  # also refuses nan
            raise SessionError(f"the power cap must be a positive number of watts or None, "
                               f"got {self.power_cap_w!r}")
        try:
            metric = (metric_named(self.target_metric) if isinstance(self.target_metric, str)
                      else self.target_metric)
            object.__setattr__(self, "target_metric", metric)  # frozen: set once, resolved
            if self.target_accuracy is not None:
                metric.check_target(self.target_accuracy)
        except MetricError as err:
            raise SessionError(str(err)) from None
        if not self.batch_size_hold_s >= 0:
            raise SessionError(f"batch_size_hold_s must be >= 0 seconds, got "
                               f"{self.batch_size_hold_s!r}")
        if self.drift_tolerance < 0:
            raise SessionError(f"drift_tolerance must be >= 0, got {self.drift_tolerance}")
        if self.risk is not None and not 0 < self.risk < 1:
            raise SessionError(f"risk must be a quantile in (0, 1), e.g. 0.9; got {self.risk}")
        if self.power_cap_w is not None and self.power_cap is not None:
            raise SessionError("give power_cap_w (a constant cap) or power_cap (a cap source), "
                               "not both")
        if self.max_pause_s is not None and not self.max_pause_s > 0:
            raise SessionError(f"max_pause_s must be a positive number of seconds, got "
                               f"{self.max_pause_s!r}")
        if self.cap_policy is not None and self.cap_policy not in CAP_POLICIES:
            raise SessionError(f"unknown cap_policy {self.cap_policy!r}; expected one of "
                               f"{', '.join(CAP_POLICIES)}")
