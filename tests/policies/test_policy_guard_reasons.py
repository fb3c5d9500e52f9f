"""What the preemption guard's reasons say about the work at stake. The age it acts on counts from
the later of the last checkpoint and the current admission (``unsaved_since``): a job that never
checkpointed was told "last checkpoint 1m18s old", the time since its admission."""

from __future__ import annotations

from policy_builders import HOUR, T0, cluster, job, policy

from advisor.model import ActionKind, CheckpointState, ClusterQueueView, ClusterView, JobView, WorkloadView
from policies import decide

GUARD = {"staleAfter": "1m", "likelyVictims": False}


def _wl(name: str, prio: int, *, admitted_at: float | None) -> WorkloadView:
    return WorkloadView(
        namespace="team-a",
        name=name,
        cluster_queue="cq",
        gpus=8,
        priority=prio,
        admitted=admitted_at is not None,
        admitted_at=admitted_at,
        created_at=T0 - 60,
        job=f"team-a/{name}",
    )


def _victim_of_a_pending_one(admitted_ago: float) -> ClusterView:
    # a full queue that preempts lower priorities, and a higher-priority workload waiting: ft-1 is
    # the predicted victim
    q = ClusterQueueView(name="cq", nominal_gpus=8, usage_gpus=8, within_cluster_queue="LowerPriority")
    return cluster([q], [_wl("ft-1", 0, admitted_at=T0 - admitted_ago), _wl("hi", 100, admitted_at=None)])


def _reason(j: JobView, c: ClusterView, rules: dict[str, object] | None = None) -> str:
    d = decide(j, c, policy({"preemptionGuard": rules or GUARD}), now=T0)
    (reason,) = [a.reason for a in d.actions if a.kind is ActionKind.CHECKPOINT]
    return reason


def test_a_job_that_never_checkpointed_is_said_to_have_no_checkpoint() -> None:
    never = job(checkpoint=CheckpointState(cost_seconds=30.0), admitted_at=T0 - 78)
    reason = _reason(never, _victim_of_a_pending_one(78))
    assert "likely next preemption victim of a pending workload" in reason
    assert reason.endswith("; no checkpoint yet, 1m18s of work unsaved > 1m"), reason
    assert "last checkpoint" not in reason


def test_a_job_admitted_again_since_its_checkpoint_counts_from_the_resumption() -> None:
    resumed = job(
        checkpoint=CheckpointState(last_time=T0 - 2 * HOUR, cost_seconds=30.0), admitted_at=T0 - 600
    )
    reason = _reason(resumed, _victim_of_a_pending_one(600))
    assert reason.endswith("; 10m of work unsaved since it resumed from its last checkpoint (2h old) > 1m"), (
        reason
    )


def test_a_checkpoint_since_the_admission_is_named_by_its_age() -> None:
    saved = job(checkpoint=CheckpointState(last_time=T0 - 300, cost_seconds=30.0), admitted_at=T0 - HOUR)
    assert _reason(saved, _victim_of_a_pending_one(HOUR)).endswith("; last checkpoint 5m old > 1m")


def test_the_standing_boost_says_no_checkpoint_yet_too() -> None:
    q = ClusterQueueView(name="cq", nominal_gpus=16, usage_gpus=16, within_cluster_queue="LowerPriority")
    c = cluster(
        [q],
        [_wl("ft-1", 0, admitted_at=T0 - 78), _wl("peer", 0, admitted_at=T0 - HOUR)],
        preemption_rate={"cq": 0.5 / HOUR},
        priority_boost_enabled=True,
    )
    never = job(checkpoint=CheckpointState(cost_seconds=30.0), admitted_at=T0 - 78)
    rules = {"staleAfter": "1m", "standingBoost": 1, "likelyVictims": False}
    d = decide(never, c, policy({"preemptionGuard": rules}), now=T0)
    (boost,) = [a for a in d.actions if a.kind is ActionKind.BOOST_PRIORITY]
    assert "(no checkpoint yet, 1m18s of work unsaved > 1m)" in boost.reason, boost.reason
