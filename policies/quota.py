"""Quota arithmetic on a ``ClusterView``: free GPUs, fit checks and who is waiting.

Kueue accounts per ResourceFlavor and resource; the views fold that into one GPU count per
ClusterQueue, so this is the same simplification: a ClusterQueue may use its nominal quota plus
what it can borrow from its cohort (bounded by its ``borrowingLimit`` and by what the other
members lend, i.e. their unused nominal quota capped by their ``lendingLimit``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from advisor.model import ClusterQueueView, ClusterView, WorkloadView

__all__ = ["cohort_members", "effective_priority", "fits", "free_gpus", "pending_workloads"]


def effective_priority(w: WorkloadView) -> int:
    """Kueue's effective priority: ``spec.priority`` plus the ``priority-boost`` annotation."""
    return w.priority + w.priority_boost


_members_cache: tuple[ClusterView, dict[str, list[ClusterQueueView]]] | None = None


def cohort_members(cluster: ClusterView, cq: ClusterQueueView) -> list[ClusterQueueView]:
    """The ClusterQueues sharing ``cq``'s cohort (itself included), grouped once per snapshot."""
    global _members_cache
    if cq.cohort is None:
        return [cq]
    if _members_cache is None or _members_cache[0] is not cluster:
        groups: dict[str, list[ClusterQueueView]] = {}
        for q in cluster.cluster_queues.values():
            if q.cohort is not None:
                groups.setdefault(q.cohort, []).append(q)
        _members_cache = (cluster, groups)
    return _members_cache[1].get(cq.cohort, [cq])


def free_gpus(cluster: ClusterView, cq_name: str | None, usage: Mapping[str, int] | None = None) -> int:
    """GPUs a new workload in ``cq_name`` could get now without preempting anyone."""
    if cq_name is None or cq_name not in cluster.cluster_queues:
        return 0
    cq = cluster.cluster_queues[cq_name]

    def used(q: ClusterQueueView) -> int:
        return usage.get(q.name, q.usage_gpus) if usage is not None else q.usage_gpus

    own_used = used(cq)
    if cq.cohort is None:
        return max(0, cq.nominal_gpus - own_used)
    members = cohort_members(cluster, cq)
    others = [q for q in members if q.name != cq.name]
    lendable = 0
    for q in others:
        cap = q.nominal_gpus if q.lending_limit is None else min(q.lending_limit, q.nominal_gpus)
        lendable += max(0, min(cap, q.nominal_gpus - used(q)))
    borrowed = max(0, own_used - cq.nominal_gpus)
    room = math.inf if cq.borrowing_limit is None else max(0, cq.borrowing_limit - borrowed)
    borrow = max(0, min(room, lendable - borrowed))  # what we already borrow came out of their unused quota
    physical = sum(q.nominal_gpus for q in members) - sum(used(q) for q in members)
    # unused nominal quota that a borrower holds is not free: cap by what the cohort really has left
    return int(max(0, min(max(0, cq.nominal_gpus - own_used) + borrow, physical)))


def fits(cluster: ClusterView, w: WorkloadView, usage: Mapping[str, int] | None = None) -> bool:
    return w.gpus <= free_gpus(cluster, w.cluster_queue, usage)


def pending_workloads(cluster: ClusterView) -> list[WorkloadView]:
    """Active, not admitted workloads in Kueue's BestEffortFIFO order (priority, then age)."""
    pending = [w for w in cluster.workloads if w.active and not w.admitted]
    pending.sort(
        key=lambda w: (
            -effective_priority(w),
            w.created_at if w.created_at is not None else 0.0,
            w.namespace,
            w.name,
        )
    )
    return pending
