"""`wattcap.Session`: the one runtime every training loop goes through.

A user's own loop, wattcap's `train_to_accuracy`, the Lightning callback and the Hugging Face
callback all drive the same object:

    with wattcap.Session("emulated:jetson-nano", model=net, example_input=x0,
                         profile="nano.json", efficiency="eff.json", power_cap_w=5.0,
                         target_accuracy=0.9) as session:
        net.to(session.torch_device)
        opt = torch.optim.Adam(net.parameters(), lr=session.learning_rate)
        loader = DataLoader(train_set, batch_size=session.batch_size, shuffle=True)
        for x, y in loader:
            x, y = session.to_device(x, y)
            with session.step():
                opt.zero_grad(); loss_fn(net(x), y).backward(); opt.step()
            if session.steps % 50 == 0:
                session.report(evaluate(net))
            if session.done:
                break
    print(session.record.time_to_accuracy_s)

What it does: plans (Algorithm 1 from a profile and an efficiency vector, or takes a given
(b, f)), applies the frequency, exposes the batch size and the square-root-scaled learning
rate, accounts every step (device time, samples, power, energy), keeps the accuracy curve and
samples-to-target, runs the cap watchdog and the drift monitor on the sensor ticks, checkpoints
and resumes, and leaves a `RunRecord`. On exit — normal, exception, SIGINT, SIGTERM or SIGHUP —
it puts the device back as it found it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wattcap.core.defaults import (
    DEFAULT_BATCH_SIZE_HOLD_S,
    DEFAULT_BATCH_SIZE_REF,
    DEFAULT_LR_REF,
    DEFAULT_MARGIN_SIGMAS,
)
from wattcap.core.knob import KnobKind, knob_unit, require_clock
from wattcap.core.metric import ACCURACY, MetricError, TargetMetric
from wattcap.core.objective import Objective
from wattcap.core.progress import percent
from wattcap.core.run import CurvePoint, RunRecord, TrainConfig, scaled_learning_rate
from wattcap.core.schema import WattcapFileError
from wattcap.data.loader import move_to_device
from wattcap.devices.base import Device, configure_cuda_backends, out_of_memory_as_device_error
from wattcap.devices.caps import CapSource
from wattcap.devices.errors import DeviceError
from wattcap.devices.signals import exit_cleanly_on_signals
from wattcap.runtime.cap_control import CapControl
from wattcap.runtime.cap_follower import (
    CapPolicy,
)
from wattcap.runtime.checkpoint import Checkpoint, SessionState
from wattcap.runtime.checkpointing import Checkpointing
from wattcap.runtime.device_guard import DeviceGuard
from wattcap.runtime.errors import SessionError
from wattcap.runtime.gns_part import NoiseScalePart
from wattcap.runtime.meter import MeterState, PowerMeter
from wattcap.runtime.model_source import (
    ModelSourceError,
    module_step_factory,
    module_workload,
    resolve_model,
)
from wattcap.runtime.record_builder import RecordBuilder
from wattcap.runtime.session_config import SessionConfig
from wattcap.runtime.watchdog import CapWatchdog, DriftMonitor

if TYPE_CHECKING:
    import torch

    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.core.plan import Choice, Plan
    from wattcap.core.profile import ProfileTable
    from wattcap.devices.workload import StepCost, Workload
    from wattcap.runtime.cap_follower import CapFollower
    from wattcap.runtime.gns_replan import GnsSettings, NoiseScaleReplan
    from wattcap.runtime.noise_scale import LossOf


#: a loop that never reports an accuracy still gets a due re-plan after this many steps
REPLAN_WITHOUT_REPORT_STEPS = 200




@dataclass
class SessionStatus:
    """A snapshot for progress displays."""

    samples: int
    steps: int
    device_time_s: float
    accuracy: float | None
    target_accuracy: float | None
    power_w: float | None
    power_cap_w: float | None
    frequency_hz: int | None
    batch_size: int
    sample_budget: int | None
    #: training is paused: the cap is below what any configuration can meet
    paused: bool = False
    #: where a resumed run picked up, shown with the first status after the resume
    resumed_from_samples: int | None = None
    #: the metric `accuracy` and `target_accuracy` are values of
    target_metric: TargetMetric = ACCURACY


    # -- the ProgressUpdate protocol (wattcap.core.progress): samples of the budget ----------
    @property
    def done(self) -> float:
        """Samples trained (a `ProgressUpdate`)."""
        return self.samples

    @property
    def total(self) -> float | None:
        """The sample budget (a `ProgressUpdate`)."""
        return self.sample_budget

    @property
    def unit(self) -> str:
        """What `done` counts (a `ProgressUpdate`)."""
        return "samples"

    @property
    def item(self) -> SessionStatus:
        """The status itself (a `ProgressUpdate`)."""
        return self

    @property
    def detail(self) -> str:
        """Accuracy against the target, power against the cap, clock, device time."""
        parts = ["paused: the cap is below every configuration"] if self.paused else []
        if self.resumed_from_samples is not None:
            parts.append(f"resumed from the checkpoint at {self.resumed_from_samples} samples")
        if self.accuracy is not None and self.target_metric.is_accuracy:
            parts.append(f"accuracy {percent(self.accuracy, 1)}"
                         + (f" (target {percent(self.target_accuracy)})"
                            if self.target_accuracy is not None else ""))
        elif self.accuracy is not None:
            parts.append(f"{self.target_metric.name} {self.accuracy:.4g}"
                         + (f" (target {self.target_metric.describe(self.target_accuracy)})"
                            if self.target_accuracy is not None else ""))
        if self.power_w is not None:
            parts.append(f"{self.power_w:.2f} W"
                         + (f" (cap {self.power_cap_w:g} W)" if self.power_cap_w else ""))
        if self.frequency_hz is not None:
            parts.append(f"{self.frequency_hz / 1e6:.0f} MHz")
        parts.append(f"{self.device_time_s:.1f} s of device time")
        return ", ".join(parts)


#: a Session's progress: the one protocol of every long job, each update a `SessionStatus`
ProgressCallback = Callable[[SessionStatus], None]


class Session:
    """The runtime of one training run on one device: see the module docstring.

    Arguments:
        device: a Device, a name for `wattcap.devices.get_device` ("emulated:jetson-nano",
            "jetson", "nvml:0", "auto"; the Session then owns it and closes it), or None for a
            run without a device (math only: no time, power or clocks; the model runs on CUDA
            when torch has it, else on the CPU).
        model: what is trained: a registered model name or `file.py:factory` spec, a
            `ModelSpec`, or an `nn.Module` (with `example_input`, one batch of inputs, and
            `model_name`, the name its profile was made under; default: its class path).
            The emulated device needs it (its time and power come from the model's FLOPs and
            bytes); on real hardware it names the run and enables the drift re-measure.
        profile, efficiency: a ProfileTable and an EfficiencyVector (objects or file paths)
            for Algorithm 1; `method` picks "wattcap" (default), "baseline-1", "baseline-2".
            `efficiency="gns"` (or a `wattcap.runtime.gns_replan.GnsSettings`) measures r_b on the
            run's own data instead: the gradient noise scale over the first samples (the
            loop calls `session.backward(loss_of, x, y)` for its backward pass), then
            Algorithm 1 re-plans the batch size and frequency once, re-scaling the attached
            optimiser's learning rate (its state kept); read `batch_size` after each report.
            `profile="auto"` profiles the model on the device first (pruned for the cap),
            and caches the profile for the next session with the same device, power mode,
            model workload and cap.
        power_cap_w: the cap in watts (None: no cap). `reference_profiles` gives the
            baselines' safe frequency (default: computed for emulated devices).
        power_cap: instead of `power_cap_w`, a cap that may move during the run: a
            `wattcap.devices.caps.CapSource`, a spec for `parse_cap_source` ("solar:seed=3",
            "battery:capacity_wh=2,max_w=9", "schedule:caps.json", "file:/run/cap") or a
            number. It is read once per sensor period on the device clock; on every change
            the selection re-runs (`cap_policy`), a lower cap is obeyed within one period by
            lowering the frequency at once, and the batch size (with its learning rate)
            changes at the next step boundary: read `batch_size` each iteration (or use
            `wattcap.runtime.sampling.SessionBatchSampler`) and call
            `apply_learning_rate(optimizer)`.
            A cap below every configuration pauses training (the device idles at its lowest
            frequency between steps) until it rises; `max_pause_s` ends a pause that lasts
            too long, and a cap that can never rise again (an empty battery) ends the run:
            `done` turns true.
        objective: what the selection minimises under the cap: an `Objective` or its name
            ("time", the paper's, by default; "energy"; "cost" needs an `Objective` with eta).
        cap_policy: how a moving cap is followed: "replan" (batch size and frequency, the
            default when the session plans the batch size), "frequency" (the batch size
            stays, the default when it is given), "safe-frequency" (the baselines' rule, the
            default for them) or "fixed" (nothing changes; paused while the cap is below the
            run's configuration).
        knob_value: with a profile of another knob than the GPU clock (a power limit in mW,
            a power mode by id: `wattcap.core.knob`), the value to apply instead of the
            plan's; the Session applies the planned value (the clock is left to the board)
            and restores what it found. Moving caps, drift re-plans and efficiency="gns"
            act on clocks and refuse such a profile.
        batch_size, frequency_hz: a given configuration; each overrides the plan's. With a
            batch size and a profile but no frequency, f*(b) under the cap is used. Without a
            profile and without a frequency the device's clock is left as it is.
        target_accuracy, sample_budget: when `done` turns true. The target is on
            `target_metric`: "accuracy" (default, in (0, 1], reached at or above), or another
            metric by name ("loss", "wer", "perplexity": reached at or below; "f1:100": F1
            on 0-100); `report` takes that metric's value.
        lr_ref, batch_size_ref: the learning rate at a reference batch size (default: the
            efficiency vector's optimiser settings, else 5e-4 at b = 128 as in the paper);
            `learning_rate` is lr_ref · sqrt(b / b_ref).
        watchdog: keep the cap (steps the frequency down when it is exceeded).
        margin_sigmas: plan this many standard deviations of the sensor noise below the cap
            (the profile's estimate; default 2).
        risk: plan on this quantile of r_b over its uncertainty (0.9: guard against a batch
            size whose r_b is poorly known) instead of its value; also when re-planning
            under a moving cap. None (default): r_b's value.
        batch_size_hold_s: under a moving cap, the batch size changes at most once per this
            many device seconds (default 30) unless the current one cannot meet the cap.
        drift_tolerance: with a profile, re-measure and re-plan when measured step time or
            power leave it by more than this fraction, or by more than the measurement's own
            noise where that is larger (`wattcap.algorithms.drift`; 0: off).
        checkpoint_dir: where `attach`/`save_checkpoint` keep the run; a restart resumes.
        identity: what makes a checkpoint belong to this run (default: model, batch size,
            learning rate, target); a checkpoint of another identity is refused.
        handle_signals: turn SIGINT/SIGTERM/SIGHUP into an exception inside the block (main
            thread only), so the device is restored however the run ends.
        restore: put the device back on exit (default True).
        progress: called with a `SessionStatus` at every report and every `progress_every`
            steps.
    """

    def __init__(
        self,
        device: Device | str | None = "emulated:jetson-nano",
        *,
        model: Any = None,
        example_input: Any = None,
        model_name: str | None = None,
        profile: ProfileTable | str | Path | None = None,  # or "auto"
        efficiency: EfficiencyVector | GnsSettings | str | Path | None = None,
        power_cap_w: float | None = None,
        power_cap: CapSource | str | float | None = None,
        objective: Objective | str | None = None,
        cap_policy: CapPolicy | None = None,
        max_pause_s: float | None = None,
        method: str = "wattcap",
        reference_profiles: list[ProfileTable] | None = None,
        batch_size: int | None = None,
        frequency_hz: int | None = None,
        knob_value: int | None = None,
        target_accuracy: float | None = None,
        target_metric: TargetMetric | str = "accuracy",
        sample_budget: int | None = None,
        lr_ref: float | None = None,
        batch_size_ref: int | None = None,
        watchdog: bool = True,
        drift_tolerance: float = 0.1,
        margin_sigmas: float = DEFAULT_MARGIN_SIGMAS,
        batch_size_hold_s: float = DEFAULT_BATCH_SIZE_HOLD_S,
        checkpoint_dir: str | Path | None = None,
        risk: float | None = None,
        identity: dict[str, Any] | None = None,
        dataset: str | None = None,
        handle_signals: bool = True,
        restore: bool = True,
        progress: ProgressCallback | None = None,
        progress_every: int = 50,
        config: TrainConfig | None = None,
        weights_source: str | None = None,
    ) -> None:
        self._build(SessionConfig(
            device=device, model=model, example_input=example_input, model_name=model_name,
            profile=profile, efficiency=efficiency, power_cap_w=power_cap_w,
            power_cap=power_cap, objective=objective, cap_policy=cap_policy,
            max_pause_s=max_pause_s, method=method, reference_profiles=reference_profiles,
            batch_size=batch_size, frequency_hz=frequency_hz, knob_value=knob_value,
            target_accuracy=target_accuracy, target_metric=target_metric,
            sample_budget=sample_budget, lr_ref=lr_ref,
            batch_size_ref=batch_size_ref, watchdog=watchdog, drift_tolerance=drift_tolerance,
            margin_sigmas=margin_sigmas, batch_size_hold_s=batch_size_hold_s,
            checkpoint_dir=checkpoint_dir, identity=identity, risk=risk,
            dataset=dataset, handle_signals=handle_signals, restore=restore,
            progress=progress, progress_every=progress_every, config=config,
            weights_source=weights_source))

    @classmethod
    def from_config(cls, config: SessionConfig) -> Session:
        """A Session built from a `SessionConfig` (the same as passing its fields as
        keywords). Like the constructor, it opens no device: `start()` does."""
        session = cls.__new__(cls)
        session._build(config)
        return session

    def _build(self, cfg: SessionConfig) -> None:
        """Set up the parts and the run state from a checked config; plan now from given files
        (profile="auto" waits for start(), which measures the device first)."""
        self.settings = cfg
        device = cfg.device
        # A device given by name is opened by start(), never here: building a Session touches
        # no hardware (the name is enough to plan from given files).
        self._owns_device = isinstance(device, str)
        self._device_name: str | None = device if isinstance(device, str) else None
        self.device: Device | None = None if isinstance(device, str) else device
        self._has_device = device is not None
        self.power_cap_w = cfg.power_cap_w
        self.method = cfg.method
        self.target_accuracy = cfg.target_accuracy
        assert isinstance(cfg.target_metric, TargetMetric)  # resolved by SessionConfig
        self.target_metric: TargetMetric = cfg.target_metric
        self.sample_budget = cfg.sample_budget
        self.dataset = cfg.dataset
        self.config = cfg.config
        self.weights_source = cfg.weights_source
        self.progress = cfg.progress
        self.progress_every = max(1, cfg.progress_every)
        self._handle_signals = cfg.handle_signals
        self._restore = cfg.restore
        self._checkpoint = Checkpoint(Path(cfg.checkpoint_dir)) if cfg.checkpoint_dir else None

        # set by the cap part (CapControl.init) when the plan is made
        self.objective: Objective = Objective.of("time")
        self.cap_source: CapSource | None = None
        self.cap_policy: CapPolicy = "replan"
        self.max_pause_s: float | None = None
        self._follower: CapFollower | None = None
        # the parts, each with one job (their state lives on the session, read by all)
        self._cap = CapControl(self)
        self._checkpointing = Checkpointing(self)
        self._noise = NoiseScalePart(self)
        self._records = RecordBuilder(self)
        self._guard_part = DeviceGuard(self)

        self._watchdog_on = cfg.watchdog
        self._drift_tolerance = cfg.drift_tolerance
        self.margin_sigmas = cfg.margin_sigmas
        self.risk = cfg.risk
        self.batch_size_hold_s = cfg.batch_size_hold_s

        # run state
        self.samples = 0
        self.steps = 0
        self.curve: list[CurvePoint] = []
        self._crossing: tuple[tuple, float | None] | None = None
        self.device_time_s = 0.0
        self.events: list[str] = []
        self.resumed_from_samples: int | None = None
        self.record: RunRecord | None = None
        self._meter = PowerMeter(self.device.sensor_period_s if self.device is not None else 0.0)
        self._guard: CapWatchdog | None = None
        self._monitor: DriftMonitor | None = None
        self._stack: ExitStack | None = None
        self._timer: Any = None
        self._step_start_s = 0.0
        self._counter_start_j: float | None = None
        self._energy_before_j = 0.0
        self._wall_start = time.monotonic()
        self._attached: tuple[Any, Any] | None = None
        self._steps_since_report = 0
        self._watch_since_s = 0.0
        self._resumed_at_steps = -1
        self._costs: dict[int, StepCost] = {}
        self._open = False

        # what is trained, and the plan
        self.model_name: str | None = None
        self.architecture_fingerprint: str | None = None
        self._measure_workload: Callable[[], Workload] | None = None
        self._workload: Workload | None = None
        self._step_factory: Callable[[int, str], Callable[[], object]] | None = None
        self._model_name_override = cfg.model_name
        self.identity: dict[str, Any] = {}
        if cfg.model is not None:
            self.adopt_model(cfg.model, cfg.example_input)
        self._gns_settings = _gns_settings(cfg.efficiency)
        self.efficiency = None if self._gns_settings is not None else \
            _load_efficiency(cfg.efficiency)
        self._gns: NoiseScaleReplan | None = None
        self._reference_profiles = cfg.reference_profiles
        self.plan: Plan | None = None
        self.choice: Choice | None = None
        self._batch_size: int | None = cfg.batch_size
        self.frequency_hz: int | None = cfg.frequency_hz
        #: the profile's knob; for another than the clock, the value applied (mW, mode id)
        self.knob_kind: KnobKind = "gpu_clock"
        self.knob_value: int | None = cfg.knob_value
        # profile="auto" measures the device: that waits for start(); given files plan now
        self._profile_pending = cfg.profile == "auto"
        self.profile = None if self._profile_pending else _load_profile(cfg.profile)
        if not self._profile_pending:
            self._make_plan()

    def _make_plan(self) -> None:
        """Check the profile against the model (and the device, once open), resolve the cap,
        run Algorithm 1 (or take the given configuration), and derive the learning rate."""
        planning = self.settings  # read once the profile is known (now, or in start())
        if self.profile is not None:
            self._take_knob(self.profile.knob_kind, planning.frequency_hz)
        elif planning.knob_value is not None:
            raise SessionError("knob_value is a value of a profile's knob: give the profile")
        if self.profile is not None and self.device is not None:
            self.profile.check_matches(device=self.device.name, source="profile")
        if self.profile is not None and self.model_name is not None:
            self.profile.check_matches(model=self.model_name, source="profile",
                                       architecture_fingerprint=self.architecture_fingerprint)
        self._cap.init(planning.power_cap, planning.objective, planning.cap_policy,
                       planning.max_pause_s, batch_size_given=planning.batch_size is not None)
        if self.cap_source is not None:  # its re-plans act on clocks: refused now, not later
            require_clock(self.knob_kind, "following a moving cap")
        self.batch_size, value = self._decide(
            planning.batch_size,
            planning.frequency_hz if self.knob_kind == "gpu_clock" else self.knob_value,
            self._reference_profiles)
        if self.knob_kind == "gpu_clock":
            self.frequency_hz = value
        else:  # the clock is left to the board: the limit or the mode bounds it
            self.knob_value = value
        self.lr_ref = planning.lr_ref if planning.lr_ref is not None else (
            self.efficiency.lr_ref if self.efficiency is not None else DEFAULT_LR_REF)
        self.batch_size_ref = planning.batch_size_ref if planning.batch_size_ref is not None \
            else (self.efficiency.batch_size_ref if self.efficiency is not None
                  else DEFAULT_BATCH_SIZE_REF)
        self.identity = planning.identity if planning.identity is not None else {
            "model": self.model_name, "batch_size": self.batch_size,
            "learning_rate": self.learning_rate, "target_accuracy": self.target_accuracy,
        }
        if planning.identity is None and not self.target_metric.is_accuracy:
            # named only where it is not accuracy: earlier checkpoints keep their identity
            self.identity["target_metric"] = self.target_metric.model_dump()
        if self._gns_settings is not None:
            self._noise.start(self._gns_settings, self._reference_profiles)

    @property
    def batch_size(self) -> int:
        """The batch size of the plan (it may change during a run: read it each iteration)."""
        if self._batch_size is None:
            raise SessionError("profile='auto': the batch size is planned when the session "
                               "starts (it profiles the device first); call start(), or use "
                               "the session in a `with` block, before reading it")
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: int) -> None:
        self._batch_size = value

    def _open_device(self) -> None:
        """Open the device given by name (the Session then closes it on exit)."""
        if self._device_name is None or self.device is not None:
            return
        from wattcap.devices import get_device

        self.device = get_device(self._device_name)
        self._meter.period_s = self.device.sensor_period_s

    def _auto_profile(self, batch_size: int | None) -> ProfileTable:
        """Profile the model on the device now (pruned for the cap; every point without one),
        or reuse the profile an earlier session cached for the same device, power mode, model
        workload and cap."""
        import hashlib

        from wattcap.core.profile import ProfileTable
        from wattcap.devices.workload import DEFAULT_BATCH_SIZES
        from wattcap.measure.profiling import Profiler
        from wattcap.measure.references import cache_dir

        device, workload = self.device, self.workload
        if device is None or self.model_name is None or workload is None:
            raise SessionError("profile='auto' needs a device and a model (an nn.Module with "
                               "example_input=, or a model name) to profile")
        sizes = DEFAULT_BATCH_SIZES if batch_size is None else (batch_size,)
        key = json.dumps([device.name, device.power_mode, self.model_name, workload.to_dict(),
                          self.power_cap_w, list(sizes)], sort_keys=True)
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        safe_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.model_name)
        path = cache_dir() / "profiles" / f"{device.name}-{safe_name}-{digest}.json"
        if path.exists():
            try:
                table = ProfileTable.load(path)
                self.events.append(f"profile reused from {path}")
                return table
            except WattcapFileError:
                pass  # stale or corrupt: measure again
        profiler = Profiler(device, self.model_name, batch_sizes=tuple(sizes),
                            workload=workload, step_factory=self._step_factory)
        table = profiler.run(power_cap_w=self.power_cap_w)
        table.save(path)
        self.events.append(
            f"profiled {self.model_name} on {device.name}: {table.points_measured} points "
            f"({table.mode}) in {table.profiling_device_s:.1f} s of device time; cached in "
            f"{path}")
        return table

    # -- planning --------------------------------------------------------------------------------
    def _take_knob(self, kind: KnobKind, frequency_hz: int | None) -> None:
        """The profile's knob; another than the clock is refused where the Session would act
        on clocks (a given clock, the gradient-noise re-plan)."""
        self.knob_kind = kind
        if kind == "gpu_clock":
            if self.settings.knob_value is not None:
                raise SessionError("knob_value is for a profile of a power limit or power "
                                   "mode; this profile varies the GPU clock: give frequency_hz")
            return
        what = knob_unit(kind).label
        if frequency_hz is not None:
            raise SessionError(f"this profile varies the {what}, and the clock is left to the "
                               "board under it: give knob_value, not frequency_hz")
        if self._gns_settings is not None:
            require_clock(kind, 'efficiency="gns" (its re-plan)')

    def _decide(self, batch_size: int | None, frequency_hz: int | None,
                reference_profiles: list[ProfileTable] | None) -> tuple[int, int | None]:
        profile = self.profile
        if profile is not None and (batch_size is None or frequency_hz is None):
            from wattcap.algorithms.planner import plan
            from wattcap.core.plan import InfeasibleCapError
            from wattcap.measure.references import reference_profiles_for

            refs = reference_profiles if reference_profiles is not None else \
                reference_profiles_for(profile)
            try:
                self.plan = plan(profile, self.power_cap_w, efficiency=self.efficiency,
                                 reference_profiles=refs, objective=self.objective,
                                 margin_sigmas=self.margin_sigmas, risk=self.risk)
            except InfeasibleCapError as err:
                raise SessionError(str(err)) from None
            self.events += [f"plan: {note}" for note in self.plan.notes]
            if batch_size is not None:
                from wattcap.algorithms.planner import with_power_margin

                margined = with_power_margin(profile, self.margin_sigmas)
                point = margined.frontier(self.power_cap_w).get(batch_size)
                if point is None:
                    raise SessionError(
                        f"batch size {batch_size} has no measured frequency under the cap "
                        f"{self.power_cap_w} W in the profile")
                return batch_size, frequency_hz if frequency_hz is not None else \
                    point.knob_value
            if self.method not in self.plan.choices:
                why = self.plan.unavailable.get(self.method, "unknown method")
                raise SessionError(f"{self.method} has no choice under this cap: {why}")
            self.choice = self.plan.choices[self.method]
            return self.choice.batch_size, frequency_hz if frequency_hz is not None else \
                self.choice.knob_value
        if batch_size is None:
            raise SessionError("give a profile to plan the batch size and frequency, or a "
                               "batch_size (and a frequency_hz)")
        if batch_size < 1:
            raise SessionError(f"batch size must be positive, got {batch_size}")
        return batch_size, frequency_hz

    def adopt_model(self, model: Any, example_input: Any = None) -> None:
        """Set what is trained (for sessions built before the model exists: the framework
        callbacks plan when they are built and get the model when training starts)."""
        try:
            self.model_name, self._measure_workload = resolve_model(
                model, example_input, self._model_name_override)
        except ModelSourceError as err:
            raise SessionError(str(err)) from None
        self._workload = None
        self._costs.clear()
        import torch

        if isinstance(model, torch.nn.Module) and example_input is not None:
            self._step_factory = module_step_factory(model, example_input)
        self.architecture_fingerprint = _fingerprint(model, self.model_name)
        profile = getattr(self, "profile", None)
        if profile is not None and self.model_name is not None:
            profile.check_matches(model=self.model_name, source="profile",
                                  architecture_fingerprint=self.architecture_fingerprint)
        if self.identity and self.identity.get("model") is None:
            self.identity["model"] = self.model_name

    def provide_example_input(self, model: Any, example_input: Any) -> None:
        """Give an example batch for an `nn.Module` model whose workload is not known yet (the
        framework callbacks pass the first training batch)."""
        if self._measure_workload is None and self._workload is None:
            self._measure_workload = module_workload(model, example_input,
                                                     self.model_name or "model")
            if self._step_factory is None and example_input is not None:
                self._step_factory = module_step_factory(model, example_input)

    @property
    def workload(self) -> Workload | None:
        """The model's training workload (FLOPs, bytes, kernels), measured on first use."""
        if self._workload is None and self._measure_workload is not None:
            self._workload = self._measure_workload()
        return self._workload

    @property
    def learning_rate(self) -> float:
        """lr_ref · sqrt(b / b_ref): square-root scaling for Adam/AdamW."""
        return scaled_learning_rate(self.lr_ref, self.batch_size_ref, self.batch_size)

    @property
    def torch_device(self) -> str:
        """Where the model and every batch go ("cpu", "cuda", "cuda:N")."""
        if self.device is not None:
            return self.device.torch_device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> Session:
        self.start()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.close(failed=exc_type is not None)

    def start(self) -> None:
        """Open the device (given by name), profile it (profile="auto") and plan, apply the
        frequency, start the watch; `close` undoes it (a `with` block does both)."""
        if self._open:
            raise SessionError("the session is already running")
        stack = ExitStack()
        stack_has_restore = False
        try:
            if self._device_name is not None and self.device is None:
                self._open_device()
                stack_has_restore = True
                if self._restore:  # close what this session opened, whatever happens next
                    stack.callback(self._guard_part.restore)
                if self.profile is not None and self.device is not None:
                    self.profile.check_matches(device=self.device.name, source="profile")
            if self._profile_pending:
                self.profile = self._auto_profile(self.settings.batch_size)
                self._profile_pending = False
                self._make_plan()
            if self._handle_signals:
                stack.enter_context(exit_cleanly_on_signals())
            device = self.device
            if device is not None:
                if self._restore and not stack_has_restore:
                    stack.callback(self._guard_part.restore)
                if self.frequency_hz is not None:
                    self._guard_part.apply_frequency(self.frequency_hz, "plan")
                self._guard_part.apply_backstop()
                if self.knob_value is not None:  # after the backstop: the plan's limit wins
                    self._guard_part.apply_knob(self.knob_kind, self.knob_value)
                configure_cuda_backends(device.torch_device)  # as the profile was timed
                self._counter_start_j = device.energy_counter_j()
                self._watch_since_s = device.now_s()  # liveness: a reading due from here on
                stack.enter_context(device.sensor_ticks(self._meter))
                if self._watchdog_on:
                    self._guard = CapWatchdog(device, self.power_cap_w,
                                              frequency_for_cap=self._guard_part.fstar_for_cap,
                                              stop_at_floor=self.cap_source is None)
                    stack.enter_context(device.sensor_ticks(self._guard))
                if self.profile is not None and self._drift_tolerance > 0:
                    self._monitor = self._guard_part.make_monitor()
                    if self._monitor is not None:
                        stack.enter_context(device.sensor_ticks(self._monitor))
                self._cap.start_follower(stack)
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        self._open = True
        self._wall_start = time.monotonic()




    def close(self, failed: bool = False) -> RunRecord | None:
        """Stop the watch, build the RunRecord, restore the device. Idempotent."""
        if not self._open:
            return self.record
        self._open = False
        try:
            if self.device is not None:
                self.device_time_s += self.device.flush_timing()
            if self._guard is not None:
                self._guard.finish()
            try:
                self.record = self._records.build()
                self._cap.add_history(self.record)
            except Exception:  # noqa: BLE001 - a failed run must still restore the device
                if not failed:
                    raise
        finally:
            stack, self._stack = self._stack, None
            if stack is not None:
                stack.close()
        return self.record

    # -- moving data -----------------------------------------------------------------------------
    def to_device(self, *tensors: torch.Tensor) -> Any:
        """Move tensors to `torch_device` (pinned memory and non-blocking copies on CUDA);
        one tensor in, one out; several in, a tuple out."""
        target = self.torch_device
        moved = tuple(move_to_device(t, target) for t in tensors)
        return moved[0] if len(moved) == 1 else moved

    def prepare(self, model: torch.nn.Module) -> torch.nn.Module:
        """Put a model on `torch_device` (returns it)."""
        return model.to(self.torch_device)

    # -- steps -----------------------------------------------------------------------------------
    def _cost(self, batch_size: int) -> StepCost:
        cost = self._costs.get(batch_size)
        if cost is None:
            workload = self.workload
            if workload is not None:
                overhead = getattr(getattr(self.device, "spec", None),
                                   "allocator_overhead_factor", 1.0)
                cost = workload.step_cost(batch_size, overhead)
            elif self.device is not None and not self.device.timing_needs_real_work:
                raise SessionError(
                    f"the {self.device.kind} device models a step's time and power from the "
                    "model's workload: pass model= (a name, a ModelSpec, or an nn.Module with "
                    "example_input=, one batch of inputs)")
            else:
                from wattcap.devices.workload import StepCost

                cost = StepCost(batch_size=batch_size, flops=0.0, dram_bytes=0.0,
                                optimizer_bytes=0.0, kernels=0, flops_per_kernel_per_sample=0.0,
                                memory_needed_bytes=0)
            self._costs[batch_size] = cost
        return cost

    def begin_step(self, samples: int | None = None) -> None:
        """Mark the start of one optimiser step (for loops that cannot use `step()`); its
        device cost is that of a batch of `samples` (default: the batch size)."""
        if not self._open:
            raise SessionError("use the session in a `with` block (or call start()) first")
        self._cap.before_step()
        if self.device is not None:
            self._step_start_s = self.device.now_s()
            self._timer = self.device.begin_step(self._cost(samples or self.batch_size))

    def end_step(self, samples: int | None = None) -> float:
        """Account the step begun with `begin_step`: `samples` trained (default: the batch
        size); returns its device seconds. Raises if the power watch failed meanwhile."""
        busy_s = 0.0
        device = self.device
        if device is not None:
            busy_s = device.end_step(self._timer)
            self._timer = None
            self.device_time_s += busy_s
            if self._monitor is not None and self.measuring_noise_scale:
                # a measured step runs chunked: slower than the profile's step, not drift
                self._monitor.restart_window()
            elif self._monitor is not None:
                self._monitor.on_step(self._step_start_s, device.now_s(), busy_s,
                                      samples=samples, timed_steps=device.accounted_steps)
        trained = self.batch_size if samples is None else samples
        self.samples += trained
        self.steps += 1
        self._steps_since_report += 1
        if device is not None:
            # the step is done and counted: a failed watch stops the run here, in a safe state
            self._guard_part.check_watch()
        self._cap.after_step(trained, busy_s)
        if self._monitor is not None and self._monitor.pending is not None \
                and self._steps_since_report >= REPLAN_WITHOUT_REPORT_STEPS:
            self._replan_if_due()  # a loop that never reports still gets its re-plan
        if self.progress is not None and self.steps % self.progress_every == 0:
            self.progress(self.status())
        return busy_s

    @contextmanager
    def step(self, samples: int | None = None) -> Iterator[None]:
        """Wrap one optimiser step: `with session.step(): loss.backward(); opt.step()`.
        `samples`: the samples in the batch (default: the batch size)."""
        self.begin_step(samples)
        with out_of_memory_as_device_error(self._costs.get(self.batch_size)):
            yield
        self.end_step(samples)

    def run_step(self, step: Callable[[], Any], samples: int | None = None) -> Any:
        """Run `step()` as one optimiser step and return what it returns."""
        with self.step(samples):
            result = step()
        return result

    # -- accuracy --------------------------------------------------------------------------------
    def report(self, accuracy: float, samples: int | None = None) -> CurvePoint:
        """Record the test metric (`target_metric`: accuracy unless set) after the samples
        trained so far (or `samples`); a re-plan found due by the drift monitor happens here,
        between steps."""
        try:
            self.target_metric.check_value(accuracy)
        except MetricError as err:
            raise SessionError(str(err)) from None
        if self.device is not None:  # the steps since the last wait, timed before the point
            self.device_time_s += self.device.flush_timing()
        point = CurvePoint(samples=self.samples if samples is None else samples,
                           accuracy=float(accuracy), device_time_s=self.device_time_s)
        self.curve.append(point)
        self._steps_since_report = 0
        self._cap.take_pending()  # between steps: the next batch is fetched after this
        if not self.reached:
            self._replan_if_due()
        self._noise.replan_if_due()
        if self._attached is not None and self._checkpoint is not None:
            self._checkpointing.save()
        if self.progress is not None:
            self.progress(self.status())
        return point

    def _replan_if_due(self) -> None:
        if self._monitor is None:
            return
        replan = self._monitor.replan_if_due()
        if replan is not None:
            # The re-measure interrupted training; its device time is paid by this run.
            self.device_time_s += replan.remeasure_device_s
            self.frequency_hz = replan.to_hz
            self._cap.after_drift_replan(replan.to_hz)

    @property
    def reached(self) -> bool:
        """Whether the smoothed accuracy curve crossed the target (`samples_to_target`): one
        lucky evaluation that the next ones take back is not the target reached, and a run
        that stopped on it would record a miss."""
        return self.samples_to_target is not None

    @property
    def done(self) -> bool:
        """The target was reached, the sample budget is spent, or a moving cap stopped the
        run (it can never rise again to what training needs)."""
        return self.reached or (self.sample_budget is not None
                                and self.samples >= self.sample_budget) or self.cap_stopped

    @property
    def samples_to_target(self) -> float | None:
        """Samples at which the reported metric's curve crosses the target in the metric's
        direction, interpolated on the smoothed curve (`wattcap.algorithms.curves`), not read
        at the first report past it (reports are hundreds of samples apart); None: not
        reached."""
        if self.target_accuracy is None or not self.curve:
            return None
        # asked at every step by loops that test `done`: computed once per report
        key = (len(self.curve), id(self.curve[-1]), self.target_accuracy)
        if self._crossing is None or self._crossing[0] != key:
            from wattcap.algorithms.curves import samples_to_target

            self._crossing = (key, samples_to_target(self.curve, self.target_accuracy,
                                                     self.target_metric.direction))
        return self._crossing[1]

    @property
    def reports_past_target(self) -> int:
        """Reports made since the one at which the smoothed curve crossed the target, while it
        stayed crossed (0: not reached, or reached at the last report). A loop that goes on for
        a few reports past the target counts from here after a resume, as the uninterrupted run
        counted (a resume does not start its count again)."""
        if not self.reached:
            return 0
        from wattcap.algorithms.curves import samples_to_target

        target = self.target_accuracy
        assert target is not None  # reached
        crossed = 0
        for end in range(len(self.curve), 0, -1):  # once per resume: prefixes, newest first
            if samples_to_target(self.curve[:end], target,
                                 self.target_metric.direction) is None:
                break
            crossed += 1
        return crossed - 1

    def time_at_samples_s(self, samples: float) -> float:
        """Device seconds when the run had trained `samples` samples (linear between
        reports: the device's time per sample is constant between them)."""
        points = [(0, 0.0)] + [(p.samples, p.device_time_s) for p in self.curve]
        for (s0, t0), (s1, t1) in zip(points, points[1:], strict=False):
            if s0 <= samples <= s1:
                return t0 if s1 == s0 else t0 + (t1 - t0) * (samples - s0) / (s1 - s0)
        return points[-1][1]

    def status(self) -> SessionStatus:
        """A snapshot for progress displays."""
        last = self._meter.last
        return SessionStatus(
            samples=self.samples, steps=self.steps, device_time_s=self.device_time_s,
            accuracy=self.curve[-1].accuracy if self.curve else None,
            target_accuracy=self.target_accuracy,
            power_w=last.power_w if last is not None else None, power_cap_w=self.power_cap_w,
            frequency_hz=self.device.run_frequency_hz() if self.device else None,
            batch_size=self.batch_size, sample_budget=self.sample_budget,
            paused=self._follower is not None and self._follower.paused,
            resumed_from_samples=self.resumed_from_samples if self.steps == (
                self._resumed_at_steps) else None, target_metric=self.target_metric)

    # -- the parts' public faces ----------------------------------------------------------------
    def attach(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None
               ) -> bool:
        """Let the session checkpoint `model` and `optimizer` at every `report` (with a
        checkpoint_dir), and resume them now from an earlier checkpoint of this run; True when
        it resumed."""
        return self._checkpointing.attach(model, optimizer)

    def save_checkpoint(self, extra: dict[str, Any] | None = None) -> None:
        """Write the attached model and optimizer and the run state (atomically)."""
        self._checkpointing.save(extra)

    def resume(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None
               ) -> SessionState:
        """Load the checkpoint into `model`/`optimizer` and the run state into the session."""
        return self._checkpointing.resume(model, optimizer)

    def backward(self, loss_of: LossOf, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        """`loss_of(inputs, targets).backward()`; while the noise scale is measured
        (efficiency='gns'), the chunked backward that measures it (same gradient in `.grad`,
        each chunk normalised on its own). Needs `attach(model, optimizer)` first."""
        self._noise.backward(loss_of, inputs, targets)

    @property
    def measuring_noise_scale(self) -> bool:
        """efficiency='gns' and the noise scale is still being measured."""
        return self._gns is not None and self._gns.measuring

    # -- a moving cap ----------------------------------------------------------------------------
    @property
    def cap_stopped(self) -> bool:
        """A moving cap ended the run (see `stop_reason`)."""
        return self._follower is not None and self._follower.stopped is not None

    @property
    def stop_reason(self) -> str | None:
        """Why a moving cap ended the run, if it did."""
        return self._follower.stopped if self._follower is not None else None

    @property
    def paused(self) -> bool:
        """Training waits for a moving cap to rise."""
        return self._follower is not None and self._follower.paused

    def apply_learning_rate(self, optimizer: torch.optim.Optimizer) -> bool:
        """Set every parameter group's learning rate to `learning_rate` (the √ rule at the
        current batch size), keeping the optimiser's state (Adam's moments); True when it
        changed. Call it every iteration under a moving cap (it overrides a scheduler's
        rate)."""
        rate = self.learning_rate
        changed = False
        for group in optimizer.param_groups:
            if group["lr"] != rate:
                group["lr"] = rate
                changed = True
        return changed




def _gns_settings(efficiency: Any) -> GnsSettings | None:
    if efficiency is None or not (isinstance(efficiency, str) or
                                  type(efficiency).__name__ == "GnsSettings"):
        return None
    from wattcap.runtime.gns_replan import GnsSettings

    return GnsSettings.of(efficiency)


def _fingerprint(model: Any, name: str | None) -> str | None:
    """The architecture fingerprint of what is trained: of the named spec as built with its
    default head (as profiles record it), or of the nn.Module itself."""
    from torch import nn

    from wattcap.models import architecture_fingerprint, model_fingerprint

    if isinstance(model, nn.Module):
        return architecture_fingerprint(model)
    if name is None:
        return None
    try:
        return model_fingerprint(name)
    except (KeyError, ValueError):
        return None




def _load_profile(profile: Any) -> ProfileTable | None:
    if profile is None:
        return None
    from wattcap.core.profile import ProfileTable

    return profile if isinstance(profile, ProfileTable) else ProfileTable.load(profile)


def _load_efficiency(efficiency: Any) -> EfficiencyVector | None:
    if efficiency is None:
        return None
    from wattcap.core.efficiency import EfficiencyVector

    return efficiency if isinstance(efficiency, EfficiencyVector) else \
        EfficiencyVector.load(efficiency)


__all__ = [
    "Checkpoint", "DeviceError", "MeterState", "PowerMeter", "Session", "SessionError",
    "SessionState", "SessionStatus", "move_to_device",
]
