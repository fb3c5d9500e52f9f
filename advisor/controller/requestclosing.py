"""How the actuator closes what it started: a checkpoint request answered, timed out or dropped,
and a release (or stop) sequence that a decision abandoned.

Step 5 of the action protocol (``advisor.controller.actuator``) for the requests whose outcome
comes later than their mutation: a checkpoint request stays pending until the job's own report
acknowledges it or it times out, and a release waiting on it may be cancelled meanwhile. Closing
one follows the same rule as every outcome (``_outcome_settled``: written to the status first,
then logged, one Event named after the request id and the outcome, one count), so a restarted
controller neither misses nor repeats one. Kept apart from the protocol's opening half because it
is driven by what the engine observes (``Engine._sync_checkpoints``, ``abandoned``), not by a
decision. ``RequestClosing`` is a part of ``Actuator`` (a mixin) and owns no state; the
attributes below are the actuator's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from advisor.controller.actionaudit import audit_outcome
from advisor.controller.audit import audit
from advisor.controller.jobevents import JobEvents
from advisor.controller.pending import AWAITING_ACK, PendingAction
from advisor.model import ActionKind, JobView, Mode
from policies.fields import format_duration
from policies.rules.release import CANCELLED, Abandoned

__all__ = ["RequestClosing"]

log = logging.getLogger("advisor.controller.actuator")  # the actuator's lines, as before the split


class RequestClosing:
    """``Actuator``'s closing of requests (and the outcome bookkeeping every step shares)."""

    core: Any
    persist: Callable[[str], None]
    metrics: Any | None
    job_events: JobEvents
    pending: dict[str, dict[str, PendingAction]]

    def _count(self, policy: str | None, kind: ActionKind, mode: str, outcome: str) -> None:
        """``trainjob_advisor_actions_total`` of ``policy`` (whose decision it was; empty: the
        advisor undoing its own write on a job no policy governs)."""
        if self.metrics is not None:
            self.metrics.actions.labels(policy or "", kind.value, mode, outcome).inc()

    def _outcome_settled(
        self,
        job: JobView,
        rid: str,
        entry: PendingAction,
        outcome: str,
        detail: str,
        *,
        resumed: bool = False,
    ) -> None:
        """An outcome is written to the status first, then logged: a restart resumes only what the
        status still shows pending, so a controller killed after the line does not log it again.
        (Killed in the instant between the write and the line, the status alone has it.) A failed
        write is only logged: the next status write carries the outcome."""
        try:
            self.persist(job.key)
        except Exception as exc:
            log.warning("%s: outcome %s of request %s not written yet: %s", job.key, outcome, rid, exc)
        audit_outcome(job, rid, entry, outcome, detail, resumed=resumed)

    # ----------------------------------------------------------------- checkpoint completion
    def checkpoint_done(
        self, job: JobView, rid: str, outcome: str, *, body: Mapping[str, Any], detail: str = ""
    ) -> bool:
        """Close a checkpoint request (``acknowledged``, ``timed-out`` or ``dropped``); False if not
        pending."""
        entry = self.pending.get(job.key, {}).get(rid)
        if entry is None or entry.kind is not ActionKind.CHECKPOINT:
            return False
        self.pending[job.key].pop(rid, None)
        self.core.update_action(job.key, rid, outcome)
        self._outcome_settled(job, rid, entry, outcome, detail)
        if outcome == "acknowledged":
            self.job_events.post(
                job,
                body,
                "CheckpointAcknowledged",
                f"checkpoint {rid} saved {detail}".strip(),
                request_id=rid,
            )
        elif outcome == "dropped":
            self.job_events.post(
                job,
                body,
                "CheckpointRequestDropped",
                f"checkpoint request {rid} dropped: {detail}; a new one may be made",
                request_id=rid,
            )
        else:
            # a release waiting on it that was cancelled meanwhile: nothing waits for the answer any
            # more, so the timeout is said, not warned of (a Warning a minute after ReleaseCancelled)
            rec = self.core.record(job.key)
            cancelled = rec is not None and any(
                a.request_id == rid and (a.detail or "").startswith(CANCELLED) for a in rec.actions
            )
            self.job_events.post(
                job,
                body,
                "CheckpointTimedOut",
                f"no acknowledgement of checkpoint {rid} within {format_duration(entry.timeout_s)}"
                + ("; its release was cancelled before, so nothing waited for it" if cancelled else ""),
                warning=not cancelled,
                request_id=rid,
            )
        self._count(entry.policy, ActionKind.CHECKPOINT, Mode.APPLY.value, outcome)
        return True

    def sequence_cancelled(self, job: JobView, gone: Abandoned, *, body: Mapping[str, Any]) -> None:
        """A release (or stop) sequence the decision abandoned (``policies.rules.release.abandoned``:
        its policy edited, deleted, or no longer governing, or the run over first): the request's
        detail says so (which ends the sequence for good, and makes this once per request, across
        restarts too), one audit line ``outcome=cancelled`` for the step that will not come, one
        Normal Event. The checkpoint itself is left to its answer or its timeout: the pods may be
        saving."""
        request = gone.request
        verb = "release of quota" if gone.final is ActionKind.RELEASE_QUOTA else "stop"
        self.core.update_action(job.key, request.request_id, request.outcome, detail=f"{CANCELLED}{gone.why}")
        try:
            self.persist(job.key)
        except Exception as exc:
            log.warning("%s: the cancelled %s not written yet: %s", job.key, verb, exc)
        audit(
            "outcome",
            job,
            kind=gone.final,
            request_id=request.request_id,
            policy=request.policy,
            rule=request.rule,
            mode=Mode.APPLY.value,
            outcome="cancelled",
            reason=request.reason,
            detail=f"the {verb} after checkpoint {request.request_id} will not come: {gone.why}",
        )
        reason = "ReleaseCancelled" if gone.final is ActionKind.RELEASE_QUOTA else "StopCancelled"
        self.job_events.post(
            job,
            body,
            reason,
            f"the {verb} after checkpoint {request.request_id} ({request.outcome}) is cancelled: {gone.why} "
            f"(policy {request.policy}, rule {request.rule})",
            request_id=request.request_id,
        )
        self._count(request.policy, gone.final, Mode.APPLY.value, "cancelled")

    def awaiting_ack(self, key: str) -> list[tuple[str, float, float]]:
        """(request id, requested at, timeout) of checkpoint requests waiting for their acknowledgement."""
        return [
            (rid, e.time if e.time is not None else 0.0, e.timeout_s)
            for rid, e in self.pending.get(key, {}).items()
            if e.stage == AWAITING_ACK
        ]
