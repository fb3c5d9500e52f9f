"""The progress annotation our training helper writes on a PyTorchJob (Kubeflow Trainer v1).

Trainer v1 has no progress channel at all, so on such clusters the job's rank-0 process (through
``advisor.training``) annotates its PyTorchJob with ``PYTORCHJOB_PROGRESS_ANNOTATION``. The format
is defined here, once, by the pair ``encode_progress`` (training side) / ``parse_progress_annotation``
(controller side), so the two can never drift.

Format (version 1), a compact JSON object; every key but ``version`` and ``step`` is optional::

    {"version": 1, "step": 450, "time": "2026-08-21T10:30:45.120Z", "totalSteps": 1000,
     "progressPercentage": 45, "estimatedRemainingSeconds": 795, "epoch": 1.35,
     "loss": 0.2347, "evalLoss": 0.2451, "learningRate": 1.8e-05,
     "lastCheckpointStep": 400, "lastCheckpointRequest": "ckpt-7f3a",
     "metrics": {"grad_norm": 1.03}}

A non-finite loss is written as the string ``"nan"``/``"inf"`` (JSON has no NaN), because a NaN
loss is exactly what the divergence rule needs to see.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime

from advisor.model import ProgressSample
from advisor.sources.coerce import MAX_ANNOTATION_BYTES, decode_json_object
from advisor.sources.normalize import MAX_METRIC_NAME_CHARS, MetricPairs, build_sample

__all__ = [
    "FORMAT_VERSION",
    "MAX_ANNOTATION_BYTES",
    "MAX_ENCODED_METRICS",
    "encode_progress",
    "parse_progress_annotation",
]

FORMAT_VERSION = 1
#: free-form metrics the encoder writes at most (keeps the annotation small and well under the cap)
MAX_ENCODED_METRICS = 64

SOURCE = "pytorchjob-annotation"

#: annotation key -> ProgressSample field, for the typed (non-metric) part of the format
_TYPED_KEYS = {
    "step": "step",
    "time": "time",
    "totalSteps": "total_steps",
    "progressPercentage": "progress_percentage",
    "estimatedRemainingSeconds": "estimated_remaining_seconds",
    "epoch": "epoch",
    "loss": "loss",
    "evalLoss": "eval_loss",
    "learningRate": "learning_rate",
    "lastCheckpointStep": "last_checkpoint_step",
    "lastCheckpointRequest": "last_checkpoint_request",
}


def _rfc3339(seconds: float) -> str:
    moment = datetime.fromtimestamp(seconds, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _json_number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def encode_progress(
    step: int,
    *,
    time: float,
    total_steps: int | None = None,
    loss: float | None = None,
    eval_loss: float | None = None,
    learning_rate: float | None = None,
    epoch: float | None = None,
    estimated_remaining_seconds: float | None = None,
    last_checkpoint_step: int | None = None,
    last_checkpoint_request: str | None = None,
    metrics: Mapping[str, float] | None = None,
) -> str:
    """The annotation value for one progress report (``time`` in epoch seconds, from the caller).

    Raises ``ValueError`` for a negative or non-integer ``step`` or a non-finite ``time`` (caller
    bugs); extra ``metrics`` beyond ``MAX_ENCODED_METRICS``, with over-long names or non-finite
    values are left out rather than failing a training step.
    """
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be a non-negative integer, got {step!r}")
    if not math.isfinite(time):
        raise ValueError(f"time must be finite epoch seconds, got {time!r}")
    payload: dict[str, object] = {"version": FORMAT_VERSION, "step": step, "time": _rfc3339(time)}
    if total_steps is not None and total_steps > 0:
        payload["totalSteps"] = int(total_steps)
        payload["progressPercentage"] = min(100, int(100 * step / total_steps))
    if estimated_remaining_seconds is not None and math.isfinite(estimated_remaining_seconds):
        payload["estimatedRemainingSeconds"] = max(0, round(estimated_remaining_seconds))
    for key, value in (("loss", loss), ("evalLoss", eval_loss)):
        if value is not None:
            payload[key] = _json_number(float(value))
    for key, value in (("learningRate", learning_rate), ("epoch", epoch)):
        if value is not None and math.isfinite(value):
            payload[key] = float(value)
    if last_checkpoint_step is not None:
        payload["lastCheckpointStep"] = int(last_checkpoint_step)
    if last_checkpoint_request is not None:
        payload["lastCheckpointRequest"] = str(last_checkpoint_request)[:MAX_METRIC_NAME_CHARS]
    extra: dict[str, float] = {}
    for name, value in (metrics or {}).items():
        if len(extra) >= MAX_ENCODED_METRICS:
            break
        usable_name = isinstance(name, str) and 0 < len(name) <= MAX_METRIC_NAME_CHARS
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if usable_name and number and math.isfinite(value):
            extra[name] = float(value)
    if extra:
        payload["metrics"] = extra
    return json.dumps(payload, separators=(",", ":"), allow_nan=False)


def parse_progress_annotation(raw: object, *, now: float | None = None) -> ProgressSample:
    """Decode our annotation into a ``ProgressSample``; never raises (garbage -> warnings)."""
    collected = MetricPairs()
    decoded = decode_json_object(raw, "PyTorchJob progress annotation", collected.warnings)
    if decoded is None:
        return build_sample(collected, source=SOURCE, now=now)
    version = decoded.get("version")
    if version != FORMAT_VERSION:
        note = f"progress annotation version {version!r} (expected {FORMAT_VERSION}); read anyway"
        collected.warnings.append(note)
    fields = {target: decoded.get(key) for key, target in _TYPED_KEYS.items()}
    extra = decoded.get("metrics")
    if isinstance(extra, Mapping):
        collected.extend(extra.items())
    elif extra is not None:
        collected.warnings.append("progress annotation 'metrics' is not an object; ignored")
    return build_sample(collected, source=SOURCE, now=now, fields=fields)
