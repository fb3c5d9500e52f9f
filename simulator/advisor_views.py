"""The views a controller would read, assembled from the simulator's state for the advisor.

The ClusterView handed to the advisor is one snapshot per quota change, assembled from
per-ClusterQueue parts, so thousands of ticks between two changes share it (and the policies'
per-snapshot index). Job and workload views are frozen, so each is rebuilt only when a field of it
changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.model import ClusterQueueView, ClusterView, JobView, LifecycleSignals, WorkloadView
from policies.hazard import Exposure, hazard_evidence, hazard_evidence_by_priority, rates_of
from simulator.quota import QuotaModel, Workload

if TYPE_CHECKING:
    from simulator.engine import Simulation
    from simulator.jobs import SimJob

__all__ = ["VIEW_PENDING", "AdvisorViews", "cluster_queue_view"]

#: the training runtime every simulated job runs on (one helper, image and storage for all)
SIM_RUNTIME = "torch-distributed"
#: pending workloads per ClusterQueue shown in the ClusterView (the head of each queue)
VIEW_PENDING = 50


def cluster_queue_view(quota: QuotaModel, name: str) -> ClusterQueueView:
    """ClusterQueue ``name`` of the quota model as a controller reads it."""
    q = quota.queues[name]
    s = q.spec
    return ClusterQueueView(
        name=name,
        cohort=s.cohort,
        nominal_gpus=s.nominal_gpus,
        borrowing_limit=s.borrowing_limit,
        lending_limit=s.lending_limit,
        usage_gpus=q.usage,
        within_cluster_queue=s.within_cluster_queue,
        reclaim_within_cohort=s.reclaim_within_cohort,
        borrow_within_cohort=s.borrow_within_cohort,
        borrow_max_priority_threshold=s.borrow_max_priority_threshold,
        queueing_strategy=s.queueing_strategy,
    )


class AdvisorViews:
    """Builds and caches the ``JobView`` / ``ClusterView`` of one simulation."""

    def __init__(self, sim: Simulation) -> None:
        self._sim = sim
        self._cluster_cache: tuple[int, float, ClusterView] | None = None
        self._queue_parts: dict[str, tuple[int, ClusterQueueView, tuple[WorkloadView, ...]]] = {}
        self._wl_views: dict[int, tuple[tuple[Any, ...], WorkloadView]] = {}
        self._job_views: dict[int, tuple[tuple[Any, ...], JobView]] = {}

    def job_view(self, job: SimJob) -> JobView:
        """The adapter's base view; the core fills in the history-derived fields. A job's view is
        rebuilt only when a field of it changed (views are frozen, so ticks may share one)."""
        wl = job.workload
        world = self._sim.world
        admitted_at = wl.admitted_at if wl.admitted else None
        # minRuntime counts from the job's creation, as the controller reads creationTimestamp, or
        # from its first start (a scenario setting)
        started = job.trace.submit if world.runtime_from == "creation" else job.first_start
        stamp = (
            job.gpus,
            job.nodes,
            wl.priority,
            wl.active,
            wl.admitted,
            admitted_at,
            started,
            wl.finished,
        )
        cached = self._job_views.get(job.idx)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        view = JobView(
            namespace=job.namespace,
            name=job.trace.name,
            kind="TrainJob",
            labels={"kueue.x-k8s.io/queue-name": job.trace.queue, **job.labels},
            queue_name=job.trace.queue,
            cluster_queue=job.cluster_queue,
            priority=wl.priority,
            gpus=job.gpus,
            nodes=job.nodes,
            # elastic bounds only when the scenario's jobs declare them (a TrainJob declares none)
            min_nodes=1 if world.elastic else None,
            max_nodes=max(job.nodes, 2 * job.nodes) if world.elastic else None,
            active=wl.active,
            admitted=wl.admitted,
            admitted_at=admitted_at,
            grace_period_s=job.grace_s,
            runtime=SIM_RUNTIME,
            started_at=started,
            # the same lifecycle signals a controller reads from the job's Workload
            signals=LifecycleSignals(
                has_workload=True,
                workload_active=wl.active,
                quota_reserved=wl.admitted,
                workload_admitted=wl.admitted,
                workload_finished=wl.finished,
            ),
        )
        self._job_views[job.idx] = (stamp, view)
        return view

    def cluster_view(self) -> ClusterView:
        """The snapshot a controller would read now. One snapshot serves every tick until the
        quota model changes (the eviction rates in it are those of that moment, as a
        controller's would be of its last informer update), so the policies' per-snapshot index
        is built once for all of them. It is assembled from per-ClusterQueue parts rebuilt only
        when their queue changed (and per-workload views only when the workload did)."""
        sim = self._sim
        quota = sim.quota
        cached = self._cluster_cache
        if cached is not None and cached[0] == quota.version:
            return cached[2]
        queues: dict[str, ClusterQueueView] = {}
        workloads: list[WorkloadView] = []
        for name in quota.queues:
            version = quota.queue_version[name]
            part = self._queue_parts.get(name)
            if part is None or part[0] != version:
                part = (version, self._queue_view(name), self._queue_workloads(name))
                self._queue_parts[name] = part
            queues[name] = part[1]
            workloads.extend(part[2])
        # the controller's definition (``policies.hazard``): preemptions and node failures (the
        # simulator's evictions count both; its releases are not evictions) over admitted time
        exposures = [
            Exposure(cq, preemptions=sim.evictions.get((cq, prio), 0), admitted_seconds=busy, priority=prio)
            for (cq, prio), busy in sim.busy_s.items()
        ]
        evidence = hazard_evidence(exposures)
        view = ClusterView(
            cluster_queues=queues,
            workloads=tuple(workloads),
            preemption_rate=rates_of(evidence),
            hazard_evidence=evidence,
            priority_hazard_evidence=hazard_evidence_by_priority(exposures),
            priority_boost_enabled=sim.world.priority_boost_enabled,
        )
        self._cluster_cache = (quota.version, sim.now, view)
        return view

    def _queue_view(self, name: str) -> ClusterQueueView:
        return cluster_queue_view(self._sim.quota, name)

    def _queue_workloads(self, name: str) -> tuple[WorkloadView, ...]:
        """The queue's admitted workloads, then the first ``VIEW_PENDING`` of its queue."""
        q = self._sim.quota.queues[name]
        out = [self._wl_view(wl) for wl in q.admitted.values()]
        out.extend(self._wl_view(wl) for _k, wl in q.pending[:VIEW_PENDING])
        return tuple(out)

    def _wl_view(self, wl: Workload) -> WorkloadView:
        job = self._sim.by_workload[wl.uid]
        interruptions = job.preemptions + job.failures_met
        stamp = (
            wl.gpus,
            wl.admitted,
            wl.active,
            wl.admitted_at,
            wl.boost,
            interruptions,
            job.past_admitted_s,
        )
        cached = self._wl_views.get(wl.uid)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        view = WorkloadView(
            namespace=job.namespace,
            name=job.trace.name,
            cluster_queue=wl.cluster_queue,
            gpus=wl.gpus,
            priority=wl.priority,
            admitted=wl.admitted,
            active=wl.active,
            job=job.key,
            admitted_at=wl.admitted_at,
            created_at=wl.created_at,
            priority_boost=wl.boost,
            interruptions=interruptions,
            past_admitted_seconds=job.past_admitted_s,
        )
        self._wl_views[wl.uid] = (stamp, view)
        return view
