"""Checkpoints against preemption go where preemption can reach: ``can_be_preempted`` follows
Kueue's rules (priorities in use, borrowing, the queues' preemption policies), the periodic
checkpoint rule keeps ``maxInterval`` for a workload nothing can evict, and the standing boost asks
for a tick exactly when a fresh checkpoint turns stale."""

from __future__ import annotations

import pytest
from policy_builders import HOUR, T0, cluster, job, policy

from advisor.model import ActionKind, CheckpointState, ClusterQueueView, WorkloadView
from policies import decide
from policies.victims import can_be_preempted, first_in_line, predict_victims


def _wl(
    name: str, prio: int, cq: str = "cq", *, admitted: bool = True, at: float = T0 - HOUR, uid: str = ""
) -> WorkloadView:
    return WorkloadView(
        namespace="team-a",
        name=name,
        cluster_queue=cq,
        gpus=8,
        priority=prio,
        admitted=admitted,
        admitted_at=at if admitted else None,
        created_at=None if admitted else T0 - 60,
        job=f"team-a/{name}",
        uid=uid,
    )


def _cq(name: str = "cq", *, usage: int = 16, nominal: int = 16, **kw: object) -> ClusterQueueView:
    return ClusterQueueView(name=name, nominal_gpus=nominal, usage_gpus=usage, cohort="c", **kw)  # type: ignore[arg-type]


def test_within_queue_lower_priority_reaches_only_below_the_top_priority_in_use() -> None:
    top, low = _wl("ft-1", 1000), _wl("low", 0)
    c = cluster([_cq(within_cluster_queue="LowerPriority")], [top, low])
    assert not can_be_preempted(c, top)
    assert can_be_preempted(c, low)
    # all equal: a higher priority may still arrive, so it counts as reachable
    eq = cluster([_cq(within_cluster_queue="LowerPriority")], [_wl("a", 0), _wl("b", 0)])
    assert can_be_preempted(eq, _wl("a", 0))
    newer = cluster([_cq(within_cluster_queue="LowerOrNewerEqualPriority")], [top, low])
    assert can_be_preempted(newer, top)
    never = cluster([_cq()], [top, low])
    assert not can_be_preempted(never, low)


def test_cohort_reclamation_reaches_only_a_borrowing_queue() -> None:
    me, other = _wl("ft-1", 1000), _wl("x", 0, "other")
    lender = _cq("other", usage=0, reclaim_within_cohort="Any")
    borrowing = cluster([_cq(usage=24), lender], [me, other])
    within_quota = cluster([_cq(usage=16), lender], [me, other])
    assert can_be_preempted(borrowing, me)
    assert not can_be_preempted(within_quota, me)
    # ... but it may start borrowing any moment: for a periodic interval it counts as reachable,
    # unless its queue cannot borrow at all
    assert can_be_preempted(within_quota, me, as_it_stands=False)
    no_borrowing = cluster([_cq(usage=16, borrowing_limit=0), lender], [me, other])
    assert not can_be_preempted(no_borrowing, me, as_it_stands=False)
    # LowerPriority reclamation cannot take the top priority in use, even from a borrower
    strict = cluster(
        [_cq(usage=24), _cq("other", usage=0, reclaim_within_cohort="LowerPriority")], [me, other]
    )
    assert not can_be_preempted(strict, me)
    assert not can_be_preempted(cluster([_cq()], []), _wl("ghost", 0, "nowhere"))


def test_a_workload_nothing_can_evict_keeps_the_calm_interval() -> None:
    p = policy({"checkpoint": {"minInterval": "10m", "maxInterval": "4h"}})
    j = job(checkpoint=CheckpointState(last_time=T0 - 2 * HOUR, cost_seconds=30.0), priority=1000)
    spot = {"cq": 1 / HOUR}
    safe = cluster(
        [_cq(within_cluster_queue="LowerPriority")], [_wl("ft-1", 1000), _wl("low", 0)], preemption_rate=spot
    )
    exposed = cluster(
        [_cq(within_cluster_queue="LowerPriority")], [_wl("ft-1", 0), _wl("hi", 1000)], preemption_rate=spot
    )
    assert decide(j, safe, p, now=T0).actions == ()
    d = decide(j, exposed, p, now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.CHECKPOINT]
    # past maxInterval even the safe one saves (node failures still happen)
    late = job(
        checkpoint=CheckpointState(last_time=T0 - 5 * HOUR, cost_seconds=30.0),
        priority=1000,
        started_at=T0 - 6 * HOUR,
    )
    safe_for_long = cluster(
        [_cq(within_cluster_queue="LowerPriority")],
        [_wl("ft-1", 1000, at=T0 - 6 * HOUR), _wl("low", 0)],
        preemption_rate=spot,
    )
    d = decide(late, safe_for_long, p, now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.CHECKPOINT]
    assert "no preemption can reach it" in d.actions[0].reason
    assert d.actions[0].params["interval_s"] == pytest.approx(4 * HOUR)


def test_the_guard_leaves_alone_a_first_in_line_workload_nothing_can_evict() -> None:
    p = policy({"preemptionGuard": {"staleAfter": "10m", "likelyVictims": True, "likelyHazardPerHour": 0.01}})
    j = job(checkpoint=CheckpointState(last_time=T0 - 2 * HOUR, cost_seconds=30.0))
    q = _cq(within_cluster_queue="LowerPriority")
    # first (and only) in line on a queue that evicts often, but at the top priority in use
    alone = cluster([q], [_wl("ft-1", 1000), _wl("low", 0, admitted=False)], preemption_rate={"cq": 1 / HOUR})
    assert decide(j, alone, p, now=T0).actions == ()
    below = cluster([q], [_wl("ft-1", 0), _wl("hi", 1000, admitted=False)], preemption_rate={"cq": 1 / HOUR})
    assert ActionKind.CHECKPOINT in [a.kind for a in decide(j, below, p, now=T0).actions]


def test_a_fresh_checkpoint_asks_for_a_tick_when_it_turns_stale() -> None:
    p = policy({"preemptionGuard": {"staleAfter": "10m", "standingBoost": 1, "likelyVictims": False}})
    q = ClusterQueueView(name="cq", nominal_gpus=16, usage_gpus=16, within_cluster_queue="LowerPriority")
    c = cluster(
        [q], [_wl("ft-1", 0), _wl("peer", 0)], preemption_rate={"cq": 0.5 / HOUR}, priority_boost_enabled=True
    )
    fresh = job(checkpoint=CheckpointState(last_time=T0 - 4 * 60, cost_seconds=30.0))
    d = decide(fresh, c, p, now=T0)
    assert d.actions == ()
    assert d.recheck_at == pytest.approx(T0 - 4 * 60 + 600)
    stale = job(checkpoint=CheckpointState(last_time=T0 - 40 * 60, cost_seconds=30.0))
    assert [a.kind for a in decide(stale, c, p, now=T0).actions] == [ActionKind.BOOST_PRIORITY]


def test_workloads_admitted_in_the_same_second_are_ordered_by_uid_as_kueue_orders_them() -> None:
    """A platform trial's sweep: v1, v2 and v3 at one priority, admitted in the same second, and
    a high-priority workload pending that needs one of them out. Kueue's ``CandidatesOrdering``
    breaks the tie by Workload UID; the predictor broke it by name, checkpointed v2, and Kueue
    preempted v3 (its whole run lost)."""

    runs = [_wl("v2", 100, uid="e4b768d0-0000"), _wl("v3", 100, uid="b6e64748-0000")]
    urgent = _wl("h2", 1000, admitted=False)
    c = cluster([_cq(usage=16, within_cluster_queue="LowerPriority")], [*runs, urgent])
    assert [w.name for w in predict_victims(c)] == ["v3"]
    assert [w.name for w in first_in_line(c)] == ["v3"]
