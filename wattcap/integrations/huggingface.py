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
Trainer's batch size stays by default; the frequency follows the cap (f re-selected for that
batch size) and training pauses while nothing fits. With `follow_batch_size=True` the batch
size is re-planned too (cap policy "replan"): the Trainer must then draw its batches at the
session's batch size, from the dataloader the callback builds (a `SessionBatchSampler` over
the training set, the Trainer's collator and worker settings), given by a Trainer subclass:

    class FollowingTrainer(Trainer):
        def get_train_dataloader(self):
            return callback.train_dataloader(self)

Its sampler never ends: set `max_steps` (or let the goal stop the run). The Trainer and
accelerate fetch batches ahead (dataloader workers `prefetch_factor` more each), so a new
batch size reaches training a step or more after the session chose it: each step is counted
and charged at the batch the model really trained (the session's step begins at the step's
first training forward, a forward pre-hook on the model, with that batch's size), and with
`set_learning_rate=True` each optimiser step takes the √-scaled learning rate of that batch
(the scheduler's factor kept). It needs `gradient_accumulation_steps=1` in one process (the
sampler draws the session's whole batch per optimiser step).

The online correction (`PlanSettings(online_correction=True)`) measures here too; it needs
`follow_batch_size=True` (its re-plans change the batch size). On the steps the correction
measures, after the Trainer's backward and before its optimiser step, the callback takes that
step's batch's gradient in parts (`.grad` left alone; the parts' forward passes also update
BatchNorm's running statistics). A part's loss is the Trainer's own, as its `training_step`
computes it: `trainer.compute_loss(model, part)` (a subclass's override, label smoothing,
`compute_loss_func`) inside `trainer.compute_loss_context_manager()`, each part its own mean
(no `num_items_in_batch`), on the inputs `compute_loss` was given in training (the callback
wraps the `compute_loss` of the Trainer that `train_dataloader` was built for, on that
instance, until training ends). `noise_scale_loss=lambda model, part: loss` takes precedence:
its parts are of the keyword inputs of the training forward (a forward pre-hook on the model).
On real hardware such a step's time (the Trainer's backward and the parts') is measured as it
is; the emulated device charges both. Without the correction none of this runs.

Install with `pip install 'wattcap[hf]'` (transformers and accelerate).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

try:
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("the Hugging Face callback needs the hf extra: "
                      "pip install 'wattcap[hf]'") from err

from wattcap.core.run import RunRecord, scaled_learning_rate
from wattcap.data.loader import first_tensor
from wattcap.integrations.common import SessionDriver
from wattcap.runtime.errors import SessionError
from wattcap.runtime.sampling import SessionBatchSampler
from wattcap.runtime.session import Session


class WattcapTrainerCallback(TrainerCallback):
    """Drives a `wattcap.Session` from the Trainer's events (see the module docstring).

    Give a ready `session`, or the keyword arguments of `Session` (`model` may be left out:
    the Trainer's model is used; pass `example_input`, one batch of input ids or inputs, so
    the emulated device can measure its workload). `follow_batch_size=True` re-plans the batch
    size (under a moving cap, after the online correction) with the Trainer drawing from
    `train_dataloader`; `noise_scale_loss(model, part)`: the mean loss of a part of a training
    forward's keyword inputs, for the online correction (default: the Trainer's
    `compute_loss`)."""

    def __init__(self, session: Session | None = None, *, accuracy_metric: str | None = None,
                 set_batch_size: bool = False, set_learning_rate: bool = False,
                 follow_batch_size: bool = False,
                 noise_scale_loss: Callable[[Any, Any], Any] | None = None,
                 **session_kwargs: Any) -> None:
        self._example_input = session_kwargs.pop("example_input", None)
        self._driver = SessionDriver(session, accuracy_metric, set_batch_size,
                                     set_learning_rate, session_kwargs,
                                     follow_batch_size=follow_batch_size)
        correcting = bool(self.session.settings.planning.online_correction)
        if (noise_scale_loss is not None or correcting) and not follow_batch_size:
            raise SessionError("the online correction (and noise_scale_loss, which measures "
                               "for it) re-plans the batch size: pass follow_batch_size=True "
                               "and draw batches with callback.train_dataloader(trainer) (a "
                               "Trainer subclass's get_train_dataloader)")
        # what the model trained at each step: its batch size with follow_batch_size (which
        # lands a step or more late), the batch itself only where the correction measures it
        self._batches = _TrainedBatches(self.session, noise_scale_loss, keep=correcting) \
            if follow_batch_size else None
        self._learning_rate: float | None = None  # the rate last put into the optimiser

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

    def train_dataloader(self, trainer: Any) -> Any:
        """The training DataLoader for `trainer` (a `transformers.Trainer`) whose batches follow
        the session's batch size (`follow_batch_size=True`): return it from a Trainer
        subclass's `get_train_dataloader` (see the module docstring). The online correction
        then measures with `trainer`'s own loss (see the module docstring)."""
        if self._batches is not None:
            self._batches.use_trainer(trainer)
        return _session_dataloader(trainer, self.session)

    def __enter__(self) -> WattcapTrainerCallback:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._close(failed=exc_type is not None)

    def _close(self, failed: bool = False) -> None:
        if self._batches is not None:
            self._batches.detach()
        self._driver.close(failed=failed)

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
        if self._batches is not None:
            self._check_following(args, kwargs.get("train_dataloader"))
        else:
            self._check_batch_size(args, kwargs.get("train_dataloader"))
        self._driver.check_torch_device(args.device)
        if self._driver.set_learning_rate:
            _set_learning_rate(kwargs.get("optimizer"), kwargs.get("lr_scheduler"),
                               session.learning_rate)
            self._learning_rate = session.learning_rate
        self._driver.start()
        if self._batches is not None and model is not None:
            self._batches.attach(model)

    def _check_batch_size(self, args: TrainingArguments, loader: Any) -> None:
        """What the Trainer really trains with: its dataloader's batch, not only the args
        (recent releases fix the batch size when the Trainer is built: args changed after
        that do not reach the dataloader)."""
        session = self.session
        loader_batch = _loader_batch_size(loader)
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

    def _check_following(self, args: TrainingArguments, loader: Any) -> None:
        """follow_batch_size: one whole batch per optimiser step, drawn at the session's batch
        size."""
        if _accumulation(args) > 1:
            raise SessionError(
                "follow_batch_size draws the session's whole batch for every optimiser step, "
                "and the online correction measures that batch, but this Trainer splits each "
                f"step into gradient_accumulation_steps={args.gradient_accumulation_steps} "
                f"micro-batches in {args.world_size} process(es), which no callback sees "
                "together: train with gradient_accumulation_steps=1 in one process (the plan's "
                "batch size is one the profile ran on this device)")
        if not hasattr(TrainerCallback, "on_pre_optimizer_step"):
            # where the rate is set and the correction measures: between backward and step
            raise SessionError("follow_batch_size needs the Trainer's on_pre_optimizer_step "
                               "event, which this transformers release lacks: upgrade it")
        if loader is not None and not _follows_session(loader, self.session):
            raise SessionError(
                "follow_batch_size=True, but the Trainer's dataloader keeps its own batch size: "
                "return callback.train_dataloader(self) from a Trainer subclass's "
                "get_train_dataloader (see wattcap.integrations.huggingface)")

    def on_step_begin(self, args: TrainingArguments, state: TrainerState,
                      control: TrainerControl, **kwargs: Any) -> None:
        if self._batches is None:
            self.session.begin_step()  # the Trainer's batch size, the plan's
        else:
            # the step's first training forward begins the session's, at the size of the
            # batch it trains: one fetched before a re-plan is charged at its own size
            self._batches.begin_pending()

    def on_pre_optimizer_step(self, args: TrainingArguments, state: TrainerState,
                              control: TrainerControl, model: Any = None, optimizer: Any = None,
                              lr_scheduler: Any = None, **kwargs: Any) -> None:
        # after the Trainer's backward (and its clipping), before its optimiser step
        batches = self._batches
        if batches is None:
            return
        if self._learning_rate is not None:
            self._follow_learning_rate(optimizer, lr_scheduler, batches.samples)
        if batches.keep:
            batches.measure(model, optimizer)

    def _follow_learning_rate(self, optimizer: Any, scheduler: Any, trained: int | None) -> None:
        """The √-scaled rate of the batch this step trained (a re-planned batch size reaches
        training a step or more after the session chose it), the scheduler's factor kept."""
        session = self.session
        rate = scaled_learning_rate(session.lr_ref, session.batch_size_ref,
                                    trained or session.batch_size)
        if self._learning_rate is not None and rate != self._learning_rate:
            _set_learning_rate(optimizer, scheduler, rate, previous=self._learning_rate)
            self._learning_rate = rate

    def on_step_end(self, args: TrainingArguments, state: TrainerState,
                    control: TrainerControl, **kwargs: Any) -> None:
        # following the session, the batch trained says (None: the plan's batch size)
        samples: int | None
        if self._batches is None:
            samples = _samples_per_step(args)
        else:
            self._batches.begin_if_pending()
            samples = self._batches.take_samples()
        self.session.end_step(samples=samples)
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
        self._close()


def _loader_batch_size(loader: Any) -> int | None:
    """The batch a (possibly accelerate-wrapped) dataloader yields per process, None where it
    cannot say."""
    for found in (getattr(loader, "batch_size", None),
                  getattr(getattr(loader, "batch_sampler", None), "batch_size", None)):
        if isinstance(found, int):
            return found
    return None


def _set_learning_rate(optimizer: Any, scheduler: Any, learning_rate: float,
                       previous: float | None = None) -> None:
    """The plan's learning rate in an optimiser the Trainer built already, and as its
    scheduler's base (a scheduler rewrites the groups' rate from its base at every step). With
    `previous` (a re-planned rate during training) the groups' rates are scaled by
    learning_rate / previous, so this step keeps the scheduler's current factor."""
    groups = getattr(optimizer, "param_groups", [])
    for group in groups:
        group["lr"] = learning_rate if previous is None else \
            group["lr"] * learning_rate / previous
        group["initial_lr"] = learning_rate
    if scheduler is not None and hasattr(scheduler, "base_lrs"):
        scheduler.base_lrs = [learning_rate] * len(scheduler.base_lrs)


def _accumulation(args: TrainingArguments) -> int:
    return max(1, int(args.gradient_accumulation_steps)) * max(1, int(args.world_size))


def _samples_per_step(args: TrainingArguments) -> int:
    return int(args.per_device_train_batch_size) * _accumulation(args)


# -- following the session's batch size, and the online correction's measurement -------------


class _TrainedBatches:
    """What each training step really trains, seen by a forward pre-hook on the Trainer's model
    (no callback is given the batch) and, for the online correction, by the Trainer's
    `compute_loss` (the inputs its loss is computed from: a loss that pops `labels` before the
    forward leaves the forward without them). The step's first training forward begins the
    session's step at that batch's size, so its device cost is the batch's own."""

    def __init__(self, session: Session, loss_of: Callable[[Any, Any], Any] | None,
                 keep: bool) -> None:
        self.session = session
        self.loss_of = loss_of  # the user's noise_scale_loss; None: the Trainer's loss
        self.keep = keep
        self.samples: int | None = None
        self.batch: dict[str, Any] | None = None  # the forward's keyword inputs
        self.loss_inputs: Any = None  # what the Trainer's compute_loss was given
        self._pending = False  # the Trainer began a step the session has not begun yet
        self._busy = False  # the session's own forward passes (probe, parts) are not training
        self._hook: Any = None
        #: the Trainer whose compute_loss is wrapped: it, its own, the wrapper, and whether
        #: its own was an attribute of the instance (put back as it was when training ends)
        self._wrapped: tuple[Any, Callable[..., Any], Callable[..., Any], bool] | None = None

    def attach(self, model: Any) -> None:
        """Watch `model`'s forward (the Trainer calls it with keyword inputs)."""
        self._remove_hook()
        self._hook = model.register_forward_pre_hook(self._seen, with_kwargs=True)

    def use_trainer(self, trainer: Any) -> None:
        """Measure with `trainer`'s own loss (unless the user gave one): keep the inputs its
        `compute_loss` gets in training (wrapped on this instance; `detach` unwraps it)."""
        if not self.keep or self.loss_of is not None:
            return
        self._release_trainer()
        original = trainer.compute_loss  # bound: a subclass's override where it has one

        def compute_loss(model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(model, "training", False) and not self._busy:
                # a copy: a loss that pops `labels` must not take them from the measurement
                self.loss_inputs = dict(inputs) if isinstance(inputs, Mapping) else inputs
            return original(model, inputs, *args, **kwargs)

        self._wrapped = (trainer, original, compute_loss, "compute_loss" in vars(trainer))
        trainer.compute_loss = compute_loss

    def detach(self) -> None:
        """Stop watching, the Trainer's compute_loss unwrapped (idempotent)."""
        self._remove_hook()
        self._release_trainer()
        self.clear()
        self._pending = False

    def _remove_hook(self) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def _release_trainer(self) -> None:
        if self._wrapped is None:
            return
        trainer, original, wrapper, own = self._wrapped
        self._wrapped = None
        if vars(trainer).get("compute_loss") is not wrapper:
            return  # replaced since: not ours to undo
        if own:
            trainer.compute_loss = original
        else:
            del trainer.compute_loss  # its class's method again

    def clear(self) -> None:
        """Forget what was seen (a new step begins)."""
        self.samples, self.batch, self.loss_inputs = None, None, None

    def begin_pending(self) -> None:
        """The Trainer begins a step: the session's begins at its first training forward,
        which says the size of the batch trained (with prefetching dataloaders, not the
        session's batch size for a step or more after a re-plan)."""
        self.clear()
        self._pending = True

    def begin_if_pending(self) -> None:
        """Begin the session's step where no training forward did (a step that never called
        the model: charged at the session's batch size)."""
        if self._pending:
            self._begin(None)

    def _begin(self, samples: int | None) -> None:
        self._pending = False
        self._busy = True  # a workload probe's forward in begin_step is not training's
        try:
            self.session.begin_step(samples)
        finally:
            self._busy = False

    def _seen(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not module.training or self._busy:
            return  # an evaluation, or the session's own passes
        inputs = first_tensor(kwargs) if kwargs else first_tensor(args)
        self.samples = int(inputs.shape[0]) if inputs is not None and inputs.dim() else None
        if self.keep and kwargs and not args:
            # a part's mean loss is measured: not the Trainer's loss normalised by the count
            # of the whole batch's items (which it adds to the inputs of some models)
            self.batch = {k: v for k, v in kwargs.items() if k != "num_items_in_batch"}
        if self._pending:
            self._begin(self.samples)

    def take_samples(self) -> int | None:
        """The samples of the batch trained in this step (None: none seen)."""
        samples, self.samples = self.samples, None
        return samples

    def measure(self, model: Any, optimizer: Any) -> None:
        """The online correction's measurement of the step's batch beside the Trainer's
        backward (nothing on the steps it does not measure): with the user's loss on the
        forward's inputs, else with the Trainer's on its compute_loss's inputs (the model's
        own loss on the forward's where the Trainer never called compute_loss)."""
        batch, loss_of = self.batch, self.loss_of or _model_loss
        if self._wrapped is not None and self.loss_inputs is not None:
            trainer, original = self._wrapped[:2]
            batch, loss_of = self.loss_inputs, partial(_trainer_loss, trainer, original)
        self.batch, self.loss_inputs = None, None
        if batch is None or model is None or optimizer is None:
            return  # nothing seen: the correction counts the step as unmeasured
        self._busy = True
        try:
            # accelerate wraps the optimiser: the measurement reads Adam's own state
            self.session.measure_beside(model, getattr(optimizer, "optimizer", optimizer),
                                        lambda part: loss_of(model, part), batch)
        finally:
            self._busy = False


def _model_loss(model: Any, part: Any) -> Any:
    """A part's mean loss as the Trainer takes it from a model given `labels`."""
    outputs = model(**part)
    return outputs["loss"] if isinstance(outputs, dict) else outputs[0]


def _trainer_loss(trainer: Any, compute_loss: Callable[..., Any], model: Any, part: Any) -> Any:
    """A part's loss as the Trainer's training_step computes it: its compute_loss (a
    subclass's override, label smoothing, compute_loss_func) in its loss context (the autocast
    of releases that apply it there; recent ones autocast in the forward accelerate wraps).
    No num_items_in_batch: a part's mean, not its share of the whole batch's loss."""
    with trainer.compute_loss_context_manager():
        # a copy: compute_loss may pop `labels` from what it is given
        return compute_loss(model, dict(part) if isinstance(part, Mapping) else part)


def _session_dataloader(trainer: Any, session: Session) -> Any:
    """The Trainer's training DataLoader with its batches drawn by a `SessionBatchSampler`: the
    training set's columns and collator as `Trainer.get_train_dataloader` has them, its worker
    settings, prepared by its accelerator (which moves the batches to the device)."""
    from torch.utils.data import DataLoader, IterableDataset

    dataset = trainer.train_dataset
    if dataset is None or isinstance(dataset, IterableDataset) or not hasattr(dataset, "__len__"):
        raise SessionError("following the session's batch size draws sample indices: the "
                           "Trainer needs a train_dataset with a length (not an iterable one)")
    collator = trainer.data_collator
    if _is_datasets_dataset(dataset):
        dataset = trainer._remove_unused_columns(dataset, description="Training")
    else:
        collator = trainer._get_collator_with_removed_columns(collator, description="Training")
    args = trainer.args
    seed = args.data_seed if getattr(args, "data_seed", None) is not None else args.seed
    params: dict[str, Any] = {"collate_fn": collator,
                              "num_workers": int(args.dataloader_num_workers),
                              "pin_memory": bool(args.dataloader_pin_memory)}
    if params["num_workers"] > 0:  # torch refuses these without workers
        params.update(
            persistent_workers=bool(getattr(args, "dataloader_persistent_workers", False)),
            prefetch_factor=getattr(args, "dataloader_prefetch_factor", None),
            multiprocessing_context=getattr(args, "dataloader_multiprocessing_context", None),
            worker_init_fn=_seed_worker)
    loader = DataLoader(dataset, batch_sampler=SessionBatchSampler(session, len(dataset), seed),
                        **params)
    return trainer.accelerator.prepare(loader)


def _is_datasets_dataset(dataset: Any) -> bool:
    """A `datasets.Dataset` (its unused columns are removed, not collated away)."""
    from transformers.utils import is_datasets_available

    if not is_datasets_available():
        return False
    import datasets

    return isinstance(dataset, datasets.Dataset)


def _seed_worker(_worker_id: int) -> None:
    """Each worker's Python, NumPy and torch seeded from the seed torch gives it, as the
    Trainer's own workers are (random augmentations then repeat with the run's seed)."""
    import torch
    from transformers.trainer_utils import set_seed

    set_seed(torch.initial_seed() % 2**32)


def _follows_session(loader: Any, session: Session) -> bool:
    """The (possibly accelerate-wrapped) dataloader draws its batches with a
    `SessionBatchSampler` of `session`."""
    sampler = getattr(loader, "batch_sampler", None)
    while sampler is not None and not isinstance(sampler, SessionBatchSampler):
        sampler = getattr(sampler, "batch_sampler", None)  # accelerate's wrappers hold it
    return sampler is not None and sampler.session is session
