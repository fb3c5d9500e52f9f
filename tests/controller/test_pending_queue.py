"""A pending Workload's ClusterQueue, as the controller's cluster view gives it to the policies.

Kueue writes ``status.admission.clusterQueue`` only once a workload is admitted; a pending one is
on the ClusterQueue of its LocalQueue (its namespace + ``spec.queueName``). The view must say so,
or the preemption guard sees no pending preemptor at all and the priority ranges per queue leave
the waiting workloads out. On the recorded objects of ``fixtures/pending_preemptor.yaml``."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import yaml

from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.kueue import parse_time
from advisor.model import ActionKind, ClusterView
from policies import decide, load_policy, predict_victims
from policies.victims import can_be_preempted
from tests.controller.fakes import FakeApi, trainjob

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pending_preemptor.yaml"
NOW = parse_time("2026-08-20T12:00:00Z") or 0.0
KINDS = {"ClusterQueue": "clusterqueue", "LocalQueue": "localqueue", "Workload": "workload"}


def _objects() -> list[dict[str, Any]]:
    return yaml.safe_load(FIXTURE.read_text())


def _engine(objects: list[dict[str, Any]], *, boost_gate: bool = False) -> Engine:
    config = EngineConfig(write_interval_s=0, writer_workers=0, priority_boost_enabled=boost_gate)
    e = Engine(FakeApi(), config=config)
    for obj in objects:
        e.enqueue(KINDS[obj["kind"]], "ADDED", obj)
    e.step(NOW)
    return e


def _view(objects: list[dict[str, Any]]) -> ClusterView:
    return _engine(objects)._cluster_view(NOW)


def _by_name(view: ClusterView) -> dict[str, Any]:
    return {w.name.split("-")[1]: w for w in view.workloads}


def test_a_pending_workload_is_on_its_local_queues_cluster_queue() -> None:
    w = _by_name(_view(_objects()))
    assert not w["high"].admitted and w["high"].cluster_queue == "solo"
    assert w["low"].admitted and w["low"].cluster_queue == "solo"


def test_the_admitted_lower_priority_workload_is_predicted_victim_of_the_pending_one() -> None:
    view = _view(_objects())
    assert [v.name for v in predict_victims(view)] == ["trainjob-low-5e6f7"]


def test_without_its_local_queue_a_pending_workload_has_no_queue_and_preempts_nobody() -> None:
    view = _view([o for o in _objects() if o["kind"] != "LocalQueue"])
    assert _by_name(view)["high"].cluster_queue == ""
    assert predict_victims(view) == []


def test_the_admission_wins_over_the_local_queue() -> None:
    objects = _objects()
    lq_b = next(o for o in objects if o["kind"] == "LocalQueue" and o["metadata"]["namespace"] == "team-b")
    lq_b["spec"]["clusterQueue"] = "elsewhere"  # pointed elsewhere since the workload was admitted
    assert _by_name(_view(objects))["low"].cluster_queue == "solo"


def test_a_pending_lower_priority_workload_counts_in_its_queues_priority_range() -> None:
    # swapped: the admitted workload is the high one, the pending one lower. LowerPriority
    # preemption cannot reach the top of the priorities in use, so nothing can evict it
    objects = copy.deepcopy(_objects())
    for o in objects:
        if o["kind"] == "Workload":
            o["spec"]["priority"] = 110 - o["spec"]["priority"]
    view = _view(objects)
    admitted = _by_name(view)["low"]
    assert admitted.priority == 100 and admitted.admitted
    assert not can_be_preempted(view, admitted)
    assert predict_victims(view) == []
    # and with the pending workload left out (no queue), it would look reachable: all equal
    alone = dataclasses.replace(view, workloads=tuple(w for w in view.workloads if w.admitted))
    assert can_be_preempted(alone, admitted)


def test_no_standing_boost_for_the_top_of_the_queue_over_a_lower_pending_one() -> None:
    # the engineer's case: the admitted workload is the high one on a queue that evicts (five
    # preemptions over its past hour), a lower one waits. Nothing can evict the admitted one, so
    # a standing boost would only cost; it got one at its first look while the pending workload
    # was on no queue
    objects = copy.deepcopy(_objects())
    for o in objects:
        if o["kind"] == "Workload":
            o["spec"]["priority"] = 110 - o["spec"]["priority"]
        if o["metadata"]["name"] == "trainjob-low-5e6f7":
            o["status"]["schedulingStats"] = {"evictions": [{"reason": "Preempted", "count": 5}]}
            o["status"]["accumulatedPastExecutionTimeSeconds"] = 3600
    e = _engine(objects, boost_gate=True)
    view = e._cluster_view(NOW)
    job = e.index.base_view(trainjob("low", "team-b", uid="job-low", queue="lq"))
    assert job.admitted and job.cluster_queue == "solo"
    rules = {"preemptionGuard": {"staleAfter": "10m", "standingBoost": 1, "likelyVictims": False}}
    decision = decide(job, view, load_policy(_policy(rules)), now=NOW)
    assert [a.kind for a in decision.actions if a.kind is ActionKind.BOOST_PRIORITY] == []
    # the same job with the pending workload on no queue: the old view, and the old boost
    alone = dataclasses.replace(view, workloads=tuple(w for w in view.workloads if w.admitted))
    boosted = decide(job, alone, load_policy(_policy(rules)), now=NOW)
    assert [a.kind for a in boosted.actions] == [ActionKind.BOOST_PRIORITY]


def _policy(rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
        "kind": "AdvisorPolicy",
        "metadata": {"name": "p"},
        "spec": {"mode": "Apply", "rules": rules, "safety": {"minRuntime": "15m"}},
    }
