"""``trainjob-advisor run``: the controller (a kopf operator) as platform teams deploy it.

Flags cover what a Deployment needs: which namespaces to watch, the metrics/probe port, a kopf
liveness endpoint, the log format, and the write-rate limits that keep a big cluster's API
server calm. kopf and the kubernetes client are imported only when the command runs.
"""

from __future__ import annotations

import argparse
import errno
from typing import Any

from advisor.cli import CommandError, duration

__all__ = ["register", "run"]

#: the default ``--save-window-controller-name`` (``advisor.controller.savecheck.CONTROLLER_NAME``;
#: not imported from there, so that ``--help`` loads no controller module)
CHECK_CONTROLLER_NAME = "trainjob-advisor.io/save-window"


def register(subparsers: Any) -> None:
    from advisor.controller.cliutil import add_cluster_args

    p = subparsers.add_parser(
        "run",
        help="run the controller (kopf operator)",
        description="Watch TrainJobs (and PyTorchJobs, Kueue queues and workloads), "
        "forecast each run and apply the AdvisorPolicies.",
    )
    add_cluster_args(p)
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace (default)")
    scope.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=[],
        metavar="NS",
        help="watch only this namespace (repeatable)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=8080,
        help="port of /metrics, /healthz, /readyz (0 disables; default 8080)",
    )
    p.add_argument("--metrics-host", default="0.0.0.0", help="address to bind the metrics port to")
    p.add_argument(
        "--liveness", metavar="URL", help="kopf's liveness endpoint, e.g. http://0.0.0.0:8081/healthz"
    )
    p.add_argument("--log-format", choices=("text", "json"), default="text")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    p.add_argument(
        "--write-interval",
        type=duration,
        default=2.0,
        metavar="DURATION",
        help="on average at most one TrainJobForecast write per object per this long (2, 2s, 1m; default 2s)",
    )
    p.add_argument(
        "--max-writes-per-second",
        type=float,
        default=200.0,
        metavar="N",
        help="global cap on status writes (default 200/s: 1,000 jobs reporting every 5 s)",
    )
    p.add_argument(
        "--forecast-interval",
        type=duration,
        default=30.0,
        metavar="DURATION",
        help="re-forecast a job at most this often (30, 30s, 2m; default 30s)",
    )
    p.add_argument(
        "--evaluate-interval",
        type=duration,
        default=30.0,
        metavar="DURATION",
        help="re-evaluate idle jobs this often, for stalls and timeouts (30, 30s, 1m; default 30s)",
    )
    p.add_argument(
        "--priority-boost",
        action="store_true",
        help="Kueue runs with the PriorityBoost feature gate (enables the preemption guard's boost)",
    )
    p.add_argument(
        "--recommend-only",
        action="store_true",
        help="treat every AdvisorPolicy as mode Recommend: record and explain, never change a job",
    )
    p.add_argument(
        "--history-points",
        type=int,
        default=None,
        metavar="N",
        help="progress points kept per job before older ones are thinned (default 300, at least 16)",
    )
    p.add_argument(
        "--writer-threads",
        type=int,
        default=32,
        metavar="N",
        help="status writes in flight at once (default 32; they wait on the API server, not the CPU)",
    )
    le = p.add_argument_group("leader election (a coordination.k8s.io Lease; the Deployment turns it on)")
    le.add_argument(
        "--leader-elect",
        action="store_true",
        help="act only while holding the Lease, so that of several replicas exactly one acts",
    )
    le.add_argument(
        "--leader-election-namespace",
        metavar="NS",
        help="namespace of the Lease (default: the pod's own namespace, else trainjob-advisor-system)",
    )
    le.add_argument("--leader-election-id", default="trainjob-advisor", metavar="NAME", help="Lease name")
    le.add_argument(
        "--lease-duration",
        type=float,
        default=15.0,
        metavar="S",
        help="a standby takes over S seconds after the leader's last renewal (default 15)",
    )
    le.add_argument(
        "--renew-deadline",
        type=float,
        default=10.0,
        metavar="S",
        help="the leader stops acting when it could not renew for S seconds (default 10)",
    )
    le.add_argument(
        "--retry-period",
        type=float,
        default=2.0,
        metavar="S",
        help="renew / retry every S seconds (default 2)",
    )
    p.add_argument(
        "--no-job-metrics",
        action="store_true",
        help="export no per-job series on /metrics (no namespace/job names, steps or forecasts)",
    )
    p.add_argument("--no-kueue", action="store_true", help="do not watch Kueue objects")
    p.add_argument(
        "--save-window-check",
        action="store_true",
        help="answer the Kueue AdmissionChecks whose controllerName is --save-window-controller-name: a "
        "workload on a ClusterQueue that lists one starts only after the advisor looked at its job "
        "(so a grace period can be set before its first start; manifests/components/save-window-check); "
        "one of a namespace not watched goes at once",
    )
    p.add_argument(
        "--save-window-controller-name",
        default=CHECK_CONTROLLER_NAME,
        metavar="NAME",
        help="spec.controllerName of the AdmissionChecks --save-window-check answers (default "
        f"{CHECK_CONTROLLER_NAME}); each namespace shard needs its own, listed only by the ClusterQueues "
        "of its namespaces",
    )
    p.add_argument("--no-pytorchjobs", action="store_true", help="do not watch Kubeflow v1 PyTorchJobs")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    for name in ("write_interval", "max_writes_per_second", "forecast_interval", "evaluate_interval"):
        if getattr(args, name) < 0 or (name == "max_writes_per_second" and args.max_writes_per_second == 0):
            raise CommandError(f"--{name.replace('_', '-')} must be positive")
    if not 1 <= args.writer_threads <= 64:
        raise CommandError(f"--writer-threads must be between 1 and 64, got {args.writer_threads}")
    if not 0 <= args.metrics_port <= 65535:
        raise CommandError(f"--metrics-port must be a port number, got {args.metrics_port}")
    controller_name = args.save_window_controller_name.strip()
    if not 0 < len(controller_name) <= 253:  # Kueue's bounds on spec.controllerName
        raise CommandError("--save-window-controller-name must have 1 to 253 characters")
    lease = None
    if args.leader_elect:
        from advisor.controller.leader import LeaseConfig

        try:
            lease = LeaseConfig(
                namespace=args.leader_election_namespace or _own_namespace(),
                name=args.leader_election_id,
                lease_duration_s=args.lease_duration,
                renew_deadline_s=args.renew_deadline,
                retry_period_s=args.retry_period,
            )
        except ValueError as exc:
            raise CommandError(
                f"--retry-period < --renew-deadline < --lease-duration is required: {exc}"
            ) from exc
    import asyncio

    from advisor.controller.cliutil import configure_logging, probe_cluster
    from advisor.controller.engine import EngineConfig
    from advisor.controller.operator import LeadershipLost, run_operator
    from advisor.controller.operator_options import OperatorOptions
    from advisor.core.history import DEFAULT_MAX_POINTS, MIN_MAX_POINTS

    history_points = DEFAULT_MAX_POINTS if args.history_points is None else args.history_points
    if history_points < MIN_MAX_POINTS:
        raise CommandError(f"--history-points must be at least {MIN_MAX_POINTS}, got {history_points}")

    probe_cluster(args)  # no kubeconfig, or no API server: one line now, not retries later
    configure_logging(args.log_format, args.log_level)
    if args.recommend_only:
        import logging

        logging.getLogger("advisor").info(
            "--recommend-only: every AdvisorPolicy is evaluated as mode Recommend; no job is changed"
        )
    options = OperatorOptions(
        kubeconfig=args.kubeconfig,
        context=args.context,
        namespaces=tuple(args.namespace),
        metrics_port=args.metrics_port or None,
        metrics_host=args.metrics_host,
        liveness_endpoint=args.liveness,
        watch_kueue=not args.no_kueue,
        watch_pytorchjobs=not args.no_pytorchjobs,
        save_window_check=args.save_window_check and not args.no_kueue,
        save_window_controller=controller_name,
        engine=EngineConfig(
            write_interval_s=args.write_interval,
            max_writes_per_second=args.max_writes_per_second,
            forecast_interval_s=args.forecast_interval,
            evaluate_interval_s=args.evaluate_interval,
            priority_boost_enabled=args.priority_boost,
            recommend_only=args.recommend_only,
            writer_workers=args.writer_threads,
            job_metrics=not args.no_job_metrics,
            history_points=history_points,
            status_shard=status_shard(
                f"{args.leader_election_namespace or _own_namespace()}/{args.leader_election_id}",
                tuple(args.namespace),
                leader_election=lease is not None,
            ),
        ),
        leader_election=lease,
        # beside the Lease: the controller's own namespace (its Role allows ConfigMaps there)
        evidence_namespace=lease.namespace if lease is not None else None,
    )
    try:
        asyncio.run(run_operator(options))
    except OSError as exc:
        hint = ""
        if getattr(exc, "errno", None) == errno.EADDRINUSE:
            hint = f" (the metrics port {args.metrics_port} is taken: choose another with --metrics-port)"
        raise CommandError(f"cannot start: {exc}{hint}") from exc
    except LeadershipLost as exc:
        raise CommandError(f"{exc} (the pod restarts and stands by)") from exc
    except Exception as exc:
        if getattr(exc, "status", None) != 403:
            raise
        # kopf's watches give up on a 403 after their retries (about a minute), and the process
        # ends: say which right is missing rather than "internal error"
        why = getattr(exc, "message", None) or str(exc)
        raise CommandError(
            f"the API server refused a watch (403 Forbidden): {why}; the controller's ServiceAccount "
            "lacks a right its RBAC grants (manifests/rbac and manifests/components/act, or the chart): "
            "`kubectl auth can-i --list --as=system:serviceaccount:<namespace>:<name>` shows what it has"
        ) from exc
    return 0


def status_shard(lease: str, namespaces: tuple[str, ...], *, leader_election: bool) -> str:
    """The controller's entry in each AdvisorPolicy's ``status.shards``: its Lease
    (``<namespace>/<name>``), which names a release under leader election and keeps a cluster-wide
    release's one entry whether leader election is on or off. Without leader election no Lease
    tells two controllers apart: two of them watching different namespaces (two ``run -n``, or two
    releases in one namespace with leader election off) would write one entry in turn, each
    overwriting the other's counts, so the entry also names the namespaces watched."""
    if leader_election or not namespaces:
        return lease
    return f"{lease}[{','.join(sorted(set(namespaces)))}]"


def _own_namespace() -> str:
    """The pod's namespace (``POD_NAMESPACE`` or the mounted ServiceAccount's), else the default."""
    import os
    from pathlib import Path

    found = os.environ.get("POD_NAMESPACE")
    if found:
        return found
    try:
        return Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read_text().strip()
    except OSError:
        return "trainjob-advisor-system"
