"""The controller's HTTP endpoints: ``/metrics`` (Prometheus), ``/healthz`` and ``/readyz``.

Readiness is the health of the process, not leadership: a standby that can read the Lease is
ready, so that a rolling update of replicas under leader election counts the new pod as available
(``serve_http`` says why at length). The body says the replica's role as it is: ``leader``,
``standby``, or ``active, no leader election`` when no election is configured. Served from a
daemon thread of its own (``advisor-http``), beside kopf's event loop and the engine's worker.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from advisor.controller.conditions import POLICIES_NOT_LISTED
from advisor.controller.engine import Engine
from advisor.controller.leader import LeaderElector

__all__ = ["LEASE_LAPSED", "NO_ELECTION", "serve_http"]

#: ``/readyz`` of a controller run without leader election: it acts, and no election made it leader
NO_ELECTION = "active, no leader election"
#: ``/readyz`` of a leader whose Lease lapsed (not renewed within the renew deadline): it stops
LEASE_LAPSED = "lost the Lease, stopping"


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
    body says which, as it is: ``leader`` once it holds the Lease and has listed the cluster;
    ``standby`` while it waits for the Lease and can read it (the API server answered within the
    lease duration), so it can take over; ``active, no leader election`` for a controller run
    without it (it acts alone, with no Lease to hold: its body said ``leader``, which no election
    had made it). A standby is ready on purpose: readiness is the health of the process, not
    leadership, so that a rolling update of replicas under leader election (maxUnavailable 0)
    counts the new pod, a standby, as available and removes the old leader; a leader-only probe
    would hold every update forever. Which replica leads is the body and the
    ``trainjob_advisor_leader`` gauge. 503 while a new leader lists the cluster (``starting``),
    while the leader could not list the AdvisorPolicies (it acts on no job meanwhile:
    ``Engine.policies_unknown``; a pod not READY is where an admin looks first), while a standby
    cannot read the Lease, once a leader's Lease lapsed (it acts no more and stops), and once the
    worker stopped."""
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from prometheus_client import make_wsgi_app

    metrics_app = make_wsgi_app(engine.metrics.registry)

    def answer(path: str) -> tuple[bool, str]:
        threads = [worker] if isinstance(worker, threading.Thread) else list(worker or ())
        if not all(t.is_alive() for t in threads):
            return False, "engine worker stopped"
        if path == "/healthz":
            return True, "ok"
        if elector is not None and not elector.is_leader():
            if threads:  # it led: its Lease lapsed, it acts no more, and the operator stops
                return False, LEASE_LAPSED
            if elector.in_touch():
                return True, "standby"
            return False, "standby, cannot read the Lease"
        role = "leader" if elector is not None else NO_ELECTION
        if not (engine.ready and (threads or worker is None)):
            return False, "starting"
        if engine.policies_unknown:
            return False, f"{role}; {POLICIES_NOT_LISTED}"
        return True, role

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
