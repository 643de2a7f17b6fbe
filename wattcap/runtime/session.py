"""`wattcap.Session`: the one runtime every training loop goes through.

A user's own loop, wattcap's `train_to_accuracy`, the Lightning callback and the Hugging Face
callback all drive the same object:

    with wattcap.Session("emulated:jetson-nano", model=net, example_input=x0,
                         planning=PlanSettings(profile="nano.json", efficiency="eff.json"),
                         cap=5.0, goal=Goal(target_accuracy=0.9)) as session:
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

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wattcap.algorithms.curves import reports_past_target, samples_to_target, time_at_samples_s
from wattcap.core.defaults import DEFAULT_BATCH_SIZE_REF, DEFAULT_LR_REF
from wattcap.core.knob import KnobKind
from wattcap.core.metric import MetricError, TargetMetric
from wattcap.core.objective import Objective
from wattcap.core.run import CurvePoint, RunRecord, scaled_learning_rate
from wattcap.data.loader import move_to_device
from wattcap.devices.base import Device
from wattcap.devices.caps import CapSource
from wattcap.devices.cuda import out_of_memory_as_device_error
from wattcap.devices.errors import DeviceError
from wattcap.devices.signals import exit_cleanly_on_signals
from wattcap.runtime.cap_control import CapControl
from wattcap.runtime.cap_follower import CapPolicy
from wattcap.runtime.checkpoint import Checkpoint, SessionState
from wattcap.runtime.checkpointing import Checkpointing
from wattcap.runtime.device_guard import DeviceGuard
from wattcap.runtime.drift_monitor import DriftMonitor
from wattcap.runtime.errors import SessionError
from wattcap.runtime.gns_part import NoiseScalePart
from wattcap.runtime.meter import MeterState, PowerMeter
from wattcap.runtime.model_part import ModelPart
from wattcap.runtime.plan_maker import PlanMaker, gns_settings, load_efficiency, load_profile
from wattcap.runtime.record_builder import RecordBuilder
from wattcap.runtime.session_config import (
    CapSettings,
    CheckpointSettings,
    DeviceHandling,
    Goal,
    PlanSettings,
    Reporting,
    SessionConfig,
)
from wattcap.runtime.session_status import ProgressCallback, SessionStatus
from wattcap.runtime.watchdog import CapWatchdog

if TYPE_CHECKING:
    import torch

    from wattcap.core.plan import Choice, Plan
    from wattcap.devices.workload import StepCost, Workload
    from wattcap.runtime.cap_follower import CapFollower
    from wattcap.runtime.gns_replan import NoiseScaleReplan
    from wattcap.runtime.noise_scale import LossOf


#: a loop that never reports an accuracy still gets a due re-plan after this many steps
REPLAN_WITHOUT_REPORT_STEPS = 200


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
        planning: what to train at (`PlanSettings`): the profile and efficiency vector
            Algorithm 1 plans from, or a given batch size and frequency; the objective, the
            margins, the learning-rate rule. With `efficiency="gns"` the loop calls
            `session.backward(loss_of, x, y)` for its backward pass and reads `batch_size`
            after each report (the plan changes once the noise scale is measured).
        cap: the power cap and how it is kept (`CapSettings`), or just the cap: watts, a
            `CapSource` or a cap spec. Under a moving cap read `batch_size` each iteration
            (or use `wattcap.runtime.sampling.SessionBatchSampler`) and call
            `apply_learning_rate(optimizer)`; a cap that can never rise again (an empty
            battery) ends the run: `done` turns true.
        goal: when `done` turns true (`Goal`: a target on a metric, a sample budget).
        checkpoint: where `attach`/`save_checkpoint` keep the run (`CheckpointSettings`, or
            the directory); a restart resumes.
        reporting: progress callbacks and what the run record names (`Reporting`, or the
            progress callback alone).
        device_handling: restoring the device on exit and handling signals
            (`DeviceHandling`).
    """

    def __init__(
        self,
        device: Device | str | None = "emulated:jetson-nano",
        *,
        model: Any = None,
        example_input: Any = None,
        model_name: str | None = None,
        planning: PlanSettings | None = None,
        cap: CapSettings | CapSource | str | float | None = None,
        goal: Goal | None = None,
        checkpoint: CheckpointSettings | str | Path | None = None,
        reporting: Reporting | ProgressCallback | None = None,
        device_handling: DeviceHandling | None = None,
    ) -> None:
        self._build(SessionConfig(
            device=device, model=model, example_input=example_input, model_name=model_name,
            planning=planning or PlanSettings(), cap=CapSettings.of(cap), goal=goal or Goal(),
            checkpoint=CheckpointSettings.of(checkpoint), reporting=Reporting.of(reporting),
            device_handling=device_handling or DeviceHandling()))

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
        planning, cap, goal, reporting = cfg.planning, cfg.cap, cfg.goal, cfg.reporting
        self.power_cap_w = cap.constant_w
        self.method = planning.method
        self.target_accuracy = goal.target_accuracy
        self.target_metric: TargetMetric = goal.metric
        self.sample_budget = goal.sample_budget
        self.dataset = reporting.dataset
        self.config = reporting.config
        self.weights_source = reporting.weights_source
        self.progress = reporting.progress
        self.progress_every = max(1, reporting.progress_every)
        self._handle_signals = cfg.device_handling.handle_signals
        self._restore = cfg.device_handling.restore
        directory = cfg.checkpoint.directory
        self._checkpoint = Checkpoint(Path(directory)) if directory else None

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
        self._planning = PlanMaker(self)
        self._model_part = ModelPart(self)

        self._watchdog_on = cap.watchdog
        self._drift_tolerance = cap.drift_tolerance
        self.margin_sigmas = planning.margin_sigmas
        self.risk, self.transfer_factor = planning.risk, planning.transfer_factor
        self.batch_size_hold_s = cap.batch_size_hold_s

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
        #: a step without a count trains the batch moved last (a short last batch as it is)
        self._moved_samples: int | None = None
        self._step_samples: int | None = None
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
        self._gns_settings = gns_settings(planning.efficiency)
        self.efficiency = None if self._gns_settings is not None else \
            load_efficiency(planning.efficiency)
        self._gns: NoiseScaleReplan | None = None
        self._reference_profiles = planning.reference_profiles
        self.plan: Plan | None = None
        self.lr_ref: float = DEFAULT_LR_REF  # both set by the plan, from the settings
        self.batch_size_ref: int = DEFAULT_BATCH_SIZE_REF
        self.choice: Choice | None = None
        self._batch_size: int | None = planning.batch_size
        self.frequency_hz: int | None = planning.frequency_hz
        #: the profile's knob; for another than the clock, the value applied (mW, mode id)
        self.knob_kind: KnobKind = "gpu_clock"
        self.knob_value: int | None = planning.knob_value
        # profile="auto" measures the device: that waits for start(); given files plan now
        self._profile_pending = planning.profile == "auto"
        self.profile = None if self._profile_pending else load_profile(planning.profile)
        if not self._profile_pending:
            self._planning.make()


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


    # -- planning --------------------------------------------------------------------------------


    def adopt_model(self, model: Any, example_input: Any = None) -> None:
        """Set what is trained (for sessions built before the model exists: the framework
        callbacks plan when they are built and get the model when training starts)."""
        self._model_part.adopt(model, example_input)

    def provide_example_input(self, model: Any, example_input: Any) -> None:
        """Give an example batch for an `nn.Module` model whose workload is not known yet (the
        framework callbacks pass the first training batch)."""
        self._model_part.provide_example_input(model, example_input)

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
                self._planning.check_device()  # the device's name and power mode
            if self._profile_pending:
                self.profile = self._planning.auto_profile(self.settings.planning.batch_size)
                self._profile_pending = False
                self._planning.make()
            if self._handle_signals:
                stack.enter_context(exit_cleanly_on_signals())
            if self.device is not None:
                if self._restore and not stack_has_restore:
                    stack.callback(self._guard_part.restore)
                self._guard_part.apply_plan_and_watch(stack)
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
        first: Any = tensors[0] if tensors else None
        self._moved_samples = int(first.shape[0]) if getattr(first, "ndim", 0) else None
        moved = tuple(move_to_device(t, target) for t in tensors)
        return moved[0] if len(moved) == 1 else moved

    def prepare(self, model: torch.nn.Module) -> torch.nn.Module:
        """Put a model on `torch_device` (returns it)."""
        return model.to(self.torch_device)

    # -- steps -----------------------------------------------------------------------------------
    def begin_step(self, samples: int | None = None) -> None:
        """Mark the start of one optimiser step (for loops that cannot use `step()`); its
        device cost is that of a batch of `samples` (default: the first dimension of the batch
        last moved with `to_device`, else the batch size)."""
        if not self._open:
            raise SessionError("use the session in a `with` block (or call start()) first")
        samples = self._step_samples = samples or self._moved_samples
        self._cap.before_step()
        self._noise.before_step(samples)
        if self.device is not None:
            self._step_start_s = self.device.now_s()
            cost = self._noise.step_cost(samples or self.batch_size)
            self._timer = self.device.begin_step(cost)

    def end_step(self, samples: int | None = None) -> float:
        """Account the step begun with `begin_step`: `samples` trained (default: as
        `begin_step`'s); returns its device seconds. Raises if the power watch failed."""
        samples, self._moved_samples = samples or self._step_samples, None
        busy_s = 0.0
        device = self.device
        if device is not None:
            busy_s = device.end_step(self._timer)
            self._timer = None
            self.device_time_s += busy_s
            if self._monitor is not None and self._noise.measuring_step:
                # a measured step runs chunked: slower than the profile's step, not drift
                self._monitor.restart_window()
            elif self._monitor is not None:
                self._monitor.on_step(self._step_start_s, device.now_s(), busy_s,
                                      samples=samples, timed_steps=device.accounted_steps)
        trained = self.batch_size if samples is None else samples
        self.samples += trained
        self.steps += 1
        self._noise.after_step()
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
        `samples`: the samples in the batch (default: as `begin_step`'s)."""
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
        self._guard_part.replan_if_due()

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
        """Samples at which the smoothed curve of the reported metric crosses the target
        (interpolated: `wattcap.algorithms.curves`); None: not reached."""
        if self.target_accuracy is None or not self.curve:
            return None
        # asked at every step by loops that test `done`: computed once per report
        key = (len(self.curve), id(self.curve[-1]), self.target_accuracy)
        if self._crossing is None or self._crossing[0] != key:
            self._crossing = (key, samples_to_target(self.curve, self.target_accuracy,
                                                     self.target_metric.direction))
        return self._crossing[1]

    @property
    def reports_past_target(self) -> int:
        """Reports since the one at which the smoothed curve crossed the target, while it stayed
        crossed (0: not reached, or at the last report); a resume does not restart the count."""
        if not self.reached:
            return 0
        assert self.target_accuracy is not None  # reached
        return reports_past_target(self.curve, self.target_accuracy,
                                   self.target_metric.direction)

    def time_at_samples_s(self, samples: float) -> float:
        """Device seconds when the run had trained `samples` samples (linear between reports)."""
        return time_at_samples_s(self.curve, samples)

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

    def measure_beside(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                       loss_of_batch: Callable[[Any], torch.Tensor], batch: Any) -> None:
        """Where a framework runs its own backward (the Lightning and Hugging Face callbacks):
        on a step the online correction measures, the noise scale of `batch` in parts, `.grad`
        left alone."""
        self._noise.measure_beside(model, optimizer, loss_of_batch, batch)

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
        current batch size), keeping the optimiser's state; True when it changed. Call it every
        iteration under a moving cap (it overrides a scheduler's rate)."""
        rate = self.learning_rate
        changed = any(group["lr"] != rate for group in optimizer.param_groups)
        for group in optimizer.param_groups:
            group["lr"] = rate
        return changed


__all__ = [
    "Checkpoint", "DeviceError", "MeterState", "PowerMeter", "Session", "SessionError",
    "SessionState", "SessionStatus", "move_to_device",
]
