"""Lifecycle signals from a training-job object: its conditions, ``suspend`` and the RHOAI summary.

Pure parsing (the controller adds what its Kueue Workload says; ``advisor.core.lifecycle``
derives the phase). Never raises: conditions are written by other controllers, the annotation by
user code.
"""

from __future__ import annotations

from collections.abc import Mapping

from advisor.model import LifecycleSignals
from advisor.protocol import RHOAI_TRAINER_STATUS_ANNOTATION
from advisor.sources.coerce import decode_json_object

__all__ = ["ended_as", "job_signals"]

#: condition types per kind: (completed, failed, suspended); PyTorchJob (v1) says Succeeded
_COMPLETE = ("Complete", "Succeeded", "Completed")
_FAILED = ("Failed",)
_SUSPENDED = ("Suspended",)


def _conditions(body: Mapping[str, object]) -> dict[str, str]:
    status = body.get("status")
    conds = status.get("conditions") if isinstance(status, Mapping) else None
    found: dict[str, str] = {}
    if isinstance(conds, list):
        for c in conds:
            if isinstance(c, Mapping) and isinstance(c.get("type"), str):
                found[str(c["type"])] = str(c.get("status") or "")
    return found


def _any_true(conds: Mapping[str, str], kinds: tuple[str, ...]) -> bool | None:
    seen = [conds[k] for k in kinds if k in conds]
    if not seen:
        return None
    return any(v == "True" for v in seen)


def _suspend_spec(body: Mapping[str, object]) -> bool:
    spec = body.get("spec")
    if not isinstance(spec, Mapping):
        return False
    if body.get("kind") == "PyTorchJob":
        run = spec.get("runPolicy")
        return isinstance(run, Mapping) and run.get("suspend") is True
    return spec.get("suspend") is True


def _remaining_summary(body: Mapping[str, object]) -> str | None:
    meta = body.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(annotations, Mapping) or RHOAI_TRAINER_STATUS_ANNOTATION not in annotations:
        return None
    decoded = decode_json_object(annotations[RHOAI_TRAINER_STATUS_ANNOTATION], "annotation", [])
    summary = decoded.get("estimatedRemainingTimeSummary") if decoded is not None else None
    return summary if isinstance(summary, str) else None


def _deleting(body: Mapping[str, object]) -> bool | None:
    meta = body.get("metadata")
    return True if isinstance(meta, Mapping) and meta.get("deletionTimestamp") else None


def job_signals(body: Mapping[str, object]) -> LifecycleSignals:
    """What a TrainJob / PyTorchJob object says of its own life (no Workload fields)."""
    if not isinstance(body, Mapping):
        return LifecycleSignals()
    conds = _conditions(body)
    suspended = _any_true(conds, _SUSPENDED)
    if _suspend_spec(body):
        suspended = True
    return LifecycleSignals(
        complete=_any_true(conds, _COMPLETE),
        failed=_any_true(conds, _FAILED),
        suspended=suspended,
        remaining_summary=_remaining_summary(body),
        deleting=_deleting(body),
    )


def ended_as(body: Mapping[str, object]) -> str | None:
    """``completed`` or ``failed`` for a job object whose conditions say it ended, ``been marked
    for deletion`` for one being deleted, else None: what a write on its behalf checks first
    (``resume`` reactivating its Workload, a release's fresh read), the Workload being marked
    Finished only after the job."""
    signals = job_signals(body)
    if signals.complete:
        return "completed"
    if signals.failed:
        return "failed"
    return "been marked for deletion" if signals.deleting else None
