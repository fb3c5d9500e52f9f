"""Agreement between ranks: every rank saves on the same step, and rank 0 answers last.

Why: each pod reads its own annotation file, and the controller annotates pods one by one, so
two ranks can see a request a step apart. Sharded saves (FSDP, DeepSpeed) are collectives: if
one rank starts saving and another does not, the job hangs. So rank 0's view is broadcast and
is the decision for all; after the save a barrier makes sure every rank has written its shard
before rank 0 reports the checkpoint as done.

``torch.distributed`` is imported only when a function here runs, and only if torch is already
loaded by the training script: this module never pulls torch into a process that lacks it.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Protocol, TypeVar

__all__ = ["Collective", "SingleProcess", "TorchDistributed", "default_collective", "env_rank"]

T = TypeVar("T")


class Collective(Protocol):
    """The two collectives the helpers need, plus "am I rank 0"."""

    @property
    def is_rank_zero(self) -> bool: ...

    def broadcast_from_zero(self, value: T) -> T: ...

    def barrier(self) -> None: ...


def env_rank(environ: dict[str, str] | None = None) -> int:
    """The global rank from the launcher's environment (torchrun/Kubeflow set ``RANK``); 0 if none."""
    env = os.environ if environ is None else environ
    for var in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        text = env.get(var)
        if text is not None and text.strip().lstrip("-").isdigit():
            return int(text)
    return 0


class SingleProcess:
    """No other ranks: broadcasting is the identity and the barrier is immediate."""

    def __init__(self, rank: int = 0) -> None:
        self._rank = rank

    @property
    def is_rank_zero(self) -> bool:
        return self._rank == 0

    def broadcast_from_zero(self, value: T) -> T:
        return value

    def barrier(self) -> None:
        return None


class TorchDistributed:
    """``torch.distributed`` (already initialised by the script or the Trainer)."""

    def __init__(self, dist: Any) -> None:
        self._dist = dist

    @property
    def is_rank_zero(self) -> bool:
        return int(self._dist.get_rank()) == 0

    def broadcast_from_zero(self, value: T) -> T:
        box = [value]
        self._dist.broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        self._dist.barrier()


def default_collective() -> Collective:
    """``TorchDistributed`` when torch is loaded and a process group with more than one rank is
    initialised; otherwise a single process with the rank from the environment."""
    if "torch" in sys.modules:
        try:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
                return TorchDistributed(dist)
        except Exception:  # a broken or CPU-less torch build: fall back to the environment
            pass
    return SingleProcess(env_rank())
