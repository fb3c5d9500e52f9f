"""The audit lines of an action carried out in Apply mode, from its pending entry.

The actuator keeps, per request id, what it needs to finish an action (``Actuator.pending``: its
kind, policy, rule and reason) and persists it before acting; the ``attempt`` line and the
``outcome`` line of the audit log (``advisor.controller.audit``) are written from that entry, so a
controller restarted in between logs the outcome of an attempt it resumes with the same fields
(and ``resumed=true``).
"""

from __future__ import annotations

from advisor.controller.audit import audit
from advisor.controller.pending import PendingAction
from advisor.model import JobView, Mode

__all__ = ["audit_attempt", "audit_outcome"]


def audit_attempt(job: JobView, rid: str, entry: PendingAction) -> None:
    """The ``attempt`` line: logged once the request is persisted, so that each gets an outcome."""
    _audit_entry("attempt", job, rid, entry, "requested")


def audit_outcome(
    job: JobView,
    rid: str,
    entry: PendingAction,
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
    entry: PendingAction,
    outcome: str,
    detail: str = "",
    *,
    resumed: bool = False,
) -> None:
    audit(
        stage,
        job,
        kind=entry.kind,
        request_id=rid,
        policy=entry.policy,
        rule=entry.rule,
        mode=Mode.APPLY.value,
        outcome=outcome,
        reason=entry.reason,
        detail=detail,
        resumed=resumed,
    )
