"""A Kueue-like quota model: the environment the simulated jobs queue in.

GPU types (ResourceFlavors) are folded into one GPU count per ClusterQueue. Modelled: nominal quota,
cohorts with borrowing and lending limits, StrictFIFO / BestEffortFIFO queueing ordered by effective
priority then creation time, the queues of a pass in the order of Kueue's cycle (a head that fits
without borrowing first), and classic preemption (``withinClusterQueue``, ``reclaimWithinCohort``,
``borrowWithinCohort``) with Kueue's candidate ordering: workloads of other ClusterQueues first,
then lower effective priority (priority + priority-boost), then the most recently admitted, then
the uid; greedily taken until the preemptor fits, then pruned in reverse of whatever is not needed,
with borrowing allowed or not in Kueue's attempts.

It is written from Kueue's documented behaviour (``shared/reference/kueue.md`` §3-4) and its
scheduler's code (v0.19.2), on its own and not from the advisor's victim predictor, so that the
predictor can be scored against it; ``simulator.conformance`` plays small scenarios in it and in
real Kueue (``docs/cluster.md``, "The quota model against real Kueue").
Quota is released the moment a workload is evicted (Kueue frees it once the job's pods are
terminating), and a preempted workload keeps its original creation time, hence its queue place.
"""

from __future__ import annotations

from collections.abc import Iterable

from simulator.quota_types import ClusterQueueSpec, PendingQueue, Preemption, QueueKey, QuotaError, Workload

__all__ = ["ClusterQueueSpec", "Preemption", "QuotaError", "QuotaModel", "Workload"]

_INF = 1 << 60


class QuotaModel:
    """ClusterQueues, cohorts, pending queues and admitted workloads; admission and preemption."""

    def __init__(self, queues: Iterable[ClusterQueueSpec], *, priority_boost_enabled: bool = False) -> None:
        self.queues: dict[str, PendingQueue] = {}
        for spec in queues:
            if spec.name in self.queues:
                raise QuotaError(f"duplicate ClusterQueue {spec.name}")
            self.queues[spec.name] = PendingQueue(spec)
        if not self.queues:
            raise QuotaError("no ClusterQueues")
        self.cohorts: dict[str, list[str]] = {}
        for name, q in self.queues.items():
            if q.spec.cohort is not None:
                self.cohorts.setdefault(q.spec.cohort, []).append(name)
        self.boost_enabled = priority_boost_enabled
        self.version = 0  # bumped on every change, for cached snapshots
        self.queue_version: dict[str, int] = dict.fromkeys(self.queues, 0)  # per ClusterQueue
        self._dirty: set[str] = set()
        self._drawn: dict[str, tuple[int, int, int]] = {}  # cohort -> (version, drawn, pool)
        self._lowest: dict[str, tuple[int, int]] = {}  # queue -> (its version, lowest admitted priority)
        #: cohort -> (version, its borrowing queues): see ``_borrowers``
        self._borrowing: dict[str, tuple[int, tuple[tuple[str, int], ...]]] = {}

    # ---- bookkeeping -----------------------------------------------------------------------
    def _eff(self, wl: Workload) -> int:
        return wl.priority + (wl.boost if self.boost_enabled else 0)

    def members(self, cq: str) -> list[str]:
        cohort = self.queues[cq].spec.cohort
        return [cq] if cohort is None else self.cohorts[cohort]

    def _touch(self, cq: str) -> None:
        self.version += 1
        self.queue_version[cq] += 1
        self._dirty.update(self.members(cq))

    def capacity(self) -> int:
        return sum(q.spec.nominal_gpus for q in self.queues.values())

    def usage(self, cq: str | None = None) -> int:
        if cq is not None:
            return self.queues[cq].usage
        return sum(q.usage for q in self.queues.values())

    def submit(self, wl: Workload) -> None:
        if wl.cluster_queue not in self.queues:
            raise QuotaError(f"workload {wl.job}: unknown ClusterQueue {wl.cluster_queue!r}")
        q = self.queues[wl.cluster_queue]
        wl.admitted = False
        wl.admitted_at = None
        q.remove(wl)  # a workload is queued once
        q.add(wl.order_key(self.boost_enabled), wl)
        self._touch(wl.cluster_queue)

    def _remove_pending(self, wl: Workload) -> None:
        self.queues[wl.cluster_queue].remove(wl)

    def release(self, wl: Workload) -> None:
        """Finished, deactivated or evicted: give back its quota (and drop it if still pending)."""
        q = self.queues[wl.cluster_queue]
        if wl.admitted:
            q.usage -= wl.gpus
            del q.admitted[wl.uid]
            wl.admitted = False
        else:
            self._remove_pending(wl)
        self._touch(wl.cluster_queue)

    def set_boost(self, wl: Workload, boost: int) -> None:
        if wl.boost == boost:
            return
        wl.boost = boost
        if not wl.admitted and not wl.finished and wl.active:
            q = self.queues[wl.cluster_queue]
            q.remove(wl)
            q.add(wl.order_key(self.boost_enabled), wl)
        self._touch(wl.cluster_queue)

    def resize(self, wl: Workload, gpus: int) -> bool:
        """Change an admitted workload's size if the quota allows it (elastic scale)."""
        if not wl.admitted:
            q = self.queues[wl.cluster_queue]
            queued = wl.uid in q.keys
            q.remove(wl)
            wl.gpus = gpus
            if queued:
                q.add(wl.order_key(self.boost_enabled), wl)
            self._touch(wl.cluster_queue)
            return True
        delta = gpus - wl.gpus
        if delta > 0 and not self._fits(wl.cluster_queue, delta, {}):
            return False
        q = self.queues[wl.cluster_queue]
        q.usage += delta
        wl.gpus = gpus
        self._touch(wl.cluster_queue)
        return True

    # ---- quota arithmetic ------------------------------------------------------------------
    def _fits(self, cq: str, gpus: int, removed: dict[str, int]) -> bool:
        """Would ``gpus`` more fit in ``cq`` once ``removed`` (GPUs per queue) are freed?"""
        q = self.queues[cq]
        spec = q.spec
        use = q.usage - removed.get(cq, 0) + gpus
        if spec.cohort is None:
            return use <= spec.nominal_gpus
        limit = _INF if spec.borrowing_limit is None else spec.nominal_gpus + spec.borrowing_limit
        if use > limit:
            return False
        if not removed:  # the common question: the cohort's totals, kept until anything changes
            drawn, pool = self._cohort_totals(spec.cohort)
            g = spec.guaranteed
            return drawn - max(0, q.usage - g) + max(0, use - g) <= pool
        pool = 0
        drawn = 0
        for name in self.cohorts[spec.cohort]:
            other = self.queues[name].spec
            u = use if name == cq else self.queues[name].usage - removed.get(name, 0)
            pool += other.nominal_gpus - other.guaranteed
            drawn += max(0, u - other.guaranteed)
        return drawn <= pool

    def _cohort_totals(self, cohort: str) -> tuple[int, int]:
        """What the cohort's queues draw beyond their guaranteed parts, and what they lend."""
        cached = self._drawn.get(cohort)
        if cached is not None and cached[0] == self.version:
            return cached[1], cached[2]
        drawn = pool = 0
        for name in self.cohorts[cohort]:
            q = self.queues[name]
            g = q.spec.guaranteed
            pool += q.spec.nominal_gpus - g
            drawn += max(0, q.usage - g)
        self._drawn[cohort] = (self.version, drawn, pool)
        return drawn, pool

    def _lowest_priority(self, cq: str) -> int:
        """The lowest effective priority among the queue's admitted workloads (none: ``_INF``)."""
        version = self.queue_version[cq]
        cached = self._lowest.get(cq)
        if cached is not None and cached[0] == version:
            return cached[1]
        low = min((self._eff(v) for v in self.queues[cq].admitted.values()), default=_INF)
        self._lowest[cq] = (version, low)
        return low

    def _may_have_candidates(self, wl: Workload, prio: int, would_borrow: bool) -> bool:
        """A cheap necessary condition for ``preemption_targets`` to find any candidate (most
        pending workloads of a busy cluster have none: nothing of lower priority to take)."""
        spec = self.queues[wl.cluster_queue].spec
        own_low = self._lowest_priority(wl.cluster_queue)
        if spec.within_cluster_queue == "LowerPriority" and own_low < prio:
            return True
        if spec.within_cluster_queue == "LowerOrNewerEqualPriority" and own_low <= prio:
            return True
        if spec.cohort is None or spec.reclaim_within_cohort == "Never":
            return False
        for name, low in self._borrowers(spec.cohort):
            if name == wl.cluster_queue:
                continue
            if (not would_borrow and spec.reclaim_within_cohort == "Any") or low < prio:
                return True  # a borrowing queue holds admitted workloads: something to reclaim
        return False

    def _borrowers(self, cohort: str) -> tuple[tuple[str, int], ...]:
        """The cohort's queues that borrow now, each with its lowest admitted priority: the only
        ones reclamation can take from. Kept until anything changes: a scheduling pass over a long
        backlog asks for every pending workload, and most of a big cohort lends or sits idle."""
        cached = self._borrowing.get(cohort)
        if cached is not None and cached[0] == self.version:
            return cached[1]
        found = tuple(
            (name, self._lowest_priority(name)) for name in self.cohorts[cohort] if self.borrowing(name) > 0
        )
        self._borrowing[cohort] = (self.version, found)
        return found

    def borrowing(self, cq: str) -> int:
        q = self.queues[cq]
        return max(0, q.usage - q.spec.nominal_gpus)

    # ---- preemption ------------------------------------------------------------------------
    def preemption_targets(self, wl: Workload) -> list[Preemption] | None:
        """The victims Kueue would evict to admit ``wl`` (None when it cannot be admitted by
        preemption). Pure: changes nothing.

        As Kueue's ``classicalPreemptions``: candidates in other (borrowing) members of the cohort
        first, then in its own queue, each group in ``CandidatesOrdering``; one or two attempts,
        with borrowing allowed or not, taken greedily until the preemptor fits and then filled
        back. A cohort candidate the preemptor may take only if it does not borrow itself
        (``reclaimWithinCohort`` while it would borrow, without ``borrowWithinCohort`` or above
        its ``maxPriorityThreshold``) counts only in the attempt without borrowing: there the
        preemptor must end within its nominal quota, which its own queue's victims can make room
        for (``_attempts``)."""
        own = self.queues[wl.cluster_queue]
        spec = own.spec
        prio = self._eff(wl)
        would_borrow = own.usage + wl.gpus > spec.nominal_gpus
        if not self._may_have_candidates(wl, prio, would_borrow):
            return None
        #: (order key, victim, reason, only in the attempt without borrowing)
        candidates: list[tuple[tuple[int, int, float, int], Workload, str, bool]] = []
        if spec.within_cluster_queue != "Never":
            for v in own.admitted.values():
                vp = self._eff(v)
                ok = vp < prio or (
                    spec.within_cluster_queue == "LowerOrNewerEqualPriority"
                    and vp == prio
                    and v.created_at > wl.created_at
                )
                if ok:
                    candidates.append(((1, vp, -(v.admitted_at or 0.0), v.uid), v, "InClusterQueue", False))
        cross = False
        if spec.cohort is not None and spec.reclaim_within_cohort != "Never":
            threshold = spec.borrow_max_priority_threshold
            for name, _low in self._borrowers(spec.cohort):
                if name == wl.cluster_queue:
                    continue
                for v in self.queues[name].admitted.values():
                    vp = self._eff(v)
                    if not (spec.reclaim_within_cohort == "Any" or vp < prio):
                        continue
                    without = would_borrow and (
                        spec.borrow_within_cohort == "Never"
                        or vp >= prio
                        or (threshold is not None and vp > threshold)
                    )
                    reason = (
                        "InCohortReclaimWhileBorrowing"
                        if would_borrow and not without
                        else "InCohortReclamation"
                    )
                    candidates.append(((0, vp, -(v.admitted_at or 0.0), v.uid), v, reason, without))
                    cross = True
        if not candidates:
            return None
        candidates.sort(key=lambda c: c[0])
        for borrow in self._attempts(own, would_borrow, cross):
            chosen = self._attempt(wl, candidates, borrow)
            if chosen is not None:
                return [Preemption(v, wl, reason) for v, reason in chosen]
        return None

    @staticmethod
    def _attempts(own: PendingQueue, would_borrow: bool, cross: bool) -> tuple[bool, ...]:
        """Kueue's attempts, in its order (``True``: the preemptor may borrow once admitted)."""
        forbidden = own.spec.borrow_within_cohort == "Never"
        if not cross or (forbidden and own.usage >= own.spec.nominal_gpus):
            return (True,)
        if forbidden and would_borrow:  # no candidate it has a hierarchical advantage over
            return (False, True)
        return (True, False)

    def _attempt(
        self,
        wl: Workload,
        candidates: list[tuple[tuple[int, int, float, int], Workload, str, bool]],
        borrow: bool,
    ) -> list[tuple[Workload, str]] | None:
        own = self.queues[wl.cluster_queue]

        def fits(removed: dict[str, int]) -> bool:
            if not borrow and own.usage - removed.get(wl.cluster_queue, 0) + wl.gpus > own.spec.nominal_gpus:
                return False
            return self._fits(wl.cluster_queue, wl.gpus, removed)

        removed: dict[str, int] = {}
        chosen: list[tuple[Workload, str]] = []
        for _key, v, reason, without in candidates:
            if v.cluster_queue != wl.cluster_queue:
                if borrow and without:
                    continue
                other = self.queues[v.cluster_queue]
                if other.usage - removed.get(v.cluster_queue, 0) <= other.spec.nominal_gpus:
                    continue  # that queue no longer borrows: nothing left to reclaim from it
            removed[v.cluster_queue] = removed.get(v.cluster_queue, 0) + v.gpus
            chosen.append((v, reason))
            if fits(removed):
                break
        else:
            return None
        for v, reason in reversed(list(chosen)):
            removed[v.cluster_queue] -= v.gpus
            if fits(removed):
                chosen.remove((v, reason))
            else:
                removed[v.cluster_queue] += v.gpus
        return chosen

    # ---- the scheduling pass ---------------------------------------------------------------
    def _admit(self, wl: Workload, now: float) -> None:
        q = self.queues[wl.cluster_queue]
        self._remove_pending(wl)
        q.usage += wl.gpus
        q.admitted[wl.uid] = wl
        wl.admitted = True
        wl.admitted_at = now
        self._touch(wl.cluster_queue)

    def schedule(self, now: float) -> tuple[list[Workload], list[Preemption]]:
        """Admit what fits (preempting where the queue's policy allows) until nothing changes.

        Returns the newly admitted workloads and the preemptions issued. Evicted victims are
        released here; the caller requeues them (``submit``) after stopping their jobs.

        Each queue is scanned in its own order (``_scan``), the queues in the order of their heads
        as Kueue's scheduling cycle tries the heads of its ClusterQueues: one that fits without
        borrowing first, then by effective priority, then by creation time (``_cycle_key``). That
        order decides which queue of a cohort gets the GPUs both want. Kueue takes one head per
        ClusterQueue per cycle; the model scans a queue through before the next one, so that a
        queue's backlog behind its head goes before the next queue's head (a simplification that
        keeps the pass's shortcuts exact: ``tests/simulator/test_quota_fast_paths.py``).
        """
        admitted: list[Workload] = []
        preempted: list[Preemption] = []
        while self._dirty:
            names = [name for name in sorted(self._dirty) if self.queues[name].pending]
            self._dirty.clear()
            if len(names) > 1:
                names.sort(key=lambda name: self._cycle_key(self.queues[name].pending[0][1]))
            for name in names:
                self._scan(name, now, admitted, preempted)
        return admitted, preempted

    def _cycle_key(self, wl: Workload) -> tuple[bool, int, float, int]:
        """Kueue's order of one cycle's heads (``makeClassicalIterator``): an entry that fits
        without borrowing before one that borrows, then higher effective priority
        (``PrioritySortingWithinCohort``, on by default), then earlier creation."""
        q = self.queues[wl.cluster_queue]
        return (q.usage + wl.gpus > q.spec.nominal_gpus, -self._eff(wl), wl.created_at, wl.uid)

    def _scan(self, name: str, now: float, admitted: list[Workload], preempted: list[Preemption]) -> None:
        """One queue's part of a pass: its entries in queue order, each admitted as it fits or
        by preemption; one that cannot be is passed over (BestEffortFIFO) or stops the queue
        (StrictFIFO)."""
        q = self.queues[name]
        no_fit = _INF  # smallest size that did not fit as is (larger ones cannot either)
        no_victims: dict[int, int] = {}  # priority -> smallest size that found no victims
        spec = q.spec
        can_preempt = spec.within_cluster_queue != "Never" or spec.reclaim_within_cohort != "Never"
        strict = spec.queueing_strategy == "StrictFIFO"
        after: QueueKey | None = None
        while True:
            # Entries of at least ``no_fit`` GPUs cannot fit as they are, and those of at least
            # the smallest size that found no victims cannot preempt either (every later entry
            # has no higher a priority): the pass skips them without looking. StrictFIFO stops
            # at the first entry it cannot admit, so it visits them.
            below = _INF
            if not strict:
                below = max(no_fit, min(no_victims.values(), default=_INF)) if can_preempt else no_fit
            entry = q.next_entry(after, below)
            if entry is None:
                return
            after, wl = entry
            if wl.gpus < no_fit:
                if self._fits(name, wl.gpus, {}):
                    self._admit(wl, now)
                    admitted.append(wl)
                    no_victims.clear()
                    continue
                no_fit = wl.gpus
            prio = self._eff(wl)
            hopeless = not can_preempt or any(g <= wl.gpus and p >= prio for p, g in no_victims.items())
            targets = None if hopeless else self.preemption_targets(wl)
            if targets:
                for p in targets:
                    self.release(p.victim)
                    preempted.append(p)
                self._admit(wl, now)
                admitted.append(wl)
                no_fit = _INF
                no_victims.clear()
                continue
            if not hopeless:
                no_victims[prio] = min(no_victims.get(prio, _INF), wl.gpus)
            if strict:
                return
            if no_fit <= 1 and (not can_preempt or no_victims.get(prio, _INF) <= 1):
                return  # nothing smaller or more important is left behind this one
