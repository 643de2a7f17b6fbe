"""A PyTorch Lightning callback that runs a Lightning `Trainer` through a `wattcap.Session`:

    from wattcap.integrations.lightning import WattcapCallback
    from wattcap.runtime.session_config import Goal, PlanSettings

    callback = WattcapCallback(device="emulated:jetson-nano",
                               planning=PlanSettings(profile="nano.json", efficiency="eff.json"),
                               cap=5.0, goal=Goal(target_accuracy=0.9),
                               accuracy_metric="val_acc")
    data = MyDataModule(batch_size=callback.batch_size)      # the plan's batch size
    trainer = lightning.Trainer(callbacks=[callback], ...)
    trainer.fit(model, data)
    callback.record                                          # the RunRecord

It plans (or takes a given (b, f)) when built, applies the frequency when training starts,
checks that the training dataloader uses the plan's batch size (or sets the datamodule's or
the module's `batch_size` attribute with `set_batch_size=True`), optionally writes the
√-scaled learning rate into the optimisers, times every training batch, reports the logged
accuracy metric after each validation, stops training when the target is reached, and restores
the device at the end of fitting, on an exception and on SIGINT/SIGTERM/SIGHUP.

Under a moving cap (`cap="solar:seed=3"`, a `CapSource`, ...) the frequency follows the
cap and training pauses while nothing fits; with `follow_batch_size=True` the batch size is
re-planned too: build the training dataloader with
`batch_sampler=SessionBatchSampler(callback.session, len(train_set))` and pass
`set_learning_rate=True`, which then re-scales the learning rate at every batch.

With `PlanSettings(online_correction=True)` give `noise_scale_loss=lambda module, batch:
loss` (the mean loss of a part of a batch, as `training_step` computes it): on the steps the
correction measures, the callback takes the batch's gradient in parts beside Lightning's own
backward (`.grad` left alone; the parts' forward passes also update BatchNorm's running
statistics) and the run re-plans as `wattcap.runtime.online_correction` says; re-planned
batch sizes need `follow_batch_size=True` and the `SessionBatchSampler`. Without it the run
record says that nothing can be measured and the correction is off. On real hardware such a
step's time (the batch's backward and the parts') is measured as it is; the emulated device
charges both (`StepTimer.extra_costs`).

Install with `pip install 'wattcap[lightning]'`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    import lightning.pytorch as pl
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("the Lightning callback needs the lightning extra: "
                      "pip install 'wattcap[lightning]'") from err

from wattcap.core.run import RunRecord
from wattcap.data.loader import first_tensor
from wattcap.integrations.common import SessionDriver
from wattcap.runtime.errors import SessionError
from wattcap.runtime.session import Session


class WattcapCallback(pl.Callback):
    """Drives a `wattcap.Session` from Lightning's hooks (see the module docstring).

    Give a ready `session`, or the keyword arguments of `Session` (without `model`: the
    LightningModule is the model; its `example_input_array`, else the first training batch,
    measures its workload on the emulated device)."""

    def __init__(self, session: Session | None = None, *, accuracy_metric: str | None = None,
                 set_batch_size: bool = False, set_learning_rate: bool = False,
                 follow_batch_size: bool = False,
                 noise_scale_loss: Callable[[Any, Any], Any] | None = None,
                 **session_kwargs: Any) -> None:
        super().__init__()
        self._driver = SessionDriver(session, accuracy_metric, set_batch_size,
                                     set_learning_rate, session_kwargs,
                                     follow_batch_size=follow_batch_size)
        if noise_scale_loss is not None and not follow_batch_size:
            raise SessionError("noise_scale_loss measures for the online correction, whose "
                               "re-plans change the batch size: pass follow_batch_size=True "
                               "and draw batches with SessionBatchSampler(callback.session, "
                               "len(train_set))")
        self._noise_scale_loss = noise_scale_loss
        self._batch: Any = None

    @property
    def session(self) -> Session:
        """The session (planned when the callback was built)."""
        return self._driver.session

    @property
    def batch_size(self) -> int:
        """The plan's batch size."""
        return self.session.batch_size

    @property
    def learning_rate(self) -> float:
        """The √-scaled learning rate for the plan's batch size."""
        return self.session.learning_rate

    @property
    def record(self) -> RunRecord | None:
        """The run record, once fitting ended."""
        return self.session.record

    # -- Lightning hooks ---------------------------------------------------------------------
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        session = self.session
        self._driver.adopt(pl_module, getattr(pl_module, "example_input_array", None))
        if self._driver.set_batch_size:
            # a Trainer has `datamodule` only once fit() was given one
            for holder in (getattr(trainer, "datamodule", None), pl_module):
                if holder is not None and hasattr(holder, "batch_size"):
                    holder.batch_size = session.batch_size

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._driver.check_torch_device(pl_module.device)
        session = self._driver.start()
        loader = trainer.train_dataloader
        self._driver.check_batch_size(getattr(loader, "batch_size", None),
                                      "the training dataloader's batch size")
        if self._driver.set_learning_rate:
            for optimizer in trainer.optimizers:
                for group in optimizer.param_groups:
                    group["lr"] = session.learning_rate

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                             batch: Any, batch_idx: int) -> None:
        inputs = first_tensor(batch)
        self.session.provide_example_input(pl_module, inputs)
        if self._driver.set_learning_rate and self._driver.follow_batch_size:
            for optimizer in trainer.optimizers:
                self.session.apply_learning_rate(optimizer)
        self.session.begin_step(samples=int(inputs.shape[0]) if inputs is not None else None)
        self._batch = batch

    def on_before_backward(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           loss: Any) -> None:
        # the online correction measures beside Lightning's own backward (noise_scale_loss)
        if self._noise_scale_loss is not None and trainer.optimizers:
            loss_of = self._noise_scale_loss
            self.session.measure_beside(pl_module, trainer.optimizers[0],
                                        lambda part: loss_of(pl_module, part), self._batch)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:
        inputs = first_tensor(batch)
        self.session.end_step(samples=int(inputs.shape[0]) if inputs is not None else None)
        if self.session.done:
            trainer.should_stop = True

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        self._driver.report_metrics(trainer.callback_metrics)
        if self.session.done:
            trainer.should_stop = True

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._driver.close()

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                     exception: BaseException) -> None:
        self._driver.close(failed=True)

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._driver.close()
