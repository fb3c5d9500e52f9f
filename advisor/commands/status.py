"""``trainjob-advisor status``: the "PROGRESS %" view of every advised run, and the admins' view.

Without ``--by`` it prints one row per TrainJobForecast (what ``kubectl get tjf`` shows, plus the
run state). With ``--by queue`` (or ``namespace``) it summarises each ClusterQueue: runs
learning / plateaued / overfitting / hung / diverging / near completion / not judged yet, pending,
stopped (suspended, finished or failed: the columns add up to JOBS), GPUs held by runs that no longer
learn, and GPUs expected to free up within 1 h / 6 h / 24 h (from the ETA intervals) — the same
figures the controller exports as per-queue metrics.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from advisor.cli import CommandError

__all__ = ["register", "rows", "run"]

HEADERS = ("NAME", "JOB", "PROGRESS", "ETA", "LOSS", "PLATEAU", "STATE", "ADVICE", "AGE")
QUEUE_HEADERS = (
    "QUEUE",
    "JOBS",
    "GPUS",
    "LEARNING",
    "PLATEAUED",
    "OVERFITTING",
    "HUNG",
    "DIVERGING",
    "NEAR-DONE",
    "UNKNOWN",
    "PENDING",
    "STOPPED",
    # GPUs held by runs that no longer learn (plateaued, overfitting, hung, diverging): busy, not
    # idle; named as the JSON key (gpus_not_learning) and the metric (queue_gpus_not_learning) are
    "GPUS-NOT-LEARNING",
    "FREE-1H",
    "FREE-6H",
    "FREE-24H",
)


def register(subparsers: Any) -> None:
    from advisor.controller.cliutil import add_cluster_args

    p = subparsers.add_parser(
        "status",
        help="progress, ETA and advice of every advised run",
        description="List TrainJobForecasts like kubectl, or summarise them per queue.",
    )
    add_cluster_args(p)
    p.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    p.add_argument(
        "-n", "--namespace", metavar="NS", help="namespace (default: the kubeconfig's, else 'default')"
    )
    p.add_argument(
        "--by",
        choices=("queue", "namespace"),
        help="summarise per ClusterQueue or namespace (every namespace unless -n names one)",
    )
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    # the other commands print JSON with --json: the same flag here, so that neither form fails
    p.add_argument("--json", dest="output", action="store_const", const="json", help="same as -o json")
    p.set_defaults(func=run)


def _namespace(args: argparse.Namespace) -> str | None:
    if args.all_namespaces:
        if args.namespace:
            raise CommandError("use either -A or -n, not both")
        return None
    if args.namespace:
        return str(args.namespace)
    if args.by:
        # a ClusterQueue spans namespaces: its summary counts every one unless -n names one (it
        # counted the kubeconfig's namespace only, "No TrainJobForecasts found in namespace default")
        return None
    from advisor.controller.cliutil import kubeconfig_namespace

    return kubeconfig_namespace(args.kubeconfig, args.context)


def rows(items: list[dict[str, Any]], *, with_namespace: bool, now: float | None = None) -> list[list[Any]]:
    """The table's rows; with ``now``, a status no controller keeps any more reads ``stale``."""
    from advisor.controller.cliutil import age, status_of
    from advisor.controller.summary import shown_state

    out = []
    for obj in sorted(
        items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"].get("name", ""))
    ):
        meta, status = obj.get("metadata") or {}, status_of(obj)
        summary = status.get("summary") or {}
        job = (obj.get("spec") or {}).get("jobRef") or {}
        row = [
            meta.get("name"),
            f"{job.get('kind', 'TrainJob')}/{job.get('name', meta.get('name'))}",
            summary.get("progress", "-"),
            summary.get("eta", "-"),
            summary.get("loss", "-"),
            summary.get("plateau", "-"),
            shown_state(status, now) if status else "-",
            summary.get("advice", "-"),
            age(meta.get("creationTimestamp")),
        ]
        out.append([meta.get("namespace"), *row] if with_namespace else row)
    return out


def run(args: argparse.Namespace) -> int:
    from advisor.controller.cliutil import api_error, cluster_api, print_table, status_of
    from advisor.controller.summary import summarize

    namespace = _namespace(args)
    api = cluster_api(args)
    try:
        items = api.list_forecasts(namespace)
    except Exception as exc:
        raise api_error(exc, "TrainJobForecasts") from exc
    if args.by and not items and args.output != "json":
        print("No TrainJobForecasts found" + (f" in namespace {namespace}." if namespace else "."))
        return 0
    if args.by:
        summaries = summarize(
            ((o["metadata"].get("namespace", ""), status_of(o)) for o in items), by=args.by, now=time.time()
        )
        if args.output == "json":
            print(json.dumps([s.as_row() for s in summaries], indent=2))
            return 0
        table = [
            [
                s.queue,
                s.jobs,
                s.gpus,
                s.states["learning"],
                s.states["plateaued"],
                s.states["overfitting"],
                s.states["hung"],
                s.states["diverging"],
                s.states["near-completion"],
                s.states["unknown"],
                s.states["pending"],
                # suspended (released, or by hand), finished, failed: JOBS adds up across the row
                s.states["suspended"] + s.states["finished"] + s.states["failed"],
                s.gpus_not_learning,
                f"{s.gpus_freeing['1h']:.1f}",
                f"{s.gpus_freeing['6h']:.1f}",
                f"{s.gpus_freeing['24h']:.1f}",
            ]
            for s in summaries
        ]
        headers: tuple[str, ...] = (
            ("NAMESPACE", *QUEUE_HEADERS[1:]) if args.by == "namespace" else QUEUE_HEADERS
        )
        print_table(headers, table)
        return 0
    if args.output == "json":
        print(
            json.dumps(
                [
                    {
                        "namespace": o["metadata"].get("namespace"),
                        "name": o["metadata"].get("name"),
                        "status": {
                            k: v for k, v in status_of(o).items() if k not in ("coreState", "history")
                        },
                    }
                    for o in items
                ],
                indent=2,
            )
        )
        return 0
    if not items:
        print("No TrainJobForecasts found" + (f" in namespace {namespace}." if namespace else "."))
        return 0
    headers = ("NAMESPACE", *HEADERS) if namespace is None else HEADERS
    print_table(headers, rows(items, with_namespace=namespace is None, now=time.time()))
    return 0
