"""The engine's side of the advisor: the incrementally built ClusterView is exactly the snapshot a
full rebuild gives (and a job's cached base view the view built afresh), and a boosted workload that
Kueue preempts has its boost dropped (the controller's answer to the eviction) before it is
requeued, so it never outranks its equals."""

from __future__ import annotations

from collections.abc import Sequence

from simworld import QUIET, one_queue, scenario

from advisor.model import Action, ActionKind, ClusterView, ProgressSample
from simulator.baselines import NoAdvisor
from simulator.engine import Simulation
from simulator.jobs import Phase, SimJob
from simulator.runner import run_strategy
from simulator.scenario import default_scenario
from simulator.traces import TraceJob


def _rebuilt(sim: Simulation) -> ClusterView:
    """The snapshot built from nothing (every cache dropped)."""
    saved = (sim.views._cluster_cache, dict(sim.views._queue_parts), dict(sim.views._wl_views))
    sim.views._cluster_cache, sim.views._queue_parts, sim.views._wl_views = None, {}, {}
    try:
        return sim.cluster_view()
    finally:
        sim.views._cluster_cache, sim.views._queue_parts, sim.views._wl_views = saved[0], saved[1], saved[2]


class Checker(NoAdvisor):
    """Ticks every job often and compares the cached snapshot with a rebuilt one each time."""

    name = "checker"
    watches_cluster = True

    def __init__(self) -> None:
        self.compared = 0
        self.sim: Simulation | None = None

    def reset(self, sim: Simulation) -> None:
        self.sim = sim

    def first_tick(self, job: SimJob) -> float | None:
        return 300.0

    def next_tick(self, job: SimJob, now: float) -> float | None:
        return 900.0

    def tick(self, job: SimJob, samples: Sequence[ProgressSample], now: float) -> Sequence[Action]:
        assert self.sim is not None
        cached = self.sim.cluster_view()
        fresh = _rebuilt(self.sim)
        # the same queues and workloads; the eviction rates are those of the last quota change
        assert cached.cluster_queues == fresh.cluster_queues
        assert cached.workloads == fresh.workloads
        assert cached.preemption_rate.keys() <= fresh.preemption_rate.keys()
        # the job's base view, shared by ticks while nothing in it changed, equals a fresh one
        view = self.sim.job_view(job)
        saved = self.sim.views._job_views.pop(job.idx)
        assert view == self.sim.job_view(job)
        self.sim.views._job_views[job.idx] = saved
        self.compared += 1
        return ()


def test_the_cached_cluster_view_equals_a_full_rebuild_throughout_a_run() -> None:
    checker = Checker()
    res = run_strategy(default_scenario(seed=1, n_jobs=40), checker)
    assert checker.compared > 100
    assert res.metrics["preemptions"] > 0  # the snapshots went through evictions and requeues


class Booster(NoAdvisor):
    """Boosts job 0 while it runs; drops the boost whenever it sees job 0 not admitted."""

    name = "booster"
    watches_cluster = True

    def __init__(self) -> None:
        self.seen: list[tuple[int, str, float, int]] = []

    def first_tick(self, job: SimJob) -> float | None:
        return 60.0

    def next_tick(self, job: SimJob, now: float) -> float | None:
        return 600.0

    def tick(self, job: SimJob, samples: Sequence[ProgressSample], now: float) -> Sequence[Action]:
        wl = job.workload
        self.seen.append((job.idx, job.phase.value, now, wl.boost))
        if job.idx != 0:
            return ()
        if wl.admitted and wl.boost == 0:
            return (Action(ActionKind.BOOST_PRIORITY, "test", "protect", {"boost": 1}),)
        if not wl.admitted and wl.boost:
            return (Action(ActionKind.DROP_BOOST, "test", "evicted"),)
        return ()


def test_a_preempted_boosted_workload_loses_its_boost_before_it_is_requeued() -> None:
    # A (boosted) and C share a LowerPriority queue of 16 GPUs; B (priority 1000) needs all 16.
    jobs = [
        TraceJob("a", 0.0, 8, 4 * 3600.0),
        TraceJob("c", 10.0, 8, 4 * 3600.0),
        TraceJob("b", 1800.0, 16, 3600.0, priority=1000),
        TraceJob("d", 1900.0, 8, 3600.0),
    ]
    strategy = Booster()
    res = run_strategy(scenario(jobs, one_queue(16, within_cluster_queue="LowerPriority")), strategy)
    assert {idx for idx, _t in res.record.preemptions} == {0, 1}
    # the controller saw A's eviction at the very instant and dropped the boost then
    assert (0, Phase.PENDING.value, 1800.0, 1) in strategy.seen
    assert res.record.actions == {"boost-priority": 2, "drop-boost": 1}  # boosted again once readmitted
    # requeued without a boost, A never preempted C or D, its equals: only B's two preemptions
    assert len(res.record.preemptions) == 2
    assert all(j.phase is Phase.DONE for j in res.jobs)


def test_baselines_that_do_not_watch_the_cluster_are_not_asked_on_evictions() -> None:
    jobs = [TraceJob("a", 0.0, 16, 3600.0), TraceJob("b", 600.0, 16, 600.0, priority=1000)]
    res = run_strategy(
        scenario(jobs, one_queue(16, within_cluster_queue="LowerPriority"), QUIET), NoAdvisor()
    )
    assert res.record.preemptions and res.record.ticks == 0


class Recorder(NoAdvisor):
    """Keeps the simulation, to read its last snapshot."""

    name = "recorder"

    def reset(self, sim: Simulation) -> None:
        self.sim = sim


def test_the_hazard_evidence_per_priority_adds_up_to_the_queues() -> None:
    """The simulator counts evictions and admitted time per queue and priority, as the controller
    reads them off Workloads, and the pooled evidence is their sum."""
    rec = Recorder()
    res = run_strategy(default_scenario(seed=1, n_jobs=40), rec)
    view = rec.sim.cluster_view()
    assert res.metrics["preemptions"] > 0
    summed: dict[str, list[float]] = {}
    for (cq, _prio), (k, t) in view.priority_hazard_evidence.items():
        acc = summed.setdefault(cq, [0, 0.0])
        acc[0] += k
        acc[1] += t
    assert {cq: (k, round(t, 6)) for cq, (k, t) in summed.items()} == {
        cq: (k, round(t, 6)) for cq, (k, t) in view.hazard_evidence.items()
    }
    priorities = {prio for _cq, prio in view.priority_hazard_evidence}
    assert len(priorities) >= 2  # the scenario's share of high-priority jobs
    # Kueue evicts the lower priority: the preemptions fall on the lowest one
    low = min(priorities)
    assert sum(k for (_cq, p), (k, _t) in view.priority_hazard_evidence.items() if p == low) > 0
