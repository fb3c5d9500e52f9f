"""The clusters people have, besides the newest: a second API server with Kubeflow Trainer 2.2's
CRDs, the training-operator's PyTorchJob CRD, first no Kueue at all and then Kueue 0.14's CRDs,
which serve ``kueue.x-k8s.io/v1beta1`` only. The session's plane covers Trainer 2.3 and Kueue
v1beta2 (with real Kueue controllers); this one has none, so Workload status is written here by
the test, as Kueue would.

The tests run in file order: the no-Kueue one before ``kueue_v1beta1`` installs Kueue.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import controlplane as cp
import pytest
from controller_harness import ADVISOR, MERGE, Controller, wait_for
from kubernetes import client

from advisor.cli import main as cli
from advisor.protocol import CRD_SCHEMA_ANNOTATION, CRD_SCHEMA_GENERATION, CRD_SCHEMA_REQUIRED
from advisor.sources.progress_annotation import encode_progress

NS = "compat"
V1BETA1 = ("kueue.x-k8s.io", "v1beta1")
TRAINER = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")


@pytest.fixture(scope="module")
def plane(control_plane: cp.ControlPlane) -> Iterator[cp.ControlPlane]:
    go = cp.find_go()
    # the PyTorchJob CRD comes later, with a controller running (``pytorchjobs``)
    crds = [c for c in cp.compat_crds(go) if c["spec"]["group"] not in ("kueue.x-k8s.io", "kubeflow.org")]
    run_dir = Path(tempfile.mkdtemp(prefix="trainjob-advisor-compat-"))
    compat = cp.ControlPlane(run_dir=run_dir, binaries=control_plane.binaries)
    try:
        compat.start(crds=crds, with_kueue=False)
        compat.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield compat
    finally:
        compat.stop()
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def kueue_v1beta1(plane: cp.ControlPlane) -> cp.ControlPlane:
    plane.apply([c for c in cp.compat_crds(cp.find_go()) if c["spec"]["group"] == "kueue.x-k8s.io"])
    served = client.ApisApi(plane.api_client()).get_api_versions().groups
    (kueue,) = [g for g in served if g.name == "kueue.x-k8s.io"]
    assert [v.version for v in kueue.versions] == ["v1beta1"]
    return plane


def custom(plane: cp.ControlPlane) -> Any:
    return client.CustomObjectsApi(plane.api_client())


def trainjob(plane: cp.ControlPlane, name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 1}},
    }
    created: dict[str, Any] = custom(plane).create_namespaced_custom_object(
        *TRAINER[:2], NS, TRAINER[2], body
    )
    return created


def rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def loss(step: int) -> float:
    return 0.3 + 2.0 * (step + 10) ** -0.5


def report_trainer_status(plane: cp.ControlPlane, name: str, step: int, at: float) -> None:
    """What Trainer's status server writes (TrainJobStatus gate on) into the 2.2 CRD's trainerStatus."""
    status = {
        "progressPercentage": step // 20,
        "lastUpdatedTime": rfc3339(at),
        "metrics": [
            {"name": "current_step", "value": str(step)},
            {"name": "total_steps", "value": "2000"},
            {"name": "loss", "value": f"{loss(step):.6f}"},
        ],
    }
    custom(plane).patch_namespaced_custom_object_status(
        *TRAINER[:2], NS, TRAINER[2], name, {"status": {"trainerStatus": status}}, _content_type=MERGE
    )


def forecast_progress(plane: cp.ControlPlane, name: str, step: int | None = None) -> dict[str, Any] | None:
    """The forecast's status once it shows progress (at ``step``, if given)."""
    try:
        tjf = custom(plane).get_namespaced_custom_object(*ADVISOR, NS, "trainjobforecasts", name)
    except client.exceptions.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    status: dict[str, Any] = tjf.get("status") or {}
    progress = status.get("progress") or {}
    return status if progress and (step is None or progress.get("step") == step) else None


def test_a_controller_on_crds_older_than_it_says_so_and_holds_apply(
    plane: cp.ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    """``helm upgrade`` leaves the CRDs as they were (Helm never upgrades its ``crds/``), and the API
    server dropped every status field the old schemas lacked without a word (a platform trial).
    A controller started on a TrainJobForecast CRD of a schema generation older than Apply needs
    says so in an ERROR line with the upgrade command, and evaluates every policy as Recommend; on
    one that lacks only fields for people it says so in a WARNING and keeps its mode; on current
    CRDs it says nothing."""
    ext = client.ApiextensionsV1Api(plane.api_client())
    name = f"trainjobforecasts.{ADVISOR[0]}"

    def annotate(value: str) -> None:
        ext.patch_custom_resource_definition(
            name, {"metadata": {"annotations": {CRD_SCHEMA_ANNOTATION: value}}}
        )

    def started_on(generation: int) -> tuple[bool, list[logging.LogRecord]]:
        """Whether a controller started on ``generation`` held Apply, and its CRD log records."""
        caplog.clear()
        annotate(str(generation))
        controller = Controller(plane, NS)
        try:
            assert controller.engine is not None
            said = [r for r in caplog.records if "older than this controller" in r.getMessage()]
            return controller.engine.book.recommend_only, said
        finally:
            controller.close()

    try:
        held, said = started_on(CRD_SCHEMA_REQUIRED - 1)
        assert held and [r.levelno for r in said] == [logging.ERROR]
        assert f"{name} has schema generation {CRD_SCHEMA_REQUIRED - 1}" in said[0].getMessage()
        assert "kubectl apply --server-side --force-conflicts -k manifests/crds" in said[0].getMessage()
        if CRD_SCHEMA_REQUIRED < CRD_SCHEMA_GENERATION:
            held, said = started_on(CRD_SCHEMA_GENERATION - 1)
            assert not held and [r.levelno for r in said] == [logging.WARNING]
            assert "nothing is held" in said[0].getMessage()
    finally:
        held, said = started_on(CRD_SCHEMA_GENERATION)
    assert not held and said == []


def test_without_kueue_trainer_2_2_progress_becomes_a_forecast(plane: cp.ControlPlane) -> None:
    controller = Controller(plane, NS)
    try:
        assert controller.engine is not None and controller.engine.api.kueue.version == "v1beta2"
        trainjob(plane, "no-kueue")
        now = time.time()
        for i, step in enumerate(range(100, 800, 100)):
            report_trainer_status(plane, "no-kueue", step, now - 60 * (7 - i))
        status = wait_for(lambda: forecast_progress(plane, "no-kueue", 700), "a forecast without Kueue")
        assert not status["job"].get("clusterQueue") and status["progress"]["totalSteps"] == 2000
        assert controller.alive
    finally:
        controller.close()


@pytest.mark.parametrize("enabling", ["true", "enabled"])
def test_the_openshift_ai_annotation_is_read_whichever_value_enables_tracking(
    plane: cp.ControlPlane, enabling: str
) -> None:
    """RHOAI 3.4's Trainer copies rank 0's progress into an annotation when the TrainJob's
    progression-tracking annotation enables it: "true" in the 3.4 code, "enabled" in earlier
    builds of the same controller. The advisor reads the copy, whichever value its build needs."""
    name = f"rhoai-{enabling}"
    trainjob(plane, name, {"trainer.opendatahub.io/progression-tracking": enabling})
    controller = Controller(plane, NS)
    try:
        now = time.time()
        for i, step in enumerate(range(100, 600, 100)):
            value = {
                "progressPercentage": step // 10,
                "currentStep": step,
                "totalSteps": 1000,
                "trainMetrics": {"loss": round(loss(step), 5)},
                "lastUpdatedTime": rfc3339(now - 60 * (5 - i)),
            }
            custom(plane).patch_namespaced_custom_object(
                *TRAINER[:2],
                NS,
                TRAINER[2],
                name,
                {"metadata": {"annotations": {"trainer.opendatahub.io/trainerStatus": json.dumps(value)}}},
            )
        status = wait_for(
            lambda: forecast_progress(plane, name, 500), f"a forecast from the {enabling} annotation"
        )
        assert status["progress"]["step"] == 500
    finally:
        controller.close()


def _serves_pytorchjobs(plane: cp.ControlPlane) -> bool:
    return any(g.name == "kubeflow.org" for g in client.ApisApi(plane.api_client()).get_api_versions().groups)


@pytest.fixture(scope="module")
def pytorchjobs(plane: cp.ControlPlane) -> cp.ControlPlane:
    """The training-operator's PyTorchJob CRD, installed (once) when a test asks for it."""
    if not _serves_pytorchjobs(plane):
        plane.apply([c for c in cp.compat_crds(cp.find_go()) if c["spec"]["group"] == "kubeflow.org"])
    return plane


def _pytorchjob(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "pytorch", "image": "trainer:latest"}]}},
                }
            }
        },
    }


def _annotate_progress(plane: cp.ControlPlane, name: str, annotation: str) -> None:
    """One progress report on PyTorchJob ``name``, in the annotation the training helper writes."""
    custom(plane).patch_namespaced_custom_object(
        "kubeflow.org",
        "v1",
        NS,
        "pytorchjobs",
        name,
        {"metadata": {"annotations": {"advisor.trainjob-advisor.io/progress": annotation}}},
    )


def _report_annotation(plane: cp.ControlPlane, name: str) -> None:
    now = time.time()
    for i, step in enumerate(range(100, 600, 100)):
        annotation = encode_progress(step, time=now - 60 * (5 - i), total_steps=1000, loss=loss(step))
        _annotate_progress(plane, name, annotation)


def test_pytorchjobs_installed_after_the_controller_started_are_watched(plane: cp.ControlPlane) -> None:
    """A controller started on a cluster without Training Operator v1 said it would watch for
    PyTorchJobs "in case it is installed later", and never did: kopf's own rescan ran at the CRD's
    creation, before discovery served the kind (a platform trial). Installed with a controller
    running, a PyTorchJob that reports gets its forecast without a restart."""
    assert not _serves_pytorchjobs(plane)
    controller = Controller(plane, NS, watch_pytorchjobs=True)
    try:
        time.sleep(2)  # the controller is up and its kopf run has started without the kind
        plane.apply([c for c in cp.compat_crds(cp.find_go()) if c["spec"]["group"] == "kubeflow.org"])
        custom(plane).create_namespaced_custom_object(
            "kubeflow.org", "v1", NS, "pytorchjobs", _pytorchjob("late")
        )
        _report_annotation(plane, "late")
        status = wait_for(
            lambda: forecast_progress(plane, "late", 500), "a forecast for the PyTorchJob", timeout=90
        )
        assert status["progress"]["step"] == 500
    finally:
        controller.close()


def test_a_pytorchjob_reporting_through_its_annotation_gets_a_forecast(pytorchjobs: cp.ControlPlane) -> None:
    plane = pytorchjobs
    custom(plane).create_namespaced_custom_object(
        "kubeflow.org", "v1", NS, "pytorchjobs", _pytorchjob("v1-job")
    )
    controller = Controller(plane, NS, watch_pytorchjobs=True)
    try:
        _report_annotation(plane, "v1-job")
        status = wait_for(lambda: forecast_progress(plane, "v1-job", 500), "a forecast for the PyTorchJob")
        assert status["progress"]["step"] == 500
        tjf = custom(plane).get_namespaced_custom_object(*ADVISOR, NS, "trainjobforecasts", "v1-job")
        assert tjf["spec"]["jobRef"]["kind"] == "PyTorchJob"
    finally:
        controller.close()


def _elastic_pytorchjob(name: str, workers: int) -> dict[str, Any]:
    """A worker-only elastic PyTorchJob (``elasticPolicy`` 1..``workers``), 8 GPUs a worker, in no queue."""
    container = {
        "name": "pytorch",
        "image": "trainer:latest",
        "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}},
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "elasticPolicy": {"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": workers},
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": workers,
                    "restartPolicy": "OnFailure",
                    "template": {"spec": {"containers": [container]}},
                }
            },
        },
    }


def _running(workers: int) -> dict[str, Any]:
    """The status the training-operator writes on a running PyTorchJob."""
    at = rfc3339(time.time())
    condition = {"status": "True", "lastUpdateTime": at, "lastTransitionTime": at, "message": ""}
    return {
        "status": {
            "conditions": [
                {**condition, "type": "Created", "reason": "PyTorchJobCreated"},
                {**condition, "type": "Running", "reason": "PyTorchJobRunning"},
            ],
            "replicaStatuses": {"Worker": {"active": workers}},
            "startTime": at,
        }
    }


def test_an_elastic_pytorchjob_that_stopped_learning_is_shrunk_through_its_scale_subresource(
    pytorchjobs: cp.ControlPlane,
) -> None:
    """An Apply policy's elastic rule on a plateaued PyTorchJob: the Worker replicas shrink through
    the scale subresource (the act identity's grant), the job gets a Scaled Event, and ADVICE says
    ``scaled:N`` for the cooldown after (it read ``continue`` the moment the resize was done: a
    platform trial)."""
    plane = pytorchjobs
    api = custom(plane)
    name = "elastic-flat"
    api.create_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs", _elastic_pytorchjob(name, 4))
    api.patch_namespaced_custom_object_status("kubeflow.org", "v1", NS, "pytorchjobs", name, _running(4))
    policy = {
        "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
        "kind": "AdvisorPolicy",
        "metadata": {"name": "compat-elastic"},
        "spec": {
            "mode": "Apply",
            "selector": {"namespaces": [NS], "kinds": ["PyTorchJob"]},
            "safety": {
                "minRuntime": "0s",
                "minProgress": 0,
                "minSteps": 0,
                "minForecastPoints": 5,
                "cooldown": "30m",
            },
            # at most one node fewer: after it the rule has nothing more to want (the reports
            # of this test do not slow down with fewer workers, which a second shrink would read)
            "rules": {"elastic": {"minNodes": 3, "shrinkPlateauProbability": 0.8, "maxShrinkSlowdown": 1.5}},
        },
    }
    plane.apply(policy)
    controller = Controller(plane, NS, watch_pytorchjobs=True)
    try:
        start = time.time() - 40 * 30.0
        for i in range(40):
            step = 2_000 + 500 * i  # flat since long before the first report, far from its end
            annotation = encode_progress(
                step, time=start + 30.0 * i, total_steps=400_000, loss=2.0 + 0.002 * ((-1) ** i)
            )
            _annotate_progress(plane, name, annotation)
            time.sleep(0.2)

        def workers() -> int | None:
            job = api.get_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs", name)
            n = int(job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"])
            return n if n < 4 else None

        shrunk = wait_for(workers, "the plateaued PyTorchJob's workers to shrink", timeout=90)
        assert shrunk == 3
        # what the training-operator writes once the workers restart at the new size
        api.patch_namespaced_custom_object_status(
            "kubeflow.org", "v1", NS, "pytorchjobs", name, _running(shrunk)
        )

        def advised() -> dict[str, Any] | None:
            status = forecast_progress(plane, name)
            return status if status and status["summary"]["advice"] == f"scaled:{shrunk}" else None

        status = wait_for(advised, f"ADVICE scaled:{shrunk}", timeout=60)
        assert [(a["kind"], a["outcome"]) for a in status["actions"]] == [("scale", "done")]
        events = client.CoreV1Api(plane.api_client()).list_namespaced_event(
            NS, field_selector=f"involvedObject.name={name}"
        )
        assert [e.reason for e in events.items if e.reason == "Scaled"] == ["Scaled"]
    finally:
        controller.close()
        api.delete_cluster_custom_object(
            "advisor.trainjob-advisor.io", "v1alpha1", "advisorpolicies", "compat-elastic"
        )


def workload_v1beta1(plane: cp.ControlPlane, job: dict[str, Any], *, active: bool = True) -> str:
    """A v1beta1 Workload for ``job``, admitted to ClusterQueue cq-v1 (status written as Kueue would)."""
    meta = job["metadata"]
    name = f"trainjob-{meta['name']}-v1b1"
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
            "ownerReferences": [
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "active": active,
            "queueName": "queue",
            "podSets": [
                {
                    "name": "node",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "node",
                                    "image": "trainer:latest",
                                    "resources": {"requests": {"nvidia.com/gpu": "8"}},
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }
    api = custom(plane)
    api.create_namespaced_custom_object(*V1BETA1, NS, "workloads", body)
    stamp = rfc3339(time.time())
    condition = {"status": "True", "lastTransitionTime": stamp, "message": "e2e", "reason": "e2e"}
    status = {
        "admission": {
            "clusterQueue": "cq-v1",
            "podSetAssignments": [
                {
                    "name": "node",
                    "count": 1,
                    "flavors": {"nvidia.com/gpu": "a100"},
                    "resourceUsage": {"nvidia.com/gpu": "8"},
                }
            ],
        },
        "conditions": [{**condition, "type": "QuotaReserved"}, {**condition, "type": "Admitted"}],
        "accumulatedPastExexcutionTimeSeconds": 600,
    }
    api.patch_namespaced_custom_object_status(*V1BETA1, NS, "workloads", name, {"status": status})
    return name


def test_kueue_v1beta1_is_discovered_watched_and_its_workload_joins_the_forecast(
    kueue_v1beta1: cp.ControlPlane,
) -> None:
    plane = kueue_v1beta1
    job = trainjob(plane, "queued")
    workload_v1beta1(plane, job)
    controller = Controller(plane, NS)
    try:
        assert controller.engine is not None and controller.engine.api.kueue.version == "v1beta1"
        now = time.time()
        for i, step in enumerate(range(100, 600, 100)):
            report_trainer_status(plane, "queued", step, now - 60 * (5 - i))

        def joined() -> dict[str, Any] | None:
            status = forecast_progress(plane, "queued", 500)
            return status if status and status["job"].get("clusterQueue") == "cq-v1" else None

        status = wait_for(joined, "the v1beta1 Workload's ClusterQueue in the forecast")
        assert status["job"]["admitted"] is True and status["job"]["gpus"] == 8
    finally:
        controller.close()


def test_resume_reactivates_a_v1beta1_workload(
    kueue_v1beta1: cp.ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    plane = kueue_v1beta1
    job = trainjob(plane, "released")
    name = workload_v1beta1(plane, job, active=False)
    assert cli(["resume", f"{NS}/released", "--kubeconfig", str(plane.admin_kubeconfig)]) == 0
    workload = custom(plane).get_namespaced_custom_object(*V1BETA1, NS, "workloads", name)
    assert workload["spec"]["active"] is True, capsys.readouterr()
