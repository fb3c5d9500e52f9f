"""kopf wiring and the HTTP endpoints, without an API server (the e2e tier runs the real thing)."""

from __future__ import annotations

import asyncio
import functools
import socket
import threading
import urllib.error
import urllib.request
from typing import Any

import kopf

from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.http_endpoints import serve_http
from advisor.controller.leader import LeaderElector
from advisor.controller.operator import _connection_info, build_registry, configure_settings
from advisor.controller.operator_options import OperatorOptions
from tests.controller.fakes import LEASE_CONFIG as CFG
from tests.controller.fakes import Clock, FakeApi, FakeLeases, trainjob


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_settings_keep_kopf_state_out_of_status_and_post_no_events() -> None:
    settings = kopf.OperatorSettings()
    configure_settings(settings)
    assert settings.posting.enabled is False
    assert isinstance(settings.persistence.progress_storage, kopf.AnnotationsProgressStorage)
    assert isinstance(settings.persistence.diffbase_storage, kopf.AnnotationsDiffBaseStorage)


def test_registry_watches_every_resource_with_event_handlers_only() -> None:
    engine = Engine(FakeApi(), config=EngineConfig(writer_workers=0))

    class Api:
        api_client = None

    registry = build_registry(engine, Api(), OperatorOptions())  # type: ignore[arg-type]
    handlers = registry._watching.get_all_handlers()  # the public API has no listing
    resources = sorted(
        f"{h.selector.group or 'core'}/{h.selector.any_name}"
        for h in handlers  # type: ignore[union-attr]
    )
    assert resources == [
        "advisor.trainjob-advisor.io/advisorpolicies",
        "core/namespaces",
        "kubeflow.org/pytorchjobs",
        "kueue.x-k8s.io/clusterqueues",
        "kueue.x-k8s.io/localqueues",
        "kueue.x-k8s.io/workloads",
        "trainer.kubeflow.org/trainjobs",
    ]
    assert not registry._changing.get_all_handlers()  # nothing that would write kopf state into objects
    feed = next(h for h in handlers if h.selector.any_name == "trainjobs")  # type: ignore[union-attr]
    asyncio.run(feed.fn(event={"type": None, "object": trainjob(step=5, loss=1.0)}))  # type: ignore[call-arg]
    assert engine.events.get_nowait()[:3] == ("job", "ADDED", trainjob(step=5, loss=1.0))


def test_login_uses_the_clients_credentials() -> None:
    from kubernetes import client

    cfg = client.Configuration(host="https://127.0.0.1:6443")
    cfg.api_key = {"BearerToken": "abc"}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    cfg.ssl_ca_cert = "/tmp/ca.crt"
    info = _connection_info(client.ApiClient(cfg))
    assert (info.server, info.scheme, info.token, info.ca_path) == (
        "https://127.0.0.1:6443",
        "Bearer",
        "abc",
        "/tmp/ca.crt",
    )


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _leader_gauge(port: int) -> float:
    (line,) = [x for x in _get(port, "/metrics")[1].splitlines() if x.startswith("trainjob_advisor_leader ")]
    return float(line.split()[1])


def test_http_endpoints_report_health_readiness_and_metrics() -> None:
    engine = Engine(FakeApi(), config=EngineConfig(writer_workers=0))
    port = free_port()
    alive = threading.Event()
    worker = threading.Thread(target=alive.wait, daemon=True)
    worker.start()
    server = serve_http(engine, "127.0.0.1", port, worker)
    get = functools.partial(_get, port)
    try:
        assert get("/healthz") == (200, "ok\n")
        assert get("/readyz") == (503, "starting\n")  # not ready before the startup listing
        engine.ready = True
        # without leader election it acts alone, and says so: no election made it leader
        assert get("/readyz") == (200, "active, no leader election\n")
        engine.policies_unknown = True  # the start-up listing of the AdvisorPolicies failed
        code, text = get("/readyz")
        assert code == 503 and text.startswith(
            "active, no leader election; the AdvisorPolicies could not be listed"
        )
        engine.policies_unknown = False
        code, text = get("/metrics")
        assert code == 200 and "trainjob_advisor_watched_jobs" in text
        alive.set()
        worker.join()
        assert get("/healthz")[0] == 503  # the engine worker died
        assert get("/readyz")[0] == 503
    finally:
        server.shutdown()


def test_a_standby_that_can_take_over_is_ready_and_says_it_stands_by() -> None:
    """Under leader election readiness is the process's health, not leadership: a standby that can
    read the Lease answers /readyz 200 ``standby`` (so that a rolling update can count it available
    and remove the old leader), a new leader 503 ``starting`` until it has listed the cluster, then
    200 ``leader``. Leadership shows in the body and in ``trainjob_advisor_leader``."""
    leases, clock = FakeLeases(), Clock()
    holder = LeaderElector(leases, CFG, identity="old-leader", monotonic=clock)
    assert holder.try_acquire_or_renew()
    mine = LeaderElector(leases, CFG, identity="new-pod", monotonic=clock)
    engine = Engine(FakeApi(), config=EngineConfig(writer_workers=0))
    engine.set_gate(mine.is_leader)
    workers: list[threading.Thread] = []
    port = free_port()
    server = serve_http(engine, "127.0.0.1", port, workers, elector=mine)
    get = functools.partial(_get, port)
    try:
        assert get("/healthz") == (200, "ok\n")
        assert get("/readyz")[0] == 503  # has not read the Lease yet: cannot tell it could take over
        assert not mine.try_acquire_or_renew()  # held by the old leader
        assert get("/readyz") == (200, "standby\n")
        assert get("/healthz") == (200, "ok\n")
        assert _leader_gauge(port) == 0
        leases.down = True  # the API server stops answering for a lease duration
        clock.t += CFG.lease_duration_s
        assert not mine.try_acquire_or_renew()
        assert get("/readyz") == (503, "standby, cannot read the Lease\n")
        leases.down = False
        assert mine.try_acquire_or_renew()  # the old leader stopped renewing: taken over
        assert get("/readyz") == (503, "starting\n")  # leads, listing the cluster
        assert _leader_gauge(port) == 1
        stop = threading.Event()
        worker = threading.Thread(target=stop.wait, daemon=True)
        worker.start()
        workers.append(worker)
        engine.ready = True
        assert get("/readyz") == (200, "leader\n")
        engine.policies_unknown = True
        code, text = get("/readyz")
        assert code == 503 and text.startswith("leader; the AdvisorPolicies could not be listed")
        engine.policies_unknown = False
        clock.t += CFG.renew_deadline_s  # no renewal within the renew deadline: it leads no more
        assert get("/readyz") == (503, "lost the Lease, stopping\n")
        assert _leader_gauge(port) == 0
        assert mine.try_acquire_or_renew()  # renewed (no one took it meanwhile)
        assert get("/readyz") == (200, "leader\n")
        stop.set()
        worker.join()
        assert get("/readyz")[0] == 503 and get("/healthz")[0] == 503
    finally:
        server.shutdown()


def test_prime_queues_policies_namespaces_and_kueue_objects_before_any_job() -> None:
    from advisor.controller.initial_listing import prime

    class Custom:
        def list_cluster_custom_object(self, group: str, version: str, plural: str) -> dict[str, Any]:
            if plural == "clusterqueues":
                raise RuntimeError("403 forbidden")  # tolerated: kopf's watch reports the rest
            return {"items": [{"metadata": {"name": f"{plural}-1"}}]}

        def list_namespaced_custom_object(
            self, group: str, version: str, ns: str, plural: str
        ) -> dict[str, Any]:
            return {"items": [{"metadata": {"name": f"{plural}-in-{ns}", "namespace": ns}}]}

    class Core:
        def list_namespace(self) -> Any:
            class Listing:
                def to_dict(self) -> dict[str, Any]:
                    return {
                        "items": [{"metadata": {"name": "team-a", "labels": {"tier": "gold"}, "uid": "u"}}]
                    }

            return Listing()

    class Api:
        custom = Custom()
        core = Core()

    engine = Engine(FakeApi(), config=EngineConfig(writer_workers=0))
    prime(engine, Api(), OperatorOptions(namespaces=("team-a", "team-b")))  # type: ignore[arg-type]
    queued = []
    while not engine.events.empty():
        kind, _, body, _ = engine.events.get_nowait()
        queued.append((kind, body["metadata"]["name"] if "metadata" in body else body))
    assert queued == [
        ("policy", "advisorpolicies-1"),
        ("namespace", "team-a"),
        ("namespacelisting", {}),  # every namespace is known from here on (JobsSelected names the others)
        ("localqueue", "localqueues-1"),
        ("workload", "workloads-in-team-a"),
        ("workload", "workloads-in-team-b"),
        (  # last, the jobs that exist: the saved statuses of the others are of deleted jobs
            "joblisting",
            {
                "kinds": ["TrainJob", "PyTorchJob"],
                "jobs": {
                    f"{ns}/{plural}-in-{ns}": None
                    for plural in ("trainjobs", "pytorchjobs")
                    for ns in ("team-a", "team-b")
                },
            },
        ),
    ]
    # with the save-window check, its AdmissionChecks come before any Workload: one listed while
    # its check was unknown would wait for good (Kueue sends nothing more while it waits)
    prime(engine, Api(), OperatorOptions(namespaces=("team-a",), save_window_check=True))  # type: ignore[arg-type]
    queued = []
    while not engine.events.empty():
        kind, _, body, _ = engine.events.get_nowait()
        queued.append((kind, body["metadata"]["name"] if "metadata" in body else "-"))
    assert queued == [
        ("policy", "advisorpolicies-1"),
        ("namespace", "team-a"),
        ("namespacelisting", "-"),
        ("admissioncheck", "admissionchecks-1"),
        ("localqueue", "localqueues-1"),
        ("workload", "workloads-in-team-a"),
        ("joblisting", "-"),
    ]


def test_the_start_up_line_says_version_namespaces_mode_and_boost() -> None:
    from advisor import __version__
    from advisor.controller.config import EngineConfig
    from advisor.controller.leader import LeaseConfig
    from advisor.controller.operator_options import OperatorOptions, startup_line

    line = startup_line(
        OperatorOptions(
            namespaces=("team-a", "team-b"),
            engine=EngineConfig(recommend_only=True, priority_boost_enabled=True),
            leader_election=LeaseConfig(name="shard-a"),
        )
    )
    assert line.startswith(f"trainjob-advisor {__version__}: watching team-a, team-b;")
    assert "--recommend-only" in line and "PriorityBoost on" in line and "Lease shard-a" in line
    assert "every namespace" in startup_line(OperatorOptions()) and "leader election off" in startup_line(
        OperatorOptions()
    )
    checked = startup_line(OperatorOptions(save_window_check=True, save_window_controller="x.io/shard-b"))
    assert "save-window check on (controllerName x.io/shard-b)" in checked


def test_an_unserved_job_kind_is_left_out_of_the_job_listing_without_a_second_warning(
    caplog: Any,
) -> None:
    """No PyTorchJob CRD: the start-up line says it is not served; the job listing then leaves the
    kind out quietly (it warned "initial listing of PyTorchJob objects failed: Not Found" too).
    Any other failure is still a warning."""
    import logging

    from advisor.controller.initial_listing import list_jobs

    class NotFound(Exception):
        status, reason = 404, "Not Found"

    class Custom:
        def __init__(self, failure: Exception) -> None:
            self.failure = failure

        def list_cluster_custom_object(self, group: str, version: str, plural: str) -> dict[str, Any]:
            if plural == "pytorchjobs":
                raise self.failure
            return {"items": [{"metadata": {"name": "ft", "namespace": "a", "uid": "u1"}}]}

    class Api:
        def __init__(self, failure: Exception) -> None:
            self.custom = Custom(failure)

    caplog.set_level(logging.DEBUG, logger="advisor.controller.initial_listing")
    listing = list_jobs(Api(NotFound()), OperatorOptions())  # type: ignore[arg-type]
    assert listing == {"kinds": ["TrainJob"], "jobs": {"a/ft": "u1"}}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    list_jobs(Api(RuntimeError("500 etcd")), OperatorOptions())  # type: ignore[arg-type]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "initial listing of PyTorchJob objects failed: 500 etcd"
    ]
