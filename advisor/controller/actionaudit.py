"""The audit lines of an action carried out in Apply mode, from its pending entry.

The actuator keeps, per request id, what it needs to finish an action (``Actuator.pending``: its
kind, policy, rule and reason) and persists it before acting; the ``attempt`` line and the
``outcome`` line of the audit log (``advisor.controller.audit``) are written from that entry, so a
controller restarted in between logs the outcome of an attempt it resumes with the same fields
(and ``resumed=true``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advisor.controller.audit import audit
from advisor.model import ActionKind, ActionRecord, JobView, Mode

__all__ = ["audit_attempt", "audit_outcome", "entry_like"]


def entry_like(rec: ActionRecord) -> dict[str, Any]:
    """The fields of a pending entry, for an action that never became one (its record failed)."""
    return {"kind": rec.kind.value, "policy": rec.policy, "rule": rec.rule, "reason": rec.reason}


def audit_attempt(job: JobView, rid: str, entry: Mapping[str, Any]) -> None:
    """The ``attempt`` line: logged once the request is persisted, so that each gets an outcome."""
    _audit_entry("attempt", job, rid, entry, "requested")


def audit_outcome(
    job: JobView,
    rid: str,
    entry: Mapping[str, Any],
    outcome: str,
    detail: str,
    *,
    resumed: bool = False,
) -> None:
    """The ``outcome`` line: logged once the outcome is persisted (``resumed``: a restart finished it)."""
    _audit_entry("outcome", job, rid, entry, outcome, detail, resumed=resumed)


def _audit_entry(
    stage: str,
    job: JobView,
    rid: str,
    entry: Mapping[str, Any],
    outcome: str,
    detail: str = "",
    *,
    resumed: bool = False,
) -> None:
    audit(
        stage,
        job,
        kind=ActionKind(entry["kind"]),
        request_id=rid,
        policy=str(entry.get("policy") or ""),
        rule=str(entry.get("rule") or ""),
        mode=Mode.APPLY.value,
        outcome=outcome,
        reason=str(entry.get("reason") or ""),
        detail=detail,
        resumed=resumed,
    )
