"""Carrying out a ``Decision``: the only code that mutates other people's objects.

Every mutating action follows one protocol, so that a controller killed at any point neither
loses an action nor repeats it:

1. pick a request id; record the action (``requested``) in the core and in ``pending`` with the
   parameters needed to finish it;
2. persist both synchronously in the ``TrainJobForecast`` status (``persist``); if that fails,
   nothing is mutated;
3. for an action the policy's hourly cap counts (``DISRUPTIVE_KINDS``), make sure the
   AdvisorPolicy's ``status.recentActions`` carries it (``record_cap``); if that fails, nothing
   is mutated;
4. mutate (merge patches of exactly the fields concerned; setting a value twice is a no-op);
5. record the outcome, emit one Event on the job, count it in Prometheus.

On restart, ``finish`` redoes steps 3-5 for whatever step 2 left pending. Step 3 is part of the
resumption, so a controller killed between steps 2 and 3 does not carry the action out
unrecorded in the cap (``record_cap`` writes only what the policy status lacks: an action is
never listed twice). No kill can then lose a count, since a mutation always follows a durable
record; what a kill can leave errs the safe way: a record whose mutation never comes (killed
after step 3, the job deleted before the restart) counts toward the cap for its hour, as a failed
attempt does.

Recommend mode (and ``recommend`` actions) only records, emits an Event and counts: it never
touches user objects. Releasing quota is always ``Workload.spec.active=false`` (never
``suspend``, never deleting the Workload).

An attempt that cannot work on this job as it stands (no Kueue Workload, no permission, an API
that does not allow the change) is recorded ``impossible``, one that may work later ``failed``;
``policies.retries`` decides when either is tried again (the actuator only records). Every
attempt and outcome is one INFO line of the audit log (``advisor.controller.actionaudit``), and
every Event is named after its request id and outcome (``advisor.controller.jobevents``), so the
API server itself refuses a second one, also after a restart. The ``attempt`` line is logged
once the request is persisted (step 2), so a controller killed before that leaves no attempt that
nothing will finish; each outcome is persisted before its line, so a restarted controller neither
misses the outcome of an attempt it resumes nor logs again one already logged; it marks the
outcomes of the attempts it resumed (``resumed=true``).

The requests whose outcome comes after their mutation (a checkpoint's acknowledgement or timeout,
a release sequence a decision abandoned) are closed by ``advisor.controller.requestclosing``, a
part of ``Actuator`` kept in a module of its own, with the outcome bookkeeping both halves share.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from advisor.controller.actionaudit import audit_attempt, audit_outcome
from advisor.controller.audit import audit
from advisor.controller.jobevents import JobEvents
from advisor.controller.kueue import Workload
from advisor.controller.mutations import Outcome, mutate
from advisor.controller.pending import RECORDED, PendingAction
from advisor.controller.requestclosing import RequestClosing
from advisor.controller.retry import call_with_retries
from advisor.model import (
    DEFAULT_BOOST,
    DISRUPTIVE_KINDS,
    HELD_DETAIL,
    Action,
    ActionKind,
    ActionRecord,
    Decision,
    JobView,
    Mode,
)
from advisor.protocol import (
    DEFAULT_CHECKPOINT_TIMEOUT_S,
    new_checkpoint_request_id,
)
from policies.engine import not_running

__all__ = ["DEFAULT_BOOST", "Actuator", "Outcome"]

log = logging.getLogger(__name__)

#: a recommendation of the same kind and rule is not repeated (Event, record) within this window
RECOMMEND_REPEAT_S = 3600.0
_EVENT_REASONS = {
    ActionKind.CHECKPOINT: "CheckpointRequested",
    ActionKind.RELEASE_QUOTA: "QuotaReleased",
    ActionKind.BOOST_PRIORITY: "PriorityBoosted",
    ActionKind.DROP_BOOST: "PriorityBoostDropped",
    ActionKind.SCALE: "Scaled",
    ActionKind.STOP: "Stopped",
    ActionKind.SET_GRACE_PERIOD: "GracePeriodSet",
}


#: kinds that act on a running job: one recorded before a restart is not carried out after it
#: on a job that no longer runs (cleanups, such as dropping a boost or setting the grace period
#: of a suspended job, are)
_NEEDS_A_RUNNING_JOB = DISRUPTIVE_KINDS | {ActionKind.CHECKPOINT, ActionKind.BOOST_PRIORITY}

#: kinds whose effect is a deactivated Workload
_RELEASES = frozenset({ActionKind.RELEASE_QUOTA, ActionKind.STOP})

#: API statuses that say the action cannot work on this job as it stands (invalid, unsupported).
#: Not a 403: a permission is the installation's, not the job's, and comes back with the act role
#: bound again (a ``helm upgrade`` swaps the ClusterRole for a moment). Held for an hour as
#: impossible, a preemption victim's checkpoint waited out 55 minutes after the grant was back,
#: and the job lost 8,456 steps to Kueue 1.5 minutes after; a 403 is a failure, tried again
#: after the failures' backoff (1, 2, 4 ... minutes, ``policies.retries``)
_IMPOSSIBLE_STATUS = frozenset({400, 405, 422})


#: the outcomes of an attempt whose write reached the API server (a Workload, pod or job patched)
_WROTE = frozenset({"done", "requested"})
#: how a failed action's detail begins when the API server refused it (counted as a failed write)
_API_ERROR = "API error:"


class Actuator(RequestClosing):
    def __init__(
        self,
        api: Any,
        core: Any,
        persist: Callable[[str], None],
        *,
        metrics: Any | None = None,
        boost: int = DEFAULT_BOOST,
        sleep: Callable[[float], None] | None = None,
        record_cap: Callable[[str, str, float, bool], None] | None = None,
    ) -> None:
        self.api = api
        self.sleep = sleep or time.sleep
        self.may_act: Callable[[], bool] = lambda: True  # the engine's leader gate
        self.core = core
        self.persist = persist
        #: ``(policy, request id, time, resumed)`` of a capped action about to be carried out:
        #: makes the policy's durable record of its hourly cap carry it; raises when it cannot
        self.record_cap: Callable[[str, str, float, bool], None] = record_cap or (lambda *_: None)
        self.metrics = metrics
        #: the Events posted on the jobs (one per outcome, named after its request id)
        self.job_events = JobEvents(api, metrics)
        self.boost = boost
        #: key -> request id -> what is needed to finish the action (persisted with the status)
        self.pending: dict[str, dict[str, PendingAction]] = {}

    # ------------------------------------------------------------------------------ bookkeeping
    def pending_for(self, key: str) -> dict[str, dict[str, Any]]:
        """The job's requests in flight as its status keeps them."""
        return {rid: p.to_status() for rid, p in self.pending.get(key, {}).items()}

    def recorded(self, key: str) -> list[str]:
        """The job's requests recorded but not carried out yet (a restart finishes them)."""
        return [rid for rid, p in self.pending.get(key, {}).items() if p.stage == RECORDED]

    def restore_pending(self, key: str, data: Mapping[str, Any] | None) -> None:
        if not data:
            return
        kept: dict[str, PendingAction] = {}
        for rid, raw in data.items():
            entry = PendingAction.from_status(raw) if isinstance(raw, Mapping) else None
            if entry is None:
                log.warning("%s: pending request %s not understood, left alone: %r", key, rid, raw)
                continue
            kept[str(rid)] = entry
        self.pending[key] = kept

    def forget(self, key: str) -> None:
        self.pending.pop(key, None)

    def learning_state_changed(self, job: JobView, body: Mapping[str, Any], previous: str | None) -> None:
        """The Event of a run's new learning state (``JobEvents.learning_state_changed``)."""
        self.job_events.learning_state_changed(job, body, previous)

    def evicted(self, job: JobView, body: Mapping[str, Any]) -> None:
        """The Event of an eviction of the job's Workload (``JobEvents.evicted``)."""
        self.job_events.evicted(job, body)

    # ----------------------------------------------------------------------------------- entry
    def execute(
        self,
        job: JobView,
        decision: Decision,
        *,
        body: Mapping[str, Any],
        workload: Workload | None,
        now: float,
    ) -> list[ActionRecord]:
        """Carry out (Apply) or record (Recommend) each action of ``decision``, then its cleanup
        (``Decision.cleanup``: the advisor undoing its own writes), carried out in any mode: it
        never harms a job more than leaving the write would, and the mode (or ``--recommend-only``)
        only withholds new actions on the job."""
        done: list[ActionRecord] = []
        for action in decision.actions:
            if decision.mode is Mode.APPLY and action.kind is not ActionKind.RECOMMEND:
                rec = self._apply(job, decision, action, body=body, workload=workload, now=now)
            else:
                rec = self._recommend(job, decision, action, body=body, now=now)
            if rec is not None:
                done.append(rec)
        for action in decision.cleanup:
            if action.kind is not ActionKind.RECOMMEND:
                cleaned = self._apply(job, decision, action, body=body, workload=workload, now=now)
                if cleaned is not None:
                    done.append(cleaned)
        return done

    def _recommend(
        self, job: JobView, decision: Decision, action: Action, *, body: Mapping[str, Any], now: float
    ) -> ActionRecord | None:
        for prev in reversed(job.actions):
            if (
                prev.outcome == "recommended"
                and prev.kind is action.kind
                and prev.rule == action.rule
                and now - prev.time < RECOMMEND_REPEAT_S
            ):
                return None
        # an Apply policy's action held back by its cooldown or hourly cap is said as such: counted
        # as a recommendation of a Recommend-mode policy, it read as what Apply would do
        held = decision.mode is Mode.APPLY and bool(action.params.get("held"))
        mode = Mode.APPLY if held else Mode.RECOMMEND
        rec = ActionRecord(
            kind=action.kind,
            time=now,
            request_id=f"rec-{uuid.uuid4().hex[:10]}",
            policy=decision.policy or "",
            rule=action.rule,
            outcome="recommended",
            reason=action.reason,
            detail=HELD_DETAIL if held else "",
        )
        self.core.record_action(job.key, rec)
        # a held action is counted, and logged, as the kind it would have been (release-quota, ...):
        # a query of what an Apply policy holds back by kind finds it in both
        would = next((k for k in ActionKind if k.value == action.params.get("would")), action.kind)
        audit(
            "outcome",
            job,
            kind=would if held else action.kind,
            request_id=rec.request_id,
            policy=rec.policy,
            rule=action.rule,
            mode=mode.value,
            outcome="held" if held else "recommended",
            reason=action.reason,
        )
        what = "" if action.kind is ActionKind.RECOMMEND else f"{action.kind.value}: "
        self.job_events.post(
            job,
            body,
            "ActionHeld" if held else "Recommendation",
            f"{what}{action.reason} (policy {decision.policy}, rule {action.rule}, mode {mode.value})",
            request_id=rec.request_id,
        )
        self._count(
            decision.policy, would if held else action.kind, mode.value, "held" if held else "recommended"
        )
        return rec

    def _apply(
        self,
        job: JobView,
        decision: Decision,
        action: Action,
        *,
        body: Mapping[str, Any],
        workload: Workload | None,
        now: float,
    ) -> ActionRecord | None:
        rid = (
            new_checkpoint_request_id()  # numeric: it travels back as a progress metric
            if action.kind is ActionKind.CHECKPOINT
            else f"{action.kind.value}-{uuid.uuid4().hex[:10]}"
        )
        params = {
            str(k): v for k, v in action.params.items() if isinstance(v, str | int | float | bool | None)
        }
        timeout = float(
            action.params.get("timeout_s", DEFAULT_CHECKPOINT_TIMEOUT_S) or DEFAULT_CHECKPOINT_TIMEOUT_S
        )
        rec = ActionRecord.requested(
            action,
            policy=decision.policy or "",
            request_id=rid,
            now=now,
            default_boost=self.boost,
            stamp=job.version,
        )
        self.core.record_action(job.key, rec)
        self.pending.setdefault(job.key, {})[rid] = PendingAction.of(rec, params, timeout)
        try:
            self.persist(job.key)
        except Exception as exc:
            log.error("not acting on %s: could not record request %s first: %s", job.key, rid, exc)
            self.pending[job.key].pop(rid, None)
            detail = f"not recorded before acting: {exc}"
            self.core.update_action(job.key, rid, "failed", detail=detail)
            audit_attempt(job, rid, PendingAction.of(rec, params, timeout))
            audit_outcome(job, rid, PendingAction.of(rec, params, timeout), "failed", detail)
            self._count(decision.policy, action.kind, Mode.APPLY.value, "failed")
            return rec
        # logged once the request is durable: a kill from here on leaves it to the restarted
        # controller, which finishes it and logs its outcome, so every attempt line gets one
        audit_attempt(job, rid, self.pending[job.key][rid])
        self.finish(job, rid, body=body, workload=workload)
        return rec

    # ---------------------------------------------------------------------- steps 3 to 5
    def finish(
        self,
        job: JobView,
        rid: str,
        *,
        body: Mapping[str, Any],
        workload: Workload | None,
        resumed: bool = False,
    ) -> Outcome | None:
        """Carry out a recorded action (first time, or after a restart: ``resumed``). Idempotent."""
        entry = self.pending.get(job.key, {}).get(rid)
        if entry is None or entry.stage != RECORDED:
            return None
        kind, policy = entry.kind, entry.policy
        stopped = not_running(job) if resumed and kind in _NEEDS_A_RUNNING_JOB else None
        if stopped is not None and kind in _RELEASES and not job.active:
            stopped = (
                None  # deactivated: by this very release before the restart, or by someone else (said so)
            )
        if stopped is not None:
            # decided before a restart, for a job that has stopped running since (preempted,
            # queued, suspended, done): what a new decision would not do, a resumed one does not
            detail = f"not carried out after the restart: {stopped}"
            self.pending[job.key].pop(rid, None)
            self.core.update_action(job.key, rid, "impossible", detail=detail)
            self._outcome_settled(job, rid, entry, "impossible", detail, resumed=True)
            self.job_events.post(
                job,
                body,
                "ActionDropped",
                f"{kind.value} {detail} (request {rid})",
                request_id=rid,
                warning=True,
            )
            return Outcome("impossible", detail)
        if kind in DISRUPTIVE_KINDS and policy:
            try:
                when = entry.time if entry.time is not None else time.time()
                self.record_cap(policy, rid, when, resumed)
            except Exception as exc:
                log.error(
                    "not acting on %s: request %s could not be recorded in AdvisorPolicy %s first: %s",
                    job.key,
                    rid,
                    policy,
                    exc,
                )
                detail = f"not recorded in the policy's recentActions before acting: {exc}"
                self.pending[job.key].pop(rid, None)
                self.core.update_action(job.key, rid, "failed", detail=detail)
                self._outcome_settled(job, rid, entry, "failed", detail, resumed=resumed)
                self._count(policy, kind, Mode.APPLY.value, "failed")
                return Outcome("failed", detail)

        params = entry.params

        def attempt() -> Outcome:
            if not self.may_act():  # checked before every attempt: a deposed leader must not act
                raise PermissionError("the leader Lease is not held")
            return mutate(self.api, kind, params, job, body, workload, rid, boost=self.boost)

        result = self._with_retries(attempt)
        failed = result.outcome in ("failed", "impossible")
        if kind is ActionKind.CHECKPOINT and result.outcome == "requested":
            # stays pending until acknowledged or timed out
            self.pending[job.key][rid] = entry = entry.awaiting()
        else:
            self.pending[job.key].pop(rid, None)
            # a disruptive action a restart carried out disrupted the job now, not when it was
            # decided: its cooldown runs from now (a resumed resize was followed 63 ms later by
            # another, the first one's decision being older than the cooldown)
            at = time.time() if resumed and kind in DISRUPTIVE_KINDS else None
            self.core.update_action(
                job.key, rid, result.outcome, detail=result.detail if failed else None, at=at
            )
        self._outcome_settled(job, rid, entry, result.outcome, result.detail, resumed=resumed)
        reason = _EVENT_REASONS[kind] if not failed else f"{_EVENT_REASONS[kind]}Failed"
        impossible = result.outcome == "impossible"
        not_again = "; not retried until the job changes, or for an hour" if impossible else ""
        # a refused action did not happen: the rule's reason ("... released without it") is what
        # it asked for, not what was done
        why = f"not done; the rule asked because: {entry.reason}" if failed else entry.reason
        self.job_events.post(
            job,
            body,
            reason,
            f"{result.detail}{not_again}; {why} (rule {entry.rule}, request {rid})",
            warning=failed,
            request_id=rid,
        )
        self._count(policy, kind, Mode.APPLY.value, result.outcome)
        if result.outcome in _WROTE and self.metrics is not None:
            self.metrics.api_writes.labels(kind.value).inc()
        if failed:
            # a write the API server refused (a 403 from an RBAC overlay without the act role):
            # the Warning Event is per job; the counter and the log line are what alerting reads
            log.warning("%s: %s request %s %s: %s", job.key, kind.value, rid, result.outcome, result.detail)
            if self.metrics is not None and result.detail.startswith(_API_ERROR):
                self.metrics.write_errors.labels(kind.value).inc()
        return result

    def _with_retries(self, fn: Callable[[], Outcome]) -> Outcome:
        """``fn`` (which reads what it acts on afresh each time) with the shared retry policy:
        transient errors and conflicts are retried with jittered exponential backoff, anything
        else (403, 404, 422, a bug) fails the action at once with its reason."""
        try:
            return call_with_retries(fn, what="action", retry_conflicts=True, sleep=self.sleep)
        except Exception as exc:
            status = getattr(exc, "status", None)
            why = f"{_API_ERROR} {getattr(exc, 'reason', None) or exc}"
            if isinstance(status, int) and status in _IMPOSSIBLE_STATUS:
                return Outcome("impossible", f"{why} ({status})")
            return Outcome("failed", why)
