"""The core loop and the advisor's own writes: a boost on a job no policy governs is cleaned up,
and the action log never loses the record that says a boost is the advisor's own."""

from __future__ import annotations

from advisor.core import AdvisorCore
from advisor.core.codec import action_from_dict, action_to_dict
from advisor.core.loop import MAX_ACTIONS_KEPT
from advisor.model import ActionKind, ActionRecord, ClusterView, JobView, WorkloadView

T0 = 1_000_000.0
JOB = JobView(namespace="ml", name="run-1", gpus=8)


def _boost(time: float, value: int | None = 1) -> ActionRecord:
    return ActionRecord(
        ActionKind.BOOST_PRIORITY,
        time,
        f"boost-{time:g}",
        policy="gone",
        rule="preemption-guard",
        outcome="done",
        boost=value,
    )


def _cluster(boost: int) -> ClusterView:
    w = WorkloadView(
        namespace="ml",
        name="wl-run-1",
        cluster_queue="cq",
        gpus=8,
        admitted=True,
        priority_boost=boost,
        job=JOB.key,
    )
    return ClusterView(workloads=(w,))


def test_a_job_no_policy_governs_any_more_loses_the_advisors_own_boost() -> None:
    """The policy that boosted it was deleted (or stopped selecting it): no rule would drop it."""
    core = AdvisorCore()  # no policies
    core.record_action(JOB.key, _boost(T0 - 600))
    d = core.evaluate(JOB, _cluster(1), now=T0)
    assert d.policy is None and d.actions == ()
    assert [a.kind for a in d.cleanup] == [ActionKind.DROP_BOOST]
    assert "no AdvisorPolicy governs" in d.cleanup[0].reason
    # someone else's boost (none in the log) stays
    other = AdvisorCore()
    assert other.evaluate(JOB, _cluster(1), now=T0).cleanup == ()


def test_the_boost_record_outlives_the_trimming_of_the_action_log() -> None:
    core = AdvisorCore()
    core.record_action(JOB.key, _boost(T0))
    for i in range(2 * MAX_ACTIONS_KEPT):
        core.record_action(
            JOB.key, ActionRecord(ActionKind.CHECKPOINT, T0 + 1 + i, f"c{i}", outcome="acknowledged")
        )
    rec = core.record(JOB.key)
    assert rec is not None and len(rec.actions) == MAX_ACTIONS_KEPT
    assert (
        rec.actions[0].kind is ActionKind.BOOST_PRIORITY
        and rec.actions[-1].request_id == f"c{2 * MAX_ACTIONS_KEPT - 1}"
    )
    assert [a.kind for a in core.evaluate(JOB, _cluster(1), now=T0 + 1000).cleanup] == [ActionKind.DROP_BOOST]


def test_the_value_written_survives_a_restart() -> None:
    back = action_from_dict(action_to_dict(_boost(T0, 3)))
    assert back is not None and back.boost == 3
    old = action_to_dict(_boost(T0, None))
    assert "boost" not in old and (action_from_dict(old) or _boost(0.0)).boost is None
