"""kopf wiring: thin event handlers that feed the ``Engine``, plus the process around it.

Only ``@kopf.on.event`` handlers are used: they need no per-object kopf state, so kopf never
writes its bookkeeping into a TrainJob (whose structural schema would prune ``status.kopf``) and
never adds finalizers. Persistence is still pointed at annotations with our own prefix, so that
a future change-detecting handler cannot write into status by accident. kopf's own Event posting
is off: the advisor posts its Events itself, with its reasons and numbers.

The engine runs on one worker thread (see ``advisor.controller.engine``); a small HTTP server
serves ``/metrics``, ``/healthz`` and ``/readyz`` (ready on the leader and on a standby alike, see
``advisor.controller.http_endpoints``); kopf's own liveness endpoint is optional. Before kopf's
watches start, the cluster is listed into the engine once (``advisor.controller.initial_listing``).

With leader election on (``OperatorOptions.leader_election``, the Deployment's default), nothing
starts (no listing, no watch, no write) before the process holds the Lease (see
``advisor.controller.leader``); every write and every mutation checks that it still holds it,
and losing it stops the operator (``LeadershipLost``), so that the pod restarts as a standby.
However it stops, its last INFO line says so and why (``_stopped_line``): a signal, the Lease
lost, an error, or a stop asked by the code that embeds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import kopf

from advisor.controller.api import ClusterApi
from advisor.controller.crd_check import holds_apply, installed_crd, outdated_crds, outdated_line
from advisor.controller.engine import Engine
from advisor.controller.grants import leftover_warning, leftover_writes
from advisor.controller.http_endpoints import serve_http
from advisor.controller.initial_listing import list_saved, prime
from advisor.controller.jobs import PYTORCHJOB, TRAINJOB
from advisor.controller.kueue import KUEUE_GROUP, KUEUE_VERSION
from advisor.controller.late_kinds import LATE_KIND_POLL_S, quiet_while_late, until_served
from advisor.controller.leader import LeaderElector
from advisor.controller.operator_options import OperatorOptions, startup_line
from advisor.controller.policysync import custom_policies, resync_policies
from advisor.controller.savecheck import NamespaceScope, SaveWindowCheck, UnwatchedWorkloads
from advisor.protocol import GROUP, VERSION

__all__ = [
    "LeadershipLost",
    "build_registry",
    "configure_settings",
    "run_operator",
]

log = logging.getLogger(__name__)


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


def _worker(engine: Engine, stop: threading.Event, tick_s: float) -> None:
    while not stop.is_set():
        started = time.monotonic()
        try:
            engine.step()
        except Exception:
            log.exception("engine step failed")
        stop.wait(max(0.0, tick_s - (time.monotonic() - started)))


async def _held_for_old_crds(api: ClusterApi, options: OperatorOptions) -> OperatorOptions:
    """``options``, recommend-only when the installed CRDs lack a field Apply needs (``crd_check``),
    with the ERROR line that says so; unchanged (a WARNING) when they lack only fields for people,
    or when they could not be read."""
    try:
        found = await asyncio.to_thread(outdated_crds, installed_crd(api.api_client))
    except Exception as exc:
        why = getattr(exc, "reason", None) or exc
        log.warning("could not read the advisor's CRDs to compare their schema generation (%s)", why)
        return options
    if not found:
        return options
    if not holds_apply(found):
        log.warning("%s", outdated_line(found, recommend_only=options.engine.recommend_only))
        return options
    log.error("%s", outdated_line(found, recommend_only=options.engine.recommend_only))
    if options.engine.recommend_only:
        return options
    why = (
        "the installed CRDs are older than the controller (its log says which)",
        "once they are upgraded and the controller restarts",
    )
    engine = dataclasses.replace(options.engine, recommend_only=True, recommend_only_why=why)
    return dataclasses.replace(options, engine=engine)


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

    api_client = load_api_client(options.kubeconfig, options.context, writers=options.engine.writer_workers)
    api = ClusterApi(api_client)
    # the Events say which release and replica posted them: "<Lease>/<pod>" under leader election
    # (a release's Lease is named after it), else the pod
    api.instance = (
        f"{options.leader_election.name}/{_identity()}"
        if options.leader_election is not None
        else _identity()
    )
    log.info("%s", startup_line(options))
    options = await _held_for_old_crds(api, options)
    if options.engine.recommend_only:
        leftover = leftover_warning(await asyncio.to_thread(leftover_writes, api))
        if leftover is not None:
            log.warning("%s", leftover)
    if options.watch_kueue:
        if options.kueue_version is None:
            log.info("Kueue: %s", await asyncio.to_thread(api.discover_kueue))
        else:
            api.kueue.version = options.kueue_version
        options = dataclasses.replace(options, kueue_version=api.kueue.version)
    late_pytorchjobs = (
        options.watch_pytorchjobs
        and await asyncio.to_thread(api.serves, PYTORCHJOB.group, PYTORCHJOB.version) is False
    )
    if late_pytorchjobs:
        # kopf waits for the kind (its own warnings of it are DEBUG meanwhile: ``late_kinds``); say
        # once what that means and how to stop it
        log.warning(
            "PyTorchJobs: %s/%s is not served (no Kubeflow Training Operator v1); looking for it every "
            "%.0f s in case it is installed later; pass --no-pytorchjobs (chart value pytorchJobs=false) "
            "to stop",
            PYTORCHJOB.group,
            PYTORCHJOB.version,
            LATE_KIND_POLL_S,
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
    # until kopf runs (it takes SIGTERM and SIGINT over while it does): a signal stops the
    # controller with its line, a standby's too (it died without a word)
    signalled = _catch_signals(loop, stop_all)
    if elector is not None and options.leader_election is not None:
        engine.set_gate(elector.is_leader)
        log.info("waiting for the leader Lease (identity %s)", elector.identity)
        while not await asyncio.to_thread(elector.try_acquire_or_renew):
            if _is_set(stop_flag) or signalled:
                log.info("%s", _stopped_line(signalled, "asked to stop", standby=True))
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
    cause = "asked to stop"  # what the last line says stopped it (``_stopped_line``)
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
        saved = await asyncio.to_thread(list_saved, api, options.namespaces)
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
        engine.ready = True
        first = True
        while not stop_all.is_set():
            # one kopf run per set of served kinds: kopf notices a CRD created after start-up only
            # if the API server's discovery serves it by the CRD's own watch events, which it may
            # not yet (a PyTorchJob CRD installed later was never watched); a kind found served
            # later starts a new run, which lists and watches it (the engine and its state go on)
            this_run = asyncio.Event()
            looking = asyncio.create_task(
                until_served(api, late_pytorchjobs, stop_all, this_run, LATE_KIND_POLL_S)
            )
            settings = kopf.OperatorSettings()
            configure_settings(settings)
            try:
                # kopf's warning at each CRD event that the kind looked for is not served is DEBUG
                with quiet_while_late([PYTORCHJOB] if late_pytorchjobs else []):
                    await kopf.operator(
                        registry=build_registry(engine, api, options),
                        settings=settings,
                        standalone=True,
                        identity=_identity(),  # type: ignore[arg-type]  # kopf's Identity: NewType of str
                        clusterwide=not options.namespaces,
                        namespaces=list(options.namespaces),
                        liveness_endpoint=options.liveness_endpoint,
                        stop_flag=this_run,
                        ready_flag=ready_flag if first else None,
                    )
            finally:
                looking.cancel()
            if not this_run.is_set():
                cause = "a signal (SIGTERM or SIGINT)"
                break  # kopf stopped on its own (a signal): the controller stops
            late_pytorchjobs, first = False, False
    except asyncio.CancelledError:
        cause = "cancelled"
        raise
    except Exception as exc:
        cause = f"an error: {type(exc).__name__}: {exc}"
        raise
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
            cause = "lost the leader Lease (not renewed within the renew deadline)"
        log.info("%s", _stopped_line(signalled, cause))
    if lost.is_set():
        raise LeadershipLost("lost the leader Lease; stopped so that another replica acts alone")
    return engine


def _catch_signals(loop: asyncio.AbstractEventLoop, stop_all: asyncio.Event) -> list[str]:
    """SIGTERM and SIGINT set ``stop_all`` (until kopf takes them over); returns the list their
    names are added to. Only the main thread can take signals (an embedding thread cannot)."""
    caught: list[str] = []

    def on_signal(sig: signal.Signals) -> None:
        caught.append(sig.name)
        stop_all.set()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, on_signal, sig)
    return caught


def _stopped_line(signalled: list[str], cause: str, *, standby: bool = False) -> str:
    """The controller's last line: that it stopped, and why (a signal, the Lease lost, an error, a
    stop asked by the embedding code). Before it, kopf's own lines said only that its tasks ended."""
    why = f"{signalled[0]} received" if signalled else cause
    return f"controller stopped{' while standing by' if standby else ''}: {why}"


def _identity() -> str:
    """This process's name for kopf, without kopf's default ``getpass.getuser()``: that raises for a
    uid with no passwd entry, which is how images run (``runAsUser`` 65532, OpenShift's random
    uids). ``POD_ID`` is kopf's own variable for it."""
    return os.environ.get("POD_ID") or f"trainjob-advisor@{socket.gethostname()}/{os.getpid()}"
