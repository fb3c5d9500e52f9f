"""The controller against a real kube-apiserver (+ Kueue where built): the issue's scenarios 1-5.

The tests play the Trainer (they write ``status.trainerStatus`` like the status server does) and
the pods (they create pods with the JobSet labels and answer checkpoint requests through the
progress stream). The controller runs in-process (its kopf operator on a thread) or, for the
restart scenario, as a separate process killed with ``os._exit`` at the worst moment. It always
runs with the ServiceAccount identity bound by ``manifests/rbac`` and ``manifests/components/act``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import controlplane as cp
import pytest
from controller_harness import (
    ADVISOR,
    KUEUE,
    MERGE,
    TRAINER,
    Controller,
    admitting,
    queue_objects,
    release_reservation,
    wait_for,
    workload_admitted,
)
from kubernetes import client

from advisor.controller.store import decode_history
from simulator.curves import CurveSpec

REQUEST_ANNOTATION = "advisor.trainjob-advisor.io/checkpoint-request"


# ------------------------------------------------------------------------------------ helpers
def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Cluster:
    """The test's side of the cluster: the Trainer, Kueue's job integration and the pods."""

    def __init__(self, admin: Any, namespace: str) -> None:
        self.api = admin
        self.ns = namespace
        self.custom = client.CustomObjectsApi(admin)
        self.core = client.CoreV1Api(admin)

    def create_trainjob(self, name: str, *, nodes: int = 2, gpus: int = 8, queue: str | None = None) -> dict:
        body = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue} if queue else {}},
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {"numNodes": nodes, "resourcesPerNode": {"limits": {"nvidia.com/gpu": str(gpus)}}},
            },
        }
        return cast(
            dict, self.custom.create_namespaced_custom_object(*TRAINER[:2], self.ns, TRAINER[2], body)
        )

    def report(self, name: str, metrics: list[dict[str, str]], at: float, percent: int | None = None) -> None:
        status: dict[str, Any] = {"metrics": metrics, "lastUpdatedTime": rfc3339(at)}
        if percent is not None:
            status["progressPercentage"] = percent
        self.custom.patch_namespaced_custom_object_status(
            *TRAINER[:2],
            self.ns,
            TRAINER[2],
            name,
            {"status": {"trainerStatus": status}},
            _content_type=MERGE,
        )

    def report_step(
        self, name: str, spec: CurveSpec, step: int, at: float, extra: list[dict[str, str]] = ()
    ) -> None:
        metrics = [
            {"name": "current_step", "value": str(step)},
            {"name": "total_steps", "value": str(spec.total_steps)},
            {"name": "loss", "value": f"{spec.observed(step):.6f}"},
            *extra,
        ]
        self.report(name, metrics, at, percent=min(100, 100 * step // spec.total_steps))

    def create_workload(
        self, job: dict, *, queue: str = "queue", gpus_per_pod: int = 8, pods: int = 2
    ) -> str:
        meta = job["metadata"]
        name = f"trainjob-{meta['name']}-e2e01"
        container = {
            "name": "node",
            "image": "trainer:latest",
            "resources": {"requests": {"nvidia.com/gpu": str(gpus_per_pod)}},
        }
        body = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
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
                "queueName": queue,
                "podSets": [
                    {
                        "name": "node",
                        "count": pods,
                        "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
                    }
                ],
            },
        }
        self.custom.create_namespaced_custom_object(*KUEUE, self.ns, "workloads", body)
        return name

    def workload(self, name: str) -> dict:
        return cast(dict, self.custom.get_namespaced_custom_object(*KUEUE, self.ns, "workloads", name))

    def create_pods(self, job: str, count: int = 2) -> list[str]:
        return cp.create_jobset_pods(self.core, self.ns, job, count)

    def pod_annotation(self, pod: str) -> str | None:
        return (self.core.read_namespaced_pod(pod, self.ns).metadata.annotations or {}).get(
            REQUEST_ANNOTATION
        )

    def forecast(self, name: str) -> dict | None:
        try:
            return cast(
                dict, self.custom.get_namespaced_custom_object(*ADVISOR, self.ns, "trainjobforecasts", name)
            )
        except client.exceptions.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def events(self, name: str) -> list[Any]:
        return list(
            self.core.list_namespaced_event(self.ns, field_selector=f"involvedObject.name={name}").items
        )

    def reasons(self, name: str) -> list[str]:
        return [
            e.reason
            for e in sorted(self.events(name), key=lambda e: e.metadata.creation_timestamp)
            if e.source and e.source.component == "trainjob-advisor"
        ]

    def apply_policy(self, plane: cp.ControlPlane, name: str, mode: str, **rules: Any) -> None:
        plane.apply(
            {
                "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
                "kind": "AdvisorPolicy",
                "metadata": {"name": name},
                "spec": {
                    "mode": mode,
                    "selector": {"namespaces": [self.ns]},
                    "safety": {"minRuntime": "0s", "cooldown": "1s", "minForecastPoints": 10},
                    "rules": rules,
                },
            }
        )


def plateau_curve(total: int = 2000) -> CurveSpec:
    return CurveSpec(
        total_steps=total,
        l_inf=1.8,
        a=2.5,
        alpha=0.7,
        x0=0.02,
        schedule="constant",
        noise=0.004,
        pathology="early_plateau",
        at=0.25,
        seed=3,
    )


def learning_curve(total: int = 2000) -> CurveSpec:
    return CurveSpec(
        total_steps=total, l_inf=1.6, a=2.5, alpha=0.8, x0=0.05, schedule="constant", noise=0.004, seed=11
    )


PLATEAU_RELEASE = {
    "plateau": {"probability": 0.6, "for": "0s", "action": "Release"},
    "quotaRelease": {"checkpointFirst": True, "checkpointTimeout": "60s", "releaseOnTimeout": False},
}


@pytest.fixture
def cluster(admin_api: Any, e2e_namespace: str) -> Cluster:
    return Cluster(admin_api, e2e_namespace)


@pytest.fixture
def controller(control_plane: cp.ControlPlane, e2e_namespace: str) -> Iterator[Controller]:
    ctl = Controller(control_plane, e2e_namespace)
    yield ctl
    ctl.close()


@pytest.fixture
def admitting_queue(control_plane: cp.ControlPlane, cluster: Cluster) -> Iterator[str]:
    """Real Kueue admits the test's Workloads (LocalQueue ``queue``): the advisor judges only
    admitted jobs, so a Workload nobody admits would be pending for good."""
    with admitting(control_plane, cluster.ns) as cq:
        yield cq


@pytest.fixture
def policy_cleanup(control_plane: cp.ControlPlane) -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        control_plane.delete("advisor.trainjob-advisor.io/v1alpha1", "AdvisorPolicy", name)


def feed(
    cluster: Cluster,
    job: str,
    spec: CurveSpec,
    steps: range,
    *,
    t0: float,
    dt: float = 5.0,
    pause: float = 0.05,
    extra: Callable[[int], list[dict[str, str]]] | None = None,
) -> float:
    """Report ``steps`` with a reporter clock advancing ``dt`` per report; returns its last time."""
    at = t0
    for i, step in enumerate(steps):
        at = t0 + i * dt
        cluster.report_step(job, spec, step, at, extra(step) if extra else ())
        time.sleep(pause)
    return at


# ------------------------------------------------------------------------------------ scenario 1
def test_forecast_appears_tracks_the_truth_and_kubectl_shows_the_columns(
    control_plane: cp.ControlPlane, cluster: Cluster, controller: Controller, admin_api: Any
) -> None:
    spec = learning_curve()
    job = cluster.create_trainjob("llm")
    t0 = time.time() - 300  # the reporter clock ends about now
    dt = 5.0  # reporter clock: 20 steps every 5 s -> 4 steps/s
    last = feed(cluster, "llm", spec, range(20, 1220, 20), t0=t0, dt=dt)
    tjf = wait_for(
        lambda: (
            (f := cluster.forecast("llm"))
            and f.get("status", {}).get("progress", {}).get("step") == 1200
            and f["status"].get("forecast")
            and f
        ),
        "the TrainJobForecast to reflect step 1200",
    )
    status = tjf["status"]
    assert tjf["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert status["summary"]["progress"] == "60%"
    fc = status["forecast"]
    truth_final = float(spec.clean(1.0))
    assert fc["finalLoss"]["p10"] - 0.05 <= truth_final <= fc["finalLoss"]["p90"] + 0.05, (
        fc["finalLoss"],
        truth_final,
    )
    truth_eta = (spec.total_steps - 1200) / (20 / dt)
    assert fc["etaSeconds"] is not None and abs(fc["etaSeconds"]["mean"] - truth_eta) <= 0.25 * truth_eta
    hist = decode_history(status["history"])
    assert hist["steps"] and hist["steps"][-1] == 1200 and last > t0
    assert "history" not in json.loads(status["coreState"])  # stored once, beside the core state
    # the printer columns, as `kubectl get tjf` renders them (server-side Table)
    path = f"/apis/advisor.trainjob-advisor.io/v1alpha1/namespaces/{cluster.ns}/trainjobforecasts"
    url = f"{admin_api.configuration.host}{path}"
    resp = admin_api.rest_client.pool_manager.request(
        "GET", url, headers={"Accept": "application/json;as=Table;g=meta.k8s.io;v=v1"}
    )
    table = json.loads(resp.data)
    assert [c["name"].upper() for c in table["columnDefinitions"] if c["priority"] == 0] == [
        "NAME",
        "JOB",
        "PROGRESS",
        "ETA",
        "LOSS",
        "PLATEAU",
        "STATE",
        "ADVICE",
        "AGE",
    ]
    (row,) = table["rows"]
    assert row["cells"][:3] == ["llm", "llm", "60%"]
    kubectl = control_plane.binaries.kubectl if getattr(control_plane.binaries, "kubectl", None) else None
    if kubectl:
        out = subprocess.run(
            [str(kubectl), f"--kubeconfig={control_plane.admin_kubeconfig}", "get", "tjf", "-n", cluster.ns],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        head = ["NAME", "JOB", "PROGRESS", "ETA", "LOSS", "PLATEAU", "STATE", "ADVICE", "AGE"]
        assert out.split()[:9] == head


def _step(forecast: dict) -> Any:
    return ((forecast.get("status") or {}).get("progress") or {}).get("step")


def test_forecast_status_names_the_generation_it_observed_and_follows_a_spec_edit(
    cluster: Cluster, controller: Controller
) -> None:
    """Kubernetes' convention on the real API server: ``status.observedGeneration`` and each
    condition's equal ``metadata.generation``; an edit of the spec is observed by the next write."""
    spec = learning_curve()
    cluster.create_trainjob("gen")
    t0 = time.time() - 120
    feed(cluster, "gen", spec, range(20, 420, 20), t0=t0)
    first = wait_for(
        lambda: (f := cluster.forecast("gen")) and _step(f) == 400 and f,
        "the TrainJobForecast to reflect step 400",
    )
    assert first["metadata"]["generation"] == 1 and first["status"]["observedGeneration"] == 1
    conditions = {c["type"]: c for c in first["status"]["conditions"]}
    assert set(conditions) == {"Forecasting", "Actionable"}
    assert all(c["observedGeneration"] == 1 for c in conditions.values())
    edited = cluster.custom.patch_namespaced_custom_object(
        *ADVISOR, cluster.ns, "trainjobforecasts", "gen", {"spec": {"jobRef": {"apiVersion": "edited/v1"}}}
    )
    assert edited["metadata"]["generation"] == 2 and edited["status"]["observedGeneration"] == 1
    feed(cluster, "gen", spec, range(440, 480, 20), t0=t0 + 110)
    after = wait_for(
        lambda: (f := cluster.forecast("gen")) and f["status"].get("observedGeneration") == 2 and f,
        "the status to observe generation 2",
    )
    assert all(c["observedGeneration"] == 2 for c in after["status"]["conditions"])
    assert after["status"]["progress"]["step"] == 460


# ------------------------------------------------------------------------------------ scenario 2
def test_recommend_policy_advises_with_an_event_and_changes_nothing(
    control_plane: cp.ControlPlane,
    cluster: Cluster,
    admitting_queue: str,
    controller: Controller,
    policy_cleanup: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name = f"rec-{cluster.ns[-6:]}"
    cluster.apply_policy(control_plane, name, "Recommend", **PLATEAU_RELEASE)
    policy_cleanup.append(name)
    job = cluster.create_trainjob("flat", queue="queue")
    wl = cluster.create_workload(job)
    wait_for(lambda: workload_admitted(cluster.custom, cluster.ns, wl), "Kueue to admit the job")
    pods = cluster.create_pods("flat")
    before = {
        "job": job["metadata"]["resourceVersion"],
        "wl": cluster.workload(wl)["metadata"]["resourceVersion"],
    }
    feed(cluster, "flat", plateau_curve(), range(20, 1400, 20), t0=time.time() - 140, dt=2.0)
    wait_for(lambda: "Recommendation" in cluster.reasons("flat"), "a Recommendation Event")
    tjf = cluster.forecast("flat")
    assert tjf is not None
    rec = tjf["status"]["recommendation"]
    assert rec["policy"] == name and rec["mode"] == "Recommend" and rec["advice"]
    assert all(a["outcome"] == "recommended" for a in tjf["status"]["actions"])
    time.sleep(3)  # give a wrong controller time to misbehave
    assert cluster.workload(wl)["metadata"]["resourceVersion"] == before["wl"]
    assert cluster.workload(wl)["spec"].get("active", True) is True
    assert all(cluster.pod_annotation(p) is None for p in pods)
    got = cluster.custom.get_namespaced_custom_object(*TRAINER[:2], cluster.ns, TRAINER[2], "flat")
    assert got["metadata"]["generation"] == job["metadata"]["generation"]  # spec untouched
    assert set(cluster.reasons("flat")) <= {"Recommendation", "LearningState"}
    # the policy's own status says what it is doing (the figures the CRD schema keeps)
    policy = wait_for(
        lambda: (
            (p := cluster.custom.get_cluster_custom_object(*ADVISOR, "advisorpolicies", name))
            and (p.get("status") or {}).get("jobsMatched")
            and p
        ),
        "the AdvisorPolicy figures",
    )
    assert policy["status"]["jobsMatched"] == 1 and policy["status"]["matchedJobs"] == [f"{cluster.ns}/flat"]
    assert policy["status"]["actionsTaken"] == 0  # Recommend mode takes none
    selected = {c["type"]: c for c in policy["status"].get("conditions") or []}
    assert selected["JobsSelected"]["status"] == "True" and selected["Valid"]["status"] == "True"
    # a policy whose namespace is a typo selects nothing and says so, valid all the same
    typo = f"typo-{cluster.ns[-6:]}"
    control_plane.apply(
        {
            "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
            "kind": "AdvisorPolicy",
            "metadata": {"name": typo},
            "spec": {
                "mode": "Recommend",
                "selector": {"namespaces": [f"{cluster.ns}-typo"]},
                "rules": PLATEAU_RELEASE,
            },
        }
    )
    policy_cleanup.append(typo)

    def _jobs_selected() -> dict[str, Any] | None:
        got = cluster.custom.get_cluster_custom_object(*ADVISOR, "advisorpolicies", typo)
        conds = {c["type"]: c for c in (got.get("status") or {}).get("conditions") or []}
        return conds if "JobsSelected" in conds and "Valid" in conds else None

    conds = wait_for(_jobs_selected, "the JobsSelected condition of a policy selecting nothing")
    assert conds["Valid"]["status"] == "True"
    assert (conds["JobsSelected"]["status"], conds["JobsSelected"]["reason"]) == (
        "False",
        "NamespacesNotFound",
    )
    assert f"{cluster.ns}-typo" in conds["JobsSelected"]["message"]
    # a policy the schema lets through but the controller refuses (minInterval above maxInterval):
    # its Valid condition and one Warning Event on it, where ``kubectl describe`` shows them
    refused = f"refused-{cluster.ns[-6:]}"
    control_plane.apply(
        {
            "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
            "kind": "AdvisorPolicy",
            "metadata": {"name": refused},
            "spec": {
                "mode": "Recommend",
                "selector": {"namespaces": [f"{cluster.ns}-none"]},
                "rules": {"checkpoint": {"minInterval": "5h", "maxInterval": "1h"}},
            },
        }
    )
    policy_cleanup.append(refused)
    warned = wait_for(
        lambda: [
            e
            for e in cluster.core.list_namespaced_event(
                "default", field_selector=f"involvedObject.name={refused}"
            ).items
            if e.reason == "InvalidPolicy"
        ],
        "the InvalidPolicy Event of a policy the controller refuses",
    )
    assert warned[0].type == "Warning" and "minInterval" in warned[0].message
    # as a cluster-scoped object's: in ``default``, its reference without a namespace
    assert warned[0].involved_object.kind == "AdvisorPolicy" and not warned[0].involved_object.namespace
    # the same policy as a draft, explained on the live job read from the API server (policy
    # explain --job: its TrainJobForecast's history and rule memory, the queues), decides as the
    # controller does
    from advisor.cli import main

    draft = tmp_path / "draft.yaml"
    draft.write_text(
        json.dumps(
            {
                "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
                "kind": "AdvisorPolicy",
                "metadata": {"name": "draft"},
                "spec": {
                    "mode": "Recommend",
                    "selector": {"namespaces": [cluster.ns]},
                    "safety": {"minRuntime": "0s", "cooldown": "1s", "minForecastPoints": 10},
                    "rules": PLATEAU_RELEASE,
                },
            }
        )
    )
    capsys.readouterr()
    argv = ["policy", "explain", str(draft), "--job", f"{cluster.ns}/flat", "--json"]
    assert main([*argv, "--kubeconfig", str(control_plane.admin_kubeconfig)]) == 0
    live = json.loads(capsys.readouterr().out)
    status = cluster.forecast("flat")["status"]["recommendation"]  # type: ignore[index]
    assert live["advice"] == status["advice"]
    assert [(a["kind"], a["rule"]) for a in live["actions"]] == [
        (a["kind"], a["rule"]) for a in status["actions"]
    ]


def _train_and_evaluate(
    cluster: Cluster, job: str, *, train: Callable[[int], float], evaluate: Callable[[int], float]
) -> None:
    """Create ``job`` and report steps 20..1480 of 2000, an evaluation every 100 steps (repeated in
    the reports after it, as HF's callback merges the last one)."""
    cluster.create_trainjob(job)
    # the controller watches before the reports start (on a just-started API server its first
    # watch can be refused while storage initialises, and reports sent meanwhile are never seen)
    wait_for(lambda: cluster.forecast(job), "the controller to see the job")
    total, at = 2000, time.time() - 300
    evaluation: list[dict[str, str]] = []
    for step in range(20, 1500, 20):
        if step % 100 == 0:
            evaluation = [
                {"name": "eval_loss", "value": f"{evaluate(step):.6f}"},
                {"name": "eval_runtime", "value": f"{3.0 + step / 1e4:.4f}"},
            ]
        metrics = [
            {"name": "current_step", "value": str(step)},
            {"name": "total_steps", "value": str(total)},
            {"name": "loss", "value": f"{train(step):.6f}"},
            *evaluation,
        ]
        cluster.report(job, metrics, at, percent=100 * step // total)
        at += 2.0
        time.sleep(0.03)


def test_falling_train_loss_with_rising_eval_loss_is_overfitting_with_an_event_naming_the_best_step(
    control_plane: cp.ControlPlane, cluster: Cluster, controller: Controller, policy_cleanup: list[str]
) -> None:
    """A fine-tune past its best eval: STATE overfitting, a LearningState Event, and a
    recommendation of the overfitting rule that names the step of the best eval loss."""
    name = f"ovf-{cluster.ns[-6:]}"
    cluster.apply_policy(control_plane, name, "Recommend", overfitting={"probability": 0.6, "for": "0s"})
    policy_cleanup.append(name)
    best = 600
    _train_and_evaluate(
        cluster,
        "ft",
        train=lambda step: 0.3 + 2.0 * math.exp(-step / 400),
        # a U with its minimum at step 600
        evaluate=lambda step: 0.5 + 0.25 * ((step - best) / best) ** 2 * (1.0 if step < best else 0.6),
    )
    tjf = wait_for(
        lambda: (
            (f := cluster.forecast("ft"))
            and (f.get("status") or {}).get("state") == "overfitting"
            and any(a["rule"] == "overfitting" for a in f["status"]["recommendation"]["actions"])
            and f
        ),
        "state overfitting and the overfitting rule's recommendation",
        timeout=90,
    )
    state = tjf["status"]["learningState"]
    assert state["label"] == "overfitting" and state["metric"] == "eval_loss" and state["bestStep"] == best
    # the job reports no eval step: the best evaluation came with the report at step 600 and was
    # made after the report before it, which the reason names with it
    after = state["bestMadeAfter"]
    assert 0 < after < best
    (action,) = [a for a in tjf["status"]["recommendation"]["actions"] if a["rule"] == "overfitting"]
    assert f"keep the checkpoint saved between steps {after + 1} and {best}" in action["reason"]
    wait_for(lambda: "LearningState" in cluster.reasons("ft"), "a LearningState Event")
    history = decode_history(tjf["status"]["history"])
    assert history["evals"]["series"]["eval_loss"]["steps"][:3] == [100, 200, 300]


def test_a_rhoai_job_whose_loss_went_nan_reads_diverging_as_a_trainerstatus_job_does(
    control_plane: cp.ControlPlane, cluster: Cluster, controller: Controller, policy_cleanup: list[str]
) -> None:
    """OpenShift AI's Trainer writes a NaN or infinite metric as null in its trainerStatus
    annotation. Read as "no loss", a run whose loss went NaN read ``learning`` on its last finite
    loss and the divergence rule never spoke; now it reads as the same run does through
    ``status.trainerStatus``: diverging, with the rule's recommendation."""
    name = f"nan-{cluster.ns[-6:]}"
    cluster.apply_policy(control_plane, name, "Recommend", divergence={"probability": 0.95, "for": "10m"})
    policy_cleanup.append(name)
    cluster.create_trainjob("rhoai")
    wait_for(lambda: cluster.forecast("rhoai"), "the controller to see the job")
    total, at = 2000, time.time() - 300
    for step in range(20, 800, 20):
        loss = None if step > 700 else 0.3 + 2.0 * math.exp(-step / 400)
        doc = {
            "progressPercentage": 100 * step // total,
            "currentStep": step,
            "totalSteps": total,
            "trainMetrics": {"loss": loss, "learning_rate": 1e-4},
            "lastUpdatedTime": rfc3339(at),
        }
        cluster.custom.patch_namespaced_custom_object(
            *TRAINER[:2],
            cluster.ns,
            TRAINER[2],
            "rhoai",
            {"metadata": {"annotations": {"trainer.opendatahub.io/trainerStatus": json.dumps(doc)}}},
        )
        at += 2.0
        time.sleep(0.03)
    # the state turns at the third non-finite report (760), which may be written before the last
    # one (780) is read: the wait is for both, the step being the last report's though its loss
    # is no number
    tjf = wait_for(
        lambda: (
            (f := cluster.forecast("rhoai"))
            and (f.get("status") or {}).get("state") == "diverging"
            and any(a["rule"] == "divergence" for a in f["status"]["recommendation"]["actions"])
            and f["status"].get("progress", {}).get("step") == 780
            and f
        ),
        "state diverging, the divergence rule's recommendation and the last report's step",
        timeout=90,
    )
    assert tjf["status"]["progress"]["step"] == 780


def test_flat_train_loss_with_rising_eval_loss_is_a_plateau_naming_the_best_step(
    control_plane: cp.ControlPlane, cluster: Cluster, controller: Controller, policy_cleanup: list[str]
) -> None:
    """The training loss has stopped falling while the eval loss climbs past its best: not
    overfitting (that needs a falling training loss), not a divergence, but no improvement left in
    the judged eval metric; the plateau rule recommends, naming the step of the best eval loss."""
    name = f"evr-{cluster.ns[-6:]}"
    cluster.apply_policy(control_plane, name, "Recommend", plateau={"probability": 0.8, "for": "0s"})
    policy_cleanup.append(name)
    best = 600
    _train_and_evaluate(
        cluster,
        "flat",
        train=lambda step: 0.3 + 2.0 * math.exp(-step / 60) + 0.002 * math.sin(step),  # flat from ~400
        # rising by 2% of its best per evaluation after step 600
        evaluate=lambda step: (
            0.5 + 0.25 * ((step - best) / best) ** 2
            if step < best
            else 0.5 * (1 + 0.02 * (step - best) / 100)
        ),
    )
    tjf = wait_for(
        lambda: (
            (f := cluster.forecast("flat"))
            and any(
                a["rule"] == "plateau"
                for a in (f.get("status") or {}).get("recommendation", {}).get("actions", [])
            )
            and f
        ),
        "the plateau rule's recommendation on the rising eval loss",
        timeout=90,
    )
    (action,) = [a for a in tjf["status"]["recommendation"]["actions"] if a["rule"] == "plateau"]
    after = tjf["status"]["learningState"]["bestMadeAfter"]
    assert "eval_loss" in action["reason"] and f"between steps {after + 1} and {best}" in action["reason"]
    assert tjf["status"]["learningState"]["label"] in ("plateaued", "overfitting")


# ------------------------------------------------------------------------------------ scenario 3
def _play_training_side(cluster: Cluster, job: str, pods: list[str], spec: CurveSpec, t0: float) -> str:
    """Report progress until a checkpoint request shows up on the pods, then acknowledge it."""
    request: str | None = None
    step, at = 20, t0
    while request is None and step < spec.total_steps:
        cluster.report_step(job, spec, step, at)
        request = cluster.pod_annotation(pods[0])
        step, at = step + 20, at + 2.0
        time.sleep(0.05)
    assert request, "no checkpoint request was made"
    assert all(cluster.pod_annotation(p) == request for p in pods)
    cluster.report_step(
        job,
        spec,
        step,
        at + 2,
        [
            {"name": "last_checkpoint_step", "value": str(step)},
            {"name": "last_checkpoint_request", "value": request},
        ],
    )
    return request


def test_apply_policy_checkpoints_acknowledges_then_releases_the_workload(
    control_plane: cp.ControlPlane,
    cluster: Cluster,
    admitting_queue: str,
    controller: Controller,
    policy_cleanup: list[str],
) -> None:
    name = f"apply-{cluster.ns[-6:]}"
    cluster.apply_policy(control_plane, name, "Apply", **PLATEAU_RELEASE)
    policy_cleanup.append(name)
    job = cluster.create_trainjob("flat", queue="queue")
    wl = cluster.create_workload(job)
    wait_for(lambda: workload_admitted(cluster.custom, cluster.ns, wl), "Kueue to admit the job")
    pods = cluster.create_pods("flat")
    request = _play_training_side(cluster, "flat", pods, plateau_curve(), time.time() - 150)
    wait_for(lambda: cluster.workload(wl)["spec"].get("active") is False, "the Workload to be deactivated")
    reasons = wait_for(lambda: (r := cluster.reasons("flat")) and "QuotaReleased" in r and r, "the Events")
    # Events have one-second timestamps, so their order is checked on the action log below
    actions = sorted(r for r in reasons if r != "LearningState")  # the state's own Events aside
    assert actions == ["CheckpointAcknowledged", "CheckpointRequested", "QuotaReleased"], reasons
    status = wait_for(
        lambda: (
            (f := cluster.forecast("flat"))
            and f["status"]["pendingActions"] == "{}"
            and any(a["kind"] == "release-quota" for a in f["status"]["actions"])
            and f["status"]
        ),
        "the release to be recorded",
    )
    outcomes = {(a["kind"], a["requestId"] == request): a["outcome"] for a in status["actions"]}
    assert outcomes[("checkpoint", True)] == "acknowledged"
    assert outcomes[("release-quota", False)] == "done"
    kinds = [a["kind"] for a in status["actions"]]
    assert kinds.index("checkpoint") < kinds.index("release-quota")  # released only after the checkpoint
    got = cluster.custom.get_namespaced_custom_object(*TRAINER[:2], cluster.ns, TRAINER[2], "flat")
    assert not got["spec"].get("suspend")  # never suspended directly: Kueue does that


def test_a_job_being_deleted_is_not_acted_on_while_a_finalizer_holds_it(
    control_plane: cp.ControlPlane,
    cluster: Cluster,
    admitting_queue: str,
    controller: Controller,
    policy_cleanup: list[str],
) -> None:
    """A TrainJob deleted while a finalizer holds it (``deletionTimestamp`` set) still reports and
    its Workload still holds quota: it was judged as a running job, asked for a checkpoint and
    released. Its twin on the same curve, not deleted, is the control: it is released."""
    name = f"deleting-{cluster.ns[-6:]}"
    cluster.apply_policy(control_plane, name, "Apply", **PLATEAU_RELEASE)
    policy_cleanup.append(name)
    wls: dict[str, str] = {}
    for job in ("flat", "going"):
        wls[job] = cluster.create_workload(cluster.create_trainjob(job, queue="queue"))
        wait_for(
            lambda w=wls[job]: workload_admitted(cluster.custom, cluster.ns, w), "Kueue to admit the job"
        )
    cluster.custom.patch_namespaced_custom_object(
        *TRAINER[:2], cluster.ns, TRAINER[2], "going", {"metadata": {"finalizers": ["example.com/hold"]}}
    )
    cluster.custom.delete_namespaced_custom_object(*TRAINER[:2], cluster.ns, TRAINER[2], "going")
    pods, going_pods = cluster.create_pods("flat"), cluster.create_pods("going")
    spec, step, at = plateau_curve(), 20, time.time() - 150
    request: str | None = None
    while request is None and step < spec.total_steps:
        for job in ("flat", "going"):
            cluster.report_step(job, spec, step, at)
        request = cluster.pod_annotation(pods[0])
        step, at = step + 20, at + 2.0
        time.sleep(0.05)
    assert request, "no checkpoint request was made to the control"
    ack = [
        {"name": "last_checkpoint_step", "value": str(step)},
        {"name": "last_checkpoint_request", "value": request},
    ]
    cluster.report_step("flat", spec, step, at + 2, ack)
    wait_for(lambda: cluster.workload(wls["flat"])["spec"].get("active") is False, "the control's release")
    status = wait_for(
        lambda: (f := cluster.forecast("going")) and f["status"].get("state") == "finished" and f["status"],
        "the deleted job to read finished",
    )
    assert "being deleted" in json.dumps(status), status.get("summary")
    assert not status.get("actions"), status.get("actions")
    assert cluster.workload(wls["going"])["spec"].get("active", True) is True
    assert all(cluster.pod_annotation(p) is None for p in going_pods)


@pytest.mark.kueue
def test_apply_release_frees_real_kueue_quota_for_a_pending_job(
    control_plane: cp.ControlPlane, cluster: Cluster, controller: Controller, policy_cleanup: list[str]
) -> None:
    cq = f"gpu-{cluster.ns[-6:]}"
    control_plane.apply(queue_objects(cq, cluster.ns))
    name = f"kq-{cluster.ns[-6:]}"
    policy_cleanup.append(name)
    try:
        flat = cluster.create_trainjob("flat", queue="queue")
        wl_flat = cluster.create_workload(flat)

        def admitted(w: str) -> bool:
            conds = (cluster.workload(w).get("status") or {}).get("conditions") or []
            return any(c["type"] == "Admitted" and c["status"] == "True" for c in conds)

        wait_for(lambda: admitted(wl_flat), "Kueue to admit the first job")
        waiting = cluster.create_trainjob("waiting", queue="queue")
        wl_wait = cluster.create_workload(waiting)
        time.sleep(2)
        assert not admitted(wl_wait)  # no quota left
        cluster.apply_policy(control_plane, name, "Apply", **PLATEAU_RELEASE)
        pods = cluster.create_pods("flat")
        _play_training_side(cluster, "flat", pods, plateau_curve(), time.time() - 150)
        wait_for(
            lambda: cluster.workload(wl_flat)["spec"].get("active") is False, "the Workload to be deactivated"
        )
        evicted = wait_for(
            lambda: next(
                (
                    c
                    for c in cluster.workload(wl_flat)["status"].get("conditions", [])
                    if c["type"] == "Evicted" and c["status"] == "True"
                ),
                None,
            ),
            "Kueue to evict the deactivated workload",
        )
        assert evicted["reason"] == "Deactivated"
        # play the TrainJob integration: suspend the job, then release the reservation (see e2e-components.md)
        cluster.custom.patch_namespaced_custom_object(
            *TRAINER[:2], cluster.ns, TRAINER[2], "flat", {"spec": {"suspend": True}}
        )
        release_reservation(cluster.custom, cluster.ns, wl_flat)
        wait_for(lambda: admitted(wl_wait), "Kueue to admit the pending job on the freed quota")
    finally:
        control_plane.delete_namespace(cluster.ns)
        control_plane.delete("kueue.x-k8s.io/v1beta2", "ClusterQueue", cq, wait_s=30)
        control_plane.delete("kueue.x-k8s.io/v1beta2", "ResourceFlavor", cq, wait_s=30)


# ------------------------------------------------------------------------------------ scenario 4
CRASHING_CONTROLLER = textwrap.dedent("""
    import asyncio, os, sys
    from advisor.controller.cliutil import configure_logging
    from advisor.controller.engine import EngineConfig
    from advisor.controller.operator import run_operator
    from advisor.controller.operator_options import OperatorOptions

    def arm(engine):
        def die(*args, **kwargs):  # the request is recorded; the Workload patch never happens
            os._exit(137)
        engine.actuator.finish = die

    fast = EngineConfig(write_interval_s=0.5, forecast_interval_s=0.5, evaluate_interval_s=1.0)
    options = OperatorOptions(kubeconfig=sys.argv[1], namespaces=(sys.argv[2],), metrics_port=None,
                              watch_pytorchjobs=False, engine=fast)
    configure_logging("text", "info")
    asyncio.run(run_operator(options, on_engine=arm))
""")


def test_restart_between_request_recorded_and_workload_patched_completes_exactly_once(
    control_plane: cp.ControlPlane,
    cluster: Cluster,
    admitting_queue: str,
    policy_cleanup: list[str],
    tmp_path: Path,
) -> None:
    name = f"crash-{cluster.ns[-6:]}"
    rules = {
        "plateau": {"probability": 0.6, "for": "0s", "action": "Release"},
        "quotaRelease": {"checkpointFirst": False},
    }
    cluster.apply_policy(control_plane, name, "Apply", **rules)
    policy_cleanup.append(name)
    job = cluster.create_trainjob("flat", queue="queue")
    wl = cluster.create_workload(job)
    wait_for(lambda: workload_admitted(cluster.custom, cluster.ns, wl), "Kueue to admit the job")
    root = Path(__file__).resolve().parents[2]
    log_path = tmp_path / "crashing-controller.log"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-c", CRASHING_CONTROLLER, str(control_plane.controller_kubeconfig), cluster.ns],
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
        try:
            spec, t0, step = plateau_curve(), time.time() - 200, 20
            cluster.report_step("flat", spec, step, t0 + step / 10)
            wait_for(lambda: proc.poll() is not None or cluster.forecast("flat"), "the controller to start")
            while proc.poll() is None and step <= 1400:  # plateaued from step 500; 70% done at the end
                cluster.report_step("flat", spec, step, t0 + step / 10)
                step += 20
                time.sleep(0.1)
            try:
                code = proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                code = None
            assert code == 137, log_path.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    saved = cluster.forecast("flat")
    assert saved is not None
    ((rid, entry),) = json.loads(saved["status"]["pendingActions"]).items()
    assert entry["stage"] == "recorded" and entry["kind"] == "release-quota"
    assert cluster.workload(wl)["spec"].get("active", True) is True  # died before the patch
    history_before = decode_history(saved["status"]["history"])
    rv_before = cluster.workload(wl)["metadata"]["resourceVersion"]

    ctl = Controller(control_plane, cluster.ns)
    try:
        wait_for(lambda: cluster.workload(wl)["spec"].get("active") is False, "the resumed release")
        status = wait_for(
            lambda: (f := cluster.forecast("flat")) and f["status"]["pendingActions"] == "{}" and f["status"],
            "the action to be closed",
        )
        time.sleep(3)  # more evaluations must not repeat it
        releases = [a for a in status["actions"] if a["kind"] == "release-quota"]
        assert [(a["requestId"], a["outcome"]) for a in releases] == [(rid, "done")]
        assert cluster.reasons("flat").count("QuotaReleased") == 1
        wl_obj = cluster.workload(wl)
        assert int(wl_obj["metadata"]["resourceVersion"]) > int(rv_before)
        history_after = decode_history(cluster.forecast("flat")["status"]["history"])
        kept = len(history_before["steps"])  # nothing lost: the old points, then the new ones
        assert history_after["steps"][:kept] == history_before["steps"]
        assert history_after["losses"][:kept] == history_before["losses"]
        record = ctl.engine.core.record(f"{cluster.ns}/flat") if ctl.engine else None
        assert record is not None and record.history.last is not None and record.history.last.step >= 20
    finally:
        ctl.close()


# ------------------------------------------------------------------------------------ scenario 5
def test_garbage_progress_is_survived_warned_about_and_never_stored(
    cluster: Cluster, controller: Controller
) -> None:
    spec = learning_curve()
    cluster.create_trainjob("junk")
    t0 = time.time() - 200
    at = feed(cluster, "junk", spec, range(20, 420, 20), t0=t0)
    good = wait_for(
        lambda: (f := cluster.forecast("junk")) and f["status"]["progress"]["step"] == 400 and f,
        "the good history",
    )
    good_hist = decode_history(good["status"]["history"])
    garbage: list[list[dict[str, str]]] = [
        [{"name": "current_step", "value": "420"}, {"name": "loss", "value": "NaN"}],
        [{"name": "current_step", "value": "banana"}, {"name": "loss", "value": "-inf"}],
        [{"name": "current_step", "value": "440"}, {"name": "loss", "value": "1e999"}],
        [{"name": f"junk_metric_{i}", "value": "x" * 64} for i in range(255)]
        + [{"name": "current_step", "value": "460"}],
        [{"name": "current_step", "value": "100"}, {"name": "loss", "value": "3.0"}],  # backwards: a restart
        [{"name": "current_step", "value": "-5"}, {"name": "loss", "value": "0.1"}],
    ]
    for i, metrics in enumerate(garbage):
        cluster.report("junk", metrics, at + 5 * (i + 1))
        time.sleep(0.3)
    huge = json.dumps(
        {"currentStep": 480, "totalSteps": "lots", "trainMetrics": {f"m{i}": "x" * 50 for i in range(3000)}}
    )
    cluster.custom.patch_namespaced_custom_object(
        *TRAINER[:2],
        cluster.ns,
        TRAINER[2],
        "junk",
        {"metadata": {"annotations": {"trainer.opendatahub.io/trainerStatus": huge[:200_000]}}},
    )
    cluster.report_step("junk", spec, 120, at + 60)
    assert controller.alive
    status = wait_for(
        lambda: (f := cluster.forecast("junk")) and f["status"]["progress"]["step"] == 120 and f["status"],
        "the controller to keep going after the garbage",
    )
    core = json.loads(status["coreState"])
    assert core["sampleWarnings"] > 0
    record = controller.engine.core.record(f"{cluster.ns}/junk") if controller.engine else None
    assert record is not None
    curve = record.history.curve()
    assert len(curve.segments) >= 2  # the backwards step opened a new segment
    assert all(isinstance(s, float | int) and math.isfinite(s) and s >= 0 for s in curve.steps)
    stored = decode_history(status["history"])
    assert len(json.dumps(status["history"])) < 200_000 and good_hist["steps"]
    assert all(isinstance(s, int) and s >= 0 for s in stored["steps"]) and len(stored["segments"]) >= 2
    json.dumps(status, allow_nan=False)
