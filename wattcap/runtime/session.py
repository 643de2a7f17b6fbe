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

from wattcap.core.defaults import DEFAULT_BATCH_SIZE_REF, DEFAULT_LR_REF, DEFAULT_MARGIN_SIGMAS
from wattcap.core.errors import WattcapError
from wattcap.core.objective import Objective, ObjectiveError
from wattcap.core.run import CurvePoint, RunRecord, TrainConfig, scaled_learning_rate
from wattcap.core.schema import WattcapFileError
from wattcap.data.loader import move_to_device
from wattcap.devices.base import Device, out_of_memory_as_device_error
from wattcap.devices.caps import CapSource, CapSourceError, ConstantCap
from wattcap.devices.errors import DeviceError
from wattcap.devices.signals import exit_cleanly_on_signals
from wattcap.runtime.cap_follower import (
    CAP_POLICIES,
    CapFollower,
    CapPolicy,
    ConfigChooser,
    Target,
    resolve_cap_source,
)
from wattcap.runtime.checkpoint import Checkpoint, SessionState
from wattcap.runtime.meter import MeterState, PowerMeter
from wattcap.runtime.model_source import (
    ModelSourceError,
    module_step_factory,
    module_workload,
    resolve_model,
)
from wattcap.runtime.watchdog import CapWatchdog, DriftMonitor

if TYPE_CHECKING:
    import torch

    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.core.plan import Choice, Plan
    from wattcap.core.profile import ProfileTable
    from wattcap.devices.workload import StepCost, Workload
    from wattcap.runtime.gns_replan import GnsSettings, NoiseScaleReplan
    from wattcap.runtime.noise_scale import LossOf


#: a loop that never reports an accuracy still gets a due re-plan after this many steps
REPLAN_WITHOUT_REPORT_STEPS = 200


class SessionError(WattcapError, ValueError):
    """A Session cannot start or go on as asked (no plan possible, a misuse of the API)."""


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
        batch_size, frequency_hz: a given configuration; each overrides the plan's. With a
            batch size and a profile but no frequency, f*(b) under the cap is used. Without a
            profile and without a frequency the device's clock is left as it is.
        target_accuracy, sample_budget: when `done` turns true.
        lr_ref, batch_size_ref: the learning rate at a reference batch size (default: the
            efficiency vector's optimiser settings, else 5e-4 at b = 128 as in the paper);
            `learning_rate` is lr_ref · sqrt(b / b_ref).
        watchdog: keep the cap (steps the frequency down when it is exceeded).
        margin_sigmas: plan this many standard deviations of the sensor noise below the cap
            (the profile's estimate; default 2).
        drift_tolerance: with a profile, re-measure and re-plan when measured step time or
            power leave it by more than this fraction (0: off).
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
        target_accuracy: float | None = None,
        sample_budget: int | None = None,
        lr_ref: float | None = None,
        batch_size_ref: int | None = None,
        watchdog: bool = True,
        drift_tolerance: float = 0.1,
        margin_sigmas: float = DEFAULT_MARGIN_SIGMAS,
        checkpoint_dir: str | Path | None = None,
        identity: dict[str, Any] | None = None,
        dataset: str | None = None,
        handle_signals: bool = True,
        restore: bool = True,
        progress: ProgressCallback | None = None,
        progress_every: int = 50,
        config: TrainConfig | None = None,
        weights_source: str | None = None,
    ) -> None:
        if power_cap_w is not None and not power_cap_w > 0:  # also refuses nan
            raise SessionError(f"the power cap must be a positive number of watts or None, "
                               f"got {power_cap_w!r}")
        if target_accuracy is not None and not 0 < target_accuracy <= 1:
            raise SessionError(f"target accuracy must be in (0, 1], got {target_accuracy}")
        if drift_tolerance < 0:
            raise SessionError(f"drift_tolerance must be >= 0, got {drift_tolerance}")
        self._owns_device = isinstance(device, str)
        if isinstance(device, str):
            from wattcap.devices import get_device

            device = get_device(device)
        self.device: Device | None = device
        self.power_cap_w = power_cap_w
        self.method = method
        self.target_accuracy = target_accuracy
        self.sample_budget = sample_budget
        self.dataset = dataset
        self.config = config
        self.weights_source = weights_source
        self.progress = progress
        self.progress_every = max(1, progress_every)
        self._handle_signals = handle_signals
        self._restore = restore
        self._checkpoint = Checkpoint(Path(checkpoint_dir)) if checkpoint_dir else None

        self._watchdog_on = watchdog
        self._drift_tolerance = drift_tolerance
        self.margin_sigmas = margin_sigmas

        # run state
        self.samples = 0
        self.steps = 0
        self.curve: list[CurvePoint] = []
        self._crossing: tuple[tuple, float | None] | None = None
        self.device_time_s = 0.0
        self.events: list[str] = []
        self.resumed_from_samples: int | None = None
        self.record: RunRecord | None = None
        self._meter = PowerMeter(device.sensor_period_s if device is not None else 0.0)
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
        self._costs: dict[int, StepCost] = {}
        self._open = False

        # what is trained, and the plan
        self.model_name: str | None = None
        self.architecture_fingerprint: str | None = None
        self._measure_workload: Callable[[], Workload] | None = None
        self._workload: Workload | None = None
        self._step_factory: Callable[[int, str], Callable[[], object]] | None = None
        self._model_name_override = model_name
        self.identity: dict[str, Any] = {}
        if model is not None:
            self.adopt_model(model, example_input)
        gns_settings = _gns_settings(efficiency)
        self.efficiency = None if gns_settings is not None else _load_efficiency(efficiency)
        self.profile = self._auto_profile(batch_size) if profile == "auto" else \
            _load_profile(profile)
        if self.profile is not None and self.device is not None:
            self.profile.check_matches(device=self.device.name, source="profile")
        if self.profile is not None and self.model_name is not None:
            self.profile.check_matches(model=self.model_name, source="profile",
                                       architecture_fingerprint=self.architecture_fingerprint)
        self._reference_profiles = reference_profiles
        self._init_moving_cap(power_cap, objective, cap_policy, max_pause_s,
                              batch_size_given=batch_size is not None)
        self.plan: Plan | None = None
        self.choice: Choice | None = None
        self.batch_size, self.frequency_hz = self._decide(
            batch_size, frequency_hz, reference_profiles)
        self.lr_ref = lr_ref if lr_ref is not None else (
            self.efficiency.lr_ref if self.efficiency is not None else DEFAULT_LR_REF)
        self.batch_size_ref = batch_size_ref if batch_size_ref is not None else (
            self.efficiency.batch_size_ref if self.efficiency is not None
            else DEFAULT_BATCH_SIZE_REF)
        self.identity = identity if identity is not None else {
            "model": self.model_name, "batch_size": self.batch_size,
            "learning_rate": self.learning_rate, "target_accuracy": target_accuracy,
        }
        self._gns: NoiseScaleReplan | None = None
        if gns_settings is not None:
            self._start_gns(gns_settings, reference_profiles)

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
                                 margin_sigmas=self.margin_sigmas)
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
                    point.frequency_hz
            if self.method not in self.plan.choices:
                why = self.plan.unavailable.get(self.method, "unknown method")
                raise SessionError(f"{self.method} has no choice under this cap: {why}")
            self.choice = self.plan.choices[self.method]
            return self.choice.batch_size, frequency_hz if frequency_hz is not None else \
                self.choice.frequency_hz
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
        """Apply the frequency, start the watch; `close` undoes it (a `with` block does both)."""
        if self._open:
            raise SessionError("the session is already running")
        stack = ExitStack()
        try:
            if self._handle_signals:
                stack.enter_context(exit_cleanly_on_signals())
            device = self.device
            if device is not None:
                if self._restore:
                    stack.callback(self._restore_device)
                if self.frequency_hz is not None:
                    self._apply_frequency(self.frequency_hz, "plan")
                self._counter_start_j = device.energy_counter_j()
                stack.enter_context(device.sensor_ticks(self._meter))
                if self._watchdog_on:
                    self._guard = CapWatchdog(device, self.power_cap_w)
                    stack.enter_context(device.sensor_ticks(self._guard))
                if self.profile is not None and self._drift_tolerance > 0:
                    self._monitor = self._make_monitor()
                    if self._monitor is not None:
                        stack.enter_context(device.sensor_ticks(self._monitor))
                self._start_cap_follower(stack)
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        self._open = True
        self._wall_start = time.monotonic()

    def _make_monitor(self) -> DriftMonitor | None:
        assert self.device is not None and self.profile is not None
        if self.model_name is None:
            self.events.append("drift monitor off: the session has no model to re-measure")
            return None
        from wattcap.measure.profiling import Profiler

        profiler = Profiler(self.device, self.model_name, batch_sizes=(self.batch_size,),
                            workload=self.workload, step_factory=self._step_factory)
        return DriftMonitor(self.device, self.profile, self.batch_size,
                            power_cap_w=self.power_cap_w, tolerance=self._drift_tolerance,
                            watchdog=self._guard, profiler=profiler,
                            margin_sigmas=self.margin_sigmas)

    def _apply_frequency(self, frequency_hz: int, why: str) -> None:
        assert self.device is not None
        applied = self.device.set_frequency_hz(frequency_hz)
        if self.profile is not None and self.power_cap_w is not None:
            point = self.profile.lookup(self.batch_size, frequency_hz)
            if point is not None and point.peak_power_w > self.power_cap_w:
                self.events.append(
                    f"{why}: b={self.batch_size} at {frequency_hz / 1e6:.1f} MHz peaked at "
                    f"{point.peak_power_w:.2f} W in the profile, above the cap "
                    f"{self.power_cap_w:g} W: the watchdog will step it down")
        self.frequency_hz = applied

    def _restore_device(self) -> None:
        assert self.device is not None
        self.device.restore()
        if self._owns_device and hasattr(self.device, "close"):
            self.device.close()

    def close(self, failed: bool = False) -> RunRecord | None:
        """Stop the watch, build the RunRecord, restore the device. Idempotent."""
        if not self._open:
            return self.record
        self._open = False
        try:
            if self._guard is not None:
                self._guard.finish()
            try:
                self.record = self._build_record()
                self._add_cap_history(self.record)
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
        self._cap_before_step()
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
            if self._monitor is not None and not self.measuring_noise_scale:
                # a measured step runs chunked: slower than the profile's step, not drift
                self._monitor.on_step(self._step_start_s, device.now_s(), busy_s,
                                      samples=samples)
            device.check_watch(self.power_cap_w)
        trained = self.batch_size if samples is None else samples
        self.samples += trained
        self.steps += 1
        self._steps_since_report += 1
        self._cap_after_step(trained, busy_s)
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
        """Record a test accuracy after the samples trained so far (or `samples`); a re-plan
        found due by the drift monitor happens here, between steps."""
        if not 0.0 <= accuracy <= 1.0:
            raise SessionError(f"accuracy must be a fraction in [0, 1], got {accuracy}")
        point = CurvePoint(samples=self.samples if samples is None else samples,
                           accuracy=float(accuracy), device_time_s=self.device_time_s)
        self.curve.append(point)
        self._steps_since_report = 0
        self._cap_take_pending()  # between steps: the next batch is fetched after this
        if not self.reached:
            self._replan_if_due()
        self._gns_replan_if_due()
        if self._attached is not None and self._checkpoint is not None:
            self.save_checkpoint()
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
            self._cap_after_drift_replan(replan.to_hz)

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
        """Samples at which the accuracy curve crosses the target, interpolated on the
        smoothed curve (`wattcap.algorithms.curves`), not read at the first report past it (reports
        are
        hundreds of samples apart); None: not reached."""
        if self.target_accuracy is None or not self.curve:
            return None
        # asked at every step by loops that test `done`: computed once per report
        key = (len(self.curve), id(self.curve[-1]), self.target_accuracy)
        if self._crossing is None or self._crossing[0] != key:
            from wattcap.algorithms.curves import samples_to_target

            self._crossing = (key, samples_to_target(self.curve, self.target_accuracy))
        return self._crossing[1]

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
            frequency_hz=self.device.current_frequency_hz() if self.device else None,
            batch_size=self.batch_size, sample_budget=self.sample_budget,
            paused=self._follower is not None and self._follower.paused)

    # -- checkpoints -----------------------------------------------------------------------------
    def attach(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None
               ) -> bool:
        """Let the session checkpoint `model` and `optimizer` at every `report` (with a
        checkpoint_dir), and resume them now from an earlier checkpoint of this run; True when
        it resumed."""
        self._attached = (model, optimizer)
        if self._checkpoint is None or not self._checkpoint.exists():
            return False
        self.resume(model, optimizer)
        return True

    def save_checkpoint(self, extra: dict[str, Any] | None = None) -> None:
        """Write the attached model and optimizer and the run state (atomically)."""
        if self._checkpoint is None or self._attached is None:
            raise SessionError("save_checkpoint needs a checkpoint_dir and attach(model, ...)")
        if not self.reached:
            self._replan_if_due()
        model, optimizer = self._attached
        self._checkpoint.save(model, optimizer, self._state(extra or {}))

    def _state(self, extra: dict[str, Any]) -> SessionState:
        guard, monitor = self._guard, self._monitor
        if self._gns is not None and self._gns.vector is not None:
            extra = {**extra, "gns_vector": self._gns.vector.model_dump(mode="json")}
        return SessionState(
            identity=self.identity, samples=self.samples, steps=self.steps, curve=self.curve,
            device_time_s=self.device_time_s, meter=self._meter.state(), events=self.events,
            counter_energy_j=self._counter_energy_j(),
            frequency_hz=self.device.current_frequency_hz() if self.device else None,
            batch_size=self.batch_size,
            cap_violations=guard.violations if guard else [],
            frequency_steps=guard.steps if guard else [],
            drift_events=monitor.events if monitor else [],
            replans=monitor.replans if monitor else [], extra=extra,
            cap=self._follower.state_dict() if self._follower is not None else None)

    def resume(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None
               ) -> SessionState:
        """Load the checkpoint into `model`/`optimizer` and the run state into the session."""
        if self._checkpoint is None or not self._checkpoint.exists():
            raise SessionError("no checkpoint to resume from")
        state = self._checkpoint.load(model, optimizer)
        if state.identity != _jsonable(self.identity):
            raise WattcapFileError(
                f"{self._checkpoint.folder}: the checkpoint belongs to another run "
                "configuration; use another checkpoint folder or delete it")
        self.samples = self.resumed_from_samples = state.samples
        self.steps = state.steps
        self.curve = list(state.curve)
        self._crossing = None
        self.device_time_s = state.device_time_s
        self._meter.peak_w = state.meter.peak_w
        self._meter.total_w = state.meter.total_w
        self._meter.readings = state.meter.readings
        self.events = state.events + [f"resumed from checkpoint at {state.samples} samples"]
        if state.counter_energy_j is not None:
            self._energy_before_j = state.counter_energy_j
            if self.device is not None:
                self._counter_start_j = self.device.energy_counter_j()
        else:
            self._energy_before_j = self._meter.energy_j
        if self._guard is not None:
            self._guard.violations += state.cap_violations
            self._guard.steps += state.frequency_steps
        if self._monitor is not None:
            self._monitor.events += state.drift_events
            self._monitor.replans += state.replans
            self._monitor.adopt(state.replans)
        device = self.device
        saved_hz = state.frequency_hz
        if self._gns is not None and "gns_vector" in state.extra:
            self._resume_gns(state, model, optimizer)
        # A re-plan's or the watchdog's lower frequency is put back (only ever lowered: the
        # frequency applied now may be the plan's).
        if (device is not None and saved_hz is not None
                and saved_hz < device.current_frequency_hz()
                and saved_hz in device.frequencies_hz()):
            device.set_frequency_hz(saved_hz)
            self.frequency_hz = saved_hz
            if self._guard is not None:
                self._guard.set_ceiling_hz(saved_hz)
        self._resume_moving_cap(state)
        return state

    # -- r_b from the gradient noise scale (efficiency="gns") ----------------------------------
    def _start_gns(self, settings: GnsSettings,
                   reference_profiles: list[ProfileTable] | None) -> None:
        from wattcap.runtime.gns_replan import NoiseScaleReplan

        if self.profile is None:
            raise SessionError("efficiency='gns' re-plans with Algorithm 1: it needs a profile")
        self._gns = NoiseScaleReplan(settings, self.profile, self.power_cap_w, self.method,
                                     reference_profiles, self.margin_sigmas)
        self.events.append(
            f"gns: r_b is measured from the gradient noise scale over the first "
            f"{settings.samples} samples at b={self.batch_size} ({settings.chunks} chunks per "
            "batch), then the run re-plans")

    @property
    def measuring_noise_scale(self) -> bool:
        """efficiency='gns' and the noise scale is still being measured."""
        return self._gns is not None and self._gns.measuring

    def backward(self, loss_of: LossOf, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        """`loss_of(inputs, targets).backward()`; while the noise scale is measured
        (efficiency='gns'), the chunked backward that measures it (same gradient in `.grad`,
        each chunk normalised on its own). Needs `attach(model, optimizer)` first."""
        gns = self._gns
        if gns is None or not gns.measuring:
            loss_of(inputs, targets).backward()
            return
        if gns.gns is None:
            if self._attached is None or self._attached[1] is None:
                raise SessionError("efficiency='gns' measures with the optimiser's state: call "
                                   "session.attach(model, optimizer) first")
            gns.attach(self._attached[0], self._attached[1], self.batch_size)
        gns.backward(loss_of, inputs, targets)

    def _gns_context(self) -> dict[str, Any]:
        from wattcap.models import get_model_spec

        try:
            task = get_model_spec(self.model_name or "").task
        except (KeyError, ValueError):
            task = "custom"
        workload = self.workload
        return {"model": self.model_name or "unknown",
                "input_shape": list(workload.input_shape) if workload is not None else [],
                "dataset": self.dataset, "task": task, "lr_ref": self.lr_ref,
                "batch_size_ref": self.batch_size_ref}

    def _gns_replan_if_due(self) -> None:
        gns = self._gns
        if gns is None or not gns.due(self.samples):
            return
        try:
            choice = gns.replan(**self._gns_context())
        except ValueError as err:
            raise SessionError(f"gns re-plan: {err}") from None
        assert gns.vector is not None and gns.vector.noise_scale is not None
        self.efficiency = gns.vector
        self.events.append(f"gns: {gns.vector.noise_scale.describe()}")
        self._adopt_gns_choice(choice.batch_size, choice.frequency_hz, "gns re-plan")

    def _adopt_gns_choice(self, batch_size: int, frequency_hz: int, why: str) -> None:
        old_b, old_hz, old_lr = self.batch_size, self.frequency_hz, self.learning_rate
        self.batch_size = batch_size
        if self.device is not None:
            self._apply_frequency(frequency_hz, why)
            if self._guard is not None:
                self._guard.set_ceiling_hz(self.frequency_hz or frequency_hz)
        else:
            self.frequency_hz = frequency_hz
        if self._monitor is not None:
            self._monitor.batch_size = batch_size  # drift is checked at the new row
        if self._attached is not None and self._attached[1] is not None:
            for group in self._attached[1].param_groups:  # √ rule; Adam's moments are kept
                group["lr"] = self.learning_rate
        self.events.append(
            f"{why} at {self.samples} samples: b={old_b} -> {self.batch_size}, "
            f"{_mhz(old_hz)} -> {_mhz(self.frequency_hz)}, learning rate {old_lr:.3g} -> "
            f"{self.learning_rate:.3g}")

    def _resume_gns(self, state: SessionState, model: Any, optimizer: Any) -> None:
        """A checkpoint written after the re-plan: the measured vector and its choice."""
        from wattcap.core.efficiency import EfficiencyVector

        assert self._gns is not None
        vector = EfficiencyVector.model_validate(state.extra["gns_vector"])
        self._gns.vector = self.efficiency = vector
        self.batch_size = state.batch_size
        if self.device is not None and state.frequency_hz is not None \
                and state.frequency_hz in self.device.frequencies_hz():
            self._apply_frequency(state.frequency_hz, "resumed gns plan")
        if self._monitor is not None:
            self._monitor.batch_size = self.batch_size

    # -- the record ------------------------------------------------------------------------------
    def _counter_energy_j(self) -> float | None:
        if self._counter_start_j is None or self.device is None:
            return None
        now_j = self.device.energy_counter_j()
        return None if now_j is None else self._energy_before_j + now_j - self._counter_start_j

    def _build_record(self) -> RunRecord:
        guard, monitor, device = self._guard, self._monitor, self.device
        events = list(self.events)
        if guard is not None:
            for v in guard.violations:
                events.append(f"cap exceeded for {v.duration_s:.2f} s at t={v.start_s:.1f} s "
                              f"(max {v.max_power_w:.2f} W)")
            events += [f"watchdog: {note}" for note in guard.notes]
        if monitor is not None:
            events += [f"drift monitor: {note}" for note in monitor.notes]
            for replan in monitor.replans:
                events.append(
                    f"re-planned at t={replan.time_s:.1f} s: {replan.from_hz / 1e6:.1f} -> "
                    f"{replan.to_hz / 1e6:.1f} MHz ({replan.reason}; re-measured "
                    f"{len(replan.points)} points in {replan.remeasure_device_s:.1f} s)")
        if device is not None and device.sensor_error is not None:
            events.append(f"power sensor stopped: {device.sensor_error.message}")
        energy_j = self._counter_energy_j()
        energy_source = None if device is None else "sensor" if energy_j is None else "counter"
        if energy_j is None:
            energy_j = self._meter.energy_j
        reached_at = self.samples_to_target
        time_to_accuracy_s = None if reached_at is None else self.time_at_samples_s(reached_at)
        return RunRecord(
            config=self.config, model=self.model_name or "unknown", batch_size=self.batch_size,
            learning_rate=self.learning_rate, target_accuracy=self.target_accuracy,
            sample_budget=self.sample_budget, dataset=self.dataset, method=self.method,
            device=device.name if device else None,
            device_kind=device.kind if device else None, torch_device=self.torch_device,
            frequency_hz=device.current_frequency_hz() if device else None,
            power_cap_w=self.power_cap_w, reached=reached_at is not None,
            samples_to_target=reached_at, time_to_accuracy_s=time_to_accuracy_s,
            samples_seen=self.samples, steps=self.steps,
            final_accuracy=self.curve[-1].accuracy if self.curve else 0.0, curve=self.curve,
            device_time_s=self.device_time_s, energy_j=energy_j,
            peak_power_w=self._meter.peak_w, avg_power_w=self._meter.average_w,
            cap_violations=guard.violations if guard else [],
            frequency_steps=guard.steps if guard else [],
            drift_events=monitor.events if monitor else [],
            replans=monitor.replans if monitor else [], energy_source=energy_source,
            events=events, resumed_from_samples=self.resumed_from_samples,
            wall_time_s=time.monotonic() - self._wall_start,
            weights_source=self.weights_source,
            architecture_fingerprint=self.architecture_fingerprint,
        )

    # -- a moving cap (issue 19) -----------------------------------------------------------------
    def _init_moving_cap(self, power_cap: CapSource | str | float | None,
                         objective: Objective | str | None, cap_policy: CapPolicy | None,
                         max_pause_s: float | None, batch_size_given: bool) -> None:
        """Resolve the cap source, the objective and the policy; set `power_cap_w` to the cap
        the first plan is made for."""
        try:
            self.objective = objective if isinstance(objective, Objective) else \
                Objective.of(objective or "time")
        except ObjectiveError as err:
            raise SessionError(str(err)) from None
        if max_pause_s is not None and not max_pause_s > 0:
            raise SessionError(f"max_pause_s must be a positive number of seconds, got "
                               f"{max_pause_s!r}")
        if cap_policy is not None and cap_policy not in CAP_POLICIES:
            raise SessionError(f"unknown cap_policy {cap_policy!r}; expected one of "
                               f"{', '.join(CAP_POLICIES)}")
        self.max_pause_s = max_pause_s
        self.cap_source: CapSource | None = None
        self._follower: CapFollower | None = None
        self.cap_policy: CapPolicy = cap_policy or (
            "safe-frequency" if self.method in ("baseline-1", "baseline-2")
            else "frequency" if batch_size_given else "replan")
        if power_cap is None:
            return
        if self.power_cap_w is not None:
            raise SessionError("give power_cap_w (a constant cap) or power_cap (a cap source), "
                               "not both")
        try:
            source = resolve_cap_source(power_cap)
            initial_w = source.cap_w(0.0) if source is not None else None
        except CapSourceError as err:
            raise SessionError(str(err)) from None
        if isinstance(source, ConstantCap):
            if initial_w is not None and not initial_w > 0:
                raise SessionError(f"the power cap must be a positive number of watts or None, "
                                   f"got {initial_w!r}")
            self.power_cap_w = initial_w
            return
        if self.device is None:
            raise SessionError("a moving power cap needs a device: its sensor ticks read the "
                               "cap and keep it")
        self.cap_source = source
        if self.profile is not None and initial_w is not None:
            # a run that starts below every configuration starts paused, but still needs a
            # first plan: the one for the lowest cap anything meets (with the margin)
            from wattcap.algorithms.planner import with_power_margin

            margined = with_power_margin(self.profile, self.margin_sigmas)
            initial_w = max(initial_w, min(p.peak_power_w for p in margined.points))
        self.power_cap_w = initial_w

    def _start_cap_follower(self, stack: ExitStack) -> None:
        device, source = self.device, self.cap_source
        if device is None or source is None:
            return
        chooser = None
        if self.profile is not None:
            refs = self._reference_profiles
            if refs is None and self.cap_policy == "safe-frequency":
                from wattcap.measure.references import reference_profiles_for

                refs = reference_profiles_for(self.profile)
            chooser = ConfigChooser(
                self.profile, self.cap_policy, self.batch_size,
                self.frequency_hz or device.current_frequency_hz(),
                efficiency=self.efficiency, objective=self.objective,
                reference_profiles=refs, margin_sigmas=self.margin_sigmas)
        else:
            self.events.append("no profile: the moving cap is kept by the watchdog alone "
                               "(no re-plan, no pause)")
        follower = CapFollower(source, device, chooser, self.batch_size,
                               device.current_frequency_hz(), watchdog=self._guard)
        self._follower = follower
        self._adopt_target(follower.begin())
        stack.enter_context(device.sensor_ticks(follower))

    def _adopt_target(self, target: Target) -> None:
        follower = self._follower
        assert follower is not None and self.device is not None
        changed_b = target.batch_size != self.batch_size
        self.batch_size = target.batch_size
        self.frequency_hz = self.device.current_frequency_hz()
        self.power_cap_w = follower.cap_w
        if self._monitor is not None and changed_b:
            self._monitor.follow(self.batch_size, self.power_cap_w)

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

    def _cap_before_step(self) -> None:
        if self._follower is None:
            return
        self._cap_wait_while_paused()
        if self._follower.stopped is not None:
            raise SessionError(f"the run has stopped: {self._follower.stopped} (check "
                               "`session.done` after each step)")

    def _cap_after_step(self, samples: int, busy_s: float) -> None:
        follower = self._follower
        if follower is None:
            return
        follower.on_step(samples, busy_s)
        self._cap_wait_while_paused()
        self._cap_take_pending()

    def _cap_take_pending(self) -> None:
        follower = self._follower
        if follower is None:
            return
        target = follower.take_pending()
        if target is not None:
            self._adopt_target(target)
        self.power_cap_w = follower.cap_w
        if self._monitor is not None:
            self._monitor.power_cap_w = follower.cap_w

    def _cap_wait_while_paused(self) -> None:
        """Idle the device, one sensor period at a time, while the cap is below every
        configuration (the ticks read the cap meanwhile)."""
        follower, device = self._follower, self.device
        if follower is None or device is None or not follower.paused:
            return
        follower.start_idling()
        if self.progress is not None:
            self.progress(self.status())
        periods = 0
        while follower.paused and follower.stopped is None:
            before_s = device.now_s()
            device.idle(device.sensor_period_s)
            idled_s = device.now_s() - before_s
            self.device_time_s += idled_s
            follower.on_idle(idled_s)
            device.check_watch()
            periods += 1
            if self.max_pause_s is not None and follower.pause_s >= self.max_pause_s:
                follower.stop(follower.run_s(), f"paused for {follower.pause_s:.1f} s, "
                              f"longer than max_pause_s ({self.max_pause_s:g} s)")
            if self.progress is not None and periods % self.progress_every == 0:
                self.progress(self.status())
        if self.progress is not None:
            self.progress(self.status())

    def _cap_after_drift_replan(self, frequency_hz: int) -> None:
        follower = self._follower
        if follower is None or self._monitor is None:
            return
        if follower.chooser is not None:
            follower.chooser = follower.chooser.with_profile(self._monitor.reference)
        follower.adopt_frequency(frequency_hz)

    def _resume_moving_cap(self, state: SessionState) -> None:
        follower = self._follower
        if follower is None:
            return
        if state.cap is None:
            raise WattcapFileError(
                f"{self._checkpoint.folder if self._checkpoint else 'the checkpoint'}: it was "
                "written without a moving cap; use another checkpoint folder or delete it")
        follower.load_state_dict(state.cap)
        self._adopt_target(Target(follower.batch_size, follower.target.frequency_hz))

    def _add_cap_history(self, record: RunRecord) -> None:
        record.objective = self.objective.describe()
        follower = self._follower
        if follower is None:
            return
        segments, timeline = follower.finish()
        record.cap_source = follower.source.describe()
        record.segments = segments
        record.timeline = timeline
        record.paused_s = follower.paused_s
        record.stop_reason = follower.stopped
        record.events = record.events + follower.events


def _mhz(frequency_hz: int | None) -> str:
    return "-" if frequency_hz is None else f"{frequency_hz / 1e6:.1f} MHz"


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


def _jsonable(value: dict[str, Any]) -> dict[str, Any]:
    # The identity goes through JSON in the checkpoint: compare like with like.
    return json.loads(json.dumps(value))


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
