"""The preemption guard's standing priority boost: on while a checkpoint is stale, off once fresh.

Kueue orders preemption candidates by effective priority (priority + boost) before admission time,
so a boost on every stale equal makes Kueue pick a freshly checkpointed one; the boost must stay
below the gap to any higher priority, or it would exempt instead of reorder.
"""

from __future__ import annotations

import dataclasses

from policy_builders import HOUR, T0, cluster, job, policy, record

from advisor.model import ActionKind, CheckpointState, ClusterQueueView, ClusterView, JobView, WorkloadView
from policies import decide

GUARD = {"staleAfter": "10m", "standingBoost": 1, "likelyVictims": False}


def _wl(
    name: str, prio: int = 0, *, admitted: bool = True, at: float = T0 - HOUR, boost: int = 0
) -> WorkloadView:
    return WorkloadView(
        namespace="ns",
        name=name,
        cluster_queue="cq",
        gpus=8,
        priority=prio,
        admitted=admitted,
        admitted_at=at if admitted else None,
        priority_boost=boost,
        job=f"ns/{name}",
    )


def _spot(
    *,
    within: str = "LowerPriority",
    others: tuple[WorkloadView, ...] = (),
    me: WorkloadView | None = None,
    rate_per_h: float = 0.5,
    gate: bool = True,
) -> ClusterView:
    q = ClusterQueueView(name="cq", nominal_gpus=16, usage_gpus=16, within_cluster_queue=within)
    return cluster(
        [q],
        [me or _wl("ft-1"), _wl("peer", at=T0 - 2 * HOUR), *others],
        preemption_rate={"cq": rate_per_h / HOUR},
        priority_boost_enabled=gate,
    )


def _job(ckpt_age_s: float, **kw: object) -> JobView:
    return job(
        namespace="ns",
        name="ft-1",
        checkpoint=CheckpointState(last_time=T0 - ckpt_age_s, cost_seconds=30.0),
        **kw,
    )


def _kinds(j: JobView, c: ClusterView, rules: dict[str, object] | None = None) -> list[ActionKind]:
    return [a.kind for a in decide(j, c, policy({"preemptionGuard": rules or GUARD}), now=T0).actions]


def test_a_stale_running_job_on_a_preemptible_queue_carries_the_boost() -> None:
    d = decide(_job(40 * 60), _spot(), policy({"preemptionGuard": GUARD}), now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.BOOST_PRIORITY]
    a = d.actions[0]
    assert a.params["boost"] == 1 and a.params["standing"] is True
    # a standing boost protects work; it does not name a victim
    assert a.params["predicted_victim"] is False
    assert "40m" in a.reason and "freshly checkpointed" in a.reason
    assert _kinds(_job(5 * 60), _spot()) == []  # fresh: nothing to protect


def test_the_boost_is_dropped_once_the_checkpoint_is_fresh_and_not_repeated() -> None:
    boosted = (record(ActionKind.BOOST_PRIORITY, T0 - HOUR, rule="preemption-guard", outcome="done"),)
    me = _wl("ft-1", boost=1)
    # still stale: the boost stays, nothing is written again
    assert _kinds(_job(40 * 60, actions=boosted), _spot(me=me)) == []
    d = decide(_job(60, actions=boosted), _spot(me=me), policy({"preemptionGuard": GUARD}), now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.DROP_BOOST]
    assert "checkpoint fresh" in d.actions[0].reason and d.actions[0].params["predicted_victim"] is False
    # the drop is on its way (the view still shows the boost): not asked for twice
    dropped = (*boosted, record(ActionKind.DROP_BOOST, T0 - 5, rule="preemption-guard", rid="r2"))
    assert _kinds(_job(60, actions=dropped), _spot(me=me)) == []
    # stale again after the drop: boosted again
    assert _kinds(_job(40 * 60, actions=dropped), _spot()) == [ActionKind.BOOST_PRIORITY]


def test_a_preempted_workload_does_not_keep_its_boost_in_the_queue() -> None:
    boosted = (record(ActionKind.BOOST_PRIORITY, T0 - HOUR, rule="preemption-guard", outcome="done"),)
    pending = _wl("ft-1", admitted=False, boost=1)
    j = _job(40 * 60, actions=boosted, admitted=False)
    d = decide(j, _spot(me=pending), policy({"preemptionGuard": GUARD}), now=T0)
    # a boosted pending workload would jump its equals and could even preempt them (LowerPriority)
    assert [a.kind for a in d.actions] == [ActionKind.DROP_BOOST] and "not admitted" in d.actions[0].reason


def test_staleness_counts_from_the_last_admission_too() -> None:
    # readmitted a minute ago from an old checkpoint: it has nothing to lose yet
    me = _wl("ft-1", at=T0 - 60)
    assert _kinds(_job(3 * HOUR), _spot(me=me)) == []
    assert _kinds(_job(3 * HOUR), _spot()) == [ActionKind.BOOST_PRIORITY]


def test_the_boost_stays_below_the_gap_to_any_higher_priority() -> None:
    rules = {**GUARD, "standingBoost": 5}
    # a priority-3 workload in the cohort: boost 5 would lift the job above it; 2 only reorders
    c = _spot(others=(_wl("hi", 3, admitted=False),))
    d = decide(_job(40 * 60), c, policy({"preemptionGuard": rules}), now=T0)
    # (it is also the predicted victim of that pending workload: checkpointed as well)
    assert [a.kind for a in d.actions] == [ActionKind.BOOST_PRIORITY, ActionKind.CHECKPOINT]
    assert d.actions[0].params["boost"] == 2
    # a gap of 1 leaves no room: no standing boost (and nothing pending-predictable either)
    assert _kinds(_job(40 * 60), _spot(others=(_wl("next", 1, at=T0 - 3 * HOUR),)), rules) == []
    # without any higher priority in sight the configured value is used
    d = decide(_job(40 * 60), _spot(), policy({"preemptionGuard": rules}), now=T0)
    assert d.actions[0].params["boost"] == 5


def test_no_standing_boost_where_it_would_exempt_or_protect_nothing() -> None:
    stale = _job(40 * 60)
    # equal priorities preempt each other here: a boost would exempt the job, not reorder it
    assert _kinds(stale, _spot(within="LowerOrNewerEqualPriority")) == []
    # nothing can preempt on this queue
    assert _kinds(stale, _spot(within="Never")) == []
    # the observed eviction rate is below likelyHazardPerHour
    assert _kinds(stale, _spot(rate_per_h=0.01)) == []
    # turned off in the policy
    assert _kinds(stale, _spot(), {**GUARD, "standingBoost": 0}) == []


def test_without_the_priority_boost_gate_the_guard_falls_back() -> None:
    stale = _job(40 * 60)
    assert _kinds(stale, _spot(gate=False)) == []
    # the fallback still checkpoints a predicted victim of a pending workload, without a boost
    hi = _wl("hi", 100, admitted=False)
    c = _spot(gate=False, others=(hi,))
    assert _kinds(stale, c) == [ActionKind.CHECKPOINT]
    # with the gate on, the same victim carries the standing boost and gets its checkpoint
    c_on = _spot(others=(hi,))
    assert _kinds(stale, c_on) == [ActionKind.BOOST_PRIORITY, ActionKind.CHECKPOINT]


def test_without_an_observed_rate_the_policy_default_hazard_decides() -> None:
    c = dataclasses.replace(_spot(), preemption_rate={})
    rules = {"preemptionGuard": GUARD, "checkpoint": {"defaultHazardPerHour": 0.1, "minInterval": "1h"}}
    stale = _job(40 * 60)
    assert [a.kind for a in decide(stale, c, policy(rules), now=T0).actions] == [ActionKind.BOOST_PRIORITY]
    calm = {**rules, "checkpoint": {"defaultHazardPerHour": 0.01, "minInterval": "1h"}}
    assert decide(stale, c, policy(calm), now=T0).actions == ()


def test_recommend_mode_only_says_it_would_boost() -> None:
    d = decide(_job(40 * 60), _spot(), policy({"preemptionGuard": GUARD}, mode="Recommend"), now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.RECOMMEND]
    assert d.actions[0].params["would"] == ActionKind.BOOST_PRIORITY.value
    assert d.actions[0].reason.startswith("would set a standing priority boost of 1")


def test_a_verified_saver_is_left_to_be_the_victim_and_a_broken_one_is_shielded() -> None:
    # 1 s steps, 20 s saves, 60 s of grace: a save on SIGTERM fits; what it did on past evictions
    # says whether it works. Checkpoint 40 minutes old on a preemptible queue.
    fits = {"throughput": ((1, 1.0),), "grace_period_s": 60.0}
    verified = CheckpointState(last_time=T0 - 40 * 60, cost_seconds=30.0, save_seconds=20.0, sigterm_saves=4)
    assert _kinds(job(namespace="ns", name="ft-1", checkpoint=verified, **fits), _spot()) == []
    broken = dataclasses.replace(verified, sigterm_saves=1, sigterm_misses=2)  # misses with p=0.75
    d = decide(
        job(namespace="ns", name="ft-1", checkpoint=broken, **fits),
        _spot(),
        policy({"preemptionGuard": GUARD}),
        now=T0,
    )
    assert [a.kind for a in d.actions] == [ActionKind.BOOST_PRIORITY]
    assert "expected lost" in d.actions[0].reason
    # a verified saver's boost from before is dropped: it loses little whenever it is evicted
    boosted = (record(ActionKind.BOOST_PRIORITY, T0 - HOUR, rule="preemption-guard", outcome="done"),)
    again = job(namespace="ns", name="ft-1", checkpoint=verified, actions=boosted, **fits)
    assert _kinds(again, _spot(me=_wl("ft-1", boost=1))) == [ActionKind.DROP_BOOST]


def test_a_boost_another_writer_set_is_neither_dropped_nor_overwritten() -> None:
    """An admin boosted the workload by hand (7; no boost in the advisor's action log): in Apply
    mode the guard neither removes it, nor lowers it to its own standing 1, nor drops it once the
    checkpoint is fresh; the reasons say it is left alone. The advisor's own boost still goes."""
    theirs = _wl("ft-1", boost=7)
    for age in (40 * 60, 5 * 60):  # stale (the guard would boost) and fresh (it would drop)
        d = decide(_job(age), _spot(me=theirs), policy({"preemptionGuard": GUARD}), now=T0)
        assert [a.kind for a in d.actions] == [] and d.cleanup == ()
        assert any("priority boost of 7 the advisor did not set: left alone" in r for r in d.reasons)
    # back in the queue (not admitted) under Apply: still not the advisor's to drop
    queued = _wl("ft-1", boost=7, admitted=False)
    d = decide(_job(40 * 60, admitted=False), _spot(me=queued), policy({"preemptionGuard": GUARD}), now=T0)
    assert ActionKind.DROP_BOOST not in [a.kind for a in (*d.actions, *d.cleanup)]
    # the advisor's own boost (its record says it wrote 1, and 1 is there) is dropped once fresh
    own = (record(ActionKind.BOOST_PRIORITY, T0 - HOUR, rule="preemption-guard", outcome="done"),)
    mine = _wl("ft-1", boost=1)
    assert _kinds(_job(5 * 60, actions=own), _spot(me=mine)) == [ActionKind.DROP_BOOST]
