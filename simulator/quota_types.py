"""The quota model's value types: ClusterQueues, Workloads, preemptions and a queue's order.

``simulator.quota`` schedules with them; they are apart so that the scenario, the conformance
scenarios and the job builder can describe a cluster without the scheduler.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

__all__ = ["ClusterQueueSpec", "PendingQueue", "Preemption", "QueueKey", "QuotaError", "Workload"]


class QuotaError(ValueError):
    """An inconsistent cluster description (unknown queue, negative quota, ...)."""


@dataclass(frozen=True, slots=True)
class ClusterQueueSpec:
    name: str
    nominal_gpus: int
    cohort: str | None = None
    borrowing_limit: int | None = None
    lending_limit: int | None = None
    within_cluster_queue: str = "Never"  # Never | LowerPriority | LowerOrNewerEqualPriority
    reclaim_within_cohort: str = "Never"  # Never | LowerPriority | Any
    borrow_within_cohort: str = "Never"  # Never | LowerPriority
    borrow_max_priority_threshold: int | None = None
    queueing_strategy: str = "BestEffortFIFO"  # BestEffortFIFO | StrictFIFO

    def __post_init__(self) -> None:
        checks = {
            "within_cluster_queue": (
                self.within_cluster_queue,
                {"Never", "LowerPriority", "LowerOrNewerEqualPriority"},
            ),
            "reclaim_within_cohort": (self.reclaim_within_cohort, {"Never", "LowerPriority", "Any"}),
            "borrow_within_cohort": (self.borrow_within_cohort, {"Never", "LowerPriority"}),
            "queueing_strategy": (self.queueing_strategy, {"BestEffortFIFO", "StrictFIFO"}),
        }
        for fname, (value, allowed) in checks.items():
            if value not in allowed:
                raise QuotaError(f"ClusterQueue {self.name}: {fname} {value!r} not one of {sorted(allowed)}")
        if self.nominal_gpus < 0:
            raise QuotaError(f"ClusterQueue {self.name}: nominal_gpus must be >= 0")
        for fname in ("borrowing_limit", "lending_limit"):
            v = getattr(self, fname)
            if v is not None and v < 0:
                raise QuotaError(f"ClusterQueue {self.name}: {fname} must be >= 0")
        if self.cohort is None and self.borrowing_limit not in (None, 0):
            raise QuotaError(f"ClusterQueue {self.name}: borrowing_limit needs a cohort")
        if self.lending_limit is not None and self.lending_limit > self.nominal_gpus:
            raise QuotaError(f"ClusterQueue {self.name}: lending_limit exceeds nominal_gpus")
        if self.reclaim_within_cohort == "Never" and self.borrow_within_cohort != "Never":
            raise QuotaError(f"ClusterQueue {self.name}: borrowWithinCohort needs reclaimWithinCohort")

    @property
    def guaranteed(self) -> int:
        """The part of the nominal quota never lent to the cohort."""
        return self.nominal_gpus - (self.nominal_gpus if self.lending_limit is None else self.lending_limit)


@dataclass(slots=True)
class Workload:
    uid: int
    job: str
    cluster_queue: str
    gpus: int
    priority: int = 0
    created_at: float = 0.0
    boost: int = 0
    active: bool = True
    admitted: bool = False
    admitted_at: float | None = None
    finished: bool = False

    def order_key(self, boost_enabled: bool) -> tuple[int, float, int]:
        return (-(self.priority + (self.boost if boost_enabled else 0)), self.created_at, self.uid)


@dataclass(frozen=True, slots=True)
class Preemption:
    victim: Workload
    preemptor: Workload
    reason: str  # InClusterQueue | InCohortReclamation | InCohortReclaimWhileBorrowing


QueueKey = tuple[int, float, int]


def _first(entry: tuple[QueueKey, Workload]) -> QueueKey:
    return entry[0]


@dataclass(slots=True)
class PendingQueue:
    spec: ClusterQueueSpec
    usage: int = 0
    #: the queue in Kueue order (effective priority, then creation time, then uid)
    pending: list[tuple[QueueKey, Workload]] = field(default_factory=list)
    admitted: dict[int, Workload] = field(default_factory=dict)
    #: the same entries by size (GPUs), each list in queue order: a scheduling pass visits only the
    #: sizes that may still be admitted, so a long backlog of workloads that cannot be costs nothing
    by_size: dict[int, list[tuple[QueueKey, Workload]]] = field(default_factory=dict)
    #: the key each pending workload was queued under (uid -> key)
    keys: dict[int, QueueKey] = field(default_factory=dict)

    def add(self, key: QueueKey, wl: Workload) -> None:
        entry = (key, wl)
        bisect.insort(self.pending, entry, key=_first)
        bisect.insort(self.by_size.setdefault(wl.gpus, []), entry, key=_first)
        self.keys[wl.uid] = key

    def remove(self, wl: Workload) -> None:
        key = self.keys.pop(wl.uid, None)
        if key is None:
            return
        for entries in (self.pending, self.by_size.get(wl.gpus, [])):
            i = bisect.bisect_left(entries, key, key=_first)
            if i < len(entries) and entries[i][1] is wl:
                del entries[i]
            else:  # the workload changed size while queued: find it by identity
                entries[:] = [e for e in entries if e[1] is not wl]
        if wl.gpus in self.by_size and not self.by_size[wl.gpus]:
            del self.by_size[wl.gpus]

    def next_entry(self, after: QueueKey | None, below: int) -> tuple[QueueKey, Workload] | None:
        """The first pending entry after ``after`` (in queue order) of fewer than ``below`` GPUs."""
        best: tuple[QueueKey, Workload] | None = None
        for gpus, entries in self.by_size.items():
            if gpus >= below:
                continue
            i = 0 if after is None else bisect.bisect_right(entries, after, key=_first)
            if i < len(entries) and (best is None or entries[i][0] < best[0]):
                best = entries[i]
        return best
