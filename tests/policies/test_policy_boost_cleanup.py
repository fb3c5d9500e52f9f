"""The advisor's own priority boost is removed once its mandate ends (``policies.cleanup``).

Seen on a real cluster: a policy switched from Apply to Recommend said "would drop standing
priority boost" and left the annotation; a deleted policy and a finished job left it too, and with
Kueue's PriorityBoost gate those boosts kept reordering victims with no owner.
"""

from __future__ import annotations

import dataclasses

from policy_builders import HOUR, T0, cluster, job, policy, record

from advisor.model import (
    ActionKind,
    ActionRecord,
    CheckpointState,
    ClusterQueueView,
    ClusterView,
    JobView,
    LifecycleSignals,
    Phase,
    WorkloadView,
)
from advisor.protocol import DEFAULT_EXEMPT_LABEL
from policies import decide
from policies.cleanup import boost_cleanup, own_boost

GUARD = {"staleAfter": "10m", "standingBoost": 1, "likelyVictims": False}
BOOSTED = (
    dataclasses.replace(
        record(ActionKind.BOOST_PRIORITY, T0 - HOUR, rule="preemption-guard", outcome="done"), boost=1
    ),
)


def _spot(*, boost: int = 1, admitted: bool = True) -> ClusterView:
    me = WorkloadView(
        namespace="ns",
        name="ft-1",
        cluster_queue="cq",
        gpus=8,
        admitted=admitted,
        admitted_at=T0 - HOUR if admitted else None,
        priority_boost=boost,
        job="ns/ft-1",
    )
    q = ClusterQueueView(name="cq", nominal_gpus=16, usage_gpus=16, within_cluster_queue="LowerPriority")
    return cluster([q], [me], preemption_rate={"cq": 0.5 / HOUR}, priority_boost_enabled=True)


def _job(*, actions: tuple[ActionRecord, ...] = BOOSTED, **kw: object) -> JobView:
    # the checkpoint is fresh: the guard in Apply mode would drop its standing boost itself
    return job(
        namespace="ns",
        name="ft-1",
        checkpoint=CheckpointState(last_time=T0 - 60, cost_seconds=30.0),
        actions=actions,
        **kw,
    )


def _drops(d: object) -> list[str]:
    return [a.reason for a in getattr(d, "cleanup", ()) if a.kind is ActionKind.DROP_BOOST]


def test_a_policy_switched_to_recommend_removes_its_own_boost_instead_of_recommending_it() -> None:
    d = decide(_job(), _spot(), policy({"preemptionGuard": GUARD}, mode="Recommend"), now=T0)
    assert len(_drops(d)) == 1 and "Recommend mode" in _drops(d)[0]
    # the removal is done, not also recommended ("would drop standing priority boost")
    assert not [a for a in d.actions if a.params.get("would") == ActionKind.DROP_BOOST.value]


def test_an_apply_policy_without_the_guard_removes_the_boost_its_guard_had_set() -> None:
    d = decide(_job(), _spot(), policy({}), now=T0)
    assert len(_drops(d)) == 1 and "no preemptionGuard rule" in _drops(d)[0]
    # with the guard in Apply mode the rule itself decides (a drop action, no cleanup)
    d = decide(_job(), _spot(), policy({"preemptionGuard": GUARD}), now=T0)
    assert not _drops(d) and [a.kind for a in d.actions] == [ActionKind.DROP_BOOST]


def test_a_finished_or_failed_job_loses_the_boost_on_its_finished_workload() -> None:
    # the cluster snapshot leaves finished Workloads out: the job's view carries the annotation
    for signals, phase in (
        (LifecycleSignals(has_workload=True, workload_finished=True), Phase.FINISHED),
        (LifecycleSignals(failed=True), Phase.FAILED),
    ):
        finished = _job(signals=signals, phase=phase, workload_boost=1)
        for mode in ("Apply", "Recommend"):
            d = decide(finished, cluster(), policy({"preemptionGuard": GUARD}, mode=mode), now=T0)
            assert len(_drops(d)) == 1 and phase.value in _drops(d)[0], (phase, mode)
            assert d.actions == ()  # nothing is done to the job itself


def test_an_evicted_job_under_a_recommend_policy_loses_the_boost() -> None:
    evicted = _job(admitted=False, phase=Phase.PENDING, workload_boost=1)
    d = decide(evicted, _spot(admitted=False), policy({"preemptionGuard": GUARD}, mode="Recommend"), now=T0)
    assert len(_drops(d)) == 1


def test_an_exempted_job_loses_the_boost() -> None:
    d = decide(_job(labels={DEFAULT_EXEMPT_LABEL: "true"}), _spot(), policy({}), now=T0)
    assert d.advice == "exempt" and len(_drops(d)) == 1 and d.actions == ()


def test_a_boost_that_is_not_the_advisors_own_is_left_alone() -> None:
    rec = policy({"preemptionGuard": GUARD}, mode="Recommend")
    # nobody in the log set it
    assert not _drops(decide(_job(actions=()), _spot(), rec, now=T0))
    # another writer changed the value the advisor wrote
    assert own_boost(_job(), _spot(boost=5)) is None and not _drops(
        decide(_job(), _spot(boost=5), rec, now=T0)
    )
    # the advisor's last write was a drop (someone set it again since)
    dropped = (*BOOSTED, record(ActionKind.DROP_BOOST, T0 - 60, rule="preemption-guard", outcome="done"))
    assert not _drops(decide(_job(actions=dropped), _spot(), rec, now=T0))
    # the boost write failed: nothing was written
    failed = (dataclasses.replace(BOOSTED[0], outcome="failed"),)
    assert own_boost(_job(actions=failed), _spot()) is None
    # an older record without the value it wrote: the log alone says it is ours
    legacy = (dataclasses.replace(BOOSTED[0], boost=None),)
    assert own_boost(_job(actions=legacy), _spot(boost=7)) == 7


def test_a_failed_removal_is_retried_after_its_backoff_not_at_every_look() -> None:
    failed = (
        *BOOSTED,
        record(ActionKind.DROP_BOOST, T0 - 10, rule="preemption-guard", outcome="failed", rid="r2"),
    )
    j = _job(actions=failed)
    assert boost_cleanup(j, _spot(), T0, why="test") is None
    assert boost_cleanup(j, _spot(), T0 + HOUR, why="test") is not None
