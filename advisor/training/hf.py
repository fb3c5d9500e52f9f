"""HuggingFace ``Trainer`` adapter: checkpoint when the platform asks, and say so.

Usage::

    from advisor.training.hf import AdvisorCallback
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[AdvisorCallback()])
    # or, so that the answer also rides on KubeflowCallback's progress reports:
    AdvisorCallback().attach(trainer)

How it works: ``on_step_end`` polls the request file (rank 0's view is broadcast to all ranks) and
sets ``control.should_save``; the Trainer saves on every rank and calls ``on_save``, where a
barrier waits for all ranks before rank 0 acknowledges. Periodic saves are reported too, so the
controller always knows the last checkpoint step.

Coexistence:

- ``KubeflowCallback`` (``report_to`` "kubeflow") replaces ``trainerStatus`` with every POST and
  keeps every numeric value it has seen in ``on_log``. The ack is posted at once through the
  configured channel (with the current progress, so nothing is erased); with ``attach(trainer)``
  it is also logged through ``Trainer.log`` from a callback placed first, so ``KubeflowCallback``
  caches it and it rides on every later Kubeflow report, the final one included (and it lands in
  ``trainer_state.json``). Numeric request ids survive that cache; others only the direct POST.
- ``enable_jit_checkpoint``: on SIGTERM the Trainer's JIT callback saves by itself and stops
  training without calling ``on_save``. A pending request is then answered by that checkpoint
  (found on disk, complete: no ``checkpoint-is-incomplete.txt`` sentinel) instead of saving twice
  while the grace period runs out.

``transformers`` is imported only when ``AdvisorCallback`` is first looked up (the class must
subclass ``TrainerCallback``); importing this module imports nothing heavy.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.protocol import ACK_REQUEST_METRIC, ACK_STEP_METRIC
from advisor.training.distributed import Collective, default_collective
from advisor.training.loop import agreed_request
from advisor.training.requests import CheckpointRequests

__all__ = ["AdvisorCallback", "AdvisorCallbackLogic"]

if TYPE_CHECKING:
    #: built on first access by the module ``__getattr__`` below (it subclasses the framework's class)
    AdvisorCallback: type[AdvisorCallbackLogic]

log = logging.getLogger("advisor.training")

_CHECKPOINT_PREFIX = "checkpoint"  # transformers.trainer_utils.PREFIX_CHECKPOINT_DIR
_JIT_SENTINEL = "checkpoint-is-incomplete.txt"  # written by transformers' JIT CheckpointManager
_ACK_NAMES = frozenset({ACK_STEP_METRIC, ACK_REQUEST_METRIC})


class AdvisorCallbackLogic:
    """The behaviour of :class:`AdvisorCallback`, free of any transformers import (the public
    class is this plus ``transformers.TrainerCallback`` as a base)."""

    def __init__(
        self,
        requests: CheckpointRequests | None = None,
        *,
        check_every_n_steps: int = 1,
        collective: Collective | None = None,
    ) -> None:
        if check_every_n_steps < 1:
            raise ValueError(f"check_every_n_steps must be >= 1, got {check_every_n_steps}")
        self.requests = requests if requests is not None else CheckpointRequests()
        self.check_every_n_steps = check_every_n_steps
        self._collective = collective
        self._in_flight: str | None = None
        self._in_flight_since = 0.0
        self._trainer: Any = None
        self._last_step_end = time.time()

    # -------------------------------------------------------------- wiring

    def attach(self, trainer: Any) -> AdvisorCallbackLogic:
        """Put this callback first in ``trainer``'s callback list and log each acknowledgement
        through ``trainer.log``, so that ``KubeflowCallback`` (after it) caches the ack metrics."""
        self._trainer = trainer
        callbacks = trainer.callback_handler.callbacks
        if self in callbacks:
            callbacks.remove(self)
        callbacks.insert(0, self)
        return self

    def _group(self) -> Collective:
        if self._collective is None:
            self._collective = default_collective()  # the process group exists once training starts
        return self._collective

    def _track(self, state: Any) -> None:
        if state.is_world_process_zero:
            self.requests.update_progress(
                int(state.global_step),
                total_steps=int(state.max_steps) if state.max_steps else None,
                epoch=state.epoch,
            )

    # -------------------------------------------------------------- events

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._track(state)
        self._last_step_end = time.time()
        # the eval metric the Trainer keeps its best model by (set with load_best_model_at_end,
        # or by hand): reported, so that the advisor judges the run by the user's own choice
        self.requests.judge_by(getattr(args, "metric_for_best_model", None))

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        previous_step_end, self._last_step_end = self._last_step_end, time.time()
        self._track(state)
        if self._in_flight is not None:
            control.should_save = True  # requested but not saved yet: ask again (same on every rank)
            return
        if state.global_step % self.check_every_n_steps:
            return
        request_id = agreed_request(self.requests, self._group())
        if request_id is None:
            return
        if control.should_training_stop:
            # the JIT callback (SIGTERM) may have saved during this step and turned should_save off:
            # that checkpoint answers the request; a second save would eat the grace period
            jit_step = self._fresh_checkpoint(args, state, since=previous_step_end)
            if jit_step is not None:
                self._acknowledge(request_id, state, step=jit_step)
                return
        control.should_save = True
        self._in_flight = request_id
        self._in_flight_since = time.time()

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._group().barrier()  # every rank has written its part of the checkpoint
        request_id, self._in_flight = self._in_flight, None
        self._acknowledge(request_id, state)

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if not state.is_world_process_zero or logs is None:
            return
        numeric = {
            k: v
            for k, v in logs.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and k not in _ACK_NAMES
        }
        self.requests.update_progress(int(state.global_step), metrics=numeric)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._in_flight is None:
            return
        step = self._fresh_checkpoint(args, state, since=self._in_flight_since)
        request_id, self._in_flight = self._in_flight, None
        if step is not None:  # saved by the JIT callback, which bypasses on_save
            self._acknowledge(request_id, state, step=step)
        else:
            log.warning("training ended before checkpoint request %s was honoured", request_id)

    # -------------------------------------------------------------- helpers

    def _acknowledge(self, request_id: str | None, state: Any, step: int | None = None) -> None:
        if not state.is_world_process_zero:
            return
        self.requests.acknowledge(request_id, int(state.global_step if step is None else step))
        log_method = getattr(self._trainer, "log", None)
        if callable(log_method):
            ack = self.requests.ack_metrics(numeric=True)
            log_method({k: v for k, v in ack.items() if isinstance(v, int | float)})

    @staticmethod
    def _fresh_checkpoint(args: Any, state: Any, *, since: float) -> int | None:
        """The highest step <= global_step with a complete ``checkpoint-<step>`` directory
        modified at or after ``since`` (epoch seconds), or ``None``."""
        output_dir = getattr(args, "output_dir", None)
        if not output_dir or not os.path.isdir(output_dir):
            return None
        best: int | None = None
        for entry in Path(output_dir).glob(f"{_CHECKPOINT_PREFIX}-*"):
            suffix = entry.name[len(_CHECKPOINT_PREFIX) + 1 :]
            if not suffix.isdigit() or not entry.is_dir() or (entry / _JIT_SENTINEL).exists():
                continue
            step = int(suffix)
            if (
                step <= state.global_step
                and entry.stat().st_mtime >= since - 1.0
                and (best is None or step > best)
            ):
                best = step
        return best


_CLASS_CACHE: dict[str, type] = {}


def _build_callback_class() -> type:
    if "AdvisorCallback" not in _CLASS_CACHE:
        from transformers import TrainerCallback

        _CLASS_CACHE["AdvisorCallback"] = type(
            "AdvisorCallback",
            (AdvisorCallbackLogic, TrainerCallback),
            {"__module__": __name__, "__doc__": __doc__},
        )
    return _CLASS_CACHE["AdvisorCallback"]


def __getattr__(name: str) -> Any:
    if name == "AdvisorCallback":
        return _build_callback_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
