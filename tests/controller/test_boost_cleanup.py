"""The controller removes the priority boost it set once its mandate ends, in any mode.

Seen on a real kube-apiserver + Kueue (PriorityBoost gate on): switching the policy Apply →
Recommend gave the Event "would drop standing priority boost: checkpoint fresh" and left
``kueue.x-k8s.io/priority-boost: 1`` on the Workload; deleting the policy left it, and so did a
finished job. Now one patch removes the annotation, and only the value the advisor wrote.
"""

from __future__ import annotations

from typing import Any

import pytest

from advisor.controller.engine import Engine
from advisor.controller.render import iso
from advisor.model import ActionKind, ActionRecord
from tests.controller.fakes import FakeApi, make_engine, trainjob, workload

T0 = 1_800_000_000.0
KEY = "team-a/llm"
WL = "team-a/trainjob-llm-abcde"
ANNOTATION = "kueue.x-k8s.io/priority-boost"
#: the guard in Apply mode keeps its boost for an hour while it waits for a checkpoint
GUARD = {"preemptionGuard": {"dropAfter": "1h", "standingBoost": 1, "likelyVictims": False}}


def _policy(mode: str, rules: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
        "kind": "AdvisorPolicy",
        "metadata": {"name": "guard", "generation": 1},
        "spec": {"mode": mode, "rules": GUARD if rules is None else rules},
    }


def _boosted_engine(
    *, mode: str = "Apply", value: str = "1", recorded: int | None = 1, finished: bool = False, **cfg: Any
) -> tuple[FakeApi, Engine]:
    """A running job whose Workload carries a boost, the advisor's own when ``recorded``."""
    api = FakeApi()
    wl = workload()
    wl["metadata"]["annotations"] = {ANNOTATION: value}
    if finished:
        wl["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded"})
    api.workloads[WL] = wl
    e = make_engine(api, **cfg)
    if recorded is not None:
        e.core.record_action(
            KEY,
            ActionRecord(
                ActionKind.BOOST_PRIORITY,
                T0 - 600,
                "boost-priority-0123456789",
                policy="guard",
                rule="preemption-guard",
                outcome="done",
                boost=recorded,
            ),
        )
    e.enqueue("policy", "ADDED", _policy(mode))
    e.enqueue("workload", "ADDED", wl)
    for i in range(3):
        e.enqueue("job", "MODIFIED", trainjob(step=10 * (i + 1), loss=1.0 / (i + 1), updated=iso(T0 + 5 * i)))
        e.step(T0 + 5 * i)
    return api, e


def _boost_left(api: FakeApi) -> str | None:
    return api.workloads[WL]["metadata"].get("annotations", {}).get(ANNOTATION)


def _dropped(api: FakeApi) -> list[str]:
    return [ev["message"] for ev in api.events if ev["reason"] == "PriorityBoostDropped"]


def test_switching_the_policy_to_recommend_removes_the_boost() -> None:
    api, e = _boosted_engine()
    assert _boost_left(api) == "1"  # the guard in Apply mode keeps it while its checkpoint is due
    e.enqueue("policy", "MODIFIED", _policy("Recommend"))
    e.step(T0 + 60)
    assert _boost_left(api) is None
    assert len(_dropped(api)) == 1 and "Recommend mode" in _dropped(api)[0]
    assert api.mutations() == [("set_priority_boost", "team-a", "trainjob-llm-abcde", None)]
    assert not [ev for ev in api.events if "would drop" in ev["message"]]
    e.step(T0 + 120)  # done once: the log says the last write was the drop
    assert len(_dropped(api)) == 1


def test_deleting_the_policy_removes_the_boost() -> None:
    api, e = _boosted_engine()
    assert _boost_left(api) == "1"
    e.enqueue("policy", "DELETED", _policy("Apply"))
    e.step(T0 + 60)
    assert _boost_left(api) is None and "no AdvisorPolicy governs" in _dropped(api)[0]


def test_recommend_only_still_removes_the_advisors_own_boost() -> None:
    """The safety rail withholds new actions; removing its own write never harms the job more than
    leaving it, so it is done."""
    api, e = _boosted_engine(recommend_only=True)
    e.step(T0 + 60)
    assert _boost_left(api) is None and len(_dropped(api)) == 1


def test_a_finished_jobs_workload_loses_the_boost() -> None:
    api, e = _boosted_engine(finished=True)
    e.enqueue("workload", "MODIFIED", api.workloads[WL])
    e.step(T0 + 60)
    assert _boost_left(api) is None and len(_dropped(api)) == 1
    assert [m[0] for m in api.mutations()] == ["set_priority_boost"]  # nothing else on the job


@pytest.mark.parametrize(("value", "recorded"), [("1", None), ("5", 1)])
def test_a_boost_the_advisor_did_not_write_is_left(value: str, recorded: int | None) -> None:
    """Not in the log, or changed by another writer since: not the advisor's to remove."""
    api, e = _boosted_engine(mode="Recommend", value=value, recorded=recorded)
    e.enqueue("policy", "MODIFIED", _policy("Recommend"))
    e.step(T0 + 60)
    assert _boost_left(api) == value and not _dropped(api) and api.mutations() == []
