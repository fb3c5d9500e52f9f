"""The checkpoint round trip on a real API server, with the real training helper on the pod's side.

Cast: the controller (its kopf operator on a thread, as its ServiceAccount) decides to checkpoint
a plateaued job and annotates the job's pods. The test plays the kubelet (it copies the pod's
annotations into a downward-API directory with the kubelet's atomic symlink swap) and the Trainer
status server (it turns each POST of the status-server protocol into ``status.trainerStatus``,
replacing the previous one, as the real server does). The training process is a separate Python
process running ``advisor.training``: it reports progress, hears the request through the file,
saves, and acknowledges through the status-server protocol. The controller must record the
checkpoint as acknowledged, with the request id and step the helper reported.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
    wait_for,
    workload_admitted,
)
from kubernetes import client

from advisor.protocol import ACK_REQUEST_METRIC, ACK_STEP_METRIC, CHECKPOINT_REQUEST_ANNOTATION
from advisor.training.localpod import DownwardAPIVolume

JOB = "hf-ft"
WORKLOAD = f"trainjob-{JOB}-e2e01"

# The training process: a plateauing run that reports through the status-server protocol and
# honours checkpoint requests with the plain-loop helper. argv: url, annotations, checkpoint dir.
TRAINING_PROCESS = textwrap.dedent(
    """
    import sys, time
    from advisor.training import CheckpointRequests, KubeflowStatusChannel, checkpoint_if_requested
    from simulator.curves import CurveSpec

    url, annotations, ckpt_dir = sys.argv[1:4]
    spec = CurveSpec(total_steps=2000, l_inf=1.8, a=2.5, alpha=0.7, x0=0.02, schedule="constant",
                     noise=0.004, pathology="early_plateau", at=0.25, seed=3)
    t0 = time.time() - 1500
    clock = {"t": t0}  # the reporter's clock: 1 s of training per report, never ahead of real time
    channel = KubeflowStatusChannel(url, use_sdk=False, min_interval_s=0.0)
    requests = CheckpointRequests(annotations, channels=[channel], reporter=True,
                                  wall_clock=lambda: clock["t"], retry_interval_s=0.2)
    steps = list(range(20, spec.total_steps, 20))
    honoured_at = None
    deadline = time.monotonic() + 180
    i = 0
    while time.monotonic() < deadline:
        step = steps[min(i, len(steps) - 1)]  # past the end: a finished run still waiting to exit
        clock["t"] = min(t0 + 1.0 * i, time.time())
        requests.update_progress(step, total_steps=spec.total_steps, metrics={"loss": spec.observed(step)})

        def save(step=step):
            with open(f"{ckpt_dir}/checkpoint-{step}.txt", "w") as fh:
                fh.write(str(step))

        request = checkpoint_if_requested(requests, step, save)
        if request is not None:
            print(f"ACK {request} {step}", flush=True)
            honoured_at = i
        else:
            requests.publish()
        if honoured_at is not None and i - honoured_at >= 10:
            break
        i += 1
        time.sleep(0.1)
    requests.flush()
    """
)


class StatusServer:
    """The Trainer status server's contract: POST ``{"trainerStatus": ...}`` replaces
    ``status.trainerStatus`` (a merge patch that nulls every field the new report lacks)."""

    FIELDS = ("progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime")

    def __init__(self, custom: client.CustomObjectsApi, namespace: str) -> None:
        self.posts: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                status = body.get("trainerStatus")
                code = 200
                if status is not None:
                    server.posts.append(status)
                    replacement = {key: status.get(key) for key in StatusServer.FIELDS}
                    try:
                        custom.patch_namespaced_custom_object_status(
                            *TRAINER[:2],
                            namespace,
                            TRAINER[2],
                            JOB,
                            {"status": {"trainerStatus": replacement}},
                            _content_type=MERGE,
                        )
                    except client.exceptions.ApiException as exc:
                        code = exc.status or 500
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = (
            f"http://127.0.0.1:{self.httpd.server_address[1]}/apis/trainer.kubeflow.org/v1alpha1/status"
        )
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Kubelet:
    """Keeps a downward-API directory in sync with one pod's annotations, as the kubelet does."""

    def __init__(self, core: client.CoreV1Api, namespace: str, pod: str, volume: DownwardAPIVolume) -> None:
        self.core, self.ns, self.pod, self.volume = core, namespace, pod, volume
        self.stop = threading.Event()
        self.synced: dict[str, str] = {}
        self.requests_seen: list[str] = []
        self.sync()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def sync(self) -> None:
        annotations = dict(self.core.read_namespaced_pod(self.pod, self.ns).metadata.annotations or {})
        if annotations != self.synced or not self.volume.path.exists():
            self.volume.write(annotations)
            self.synced = annotations
            if CHECKPOINT_REQUEST_ANNOTATION in annotations:
                self.requests_seen.append(annotations[CHECKPOINT_REQUEST_ANNOTATION])

    def _run(self) -> None:
        while not self.stop.wait(0.2):
            self.sync()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


@pytest.fixture
def controller(control_plane: cp.ControlPlane, e2e_namespace: str) -> Iterator[Controller]:
    ctl = Controller(control_plane, e2e_namespace)
    yield ctl
    ctl.close()


@pytest.fixture
def checkpoint_policy(control_plane: cp.ControlPlane, e2e_namespace: str) -> Iterator[str]:
    name = f"ack-{e2e_namespace[-6:]}"
    control_plane.apply(
        {
            "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
            "kind": "AdvisorPolicy",
            "metadata": {"name": name},
            "spec": {
                "mode": "Apply",
                "selector": {"namespaces": [e2e_namespace]},
                "safety": {"minRuntime": "0s", "cooldown": "1s", "minForecastPoints": 10},
                "rules": {
                    "plateau": {"probability": 0.6, "for": "0s", "action": "Release"},
                    "quotaRelease": {
                        "checkpointFirst": True,
                        "checkpointTimeout": "90s",
                        "releaseOnTimeout": False,
                    },
                },
            },
        }
    )
    yield name
    control_plane.delete("advisor.trainjob-advisor.io/v1alpha1", "AdvisorPolicy", name)


def _create_job_and_pods(admin: Any, namespace: str) -> list[str]:
    custom, core = client.CustomObjectsApi(admin), client.CoreV1Api(admin)
    custom.create_namespaced_custom_object(
        *TRAINER[:2],
        namespace,
        TRAINER[2],
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": JOB},
            "spec": {
                "runtimeRef": {"name": "torch-distributed-advisor"},
                "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}}},
            },
        },
    )
    job = cast(dict, custom.get_namespaced_custom_object(*TRAINER[:2], namespace, TRAINER[2], JOB))
    meta = job["metadata"]
    container = {
        "name": "node",
        "image": "trainer:latest",
        "resources": {"requests": {"nvidia.com/gpu": "8"}},
    }
    custom.create_namespaced_custom_object(
        *KUEUE,
        namespace,
        "workloads",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {
                "name": WORKLOAD,
                "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
                "ownerReferences": [
                    {
                        "apiVersion": "trainer.kubeflow.org/v1alpha1",
                        "kind": "TrainJob",
                        "name": JOB,
                        "uid": meta["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "queueName": "queue",
                "podSets": [
                    {
                        "name": "node",
                        "count": 2,
                        "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
                    }
                ],
            },
        },
    )
    pods = []
    for i in range(2):
        name = f"{JOB}-node-0-{i}"
        body = {
            "metadata": {"name": name, "labels": {"jobset.sigs.k8s.io/jobset-name": JOB}},
            "spec": {"containers": [{"name": "node", "image": "trainer:latest"}]},
        }
        core.create_namespaced_pod(namespace, client.V1Pod.from_dict(body))
        pods.append(name)
    return pods


def test_controller_request_is_honoured_by_the_training_helper_and_recorded(
    control_plane: cp.ControlPlane,
    admin_api: Any,
    controller_api: Any,
    e2e_namespace: str,
    controller: Controller,
    checkpoint_policy: str,
    tmp_path: Path,
) -> None:
    with admitting(control_plane, e2e_namespace):
        _honoured_and_recorded(admin_api, controller_api, e2e_namespace, tmp_path)


def _honoured_and_recorded(admin_api: Any, controller_api: Any, e2e_namespace: str, tmp_path: Path) -> None:
    pods = _create_job_and_pods(admin_api, e2e_namespace)
    admin_custom = client.CustomObjectsApi(admin_api)
    wait_for(lambda: workload_admitted(admin_custom, e2e_namespace, WORKLOAD), "Kueue to admit the job")
    status_server = StatusServer(client.CustomObjectsApi(admin_api), e2e_namespace)
    kubelet = Kubelet(
        client.CoreV1Api(admin_api), e2e_namespace, pods[0], DownwardAPIVolume(tmp_path / "podinfo")
    )
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            TRAINING_PROCESS,
            status_server.url,
            str(kubelet.volume.path),
            str(checkpoints),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=240)
    finally:
        if process.poll() is None:
            process.kill()
        kubelet.close()
    try:
        assert process.returncode == 0, stderr
        acks = [(line.split()[1], line.split()[2]) for line in stdout.splitlines() if line.startswith("ACK ")]
        assert acks, f"the helper never saw a request: {stdout}{stderr}"
        assert len({rid for rid, _ in acks}) == len(acks), f"a request was honoured twice: {acks}"
        request_id, step = acks[0]
        # each id the helper answered came from the controller's pod annotation, via the file
        assert [rid for rid, _ in acks] == kubelet.requests_seen[: len(acks)]
        for _, saved in acks:
            assert (checkpoints / f"checkpoint-{saved}.txt").read_text() == saved
        # the acknowledgement went out through the progress channel, and stayed in every later report
        reported = [{m["name"]: m["value"] for m in post.get("metrics", [])} for post in status_server.posts]
        first = next(i for i, r in enumerate(reported) if r.get(ACK_REQUEST_METRIC) == request_id)
        assert reported[first][ACK_STEP_METRIC] == step
        assert all((r.get(ACK_REQUEST_METRIC), r.get(ACK_STEP_METRIC)) in acks for r in reported[first:])
        # the controller recorded it and went on to release (read as an admin: the controller
        # only lists and patches its forecasts, it has no `get`)
        custom = client.CustomObjectsApi(admin_api)

        def recorded() -> dict[str, Any] | None:
            forecast = cast(
                dict, custom.get_namespaced_custom_object(*ADVISOR, e2e_namespace, "trainjobforecasts", JOB)
            )
            actions = forecast.get("status", {}).get("actions", [])
            mine = [a for a in actions if a.get("kind") == "checkpoint" and a.get("requestId") == request_id]
            return forecast["status"] if mine and mine[0].get("outcome") == "acknowledged" else None

        status = wait_for(recorded, "the controller to record the acknowledged checkpoint")
        assert status["checkpoint"]["lastStep"] == int(acks[-1][1])
        workload = client.CustomObjectsApi(admin_api).get_namespaced_custom_object(
            *KUEUE, e2e_namespace, "workloads", WORKLOAD
        )
        assert workload["spec"].get("active") is False, "the release after the checkpoint did not happen"
    finally:
        status_server.close()
