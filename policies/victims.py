"""Which running workloads Kueue would preempt next, predicted from a ``ClusterView``.

The preemption guard checkpoints a job *before* Kueue picks it as a victim, because Kueue gives no
notice (``../shared/reference/kueue.md`` §3.4). This follows Kueue's classic preemption:

* pending workloads are considered in queue order (effective priority, then creation time); one
  that fits is admitted in the model and uses up quota; by default only the first preempting
  workload of each ClusterQueue is played out (Kueue's next scheduling cycle);
* for one that does not fit, candidates are the admitted workloads its ClusterQueue's
  ``preemption`` settings allow: ``withinClusterQueue`` (LowerPriority /
  LowerOrNewerEqualPriority) in its own queue, ``reclaimWithinCohort`` (LowerPriority / Any) and
  ``borrowWithinCohort`` (LowerPriority, below ``maxPriorityThreshold``) in cohort members that
  are borrowing, and only while they still are; a preemptor that must borrow tries, as Kueue's
  ``classicalPreemptions`` does, with borrowing (cohort victims by ``borrowWithinCohort`` only)
  and without (``reclaimWithinCohort`` victims too, its own queue's bringing it within nominal);
* candidates are ordered as in ``CandidatesOrdering``: other ClusterQueues first, lower effective
  priority (``priority + priority-boost``) first, most recently admitted first, then the
  Workload's UID (Kueue's own tie-break: a batch admitted in the same second ties on time; name
  where no UID is known, as in the simulator);
* targets are added greedily until the preemptor fits, then dropped in reverse order when not
  needed. A preemptor that cannot fit even so preempts nobody.

Simplifications, stated: GPUs only (no flavors), no fair sharing, no admission checks. The
simulator scores this prediction against its own, independent quota model.
"""

from __future__ import annotations

import dataclasses
import math

from advisor.model import ClusterQueueView, ClusterView, WorkloadView
from policies.quota import cohort_members, effective_priority, fits, pending_workloads

__all__ = ["can_be_preempted", "first_in_line", "predict_victims"]

_cache: tuple[ClusterView, int | None, tuple[WorkloadView, ...]] | None = None
_range_cache: tuple[ClusterView, dict[str, tuple[int, int]]] | None = None


def _candidates(
    cluster: ClusterView,
    p: WorkloadView,
    cq: ClusterQueueView,
    admitted: list[WorkloadView],
    usage: dict[str, int],
    taken: set[int],
) -> list[tuple[WorkloadView, bool]]:
    """Candidates in Kueue's order, each with whether it counts only in the attempt without
    borrowing (a cohort member's workload that ``reclaimWithinCohort`` allows while the preemptor
    would borrow, without ``borrowWithinCohort`` or above its threshold)."""
    prio = effective_priority(p)
    out: list[tuple[WorkloadView, bool]] = []
    cohort = {q.name: q for q in cohort_members(cluster, cq)} if cq.cohort is not None else {}
    would_borrow = usage.get(cq.name, cq.usage_gpus) + p.gpus > cq.nominal_gpus
    threshold = cq.borrow_max_priority_threshold
    for w in admitted:
        if id(w) in taken:
            continue
        wp = effective_priority(w)
        if w.cluster_queue == cq.name:
            policy = cq.within_cluster_queue
            newer = (w.created_at or 0.0) > (p.created_at or 0.0)
            if (policy == "LowerPriority" and wp < prio) or (
                policy == "LowerOrNewerEqualPriority" and (wp < prio or (wp == prio and newer))
            ):
                out.append((w, False))
            continue
        other = cohort.get(w.cluster_queue)
        if other is None or usage.get(other.name, other.usage_gpus) <= other.nominal_gpus:
            continue  # only members borrowing from the cohort can be reclaimed from
        if cq.reclaim_within_cohort == "Never" or not (cq.reclaim_within_cohort == "Any" or wp < prio):
            continue
        without = would_borrow and (
            cq.borrow_within_cohort != "LowerPriority"
            or wp >= prio
            or (threshold is not None and wp > threshold)
        )
        out.append((w, without))
    out.sort(
        key=lambda c: (
            c[0].cluster_queue == cq.name,
            effective_priority(c[0]),
            -(c[0].admitted_at if c[0].admitted_at is not None else float("-inf")),
            c[0].uid,
            c[0].namespace,
            c[0].name,
        )
    )
    return out


def _attempts(cq: ClusterQueueView, own_usage: int, gpus: int, cross: bool) -> tuple[bool, ...]:
    """Kueue's preemption attempts, in its order (``True``: the preemptor may borrow)."""
    forbidden = cq.borrow_within_cohort != "LowerPriority"
    if not cross or (forbidden and own_usage >= cq.nominal_gpus):
        return (True,)
    if forbidden and own_usage + gpus > cq.nominal_gpus:
        return (False, True)
    return (True, False)


def _attempt(
    cluster: ClusterView,
    p: WorkloadView,
    cq: ClusterQueueView,
    candidates: list[tuple[WorkloadView, bool]],
    usage: dict[str, int],
    borrow: bool,
) -> tuple[list[WorkloadView], dict[str, int]] | None:
    """Greedy until ``p`` fits (within its nominal quota when not ``borrow``), then filled back."""

    def ok(trial: dict[str, int]) -> bool:
        if not borrow and trial.get(cq.name, 0) + p.gpus > cq.nominal_gpus:
            return False
        return fits(cluster, p, trial)

    targets: list[WorkloadView] = []
    trial = dict(usage)
    for w, without in candidates:
        if w.cluster_queue != cq.name:
            other = cluster.cluster_queues.get(w.cluster_queue)
            if borrow and without:
                continue
            if other is not None and trial.get(other.name, 0) <= other.nominal_gpus:
                continue  # that queue stopped borrowing: nothing left to reclaim from it
        targets.append(w)
        trial[w.cluster_queue] = trial.get(w.cluster_queue, 0) - w.gpus
        if ok(trial):
            break
    if not targets or not ok(trial):
        return None
    for w in reversed(list(targets)):
        trial[w.cluster_queue] += w.gpus
        if ok(trial):
            targets.remove(w)
        else:
            trial[w.cluster_queue] -= w.gpus
    return targets, trial


def _pass_order(cluster: ClusterView, usage: dict[str, int]) -> list[WorkloadView]:
    """Pending workloads in the order one scheduling pass meets them: each ClusterQueue's queue
    (effective priority, then age), the queues in the order Kueue's cycle sorts their heads
    (``makeClassicalIterator``): a head that fits without borrowing first, then higher effective
    priority, then earlier creation. A global (priority, age) order instead let an older head that
    must borrow take, in the prediction, the cohort quota that a non-borrowing head of another
    queue gets first in Kueue, and so "preempt" for workloads Kueue admits without preempting."""
    by_queue: dict[str, list[WorkloadView]] = {}
    for w in pending_workloads(cluster):
        by_queue.setdefault(w.cluster_queue, []).append(w)

    def head_key(name: str) -> tuple[bool, int, float, str]:
        head = by_queue[name][0]
        cq = cluster.cluster_queues.get(name)
        borrows = cq is not None and usage.get(name, 0) + head.gpus > cq.nominal_gpus
        created = head.created_at if head.created_at is not None else 0.0
        return (borrows, -effective_priority(head), created, name)

    return [w for name in sorted(by_queue, key=head_key) for w in by_queue[name]]


def predict_victims(cluster: ClusterView, *, per_queue: int | None = 1) -> list[WorkloadView]:
    """The admitted workloads Kueue would evict next to admit pending ones, most likely first.

    ``per_queue``: how many preempting workloads per ClusterQueue to play out (default 1: the
    head that Kueue's next scheduling cycle would preempt for; later ones usually find quota
    freed by then). ``None`` plays out every pending workload. Pending workloads that fit are
    admitted in the model and do not count. The result for the last snapshot is cached.
    """
    global _cache
    if _cache is not None and _cache[0] is cluster and _cache[1] == per_queue:
        return list(_cache[2])
    usage = {name: q.usage_gpus for name, q in cluster.cluster_queues.items()}
    admitted = [w for w in cluster.workloads if w.admitted and w.active]
    taken: set[int] = set()
    played: set[int] = set()  # admitted in the play, not in the cluster
    victims: list[WorkloadView] = []
    preempting: dict[str, int] = {}
    for p in _pass_order(cluster, usage):
        cq = cluster.cluster_queues.get(p.cluster_queue)
        if cq is None or p.gpus <= 0:
            continue
        if per_queue is not None and preempting.get(cq.name, 0) >= per_queue:
            continue
        if fits(cluster, p, usage):
            usage[cq.name] = usage.get(cq.name, 0) + p.gpus
            # admitted in the play, it is the most recently admitted workload of its queue: a
            # reclaiming queue later in the pass takes it first, before any running one. Not
            # running now, it has nothing to save, so it is never in the result.
            admission = dataclasses.replace(p, admitted=True, admitted_at=math.inf)
            admitted.append(admission)
            played.add(id(admission))
            continue
        candidates = _candidates(cluster, p, cq, admitted, usage, taken)
        cross = any(w.cluster_queue != cq.name for w, _without in candidates)
        found = None
        for borrow in _attempts(cq, usage.get(cq.name, 0), p.gpus, cross):
            found = _attempt(cluster, p, cq, candidates, usage, borrow)
            if found is not None:
                break
        if found is None:
            continue
        targets, trial = found
        trial[cq.name] = trial.get(cq.name, 0) + p.gpus
        usage = trial
        taken.update(id(w) for w in targets)
        victims.extend(w for w in targets if id(w) not in played)
        preempting[cq.name] = preempting.get(cq.name, 0) + 1
    _cache = (cluster, per_queue, tuple(victims))
    return victims


def first_in_line(cluster: ClusterView, *, per_queue: int = 1) -> list[WorkloadView]:
    """The admitted workloads Kueue would take first from each ClusterQueue if a preemptor came.

    Kueue preempts in the same scheduling cycle that a higher-priority workload arrives in, so a
    pending preemptor is rarely visible in advance; what *is* visible is who stands first in
    Kueue's victim order: lowest effective priority, then most recently admitted. Only queues that
    preemption can reach count: those whose own ``withinClusterQueue`` allows it, and borrowing
    members of a cohort where some queue may reclaim.
    """
    reclaimers = {
        q.cohort
        for q in cluster.cluster_queues.values()
        if q.cohort is not None and q.reclaim_within_cohort != "Never"
    }
    by_queue: dict[str, list[WorkloadView]] = {}
    for w in cluster.workloads:
        if w.admitted and w.active:
            by_queue.setdefault(w.cluster_queue, []).append(w)
    out: list[WorkloadView] = []
    for name, members in sorted(by_queue.items()):
        cq = cluster.cluster_queues.get(name)
        if cq is None:
            continue
        reachable = cq.within_cluster_queue != "Never" or (
            cq.cohort in reclaimers and cq.usage_gpus > cq.nominal_gpus
        )
        if not reachable:
            continue
        members.sort(
            key=lambda w: (
                effective_priority(w),
                -(w.admitted_at if w.admitted_at is not None else float("-inf")),
                w.uid,
                w.namespace,
                w.name,
            )
        )
        out.extend(members[:per_queue])
    return out


def _priority_range(cluster: ClusterView) -> dict[str, tuple[int, int]]:
    """(lowest, highest) base priority in use per ClusterQueue and per cohort (``"cohort:<name>"``)."""
    global _range_cache
    if _range_cache is not None and _range_cache[0] is cluster:
        return _range_cache[1]
    ranges: dict[str, tuple[int, int]] = {}
    for w in cluster.workloads:
        if not w.active:
            continue
        keys = [w.cluster_queue]
        cq = cluster.cluster_queues.get(w.cluster_queue)
        if cq is not None and cq.cohort is not None:
            keys.append("cohort:" + cq.cohort)
        for k in keys:
            lo, hi = ranges.get(k, (w.priority, w.priority))
            ranges[k] = (min(lo, w.priority), max(hi, w.priority))
    _range_cache = (cluster, ranges)
    return ranges


def can_be_preempted(cluster: ClusterView, w: WorkloadView, *, as_it_stands: bool = True) -> bool:
    """Whether any preemption rule of the cluster can pick ``w`` as a victim in its present state
    (``as_it_stands``), or at any time until the priorities in use change (``as_it_stands=False``:
    its queue may start borrowing any moment, which the next look may come too late to see).

    The priorities in use are those of the admitted and pending workloads of its cohort (of its
    queue without one). ``withinClusterQueue: LowerPriority`` cannot reach a workload at the top
    of a range of priorities in use (when all are equal, a higher one may still come: it counts as
    reachable); ``LowerOrNewerEqualPriority`` always may; cohort reclamation only while its queue
    borrows, and for ``LowerPriority`` only below the top. A workload that nothing in Kueue can
    evict gains nothing from checkpoints against preemption: they only cost.
    """
    cq = cluster.cluster_queues.get(w.cluster_queue)
    if cq is None:
        return False
    lo, hi = _priority_range(cluster).get(
        cq.name if cq.cohort is None else "cohort:" + cq.cohort, (w.priority, w.priority)
    )
    below_top = w.priority < hi or lo == hi
    if cq.within_cluster_queue == "LowerOrNewerEqualPriority":
        return True  # an equal-priority newcomer may already preempt it
    if cq.within_cluster_queue == "LowerPriority" and below_top:
        return True
    if cq.cohort is None or cq.borrowing_limit == 0:
        return False
    if as_it_stands and cq.usage_gpus <= cq.nominal_gpus:
        return False
    for q in cohort_members(cluster, cq):
        if q.name == cq.name or q.reclaim_within_cohort == "Never":
            continue
        if q.reclaim_within_cohort == "Any" or below_top:
            return True
    return False
