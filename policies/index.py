"""Per-snapshot lookups over a ``ClusterView``, computed once and shared by every job's decision.

A controller tick or a simulator step decides for every job against the *same* frozen cluster
snapshot; scanning and sorting its workloads once per job would make the engine quadratic. The
index is cached for the last few snapshots by identity (the views are frozen, so identity is
enough), which keeps ``decide`` pure: the cache changes how fast, never what, it answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.model import ClusterView, WorkloadView
from policies.quota import pending_workloads

__all__ = ["ClusterIndex", "cluster_index"]

_CACHE_SIZE = 4
_cache: list[tuple[ClusterView, ClusterIndex]] = []


@dataclass(slots=True)
class ClusterIndex:
    by_job: dict[str, WorkloadView]
    pending: tuple[WorkloadView, ...]
    """Active, not admitted workloads in Kueue queue order."""
    sharing: dict[str, frozenset[str]]
    """ClusterQueue → the queues it shares quota with (its cohort, or itself)."""
    victims: frozenset[tuple[str, str]] | None = None
    """(namespace, name) of the predicted preemption victims; filled on first use."""
    first: frozenset[tuple[str, str]] | None = None
    """(namespace, name) of each reachable queue's first workload in victim order; filled on first use."""


def _build(cluster: ClusterView) -> ClusterIndex:
    by_job: dict[str, WorkloadView] = {}
    for w in cluster.workloads:
        if w.job is not None and w.job not in by_job:
            by_job[w.job] = w
    cohorts: dict[str, set[str]] = {}
    for q in cluster.cluster_queues.values():
        if q.cohort is not None:
            cohorts.setdefault(q.cohort, set()).add(q.name)
    sharing = {
        q.name: frozenset(cohorts[q.cohort]) if q.cohort is not None else frozenset({q.name})
        for q in cluster.cluster_queues.values()
    }
    return ClusterIndex(by_job=by_job, pending=tuple(pending_workloads(cluster)), sharing=sharing)


def cluster_index(cluster: ClusterView) -> ClusterIndex:
    for snapshot, index in _cache:
        if snapshot is cluster:
            return index
    index = _build(cluster)
    _cache.append((cluster, index))
    del _cache[:-_CACHE_SIZE]
    return index
