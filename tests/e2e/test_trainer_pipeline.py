"""The real progress pipeline: Kubeflow Trainer's own controller manager and status server.

Cast, with nothing played by the test that a cluster runs as a program: a second API server (no
Kueue) with the Trainer v2.3.0 and JobSet CRDs; Kubeflow Trainer's ``trainer-controller-manager``,
built from its Go module, "in cluster" with ``--feature-gates=TrainJobStatus=true`` and its status
server on (scripts/controlplane/trainermanager.py says what stands in for the pod it would run
in, for cert-manager and for the kubelet); our controller, as its ServiceAccount. The Trainer
reconciles a TrainJob into a JobSet whose trainer container carries the status server's URL,
CA and projected token; a local training process gets exactly that environment and those files
(the kubelet's part) and reports through **transformers' own ``KubeflowCallback``**, driven by a
small numpy training loop through the hooks HF's ``Trainer`` calls (``torch`` is not a dependency
here, so the ``Trainer`` itself cannot run). The status server verifies each token and applies
``status.trainerStatus``; our controller turns it into a TrainJobForecast.

Opt-in: the manager's cold build takes minutes, so it is built on request
(``scripts/dev-control-plane build --trainer`` or ``TRAINJOB_ADVISOR_BUILD_TRAINER=1``) and these
tests skip, saying so, while it is not cached. They also skip where ``unshare --mount`` is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import textwrap
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import controlplane as cp
import pytest
from controller_harness import ADVISOR, TRAINER, Controller, wait_for
from kubernetes import client

sys.path.insert(0, str(cp.REPO_ROOT / "scripts" / "controlplane"))
import trainermanager as tm

pytestmark = pytest.mark.slow

NS = "pipeline"
STEPS = 60
SECONDS_PER_STEP = 0.35  # 21 s of training: transformers' callback posts at most once per 5 s

# A real (tiny) training run: logistic regression by minibatch SGD on a fixed synthetic set,
# reporting through transformers' KubeflowCallback in the order HF's Trainer calls its hooks
# (on_step_end, then on_log on logging steps). Each POST that went out is printed for the test.
TRAINING_PROCESS = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    from transformers.integrations import KubeflowCallback
    from transformers.trainer_callback import TrainerControl, TrainerState

    steps, seconds_per_step = int(sys.argv[1]), float(sys.argv[2])

    class Observed(KubeflowCallback):
        def _update_status(self, progress_percent=None, estimated_time_remaining=None, metrics=None,
                           force=False):
            sent = super()._update_status(progress_percent, estimated_time_remaining, metrics, force)
            if sent or force:
                step = (metrics or {}).get("current_step")
                print(json.dumps({"sent": sent, "step": step, "progress": progress_percent}), flush=True)
            return sent

    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 8))
    y = (x @ rng.normal(size=8) + 0.5 * rng.normal(size=512) > 0).astype(float)
    w, lr, batch = np.zeros(8), 0.5, 64
    state = TrainerState(max_steps=steps, is_world_process_zero=True, logging_steps=5)
    control, callback = TrainerControl(), Observed()
    callback.on_train_begin(None, state, control)
    for step in range(1, steps + 1):
        rows = rng.choice(len(x), batch)
        p = 1.0 / (1.0 + np.exp(-x[rows] @ w))
        w -= lr * x[rows].T @ (p - y[rows]) / batch
        state.global_step, state.epoch = step, step * batch / len(x)
        callback.on_step_end(None, state, control)
        if step % state.logging_steps == 0:
            q = np.clip(1.0 / (1.0 + np.exp(-x @ w)), 1e-7, 1 - 1e-7)
            loss = float(-np.mean(y * np.log(q) + (1 - y) * np.log(1 - q)))
            callback.on_log(None, state, control, logs={"loss": round(loss, 5), "learning_rate": lr,
                                                        "epoch": state.epoch})
        time.sleep(seconds_per_step)
    callback.on_train_end(None, state, control)
    """
)


@pytest.fixture(scope="module")
def pipeline(e2e_binaries: cp.Binaries) -> Iterator[tuple[cp.ControlPlane, tm.TrainerManager]]:
    binary = e2e_binaries.trainer_manager
    if binary is None:
        error = e2e_binaries.tool_errors.get("trainer-controller-manager")
        if error:
            raise cp.HarnessError(error)
        pytest.skip(
            "Kubeflow Trainer's manager is built on request (minutes, once): "
            "scripts/dev-control-plane build --trainer, or TRAINJOB_ADVISOR_BUILD_TRAINER=1"
        )
    why_not = tm.mount_namespace_unavailable()
    if why_not:
        pytest.skip(f"the Trainer manager needs private mounts for its fixed paths: {why_not}")
    go = cp.find_go()
    run_dir = Path(tempfile.mkdtemp(prefix="trainjob-advisor-pipeline-"))
    plane = cp.ControlPlane(run_dir=run_dir / "plane", binaries=e2e_binaries)
    manager: tm.TrainerManager | None = None
    try:
        crds = [
            crd
            for crd in cp.upstream_crds(go)
            if crd["spec"]["group"] in ("trainer.kubeflow.org", "jobset.x-k8s.io")
        ]
        plane.start(crds=crds, with_kueue=False)
        plane.apply(namespace_with_default_account(NS))
        manager = tm.TrainerManager(plane, binary, go, run_dir / "trainer").start()
        yield plane, manager
    finally:
        if manager is not None:
            manager.stop()
        plane.stop()
        if os.environ.get("TRAINJOB_ADVISOR_KEEP_E2E_LOGS"):
            print(f"\npipeline logs kept in {run_dir}", file=sys.stderr)
        else:
            shutil.rmtree(run_dir, ignore_errors=True)


def namespace_with_default_account(name: str) -> list[dict[str, Any]]:
    """A namespace and its "default" ServiceAccount (made by kube-controller-manager, absent here)."""
    account = {"name": "default", "namespace": name}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": account},
    ]


def custom(plane: cp.ControlPlane) -> Any:
    return client.CustomObjectsApi(plane.api_client())


def create_trainjob(plane: cp.ControlPlane, name: str) -> None:
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 1}},
    }
    custom(plane).create_namespaced_custom_object(*TRAINER[:2], NS, TRAINER[2], body)


def get_or_none(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except client.exceptions.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def trainers_jobset(plane: cp.ControlPlane, name: str) -> dict[str, Any]:
    """The JobSet the Trainer made for TrainJob ``name``, once its ``<name>-tls-config`` exists too."""

    def made() -> dict[str, Any] | None:
        core = client.CoreV1Api(plane.api_client())
        if get_or_none(core.read_namespaced_config_map, f"{name}-tls-config", NS) is None:
            return None
        jobset: dict[str, Any] | None = get_or_none(
            custom(plane).get_namespaced_custom_object, "jobset.x-k8s.io", "v1alpha2", NS, "jobsets", name
        )
        return jobset

    jobset: dict[str, Any] = wait_for(made, f"the Trainer to reconcile TrainJob {name}", timeout=90)
    return jobset


def trainjob(plane: cp.ControlPlane, name: str) -> dict[str, Any]:
    job: dict[str, Any] = custom(plane).get_namespaced_custom_object(*TRAINER[:2], NS, TRAINER[2], name)
    return job


def status_writers(job: dict[str, Any]) -> set[str]:
    """The field managers that own ``status.trainerStatus`` on the object."""
    return {
        entry["manager"]
        for entry in job["metadata"].get("managedFields") or []
        if entry.get("subresource") == "status"
        and "f:trainerStatus" in json.dumps((entry.get("fieldsV1") or {}).get("f:status") or {})
    }


def post(manager: tm.TrainerManager, name: str, token: str | None) -> int:
    """The request the SDK and transformers' callback make, from this process, to the status server."""
    path = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs/{name}/status"
    url = f"https://127.0.0.1:{manager.status_port}{path}"
    body = {
        "trainerStatus": {
            "progressPercentage": 7,
            "metrics": [{"name": "loss", "value": "1.5"}],
            "lastUpdatedTime": datetime.now(UTC).isoformat(),
        }
    }
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    context = ssl.create_default_context(cafile=str(manager.ca_file))
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_transformers_callback_reports_through_the_trainer_status_server_into_a_forecast(
    pipeline: tuple[cp.ControlPlane, tm.TrainerManager], tmp_path: Path
) -> None:
    plane, manager = pipeline
    create_trainjob(plane, "tiny-lr")
    jobset = trainers_jobset(plane, "tiny-lr")
    pod = tm.PodView.of_jobset(plane, jobset, tmp_path / "pod")
    # what the Trainer's TrainJobStatus plugin injected: its Service, its status port, this job's path
    assert pod.env[tm.ENV_URL] == (
        f"https://{tm.SERVICE_DNS}:{manager.status_port}"
        f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs/tiny-lr/status"
    )
    assert pod.env[tm.ENV_TOKEN] == "/var/run/secrets/kubeflow/trainer/token"
    assert pod.audience == f"trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs/tiny-lr/status"
    assert "trainerStatus" not in (trainjob(plane, "tiny-lr").get("status") or {})

    controller = Controller(plane, NS)
    try:
        env = {**os.environ, **pod.env, "OPENBLAS_NUM_THREADS": "1"}
        env.pop("DISABLE_KUBEFLOW_INTEGRATION", None)
        argv = pod.argv([sys.executable, "-c", TRAINING_PROCESS, str(STEPS), str(SECONDS_PER_STEP)])
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, proc.stderr[-3000:]
        posts = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        assert posts and all(p["sent"] for p in posts), (posts, manager.log.read_text()[-3000:])
        assert posts[0]["progress"] == 0 and posts[-1]["progress"] == 100
        step_reports = [p["step"] for p in posts if p["step"] is not None]
        assert len(step_reports) >= 3, posts  # throttled to one POST per 5 s over ~21 s

        job = trainjob(plane, "tiny-lr")
        status = job["status"]["trainerStatus"]
        assert status["progressPercentage"] == 100 and status["estimatedRemainingSeconds"] == 0
        assert {m["name"] for m in status["metrics"]} >= {"loss", "learning_rate", "epoch"}
        assert status_writers(job) == {tm.FIELD_MANAGER}  # written by the status server alone

        def forecast() -> dict[str, Any] | None:
            tjf = get_or_none(
                custom(plane).get_namespaced_custom_object, *ADVISOR, NS, "trainjobforecasts", "tiny-lr"
            )
            progress = ((tjf or {}).get("status") or {}).get("progress") or {}
            return tjf if progress.get("step") == step_reports[-1] else None

        tjf = wait_for(forecast, f"a TrainJobForecast at step {step_reports[-1]}", timeout=60)
        assert tjf["status"]["progress"]["totalSteps"] == STEPS
    finally:
        controller.close()


def test_the_status_server_accepts_only_this_trainjobs_token(
    pipeline: tuple[cp.ControlPlane, tm.TrainerManager],
) -> None:
    plane, manager = pipeline
    create_trainjob(plane, "guarded")
    trainers_jobset(plane, "guarded")
    other_ns = "elsewhere"
    plane.apply(namespace_with_default_account(other_ns))
    audience = f"trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs/guarded/status"
    refused = {
        "no token": None,
        "not a JWT": "not-a-token",
        "the API server's default audience": tm.request_token(plane, NS, "default"),
        "another TrainJob's audience": tm.request_token(
            plane, NS, "default", audiences=[audience.replace("/guarded/", "/tiny-lr/")]
        ),
        "this audience, another namespace's ServiceAccount": tm.request_token(
            plane, other_ns, "default", audiences=[audience]
        ),
    }
    codes = {why: post(manager, "guarded", token) for why, token in refused.items()}
    assert codes == dict.fromkeys(refused, 403)
    assert "trainerStatus" not in (trainjob(plane, "guarded").get("status") or {})

    assert post(manager, "guarded", tm.request_token(plane, NS, "default", audiences=[audience])) == 200
    job = trainjob(plane, "guarded")
    assert job["status"]["trainerStatus"]["progressPercentage"] == 7
    assert status_writers(job) == {tm.FIELD_MANAGER}


SDK_PROCESS = textwrap.dedent(
    """
    import json
    from kubeflow.trainer import update_trainjob_status

    sent = update_trainjob_status(
        progress_percent=40, estimated_remaining_seconds=90,
        metrics={"current_step": 400, "total_steps": 1000, "loss": 0.731},
    )
    print(json.dumps({"sent": sent}), flush=True)
    """
)


def test_the_kubeflow_sdk_update_call_reaches_trainer_status(
    pipeline: tuple[cp.ControlPlane, tm.TrainerManager], tmp_path: Path
) -> None:
    """The Kubeflow SDK's own ``update_trainjob_status``, in the pod's environment. The SDK (0.5)
    pins ``kubernetes<36`` and the controller needs ``>=37``, so it cannot share the project's
    virtualenv: name an interpreter that has it in ``TRAINJOB_ADVISOR_KUBEFLOW_SDK_PYTHON``."""
    python = os.environ.get("TRAINJOB_ADVISOR_KUBEFLOW_SDK_PYTHON")
    if not python:
        pytest.skip("set TRAINJOB_ADVISOR_KUBEFLOW_SDK_PYTHON to a Python with kubeflow>=0.5 installed")
    plane, _ = pipeline
    create_trainjob(plane, "sdk-loop")
    pod = tm.PodView.of_jobset(plane, trainers_jobset(plane, "sdk-loop"), tmp_path / "pod")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | pod.env
    proc = subprocess.run(pod.argv([python, "-c", SDK_PROCESS]), env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == {"sent": True}, proc.stderr[-3000:]
    job = trainjob(plane, "sdk-loop")
    status = job["status"]["trainerStatus"]
    assert (status["progressPercentage"], status["estimatedRemainingSeconds"]) == (40, 90)
    assert {m["name"]: m["value"] for m in status["metrics"]} == {
        "current_step": "400",
        "total_steps": "1000",
        "loss": "0.731",
    }
    assert status_writers(job) == {tm.FIELD_MANAGER}
