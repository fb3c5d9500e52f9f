"""The progress channels an acknowledgement can travel through.

Why several: a cluster already has one way for a training pod to report progress and we add
none of our own. Upstream Kubeflow Trainer (>= 2.2) takes a POST to its status server and stores
it in ``TrainJob.status.trainerStatus``; Red Hat OpenShift AI 3.4 polls ``GET :28080/metrics`` on
rank 0 and copies the JSON into an annotation; a local run has neither and writes a JSONL file.
Each channel here turns one :class:`~advisor.training.report.Report` into that channel's format.
``publish`` returns ``False`` when the report did not go out (throttled, server down): the caller
keeps the report and tries again later; no channel ever raises into the training loop.
"""

from __future__ import annotations

import json
import logging
import math
import os
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from advisor.protocol import JUDGED_BY_METRIC
from advisor.training.report import Report, numeric_request_id

__all__ = [
    "ENV_ACK_FILE",
    "ENV_CHANNELS",
    "ENV_METRICS_PORT",
    "AckChannel",
    "JsonlFileChannel",
    "KubeflowStatusChannel",
    "MetricsEndpointChannel",
    "PyTorchJobAnnotationChannel",
    "channels_from_environment",
]

log = logging.getLogger("advisor.training")

#: comma-separated channel names (``kubeflow``, ``rhoai``, ``pytorchjob``, ``file``); unset = detect
ENV_CHANNELS = "ADVISOR_PROGRESS_CHANNELS"
#: port of the RHOAI-style ``/metrics`` endpoint (the RHOAI default is 28080)
ENV_METRICS_PORT = "ADVISOR_METRICS_PORT"
#: path of a JSONL file that receives every report (local runs, debugging)
ENV_ACK_FILE = "ADVISOR_ACK_FILE"
#: the PyTorchJob to annotate and its namespace (set from the downward API in the sample manifest)
ENV_JOB_NAME = "ADVISOR_JOB_NAME"
ENV_NAMESPACE = "POD_NAMESPACE"
_SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"

# Upstream status-server protocol (kubeflow/trainer pkg/statusserver; injected by its TrainJobStatus plugin)
ENV_KUBEFLOW_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_KUBEFLOW_CA = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_KUBEFLOW_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"
_MAX_METRICS = 256  # TrainerStatus.metrics MaxItems
_MAX_FIELD_CHARS = 64  # Metric.name / Metric.value maxLength
_RHOAI_DEFAULT_PORT = 28080


class AckChannel(Protocol):
    name: str

    def publish(self, report: Report) -> bool: ...

    def close(self) -> None: ...


def _metric_text(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.7g}"
    return str(value)[:_MAX_FIELD_CHARS]


def _rfc3339(epoch_s: float) -> str:
    """Whole seconds, as ``metav1.Time`` stores them (``time.gmtime``: twice as fast as datetime)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(math.floor(epoch_s)))


class KubeflowStatusChannel:
    """Upstream ``TrainJob.status.trainerStatus`` through the Trainer status server.

    Uses the Kubeflow SDK's ``update_trainjob_status`` when the SDK is installed (it throttles to
    one POST per 5 s and reports ``False`` when throttled), otherwise speaks the same protocol
    directly: ``POST $KUBEFLOW_TRAINER_SERVER_URL`` with ``{"trainerStatus": {...}}``, a bearer
    token re-read from its projected file (it rotates hourly) and the injected CA.
    """

    name = "kubeflow"

    def __init__(
        self,
        url: str | None = None,
        *,
        ca_file: str | None = None,
        token_file: str | None = None,
        use_sdk: bool | None = None,
        min_interval_s: float = 5.0,
        timeout_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url or os.environ.get(ENV_KUBEFLOW_URL, "")
        if not self.url:
            raise ValueError(f"no status-server URL: pass url= or set {ENV_KUBEFLOW_URL}")
        self.ca_file = ca_file if ca_file is not None else os.environ.get(ENV_KUBEFLOW_CA)
        self.token_file = token_file if token_file is not None else os.environ.get(ENV_KUBEFLOW_TOKEN)
        self.min_interval_s = min_interval_s
        self.timeout_s = timeout_s
        self._clock = clock
        self._last_post: float | None = None
        self._sdk: Callable[..., bool] | None = None
        if use_sdk is not False:
            self._sdk = _load_sdk_reporter()
            if use_sdk and self._sdk is None:
                raise ValueError("use_sdk=True but kubeflow.trainer.update_trainjob_status is not importable")

    def metrics(self, report: Report) -> dict[str, object]:
        """Metric name -> value, in the names Kubeflow's own reporters use plus the ack metrics.
        Values go out as text, so a NaN or infinite loss goes out too (``nan``): the one report that
        proves a divergence must not be the one the channel drops."""
        out: dict[str, object] = dict(report.numeric_metrics())
        if report.step is not None:
            out["current_step"] = report.step
        if report.total_steps is not None:
            out["total_steps"] = report.total_steps
        if report.epoch is not None:
            out["current_epoch"] = round(report.epoch, 4)
        if report.judged_by:
            out[JUDGED_BY_METRIC] = report.judged_by
        ack = report.ack()
        # the ack metrics must survive truncation to MaxItems: put them first
        ordered = {**ack, **{k: v for k, v in out.items() if k not in ack}} if ack else out
        return ordered if len(ordered) <= _MAX_METRICS else dict(list(ordered.items())[:_MAX_METRICS])

    def payload(self, report: Report) -> dict[str, Any]:
        status: dict[str, Any] = {"lastUpdatedTime": _rfc3339(report.time)}
        pct = report.progress_percentage()
        if pct is not None:
            status["progressPercentage"] = pct
        status["metrics"] = [
            {"name": str(k)[:_MAX_FIELD_CHARS], "value": _metric_text(v)}
            for k, v in self.metrics(report).items()
        ]
        return {"trainerStatus": status}

    def publish(self, report: Report) -> bool:
        if self._sdk is not None:
            try:
                return bool(
                    self._sdk(progress_percent=report.progress_percentage(), metrics=self.metrics(report))
                )
            except Exception as exc:  # the SDK promises not to raise; be safe anyway
                log.warning("kubeflow status update failed: %s", exc)
                return False
        now = self._clock()
        if self._last_post is not None and now - self._last_post < self.min_interval_s:
            return False
        self._last_post = now
        return self._post(self.payload(report))

    def _post(self, body: dict[str, Any]) -> bool:
        token = self._read_token()
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        context = None
        if self.url.startswith("https:"):
            context = ssl.create_default_context(cafile=self.ca_file if self.ca_file else None)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=context) as response:
                ok = 200 <= int(response.status) < 300
        except urllib.error.HTTPError as exc:
            log.warning("kubeflow status server refused the report: HTTP %s %s", exc.code, exc.reason)
            return False
        except (OSError, ValueError) as exc:
            log.warning("kubeflow status server unreachable: %s", exc)
            return False
        return ok

    def _read_token(self) -> str | None:
        if not self.token_file:
            return None
        try:
            return Path(self.token_file).read_text().strip() or None
        except OSError as exc:
            log.warning("cannot read the status-server token %s: %s", self.token_file, exc)
            return None

    def close(self) -> None:
        return None


def _load_sdk_reporter() -> Callable[..., bool] | None:
    try:
        from kubeflow.trainer import update_trainjob_status
    except ImportError:  # no SDK, or one without the call: a broken install is its own error
        return None
    return update_trainjob_status


class MetricsEndpointChannel:
    """Serve the RHOAI progress document on ``GET /metrics`` (Red Hat OpenShift AI 3.4 pulls it
    from rank 0 every poll interval and copies it into ``trainer.opendatahub.io/trainerStatus``).

    The ack metrics go into ``trainMetrics``, whose values must be JSON numbers: a request id that
    is a decimal integer is sent as a number; any other id is left out (with one warning), since
    a string there could make the poller reject the whole document. Publishing only swaps the
    document, so it never fails once the server is listening.
    """

    name = "rhoai"

    def __init__(self, port: int | None = None, host: str = "0.0.0.0") -> None:
        if port is None:
            port = int(os.environ.get(ENV_METRICS_PORT, _RHOAI_DEFAULT_PORT))
        self._lock = threading.Lock()
        self._document: bytes = b"{}"
        self._warned = False
        channel = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] != "/metrics":
                    self.send_error(404)
                    return
                with channel._lock:
                    body = channel._document
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        # raises OSError when the port is taken (e.g. by the RHOAI SDK's own progress server)
        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="advisor-metrics", daemon=True
        )
        self._thread.start()

    @staticmethod
    def document(report: Report) -> dict[str, Any]:
        doc: dict[str, Any] = {"progressPercentage": report.progress_percentage()}
        if report.step is not None:
            doc["currentStep"] = report.step
        if report.total_steps is not None:
            doc["totalSteps"] = report.total_steps
        if report.epoch is not None:
            doc["currentEpoch"] = report.epoch
        metrics = report.finite_metrics()
        ack = {k: v for k, v in report.ack(numeric=True).items() if isinstance(v, int | float)}
        doc["trainMetrics"] = {**{k: v for k, v in metrics.items() if not k.startswith("eval_")}, **ack}
        evals = {k: v for k, v in metrics.items() if k.startswith("eval_")}
        if evals:
            doc["evalMetrics"] = evals
        return doc

    def publish(self, report: Report) -> bool:
        request = report.last_checkpoint_request
        if request is not None and isinstance(numeric_request_id(request), str) and not self._warned:
            log.warning(
                "request id %r is not a number: the RHOAI document carries only the checkpoint step", request
            )
            self._warned = True
        body = json.dumps(self.document(report)).encode()
        with self._lock:
            self._document = body
        return True

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class JsonlFileChannel:
    """Append every report as one JSON line (``step``, ``time``, metrics, ack metrics): for local
    runs and for reading back with ``trainjob-advisor forecast``."""

    name = "file"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def publish(self, report: Report) -> bool:
        row: dict[str, object] = {"time": report.time}
        if report.step is not None:
            row["step"] = report.step
        if report.total_steps is not None:
            row["total_steps"] = report.total_steps
        if report.epoch is not None:
            row["epoch"] = report.epoch
        row.update(report.finite_metrics())
        row.update(report.ack())
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
        except OSError as exc:
            log.warning("cannot write progress file %s: %s", self.path, exc)
            return False
        return True

    def close(self) -> None:
        return None


class PyTorchJobAnnotationChannel:
    """Kubeflow Trainer v1 (PyTorchJob) has no progress channel, so rank 0 writes one: a merge
    patch of the annotation ``advisor.protocol.PYTORCHJOB_PROGRESS_ANNOTATION`` on its own
    PyTorchJob, in the format ``advisor.sources.encode_progress`` defines (the controller decodes
    it with the matching parser). Authenticates with the pod's service-account token, which needs
    ``patch`` on ``pytorchjobs`` in its namespace (see ``manifests/samples/pytorchjob-*.yaml``).
    """

    name = "pytorchjob"

    def __init__(
        self,
        job_name: str | None = None,
        namespace: str | None = None,
        *,
        api_url: str | None = None,
        token_file: str | None = None,
        ca_file: str | None = None,
        min_interval_s: float = 5.0,
        timeout_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.job_name = job_name or os.environ.get(ENV_JOB_NAME, "")
        if not self.job_name:
            raise ValueError(f"no PyTorchJob name: pass job_name= or set {ENV_JOB_NAME}")
        self.namespace = (
            namespace or os.environ.get(ENV_NAMESPACE) or _read_text(f"{_SERVICE_ACCOUNT_DIR}/namespace")
        )
        if not self.namespace:
            raise ValueError(f"no namespace: pass namespace= or set {ENV_NAMESPACE}")
        if api_url is None:
            host, port = (
                os.environ.get("KUBERNETES_SERVICE_HOST"),
                os.environ.get("KUBERNETES_SERVICE_PORT", "443"),
            )
            if not host:
                raise ValueError("not in a pod (KUBERNETES_SERVICE_HOST unset): pass api_url=")
            api_url = f"https://{host}:{port}"
        path = f"/apis/kubeflow.org/v1/namespaces/{self.namespace}/pytorchjobs/{self.job_name}"
        self.url = api_url.rstrip("/") + path
        self.token_file = token_file if token_file is not None else f"{_SERVICE_ACCOUNT_DIR}/token"
        self.ca_file = ca_file if ca_file is not None else f"{_SERVICE_ACCOUNT_DIR}/ca.crt"
        self.min_interval_s = min_interval_s
        self.timeout_s = timeout_s
        self._clock = clock
        self._last_patch: float | None = None

    @staticmethod
    def annotation_value(report: Report) -> str:
        from advisor.sources.progress_annotation import encode_progress

        metrics = report.finite_metrics()
        step = report.step if report.step is not None else (report.last_checkpoint_step or 0)
        return encode_progress(
            step,
            time=report.time,
            total_steps=report.total_steps,
            loss=metrics.pop("loss", None),
            eval_loss=metrics.pop("eval_loss", None),
            learning_rate=metrics.pop("learning_rate", None),
            epoch=report.epoch,
            last_checkpoint_step=report.last_checkpoint_step,
            last_checkpoint_request=report.last_checkpoint_request,
            metrics=metrics,
        )

    def publish(self, report: Report) -> bool:
        from advisor.protocol import PYTORCHJOB_PROGRESS_ANNOTATION

        now = self._clock()
        if self._last_patch is not None and now - self._last_patch < self.min_interval_s:
            return False
        self._last_patch = now
        body = {"metadata": {"annotations": {PYTORCHJOB_PROGRESS_ANNOTATION: self.annotation_value(report)}}}
        headers = {"Content-Type": "application/merge-patch+json"}
        token = _read_text(self.token_file)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode(), headers=headers, method="PATCH"
        )
        context = None
        if self.url.startswith("https:"):
            context = ssl.create_default_context(
                cafile=self.ca_file if os.path.exists(self.ca_file) else None
            )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=context) as response:
                return 200 <= int(response.status) < 300
        except urllib.error.HTTPError as exc:
            log.warning("PyTorchJob progress patch refused: HTTP %s %s", exc.code, exc.reason)
        except (OSError, ValueError) as exc:
            log.warning("API server unreachable for the PyTorchJob progress patch: %s", exc)
        return False

    def close(self) -> None:
        return None


def _read_text(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def channels_from_environment(environ: dict[str, str] | None = None) -> list[AckChannel]:
    """The channels this process should use, from its environment.

    ``ADVISOR_PROGRESS_CHANNELS`` names them explicitly (``kubeflow,rhoai,file``); without it,
    ``kubeflow`` is used when the Trainer injected ``KUBEFLOW_TRAINER_SERVER_URL`` and ``file`` when
    ``ADVISOR_ACK_FILE`` is set. A channel that cannot start is logged and skipped.
    """
    env = dict(os.environ) if environ is None else environ
    requested = [c.strip().lower() for c in env.get(ENV_CHANNELS, "").split(",") if c.strip()]
    if not requested:
        requested = [
            name for name, var in (("kubeflow", ENV_KUBEFLOW_URL), ("file", ENV_ACK_FILE)) if env.get(var)
        ]
    known = ("kubeflow", "rhoai", "pytorchjob", "file")
    unknown = sorted(set(requested) - set(known))
    if unknown:
        raise ValueError(
            f"{ENV_CHANNELS}: unknown channel(s) {', '.join(unknown)} (known: {', '.join(known)})"
        )
    channels: list[AckChannel] = []
    for name in dict.fromkeys(requested):
        try:
            if name == "kubeflow":
                channels.append(
                    KubeflowStatusChannel(
                        env.get(ENV_KUBEFLOW_URL),
                        ca_file=env.get(ENV_KUBEFLOW_CA),
                        token_file=env.get(ENV_KUBEFLOW_TOKEN),
                    )
                )
            elif name == "rhoai":
                port = env.get(ENV_METRICS_PORT)
                channels.append(MetricsEndpointChannel(int(port) if port else None))
            elif name == "pytorchjob":
                channels.append(PyTorchJobAnnotationChannel(env.get(ENV_JOB_NAME), env.get(ENV_NAMESPACE)))
            elif name == "file":
                path = env.get(ENV_ACK_FILE)
                if not path:
                    raise ValueError(f"set {ENV_ACK_FILE} to the file to write")
                channels.append(JsonlFileChannel(path))
        except (OSError, ValueError) as exc:
            log.warning("progress channel %s disabled: %s", name, exc)
    return channels
