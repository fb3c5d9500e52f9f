"""The plain-loop helper: honour a checkpoint request from any training loop.

Why a function and not a framework: a hand-written loop already knows how to save itself; what
it lacks is the protocol around the save (every rank agrees to save on the same step, every rank
finishes before rank 0 reports, the report carries the right names). One call per step does it::

    requests = CheckpointRequests()
    for step in range(start, total):
        train_step()
        checkpoint_if_requested(requests, step, lambda: save(step))

or, single-process, simply ``if (rid := requests.pending()): save(); requests.acknowledge(rid, step)``.

With ``requests.watch_sigterm()`` the same call also saves on SIGTERM (an eviction: Kueue's
preemption, a release, a node drain): at the end of the step under way every rank saves, rank 0
reports the checkpoint (``last_checkpoint_step``, and ``last_checkpoint_seconds``, the save's
duration) and the process exits with status 143 (128 + SIGTERM, so that a Job does not take the
exit for a success). After the restart ``last_checkpoint_step`` shows whether the save made it,
which the advisor checks before it trusts saves on SIGTERM and checkpoints less.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from advisor.training.distributed import Collective, default_collective
from advisor.training.requests import CheckpointRequests

__all__ = ["SIGTERM_EXIT_STATUS", "SIGTERM_REQUEST", "agreed_request", "checkpoint_if_requested"]

#: the exit status after a save on SIGTERM (128 + signal 15, the shell's convention)
SIGTERM_EXIT_STATUS = 143
#: what :func:`agreed_request` returns when rank 0 received SIGTERM (not a controller request id)
SIGTERM_REQUEST = "sigterm"


def agreed_request(requests: CheckpointRequests, collective: Collective) -> str | None:
    """Rank 0's pending request, broadcast so that every rank returns the same answer
    (``SIGTERM_REQUEST`` once rank 0 received SIGTERM: every rank saves on the same step)."""
    mine = None
    if collective.is_rank_zero:
        mine = SIGTERM_REQUEST if requests.terminating else requests.pending()
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
    then records a timeout instead of a checkpoint that does not exist. After SIGTERM (see
    :meth:`CheckpointRequests.watch_sigterm`) it saves, reports and raises
    ``SystemExit(SIGTERM_EXIT_STATUS)``.
    """
    group = collective or default_collective()
    request_id = agreed_request(requests, group)
    if request_id is None:
        return None
    started = time.monotonic()
    save()
    group.barrier()
    took = time.monotonic() - started
    if request_id == SIGTERM_REQUEST:
        if group.is_rank_zero:
            # a controller request still open is answered by this save too
            open_request = requests.pending()
            requests.acknowledge(open_request, step, save_seconds=took)
            requests.flush()
        raise SystemExit(SIGTERM_EXIT_STATUS)
    if group.is_rank_zero:
        requests.acknowledge(request_id, step, save_seconds=took)
    return request_id
