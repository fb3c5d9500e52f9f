"""A rolling update of the controller's Deployment runs to the end, as the chart and
manifests/deploy render it.

The Deployment controller removes an old pod only while enough pods stay available: of all pods,
at most ``all - (replicas - maxUnavailable) - new pods not yet available`` may go
(``reconcileOldReplicaSets``, pkg/controller/deployment/rolling.go). Under leader election one
replica leads and the others stand by. Were the readiness probe passed by the leader only, the
new pod, a standby, would never count as available, the old leader would never be removed, and
``helm upgrade --wait`` or ``kubectl rollout status`` would wait for ever while the old leader kept
acting with the old settings. So the rendered probe's path is asked of the controller's own HTTP
server in each role a replica goes through (standby, starting after it took the Lease, leader),
and a model of the rolling update with those answers must end with every pod new.
"""

from __future__ import annotations

import math
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.http_endpoints import serve_http
from advisor.controller.leader import LeaderElector
from tests.charts.render import helm_template, kustomize_deploy, of_kind
from tests.controller.fakes import LEASE_CONFIG as CFG
from tests.controller.fakes import Clock, FakeApi, FakeLeases

ROLES = ("standby", "starting", "leader")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def probe_passes(path: str) -> dict[str, bool]:
    """Whether a replica in each role answers ``path`` with 200, asked of the real server: a
    standby (the Lease held by another), one that just took the Lease and lists the cluster, and
    the leader with its worker running."""
    passes: dict[str, bool] = {}
    for role in ROLES:
        leases = FakeLeases()
        if role == "standby":
            assert LeaderElector(leases, CFG, identity="other", monotonic=Clock()).try_acquire_or_renew()
        elector = LeaderElector(leases, CFG, identity="me", monotonic=Clock())
        assert elector.try_acquire_or_renew() == (role != "standby")
        engine = Engine(FakeApi(), config=EngineConfig(writer_workers=0))
        engine.set_gate(elector.is_leader)
        stop = threading.Event()
        workers: list[threading.Thread] = []
        if role == "leader":
            workers.append(threading.Thread(target=stop.wait, daemon=True))
            workers[0].start()
            engine.ready = True
        port = _free_port()
        server = serve_http(engine, "127.0.0.1", port, workers, elector=elector)
        try:
            passes[role] = _status(port, path) == 200
        finally:
            server.shutdown()
            stop.set()
    return passes


@dataclass
class Pod:
    new: bool
    role: str  # standby | starting | leader
    ticks: int = 0  # a pod created in this tick is not available yet


def _count(value: int | str, replicas: int, *, up: bool) -> int:
    if isinstance(value, int):
        return value
    share = replicas * int(str(value).rstrip("%")) / 100
    return math.ceil(share) if up else math.floor(share)


def roll(
    replicas: int, surge: int, unavailable: int, passes: Mapping[str, bool], *, leader_first: bool
) -> list[str]:
    """Ticks of the Deployment controller's rolling update of ``replicas`` pods (one old leader,
    the rest old standbys), the Lease passing on when its holder goes; ``leader_first``: which of
    two available old pods the ReplicaSet removes first (it removes unavailable ones before
    either). Returns the trace; fails when the update stops short of every pod new."""
    pods = [Pod(False, "leader", 1)] + [Pod(False, "standby", 1) for _ in range(replicas - 1)]
    min_available = replicas - unavailable
    trace: list[str] = []

    def available(p: Pod) -> bool:
        return p.ticks > 0 and passes[p.role]

    for _tick in range(20 * replicas):
        for p in pods:
            if p.role == "starting":
                p.role = "leader"  # its listing done
        if not any(p.role != "standby" for p in pods):
            # the Lease is free: an old standby takes it if any is left (the worst case: it goes too)
            (sorted(pods, key=lambda p: p.new)[0]).role = "starting"
        assert sum(p.role != "standby" for p in pods) <= 1, "two replicas hold the Lease"
        trace.append(" ".join(f"{'new' if p.new else 'old'}:{p.role}{'+-'[not available(p)]}" for p in pods))
        old, new = [p for p in pods if not p.new], [p for p in pods if p.new]
        if not old and len(new) == replicas and all(map(available, new)):
            assert any(p.role == "leader" for p in new)
            return trace
        # the new ReplicaSet grows within maxSurge
        grow = min(replicas + surge - len(pods), replicas - len(new))
        pods += [Pod(True, "standby") for _ in range(max(0, grow))]
        new = [p for p in pods if p.new]
        # the old ones shrink while enough stay available
        max_scaled_down = len(pods) - min_available - sum(not available(p) for p in new)
        if max_scaled_down > 0:
            unhealthy = [p for p in old if not available(p)][:max_scaled_down]
            pods = [p for p in pods if all(p is not u for u in unhealthy)]
            old = [p for p in pods if not p.new]
            spare = sum(map(available, pods)) - min_available
            ranked = sorted(old, key=lambda p: (p.role == "leader") != leader_first)
            gone = ranked[: max(0, spare)]
            pods = [p for p in pods if all(p is not g for g in gone)]
        for p in pods:
            p.ticks += 1
    raise AssertionError("the rolling update stopped short of every pod new:\n" + "\n".join(trace[-5:]))


def _deployments() -> Iterator[tuple[str, dict[str, Any]]]:
    (deploy,) = of_kind(kustomize_deploy(), "Deployment")
    yield "manifests/deploy", deploy
    for sets in ((), ("replicas=3",), ("leaderElection.enabled=false",)):
        (deploy,) = of_kind(helm_template(*sets), "Deployment")
        yield f"chart {' '.join(sets) or 'defaults'}", deploy


@pytest.mark.parametrize("leader_first", [True, False], ids=["old-leader-first", "old-leader-last"])
def test_a_rolling_update_of_the_rendered_deployment_replaces_every_pod(leader_first: bool) -> None:
    checked = 0
    for source, deploy in _deployments():
        spec = deploy["spec"]
        (container,) = spec["template"]["spec"]["containers"]
        probe = container["readinessProbe"]["httpGet"]
        # the probe asks the port the controller serves /readyz on
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert f"--metrics-port={ports[probe['port']]}" in container["args"], source
        replicas = int(spec["replicas"])
        if spec["strategy"]["type"] != "RollingUpdate":
            assert replicas == 1 and "--leader-elect" not in container["args"], source
            continue
        assert "--leader-elect" in container["args"], source
        rolling = spec["strategy"].get("rollingUpdate") or {}
        surge = _count(rolling.get("maxSurge", "25%"), replicas, up=True)
        unavailable = _count(rolling.get("maxUnavailable", "25%"), replicas, up=False)
        passes = probe_passes(probe["path"])
        if replicas >= 2 and unavailable == 0:
            assert passes["standby"], (
                f"{source}: {replicas} replicas with maxUnavailable 0 and a readiness probe "
                f"({probe['path']}) a standby fails: the new pod never counts and the old leader stays"
            )
        roll(replicas, surge, unavailable, passes, leader_first=leader_first)
        checked += 1
    assert checked >= 3
