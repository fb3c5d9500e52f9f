"""Progress samples from a Kubernetes training-job object, whichever way it reports progress.

Three channels exist in the wild and a controller meant for any cluster must read all of them:

* upstream Kubeflow Trainer >= 2.2 pushes ``status.trainerStatus`` (``progressPercentage``,
  ``estimatedRemainingSeconds``, ``metrics: [{name, value: string}]``, ``lastUpdatedTime``); step,
  epoch, loss and learning rate are free-form metric names chosen by the reporter;
* Red Hat OpenShift AI 3.4 polls the rank-0 pod and writes the JSON annotation
  ``trainer.opendatahub.io/trainerStatus`` (``currentStep``, ``totalSteps``, ``currentEpoch``,
  ``trainMetrics{}``, ``evalMetrics{}``, ...), with JSON numbers that may be null;
* on Trainer v1 (PyTorchJob) our own training helper writes ``PYTORCHJOB_PROGRESS_ANNOTATION``
  (format in ``advisor.sources.progress_annotation``).

``sample_from_object`` picks the channel (``status.trainerStatus`` first, as it is the typed,
authoritative one) and returns one ``ProgressSample``. It never raises: the body comes from the API
server but its progress parts come from user code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from advisor.model import ProgressSample
from advisor.protocol import (
    DEADLINE_ANNOTATION,
    PYTORCHJOB_PROGRESS_ANNOTATION,
    RHOAI_TRAINER_STATUS_ANNOTATION,
)
from advisor.sources.coerce import decode_json_object, parse_timestamp, short_repr
from advisor.sources.normalize import MAX_METRICS, MetricPairs, bounded_warnings, build_sample
from advisor.sources.progress_annotation import parse_progress_annotation

__all__ = [
    "deadline_from_object",
    "parse_rhoai_annotation",
    "parse_trainer_status",
    "sample_from_object",
]

UPSTREAM_SOURCE = "trainerStatus"
RHOAI_SOURCE = "rhoai-annotation"


def parse_trainer_status(status: object, *, now: float | None = None) -> ProgressSample:
    """Upstream ``status.trainerStatus`` -> ``ProgressSample`` (never raises)."""
    collected = MetricPairs()
    if not isinstance(status, Mapping):
        collected.warnings.append(f"trainerStatus is a {type(status).__name__}, not an object; ignored")
        return build_sample(collected, source=UPSTREAM_SOURCE, now=now)
    metrics = status.get("metrics")
    if isinstance(metrics, list):
        entries = metrics[:MAX_METRICS]
        pairs = [
            (e.get("name"), e.get("value")) for e in entries if type(e) is dict or isinstance(e, Mapping)
        ]
        collected.extend(pairs)
        collected.skipped += max(0, len(metrics) - len(entries))
        malformed = len(entries) - len(pairs)
        if malformed:
            collected.warnings.append(f"{malformed} metrics entries are not {{name, value}} objects; ignored")
    elif metrics is not None:
        collected.warnings.append(f"trainerStatus.metrics is a {type(metrics).__name__}, not a list; ignored")
    fields = {
        "progress_percentage": status.get("progressPercentage"),
        "estimated_remaining_seconds": status.get("estimatedRemainingSeconds"),
        "time": status.get("lastUpdatedTime"),
    }
    return build_sample(collected, source=UPSTREAM_SOURCE, now=now, fields=fields)


def parse_rhoai_annotation(raw: object, *, now: float | None = None) -> ProgressSample:
    """RHOAI 3.4 ``trainer.opendatahub.io/trainerStatus`` annotation -> ``ProgressSample``."""
    collected = MetricPairs()
    decoded = decode_json_object(raw, "RHOAI trainerStatus annotation", collected.warnings)
    if decoded is None:
        return build_sample(collected, source=RHOAI_SOURCE, now=now)
    for key in ("trainMetrics", "evalMetrics"):
        group = decoded.get(key)
        if isinstance(group, Mapping):
            # the Trainer controller writes a NaN or an infinity its poll read as null (its
            # sanitiser, ``progression.go``): a metric named with no value is a non-finite one.
            # Read as "no loss", a run whose loss went NaN read "learning" on its last finite one
            collected.extend((name, math.nan if value is None else value) for name, value in group.items())
        elif group is not None:
            collected.warnings.append(f"{key} is a {type(group).__name__}, not an object; ignored")
    fields = {
        "step": decoded.get("currentStep"),
        "total_steps": decoded.get("totalSteps"),
        "epoch": decoded.get("currentEpoch"),
        "progress_percentage": decoded.get("progressPercentage"),
        "estimated_remaining_seconds": decoded.get("estimatedRemainingSeconds"),
        "time": decoded.get("lastUpdatedTime"),
    }
    return build_sample(collected, source=RHOAI_SOURCE, now=now, fields=fields)


def sample_from_object(body: Mapping[str, object], *, now: float | None = None) -> ProgressSample | None:
    """The latest progress sample of a TrainJob / PyTorchJob body, or ``None`` if it reports none.

    ``now`` (epoch seconds, from the caller's clock) stamps samples whose source gives no usable
    ``lastUpdatedTime``. A present but unreadable source still yields a sample (step
    ``UNKNOWN_STEP``) whose warnings say why, so the problem is surfaced rather than hidden.
    """
    notes: list[str] = []
    if not isinstance(body, Mapping):
        return None
    status = body.get("status")
    trainer_status = status.get("trainerStatus") if isinstance(status, Mapping) else None
    if isinstance(trainer_status, Mapping) and trainer_status:
        return parse_trainer_status(trainer_status, now=now)
    if trainer_status not in (None, {}):
        notes.append(f"status.trainerStatus {short_repr(trainer_status)} is not an object; ignored")
    metadata = body.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if isinstance(annotations, Mapping):
        for key, parser in (
            (RHOAI_TRAINER_STATUS_ANNOTATION, parse_rhoai_annotation),
            (PYTORCHJOB_PROGRESS_ANNOTATION, parse_progress_annotation),
        ):
            if key in annotations:
                sample = parser(annotations[key], now=now)
                return _with_notes(sample, notes) if notes else sample
    if notes:  # a garbage trainerStatus and nothing else: surface it
        return parse_trainer_status(trainer_status, now=now)
    return None


def _with_notes(sample: ProgressSample, notes: list[str]) -> ProgressSample:
    return replace(sample, warnings=bounded_warnings([*notes, *sample.warnings]))


def deadline_from_object(body: Mapping[str, object]) -> tuple[float | None, tuple[str, ...]]:
    """The job's deadline (``DEADLINE_ANNOTATION``: RFC 3339 or epoch seconds) as epoch seconds,
    with warnings when the annotation is present but unusable; ``(None, ())`` when absent."""
    metadata = body.get("metadata") if isinstance(body, Mapping) else None
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping) or DEADLINE_ANNOTATION not in annotations:
        return None, ()
    warnings: list[str] = []
    deadline = parse_timestamp(annotations[DEADLINE_ANNOTATION], DEADLINE_ANNOTATION, warnings)
    return deadline, tuple(warnings)
