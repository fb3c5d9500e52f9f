"""Kubeflow Trainer's own controller manager on the loopback control plane: the real progress path.

Why: upstream ``status.trainerStatus`` is written by one program only, the Trainer's status server
(``pkg/statusserver``, behind the alpha ``TrainJobStatus`` feature gate). Running the real manager,
built from its Go module like the other binaries, lets a training process's report travel the
whole way a cluster's does: the TrainJobStatus plugin injects the status server's URL, CA and a
projected token into the trainer container of the JobSet it creates; the training process POSTs
to that URL; the status server checks the token (OIDC discovery against the API server's issuer,
signature, expiry, the TrainJob-specific audience, the namespace claim) and server-side applies
``status.trainerStatus`` as field manager ``trainer-status``.

What stands in for the parts of a cluster that do not run here, and nothing else:

- *The pod the manager runs in.* The manager runs "in cluster": ``KUBERNETES_SERVICE_HOST/PORT``
  and its ServiceAccount's token, CA and namespace under
  ``/var/run/secrets/kubernetes.io/serviceaccount``. Upstream reads that exact path (the status
  server takes its OIDC issuer from it: ``pkg/statusserver/auth.go`` ``getClusterOIDCIssuerURL``;
  the operator namespace: ``pkg/util/cert/cert.go`` ``GetOperatorNamespace``), and its serving
  certificate from the fixed ``/tmp/k8s-webhook-server/serving-certs`` (``cert.SetupTLSConfig``).
  So the manager gets a private mount namespace (``unshare --mount``) in which ``/run`` and
  ``/tmp`` are folders of this run: nothing on the host changes.
- *cert-controller / cert-manager.* Certificate management is off (upstream's
  ``certManagement.enable: false``, "certificates must be provided externally"): a throw-away CA
  signs the serving certificate (SANs: the manager's Service name and 127.0.0.1), mounted where
  the Deployment mounts Secret ``kubeflow-trainer-webhook-cert``; the Secret itself is created
  too, because the TrainJobStatus plugin copies its ``ca.crt`` into each TrainJob's
  ``<name>-tls-config`` ConfigMap. No webhook configuration is registered with the API server
  (nothing could route its calls to a Service here), so TrainJobs are not defaulted/validated.
- *The kubelet and cluster DNS* (:class:`PodView`): for a local training process, the trainer
  container's environment and its projected volume as the Trainer wrote them into the JobSet: a
  TokenRequest with the volume's audience and expiry (not bound to a Pod object: no Pod runs, and
  the status server checks no pod claim), the ConfigMap's ``ca.crt``, both at the volume's mount
  path, and the Service name resolving to 127.0.0.1, again in a private mount namespace.

Used by tests/e2e/test_trainer_pipeline.py (opt-in build: ``scripts/dev-control-plane build
--trainer``).
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import yaml
from k8sbuild import TRAINER, Go, HarnessError, load_yaml_docs, module_info
from k8sprocs import free_port, log_tail, spawn, terminate_group, wait_until

if TYPE_CHECKING:
    from controlplane import ControlPlane

TRAINER_MODULE = "github.com/kubeflow/trainer/v2"
NAMESPACE = "kubeflow-system"  # upstream's default operator namespace
SERVICE_ACCOUNT = "kubeflow-trainer-controller-manager"
SERVICE_NAME = "kubeflow-trainer-controller-manager"  # certManagement.webhookServiceName default
WEBHOOK_SECRET = "kubeflow-trainer-webhook-cert"  # certManagement.webhookSecretName default
SERVICE_DNS = f"{SERVICE_NAME}.{NAMESPACE}.svc"
FEATURE_GATES = "TrainJobStatus=true"
# injected by the TrainJobStatus plugin (pkg/runtime/framework/plugins/trainjobstatus)
ENV_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_CA = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"
FIELD_MANAGER = "trainer-status"  # the status server's server-side-apply field owner

# sh -c argv: the folder to mount on /run, a source, its target, then the command
_IN_PRIVATE_MOUNTS = 'set -e; mount --bind "$1" /run; mount --bind "$2" "$3"; shift 3; exec "$@"'


def mount_namespace_unavailable() -> str | None:
    """Why this machine cannot give a process private mounts (None when it can)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return "unshare (util-linux) is not installed"
    probe = subprocess.run(
        [unshare, "--mount", "--propagation", "private", "--", "sh", "-c", "mount -t tmpfs none /mnt"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if probe.returncode != 0:
        return f"no private mount namespace here (unshare --mount: {probe.stderr.strip()[:200]})"
    return None


def private_mounts(run_root: Path, source: Path, target: str, argv: list[str]) -> list[str]:
    """``argv`` in its own mount namespace, where ``/run`` is ``run_root`` and ``target`` is ``source``."""
    unshare = shutil.which("unshare") or "unshare"
    return [
        unshare,
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        _IN_PRIVATE_MOUNTS,
        "sh",
        str(run_root),
        str(source),
        target,
        *argv,
    ]


def upstream_objects(go: Go) -> list[dict[str, Any]]:
    """The manager's ServiceAccount, ClusterRole and binding, and the torch ClusterTrainingRuntime,
    as upstream ships them (manifests/base), into the operator namespace."""
    base = Path(module_info(go, TRAINER_MODULE, TRAINER)["Dir"]) / "manifests" / "base"
    docs = [
        *load_yaml_docs(base / "rbac" / "service_account.yaml"),
        *load_yaml_docs(base / "rbac" / "role.yaml"),
        *load_yaml_docs(base / "rbac" / "role_binding.yaml"),
        *load_yaml_docs(base / "runtimes" / "torch_distributed.yaml"),
    ]
    for doc in docs:
        if doc["kind"] == "ServiceAccount":
            doc["metadata"]["namespace"] = NAMESPACE
        for subject in doc.get("subjects") or []:
            subject.setdefault("namespace", NAMESPACE)
    return docs


def _openssl(cwd: Path, *args: str) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise HarnessError(f"openssl {' '.join(args[:3])} failed: {proc.stderr.strip()[-300:]}")


def serving_certificates(pki: Path) -> None:
    """ca.crt, tls.crt, tls.key: the manager's Service name (as cert-controller issues it) and 127.0.0.1."""
    pki.mkdir(parents=True, exist_ok=True)
    _openssl(pki, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj",
             "/O=kubeflow-trainer/CN=kubeflow-trainer-ca", "-keyout", "ca.key", "-out", "ca.crt")  # fmt: skip
    (pki / "tls.ext").write_text(
        f"subjectAltName=DNS:{SERVICE_DNS},DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
    )
    _openssl(pki, "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={SERVICE_DNS}",
             "-keyout", "tls.key", "-out", "tls.csr")  # fmt: skip
    _openssl(pki, "x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "30", "-extfile", "tls.ext", "-out", "tls.crt")  # fmt: skip


def request_token(
    plane: ControlPlane,
    namespace: str,
    service_account: str,
    *,
    audiences: list[str] | None = None,
    expiration_s: int = 24 * 3600,
) -> str:
    """A TokenRequest, as the kubelet makes for a projected serviceAccountToken volume."""
    spec: dict[str, Any] = {"expirationSeconds": expiration_s}
    if audiences:
        spec["audiences"] = audiences
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token"
    return str(plane.dynamic().request("post", path, body=body).to_dict()["status"]["token"])


def _api_port(plane: ControlPlane) -> int:
    port = urlsplit(plane.server).port
    if port is None:
        raise HarnessError(f"no port in the API server address {plane.server}")
    return port


@dataclass
class TrainerManager:
    """The upstream manager, "in cluster" against ``plane``, with its status server on."""

    plane: ControlPlane
    binary: Path
    go: Go
    run_dir: Path
    status_port: int = 0
    health_port: int = 0
    webhook_port: int = 0
    log: Path = field(default_factory=Path)
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def ca_file(self) -> Path:
        return self.run_dir / "pki" / "ca.crt"

    def start(self) -> TrainerManager:
        """Install its identity and runtime, start it, wait until its status server answers."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.status_port, self.health_port, self.webhook_port = free_port(), free_port(), free_port()
        self.log = self.run_dir / "trainer-controller-manager.log"
        pki = self.run_dir / "pki"
        serving_certificates(pki)
        cert = {name: (pki / name).read_text() for name in ("ca.crt", "tls.crt", "tls.key")}
        self.plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        self.plane.apply(upstream_objects(self.go))
        self.plane.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "kubernetes.io/tls",
                "metadata": {"name": WEBHOOK_SECRET, "namespace": NAMESPACE},
                "stringData": cert,
            }
        )
        run_root, tmp_root = self.run_dir / "root" / "run", self.run_dir / "root" / "tmp"
        sa_dir = run_root / "secrets" / "kubernetes.io" / "serviceaccount"
        certs = tmp_root / "k8s-webhook-server" / "serving-certs"
        for directory in (sa_dir, certs):
            directory.mkdir(parents=True, exist_ok=True)
        (sa_dir / "token").write_text(request_token(self.plane, NAMESPACE, SERVICE_ACCOUNT))
        (sa_dir / "namespace").write_text(NAMESPACE)
        shutil.copyfile(self.plane.run_dir / "pki" / "ca.crt", sa_dir / "ca.crt")
        for name in ("tls.crt", "tls.key"):
            (certs / name).write_text(cert[name])
        (tmp_root / "config.yaml").write_text(yaml.safe_dump(self._configuration(), sort_keys=False))
        argv = [str(self.binary), "--config=/tmp/config.yaml", f"--feature-gates={FEATURE_GATES}"]
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(_api_port(self.plane)),
        }
        self._proc = spawn(
            private_mounts(run_root, tmp_root, "/tmp", argv), self.log, detached=False, env=env
        )
        try:
            wait_until(
                self._status_server_answers,
                timeout_s=120,
                what="the Trainer status server to answer",
                alive=self._dead,
            )
        except BaseException:
            self.stop()
            raise
        return self

    def _configuration(self) -> dict[str, Any]:
        """Upstream's controller_manager_config.yaml, on free loopback ports, one replica, certs provided."""
        return {
            "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
            "kind": "Configuration",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"port": self.webhook_port, "host": "127.0.0.1"},
            "leaderElection": {"leaderElect": False},
            "certManagement": {"enable": False},
            "statusServer": {"port": self.status_port},
        }

    def _dead(self) -> str | None:
        if self._proc is None or self._proc.poll() is None:
            return None
        return (
            f"trainer-controller-manager exited with {self._proc.returncode}; log {self.log}:\n"
            + log_tail(self.log, 30)
        )

    def _status_server_answers(self) -> bool:
        """Its catch-all handler answers a Status 404 over TLS once the server listens."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        try:
            urllib.request.urlopen(f"https://127.0.0.1:{self.status_port}/", timeout=2, context=context)
        except urllib.error.HTTPError as exc:
            return exc.code == 404 and json.loads(exc.read() or b"{}").get("reason") == "NotFound"
        except (OSError, ValueError):
            return False
        return False

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as r:
                return bool(r.status == 200)
        except (OSError, ValueError):
            return False

    def stop(self) -> None:
        """SIGTERM, and SIGKILL after 5 s: it keeps nothing that a slower shutdown would save."""
        if self._proc is not None:
            terminate_group(self._proc.pid, grace_s=5.0, popen=self._proc)
            self._proc = None


@dataclass
class PodView:
    """What the kubelet and cluster DNS would give the trainer container of a TrainJob's JobSet."""

    env: dict[str, str]
    run_root: Path  # mounted on /run: the projected volume's files at its mount path
    hosts: Path  # mounted on /etc/hosts: the Service name of the status-server URL -> 127.0.0.1
    audience: str
    service_account: str

    @classmethod
    def of_jobset(cls, plane: ControlPlane, jobset: dict[str, Any], directory: Path) -> PodView:
        """Project the first container that carries the status-server URL (HarnessError if none)."""
        namespace = jobset["metadata"]["namespace"]
        for replicated in jobset["spec"]["replicatedJobs"]:
            pod = replicated["template"]["spec"]["template"]["spec"]
            for container in pod.get("containers") or []:
                env = {e["name"]: e["value"] for e in container.get("env") or [] if "value" in e}
                if ENV_URL in env:
                    return cls._project(plane, namespace, pod, container, env, directory)
        raise HarnessError(f"no container of JobSet {jobset['metadata']['name']} carries {ENV_URL}")

    @classmethod
    def _project(
        cls,
        plane: ControlPlane,
        namespace: str,
        pod: dict[str, Any],
        container: dict[str, Any],
        env: dict[str, str],
        directory: Path,
    ) -> PodView:
        volumes = {v["name"]: v for v in pod.get("volumes") or []}
        run_root = directory / "run"
        audience = ""
        service_account = pod.get("serviceAccountName") or "default"
        for mount in container.get("volumeMounts") or []:
            projected = (volumes.get(mount["name"]) or {}).get("projected")
            if projected is None:
                continue
            mount_path = Path(mount["mountPath"])
            relative = mount_path.relative_to("/var/run" if mount_path.is_relative_to("/var/run") else "/run")
            target = run_root / relative
            target.mkdir(parents=True, exist_ok=True)
            for source in projected["sources"]:
                if "serviceAccountToken" in source:
                    token = source["serviceAccountToken"]
                    audience = token["audience"]
                    text = request_token(
                        plane,
                        namespace,
                        service_account,
                        audiences=[audience],
                        expiration_s=int(token.get("expirationSeconds", 3600)),
                    )
                    (target / token["path"]).write_text(text)
                elif "configMap" in source:
                    ref = source["configMap"]
                    data = (
                        plane.dynamic()
                        .request("get", f"/api/v1/namespaces/{namespace}/configmaps/{ref['name']}")
                        .to_dict()
                        .get("data")
                        or {}
                    )
                    for item in ref.get("items") or [{"key": k, "path": k} for k in data]:
                        (target / item["path"]).write_text(data[item["key"]])
        host = urlsplit(env[ENV_URL]).hostname or ""
        hosts = directory / "hosts"
        hosts.write_text(f"127.0.0.1 localhost\n127.0.0.1 {host}\n")
        return cls(
            env=env, run_root=run_root, hosts=hosts, audience=audience, service_account=service_account
        )

    def argv(self, command: list[str]) -> list[str]:
        """``command`` with this pod's files under /run and its /etc/hosts (its environment: ``env``)."""
        return private_mounts(self.run_root, self.hosts, "/etc/hosts", command)
