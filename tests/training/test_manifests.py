"""The sample runtime, TrainJobs and PyTorchJob wire the training helpers as the code expects:
the annotations file where the listener looks, the env names the channels read, a grace period
that covers a checkpoint, RHOAI's tracking annotations, an elastic policy, least-privilege RBAC."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor.protocol import DOWNWARD_API_ANNOTATIONS_PATH
from advisor.training.channels import ENV_CHANNELS, ENV_JOB_NAME, ENV_METRICS_PORT, ENV_NAMESPACE
from advisor.training.requests import ENV_ANNOTATIONS_PATH

SAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "samples"
MIN_GRACE_S = 120


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((SAMPLES / name).read_text()) if d]


def _one(name: str, kind: str) -> dict[str, Any]:
    (doc,) = [d for d in _docs(name) if d["kind"] == kind]
    return doc


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def _assert_pod_hears_requests(pod: dict[str, Any], container_name: str) -> None:
    assert pod["terminationGracePeriodSeconds"] >= MIN_GRACE_S
    volumes = {v["name"]: v for v in pod["volumes"]}
    (container,) = [c for c in pod["containers"] if c["name"] == container_name]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    found = [
        Path(mounts[name]) / item["path"]
        for name, volume in volumes.items()
        if name in mounts and "downwardAPI" in volume
        for item in volume["downwardAPI"]["items"]
        if item["fieldRef"]["fieldPath"] == "metadata.annotations"
    ]
    assert found == [Path(DOWNWARD_API_ANNOTATIONS_PATH)]
    assert (
        _env(container).get(ENV_ANNOTATIONS_PATH, DOWNWARD_API_ANNOTATIONS_PATH)
        == DOWNWARD_API_ANNOTATIONS_PATH
    )


def test_runtime_mounts_the_annotations_and_sizes_the_grace_period() -> None:
    runtime = _one("clustertrainingruntime-torch-advisor.yaml", "ClusterTrainingRuntime")
    (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert job["name"] == "node"
    assert job["template"]["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
    _assert_pod_hears_requests(job["template"]["spec"]["template"]["spec"], "node")


@pytest.mark.parametrize("name", ["trainjob-hf-advisor.yaml", "trainjob-hf-advisor-rhoai.yaml"])
def test_trainjobs_use_the_runtime_and_a_kueue_queue(name: str) -> None:
    runtime = _one("clustertrainingruntime-torch-advisor.yaml", "ClusterTrainingRuntime")
    job = _one(name, "TrainJob")
    assert job["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert job["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
        "name": runtime["metadata"]["name"],
    }
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]


def test_rhoai_trainjob_enables_progress_tracking_and_our_metrics_endpoint() -> None:
    job = _one("trainjob-hf-advisor-rhoai.yaml", "TrainJob")
    annotations = job["metadata"]["annotations"]
    assert annotations["trainer.opendatahub.io/progression-tracking"] == "true"  # exactly "true"
    port = annotations["trainer.opendatahub.io/metrics-port"]
    assert (
        1024 <= int(port) <= 65535
        and 5 <= int(annotations["trainer.opendatahub.io/metrics-poll-interval"]) <= 300
    )
    env = {e["name"]: e["value"] for e in job["spec"]["trainer"]["env"]}
    assert env[ENV_CHANNELS] == "rhoai" and env[ENV_METRICS_PORT] == port


def test_pytorchjob_is_elastic_and_reports_through_its_own_annotation() -> None:
    job = _one("pytorchjob-hf-advisor.yaml", "PyTorchJob")
    assert job["apiVersion"] == "kubeflow.org/v1"
    elastic = job["spec"]["elasticPolicy"]
    worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert elastic["rdzvBackend"] == "c10d"
    assert 1 <= elastic["minReplicas"] <= worker["replicas"] <= elastic["maxReplicas"]
    pod = worker["template"]["spec"]
    _assert_pod_hears_requests(pod, "pytorch")
    env = _env(pod["containers"][0])
    assert env[ENV_CHANNELS] == "pytorchjob"
    assert env[ENV_JOB_NAME] == {
        "fieldRef": {"fieldPath": "metadata.labels['training.kubeflow.org/job-name']"}
    }
    assert env[ENV_NAMESPACE] == {"fieldRef": {"fieldPath": "metadata.namespace"}}


def test_pytorchjob_rbac_is_least_privilege() -> None:
    docs = _docs("pytorchjob-hf-advisor.yaml")
    (role,) = [d for d in docs if d["kind"] == "Role"]
    assert role["rules"] == [
        {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": ["get", "patch"]}
    ]
    (binding,) = [d for d in docs if d["kind"] == "RoleBinding"]
    job = _one("pytorchjob-hf-advisor.yaml", "PyTorchJob")
    account = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["serviceAccountName"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "team-a"}]
