"""The save window: a grace period that fits a save on SIGTERM is recommended where evictions
come; verified saves on SIGTERM relax the periodic interval; unverified ones do not."""

from __future__ import annotations

import dataclasses

import pytest
from policy_builders import HOUR, T0, cluster, job, policy

from advisor.model import (
    Action,
    ActionKind,
    ActionRecord,
    CheckpointState,
    ClusterQueueView,
    Decision,
    Forecast,
    Interval,
    Phase,
    WorkloadView,
)
from policies import checkpoint_interval, decide
from policies.savewindow import MIN_PEERS, miss_probability, needed_grace, peer_grace

SPOT = {"cq": 1 / HOUR}
PREEMPTIBLE = ClusterQueueView(name="cq", nominal_gpus=8, usage_gpus=8, within_cluster_queue="LowerPriority")


def _on_queue(**kw: object):
    j = job(namespace="ns", name="ft-1", **kw)
    others = [
        WorkloadView("ns", "ft-1", "cq", 8, priority=0, admitted=True, job=j.key, admitted_at=T0 - HOUR),
        WorkloadView("ns", "hi", "cq", 8, priority=100, admitted=False),
    ]
    return j, cluster([PREEMPTIBLE], others, preemption_rate=SPOT)


def test_the_window_is_a_step_plus_a_save() -> None:
    cp = CheckpointState(last_time=T0 - 60, cost_seconds=50.0, save_seconds=38.2)
    j = job(checkpoint=cp, throughput=((1, 0.5),))  # 2 s per step
    assert needed_grace(j) == 41.0  # the helper's own save time wins over the ack latency
    no_helper = job(checkpoint=dataclasses.replace(cp, save_seconds=None), throughput=((1, 0.5),))
    assert needed_grace(no_helper) == 52.0
    unknown = job(checkpoint=cp, throughput=(), forecast=None)
    assert needed_grace(unknown) is None


def test_trust_grows_with_verified_saves_and_never_exceeds_what_the_grace_allows() -> None:
    base = CheckpointState(last_time=T0 - 60, cost_seconds=20.0)
    fits = {"throughput": ((1, 1.0),), "grace_period_s": 60.0}
    assert miss_probability(job(checkpoint=base, **fits)) == 1.0  # nothing seen yet: no trust
    three = dataclasses.replace(base, sigterm_saves=3)
    assert miss_probability(job(checkpoint=three, **fits)) == pytest.approx(0.25)
    mixed = dataclasses.replace(base, sigterm_saves=3, sigterm_misses=1)
    assert miss_probability(job(checkpoint=mixed, **fits)) == pytest.approx(0.4)
    short = {"throughput": ((1, 1.0),), "grace_period_s": 10.0}
    assert miss_probability(job(checkpoint=three, **short)) == 1.0


def test_a_preemptible_job_whose_grace_is_too_short_gets_the_recommendation() -> None:
    p = policy({"checkpoint": {}})
    cp = CheckpointState(last_time=T0 - 60, cost_seconds=45.0, save_seconds=40.0)
    j, c = _on_queue(checkpoint=cp, throughput=((1, 0.25),), grace_period_s=30.0)  # 4 s steps
    advice = [a for a in decide(j, c, p, now=T0).actions if a.params.get("would") == "set-grace-period"]
    assert len(advice) == 1 and advice[0].kind is ActionKind.RECOMMEND
    assert (
        advice[0].params["grace_period_s"] == 44.0
        and "terminationGracePeriodSeconds >= 44" in advice[0].reason
    )
    covered, c = _on_queue(checkpoint=cp, throughput=((1, 0.25),), grace_period_s=60.0)
    assert not [
        a for a in decide(covered, c, p, now=T0).actions if a.params.get("would") == "set-grace-period"
    ]


def test_no_grace_advice_where_no_eviction_can_come() -> None:
    p = policy({"checkpoint": {}})
    cp = CheckpointState(last_time=T0 - 60, cost_seconds=45.0, save_seconds=40.0)
    calm = ClusterQueueView(name="cq", nominal_gpus=32, usage_gpus=8)  # withinClusterQueue: Never
    j = job(namespace="ns", name="ft-1", checkpoint=cp, throughput=((1, 0.25),), grace_period_s=30.0)
    w = WorkloadView("ns", "ft-1", "cq", 8, admitted=True, job=j.key, admitted_at=T0 - HOUR)
    d = decide(j, cluster([calm], [w]), p, now=T0)
    assert not [a for a in d.actions if a.params.get("would") == "set-grace-period"]
    # the same job under a policy that may release it: its own SIGTERM needs the window too
    releasing = policy({"checkpoint": {}, "stall": {}})
    d = decide(j, cluster([calm], [w]), releasing, now=T0)
    assert [a for a in d.actions if a.params.get("would") == "set-grace-period"]


def test_verified_saves_relax_the_periodic_interval() -> None:
    p = policy({"checkpoint": {"minInterval": "1m", "maxInterval": "12h"}})
    fc = Forecast(final_loss=Interval(1.0, 0.9, 1.1), plateau_probability=0.1, divergence_probability=0.0)
    unverified = CheckpointState(last_time=T0 - 20 * 60, cost_seconds=30.0)
    kw = {"throughput": ((1, 1.0),), "grace_period_s": 60.0, "forecast": fc}
    j, c = _on_queue(checkpoint=unverified, **kw)
    d = [a for a in decide(j, c, p, now=T0).actions if a.kind is ActionKind.CHECKPOINT]
    # the queue evicts once an hour; this workload's own hour there without an eviction halves it
    # (``policies.hazard.workload_hazard``)
    assert d and d[0].params["interval_s"] == pytest.approx(checkpoint_interval(30, 0.5 / HOUR))
    verified = dataclasses.replace(unverified, sigterm_saves=9)
    j, c = _on_queue(checkpoint=verified, **kw)
    assert not [a for a in decide(j, c, p, now=T0).actions if a.kind is ActionKind.CHECKPOINT]
    # the relaxed interval is Young/Daly for a tenth of the hazard (one miss in ten expected)
    late = dataclasses.replace(verified, last_time=T0 - 3 * HOUR)
    j, c = _on_queue(checkpoint=late, **kw)
    d = [a for a in decide(j, c, p, now=T0).actions if a.kind is ActionKind.CHECKPOINT]
    assert d and d[0].params["interval_s"] == pytest.approx(checkpoint_interval(30, 0.05 / HOUR))
    assert "9 of 9 saves on SIGTERM verified" in d[0].reason


def test_the_guard_leaves_a_verified_saver_alone_and_shields_one_that_cannot_save() -> None:
    p = policy({"preemptionGuard": {"staleAfter": "15m"}})
    stale = CheckpointState(last_time=T0 - 40 * 60, cost_seconds=60.0, sigterm_saves=99)
    j, c = _on_queue(checkpoint=stale, throughput=((1, 1.0),), grace_period_s=120.0)
    c = dataclasses.replace(c, priority_boost_enabled=True)
    d = decide(j, c, p, now=T0)
    assert d.actions == () and any("saves on SIGTERM worked on 99 of 99" in r for r in d.reasons)
    short, c2 = _on_queue(checkpoint=stale, throughput=((1, 1.0),), grace_period_s=30.0)
    c2 = dataclasses.replace(c2, priority_boost_enabled=True)
    assert [a.kind for a in decide(short, c2, p, now=T0).actions] == [
        ActionKind.BOOST_PRIORITY,
        ActionKind.CHECKPOINT,
    ]


def _evicted(**kw: object):
    """The job after Kueue preempted it: requeued (pending), its TrainJob suspended."""
    cp = CheckpointState(last_time=T0 - 600, cost_seconds=45.0, save_seconds=40.0)
    j = job(
        namespace="ns",
        name="ft-1",
        checkpoint=cp,
        throughput=((1, 0.25),),  # 4 s steps: the window is 44 s
        grace_period_s=30.0,
        phase=Phase.PENDING,
        admitted=False,
        **kw,
    )
    w = WorkloadView("ns", "ft-1", "cq", 8, priority=0, admitted=False, job=j.key)
    return j, cluster([PREEMPTIBLE], [w], preemption_rate=SPOT)


def _grace_sets(d: Decision) -> list[Action]:
    return [a for a in d.actions if a.kind is ActionKind.SET_GRACE_PERIOD]


def test_an_evicted_trainjob_gets_its_grace_period_set_for_its_next_start_in_apply_mode() -> None:
    j, c = _evicted()
    (action,) = _grace_sets(decide(j, c, policy({"checkpoint": {"setGracePeriod": True}}), now=T0))
    assert action.params["grace_period_s"] == 44.0 and "for the next start" in action.reason
    # the window is the sum of its parts rounded up, so the parts are said in tenths of a second
    assert "needs the step under way (4.0s) plus a save (40s)" in action.reason
    # the option is off by default, and Recommend mode never writes
    assert not _grace_sets(decide(j, c, policy({"checkpoint": {}}), now=T0))
    recommend = policy({"checkpoint": {"setGracePeriod": True}}, mode="Recommend")
    d = decide(j, c, recommend, now=T0)
    assert not _grace_sets(d)
    (said,) = [a for a in d.actions if a.params.get("would") == "set-grace-period"]
    assert said.kind is ActionKind.RECOMMEND and said.params["grace_period_s"] == 44.0
    assert said.reason.startswith("would set terminationGracePeriodSeconds to 44")


def test_the_grace_period_is_never_set_on_a_running_or_finished_job_or_one_already_covered() -> None:
    p = policy({"checkpoint": {"setGracePeriod": True}})
    cp = CheckpointState(last_time=T0 - 60, cost_seconds=45.0, save_seconds=40.0)
    running, c = _on_queue(checkpoint=cp, throughput=((1, 0.25),), grace_period_s=30.0)
    d = decide(running, c, p, now=T0)
    assert not _grace_sets(d)  # Trainer refuses it while the pods run: a recommendation instead
    assert [a for a in d.actions if a.params.get("would") == "set-grace-period"]
    for phase in (Phase.FINISHED, Phase.FAILED):
        j, c = _evicted()
        assert not _grace_sets(decide(dataclasses.replace(j, phase=phase), c, p, now=T0))
    j, c = _evicted()
    assert not _grace_sets(decide(dataclasses.replace(j, grace_period_s=60.0), c, p, now=T0))
    assert not _grace_sets(decide(dataclasses.replace(j, kind="PyTorchJob"), c, p, now=T0))
    unknown = dataclasses.replace(j, throughput=(), forecast=None)  # never ran long enough to tell
    assert not _grace_sets(decide(unknown, c, p, now=T0))


def test_a_failed_grace_write_is_backed_off_and_an_impossible_one_waits_for_a_change_or_an_hour() -> None:
    p = policy({"checkpoint": {"setGracePeriod": True}})
    j, c = _evicted()
    failed = ActionRecord(ActionKind.SET_GRACE_PERIOD, T0 - 10, "r1", outcome="failed", stamp=j.version)
    assert not _grace_sets(decide(dataclasses.replace(j, actions=(failed,)), c, p, now=T0))
    assert _grace_sets(decide(dataclasses.replace(j, actions=(failed,)), c, p, now=T0 + 120))
    impossible = dataclasses.replace(failed, outcome="impossible")
    assert not _grace_sets(decide(dataclasses.replace(j, actions=(impossible,)), c, p, now=T0 + 1800))
    moved = dataclasses.replace(j, actions=(impossible,), version=j.version + "+resumed")
    assert _grace_sets(decide(moved, c, p, now=T0 + 1800))
    # or, the job as it stands, once an hour (``policies.retries``)
    assert _grace_sets(decide(dataclasses.replace(j, actions=(impossible,)), c, p, now=T0 + 3600))


def _new(gpus: int, peers: tuple[tuple[int, float, float], ...]):
    """A new TrainJob waiting for its first start: nothing of its own measured yet."""
    j = job(
        namespace="ns",
        name="new-1",
        gpus=gpus,
        grace_period_s=30.0,
        phase=Phase.PENDING,
        admitted=False,
        throughput=(),
        forecast=None,
        runtime="torch-distributed",
        runtime_save_windows=peers,
    )
    w = WorkloadView("ns", "new-1", "cq", gpus, priority=0, admitted=False, job=j.key)
    return j, cluster([PREEMPTIBLE], [w], preemption_rate=SPOT)


def test_a_new_job_takes_the_save_window_its_runtime_measured_on_jobs_of_its_size() -> None:
    p = policy({"checkpoint": {"setGracePeriod": True}})
    same = ((8, 1.0, 60.0), (8, 2.0, 70.0), (8, 1.5, 80.5))
    bigger = ((64, 2.0, 200.0),) * 3
    j, c = _new(8, same + bigger)
    assert peer_grace(j) == (82.0, 3)  # the jobs of its own size, their largest window (ceil)
    (action,) = _grace_sets(decide(j, c, p, now=T0))
    assert action.params["grace_period_s"] == 82.0
    assert "measured on 3 jobs of runtime torch-distributed" in action.reason
    # too few of its size: those within a factor of two, then the whole runtime
    assert peer_grace(_new(16, same + bigger)[0]) == (82.0, 3)
    assert peer_grace(_new(1, same + bigger)[0]) == (202.0, 6)
    # fewer than MIN_PEERS windows on the runtime: nothing to go on, nothing is written
    j, c = _new(8, same[: MIN_PEERS - 1])
    assert peer_grace(j) is None and not _grace_sets(decide(j, c, p, now=T0))
    # the job's own measure wins over its peers' once it has one
    own = dataclasses.replace(
        _new(8, same)[0], throughput=((1, 0.25),), checkpoint=CheckpointState(save_seconds=40.0)
    )
    (action,) = _grace_sets(decide(own, c, p, now=T0))
    assert action.params["grace_period_s"] == 44.0  # below its peers' 82 s
