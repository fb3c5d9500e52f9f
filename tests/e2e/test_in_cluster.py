"""The controller started the way its Deployment starts it: the image's entrypoint with the
container's arguments from the manifests, in-cluster configuration (the service host and port in
the environment, a ServiceAccount token and CA where the kubelet would mount them), answering its
probes, serving metrics, and writing forecasts as that ServiceAccount.

The token comes from the TokenRequest API for the Deployment's ServiceAccount, as the kubelet's
projected volume gets it; the mount point is a temporary folder (``TRAINJOB_ADVISOR_SERVICEACCOUNT_DIR``),
because /var/run/secrets belongs to the machine. The two ports of the manifests are swapped for
free ones: other runs on this machine may hold 8080/8081.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import controlplane as cp
import pytest
from controller_harness import wait_for
from install_tools import MANIFESTS, Tools, by_kind, container
from k8sprocs import free_port
from kubernetes import client

POD_NAME = "trainjob-advisor-7d9f8-e2e"


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def _container_env(spec: dict[str, Any], namespace: str) -> dict[str, str]:
    """The container's env as the kubelet resolves it (the pod's name and namespace from fieldRefs)."""
    env: dict[str, str] = {}
    for var in spec.get("env") or []:
        if "value" in var:
            env[var["name"]] = str(var["value"])
        elif (var.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath") == "metadata.name":
            env[var["name"]] = POD_NAME
        elif (var.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
            env[var["name"]] = namespace
        else:
            raise AssertionError(f"the e2e pod does not resolve {var}")
    return env


@pytest.fixture
def pod(control_plane: cp.ControlPlane, admin_api: Any, tmp_path: Path) -> Iterator[dict[str, Any]]:
    objects = Tools.of(control_plane).kustomize(MANIFESTS)
    (deployment,) = by_kind(objects, "Deployment")
    spec = container(objects)
    ports = {p["name"]: p["containerPort"] for p in spec["ports"]}
    free = {name: free_port() for name in ports}

    def on_free_ports(arg: str) -> str:
        if arg.startswith("--liveness="):  # kopf's endpoint, if the manifests use it
            (name,) = [n for n, p in ports.items() if f":{p}/" in arg]
            return arg.replace(f":{ports[name]}/", f":{free[name]}/")
        return re.sub(r"^--metrics-port=\d+$", f"--metrics-port={free['metrics']}", arg)

    args = [on_free_ports(a) for a in spec["args"]]
    assert f"--metrics-port={free['metrics']}" in args

    namespace = deployment["metadata"]["namespace"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    token = client.CoreV1Api(admin_api).create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": 3600}}
    )
    mount = tmp_path / "serviceaccount"
    mount.mkdir()
    (mount / "token").write_text(token.status.token)
    (mount / "ca.crt").write_bytes((control_plane.run_dir / "pki" / "ca.crt").read_bytes())
    (mount / "namespace").write_text(namespace)

    server = urlparse(control_plane.server)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "KUBERNETES_SERVICE_HOST": str(server.hostname),
        "KUBERNETES_SERVICE_PORT": str(server.port),
        "TRAINJOB_ADVISOR_SERVICEACCOUNT_DIR": str(mount),
        **_container_env(spec, namespace),
    }
    entrypoint = Path(sys.executable).with_name("trainjob-advisor")  # the image's ENTRYPOINT
    log = tmp_path / "controller.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(entrypoint), *args], env=env, stdout=out, stderr=subprocess.STDOUT)
    probes = {
        "readiness": f"http://127.0.0.1:{free[spec['readinessProbe']['httpGet']['port']]}"
        f"{spec['readinessProbe']['httpGet']['path']}",
        "liveness": f"http://127.0.0.1:{free[spec['livenessProbe']['httpGet']['port']]}"
        f"{spec['livenessProbe']['httpGet']['path']}",
        "metrics": f"http://127.0.0.1:{free['metrics']}/metrics",
    }
    try:
        yield {"proc": proc, "log": log, "probes": probes, "args": args, "namespace": namespace}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # what the kubelet sends first
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_the_controller_runs_in_cluster_as_the_deployment_starts_it(
    pod: dict[str, Any], admin_api: Any, e2e_namespace: str
) -> None:
    from test_controller_scenarios import Cluster, learning_curve

    proc, probes = pod["proc"], pod["probes"]

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(
                f"the controller exited {proc.returncode}:\n{pod['log'].read_text()[-3000:]}"
            )
        return _get(probes["readiness"])[0] == 200

    wait_for(ready, "the readiness probe to answer 200", timeout=90, interval=0.5)
    assert _get(probes["liveness"])[0] == 200
    assert "--recommend-only" in pod["args"]  # manifests/ is the recommend-only overlay

    users = Cluster(admin_api, e2e_namespace)
    users.create_trainjob("in-cluster", nodes=1)
    spec = learning_curve()
    now = time.time()
    for i, step in enumerate(range(50, 400, 50)):
        users.report_step("in-cluster", spec, step, now - 60 * (7 - i))
    forecast = wait_for(
        lambda: (users.forecast("in-cluster") or {}).get("status", {}).get("progress"),
        "a TrainJobForecast written by the in-cluster controller",
        timeout=90,
    )
    assert forecast
    assert _get(probes["readiness"]) == (200, "leader\n")  # a standby would answer "standby"
    text = _get(probes["metrics"])[1]
    assert re.search(r"^trainjob_advisor_\w+", text, re.M), text[:500]
    logs = pod["log"].read_text()
    assert "Kueue: kueue.x-k8s.io serves" in logs  # the served version was discovered, as this identity

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, pod["log"].read_text()[-2000:]
