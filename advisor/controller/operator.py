"""kopf wiring: thin event handlers that feed the ``Engine``, plus the process around it.

Only ``@kopf.on.event`` handlers are used: they need no per-object kopf state, so kopf never
writes its bookkeeping into a TrainJob (whose structural schema would prune ``status.kopf``) and
never adds finalizers. Persistence is still pointed at annotations with our own prefix, so that
a future change-detecting handler cannot write into status by accident. kopf's own Event posting
is off: the advisor posts its Events itself, with its reasons and numbers.

The engine runs on one worker thread (see ``advisor.controller.engine``); a small HTTP server
serves ``/metrics``, ``/healthz`` and ``/readyz`` (ready on the leader and on a standby alike, see
``serve_http``); kopf's own liveness endpoint is optional.

With leader election on (``OperatorOptions.leader_election``, the Deployment's default), nothing
starts (no listing, no watch, no write) before the process holds the Lease (see
``advisor.controller.leader``); every write and every mutation checks that it still holds it,
and losing it stops the operator (``LeadershipLost``), so that the pod restarts as a standby.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import kopf

from advisor.controller.api import ClusterApi
from advisor.controller.conditions import POLICIES_NOT_LISTED
from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.jobs import PYTORCHJOB, TRAINJOB
from advisor.controller.kueue import KUEUE_GROUP, KUEUE_VERSION
from advisor.controller.leader import LeaderElector, LeaseConfig
from advisor.controller.policysync import custom_policies, resync_policies
from advisor.controller.savecheck import (
    CONTROLLER_NAME,
    NamespaceScope,
    SaveWindowCheck,
    UnwatchedWorkloads,
)
from advisor.model import job_key
from advisor.protocol import GROUP, VERSION

__all__ = [
    "LeadershipLost",
    "OperatorOptions",
    "build_registry",
    "configure_settings",
    "run_operator",
    "serve_http",
]

log = logging.getLogger(__name__)


@dataclass
class OperatorOptions:
    kubeconfig: str | None = None
    context: str | None = None
    namespaces: Sequence[str] = ()
    metrics_port: int | None = 8080
    metrics_host: str = "0.0.0.0"
    liveness_endpoint: str | None = None
    watch_pytorchjobs: bool = True
    watch_kueue: bool = True
    #: the Kueue API version to watch; None: the one the server serves (``run_operator`` asks)
    kueue_version: str | None = None
    tick_s: float = 0.2
    engine: EngineConfig = field(default_factory=EngineConfig)
    #: None: no leader election (a single replica, tests, ``run`` on a laptop)
    leader_election: LeaseConfig | None = None
    identity: str | None = None
    #: the namespace of the ConfigMap that keeps deleted jobs' SIGTERM evidence per runtime
    #: (``advisor.controller.evidence``); None: kept in memory only
    evidence_namespace: str | None = None
    #: answer the save-window AdmissionChecks (``advisor.controller.savecheck``; needs Kueue)
    save_window_check: bool = False
    #: the ``spec.controllerName`` of the AdmissionChecks it answers (one per namespace shard)
    save_window_controller: str = CONTROLLER_NAME


def startup_line(options: OperatorOptions) -> str:
    """What this controller is about to do, in one line at start-up (an operator reading the log of
    a pod asks first: which version, which namespaces, may it act, may it boost)."""
    from advisor import __version__

    cfg = options.engine
    namespaces = ", ".join(options.namespaces) if options.namespaces else "every namespace"
    mode = (
        "every policy held to Recommend (--recommend-only)"
        if cfg.recommend_only
        else "policies act in their own mode"
    )
    lease = options.leader_election
    election = f"on (Lease {lease.name})" if lease is not None else "off"
    return (
        f"trainjob-advisor {__version__}: watching {namespaces}; {mode}; "
        f"Kueue {'watched' if options.watch_kueue else 'not watched'}, PriorityBoost "
        f"{'on' if cfg.priority_boost_enabled else 'off'}, save-window check "
        f"{f'on (controllerName {options.save_window_controller})' if options.save_window_check else 'off'}; "
        f"leader election {election}"
    )


class LeadershipLost(RuntimeError):
    """The Lease could not be renewed in time: another replica may act now, so this one stopped."""


def _is_set(flag: Any) -> bool:
    if flag is None:
        return False
    if hasattr(flag, "is_set"):
        return bool(flag.is_set())
    if hasattr(flag, "done"):
        return bool(flag.done())
    return bool(flag)


def _connection_info(api_client: Any) -> kopf.ConnectionInfo:
    cfg = api_client.configuration
    header = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix("authorization")
    parts = header.split(" ", 1) if header else []
    scheme, token = (
        (None, None) if not parts else (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])
    )
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        scheme=scheme,
        token=token,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
    )


def configure_settings(settings: kopf.OperatorSettings) -> None:
    settings.posting.enabled = False
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    # a job reports every few seconds: keep its per-object worker instead of re-creating it each time
    settings.queueing.idle_timeout = 60.0
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 60


def build_registry(engine: Engine, api: ClusterApi, options: OperatorOptions) -> kopf.OperatorRegistry:
    """A kopf registry whose handlers only enqueue what they see into ``engine``."""
    registry = kopf.OperatorRegistry()

    def feed(kind: str) -> Any:
        async def handler(event: kopf.RawEvent, **_: Any) -> None:
            engine.enqueue(kind, event.get("type") or "ADDED", event["object"])

        handler.__name__ = f"feed_{kind}"
        return handler

    kopf.on.event(TRAINJOB.group, TRAINJOB.version, TRAINJOB.plural, registry=registry)(feed("job"))
    if options.watch_pytorchjobs:
        kopf.on.event(PYTORCHJOB.group, PYTORCHJOB.version, PYTORCHJOB.plural, registry=registry)(feed("job"))
    if options.watch_kueue:
        kueue_version = options.kueue_version or KUEUE_VERSION
        for plural, kind in (
            ("workloads", "workload"),
            ("clusterqueues", "clusterqueue"),
            ("localqueues", "localqueue"),
        ):
            kopf.on.event(KUEUE_GROUP, kueue_version, plural, registry=registry)(feed(kind))
        if options.save_window_check:
            kopf.on.event(KUEUE_GROUP, kueue_version, "admissionchecks", registry=registry)(
                feed("admissioncheck")
            )
    kopf.on.event("", "v1", "namespaces", registry=registry)(feed("namespace"))
    kopf.on.event(GROUP, VERSION, "advisorpolicies", registry=registry)(feed("policy"))

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return _connection_info(api.api_client)

    @kopf.on.probe(id="advisor", registry=registry)
    def probe(**_: Any) -> dict[str, Any]:
        return {"jobs": len(engine.jobs), "pendingWrites": engine.writer.pending(), "ready": engine.ready}

    return registry


def serve_http(
    engine: Engine,
    host: str,
    port: int,
    worker: threading.Thread | Sequence[threading.Thread] | None,
    *,
    elector: LeaderElector | None = None,
) -> Any:
    """``/metrics`` (Prometheus), ``/healthz`` (liveness) and ``/readyz`` (readiness) on one port.

    ``worker``: the engine's thread, or a list that receives it once this replica leads (a
    standby has none yet); ``elector``: this replica's, under leader election.

    ``/healthz`` answers 200 while the engine's worker lives (a standby, without one, is alive).
    ``/readyz`` answers 200 when this replica can do its part, leader and standby alike, and its
    body says which: ``leader`` once it holds the Lease (or runs without leader election) and has
    listed the cluster; ``standby`` while it waits for the Lease and can read it (the API server
    answered within the lease duration), so it can take over. A standby is ready on purpose:
    readiness is the health of the process, not leadership, so that a rolling update of replicas
    under leader election (maxUnavailable 0) counts the new pod, a standby, as available and
    removes the old leader; a leader-only probe would hold every update forever. Which replica
    leads is the body and the ``trainjob_advisor_leader`` gauge. 503 while a new leader lists the
    cluster (``starting``), while the leader could not list the AdvisorPolicies (it acts on no job
    meanwhile: ``Engine.policies_unknown``; a pod not READY is where an admin looks first), while a
    standby cannot read the Lease, and once the worker stopped."""
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from prometheus_client import make_wsgi_app

    metrics_app = make_wsgi_app(engine.metrics.registry)

    def answer(path: str) -> tuple[bool, str]:
        threads = [worker] if isinstance(worker, threading.Thread) else list(worker or ())
        if not all(t.is_alive() for t in threads):
            return False, "engine worker stopped"
        if path == "/healthz":
            return True, "ok"
        if elector is not None and not threads and not elector.is_leader():
            if elector.in_touch():
                return True, "standby"
            return False, "standby, cannot read the Lease"
        if not (engine.ready and (threads or worker is None)):
            return False, "starting"
        if engine.policies_unknown:
            return False, f"leader; {POLICIES_NOT_LISTED}"
        return True, "leader"

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if path in ("/healthz", "/readyz"):
            ok, text = answer(path)
            start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
            return [f"{text}\n".encode()]
        return metrics_app(environ, start_response)

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = make_server(host, port, app, handler_class=Quiet)
    threading.Thread(target=server.serve_forever, name="advisor-http", daemon=True).start()
    return server


def _worker(engine: Engine, stop: threading.Event, tick_s: float) -> None:
    while not stop.is_set():
        started = time.monotonic()
        try:
            engine.step()
        except Exception:
            log.exception("engine step failed")
        stop.wait(max(0.0, tick_s - (time.monotonic() - started)))


async def run_operator(
    options: OperatorOptions,
    *,
    stop_flag: Any = None,
    ready_flag: Any = None,
    on_engine: Callable[[Engine], None] | None = None,
) -> Engine:
    """Run the controller until ``stop_flag`` (an asyncio/threading Event or Future) is set.

    ``on_engine`` is called with the engine before it starts (for embedding and tests)."""
    from advisor.controller.api import load_api_client

    api_client = load_api_client(options.kubeconfig, options.context)
    api = ClusterApi(api_client)
    # the Events say which release and replica posted them: "<Lease>/<pod>" under leader election
    # (a release's Lease is named after it), else the pod
    api.instance = (
        f"{options.leader_election.name}/{_identity()}"
        if options.leader_election is not None
        else _identity()
    )
    log.info("%s", startup_line(options))
    if options.watch_kueue:
        if options.kueue_version is None:
            log.info("Kueue: %s", await asyncio.to_thread(api.discover_kueue))
        else:
            api.kueue.version = options.kueue_version
        options = dataclasses.replace(options, kueue_version=api.kueue.version)
    if (
        options.watch_pytorchjobs
        and await asyncio.to_thread(api.serves, PYTORCHJOB.group, PYTORCHJOB.version) is False
    ):
        # kopf waits for the kind (and says it is not served); say what that means and how to stop it
        log.warning(
            "PyTorchJobs: %s/%s is not served (no Kubeflow Training Operator v1); watching for it in case "
            "it is installed later; pass --no-pytorchjobs (chart value pytorchJobs=false) to stop",
            PYTORCHJOB.group,
            PYTORCHJOB.version,
        )
    engine = Engine(api, config=options.engine)
    follower: UnwatchedWorkloads | None = None
    if options.watch_kueue and options.save_window_check:
        kinds = [TRAINJOB.kind, PYTORCHJOB.kind] if options.watch_pytorchjobs else [TRAINJOB.kind]
        scope = NamespaceScope(options.namespaces)
        check = SaveWindowCheck(
            api.custom,
            api.kueue.version,
            controller_name=options.save_window_controller,
            scope=scope,
            events=api,
        )
        engine.use_save_check(check, kinds)
        if options.namespaces:
            # a queue that lists the check may serve namespaces kopf does not watch: their
            # workloads must not wait for a look that never comes
            follower = UnwatchedWorkloads(
                api.custom,
                api.kueue.version,
                scope,
                functools.partial(engine.enqueue, "unwatched-workload"),
            )
    stop = threading.Event()
    workers: list[threading.Thread] = []
    elector: LeaderElector | None = None
    if options.leader_election is not None:
        from kubernetes import client

        elector = LeaderElector(
            client.CoordinationV1Api(api.api_client), options.leader_election, identity=options.identity
        )
    # /healthz answers from the start (a standby is alive); /readyz on a standby that can read the
    # Lease ("standby") and on the leader once it has listed the cluster ("leader")
    server = (
        serve_http(engine, options.metrics_host, options.metrics_port, workers, elector=elector)
        if options.metrics_port is not None
        else None
    )
    loop = asyncio.get_running_loop()
    stop_all = asyncio.Event()
    lost = threading.Event()

    def on_lost() -> None:
        lost.set()
        loop.call_soon_threadsafe(stop_all.set)

    renewer: threading.Thread | None = None
    if elector is not None and options.leader_election is not None:
        engine.set_gate(elector.is_leader)
        log.info("waiting for the leader Lease (identity %s)", elector.identity)
        while not await asyncio.to_thread(elector.try_acquire_or_renew):
            if _is_set(stop_flag):
                log.info("stopped while standing by")
                if server is not None:
                    server.shutdown()
                return engine
            await asyncio.sleep(options.leader_election.retry_period_s)
        # renew from now on: listing a big cluster below may take longer than the renew deadline
        renewer = threading.Thread(
            target=elector.keep_renewing, args=(stop, on_lost), name="advisor-lease", daemon=True
        )
        renewer.start()
    worker = threading.Thread(
        target=_worker, args=(engine, stop, options.tick_s), name="advisor-engine", daemon=True
    )

    async def forward_stop() -> None:
        while not _is_set(stop_flag) and not stop_all.is_set():
            await asyncio.sleep(0.2)
        stop_all.set()

    forwarder = asyncio.create_task(forward_stop())
    try:
        if options.evidence_namespace is not None:
            from advisor.controller.evidence import CONFIGMAP, EvidenceStore, evidence_name

            lease = options.leader_election
            store = EvidenceStore(
                api.core,
                options.evidence_namespace,
                evidence_name(lease.name) if lease is not None else CONFIGMAP,
                legacy=CONFIGMAP,
            )
            adopted = await asyncio.to_thread(engine.use_evidence_store, store)
            log.info("runtime SIGTERM evidence of deleted jobs: %d runtime(s) restored", adopted)
        saved = await asyncio.to_thread(_list_saved, api, options.namespaces)
        log.info("restoring %d TrainJobForecast(s)", engine.load_saved(saved))
        engine.expect_job_listing()  # the policies' figures wait for the jobs (``prime`` lists them)
        listed = await asyncio.to_thread(prime, engine, api, options)
        threading.Thread(
            target=resync_policies,
            args=(engine, functools.partial(custom_policies, api), stop),
            kwargs={"listed": listed},
            name="advisor-policy-resync",
            daemon=True,
        ).start()
        if on_engine is not None:
            on_engine(engine)
        worker.start()
        workers.append(worker)
        if follower is not None:  # after the listing above: the check's AdmissionChecks come first
            threading.Thread(target=follower.run, args=(stop,), name="advisor-unwatched", daemon=True).start()
        settings = kopf.OperatorSettings()
        configure_settings(settings)
        engine.ready = True
        if not stop_all.is_set():
            await kopf.operator(
                registry=build_registry(engine, api, options),
                settings=settings,
                standalone=True,
                identity=_identity(),  # type: ignore[arg-type]  # kopf's Identity is a NewType of str
                clusterwide=not options.namespaces,
                namespaces=list(options.namespaces),
                liveness_endpoint=options.liveness_endpoint,
                stop_flag=stop_all,
                ready_flag=ready_flag,
            )
    finally:
        forwarder.cancel()
        stop.set()
        if worker.is_alive():
            worker.join(timeout=10)
        if not lost.is_set():
            engine.step()  # apply what arrived last and start the due writes
            engine.writer.flush(time.time() + engine.config.write_interval_s, wait=True)
        engine.close()
        if renewer is not None:
            renewer.join(timeout=5)
        if elector is not None and not lost.is_set():
            await asyncio.to_thread(elector.release)
        if server is not None:
            server.shutdown()
    if lost.is_set():
        raise LeadershipLost("lost the leader Lease; stopped so that another replica acts alone")
    return engine


def _identity() -> str:
    """This process's name for kopf, without kopf's default ``getpass.getuser()``: that raises for a
    uid with no passwd entry, which is how images run (``runAsUser`` 65532, OpenShift's random
    uids). ``POD_ID`` is kopf's own variable for it."""
    return os.environ.get("POD_ID") or f"trainjob-advisor@{socket.gethostname()}/{os.getpid()}"


def prime(engine: Engine, api: ClusterApi, options: OperatorOptions) -> bool:
    """Queue a first listing of policies, namespaces and Kueue objects before any job event, so
    that the first evaluation of a job (and the resumption of an action interrupted by a restart)
    already sees its policy and its Workload. kopf's watches keep them current afterwards. Last,
    which jobs exist (``list_jobs``): the saved statuses of those deleted while no controller ran
    go through the deletion path, and the policies' figures wait for the jobs listed. Returns
    whether the AdvisorPolicies could be listed."""
    custom, kueue_version = api.custom, options.kueue_version or KUEUE_VERSION
    listed = True
    listings: list[tuple[str, Callable[[], Any]]] = [
        ("policy", functools.partial(custom_policies, api)),
        ("namespace", lambda: api.core.list_namespace().to_dict()),
    ]
    if options.watch_kueue and options.save_window_check:
        # before the Workloads: a workload listed before its check is known would not be answered
        # (Kueue sends no further event while it waits on the check)
        listings.append(
            (
                "admissioncheck",
                lambda: custom.list_cluster_custom_object(KUEUE_GROUP, kueue_version, "admissionchecks"),
            )
        )
    if options.watch_kueue:
        listings += [
            (
                "clusterqueue",
                lambda: custom.list_cluster_custom_object(KUEUE_GROUP, kueue_version, "clusterqueues"),
            ),
            (
                "localqueue",
                lambda: custom.list_cluster_custom_object(KUEUE_GROUP, kueue_version, "localqueues"),
            ),
        ]
        if options.namespaces:
            listings += [
                (
                    "workload",
                    functools.partial(
                        custom.list_namespaced_custom_object, KUEUE_GROUP, kueue_version, ns, "workloads"
                    ),
                )
                for ns in options.namespaces
            ]
        else:
            listings.append(
                (
                    "workload",
                    lambda: custom.list_cluster_custom_object(KUEUE_GROUP, kueue_version, "workloads"),
                )
            )
    for kind, fetch in listings:
        try:
            items = fetch().get("items") or []
        except Exception as exc:  # a missing CRD or permission: kopf's watch will tell the rest
            log.warning("initial listing of %s objects failed: %s", kind, getattr(exc, "reason", None) or exc)
            if kind == "policy":
                # until a listing succeeds no job's governing policy is known for sure: the engine
                # acts on none (``Engine.policies_unknown``); ``resync_policies`` tries again
                engine.enqueue("policylisting", "ADDED", {"listed": False})
                listed = False
            continue
        for item in items:
            if kind == "namespace":  # the typed client's dict uses snake_case; only name/labels matter
                meta = item.get("metadata") or {}
                item = {"metadata": {"name": meta.get("name"), "labels": meta.get("labels") or {}}}
            engine.enqueue(kind, "ADDED", item)
    engine.enqueue("joblisting", "ADDED", list_jobs(api, options))
    return listed


def list_jobs(api: ClusterApi, options: OperatorOptions) -> dict[str, Any]:
    """The jobs of the watched kinds that exist now, as the engine's ``joblisting`` event: ``kinds``
    (those listed) and ``jobs`` (``namespace/name`` -> uid). A kind whose listing failed is left
    out (its saved statuses wait for their jobs, as before); with none listed, ``jobs`` is None."""
    kinds = [TRAINJOB, PYTORCHJOB] if options.watch_pytorchjobs else [TRAINJOB]
    listed: list[str] = []
    jobs: dict[str, str | None] = {}
    for jk in kinds:
        try:
            custom: Any = api.custom
            answers = (
                [
                    custom.list_namespaced_custom_object(jk.group, jk.version, ns, jk.plural)
                    for ns in options.namespaces
                ]
                if options.namespaces
                else [custom.list_cluster_custom_object(jk.group, jk.version, jk.plural)]
            )
            items = [item for answer in answers for item in answer.get("items") or []]
        except Exception as exc:
            log.warning(
                "initial listing of %s objects failed: %s", jk.kind, getattr(exc, "reason", None) or exc
            )
            continue
        listed.append(jk.kind)
        for item in items:
            meta = item.get("metadata") or {}
            if meta.get("namespace") and meta.get("name"):
                jobs[job_key(str(meta["namespace"]), str(meta["name"]))] = str(meta.get("uid") or "") or None
    return {"kinds": listed, "jobs": jobs if listed else None}


def _list_saved(api: ClusterApi, namespaces: Sequence[str]) -> Sequence[Mapping[str, Any]]:
    if not namespaces:
        return api.list_forecasts()
    return [obj for ns in namespaces for obj in api.list_forecasts(ns)]
