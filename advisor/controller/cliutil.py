"""Helpers shared by the cluster-facing subcommands (status, explain, compare, resume, run).

Kept apart from the command modules so that each stays small, and free of module-level
kubernetes imports so that ``trainjob-advisor --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "JsonFormatter",
    "add_cluster_args",
    "add_namespace_arg",
    "age",
    "api_client_for",
    "cluster_api",
    "configure_logging",
    "kubeconfig_namespace",
    "parse_ref",
    "print_table",
    "probe_cluster",
]


def add_cluster_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account)",
    )
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context")


def cluster_api(args: argparse.Namespace) -> Any:
    from advisor.controller.api import ClusterApi

    return ClusterApi(api_client_for(args))


def api_client_for(args: argparse.Namespace) -> Any:
    """The kubeconfig's (or the in-cluster) ApiClient; a missing or broken kubeconfig is one line."""
    from advisor.cli import CommandError
    from advisor.controller.api import load_api_client

    kubeconfig = getattr(args, "kubeconfig", None)
    try:
        return load_api_client(kubeconfig, getattr(args, "context", None))
    except Exception as exc:  # kubeconfig missing or unreadable
        text = str(exc)
        if "No configuration found" in text or "does not exist" in text:
            where = kubeconfig or "$KUBECONFIG or ~/.kube/config"
            text = f"no kubeconfig found at {where} and not running in a cluster (pass --kubeconfig FILE)"
        raise CommandError(f"cannot connect to the cluster: {text}") from None


def probe_cluster(args: argparse.Namespace, timeout: float = 5.0) -> None:
    """One cheap request (``/version``) before a long-running command starts, so that an
    unreachable or refusing API server is one line, not minutes of retries and tracebacks."""
    from kubernetes import client

    from advisor.cli import CommandError

    api_client = api_client_for(args)
    host = api_client.configuration.host
    try:
        client.VersionApi(api_client).get_code(_request_timeout=(timeout, timeout))
    except Exception as exc:
        status = getattr(exc, "status", None)
        if status in (401, 403):
            raise CommandError(f"the API server at {host} refused the credentials (HTTP {status})") from None
        reason = getattr(exc, "reason", None) or exc
        reason = str(reason).splitlines()[0][:200]
        raise CommandError(f"cannot reach the API server at {host}: {reason}") from None
    finally:
        api_client.close()


def api_error(exc: BaseException, what: str) -> Exception:
    from advisor.cli import CommandError

    status = getattr(exc, "status", None)
    if status == 404:
        # the kind itself unknown to the API server (its CRD not installed) is told apart from an
        # object that does not exist (a job deleted meanwhile): the API server's body says which
        body = str(getattr(exc, "body", "") or "")
        if "could not find the requested resource" in body or "404 page not found" in body:
            return CommandError(f"{what}: the API server does not serve this kind (is its CRD installed?)")
        return CommandError(f"{what} not found")
    if status == 403:
        return CommandError(f"forbidden: your credentials may not read {what}")
    return CommandError(f"API error reading {what}: {getattr(exc, 'reason', None) or exc}")


def add_namespace_arg(parser: argparse.ArgumentParser) -> None:
    """``-n NS`` for commands that name jobs, as kubectl does: ``NAME -n NS`` or ``NS/NAME``."""
    parser.add_argument(
        "-n",
        "--namespace",
        metavar="NS",
        help="namespace of a job named without one (default: the kubeconfig context's, else 'default')",
    )


def kubeconfig_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace of the kubeconfig context in use (``--context``, else the current one), as
    kubectl picks it; 'default' when it names none or there is no kubeconfig (e.g. in a pod)."""
    try:
        from kubernetes import config

        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
        chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
        return str(((chosen or {}).get("context") or {}).get("namespace") or "default")
    except Exception:
        return "default"


def parse_ref(text: str, args: argparse.Namespace | None = None) -> tuple[str, str]:
    """``NS/NAME``, or ``NAME`` in ``args.namespace`` (``-n``), else in the kubeconfig context's
    namespace, as kubectl reads a name → (ns, name); raises CommandError on anything else."""
    from advisor.cli import CommandError

    ns, sep, name = text.partition("/")
    if not sep and text and args is not None:
        ns, name = getattr(args, "namespace", None) or "", text
        if not ns:
            ns = kubeconfig_namespace(getattr(args, "kubeconfig", None), getattr(args, "context", None))
        return ns, name
    if not sep or not ns or not name or "/" in name:
        raise CommandError(f"expected NAME (with -n NAMESPACE) or NAMESPACE/NAME, got {text!r}")
    given = getattr(args, "namespace", None) if args is not None else None
    if given and given != ns:  # as kubectl: two namespaces for one object is a mistake, not a choice
        raise CommandError(f"{text!r} names namespace {ns!r} but -n says {given!r}")
    return ns, name


def age(timestamp: str | None, now: datetime | None = None) -> str:
    from advisor.controller.render import format_duration

    if not timestamp:
        return "-"
    try:
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "-"
    return format_duration(((now or datetime.now(tz=UTC)) - then).total_seconds())


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: Any = None) -> None:
    """kubectl-style columns: upper-case headers, padded with three spaces."""
    out = out or sys.stdout
    cells = [[str(h) for h in headers]] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for row in cells:
        print("   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)


class JsonFormatter(logging.Formatter):
    """One JSON object per line (time, level, logger, message, and the exception if any)."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "audit", None)  # the audit trail's fields (``controller.audit``)
        if isinstance(fields, dict):
            data.update({k: v for k, v in fields.items() if k not in data})
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


class _RefusalWithoutTraceback(logging.Filter):
    """kopf logs each watch task that the API server refused (403) with its traceback, four of
    them before ``run`` ends with one line naming the missing right: the refusal is an RBAC fact,
    not a bug, so its lines keep their message and lose the traceback (``--log-level debug`` keeps
    it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if record.name.startswith("kopf") and getattr(exc, "status", None) == 403:
            record.exc_info, record.exc_text = None, None
        return True


def configure_logging(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if level.lower() != "debug":
        handler.addFilter(_RefusalWithoutTraceback())
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # kopf reports every handler call at INFO: at thousands of progress updates a minute that
    # drowns the advisor's own lines, so it is shown only when debugging
    quiet = logging.DEBUG if level.lower() == "debug" else logging.WARNING
    for name in ("kopf.objects", "kopf.activities"):
        logging.getLogger(name).setLevel(quiet)


def status_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def forecast_object(api: Any, ns: str, name: str, missing: str = "") -> Mapping[str, Any]:
    """TrainJobForecast ``ns/name``; an API error or a missing object is one clear
    ``CommandError`` (``missing`` says why it may be missing)."""
    from advisor.cli import CommandError

    try:
        obj = api.get_forecast(ns, name)
    except Exception as exc:
        raise api_error(exc, f"TrainJobForecast {ns}/{name}") from exc
    if obj is None:
        raise CommandError(f"no TrainJobForecast {ns}/{name}{missing}")
    return obj


def forecast_status(api: Any, ns: str, name: str, missing: str = "") -> Mapping[str, Any]:
    """The status of TrainJobForecast ``ns/name`` (``forecast_object``)."""
    return status_of(forecast_object(api, ns, name, missing))
