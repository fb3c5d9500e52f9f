"""The plain-loop helper: honour a checkpoint request from any training loop.

Why a function and not a framework: a hand-written loop already knows how to save itself; what
it lacks is the protocol around the save (every rank agrees to save on the same step, every rank
finishes before rank 0 reports, the report carries the right names). One call per step does it::

    requests = CheckpointRequests()
    for step in range(start, total):
        train_step()
        checkpoint_if_requested(requests, step, lambda: save(step))

or, single-process, simply ``if (rid := requests.pending()): save(); requests.acknowledge(rid, step)``.
"""

from __future__ import annotations

from collections.abc import Callable

from advisor.training.distributed import Collective, default_collective
from advisor.training.requests import CheckpointRequests

__all__ = ["agreed_request", "checkpoint_if_requested"]


def agreed_request(requests: CheckpointRequests, collective: Collective) -> str | None:
    """Rank 0's pending request, broadcast so that every rank returns the same answer."""
    mine = requests.pending() if collective.is_rank_zero else None
    return collective.broadcast_from_zero(mine)


def checkpoint_if_requested(
    requests: CheckpointRequests,
    step: int,
    save: Callable[[], object],
    *,
    collective: Collective | None = None,
) -> str | None:
    """If a request is pending, call ``save()`` on every rank, wait for all of them, then
    acknowledge it from rank 0. Returns the request id honoured, or ``None``.

    Call it on every rank at the same point of the loop (it is a collective when the job is
    distributed). An exception from ``save`` propagates and nothing is acknowledged: the controller
    then records a timeout instead of a checkpoint that does not exist.
    """
    group = collective or default_collective()
    request_id = agreed_request(requests, group)
    if request_id is None:
        return None
    save()
    group.barrier()
    if group.is_rank_zero:
        requests.acknowledge(request_id, step)
    return request_id
