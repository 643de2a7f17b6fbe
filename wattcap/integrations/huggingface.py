"""A Hugging Face `TrainerCallback` that runs a `transformers.Trainer` through a
`wattcap.Session`:

    from wattcap.integrations.huggingface import WattcapTrainerCallback
    from wattcap.runtime.session_config import Goal, PlanSettings

    callback = WattcapTrainerCallback(
        device="nvml:0", planning=PlanSettings(profile="a100.json", efficiency="eff.json"),
        cap=250, goal=Goal(target_accuracy=0.9), accuracy_metric="eval_accuracy")
    args = TrainingArguments(..., per_device_train_batch_size=callback.batch_size,
                             learning_rate=callback.learning_rate)
    with callback:                                  # restores the device however it ends
        Trainer(model=model, args=args, callbacks=[callback], ...).train()
    callback.record                                 # the RunRecord

It plans (or takes a given (b, f)) when built; when training begins it applies the frequency
and checks the batch the Trainer's dataloader really yields against the plan: build the
TrainingArguments with `per_device_train_batch_size=callback.batch_size` as above (recent
transformers releases fix the batch size when the Trainer is built, so `set_batch_size=True`
only works on older ones, and is refused with this advice where it cannot). With
`set_learning_rate=True` the plan's learning rate goes into the Trainer's optimiser and its
scheduler's base when training begins. It times every optimiser step, reports the accuracy
metric of every evaluation, stops training when the target is reached, and
restores the device when training ends. The Trainer calls no callback when training raises:
use the callback as a context manager (as above), or rely on the restore at interpreter exit.

Under a moving cap (`cap="battery:capacity_wh=20,max_w=9"`, a `CapSource`, ...) the
Trainer's batch size stays; the frequency follows the cap (f re-selected for that batch size)
and training pauses while nothing fits.

The online correction (`PlanSettings(online_correction=True)`) cannot measure here: the
Trainer owns the batch and the backward, and no callback sees them; the run record says so and
the correction stays off (the Lightning callback can, with `noise_scale_loss`).

Install with `pip install 'wattcap[hf]'` (transformers and accelerate).
"""

from __future__ import annotations

from typing import Any

try:
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("the Hugging Face callback needs the hf extra: "
                      "pip install 'wattcap[hf]'") from err

from wattcap.core.run import RunRecord
from wattcap.integrations.common import SessionDriver
from wattcap.runtime.errors import SessionError
from wattcap.runtime.session import Session


class WattcapTrainerCallback(TrainerCallback):
    """Drives a `wattcap.Session` from the Trainer's events (see the module docstring).

    Give a ready `session`, or the keyword arguments of `Session` (`model` may be left out:
    the Trainer's model is used; pass `example_input`, one batch of input ids or inputs, so
    the emulated device can measure its workload)."""

    def __init__(self, session: Session | None = None, *, accuracy_metric: str | None = None,
                 set_batch_size: bool = False, set_learning_rate: bool = False,
                 **session_kwargs: Any) -> None:
        self._example_input = session_kwargs.pop("example_input", None)
        self._driver = SessionDriver(session, accuracy_metric, set_batch_size,
                                     set_learning_rate, session_kwargs)

    @property
    def session(self) -> Session:
        """The session (planned when the callback was built)."""
        return self._driver.session

    @property
    def batch_size(self) -> int:
        """The plan's batch size (per optimiser step)."""
        return self.session.batch_size

    @property
    def learning_rate(self) -> float:
        """The √-scaled learning rate for the plan's batch size."""
        return self.session.learning_rate

    @property
    def record(self) -> RunRecord | None:
        """The run record, once training ended."""
        return self.session.record

    def __enter__(self) -> WattcapTrainerCallback:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._driver.close(failed=exc_type is not None)

    # -- Trainer events ----------------------------------------------------------------------
    def on_init_end(self, args: TrainingArguments, state: TrainerState,
                    control: TrainerControl, **kwargs: Any) -> None:
        # the end of Trainer.__init__: train() builds the dataloader and the optimizer later
        # (recent releases before on_train_begin), so the plan's values go in here
        self._set_args(args)

    def _set_args(self, args: TrainingArguments) -> None:
        session = self.session
        if self._driver.set_batch_size:
            args.per_device_train_batch_size = session.batch_size // _accumulation(args)
        if self._driver.set_learning_rate:
            args.learning_rate = session.learning_rate

    def on_train_begin(self, args: TrainingArguments, state: TrainerState,
                       control: TrainerControl, model: Any = None, **kwargs: Any) -> None:
        session = self.session
        self._driver.adopt(model, self._example_input)
        self._set_args(args)
        # what the Trainer really trains with: its dataloader's batch, not only the args
        # (recent releases fix the batch size when the Trainer is built: args changed after
        # that do not reach the dataloader)
        loader_batch = _loader_batch_size(kwargs.get("train_dataloader"))
        per_step = _samples_per_step(args) if loader_batch is None else \
            loader_batch * _accumulation(args)
        if self._driver.set_batch_size and per_step != session.batch_size:
            raise SessionError(
                f"the Trainer trains batches of {per_step} per optimiser step, not the plan's "
                f"{session.batch_size}: this transformers release fixes the batch size when the "
                "Trainer is built, so set_batch_size cannot change it; build the "
                "TrainingArguments with per_device_train_batch_size=callback.batch_size "
                "(divided by gradient_accumulation_steps x processes)")
        self._driver.check_batch_size(per_step, "the Trainer's batch per optimiser step "
                                      "(its dataloader's batch x gradient_accumulation_steps x "
                                      "processes)")
        self._driver.check_torch_device(args.device)
        if self._driver.set_learning_rate:
            _set_learning_rate(kwargs.get("optimizer"), kwargs.get("lr_scheduler"),
                               session.learning_rate)
        self._driver.start()

    def on_step_begin(self, args: TrainingArguments, state: TrainerState,
                      control: TrainerControl, **kwargs: Any) -> None:
        self.session.begin_step()

    def on_step_end(self, args: TrainingArguments, state: TrainerState,
                    control: TrainerControl, **kwargs: Any) -> None:
        self.session.end_step(samples=_samples_per_step(args))
        if self.session.done:
            control.should_training_stop = True

    def on_evaluate(self, args: TrainingArguments, state: TrainerState,
                    control: TrainerControl, metrics: dict[str, float] | None = None,
                    **kwargs: Any) -> None:
        self._driver.report_metrics(metrics or {})
        if self.session.done:
            control.should_training_stop = True

    def on_train_end(self, args: TrainingArguments, state: TrainerState,
                     control: TrainerControl, **kwargs: Any) -> None:
        self._driver.close()


def _loader_batch_size(loader: Any) -> int | None:
    """The batch a (possibly accelerate-wrapped) dataloader yields per process, None where it
    cannot say."""
    for found in (getattr(loader, "batch_size", None),
                  getattr(getattr(loader, "batch_sampler", None), "batch_size", None)):
        if isinstance(found, int):
            return found
    return None


def _set_learning_rate(optimizer: Any, scheduler: Any, learning_rate: float) -> None:
    """The plan's learning rate in an optimiser the Trainer built already, and as its
    scheduler's base (a scheduler rewrites the groups' rate from its base at every step)."""
    groups = getattr(optimizer, "param_groups", [])
    for group in groups:
        group["lr"] = group["initial_lr"] = learning_rate
    if scheduler is not None and hasattr(scheduler, "base_lrs"):
        scheduler.base_lrs = [learning_rate] * len(scheduler.base_lrs)


def _accumulation(args: TrainingArguments) -> int:
    return max(1, int(args.gradient_accumulation_steps)) * max(1, int(args.world_size))


def _samples_per_step(args: TrainingArguments) -> int:
    return int(args.per_device_train_batch_size) * _accumulation(args)
