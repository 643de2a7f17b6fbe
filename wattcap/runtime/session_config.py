"""`SessionConfig`: everything a Session is built from, as a few checked, typed parts.

A Session takes a device, what is trained (`model`, `example_input`, `model_name`) and one value
per concern:

- `PlanSettings`: what to train at: the profile and efficiency vector Algorithm 1 plans from (or
  a given batch size and knob value), the objective, the margins and the learning-rate rule;
- `CapSettings`: the power cap (constant or moving) and how it is kept (policy, pauses, the
  watchdog, the drift monitor);
- `Goal`: when the run is done (a target on a metric, a sample budget);
- `CheckpointSettings`: where the run is checkpointed, and what a checkpoint must match;
- `Reporting`: progress callbacks, and what the run record names (data set, config, weights);
- `DeviceHandling`: restoring the device and turning signals into a clean exit.

`Session(...)` packs its arguments into a `SessionConfig`; `Session.from_config(config)` takes one
directly, e.g. to keep a run's settings in one object, copy them with `dataclasses.replace`, or
build several sessions alike. Building a config, like building a Session, touches no hardware: a
device named here is opened by `Session.start()`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wattcap.algorithms.transfer import check_factor
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
    from wattcap.runtime.online_correction import CorrectionSettings


@dataclass(frozen=True)
class PlanSettings:
    """What to train at: planned by Algorithm 1, or given.

    Attributes:
        profile: a ProfileTable or its file (or "auto": profile the model on the device when
            the session starts, pruned for the cap, cached for the next session alike).
        efficiency: an EfficiencyVector or its file for Algorithm 1; "gns" (or a
            `wattcap.runtime.gns_replan.GnsSettings`) measures r_b on the run's own data (the
            gradient noise scale over the first samples) and re-plans once.
        method: "wattcap" (Algorithm 1, default), "baseline-1" or "baseline-2".
        objective: what the selection minimises under the cap: an `Objective` or its name
            ("time" by default; "energy"; "cost" needs an `Objective` with eta).
        reference_profiles: the profiles that give the baselines' safe frequency (default:
            computed for emulated devices).
        batch_size, frequency_hz: a given configuration; each overrides the plan's. With a
            batch size and a profile but no frequency, f*(b) under the cap is used. Without a
            profile and without a frequency the device's clock is left as it is.
        knob_value: with a profile of another knob than the GPU clock (a power limit in mW, a
            power mode by id), the value to apply instead of the plan's.
        margin_sigmas: plan this many standard deviations of the sensor noise below the cap.
        risk: plan on this quantile of r_b over its uncertainty (e.g. 0.9) instead of its
            value; None: its value.
        transfer_factor: choose by minimax regret over a target whose B_noise lies up to this
            factor from the proxy's either way (time objective; `algorithms.transfer`);
            None: on the proxy's r_b as it is.
        online_correction: True (or `wattcap.runtime.online_correction.CorrectionSettings`):
            measure the target's noise scale all run long, compare it window by window with
            the proxy's reference in the efficiency vector, and re-plan with r_b moved when
            they part (the loop calls `session.backward`; `algorithms.noise_correction`).
        lr_ref, batch_size_ref: the learning rate at a reference batch size (default: the
            efficiency vector's optimiser settings, else 5e-4 at b = 128); the session's
            `learning_rate` is lr_ref * sqrt(b / b_ref).
    """

    profile: ProfileTable | str | Path | None = None
    efficiency: EfficiencyVector | GnsSettings | str | Path | None = None
    method: str = "wattcap"
    objective: Objective | str | None = None
    reference_profiles: list[ProfileTable] | None = None
    batch_size: int | None = None
    frequency_hz: int | None = None
    knob_value: int | None = None
    margin_sigmas: float = DEFAULT_MARGIN_SIGMAS
    risk: float | None = None
    transfer_factor: float | None = None
    online_correction: bool | CorrectionSettings = False
    lr_ref: float | None = None
    batch_size_ref: int | None = None

    def __post_init__(self) -> None:
        if self.risk is not None and not 0 < self.risk < 1:
            raise SessionError(f"risk must be a quantile in (0, 1), e.g. 0.9; got {self.risk}")
        if self.transfer_factor is not None:
            try:
                check_factor(self.transfer_factor)
            except ValueError:
                raise SessionError("transfer_factor is a ratio >= 1 (e.g. 3); got "
                                   f"{self.transfer_factor}") from None


def _is_watts(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class CapSettings:
    """The power cap and how it is kept.

    Attributes:
        power_cap: None (no cap); a number of watts (a constant cap); or a cap that may move
            during the run: a `wattcap.devices.caps.CapSource` or a spec for
            `parse_cap_source` ("solar:seed=3", "battery:capacity_wh=2,max_w=9",
            "schedule:caps.json", "file:/run/cap"). A moving cap is read once per sensor
            period; on every change the selection re-runs (`policy`), a lower cap is obeyed
            within one period, and the batch size changes at the next step boundary. A cap
            below every configuration pauses training until it rises.
        policy: how a moving cap is followed: "replan" (batch size and frequency, the default
            when the session plans the batch size), "frequency" (the default when it is
            given), "safe-frequency" (the baselines' rule, their default) or "fixed".
        max_pause_s: end a pause under a moving cap that lasts longer than this.
        batch_size_hold_s: under a moving cap, the batch size changes at most once per this
            many device seconds unless the current one cannot meet the cap.
        watchdog: keep the cap (step the frequency down when it is exceeded).
        drift_tolerance: with a profile, re-measure and re-plan when measured step time or
            power leave it by more than this fraction (or the measurement's own noise where
            that is larger; 0: off).
    """

    power_cap: CapSource | str | float | None = None
    policy: CapPolicy | None = None
    max_pause_s: float | None = None
    batch_size_hold_s: float = DEFAULT_BATCH_SIZE_HOLD_S
    watchdog: bool = True
    drift_tolerance: float = 0.1

    def __post_init__(self) -> None:
        if _is_watts(self.power_cap) and not self.power_cap > 0:  # type: ignore[operator]
            raise SessionError(f"the power cap must be a positive number of watts or None, "
                               f"got {self.power_cap!r}")  # `not > 0` also refuses nan
        if not self.batch_size_hold_s >= 0:
            raise SessionError(f"batch_size_hold_s must be >= 0 seconds, got "
                               f"{self.batch_size_hold_s!r}")
        if self.drift_tolerance < 0:
            raise SessionError(f"drift_tolerance must be >= 0, got {self.drift_tolerance}")
        if self.max_pause_s is not None and not self.max_pause_s > 0:
            raise SessionError(f"max_pause_s must be a positive number of seconds, got "
                               f"{self.max_pause_s!r}")
        if self.policy is not None and self.policy not in CAP_POLICIES:
            raise SessionError(f"unknown cap policy {self.policy!r}; expected one of "
                               f"{', '.join(CAP_POLICIES)}")

    @classmethod
    def of(cls, cap: CapSettings | CapSource | str | float | None) -> CapSettings:
        """The settings for `cap`: settings as they are, anything else as the power cap."""
        return cap if isinstance(cap, CapSettings) else cls(power_cap=cap)

    @property
    def constant_w(self) -> float | None:
        """The cap in watts when it is a number (None: no cap, or one that may move)."""
        return float(self.power_cap) if _is_watts(self.power_cap) else None  # type: ignore[arg-type]

    @property
    def moving(self) -> CapSource | str | None:
        """The cap source or its spec when the cap is not a plain number."""
        return None if self.power_cap is None or _is_watts(self.power_cap) else \
            self.power_cap  # type: ignore[return-value]


@dataclass(frozen=True)
class Goal:
    """When the run is done.

    Attributes:
        target_accuracy: the target on `target_metric` (None: none): "accuracy" (default, in
            (0, 1], reached at or above), or another metric by name ("loss", "wer",
            "perplexity": reached at or below; "f1:100": F1 on 0-100); the session's `report`
            takes that metric's value.
        target_metric: the metric reported, by name or as a `TargetMetric`.
        sample_budget: stop after this many samples.
    """

    target_accuracy: float | None = None
    target_metric: TargetMetric | str = "accuracy"
    sample_budget: int | None = None

    def __post_init__(self) -> None:
        try:
            metric = (metric_named(self.target_metric) if isinstance(self.target_metric, str)
                      else self.target_metric)
            object.__setattr__(self, "target_metric", metric)  # frozen: set once, resolved
            if self.target_accuracy is not None:
                metric.check_target(self.target_accuracy)
        except MetricError as err:
            raise SessionError(str(err)) from None

    @property
    def metric(self) -> TargetMetric:
        """The target metric, resolved."""
        assert isinstance(self.target_metric, TargetMetric)  # resolved in __post_init__
        return self.target_metric


@dataclass(frozen=True)
class CheckpointSettings:
    """Where the run is checkpointed (`attach`/`save_checkpoint`; a restart resumes).

    Attributes:
        directory: the checkpoint directory (None: no checkpoints).
        identity: what makes a checkpoint belong to this run (default: model, batch size,
            learning rate, target); a checkpoint of another identity is refused.
    """

    directory: str | Path | None = None
    identity: dict[str, Any] | None = None

    @classmethod
    def of(cls, checkpoint: CheckpointSettings | str | Path | None) -> CheckpointSettings:
        """The settings for `checkpoint`: settings as they are, a path as the directory."""
        return checkpoint if isinstance(checkpoint, CheckpointSettings) else \
            cls(directory=checkpoint)


@dataclass(frozen=True)
class Reporting:
    """What the run reports as it goes and what its record names.

    Attributes:
        progress: called with a `SessionStatus` at every report and every `progress_every`
            steps.
        progress_every: steps between progress calls.
        dataset, config, weights_source: the data set, training config and starting weights
            the run record names.
    """

    progress: Callable[[Any], None] | None = None
    progress_every: int = 50
    dataset: str | None = None
    config: TrainConfig | None = None
    weights_source: str | None = None

    @classmethod
    def of(cls, reporting: Reporting | Callable[[Any], None] | None) -> Reporting:
        """The settings for `reporting`: settings as they are, a callable as the progress
        callback."""
        return reporting if isinstance(reporting, Reporting) else cls(progress=reporting)


@dataclass(frozen=True)
class DeviceHandling:
    """How the session treats the device around the run.

    Attributes:
        restore: put the device back as it was found on exit.
        handle_signals: turn SIGINT/SIGTERM/SIGHUP into an exception inside the block (main
            thread only), so the device is restored however the run ends.
    """

    restore: bool = True
    handle_signals: bool = True


@dataclass(frozen=True)
class SessionConfig:
    """The settings of one Session (see `Session` for the arguments' meaning)."""

    device: Device | str | None = "emulated:jetson-nano"
    model: Any = None
    example_input: Any = None
    model_name: str | None = None
    planning: PlanSettings = field(default_factory=PlanSettings)
    cap: CapSettings = field(default_factory=CapSettings)
    goal: Goal = field(default_factory=Goal)
    checkpoint: CheckpointSettings = field(default_factory=CheckpointSettings)
    reporting: Reporting = field(default_factory=Reporting)
    device_handling: DeviceHandling = field(default_factory=DeviceHandling)

    def __post_init__(self) -> None:
        # the shorthands the Session takes (watts or a cap spec, a checkpoint path, a progress
        # callback) become their parts here, once
        object.__setattr__(self, "cap", CapSettings.of(self.cap))
        object.__setattr__(self, "checkpoint", CheckpointSettings.of(self.checkpoint))
        object.__setattr__(self, "reporting", Reporting.of(self.reporting))
        for name, kind in (("planning", PlanSettings), ("goal", Goal),
                           ("device_handling", DeviceHandling)):
            value = getattr(self, name)
            if value is None:
                object.__setattr__(self, name, kind())
            elif not isinstance(value, kind):
                raise SessionError(f"{name} must be a {kind.__name__}, got "
                                   f"{type(value).__name__}")
