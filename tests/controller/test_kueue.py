"""The typed Kueue layer: parsing the v1beta2 fields the advisor uses, and its two writes."""

from __future__ import annotations

from typing import Any

import pytest

from advisor.controller.kueue import (
    parse_cluster_queue,
    parse_local_queue,
    parse_quantity,
    parse_workload,
)
from advisor.controller.kueue_client import KueueClient
from tests.controller.fakes import workload


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("8", 8.0),
        ("500m", 0.5),
        ("1Gi", 2**30),
        (4, 4.0),
        ("x", 0.0),
        (None, 0.0),
        ("2k", 2000.0),
        (True, 0.0),
    ],
)
def test_quantities(text: Any, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)


def test_admitted_workload_counts_assigned_gpus_and_owner() -> None:
    wl = parse_workload(workload(gpus=16, priority=7))
    assert (wl.admitted, wl.active, wl.cluster_queue, wl.gpus, wl.priority) == (True, True, "gpu-cq", 16, 7)
    assert (wl.owner_uid, wl.owner_kind, wl.owner_name) == ("uid-1", "TrainJob", "llm")
    view = wl.view()
    assert view.job == "team-a/llm" and view.admitted and view.gpus == 16


def test_pending_workload_counts_requested_gpus() -> None:
    wl = parse_workload(workload(admitted=False))
    assert not wl.admitted and wl.cluster_queue is None
    assert wl.gpus == 16  # 2 pods x 8 GPUs from the pod set template


def test_deactivated_and_boosted_workload() -> None:
    obj = workload(active=False)
    obj["metadata"]["annotations"] = {"kueue.x-k8s.io/priority-boost": "1000"}
    obj["status"]["schedulingStats"] = {"evictions": [{"reason": "Preempted", "count": 2}]}
    obj["status"]["accumulatedPastExecutionTimeSeconds"] = 3600
    wl = parse_workload(obj)
    assert (wl.active, wl.priority_boost, wl.evictions, wl.past_execution_seconds) == (False, 1000, 2, 3600.0)


def test_garbage_workload_does_not_raise() -> None:
    wl = parse_workload(
        {"metadata": {"annotations": {"kueue.x-k8s.io/priority-boost": "lots"}}, "spec": None}
    )
    assert wl.priority_boost == 0 and wl.gpus == 0 and wl.active


def test_cluster_queue_gpu_quota_and_preemption() -> None:
    cq = parse_cluster_queue(
        {
            "metadata": {"name": "gpu-cq"},
            "spec": {
                "cohortName": "all",
                "queueingStrategy": "StrictFIFO",
                "preemption": {
                    "withinClusterQueue": "LowerPriority",
                    "reclaimWithinCohort": "Any",
                    "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
                },
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": "h100",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "512"},
                                    {"name": "nvidia.com/gpu", "nominalQuota": "32", "borrowingLimit": "8"},
                                ],
                            },
                            {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 16}]},
                        ],
                    }
                ],
            },
            "status": {
                "flavorsUsage": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "24"}]}],
                "flavorsReservation": [
                    {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "32"}]}
                ],
                "pendingWorkloads": 3,
                "admittedWorkloads": 2,
            },
        }
    )
    assert (cq.nominal_gpus, cq.borrowing_limit, cq.lending_limit, cq.usage_gpus) == (48, 8, None, 24)
    assert (cq.cohort, cq.queueing_strategy, cq.pending_workloads) == ("all", "StrictFIFO", 3)
    view = cq.view()
    assert view.usage_gpus == 32  # reservation counts: quota is held from reservation on
    assert (view.within_cluster_queue, view.reclaim_within_cohort, view.borrow_within_cohort) == (
        "LowerPriority",
        "Any",
        "LowerPriority",
    )
    assert view.borrow_max_priority_threshold == 100


def test_local_queue() -> None:
    lq = parse_local_queue(
        {
            "metadata": {"name": "lq", "namespace": "a"},
            "spec": {"clusterQueue": "cq"},
            "status": {"pendingWorkloads": 1},
        }
    )
    assert (lq.namespace, lq.name, lq.cluster_queue, lq.pending_workloads) == ("a", "lq", "cq", 1)


class RecordingCustomObjects:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.calls: list[tuple[Any, ...]] = []

    def list_namespaced_custom_object(
        self, group: str, version: str, ns: str, plural: str, label_selector: str = ""
    ) -> dict[str, Any]:
        self.calls.append(("list", group, version, ns, plural, label_selector))
        if label_selector:
            key, _, value = label_selector.partition("=")
            return {"items": [i for i in self.items if i["metadata"].get("labels", {}).get(key) == value]}
        return {"items": self.items}

    def patch_namespaced_custom_object(
        self, group: str, version: str, ns: str, plural: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        self.calls.append(("patch", group, version, ns, plural, name, body))
        obj = self.items[0]
        obj["spec"].update(body.get("spec", {}))
        return obj


def test_client_writes_exactly_the_two_allowed_fields() -> None:
    api = RecordingCustomObjects([workload()])
    client = KueueClient(api)
    assert client.set_active("team-a", "trainjob-llm-abcde", False).active is False
    client.set_priority_boost("team-a", "trainjob-llm-abcde", 1000)
    client.set_priority_boost("team-a", "trainjob-llm-abcde", None)
    patches = [c for c in api.calls if c[0] == "patch"]
    assert [c[1:3] for c in patches] == [("kueue.x-k8s.io", "v1beta2")] * 3
    assert patches[0][-1] == {"spec": {"active": False}}
    assert patches[1][-1] == {"metadata": {"annotations": {"kueue.x-k8s.io/priority-boost": "1000"}}}
    assert patches[2][-1] == {"metadata": {"annotations": {"kueue.x-k8s.io/priority-boost": None}}}


def test_workload_for_job_uses_the_job_uid_label() -> None:
    other = workload(job_name="other", uid="uid-2")
    api = RecordingCustomObjects([workload(), other])
    wl = KueueClient(api).workload_for_job("team-a", "uid-2")
    assert wl is not None and wl.owner_name == "other"
    assert api.calls[0][-1] == "kueue.x-k8s.io/job-uid=uid-2"
    assert KueueClient(RecordingCustomObjects([])).workload_for_job("team-a", "nope") is None


def test_the_grace_period_comes_from_the_workload_pod_template() -> None:
    obj = workload()
    assert parse_workload(obj).grace_period_s == 30.0  # Kubernetes' default where unset
    obj["spec"]["podSets"][0]["template"]["spec"]["terminationGracePeriodSeconds"] = 180
    assert parse_workload(obj).grace_period_s == 180.0
    assert parse_workload({"metadata": {}, "spec": {}}).grace_period_s is None
