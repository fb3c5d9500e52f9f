"""PyTorch Lightning adapter: checkpoint when the platform asks, and say so.

Usage::

    from advisor.training.lightning import AdvisorCallback
    trainer = L.Trainer(callbacks=[AdvisorCallback()], ...)

After each training batch, rank 0's view of the request file is broadcast with
``trainer.strategy.broadcast`` (so all ranks decide alike); on a request every rank calls
``trainer.save_checkpoint`` (a collective in Lightning: sharded strategies write their shards),
then ``trainer.strategy.barrier`` and rank 0 acknowledges. The file goes to ``dirpath``, else the
``ModelCheckpoint`` directory, else ``<default_root_dir>/checkpoints``, named
``advisor-step=<step>.ckpt`` (resume with ``ckpt_path=``).

``lightning`` (or the older ``pytorch_lightning``) is imported only when ``AdvisorCallback`` is
first looked up; importing this module imports nothing heavy.
"""

from __future__ import annotations

import logging
import math
import os
from typing import TYPE_CHECKING, Any

from advisor.training.requests import CheckpointRequests

__all__ = ["AdvisorCallback", "AdvisorCallbackLogic"]

if TYPE_CHECKING:
    #: built on first access by the module ``__getattr__`` below (it subclasses the framework's class)
    AdvisorCallback: type[AdvisorCallbackLogic]

log = logging.getLogger("advisor.training")


class AdvisorCallbackLogic:
    """The behaviour of :class:`AdvisorCallback`, free of any Lightning import (the public class
    is this plus Lightning's ``Callback`` as a base)."""

    def __init__(
        self,
        requests: CheckpointRequests | None = None,
        *,
        dirpath: str | os.PathLike[str] | None = None,
        check_every_n_steps: int = 1,
    ) -> None:
        if check_every_n_steps < 1:
            raise ValueError(f"check_every_n_steps must be >= 1, got {check_every_n_steps}")
        self.requests = requests if requests is not None else CheckpointRequests()
        self.dirpath = None if dirpath is None else os.fspath(dirpath)
        self.check_every_n_steps = check_every_n_steps
        self.last_checkpoint_path: str | None = None

    def checkpoint_path(self, trainer: Any, step: int) -> str:
        directory = self.dirpath
        if directory is None:
            model_checkpoint = getattr(trainer, "checkpoint_callback", None)
            directory = getattr(model_checkpoint, "dirpath", None)
        if directory is None:
            directory = os.path.join(trainer.default_root_dir, "checkpoints")
        return os.path.join(os.fspath(directory), f"advisor-step={step}.ckpt")

    def _track(self, trainer: Any) -> None:
        if not trainer.is_global_zero:
            return
        total = getattr(trainer, "estimated_stepping_batches", None)
        metrics: dict[str, float] = {}
        for name, value in dict(getattr(trainer, "callback_metrics", {}) or {}).items():
            try:
                number = float(value)  # tensors of one element convert
            except (TypeError, ValueError, RuntimeError):
                continue
            if math.isfinite(number):
                metrics[str(name)] = number
        self.requests.update_progress(
            int(trainer.global_step),
            total_steps=int(total) if isinstance(total, int | float) and math.isfinite(total) else None,
            epoch=float(trainer.current_epoch),
            metrics=metrics,
        )

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._track(trainer)

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        step = int(trainer.global_step)
        if step % self.check_every_n_steps:
            return
        mine = self.requests.pending() if trainer.is_global_zero else None
        request_id = trainer.strategy.broadcast(mine, src=0)
        if request_id is None:
            return
        self._track(trainer)
        path = self.checkpoint_path(trainer, step)
        trainer.save_checkpoint(path)  # every rank: Lightning's save is a collective
        trainer.strategy.barrier("advisor-checkpoint")
        self.last_checkpoint_path = path
        if trainer.is_global_zero:
            self.requests.acknowledge(request_id, step)


_CLASS_CACHE: dict[str, type] = {}


def _lightning_callback_base() -> type:
    try:
        from lightning.pytorch import Callback
    except ImportError:
        try:
            from pytorch_lightning import Callback
        except ImportError as exc:
            raise ImportError(
                "advisor.training.lightning.AdvisorCallback needs `lightning` (or `pytorch_lightning`)"
            ) from exc
    return Callback


def _build_callback_class() -> type:
    if "AdvisorCallback" not in _CLASS_CACHE:
        _CLASS_CACHE["AdvisorCallback"] = type(
            "AdvisorCallback",
            (AdvisorCallbackLogic, _lightning_callback_base()),
            {"__module__": __name__, "__doc__": __doc__},
        )
    return _CLASS_CACHE["AdvisorCallback"]


def __getattr__(name: str) -> Any:
    if name == "AdvisorCallback":
        return _build_callback_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
