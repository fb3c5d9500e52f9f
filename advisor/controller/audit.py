"""The audit trail: one structured INFO log line per action attempt and per outcome.

Events expire (an hour by default) and the TrainJobForecast keeps only its latest actions; a
platform keeps its logs. Each line names the job, the policy and rule, the request id, the reason
and the forecast numbers the decision rested on. With ``--log-format json`` the fields are keys of
the JSON object (``cliutil.JsonFormatter`` merges ``record.audit``); in text they follow the
message as ``key=value`` pairs, so both a person and a log pipeline can read them.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from typing import Any

from advisor.model import ActionKind, JobView

__all__ = ["AUDIT_LOGGER", "audit", "audit_dropped"]

AUDIT_LOGGER = "trainjob_advisor.audit"
log = logging.getLogger(AUDIT_LOGGER)


def _num(value: float | None) -> float | None:
    return round(float(value), 6) if value is not None and math.isfinite(value) else None


def audit(
    stage: str,
    job: JobView,
    *,
    kind: ActionKind,
    request_id: str,
    policy: str,
    rule: str,
    mode: str,
    outcome: str,
    reason: str,
    detail: str = "",
    resumed: bool = False,
) -> dict[str, Any]:
    """Log one line (``stage``: ``attempt`` or ``outcome``) and return its fields (for tests).

    ``resumed``: the outcome of an attempt that a restarted controller finished (its ``attempt``
    line is in the log of the process that recorded the request)."""
    fc = job.forecast
    fields: dict[str, Any] = {
        "audit": stage,
        "job": job.key,
        "kind": kind.value,
        "requestId": request_id,
        "policy": policy,
        "rule": rule,
        "mode": mode,
        "outcome": outcome,
        "reason": reason,
        "step": job.step,
        "totalSteps": job.total_steps,
        "gpus": job.gpus,
        "plateauProbability": _num(fc.plateau_probability) if fc else None,
        "divergenceProbability": _num(fc.divergence_probability) if fc else None,
        "finalLoss": _num(fc.final_loss.mean) if fc else None,
        "etaSeconds": _num(fc.eta_seconds.mean) if fc and fc.eta_seconds else None,
    }
    if detail:
        fields["detail"] = detail
    if resumed:
        fields["resumed"] = True
    shown = ((k, v) for k, v in fields.items() if k != "audit" and v is not None)
    text = " ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in shown)
    log.info("action %s: %s", stage, text, extra={"audit": fields})
    return fields


def audit_dropped(key: str, pending: Mapping[str, Mapping[str, Any]]) -> None:
    """A job deleted in the middle of an action sequence (a checkpoint awaiting its ack before a
    release, say): the sequence ends there, nothing of it is carried out any more, and each dropped
    step gets one audit line, the record that outlives the job's TrainJobForecast."""
    for rid, entry in sorted(pending.items()):
        fields = {
            "audit": "outcome",
            "job": key,
            "kind": str(entry.get("kind")),
            "requestId": rid,
            "policy": str(entry.get("policy") or ""),
            "rule": str(entry.get("rule") or ""),
            "outcome": "dropped",
            "detail": f"the job was deleted (stage {entry.get('stage')}); nothing more is done",
        }
        log.info(
            "action outcome: job=%s kind=%s requestId=%s outcome=dropped (the job was deleted)",
            key,
            fields["kind"],
            rid,
            extra={"audit": fields},
        )
