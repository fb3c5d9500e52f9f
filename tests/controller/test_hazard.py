"""The preemption hazard the controller reads from Workload objects: Preempted and NodeFailures
evictions over admitted time, per ClusterQueue, counted by hand on the fixture."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.kueue import parse_time, parse_workload
from tests.controller.fakes import FakeApi

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "workloads_hazard.yaml"
NOW = parse_time("2026-08-20T12:00:00Z")


def _objects() -> list[dict]:
    return yaml.safe_load(FIXTURE.read_text())


def _engine() -> Engine:
    e = Engine(FakeApi(), config=EngineConfig(write_interval_s=0, writer_workers=0))
    for ns, name, cq in (("team-a", "team-a-lq", "gpu-cq"), ("team-b", "team-b-lq", "other-cq")):
        e.enqueue(
            "localqueue",
            "ADDED",
            {"metadata": {"namespace": ns, "name": name}, "spec": {"clusterQueue": cq}},
        )
    for obj in _objects():
        e.enqueue("workload", "ADDED", obj)
    return e


def test_eviction_reasons_are_kept_apart() -> None:
    by_name = {o["metadata"]["name"]: parse_workload(o) for o in _objects()}
    b = by_name["trainjob-b-4d5c6"]
    assert dict(b.evictions_by_reason) == {"Preempted": 2, "Deactivated": 1} and b.evictions == 3
    c = by_name["trainjob-c-7a8b9"]
    assert dict(c.evictions_by_reason) == {"NodeFailures": 1, "Preempted": 1}
    assert c.cluster_queue is None and not c.admitted  # pending: no admission left


def test_each_workload_view_carries_its_own_record() -> None:
    by_name = {o["metadata"]["name"]: parse_workload(o) for o in _objects()}
    b, c = by_name["trainjob-b-4d5c6"].view(), by_name["trainjob-c-7a8b9"].view()
    # the advisor's own release (Deactivated) is no interruption of the workload's
    assert b.interruptions == 2 and c.interruptions == 2
    assert b.past_admitted_seconds == by_name["trainjob-b-4d5c6"].past_execution_seconds


def test_hazard_matches_the_hand_count() -> None:
    assert NOW is not None
    e = _engine()
    e.step(NOW)
    rates = e._cluster_view(NOW).preemption_rate
    assert rates["gpu-cq"] == pytest.approx(4 / 27000)
    assert rates["other-cq"] == 0.0  # admitted an hour, a PodsReadyTimeout is no preemption
    assert set(rates) == {"gpu-cq", "other-cq"}


def test_hazard_falls_as_running_workloads_accumulate_admitted_time() -> None:
    assert NOW is not None
    e = _engine()
    e.step(NOW)
    later = e._cluster_view(NOW + 3600).preemption_rate["gpu-cq"]
    # a and b are admitted: each adds the hour to the exposure, the events stay 4
    assert later == pytest.approx(4 / (27000 + 2 * 3600))


def test_an_advisor_release_is_not_a_hazard() -> None:
    assert NOW is not None
    e = _engine()
    e.step(NOW)
    before = e._cluster_view(NOW).preemption_rate["gpu-cq"]
    d = next(o for o in _objects() if o["metadata"]["name"] == "trainjob-d-0c1d2")
    d["status"]["schedulingStats"]["evictions"][0]["count"] = 30
    e.enqueue("workload", "MODIFIED", d)
    e.step(NOW)
    assert e._cluster_view(NOW).preemption_rate["gpu-cq"] == pytest.approx(before)


def test_the_hazard_evidence_is_also_kept_per_priority() -> None:
    """Kueue evicts the lowest priority first: the checkpoint rule reads the evidence of the job's
    own priority on its queue (``policies.hazard.priority_hazard``)."""
    assert NOW is not None
    e = _engine()
    e.step(NOW)
    by_priority = e._cluster_view(NOW).priority_hazard_evidence
    # c (priority 50): one preemption and one node failure in its hour of past admissions; a, b
    # and d (priority 100): b's two preemptions in 2h + 2h + 2.5h admitted (a's and b's current
    # admissions counted)
    assert by_priority[("gpu-cq", 50)] == (2, pytest.approx(3600.0))
    assert by_priority[("gpu-cq", 100)] == (2, pytest.approx(27000.0 - 3600.0))
    pooled = e._cluster_view(NOW).hazard_evidence["gpu-cq"]
    assert pooled == (4, pytest.approx(27000.0))


def test_a_finished_workloads_admission_ends_when_it_finished() -> None:
    """A finished Workload keeps its Admitted condition: counted to now, its admission grew the
    queue's exposure for ever and drifted the rate every new job plans for toward 0 (a platform
    trial: 8 interruptions "in 1h51m admitted" on a queue that could have held 40 minutes)."""
    import copy

    assert NOW is not None
    e = _engine()
    e.step(NOW)
    before = e._cluster_view(NOW).hazard_evidence["gpu-cq"]
    done = copy.deepcopy(next(o for o in _objects() if o["metadata"]["name"] == "trainjob-a-1f2e3"))
    done["metadata"].update(name="trainjob-done-9f8e7", uid="wl-done")
    done["status"]["conditions"].append(
        {
            "type": "Finished",
            "status": "True",
            "reason": "Succeeded",
            "lastTransitionTime": "2026-08-20T10:30:00Z",
        }
    )
    e.enqueue("workload", "ADDED", done)
    e.step(NOW)
    # admitted at 10:00, finished at 10:30: half an hour, at noon and an hour later alike (a and b,
    # admitted now, add that hour: test_hazard_falls_as_running_workloads_accumulate_admitted_time)
    assert e._cluster_view(NOW).hazard_evidence["gpu-cq"] == (4, pytest.approx(before[1] + 1800.0))
    later = e._cluster_view(NOW + 3600).hazard_evidence["gpu-cq"]
    assert later == (4, pytest.approx(27000.0 + 2 * 3600.0 + 1800.0))


def test_an_evicted_workload_says_why_and_since_when() -> None:
    wl = parse_workload(
        {
            "metadata": {"name": "w", "namespace": "ml"},
            "spec": {"queueName": "q"},
            "status": {
                "conditions": [
                    {
                        "type": "Evicted",
                        "status": "True",
                        "reason": "Preempted",
                        "message": "Preempted to accommodate a workload (UID: u2) due to prioritization",
                        "lastTransitionTime": "2026-12-07T10:00:00Z",
                    }
                ]
            },
        }
    )
    assert wl.evicted and wl.eviction.startswith("Preempted: Preempted to accommodate a workload")
    assert wl.evicted_at == parse_time("2026-12-07T10:00:00Z")
    assert parse_workload({"metadata": {"name": "w"}, "status": {}}).eviction == ""
