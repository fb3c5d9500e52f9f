"""A real Kubernetes control plane on loopback: kube-apiserver + etcd (+ Kueue's minimalkueue).

Why: the controller's correctness lives in API-server details a mock gets wrong (resourceVersion
conflicts, the status subresource, merge-patch semantics, watches, CRD schema validation, RBAC).
This module starts the real binaries on 127.0.0.1 with free ports, generated certificates and
RBAC on; installs the upstream CRDs (Trainer, JobSet, Kueue) and our own from manifests/; gives
the controller's ServiceAccount its own kubeconfig; and tears everything down.

The building blocks live in scripts/controlplane/ (k8sbuild.py: pins, Go builds, CRD sources;
k8sprocs.py: processes, certificates); this module re-exports what callers need. It serves both the
pytest fixtures (tests/e2e/conftest.py) and scripts/dev-control-plane.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_HELPERS = Path(__file__).resolve().parents[2] / "scripts" / "controlplane"
if str(_HELPERS) not in sys.path:
    sys.path.insert(0, str(_HELPERS))

from k8sbuild import (  # noqa: E402
    CONTROLLER_NAMESPACE,
    CONTROLLER_SERVICE_ACCOUNT,
    ETCD,
    FIELD_MANAGER,
    JOBSET,
    KUBERNETES,
    KUEUE,
    LOG,
    REPO_ROOT,
    STAGING,
    TRAINER,
    Binaries,
    Go,
    HarnessError,
    Unavailable,
    cache_root,
    compat_crds,
    ensure_binaries,
    find_go,
    load_yaml_docs,
    local_manifests,
    prometheus_rule_crd,
    service_monitor_crd,
    upstream_crds,
)
from k8sprocs import (  # noqa: E402
    free_port,
    log_tail,
    make_certificates,
    pid_alive,
    spawn,
    terminate_group,
    wait_until,
    write_kubeconfig,
)

__all__ = [
    "CONTROLLER_NAMESPACE",
    "CONTROLLER_SERVICE_ACCOUNT",
    "ETCD",
    "JOBSET",
    "KUBERNETES",
    "KUEUE",
    "REPO_ROOT",
    "STAGING",
    "TRAINER",
    "Binaries",
    "ControlPlane",
    "Go",
    "HarnessError",
    "Unavailable",
    "cache_root",
    "compat_crds",
    "create_jobset_pods",
    "ensure_binaries",
    "find_go",
    "local_manifests",
    "pid_alive",
    "prometheus_rule_crd",
    "service_monitor_crd",
    "start_control_plane",
    "terminate_group",
    "upstream_crds",
]

# ---------------------------------------------------------------------------------------------
# The running control plane
# ---------------------------------------------------------------------------------------------
_PROCESS_ORDER = ("minimalkueue", "kube-apiserver", "etcd")  # stop order: clients first, storage last
_APPLY_ORDER = {
    "Namespace": 0,
    "CustomResourceDefinition": 1,
    "ServiceAccount": 2,
    "ClusterRole": 3,
    "Role": 3,
    "ClusterRoleBinding": 4,
    "RoleBinding": 4,
}


@dataclass
class ControlPlane:
    """kube-apiserver + etcd (+ minimalkueue) on loopback, with an admin and a controller identity."""

    run_dir: Path
    binaries: Binaries
    detached: bool = False
    server: str = ""
    admin_kubeconfig: Path = field(default_factory=Path)
    controller_kubeconfig: Path = field(default_factory=Path)
    kueue: bool = False
    kueue_reason: str = "Kueue was not started"
    pids: dict[str, int] = field(default_factory=dict)
    manifest_errors: list[str] = field(default_factory=list)
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)
    _argv: dict[str, tuple[list[str], Mapping[str, str] | None]] = field(default_factory=dict, repr=False)
    _dynamic: Any = field(default=None, repr=False)
    _ns_resources: list[tuple[str, str]] | None = field(default=None, repr=False)

    # -- lifecycle -----------------------------------------------------------------------------
    def start(
        self,
        *,
        crds: Sequence[dict[str, Any]] = (),
        manifests: Path | None = REPO_ROOT / "manifests",
        with_kueue: bool = True,
    ) -> ControlPlane:
        """Start everything and install CRDs/RBAC; on a failure, stop what was started and raise.

        The upstream CRDs must install. Our own manifests (manifests/crds, manifests/rbac,
        manifests/components/act) are installed one document at a time, and one the API server
        rejects is recorded in ``manifest_errors`` (with the server's message) instead of stopping
        the whole tier, so that the e2e test that checks them fails with that message and the rest still run.
        """
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if not self.detached:
            atexit.register(self.stop)
        try:
            self._start_core()
            self.apply(crds)
            self._apply_own(local_manifests(manifests / "crds") if manifests else [])
            # the Apply-mode identity (manifests/overlays/apply): the recommend-only role and the act
            # component's writes, which the actuator scenarios make
            self._install_controller_identity(
                [*local_manifests(manifests / "rbac"), *local_manifests(manifests / "components" / "act")]
                if manifests
                else []
            )
            if with_kueue:
                self._start_kueue()
            self._namespaced_resources()  # prime discovery so that the first namespace cleanup is fast
            self.save_state()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_core(self) -> None:
        pki, run = self.run_dir / "pki", self.run_dir
        make_certificates(pki)
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._spawn(
            "etcd",
            [
                str(self.binaries.etcd),
                "--name",
                "e2e",
                "--data-dir",
                str(run / "etcd-data"),
                "--listen-client-urls",
                etcd_url,
                "--advertise-client-urls",
                etcd_url,
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-cluster",
                f"e2e=http://127.0.0.1:{peer_port}",
                "--listen-metrics-urls",
                "",
                "--unsafe-no-fsync",
                "--log-level",
                "warn",
            ],
        )
        wait_until(
            lambda: _http_ok(f"{etcd_url}/health"),
            timeout_s=60,
            what="etcd /health",
            alive=self._dead("etcd"),
        )
        self.server = f"https://127.0.0.1:{api_port}"
        self._spawn(
            "kube-apiserver",
            [
                str(self.binaries.kube_apiserver),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                f"--secure-port={api_port}",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",
                f"--cert-dir={run / 'apiserver-certs'}",
                f"--tls-cert-file={pki / 'server.crt'}",
                f"--tls-private-key-file={pki / 'server.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                "--authorization-mode=RBAC",
                f"--service-account-issuer={self.server}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-cluster-ip-range=10.0.0.0/24",
                # No kube-controller-manager makes the per-namespace "default" ServiceAccount pods need.
                "--disable-admission-plugins=ServiceAccount",
                "--allow-privileged=true",
            ],
        )
        self.admin_kubeconfig = run / "admin.kubeconfig"
        write_kubeconfig(
            self.admin_kubeconfig,
            self.server,
            pki / "ca.crt",
            {"client-certificate": str(pki / "admin.crt"), "client-key": str(pki / "admin.key")},
            "admin",
        )
        context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        wait_until(
            lambda: _http_ok(f"{self.server}/readyz", context),
            timeout_s=180,
            what="kube-apiserver /readyz",
            alive=self._dead("kube-apiserver"),
        )

    def _spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        proc = spawn(argv, self.run_dir / f"{name}.log", detached=self.detached, env=env)
        self._procs[name], self.pids[name] = proc, proc.pid
        self._argv[name] = (list(argv), env)

    # -- faults (tests/reliability) ------------------------------------------------------------
    def restart(self, name: str, *, down_s: float = 0.0, kill: bool = False) -> None:
        """Stop ``name`` (etcd, kube-apiserver; SIGKILL with ``kill``), wait ``down_s``, start it
        again with the same arguments (same ports, same data) and wait until it serves."""
        import signal
        import time as _time

        pid = self.pids.pop(name)
        popen = self._procs.pop(name, None)
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            if popen is not None:
                popen.wait(timeout=30)
        else:
            terminate_group(pid, popen=popen)
        _time.sleep(down_s)
        argv, env = self._argv[name]
        self._spawn(name, argv, env)
        if name == "kube-apiserver":
            pki = self.run_dir / "pki"
            context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
            context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
            wait_until(
                lambda: _http_ok(f"{self.server}/readyz", context),
                timeout_s=180,
                what="kube-apiserver /readyz after a restart",
                alive=self._dead(name),
            )
        elif name == "etcd":
            url = argv[argv.index("--listen-client-urls") + 1]
            wait_until(
                lambda: _http_ok(f"{url}/health"), timeout_s=60, what="etcd /health", alive=self._dead(name)
            )

    def pause(self, name: str) -> None:
        """SIGSTOP the process: it keeps its sockets open and answers nothing (a hung server)."""
        import signal

        os.killpg(self.pids[name], signal.SIGSTOP)

    def resume(self, name: str) -> None:
        import signal

        os.killpg(self.pids[name], signal.SIGCONT)

    def _dead(self, name: str) -> Callable[[], str | None]:
        def check() -> str | None:
            proc = self._procs[name]
            if proc.poll() is None:
                return None
            log = self.run_dir / f"{name}.log"
            return f"{name} exited with {proc.returncode}; last lines of {log}:\n{log_tail(log)}"

        return check

    def _apply_own(self, docs: list[dict[str, Any]]) -> None:
        for doc in docs:
            try:
                self.apply(doc)
            except HarnessError as exc:
                self.manifest_errors.append(str(exc))
                LOG(f"manifests: {str(exc)[:300]}... (full message in manifest_errors / the e2e test)")

    def _install_controller_identity(self, rbac: list[dict[str, Any]]) -> None:
        """The controller ServiceAccount, bound by manifests/rbac and manifests/components/act (what
        manifests/overlays/apply grants), and its token kubeconfig."""
        self.apply(
            [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CONTROLLER_NAMESPACE}},
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": CONTROLLER_SERVICE_ACCOUNT, "namespace": CONTROLLER_NAMESPACE},
                },
            ]
        )
        self._apply_own(rbac)
        path = f"/api/v1/namespaces/{CONTROLLER_NAMESPACE}/serviceaccounts/{CONTROLLER_SERVICE_ACCOUNT}/token"
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 7 * 24 * 3600},
        }
        token = self.dynamic().request("post", path, body=request).to_dict()["status"]["token"]
        self.controller_kubeconfig = self.run_dir / "controller.kubeconfig"
        write_kubeconfig(
            self.controller_kubeconfig,
            self.server,
            self.run_dir / "pki" / "ca.crt",
            {"token": token},
            CONTROLLER_SERVICE_ACCOUNT,
        )

    def _start_kueue(self) -> None:
        if self.binaries.minimalkueue is None:
            self.kueue_reason = self.binaries.kueue_error or "minimalkueue was not built"
            return
        self._spawn(
            "minimalkueue",
            [
                str(self.binaries.minimalkueue),
                f"--kubeconfig={self.admin_kubeconfig}",
                "--zap-log-level=info",
            ],
        )
        try:
            self._probe_kueue()
        except (HarnessError, Exception) as exc:  # Kueue is best effort: record why, stop it, carry on
            self.kueue_reason = f"minimalkueue {KUEUE} did not become ready: {str(exc).splitlines()[0]}"
            LOG(self.kueue_reason)
            terminate_group(self.pids.pop("minimalkueue"), popen=self._procs.pop("minimalkueue"))
            return
        self.kueue, self.kueue_reason = True, f"minimalkueue {KUEUE} is running"

    def _probe_kueue(self) -> None:
        """Kueue is ready when its ClusterQueue controller reports a probe queue Active; then remove it."""
        name = "trainjob-advisor-e2e-probe"
        self.apply(
            [
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "ResourceFlavor",
                    "metadata": {"name": name},
                },
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "ClusterQueue",
                    "metadata": {"name": name},
                    "spec": {
                        "namespaceSelector": {},
                        "resourceGroups": [
                            {
                                "coveredResources": ["cpu"],
                                "flavors": [
                                    {"name": name, "resources": [{"name": "cpu", "nominalQuota": "1"}]}
                                ],
                            }
                        ],
                    },
                },
            ]
        )
        cq = self.resource("kueue.x-k8s.io/v1beta2", "ClusterQueue")

        def active() -> bool:
            conditions = (self.dynamic().get(cq, name=name).to_dict().get("status") or {}).get(
                "conditions"
            ) or []
            return any(c.get("type") == "Active" and c.get("status") == "True" for c in conditions)

        wait_until(
            active,
            timeout_s=90,
            what="Kueue to mark a ClusterQueue Active",
            interval_s=0.5,
            alive=self._dead("minimalkueue"),
        )
        for api_version, kind in (
            ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
            ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
        ):
            self.delete(api_version, kind, name, wait_s=60)

    def stop(self) -> None:
        """Stop every process group we started (clients first); idempotent."""
        for name in _PROCESS_ORDER:
            pid = self.pids.pop(name, None)
            if pid is not None:
                terminate_group(pid, popen=self._procs.pop(name, None))
        self.kueue = False
        if self._dynamic is not None:
            with contextlib.suppress(Exception):
                self._dynamic.client.close()
            self._dynamic = None
        with contextlib.suppress(OSError):
            (self.run_dir / "state.json").unlink()

    # -- clients -------------------------------------------------------------------------------
    def api_client(self, kubeconfig: Path | None = None) -> Any:
        from kubernetes import config

        return config.new_client_from_config(config_file=str(kubeconfig or self.admin_kubeconfig))

    def dynamic(self) -> Any:
        if self._dynamic is None:
            from kubernetes.dynamic import DynamicClient

            self._dynamic = DynamicClient(self.api_client(), cache_file=str(self.run_dir / "discovery.json"))
        return self._dynamic

    def resource(self, api_version: str, kind: str) -> Any:
        return self.dynamic().resources.get(api_version=api_version, kind=kind)

    # -- objects -------------------------------------------------------------------------------
    def apply(
        self,
        path_or_docs: str | Path | Mapping[str, Any] | Iterable[Mapping[str, Any]],
        *,
        namespace: str | None = None,
    ) -> list[dict[str, Any]]:
        """Create or update (admin identity) YAML files/directories or dicts; CRDs are served on return.

        New objects are created with POST and existing ones server-side applied (forced, field
        manager ``trainjob-advisor-e2e``): POST is several times cheaper than an apply for the
        megabyte-sized upstream CRDs, and neither has client-side apply's annotation limit.
        """
        from kubernetes.dynamic.exceptions import ConflictError, DynamicApiError

        docs = _as_docs(path_or_docs)
        docs.sort(key=lambda d: _APPLY_ORDER.get(str(d.get("kind")), 9))
        applied: list[dict[str, Any]] = []
        for doc in docs:
            if doc.get("kind") != "CustomResourceDefinition":
                self._wait_established(applied)
            res = self._served(str(doc["apiVersion"]), str(doc["kind"]))
            meta = doc.get("metadata") or {}
            ns = (meta.get("namespace") or namespace) if res.namespaced else None
            what = f"{doc['kind']} {ns + '/' if ns else ''}{meta.get('name')}"
            if res.namespaced and not ns:
                raise HarnessError(f"{what} needs a namespace")
            body = {**doc, "metadata": {**meta, "namespace": ns} if ns else meta}
            try:
                try:
                    result = self.dynamic().create(res, body=body, namespace=ns)
                except ConflictError:
                    result = self.dynamic().server_side_apply(
                        res, body=body, namespace=ns, field_manager=FIELD_MANAGER, force_conflicts=True
                    )
            except DynamicApiError as exc:
                raise HarnessError(f"kube-apiserver rejected {what}: {_api_message(exc)}") from exc
            applied.append(result.to_dict())
        self._wait_established(applied)
        if any(d.get("kind") == "CustomResourceDefinition" for d in applied):
            self._ns_resources = None
        return applied

    def _served(self, api_version: str, kind: str) -> Any:
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        try:
            return self.resource(api_version, kind)
        except ResourceNotFoundError:
            hint = f"; manifests/ rejected: {self.manifest_errors[0][:300]}" if self.manifest_errors else ""
            raise HarnessError(f"{api_version} {kind} is not served by this kube-apiserver{hint}") from None

    def _wait_established(self, applied: list[dict[str, Any]]) -> None:
        for doc in applied:
            if doc.get("kind") == "CustomResourceDefinition" and not doc.get("_established"):
                self._wait_crd(doc["metadata"]["name"])
                doc["_established"] = True

    def _wait_crd(self, name: str) -> None:
        crd = self.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")

        def established() -> bool:
            conditions = (self.dynamic().get(crd, name=name).to_dict().get("status") or {}).get(
                "conditions"
            ) or []
            return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

        wait_until(established, timeout_s=60, what=f"CRD {name} to be Established")

    def delete(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None, wait_s: float = 0.0
    ) -> None:
        """Delete if present (an unserved kind has nothing to delete); optionally wait until it is gone."""
        from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

        try:
            res = self.resource(api_version, kind)
        except ResourceNotFoundError:
            return
        with contextlib.suppress(NotFoundError):
            self.dynamic().delete(res, name=name, namespace=namespace)
        if wait_s > 0:

            def gone() -> bool:
                try:
                    self.dynamic().get(res, name=name, namespace=namespace)
                except NotFoundError:
                    return True
                return False

            wait_until(gone, timeout_s=wait_s, what=f"{kind}/{name} to be deleted")

    def delete_namespace(self, name: str) -> None:
        """What the (absent) namespace controller would do: empty the namespace, then finalize it.

        Finalizers are cleared first so that a test's leftovers cannot keep objects (and their
        Kueue quota) alive into the next test.
        """
        from kubernetes.dynamic.exceptions import DynamicApiError

        dyn = self.dynamic()
        for prefix, plural in self._namespaced_resources():
            collection = f"{prefix}/namespaces/{name}/{plural}"
            try:
                items = dyn.request("get", collection).to_dict().get("items") or []
            except DynamicApiError:
                continue
            for item in items:
                path = f"{collection}/{item['metadata']['name']}"
                with contextlib.suppress(DynamicApiError):
                    if item["metadata"].get("finalizers"):
                        dyn.request(
                            "patch",
                            path,
                            body={"metadata": {"finalizers": None}},
                            content_type="application/merge-patch+json",
                        )
                    dyn.request("delete", path)
        with contextlib.suppress(DynamicApiError):
            dyn.request("delete", f"/api/v1/namespaces/{name}")
            body = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name},
                "spec": {"finalizers": []},
            }
            dyn.request("put", f"/api/v1/namespaces/{name}/finalize", body=body)

    def _namespaced_resources(self) -> list[tuple[str, str]]:
        """(API path, plural) of every listable, deletable namespaced resource, preferred versions only."""
        if self._ns_resources is not None:
            return self._ns_resources
        dyn = self.dynamic()
        prefixes = ["/api/v1"] + [
            f"/apis/{group['preferredVersion']['groupVersion']}"
            for group in dyn.request("get", "/apis").to_dict().get("groups") or []
        ]
        found = []
        for prefix in prefixes:
            for res in dyn.request("get", prefix).to_dict().get("resources") or []:
                verbs = set(res.get("verbs") or ())
                if res.get("namespaced") and "/" not in res["name"] and {"list", "delete"} <= verbs:
                    found.append((prefix, res["name"]))
        self._ns_resources = found
        return found

    # -- state for the dev script ----------------------------------------------------------------
    def save_state(self) -> None:
        state = {
            "server": self.server,
            "admin_kubeconfig": str(self.admin_kubeconfig),
            "controller_kubeconfig": str(self.controller_kubeconfig),
            "kueue": self.kueue,
            "kueue_reason": self.kueue_reason,
            "manifest_errors": self.manifest_errors,
            "pids": self.pids,
            "binaries": {k: str(v) for k, v in vars(self.binaries).items() if isinstance(v, Path)},
        }
        (self.run_dir / "state.json").write_text(json.dumps(state, indent=1) + "\n")


def create_jobset_pods(core: Any, namespace: str, job: str, count: int = 2) -> list[str]:
    """The job's pods as JobSet would label them (no kubelet runs them: they are where the
    controller writes checkpoint requests). ``core``: a ``CoreV1Api``. Returns their names."""
    from kubernetes import client

    names = [f"{job}-node-0-{i}" for i in range(count)]
    for name in names:
        body = {
            "metadata": {"name": name, "labels": {"jobset.sigs.k8s.io/jobset-name": job}},
            "spec": {"containers": [{"name": "node", "image": "trainer:latest"}]},
        }
        core.create_namespaced_pod(namespace, client.V1Pod.from_dict(body))
    return names


def _api_message(exc: Exception) -> str:
    body = getattr(exc, "body", None) or ""
    try:
        return str(json.loads(body).get("message") or body)[:2000]
    except (ValueError, AttributeError):
        return str(exc)[:2000]


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


def _as_docs(source: str | Path | Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(source, Mapping):
        return [dict(source)]
    if isinstance(source, str | Path):
        path = Path(source)
        if path.is_dir():
            return local_manifests(path)
        if not path.is_file():
            raise HarnessError(f"no such manifest file or directory: {path}")
        return load_yaml_docs(path)
    docs: list[dict[str, Any]] = []
    for item in source:
        docs.extend(_as_docs(item))
    return docs


@contextlib.contextmanager
def session_plane(prefix: str, binaries: Binaries, crds: Sequence[dict[str, Any]]) -> Iterator[ControlPlane]:
    """A started control plane in a fresh run directory, stopped and removed afterwards (kept, and
    its place printed, when TRAINJOB_ADVISOR_KEEP_E2E_LOGS is set): the session fixture of the e2e
    and the reliability tiers, which each need their own plane (faults would disturb the other)."""
    import shutil
    import tempfile

    run_dir = Path(tempfile.mkdtemp(prefix=f"trainjob-advisor-{prefix}-"))
    plane = ControlPlane(run_dir=run_dir, binaries=binaries)
    try:
        plane.start(crds=crds)
        yield plane
    finally:
        plane.stop()
        if os.environ.get("TRAINJOB_ADVISOR_KEEP_E2E_LOGS"):
            print(f"\n{prefix} control plane logs kept in {run_dir}", file=sys.stderr)
        else:
            shutil.rmtree(run_dir, ignore_errors=True)


def start_control_plane(
    run_dir: Path, *, with_kueue: bool = True, detached: bool = False, kubectl: bool = False
) -> ControlPlane:
    """Build what is missing, then start and install everything. Unavailable/HarnessError on failure."""
    go = find_go()
    binaries = ensure_binaries(go, kueue=with_kueue, kubectl=kubectl)
    crds = upstream_crds(go)
    return ControlPlane(run_dir=run_dir, binaries=binaries, detached=detached).start(
        crds=crds, with_kueue=with_kueue
    )
