"""Per-snapshot lookups over a ``ClusterView``, computed once and shared by every job's decision.

A controller tick or a simulator step decides for every job against the *same* frozen cluster
snapshot; scanning and sorting its workloads once per job would make the engine quadratic. The
index is cached for the last few snapshots by identity (the views are frozen, so identity is
enough), which keeps ``decide`` pure: the cache changes how fast, never what, it answers.
"""

from __future__ import annotations

from advisor.model import ClusterView, WorkloadView
from policies.quota import pending_workloads

__all__ = ["ClusterIndex", "cluster_index"]

_CACHE_SIZE = 4
_cache: list[tuple[ClusterView, ClusterIndex]] = []


class ClusterIndex:
    """The lookups over one snapshot, each computed on its first use: a policy with a stall rule
    asks every job's tick for ``by_job`` alone, and a big cluster changes its snapshot almost as
    often as a job is looked at, so a part no rule of the policy reads must cost nothing."""

    __slots__ = ("_by_job", "_cluster", "_pending", "_sharing", "first", "victims")

    def __init__(self, cluster: ClusterView) -> None:
        self._cluster = cluster
        self._by_job: dict[str, WorkloadView] | None = None
        self._pending: tuple[WorkloadView, ...] | None = None
        self._sharing: dict[str, frozenset[str]] | None = None
        #: (namespace, name) of the predicted preemption victims; filled on first use (guard rule)
        self.victims: frozenset[tuple[str, str]] | None = None
        #: (namespace, name) of each reachable queue's first workload in victim order; filled on
        #: first use (guard rule)
        self.first: frozenset[tuple[str, str]] | None = None

    @property
    def by_job(self) -> dict[str, WorkloadView]:
        """Job key → its workload (the first listed, when a job has several)."""
        if self._by_job is None:
            # reversed: where a job has several workloads, the first listed one is written last
            self._by_job = {w.job: w for w in reversed(self._cluster.workloads) if w.job is not None}
        return self._by_job

    @property
    def pending(self) -> tuple[WorkloadView, ...]:
        """Active, not admitted workloads in Kueue queue order."""
        if self._pending is None:
            self._pending = tuple(pending_workloads(self._cluster))
        return self._pending

    @property
    def sharing(self) -> dict[str, frozenset[str]]:
        """ClusterQueue → the queues it shares quota with (its cohort, or itself)."""
        if self._sharing is None:
            queues = self._cluster.cluster_queues.values()
            cohorts: dict[str, set[str]] = {}
            for q in queues:
                if q.cohort is not None:
                    cohorts.setdefault(q.cohort, set()).add(q.name)
            self._sharing = {
                q.name: frozenset(cohorts[q.cohort]) if q.cohort is not None else frozenset({q.name})
                for q in queues
            }
        return self._sharing


def cluster_index(cluster: ClusterView) -> ClusterIndex:
    for snapshot, index in _cache:
        if snapshot is cluster:
            return index
    index = ClusterIndex(cluster)
    _cache.append((cluster, index))
    del _cache[:-_CACHE_SIZE]
    return index
