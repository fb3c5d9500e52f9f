"""The pieces the reliability tests share: the controller as a real process, a fault-injecting
TCP proxy, a progress reporter that records what the API server accepted, and readers of what
the controller stored."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import controlplane
import yaml
from kubernetes import client

from advisor.controller.store import decode_history

REPO = Path(__file__).resolve().parents[2]
TRAINER = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
ADVISOR = ("advisor.trainjob-advisor.io", "v1alpha1")
MERGE = "application/merge-patch+json"
LEASE_NAMESPACE = "trainjob-advisor-system"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def wait_for(fn: Callable[[], Any], what: str, timeout: float = 60.0, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            last = fn()
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


# ---------------------------------------------------------------------------- the controller
def own_lease(plane: controlplane.ControlPlane) -> str:
    """A Lease name of the test's own, granted to the controller's ServiceAccount as an admin
    grants a release another ``--leader-election-id``: manifests/rbac's leader-election Role with
    its names (the Lease, its evidence ConfigMap) replaced, since the shipped Role names only the
    default Lease."""
    from advisor.controller.evidence import evidence_name

    lease = f"rel-{uuid.uuid4().hex[:6]}"
    role, binding = yaml.safe_load_all((REPO / "manifests" / "rbac" / "leader-election.yaml").read_text())
    for rule in role["rules"]:
        if "resourceNames" in rule:
            rule["resourceNames"] = [lease] if rule["resources"] == ["leases"] else [evidence_name(lease)]
    role["metadata"]["name"] = binding["metadata"]["name"] = binding["roleRef"]["name"] = f"{lease}-leader"
    plane.apply([role, binding])
    return lease


class ControllerProcess:
    """``trainjob-advisor run`` as a child process, with leader election on a test's own Lease."""

    def __init__(
        self,
        kubeconfig: Path,
        namespace: str,
        log_dir: Path,
        *,
        lease: str,
        name: str = "ctl",
        lease_args: tuple[str, ...] = ("--lease-duration=6", "--renew-deadline=4", "--retry-period=1"),
        extra: tuple[str, ...] = (),
    ) -> None:
        self.port = free_port()
        self.log_path = log_dir / f"{name}-{self.port}.log"
        argv = [
            sys.executable,
            "-m",
            "advisor",
            "run",
            f"--kubeconfig={kubeconfig}",
            f"--namespace={namespace}",
            f"--metrics-port={self.port}",
            "--metrics-host=127.0.0.1",
            "--log-format=json",
            "--no-pytorchjobs",
            "--write-interval=0.5",
            "--forecast-interval=0.5",
            "--evaluate-interval=1",
            "--leader-elect",
            f"--leader-election-namespace={LEASE_NAMESPACE}",
            f"--leader-election-id={lease}",
            *lease_args,
            *extra,
        ]
        env = {**os.environ, "HOSTNAME": name, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=REPO
            )

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, ""
        except OSError:
            return 0, ""

    def leading(self) -> bool:
        """This replica leads and has started (a standby is ready too, but answers ``standby``)."""
        return self.get("/readyz") == (200, "leader\n")

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` whose labels include ``labels`` (0 when absent)."""
        _, text = self.get("/metrics")
        total = 0.0
        for line in text.splitlines():
            if not line.startswith(name) or line.startswith("#"):
                continue
            head, _, value = line.rpartition(" ")
            if all(f'{k}="{v}"' in head for k, v in labels.items()) and head.split("{")[0] == name:
                total += float(value)
        return total

    def kill(self, sig: int = signal.SIGKILL) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(sig)
        self.proc.wait(timeout=60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.kill(signal.SIGTERM)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def lease_holder(admin: Any, lease: str) -> str | None:
    try:
        got = client.CoordinationV1Api(admin).read_namespaced_lease(lease, LEASE_NAMESPACE)
    except client.exceptions.ApiException:
        return None
    return got.spec.holder_identity if got.spec else None


def proxied_kubeconfig(kubeconfig: Path, port: int, out: Path) -> Path:
    """A copy of ``kubeconfig`` whose server is the proxy on ``port`` (TLS passes through it)."""
    cfg = yaml.safe_load(kubeconfig.read_text())
    for cluster in cfg["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
    out.write_text(yaml.safe_dump(cfg))
    return out


# ---------------------------------------------------------------------------- the proxy
@dataclass
class Faults:
    latency_s: float = 0.0  # added before each chunk is forwarded
    reset_probability: float = 0.0  # per chunk: close both sides abruptly (RST)
    refuse: bool = False  # new connections are closed at once
    seed: int = 0


@dataclass
class FaultProxy:
    """A TCP proxy (asyncio, on its own thread) between the controller and the API server that
    delays, resets and refuses connections as ``faults`` says; ``counts`` says what it did."""

    upstream: tuple[str, int]
    faults: Faults = field(default_factory=Faults)
    port: int = field(default_factory=free_port)
    counts: dict[str, int] = field(default_factory=lambda: {"connections": 0, "resets": 0, "refused": 0})

    def __post_init__(self) -> None:
        self._rng = random.Random(self.faults.seed)
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)
        self._thread.start()
        assert self._started.wait(10), "the proxy did not start"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        self._started.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.counts["connections"] += 1
        if self.faults.refuse:
            self.counts["refused"] += 1
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    if self.faults.latency_s:
                        await asyncio.sleep(self.faults.latency_s)
                    if self.faults.reset_probability and self._rng.random() < self.faults.reset_probability:
                        self.counts["resets"] += 1
                        for w in (writer, up_writer):
                            sock = w.get_extra_info("socket")
                            if sock is not None:  # SO_LINGER 0: the close sends a RST
                                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                            w.close()
                        return
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                with contextlib.suppress(Exception):
                    dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


# ---------------------------------------------------------------------------- the jobs
class Jobs:
    """TrainJobs that report progress as the upstream status server does (``trainerStatus``), and
    a record of which reports the API server acknowledged."""

    def __init__(self, admin: Any, namespace: str) -> None:
        self.ns = namespace
        self.custom = client.CustomObjectsApi(admin)
        self.core = client.CoreV1Api(admin)
        self.acked: dict[str, list[int]] = {}  # job -> steps the API server acknowledged
        self.attempted: dict[str, list[int]] = {}
        self.errors = 0

    def create(self, name: str, *, queue: str | None = None) -> dict[str, Any]:
        body = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue} if queue else {}},
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}}},
            },
        }
        self.acked[name], self.attempted[name] = [], []
        return dict(self.custom.create_namespaced_custom_object(*TRAINER[:2], self.ns, TRAINER[2], body))

    def report(
        self,
        name: str,
        step: int,
        loss: float,
        at: float,
        total: int = 100_000,
        extra: dict[str, str] | None = None,
    ) -> bool:
        """One upstream status-server update (``extra``: more metrics, e.g. a checkpoint ack)."""
        metrics = [
            {"name": "current_step", "value": str(step)},
            {"name": "total_steps", "value": str(total)},
            {"name": "loss", "value": f"{loss:.6f}"},
            *({"name": k, "value": v} for k, v in (extra or {}).items()),
        ]
        self.attempted[name].append(step)
        try:
            self.custom.patch_namespaced_custom_object_status(
                *TRAINER[:2],
                self.ns,
                TRAINER[2],
                name,
                {"status": {"trainerStatus": {"metrics": metrics, "lastUpdatedTime": rfc3339(at)}}},
                _content_type=MERGE,
                _request_timeout=(2, 5),
            )
        except Exception:
            self.errors += 1
            return False
        self.acked[name].append(step)
        return True

    def create_pods(self, job: str, count: int = 2) -> list[str]:
        """The job's pods as JobSet would label them (no kubelet runs them: they are where the
        controller writes checkpoint requests)."""
        return controlplane.create_jobset_pods(self.core, self.ns, job, count)

    def pod_annotations(self, pod: str) -> dict[str, str]:
        return dict(self.core.read_namespaced_pod(pod, self.ns).metadata.annotations or {})

    def workload(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.custom.get_namespaced_custom_object(*KUEUE, self.ns, "workloads", name))
        except client.exceptions.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def advice(self, name: str) -> tuple[str, list[str]]:
        """The stored recommendation: its advice and reasons."""
        rec = ((self.forecast(name) or {}).get("status") or {}).get("recommendation") or {}
        return str(rec.get("advice") or ""), [str(r) for r in rec.get("reasons") or []]

    def events(self, reason: str) -> list[Any]:
        return [
            e
            for e in self.core.list_namespaced_event(self.ns).items
            if e.reason == reason and e.source and e.source.component == "trainjob-advisor"
        ]

    def forecast(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(
                self.custom.get_namespaced_custom_object(*ADVISOR, self.ns, "trainjobforecasts", name)
            )
        except Exception:
            return None

    def history_steps(self, name: str) -> list[int]:
        f = self.forecast(name)
        hist = decode_history(((f or {}).get("status") or {}).get("history"))
        return [int(s) for s in hist.get("steps") or []]

    def actions(self, name: str) -> list[dict[str, Any]]:
        f = self.forecast(name) or {}
        return list((f.get("status") or {}).get("actions") or [])

    def pending(self, name: str) -> dict[str, Any]:
        f = self.forecast(name) or {}
        raw = (f.get("status") or {}).get("pendingActions") or "{}"
        return dict(json.loads(raw) if isinstance(raw, str) else raw)


def falling(step: int) -> float:
    return 2.0 + 5.0 / (1 + step / 100)


def flat(step: int) -> float:
    """A run that stopped learning (the plateau rule's case), with a little deterministic noise."""
    return 1.8 + 0.001 * ((step * 7919) % 13) / 13


class Reporter:
    """Every job reports a new step every ``period_s`` (steps of 10, loss ``loss(step)``, falling by
    default) on a thread, dated by the reporter's clock (``t0``: where its step 0 lies, e.g. skewed);
    failed reports are counted and the next one carries a newer step."""

    def __init__(
        self,
        jobs: Jobs,
        names: list[str],
        period_s: float = 1.0,
        t0: float | None = None,
        *,
        loss: Callable[[int], float] = falling,
        start_step: int = 0,
    ) -> None:
        self.jobs, self.names, self.period_s, self.loss = jobs, names, period_s, loss
        self.t0 = time.time() if t0 is None else t0
        self.step = start_step
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="reporter", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.step += 10
            at = self.t0 + self.step / 10 * self.period_s
            for name in self.names:
                self.jobs.report(name, self.step, self.loss(self.step), at)
            self._stop.wait(self.period_s)

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=60)


@contextlib.contextmanager
def apply_policy(
    plane: Any, name: str, namespace: str, *, rules: dict[str, Any], safety: dict[str, Any] | None = None
) -> Any:
    """An Apply-mode AdvisorPolicy for one namespace (quick judgement: no minimum runtime, a 1 s
    cooldown, 10 forecast points), deleted afterwards."""
    plane.apply(
        {
            "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
            "kind": "AdvisorPolicy",
            "metadata": {"name": name},
            "spec": {
                "mode": "Apply",
                "selector": {"namespaces": [namespace]},
                "safety": {"minRuntime": "0s", "cooldown": "1s", "minForecastPoints": 10, **(safety or {})},
                "rules": rules,
            },
        }
    )
    try:
        yield name
    finally:
        plane.delete("advisor.trainjob-advisor.io/v1alpha1", "AdvisorPolicy", name)


def audit_lines(ctl: ControllerProcess, job: str, kind: str) -> list[dict[str, Any]]:
    """The controller's structured audit lines about ``kind`` actions on ``job``."""
    out = []
    for line in ctl.log().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("job", "").endswith(f"/{job}") and rec.get("kind") == kind:
            out.append(rec)
    return out
