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
    "forecast_from_dict",
    "forecast_to_dict",
    "interval_from_dict",
    "interval_to_dict",
]


def _num(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _int(value: Any) -> int | None:
    num = _num(value)
    return None if num is None else int(num)


def interval_to_dict(interval: Interval | None) -> dict[str, float | None] | None:
    if interval is None:
        return None
    return {"mean": _num(interval.mean), "p10": _num(interval.p10), "p90": _num(interval.p90)}


def interval_from_dict(data: Any) -> Interval | None:
    if not isinstance(data, Mapping):
        return None
    mean = _num(data.get("mean"))
    if mean is None:
        return None
    p10 = _num(data.get("p10"))
    p90 = _num(data.get("p90"))
    return Interval(
        mean=mean, p10=mean if p10 is None else min(p10, mean), p90=mean if p90 is None else max(p90, mean)
    )


def forecast_to_dict(fc: Forecast | None) -> dict[str, Any] | None:
    if fc is None:
        return None
    return {
        "finalLoss": interval_to_dict(fc.final_loss),
        "plateauProbability": _num(fc.plateau_probability),
        "divergenceProbability": _num(fc.divergence_probability),
        "etaSeconds": interval_to_dict(fc.eta_seconds),
        "stepsPerSecond": _num(fc.steps_per_second),
        "model": {str(k): _num(v) for k, v in fc.model.items()},
        "warnings": [str(w) for w in fc.warnings],
        "currentLoss": _num(fc.current_loss),
        "lastStep": _num(fc.last_step),
        "totalSteps": fc.total_steps,
        "points": fc.n_points,
        "dropped": fc.n_dropped,
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
        plateau_probability=_num(data.get("plateauProbability")) or 0.0,
        divergence_probability=_num(data.get("divergenceProbability")) or 0.0,
        eta_seconds=interval_from_dict(data.get("etaSeconds")),
        steps_per_second=_num(data.get("stepsPerSecond")),
        model={str(k): v for k, v in ((k, _num(v)) for k, v in model.items()) if v is not None},
        warnings=tuple(str(w) for w in data.get("warnings") or ()),
        current_loss=_num(data.get("currentLoss")),
        last_step=_num(data.get("lastStep")),
        total_steps=_int(data.get("totalSteps")),
        n_points=_int(data.get("points")) or 0,
        n_dropped=_int(data.get("dropped")) or 0,
    )


def checkpoint_to_dict(cp: CheckpointState) -> dict[str, Any]:
    return {
        "lastStep": cp.last_step,
        "lastTime": _num(cp.last_time),
        "costSeconds": _num(cp.cost_seconds),
        "pendingRequest": cp.pending_request,
        "pendingSince": _num(cp.pending_since),
    }


def checkpoint_from_dict(data: Any) -> CheckpointState:
    if not isinstance(data, Mapping):
        return CheckpointState()
    pending = data.get("pendingRequest")
    return CheckpointState(
        last_step=_int(data.get("lastStep")),
        last_time=_num(data.get("lastTime")),
        cost_seconds=_num(data.get("costSeconds")),
        pending_request=str(pending) if pending else None,
        pending_since=_num(data.get("pendingSince")),
    )


def action_to_dict(rec: ActionRecord) -> dict[str, Any]:
    return {
        "kind": rec.kind.value,
        "time": _num(rec.time),
        "requestId": rec.request_id,
        "policy": rec.policy,
        "rule": rec.rule,
        "outcome": rec.outcome,
        "reason": rec.reason,
        "timeoutSeconds": _num(rec.timeout_s),
    }


def action_from_dict(data: Any) -> ActionRecord | None:
    if not isinstance(data, Mapping):
        return None
    try:
        kind = ActionKind(str(data.get("kind")))
    except ValueError:
        return None
    time = _num(data.get("time"))
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
        timeout_s=_num(data.get("timeoutSeconds")),
    )
