"""The Kueue objects a scenario stands for (``kueue.x-k8s.io/v1beta2`` dicts, no client).

One ResourceFlavor, one ClusterQueue per ``ClusterQueueSpec`` covering ``nvidia.com/gpu`` only
(the model folds flavors into one GPU count, so one flavor is the same thing), a LocalQueue of
the spec's own name per ClusterQueue, and per ``Submit`` a Workload of one pod set of one pod.
ClusterQueue, cohort and flavor names are prefixed so that several runs (and scenarios) never share
one; Workloads and LocalQueues keep the scenario's names (they live in the run's namespace).
"""

from __future__ import annotations

from typing import Any

from simulator.conformance.scenarios import Scenario, Submit
from simulator.quota import ClusterQueueSpec

__all__ = ["API_VERSION", "BOOST_ANNOTATION", "GPU", "cluster_queue", "queue_objects", "workload"]

API_VERSION = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
BOOST_ANNOTATION = "kueue.x-k8s.io/priority-boost"


def cluster_queue(spec: ClusterQueueSpec, prefix: str) -> dict[str, Any]:
    """The ClusterQueue for ``spec``, its name and cohort prefixed with ``prefix``."""
    quota: dict[str, Any] = {"name": GPU, "nominalQuota": str(spec.nominal_gpus)}
    if spec.borrowing_limit is not None:
        quota["borrowingLimit"] = str(spec.borrowing_limit)
    if spec.lending_limit is not None:
        quota["lendingLimit"] = str(spec.lending_limit)
    preemption: dict[str, Any] = {
        "withinClusterQueue": spec.within_cluster_queue,
        "reclaimWithinCohort": spec.reclaim_within_cohort,
    }
    if spec.borrow_within_cohort != "Never":
        borrow: dict[str, Any] = {"policy": spec.borrow_within_cohort}
        if spec.borrow_max_priority_threshold is not None:
            borrow["maxPriorityThreshold"] = spec.borrow_max_priority_threshold
        preemption["borrowWithinCohort"] = borrow
    body: dict[str, Any] = {
        "namespaceSelector": {},
        "queueingStrategy": spec.queueing_strategy,
        "preemption": preemption,
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": prefix, "resources": [quota]}]}],
    }
    if spec.cohort is not None:
        body["cohortName"] = f"{prefix}-{spec.cohort}"
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": f"{prefix}-{spec.name}"},
        "spec": body,
    }


def queue_objects(scenario: Scenario, prefix: str, namespace: str) -> list[dict[str, Any]]:
    """The ResourceFlavor, ClusterQueues and LocalQueues of ``scenario``, in creation order."""
    out: list[dict[str, Any]] = [
        {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": prefix}}
    ]
    out.extend(cluster_queue(spec, prefix) for spec in scenario.queues)
    out.extend(
        {
            "apiVersion": API_VERSION,
            "kind": "LocalQueue",
            "metadata": {"name": spec.name, "namespace": namespace},
            "spec": {"clusterQueue": f"{prefix}-{spec.name}"},
        }
        for spec in scenario.queues
    )
    return out


def workload(event: Submit, namespace: str) -> dict[str, Any]:
    """The Workload ``event`` submits: ``spec.priority`` set directly (no priority class), the
    boost as Kueue's annotation."""
    container = {"name": "main", "image": "trainer:latest", "resources": {"requests": {GPU: str(event.gpus)}}}
    meta: dict[str, Any] = {"name": event.name, "namespace": namespace}
    if event.boost:
        meta["annotations"] = {BOOST_ANNOTATION: str(event.boost)}
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": meta,
        "spec": {
            "queueName": event.queue,
            "priority": event.priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
                }
            ],
        },
    }
