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
and checks the Trainer's batch size and learning rate against the plan (or sets them in the
TrainingArguments with `set_batch_size=True` / `set_learning_rate=True`, which works when the
callback is passed to the Trainer before `train()`); it times every optimiser step, reports
the accuracy metric of every evaluation, stops training when the target is reached, and
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
    def on_train_begin(self, args: TrainingArguments, state: TrainerState,
                       control: TrainerControl, model: Any = None, **kwargs: Any) -> None:
        session = self.session
        self._driver.adopt(model, self._example_input)
        per_step = _samples_per_step(args)
        if self._driver.set_batch_size:
            # The Trainer builds its dataloader after this event: the plan's batch size holds.
            args.per_device_train_batch_size = session.batch_size // _accumulation(args)
            per_step = _samples_per_step(args)
        self._driver.check_batch_size(per_step, "the Trainer's batch per optimiser step "
                                      "(per_device_train_batch_size x gradient_accumulation_"
                                      "steps x processes)")
        self._driver.check_torch_device(args.device)
        if self._driver.set_learning_rate:
            args.learning_rate = session.learning_rate
            optimizer = kwargs.get("optimizer")
            for group in getattr(optimizer, "param_groups", []):
                group["lr"] = session.learning_rate
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


def _accumulation(args: TrainingArguments) -> int:
    return max(1, int(args.gradient_accumulation_steps)) * max(1, int(args.world_size))


def _samples_per_step(args: TrainingArguments) -> int:
    return int(args.per_device_train_batch_size) * _accumulation(args)
