"""What both framework callbacks do with their Session: start it lazily (the framework hands us
the model only when training starts), check or set the batch size, turn a logged metric into
an accuracy report, close and restore however training ends."""

from __future__ import annotations

import atexit
import weakref
from dataclasses import replace
from typing import Any

from wattcap.runtime.session import Session, SessionError
from wattcap.runtime.session_config import CapSettings


class SessionDriver:
    """Owns one Session for a framework callback.

    The session is given ready-made, or built from `session_kwargs` (the arguments of
    `Session`; `model` may be left out: the framework supplies it when training starts). It
    plans at once, so the batch size is known before the framework builds its dataloaders.
    `accuracy_metric` names the logged metric the target is on: the test accuracy (a fraction
    in [0, 1]) by default, or any metric the Session's `target_metric` names (e.g.
    accuracy_metric="eval_loss" with target_metric="loss": reached when it falls to the
    target). With `set_batch_size`, the framework's batch size is set to the plan's where the
    framework allows it; otherwise a different batch size is an error (the plan would not
    hold).

    Under a moving cap (`cap=` a cap source), a framework's dataloader keeps its batch
    size, so by default only the frequency follows the cap (cap policy "frequency": f
    re-selected for the plan's batch size, pauses when nothing fits). `follow_batch_size=True`
    re-plans the batch size too (cap policy "replan"): the dataloader must then draw its
    batches with `wattcap.runtime.sampling.SessionBatchSampler`."""

    def __init__(self, session: Session | None, accuracy_metric: str | None,
                 set_batch_size: bool, set_learning_rate: bool,
                 session_kwargs: dict[str, Any], follow_batch_size: bool = False) -> None:
        if session is not None and session_kwargs:
            raise SessionError("give either a Session or the arguments to build one, not both")
        if session is None and session_kwargs.get("cap") is not None:
            cap = CapSettings.of(session_kwargs["cap"])
            if cap.moving is not None and cap.policy is None:
                session_kwargs["cap"] = replace(
                    cap, policy="replan" if follow_batch_size else "frequency")
        self.follow_batch_size = follow_batch_size
        self.session: Session = session if session is not None else Session(**session_kwargs)
        self.accuracy_metric = accuracy_metric
        self.set_batch_size = set_batch_size
        self.set_learning_rate = set_learning_rate
        self._started = False
        # Frameworks do not always call their end hook when training raises (the HF Trainer
        # has no exception hook): the interpreter's exit is the last chance to restore.
        atexit.register(_close_at_exit, weakref.ref(self))

    def adopt(self, model: Any, example_input: Any = None) -> None:
        """The framework's model is what the session trains, unless the session has one."""
        if self.session.model_name is None:
            self.session.adopt_model(model, example_input)

    def start(self) -> Session:
        """Start the session (apply the frequency, start the watch) once."""
        if not self._started:
            self.session.start()
            self._started = True
        return self.session

    def check_batch_size(self, batch_size: int | None, where: str) -> None:
        """Refuse a framework batch size that is not the plan's (a dataloader with a
        `SessionBatchSampler` has none: it follows the session)."""
        session = self.session
        if batch_size is not None and batch_size != session.batch_size:
            raise SessionError(
                f"{where} is {batch_size} but the plan chose batch size {session.batch_size}: "
                f"set it to {session.batch_size}, or pass set_batch_size=True")

    def check_torch_device(self, framework_device: Any) -> None:
        """Refuse a framework that trains elsewhere than the session's device (the plan, the
        clock and the power would belong to another processor)."""
        wanted, found = _normal(self.session.torch_device), _normal(str(framework_device))
        if wanted != found:
            raise SessionError(
                f"the framework trains on {found} but the session's device "
                f"{self.session.device.name if self.session.device else '(none)'} runs on "
                f"{wanted}: point the framework at {wanted}")

    def report_metrics(self, metrics: dict[str, Any]) -> None:
        """Report the accuracy metric if it was logged."""
        if not self._started or self.accuracy_metric is None:
            return
        value = metrics.get(self.accuracy_metric)
        if value is None:
            return
        self.session.report(float(value))

    def close(self, failed: bool = False) -> None:
        """Stop the session and restore the device (idempotent)."""
        if self._started:
            self._started = False
            self.session.close(failed=failed)


def _close_at_exit(ref: weakref.ref[SessionDriver]) -> None:
    driver = ref()
    if driver is not None:
        driver.close(failed=True)


def _normal(torch_device: str) -> str:
    return "cuda:0" if torch_device == "cuda" else torch_device
