"""JSON-safe encoding of the shared value types.

The core loop's per-job state is persisted in ``TrainJobForecast.status`` (by the controller)
and written to reports (by the simulator and the CLI). Kubernetes rejects NaN and infinities in
JSON, so every non-finite float becomes ``null``; decoding is tolerant, because a hand-edited or
truncated status must never take the controller down.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from advisor.model import ActionKind, ActionRecord, CheckpointState, Forecast, Interval

__all__ = [
    "action_from_dict",
    "action_to_dict",
    "checkpoint_from_dict",
    "checkpoint_to_dict",
    "finite_or_none",
    "forecast_from_dict",
    "forecast_to_dict",
    "int_or_none",
    "interval_from_dict",
    "interval_to_dict",
]


def finite_or_none(value: Any) -> float | None:
    """A finite float, or None for anything else (None, bools, strings, NaN, infinities)."""
    if type(value) is float:  # the usual case (a history calls this per field of every report)
        return value if value - value == 0.0 else None  # inf - inf and nan - nan are nan
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def int_or_none(value: Any) -> int | None:
    """An int from a finite number, or None."""
    num = finite_or_none(value)
    return None if num is None else int(num)


def interval_to_dict(interval: Interval | None) -> dict[str, float | None] | None:
    if interval is None:
        return None
    return {
        "mean": finite_or_none(interval.mean),
        "p10": finite_or_none(interval.p10),
        "p90": finite_or_none(interval.p90),
    }


def interval_from_dict(data: Any) -> Interval | None:
    if not isinstance(data, Mapping):
        return None
    mean = finite_or_none(data.get("mean"))
    if mean is None:
        return None
    p10 = finite_or_none(data.get("p10"))
    p90 = finite_or_none(data.get("p90"))
    return Interval(
        mean=mean, p10=mean if p10 is None else min(p10, mean), p90=mean if p90 is None else max(p90, mean)
    )


def forecast_to_dict(fc: Forecast | None) -> dict[str, Any] | None:
    if fc is None:
        return None
    return {
        "finalLoss": interval_to_dict(fc.final_loss),
        "plateauProbability": finite_or_none(fc.plateau_probability),
        "divergenceProbability": finite_or_none(fc.divergence_probability),
        "etaSeconds": interval_to_dict(fc.eta_seconds),
        "stepsPerSecond": finite_or_none(fc.steps_per_second),
        "model": {str(k): finite_or_none(v) for k, v in fc.model.items()},
        "warnings": [str(w) for w in fc.warnings],
        "currentLoss": finite_or_none(fc.current_loss),
        "lastStep": finite_or_none(fc.last_step),
        "totalSteps": fc.total_steps,
        "points": fc.n_points,
        "dropped": fc.n_dropped,
        **({"atEnd": True} if fc.at_end else {}),
    }


def forecast_from_dict(data: Any) -> Forecast | None:
    if not isinstance(data, Mapping):
        return None
    final = interval_from_dict(data.get("finalLoss"))
    if final is None:
        return None
    raw_model = data.get("model")
    model: Mapping[str, Any] = raw_model if isinstance(raw_model, Mapping) else {}
    return Forecast(
        final_loss=final,
        plateau_probability=finite_or_none(data.get("plateauProbability")) or 0.0,
        divergence_probability=finite_or_none(data.get("divergenceProbability")) or 0.0,
        eta_seconds=interval_from_dict(data.get("etaSeconds")),
        steps_per_second=finite_or_none(data.get("stepsPerSecond")),
        model={str(k): v for k, v in ((k, finite_or_none(v)) for k, v in model.items()) if v is not None},
        warnings=tuple(str(w) for w in data.get("warnings") or ()),
        current_loss=finite_or_none(data.get("currentLoss")),
        last_step=finite_or_none(data.get("lastStep")),
        total_steps=int_or_none(data.get("totalSteps")),
        n_points=int_or_none(data.get("points")) or 0,
        n_dropped=int_or_none(data.get("dropped")) or 0,
        at_end=data.get("atEnd") is True,
    )


def checkpoint_to_dict(cp: CheckpointState) -> dict[str, Any]:
    return {
        "lastStep": cp.last_step,
        "lastTime": finite_or_none(cp.last_time),
        "costSeconds": finite_or_none(cp.cost_seconds),
        "pendingRequest": cp.pending_request,
        "pendingSince": finite_or_none(cp.pending_since),
        "saveSeconds": finite_or_none(cp.save_seconds),
        "sigtermSaves": cp.sigterm_saves,
        "sigtermMisses": cp.sigterm_misses,
    }


def checkpoint_from_dict(data: Any) -> CheckpointState:
    if not isinstance(data, Mapping):
        return CheckpointState()
    pending = data.get("pendingRequest")
    return CheckpointState(
        last_step=int_or_none(data.get("lastStep")),
        last_time=finite_or_none(data.get("lastTime")),
        cost_seconds=finite_or_none(data.get("costSeconds")),
        pending_request=str(pending) if pending else None,
        pending_since=finite_or_none(data.get("pendingSince")),
        save_seconds=finite_or_none(data.get("saveSeconds")),
        sigterm_saves=max(0, int_or_none(data.get("sigtermSaves")) or 0),
        sigterm_misses=max(0, int_or_none(data.get("sigtermMisses")) or 0),
    )


def action_to_dict(rec: ActionRecord) -> dict[str, Any]:
    return {
        "kind": rec.kind.value,
        "time": finite_or_none(rec.time),
        "requestId": rec.request_id,
        "policy": rec.policy,
        "rule": rec.rule,
        "outcome": rec.outcome,
        "reason": rec.reason,
        "timeoutSeconds": finite_or_none(rec.timeout_s),
        **({"stamp": rec.stamp} if rec.stamp else {}),
        **({"detail": rec.detail[:300]} if rec.detail else {}),
        **({"boost": rec.boost} if rec.boost is not None else {}),
    }


def action_from_dict(data: Any) -> ActionRecord | None:
    if not isinstance(data, Mapping):
        return None
    try:
        kind = ActionKind(str(data.get("kind")))
    except ValueError:
        return None
    time = finite_or_none(data.get("time"))
    request_id = data.get("requestId")
    if time is None or not request_id:
        return None
    return ActionRecord(
        kind=kind,
        time=time,
        request_id=str(request_id),
        policy=str(data.get("policy") or ""),
        rule=str(data.get("rule") or ""),
        outcome=str(data.get("outcome") or "requested"),
        reason=str(data.get("reason") or ""),
        timeout_s=finite_or_none(data.get("timeoutSeconds")),
        stamp=str(data.get("stamp") or ""),
        detail=str(data.get("detail") or ""),
        boost=int_or_none(data.get("boost")),
    )
