"""Scenario 6: the controller's identity is the ServiceAccount bound by manifests/rbac and
manifests/components/act (what manifests/overlays/apply grants), and that binding grants exactly
what the actuators need: the writes they make are allowed, writes outside
them are refused by the real API server."""

from __future__ import annotations

from typing import Any

import controlplane as cp
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from advisor.controller.api import ClusterApi
from advisor.controller.evidence import EvidenceStore, evidence_name
from advisor.controller.store import ForecastStore

TRAINER = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
OWN_NAMESPACE = "trainjob-advisor-system"


def _status(fn: Any) -> int:
    try:
        fn()
    except ApiException as exc:
        return int(exc.status)
    return 200


@pytest.fixture
def objects(admin_api: Any, e2e_namespace: str) -> dict[str, Any]:
    custom = client.CustomObjectsApi(admin_api)
    job = custom.create_namespaced_custom_object(
        *TRAINER[:2],
        e2e_namespace,
        TRAINER[2],
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "rbac"},
            "spec": {"runtimeRef": {"name": "torch-distributed"}},
        },
    )
    wl = custom.create_namespaced_custom_object(
        *KUEUE,
        e2e_namespace,
        "workloads",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "rbac-wl"},
            "spec": {
                "queueName": "q",
                "podSets": [
                    {
                        "name": "node",
                        "count": 1,
                        "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                    }
                ],
            },
        },
    )
    pod = client.CoreV1Api(admin_api).create_namespaced_pod(
        e2e_namespace,
        client.V1Pod.from_dict(
            {
                "metadata": {"name": "rbac-pod", "labels": {"jobset.sigs.k8s.io/jobset-name": "rbac"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            }
        ),
    )
    return {"job": job, "wl": wl, "pod": pod}


def test_the_actuators_writes_are_allowed(
    controller_api: Any, admin_api: Any, e2e_namespace: str, objects: dict[str, Any]
) -> None:
    api = ClusterApi(controller_api)
    ns = e2e_namespace
    owner = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "uid": objects["job"]["metadata"]["uid"],
    }
    store = ForecastStore(api)  # as the controller writes: create, merge patch, then JSON patches
    assert store.write(f"{ns}/rbac", owner, {"state": "unknown", "summary": {"progress": "-"}}) == "full"
    assert store.write(f"{ns}/rbac", owner, {"state": "learning", "summary": {"progress": "-"}}) == "delta"
    admin = ClusterApi(admin_api)  # the controller lists and patches its forecasts, never reads one
    got = admin.get_forecast(ns, "rbac")
    assert got["status"]["state"] == "learning"
    assert got["status"]["observedGeneration"] == got["metadata"]["generation"] == 1
    assert api.kueue.set_active(ns, "rbac-wl", False).active is False
    assert api.kueue.set_priority_boost(ns, "rbac-wl", 100).priority_boost == 100
    api.annotate_pod(ns, "rbac-pod", {"advisor.trainjob-advisor.io/checkpoint-request": "r-1"})
    assert api.list_pod_names(ns, "jobset.sigs.k8s.io/jobset-name=rbac") == ["rbac-pod"]
    api.create_event(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "rbac",
            "namespace": ns,
            "uid": owner["uid"],
        },
        reason="Test",
        message="allowed",
    )
    assert api.kueue.list_cluster_queues() is not None
    # the deleted jobs' runtime evidence, beside the Lease in the controller's own namespace: the
    # ConfigMap of the Lease the Role names (manifests/rbac/leader-election.yaml), and no other
    other = EvidenceStore(api.core, OWN_NAMESPACE, name=f"evidence-{ns[-6:]}")
    with pytest.raises(ApiException) as refused:
        other.api.read_namespaced_config_map(other.name, OWN_NAMESPACE)
    assert refused.value.status == 403
    try:
        # the Role names one ConfigMap: a write to another is refused (save says False)
        assert other.save({"torch-distributed": (1, 0)}) is False
    finally:
        _delete_cm(admin_api, other.name)
    evidence = EvidenceStore(api.core, OWN_NAMESPACE, name=evidence_name("trainjob-advisor"))
    _delete_cm(admin_api, evidence.name)  # an in-cluster controller of an earlier test may have made it
    try:
        assert evidence.load() == ({}, {})
        assert evidence.save({"torch-distributed": (3, 1)})  # created
        assert evidence.save(
            {"torch-distributed": (4, 1)}, {"torch-distributed": [[16, 0.5, 42.0]]}
        )  # patched
        assert evidence.load() == ({"torch-distributed": [4, 1]}, {"torch-distributed": [[16, 0.5, 42.0]]})
    finally:
        client.CoreV1Api(admin_api).delete_namespaced_config_map(evidence.name, OWN_NAMESPACE)


def _delete_cm(admin_api: Any, name: str) -> None:
    try:
        client.CoreV1Api(admin_api).delete_namespaced_config_map(name, OWN_NAMESPACE)
    except ApiException as exc:
        if exc.status != 404:
            raise


def test_writes_outside_the_binding_are_refused(
    control_plane: cp.ControlPlane, controller_api: Any, e2e_namespace: str, objects: dict[str, Any]
) -> None:
    ns = e2e_namespace
    custom = client.CustomObjectsApi(controller_api)
    core = client.CoreV1Api(controller_api)
    refused = {
        "delete a Workload": lambda: custom.delete_namespaced_custom_object(
            *KUEUE, ns, "workloads", "rbac-wl"
        ),
        "write Workload status": lambda: custom.patch_namespaced_custom_object_status(
            *KUEUE, ns, "workloads", "rbac-wl", {"status": {"admission": None}}
        ),
        "write TrainJob status": lambda: custom.patch_namespaced_custom_object_status(
            *TRAINER[:2],
            ns,
            TRAINER[2],
            "rbac",
            {"status": {"trainerStatus": {"lastUpdatedTime": "2026-01-01T00:00:00Z"}}},
            _content_type="application/merge-patch+json",
        ),
        "delete a TrainJob": lambda: custom.delete_namespaced_custom_object(
            *TRAINER[:2], ns, TRAINER[2], "rbac"
        ),
        "delete a pod": lambda: core.delete_namespaced_pod("rbac-pod", ns),
        "create a pod": lambda: core.create_namespaced_pod(
            ns,
            client.V1Pod.from_dict(
                {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
            ),
        ),
        "read secrets": lambda: core.list_namespaced_secret(ns),
        # allowed verbs, fields outside what mode Apply writes: held by the act component's
        # ValidatingAdmissionPolicies (manifests/components/act/field-guard.yaml)
        "swap a pod's image": lambda: core.patch_namespaced_pod(
            "rbac-pod", ns, {"spec": {"containers": [{"name": "c", "image": "evil.example/x:1"}]}}
        ),
        "relabel a pod": lambda: core.patch_namespaced_pod(
            "rbac-pod", ns, {"metadata": {"labels": {"jobset.sigs.k8s.io/jobset-name": "other"}}}
        ),
        "annotate a pod beyond the advisor's keys": lambda: core.patch_namespaced_pod(
            "rbac-pod", ns, {"metadata": {"annotations": {"team": "x"}}}
        ),
        "move a Workload to another queue": lambda: custom.patch_namespaced_custom_object(
            *KUEUE, ns, "workloads", "rbac-wl", {"spec": {"queueName": "other"}}
        ),
        "raise a Workload's priority": lambda: custom.patch_namespaced_custom_object(
            *KUEUE, ns, "workloads", "rbac-wl", {"spec": {"active": False, "priority": 1000000}}
        ),
        "create a ConfigMap": lambda: core.create_namespaced_config_map(
            ns, client.V1ConfigMap.from_dict({"metadata": {"name": "x"}, "data": {"a": "b"}})
        ),
        "edit a ClusterQueue": lambda: custom.create_cluster_custom_object(
            *KUEUE,
            "clusterqueues",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": "x"},
                "spec": {},
            },
        ),
        "edit an AdvisorPolicy": lambda: custom.create_cluster_custom_object(
            "advisor.trainjob-advisor.io",
            "v1alpha1",
            "advisorpolicies",
            {
                "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
                "kind": "AdvisorPolicy",
                "metadata": {"name": "x"},
                "spec": {"mode": "Recommend"},
            },
        ),
    }
    codes = {what: _status(fn) for what, fn in refused.items()}
    assert codes == dict.fromkeys(refused, 403)
    admin = client.CustomObjectsApi(control_plane.api_client(control_plane.admin_kubeconfig))
    assert admin.get_namespaced_custom_object(*KUEUE, ns, "workloads", "rbac-wl")  # still there


def test_the_apply_writes_an_identity_holds_are_found_by_access_review(
    control_plane: cp.ControlPlane, controller_api: Any
) -> None:
    """A recommend-only controller says at start which of Apply's writes its identity still holds
    (``advisor.controller.grants``): the act component's, left behind when an install goes back
    from the apply overlay with ``kubectl apply -k``. Asked of the real API server: the identity
    bound to the act component holds them; a ServiceAccount bound to nothing holds none."""
    from advisor.controller.grants import leftover_warning, leftover_writes

    found = leftover_writes(ClusterApi(controller_api))
    assert "patch pods" in found and "patch workloads (kueue.x-k8s.io)" in found
    assert "patch pytorchjobs/scale (kubeflow.org)" in found
    assert "patch trainjobs (trainer.kubeflow.org)" not in found  # the opt-in resize component's
    assert "kubectl delete -k manifests/components/act" in str(leftover_warning(found))
    nobody = control_plane.api_client(control_plane.admin_kubeconfig)
    try:
        nobody.set_default_header("Impersonate-User", "system:serviceaccount:default:nobody")
        nobody.set_default_header("Impersonate-Group", "system:authenticated")
        api = ClusterApi(nobody)
        assert api.may("get", "", "namespaces") is False  # answered, and refused
        assert leftover_writes(api) == [] and leftover_warning([]) is None
    finally:
        nobody.close()
