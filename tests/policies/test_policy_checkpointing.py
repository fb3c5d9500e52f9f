"""Young/Daly intervals, periodic checkpoints, and the preemption guard with Kueue's victim order."""

from __future__ import annotations

import dataclasses
import math

import pytest
from policy_builders import HOUR, T0, cluster, job, policy, record

from advisor.model import ActionKind, CheckpointState, ClusterQueueView, WorkloadView
from policies import checkpoint_interval, decide, predict_victims, young_interval


@pytest.mark.parametrize(("mtbf_h", "minutes"), [(24, 116.7), (6, 56.7), (0.25, 9.1)])
def test_daly_matches_the_worked_examples(mtbf_h: float, minutes: float) -> None:
    # ../shared/reference/forecasting-and-checkpointing.md §8: C = 5 min
    assert checkpoint_interval(300, 1 / (mtbf_h * HOUR)) / 60 == pytest.approx(minutes, abs=0.05)


def test_young_daly_edges_and_bad_input() -> None:
    assert young_interval(300, 1 / (24 * HOUR)) == pytest.approx(120 * 60)
    assert checkpoint_interval(60, 0.0) == math.inf
    assert checkpoint_interval(0, 1e-4) == 0.0
    assert checkpoint_interval(7200, 1 / 3600) == 3600  # C >= 2M: interval = M
    for bad in ((-1, 1e-4), (60, -1), (math.nan, 1e-4), (60, math.inf)):
        with pytest.raises(ValueError):
            checkpoint_interval(*bad)


def test_a_preemptible_queue_checkpoints_more_often_than_a_calm_one() -> None:
    p = policy({"checkpoint": {"minInterval": "1m", "maxInterval": "12h"}})
    j = job(checkpoint=CheckpointState(last_time=T0 - 40 * 60, cost_seconds=30.0))
    calm = cluster(preemption_rate={"cq": 1 / (7 * 24 * HOUR)})
    spot = cluster(preemption_rate={"cq": 1 / HOUR})
    assert [a.kind for a in decide(j, calm, p, now=T0).actions] == []
    d = decide(j, spot, p, now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.CHECKPOINT]
    assert d.actions[0].params["interval_s"] == pytest.approx(checkpoint_interval(30, 1 / HOUR))
    assert "MTBF 1h" in d.actions[0].reason


def test_periodic_checkpoints_wait_for_a_pending_one_and_respect_bounds() -> None:
    p = policy({"checkpoint": {"minInterval": "10m", "maxInterval": "1h"}})
    old = CheckpointState(last_time=T0 - 2 * HOUR, cost_seconds=30.0)
    assert [a.kind for a in decide(job(checkpoint=old), cluster(), p, now=T0).actions] == [
        ActionKind.CHECKPOINT
    ]
    pending = dataclasses.replace(old, pending_request="ck", pending_since=T0 - 5)
    assert decide(job(checkpoint=pending), cluster(), p, now=T0).actions == ()
    # hazard so high that Daly says 1 minute: clamped to the 10 minute floor
    recent = CheckpointState(last_time=T0 - 5 * 60, cost_seconds=1.0)
    assert decide(job(checkpoint=recent), cluster(preemption_rate={"cq": 1 / 60}), p, now=T0).actions == ()


def test_a_job_admitted_again_after_its_checkpoint_has_nothing_to_save_until_it_runs() -> None:
    """Evicted and admitted again, a job resumed from its last checkpoint: the periodic interval and
    the guard's staleness count from the admission, not from that checkpoint."""
    p = policy(
        {
            "checkpoint": {"minInterval": "10m", "maxInterval": "1h"},
            "preemptionGuard": {"staleAfter": "10m", "likelyHazardPerHour": 0.1},
        }
    )
    q = ClusterQueueView(name="cq", nominal_gpus=16, usage_gpus=16, within_cluster_queue="LowerPriority")
    saved = CheckpointState(last_time=T0 - 2 * HOUR, cost_seconds=30.0)
    for admitted_ago, due in ((5 * 60, False), (2 * HOUR, True)):
        c = cluster([q], [wl("ft-1", "cq", 8, 0, at=T0 - admitted_ago)], preemption_rate={"cq": 1 / HOUR})
        j = job(namespace="ns", name="ft-1", checkpoint=saved, admitted_at=T0 - admitted_ago)
        d = decide(j, c, p, now=T0)
        assert [a.kind for a in d.actions] == ([ActionKind.CHECKPOINT] if due else []), admitted_ago
    # an adapter that does not say when it admitted the job: the snapshot's Workload says it
    c = cluster([q], [wl("ft-1", "cq", 8, 0, at=T0 - 5 * 60)], preemption_rate={"cq": 1 / HOUR})
    assert decide(job(namespace="ns", name="ft-1", checkpoint=saved), c, p, now=T0).actions == ()


# --- victim prediction ---------------------------------------------------------------------------


def wl(
    name: str,
    cq: str,
    gpus: int,
    prio: int = 0,
    *,
    admitted: bool = True,
    at: float = 0.0,
    boost: int = 0,
    created: float = 0.0,
) -> WorkloadView:
    return WorkloadView(
        namespace="ns",
        name=name,
        cluster_queue=cq,
        gpus=gpus,
        priority=prio,
        admitted=admitted,
        admitted_at=at if admitted else None,
        created_at=created,
        priority_boost=boost,
        job=f"ns/{name}",
    )


def test_within_queue_lowest_priority_then_most_recently_admitted_is_evicted() -> None:
    q = ClusterQueueView(name="cq", nominal_gpus=16, usage_gpus=16, within_cluster_queue="LowerPriority")
    c = cluster(
        [q],
        [
            wl("old-low", "cq", 8, 1, at=100),
            wl("new-low", "cq", 4, 1, at=200),
            wl("mid", "cq", 4, 5, at=50),
            wl("urgent", "cq", 4, 10, admitted=False),
        ],
    )
    assert [w.name for w in predict_victims(c)] == ["new-low"]
    big = cluster([q], [*c.workloads[:3], wl("urgent", "cq", 12, 10, admitted=False)])
    # greedy: new-low (4), old-low (8) → fits; the reverse pass keeps both
    assert [w.name for w in predict_victims(big)] == ["new-low", "old-low"]


def test_boost_equal_priority_and_policies_that_forbid_preemption() -> None:
    q = ClusterQueueView(name="cq", nominal_gpus=8, usage_gpus=8, within_cluster_queue="LowerPriority")
    c = cluster(
        [q],
        [
            wl("a", "cq", 4, 1, at=1),
            wl("b", "cq", 4, 1, at=2, boost=100),
            wl("p", "cq", 4, 50, admitted=False),
        ],
    )
    assert [w.name for w in predict_victims(c)] == ["a"]  # b's boost lifts it above the preemptor
    never = dataclasses.replace(q, within_cluster_queue="Never")
    assert predict_victims(cluster([never], list(c.workloads))) == []
    equal = cluster([q], [wl("a", "cq", 8, 5, at=1), wl("p", "cq", 4, 5, admitted=False)])
    assert predict_victims(equal) == []
    newer = dataclasses.replace(q, within_cluster_queue="LowerOrNewerEqualPriority")
    eq2 = cluster(
        [newer], [wl("a", "cq", 8, 5, at=1, created=10), wl("p", "cq", 4, 5, admitted=False, created=5)]
    )
    assert [w.name for w in predict_victims(eq2)] == ["a"]


def test_reclaim_within_cohort_takes_from_borrowers_in_other_queues_first() -> None:
    mine = ClusterQueueView(
        name="mine",
        cohort="co",
        nominal_gpus=8,
        usage_gpus=4,
        reclaim_within_cohort="Any",
        within_cluster_queue="LowerPriority",
    )
    other = ClusterQueueView(name="other", cohort="co", nominal_gpus=8, usage_gpus=12)
    c = cluster(
        [mine, other],
        [
            wl("mine-low", "mine", 4, 0, at=5),
            wl("o1", "other", 8, 9, at=1),
            wl("o2", "other", 4, 9, at=3),
            wl("p", "mine", 4, 1, admitted=False),
        ],
    )
    # mine has 4 of its nominal unused, but "other" borrows exactly those 4: reclaim them, newest first
    assert [w.name for w in predict_victims(c)] == ["o2"]


def test_a_pending_workload_that_fits_takes_free_quota_and_evicts_nobody() -> None:
    q = ClusterQueueView(name="cq", nominal_gpus=16, usage_gpus=8, within_cluster_queue="LowerPriority")
    c = cluster(
        [q],
        [
            wl("run", "cq", 8, 0, at=1),
            wl("p1", "cq", 8, 5, admitted=False, created=1),
            wl("p2", "cq", 8, 5, admitted=False, created=2),
        ],
    )
    assert [w.name for w in predict_victims(c)] == ["run"]  # p1 takes the free 8, p2 then needs "run"


def test_a_head_that_fits_without_borrowing_goes_before_an_older_one_that_must_borrow() -> None:
    """Kueue's cycle sorts the ClusterQueues' heads: one that fits within its nominal quota first,
    then priority, then age. In a (priority, age) order the older borrowing head took the cohort's
    free GPUs in the play, and the other queue's head "preempted" for quota Kueue gives it free."""
    a = ClusterQueueView(name="a", cohort="co", nominal_gpus=8, usage_gpus=8, reclaim_within_cohort="Any")
    b = ClusterQueueView(
        name="b",
        cohort="co",
        nominal_gpus=8,
        usage_gpus=4,
        reclaim_within_cohort="Any",
        within_cluster_queue="LowerPriority",
    )
    c = cluster(
        [a, b],
        [
            wl("a-run", "a", 8, 0, at=1),
            wl("b-run", "b", 4, 0, at=2),
            wl("a-old", "a", 4, 0, admitted=False, created=1),  # must borrow b's 4 free GPUs
            wl("b-new", "b", 4, 0, admitted=False, created=2),  # fits in b's own nominal quota
        ],
    )
    # b-new takes its own 4 GPUs first; a-old then finds nothing to borrow and preempts nobody
    assert predict_victims(c) == []


def test_a_workload_admitted_in_the_play_is_reclaimed_before_a_running_one_and_not_named() -> None:
    """A reclaiming queue later in the pass takes the most recently admitted borrower: one just
    admitted in the same pass, not the running one. It was not running, so it is no victim to
    warn, and the running workload is not named either."""
    a = ClusterQueueView(name="a", cohort="co", nominal_gpus=8, usage_gpus=4)
    b = ClusterQueueView(name="b", cohort="co", nominal_gpus=8, usage_gpus=4, reclaim_within_cohort="Any")
    c = cluster(
        [a, b],
        [
            wl("a-run", "a", 4, 0, at=1),
            wl("b-run", "b", 4, 0, at=1),
            wl("a-head", "a", 4, 0, admitted=False, created=1),  # within a's nominal quota
            wl("a-second", "a", 4, 0, admitted=False, created=2),  # borrows the cohort's last 4
            wl("b-head", "b", 4, 0, admitted=False, created=3),  # within b's quota: reclaims
        ],
    )
    # the pass scans a through (a-head, then a-second borrowing), then b-head reclaims from a's
    # borrowers, newest first: a-second, admitted in the play, not a-run
    assert predict_victims(c) == []
    running_borrower = cluster(
        [dataclasses.replace(a, usage_gpus=12), b],
        [
            wl("a-run", "a", 8, 0, at=1),
            wl("a-borrow", "a", 4, 0, at=2),
            wl("b-run", "b", 4, 0, at=1),
            wl("b-head", "b", 4, 0, admitted=False, created=3),
        ],
    )
    assert [w.name for w in predict_victims(running_borrower)] == ["a-borrow"]  # the rule itself


def test_by_default_only_the_head_preemptor_of_each_queue_is_played_out() -> None:
    q = ClusterQueueView(name="cq", nominal_gpus=16, usage_gpus=16, within_cluster_queue="LowerPriority")
    c = cluster(
        [q],
        [
            wl("a", "cq", 8, 0, at=1),
            wl("b", "cq", 8, 0, at=2),
            wl("p1", "cq", 8, 5, admitted=False, created=1),
            wl("p2", "cq", 8, 5, admitted=False, created=2),
        ],
    )
    assert [w.name for w in predict_victims(c)] == ["b"]
    assert [w.name for w in predict_victims(c, per_queue=None)] == ["b", "a"]


# --- the guard -----------------------------------------------------------------------------------


def _guarded(boost_gate: bool = True, **job_kw: object):
    q = ClusterQueueView(name="cq", nominal_gpus=8, usage_gpus=8, within_cluster_queue="LowerPriority")
    c = cluster(
        [q],
        [wl("ft-1", "cq", 8, 0, at=T0 - HOUR), wl("hi", "cq", 8, 100, admitted=False)],
        priority_boost_enabled=boost_gate,
    )
    j = job(namespace="ns", name="ft-1", **job_kw)
    return j, c


def test_a_likely_victim_with_a_stale_checkpoint_is_boosted_and_checkpointed() -> None:
    p = policy({"preemptionGuard": {"staleAfter": "15m", "boost": 500}})
    j, c = _guarded(checkpoint=CheckpointState(last_time=T0 - 40 * 60))
    d = decide(j, c, p, now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.BOOST_PRIORITY, ActionKind.CHECKPOINT]
    assert d.actions[0].params["boost"] == 500 and "likely next preemption victim" in d.actions[1].reason
    j2, c2 = _guarded(boost_gate=False, checkpoint=CheckpointState(last_time=T0 - 40 * 60))
    assert [a.kind for a in decide(j2, c2, p, now=T0).actions] == [ActionKind.CHECKPOINT]
    fresh, c3 = _guarded(checkpoint=CheckpointState(last_time=T0 - 60))
    assert decide(fresh, c3, p, now=T0).actions == ()
    rec = decide(j, c, policy({"preemptionGuard": {}}, mode="Recommend"), now=T0)
    assert [a.kind for a in rec.actions] == [
        ActionKind.RECOMMEND
    ] and "boost priority + checkpoint" in rec.actions[0].reason


def test_the_boost_is_dropped_on_acknowledgement_or_timeout_and_only_once() -> None:
    p = policy({"preemptionGuard": {"dropAfter": "10m"}})
    boosted = (record(ActionKind.BOOST_PRIORITY, T0 - 120, rule="preemption-guard", outcome="done"),)
    waiting, c = _guarded(
        actions=boosted, checkpoint=CheckpointState(last_time=T0 - HOUR, pending_request="x")
    )
    assert decide(waiting, c, p, now=T0).actions == ()
    acked, c = _guarded(actions=boosted, checkpoint=CheckpointState(last_time=T0 - 30))
    d = decide(acked, c, p, now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.DROP_BOOST] and "acknowledged" in d.actions[0].reason
    late, c = _guarded(actions=boosted, checkpoint=CheckpointState(last_time=T0 - HOUR, pending_request="x"))
    assert [a.kind for a in decide(late, c, p, now=T0 + 600).actions] == [ActionKind.DROP_BOOST]
    dropped = (*boosted, record(ActionKind.DROP_BOOST, T0, rule="preemption-guard", rid="r2"))
    done, c = _guarded(actions=dropped, checkpoint=CheckpointState(last_time=T0 - 30))
    assert decide(done, c, p, now=T0 + 5).actions == ()


def test_an_evicted_boosted_workload_loses_its_boost_at_once() -> None:
    """Back in the queue a boosted workload would outrank its equals: the guard drops the boost the
    moment the workload is evicted, not at ``dropAfter``."""
    p = policy({"preemptionGuard": {"dropAfter": "10m"}})
    boosted = (record(ActionKind.BOOST_PRIORITY, T0 - 120, rule="preemption-guard", outcome="done"),)
    j, c = _guarded(
        actions=boosted,
        admitted=False,
        checkpoint=CheckpointState(last_time=T0 - HOUR, pending_request="x"),
    )
    evicted = dataclasses.replace(
        c, workloads=tuple(dataclasses.replace(w, admitted=False, priority_boost=1000) for w in c.workloads)
    )
    d = decide(j, evicted, p, now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.DROP_BOOST] and "evicted" in d.actions[0].reason


def test_a_preemptor_that_must_borrow_preempts_in_the_cohort_only_with_borrow_within_cohort() -> None:
    def scenario(borrow: str, threshold: int | None = None) -> list[str]:
        mine = ClusterQueueView(
            name="mine",
            cohort="co",
            nominal_gpus=8,
            usage_gpus=8,
            reclaim_within_cohort="Any",
            borrow_within_cohort=borrow,
            borrow_max_priority_threshold=threshold,
        )
        other = ClusterQueueView(name="other", cohort="co", nominal_gpus=8, usage_gpus=12)
        lender = ClusterQueueView(name="lender", cohort="co", nominal_gpus=8, usage_gpus=0)
        c = cluster(
            [mine, other, lender],
            [
                wl("m", "mine", 8, 9, at=1),
                wl("o1", "other", 8, 9, at=1),
                wl("o2", "other", 4, 1, at=2),
                wl("p", "mine", 8, 5, admitted=False),
            ],
        )
        return [w.name for w in predict_victims(c)]

    assert scenario("LowerPriority") == ["o2"]  # 4 free in the cohort + o2's 4
    assert scenario("Never") == []  # reclaimWithinCohort alone does not apply while borrowing
    assert scenario("LowerPriority", threshold=0) == []  # o2's priority 1 is above the threshold


def test_first_in_line_follows_kueue_order_on_reachable_queues_only() -> None:
    from policies.victims import first_in_line

    spot = ClusterQueueView(name="spot", nominal_gpus=16, usage_gpus=16, within_cluster_queue="LowerPriority")
    calm = ClusterQueueView(name="calm", nominal_gpus=16, usage_gpus=16)  # nothing can preempt here
    c = cluster(
        [spot, calm],
        [
            wl("old", "spot", 8, 0, at=1),
            wl("new", "spot", 8, 0, at=2),
            wl("hi", "spot", 8, 5, at=3),
            wl("c", "calm", 8, 0, at=1),
        ],
    )
    assert [w.name for w in first_in_line(c)] == ["new"]
    assert [w.name for w in first_in_line(c, per_queue=2)] == ["new", "old"]


def test_the_first_in_line_on_an_evicting_queue_keeps_a_fresh_checkpoint_without_a_boost() -> None:
    q = ClusterQueueView(name="cq", nominal_gpus=16, usage_gpus=16, within_cluster_queue="LowerPriority")
    c = cluster(
        [q],
        [wl("ft-1", "cq", 8, 0, at=T0 - 30 * 60), wl("other", "cq", 8, 5, at=T0 - HOUR)],
        preemption_rate={"cq": 0.5 / HOUR},
        priority_boost_enabled=True,
    )
    p = policy({"preemptionGuard": {"staleAfter": "5m", "likelyHazardPerHour": 0.1}})
    # the hazard it faces: 0.5/h x 2 workloads = 1/h; Young/Daly for a 30 s checkpoint: 7.4 min (> 5m)
    j = job(
        namespace="ns", name="ft-1", checkpoint=CheckpointState(last_time=T0 - 20 * 60, cost_seconds=30.0)
    )
    d = decide(j, c, p, now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.CHECKPOINT]
    assert "first in Kueue's victim order on queue cq" in d.actions[0].reason
    fresh = dataclasses.replace(j, checkpoint=CheckpointState(last_time=T0 - 7 * 60, cost_seconds=30.0))
    kept = decide(fresh, c, p, now=T0)
    assert kept.actions == ()  # older than staleAfter, younger than its interval
    # the bound it is fresh within is said: the interval, not staleAfter (7m read as a mistake)
    assert any("last checkpoint 7m old (fresh: <= 7m25s)" in r for r in kept.reasons), kept.reasons
    # no cost reported: the checkpoint rule's defaultCost (10m: a 35 min interval), not 60 s
    unknown = dataclasses.replace(j, checkpoint=CheckpointState(last_time=T0 - 15 * 60))
    assert decide(unknown, c, p, now=T0).actions != ()  # 60 s assumed: a 10.9 min interval
    costly = policy(
        {
            "preemptionGuard": {"staleAfter": "5m", "likelyHazardPerHour": 0.1},
            "checkpoint": {"defaultCost": "10m"},
        }
    )
    assert decide(unknown, c, costly, now=T0).actions == ()
    calm = dataclasses.replace(c, preemption_rate={"cq": 0.01 / HOUR})
    assert decide(j, calm, p, now=T0).actions == ()
    off = policy({"preemptionGuard": {"likelyVictims": False}})
    assert decide(j, c, off, now=T0).actions == ()


def test_a_preemptor_that_would_borrow_also_tries_within_its_nominal_quota_as_kueue_does() -> None:
    # Kueue's classicalPreemptions with borrowWithinCohort Never and the queue under nominal: the
    # attempt without borrowing reclaims the cohort member's borrowed workload and preempts the
    # queue's own lower-priority one (played against minimalkueue: reclaim-while-under-nominal)
    mine = ClusterQueueView(
        name="mine",
        cohort="co",
        nominal_gpus=4,
        usage_gpus=2,
        within_cluster_queue="LowerPriority",
        reclaim_within_cohort="LowerPriority",
    )
    other = ClusterQueueView(name="other", cohort="co", nominal_gpus=4, usage_gpus=6)
    c = cluster(
        [mine, other],
        [
            wl("mine-low", "mine", 2, 0, at=0),
            wl("o1", "other", 4, 0, at=1),
            wl("o2", "other", 2, 0, at=2),
            wl("p", "mine", 4, 10, admitted=False),
        ],
    )
    assert sorted(w.name for w in predict_victims(c)) == ["mine-low", "o2"]


def test_the_checkpoint_reason_says_what_its_mtbf_rests_on() -> None:
    """A prior of 20 an hour read as an MTBF of 24 minutes four minutes later, with nothing to say
    that the queue's admitted time without an eviction had diluted it (a platform trial)."""
    p = policy({"checkpoint": {"minInterval": "1m", "maxInterval": "1h", "defaultHazardPerHour": 20}})
    old = CheckpointState(last_time=T0 - 2 * HOUR, cost_seconds=30.0)
    c = cluster(hazard_evidence={"cq": (1, 46 * 60.0)})
    (action,) = decide(job(checkpoint=old), c, p, now=T0).actions
    assert "(prior MTBF 3m; 1 interruption(s) in 46m admitted on the queue)" in action.reason, action.reason
    (bare,) = decide(job(checkpoint=old), cluster(), p, now=T0).actions
    assert "(prior MTBF 3m; no queue evidence)" in bare.reason


def test_a_low_priority_job_plans_for_the_evictions_of_its_priority_not_the_queues_pool() -> None:
    """A platform trial: a fresh low-priority job on a queue whose high-priority jobs held most of
    the admitted time untouched planned for the pooled rate (an MTBF of 24 minutes), and its first
    checkpoint came after 4m37s while its siblings were evicted every few minutes."""
    p = policy({"checkpoint": {"minInterval": "1m", "maxInterval": "1h", "defaultHazardPerHour": 20}})
    fresh = wl("low-1", "cq", 8, 0, at=T0)
    pooled = cluster(workloads=[fresh], hazard_evidence={"cq": (6, 10 * HOUR)})
    by_priority = cluster(
        workloads=[fresh],
        hazard_evidence={"cq": (6, 10 * HOUR)},
        priority_hazard_evidence={("cq", 100): (0, 9.5 * HOUR), ("cq", 0): (6, 0.5 * HOUR)},
    )
    # Young/Daly at a 30 s save: about 9 minutes at the pooled rate, 4 at the priority's
    five_minutes = job(checkpoint=CheckpointState(last_time=T0 - 300.0, cost_seconds=30.0))
    assert decide(five_minutes, pooled, p, now=T0).actions == ()
    (action,) = decide(five_minutes, by_priority, p, now=T0).actions
    assert action.kind is ActionKind.CHECKPOINT
    assert "6 in 30m at its priority 0" in action.reason, action.reason


def test_the_interval_is_planned_for_the_save_time_the_job_reports_not_the_requests_latency() -> None:
    """A platform trial: a job reporting 30 s saves (``last_checkpoint_seconds``) whose requests
    were answered within 2 s was planned for at a cost of 1-4 s, which pins the interval at
    ``minInterval`` and spends half its time saving. The save blocks training; the latency holds
    the wait for a safe point and the next report. Without a save time the latency stands in."""
    p = policy({"checkpoint": {"minInterval": "1m", "maxInterval": "4h", "defaultHazardPerHour": 2}})
    saves_30s = CheckpointState(last_time=T0 - 2 * HOUR, cost_seconds=2.0, save_seconds=30.0)
    (action,) = decide(job(checkpoint=saves_30s), cluster(), p, now=T0).actions
    assert "Young/Daly for cost 30s" in action.reason, action.reason
    latency_only = CheckpointState(last_time=T0 - 2 * HOUR, cost_seconds=2.0)
    (action,) = decide(job(checkpoint=latency_only), cluster(), p, now=T0).actions
    assert "Young/Daly for cost 2s" in action.reason, action.reason


def test_a_job_evicted_faster_than_its_interval_is_said_to_lose_its_work_at_each_eviction() -> None:
    """Below ``minInterval`` no periodic checkpoint comes in time for a job evicted every 70 s of
    running: the admin is told (a recommendation in both modes, under a rule name of its own), and
    a job evicted less often is not."""
    from policies.rules.checkpoint import EVICTED_FASTER

    p = policy({"checkpoint": {"minInterval": "10m", "maxInterval": "4h"}})
    view = job(checkpoint=CheckpointState(cost_seconds=30.0))
    queues = [ClusterQueueView(name="cq", nominal_gpus=8, usage_gpus=8, within_cluster_queue="LowerPriority")]

    def advice(interruptions: int, past: float) -> list[str]:
        evicted = dataclasses.replace(
            wl("ft-1-wl", "cq", 8, 0, at=T0 - 20.0),
            job=view.key,
            interruptions=interruptions,
            past_admitted_seconds=past,
        )
        # a higher-priority workload waiting on the queue: this one can be preempted
        pending = wl("hi", "cq", 8, 1000, admitted=False)
        out = decide(view, cluster(queues, [evicted, pending]), p, now=T0)
        return [a.reason for a in out.actions if a.rule == EVICTED_FASTER]

    (reason,) = advice(6, 400.0)
    assert "evicted 6 times in 7m admitted (one every 1m10s)" in reason, reason
    assert "checkpoint.minInterval" in reason
    assert advice(6, 6 * 3600.0) == []  # one every hour: the interval comes in time
    assert advice(1, 30.0) == []  # a single eviction is no pattern
