"""Admission: Kueue's scheduling passes over the quota model, and what they do to the jobs.

A pass admits pending workloads and preempts others; the engine starts the admitted jobs and evicts
the victims (a boosted victim's advisor is asked at once, its watch event, so that it can drop the
boost before the workload is requeued). A preempted workload is requeued once its pods have
terminated, with a backoff for one preempted again soon. While a higher-priority workload waits,
the lower-priority running jobs of its cohort get a tick (the controller's Workload watch events).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from advisor.model import ClusterView
from policies.victims import predict_victims
from simulator.jobs import Phase, SimJob

if TYPE_CHECKING:
    from simulator.engine import Simulation

__all__ = ["REQUEUE_MAX_S", "REQUEUE_MEMORY_S", "Admission"]

#: a workload preempted again within this long of its previous preemption waits twice as long as
#: then before it is requeued, up to REQUEUE_MAX_S (see ``Admission.requeue``)
REQUEUE_MEMORY_S = 3600.0
REQUEUE_MAX_S = 3600.0


class Admission:
    """Runs the quota model's scheduling passes for one simulation."""

    def __init__(self, sim: Simulation) -> None:
        self._sim = sim
        self._scheduling = False
        self._reschedule = False
        #: jobs given a wake-up tick that has not come yet
        self.woken: set[int] = set()
        #: per job: (time of its latest preemption, the requeue delay it got)
        self._requeue_backoff: dict[int, tuple[float, float]] = {}

    def schedule(self) -> None:
        sim = self._sim
        if self._scheduling:
            self._reschedule = True  # an action taken inside the pass: one more pass after it
            return
        self._scheduling = True
        try:
            while True:
                self._reschedule = False
                before = sim.views.cluster_view() if sim.world.score_victims else None
                admitted, preempted = sim.quota.schedule(sim.now)
                if before is not None:
                    self._score_victims(before, preempted)
                for p in preempted:
                    victim = sim.by_workload[p.victim.uid]
                    if victim.phase is Phase.PENDING:
                        # admitted and preempted again within this pass: it never started
                        self.requeue(victim)
                        continue
                    sim.record.preemptions.append((victim.idx, sim.now))
                    sim.actuator.evict(victim, "preempted")
                    if sim.strategy.watches_cluster:
                        # the controller sees the eviction (a watch event) and decides on the job
                        # at once: a boost to drop, a grace period to set for its next start
                        sim.react(victim)
                for wl in admitted:
                    job = sim.by_workload[wl.uid]
                    if wl.admitted and job.phase is Phase.PENDING:
                        sim.start(job)
                if not (preempted or self._reschedule):
                    break
        finally:
            self._scheduling = False
        sim.usage_changed()
        if sim.strategy.watches_cluster:
            self._wake_likely_victims()

    def _score_victims(self, before: ClusterView, preempted: Sequence[Any]) -> None:
        """The advisor's victim predictor, run on the snapshot a controller would have read just
        before the pass, against the workloads the quota model then preempted in it. Independent
        of any rule's thresholds, and of boosts (score with the PriorityBoost gate off)."""
        record = self._sim.record
        predicted = {(v.namespace, v.name) for v in predict_victims(before)}
        chosen = set()
        for p in preempted:
            job = self._sim.by_workload[p.victim.uid]
            if job.phase is Phase.PENDING:
                # admitted and preempted again within this pass (the model scans a queue through
                # before the next; Kueue would not have admitted it): it never ran, lost nothing,
                # and was not running in the snapshot, so no predictor could have named it
                continue
            chosen.add((job.namespace, job.trace.name))
        record.victims_predicted += len(predicted)
        record.victims_chosen += len(chosen)
        record.victims_hit += len(predicted & chosen)

    def _wake_likely_victims(self) -> None:
        """A higher-priority workload waits: give the lower-priority running jobs of its cohort a
        tick now (the controller re-evaluates on Workload watch events the same way)."""
        sim = self._sim
        quota = sim.quota
        for name, q in quota.queues.items():
            if not q.pending:
                continue
            top = max(w.priority for _k, w in q.pending[:8])
            for member in quota.members(name):
                for wl in quota.queues[member].admitted.values():
                    if wl.priority < top:
                        job = sim.by_workload[wl.uid]
                        if job.idx not in self.woken:
                            self.woken.add(job.idx)
                            sim.wake(job)

    def requeue(self, job: SimJob) -> None:
        """Put a preempted workload back in the queue once its pods have terminated (Kueue sets
        ``Requeued`` when the job is no longer active): after the grace period. A workload
        preempted again within ``REQUEUE_MEMORY_S`` of the last time waits twice as long as then
        (up to ``REQUEUE_MAX_S``). Kueue's rules allow a preemption cycle (a borrower with a high
        priority preempts a cohort member's small workloads, one of which then reclaims its
        queue's nominal quota from that borrower, and so on) that in a cluster thrashes at the
        pace of the pods' termination; the backoff keeps the replay from spending its events on
        one such cycle while still counting each preemption and the work it loses."""
        sim = self._sim
        last = self._requeue_backoff.get(job.idx)
        delay = job.grace_s  # its pods terminate within their grace period
        if last is not None and sim.now - last[0] <= REQUEUE_MEMORY_S:
            delay = min(REQUEUE_MAX_S, max(delay, 2.0 * last[1]))
        self._requeue_backoff[job.idx] = (sim.now, delay)
        sim.requeue_at(job, sim.now + delay)
