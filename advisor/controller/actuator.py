"""Carrying out a ``Decision``: the only code that mutates other people's objects.

Every mutating action follows one protocol, so that a controller killed at any point neither
loses an action nor repeats it:

1. pick a request id; record the action (``requested``) in the core and in ``pending`` with the
   parameters needed to finish it;
2. persist both synchronously in the ``TrainJobForecast`` status (``persist``); if that fails,
   nothing is mutated;
3. mutate (merge patches of exactly the fields concerned; setting a value twice is a no-op);
4. record the outcome, emit one Event on the job, count it in Prometheus.

On restart, ``resume`` redoes step 3-4 for whatever step 2 left pending. Recommend mode (and
``recommend`` actions) only records, emits an Event and counts: it never touches user objects.
Releasing quota is always ``Workload.spec.active=false`` (never ``suspend``, never deleting the
Workload).

An attempt that cannot work on this job as it stands (no Kueue Workload, no permission, an API
that does not allow the change) is recorded ``impossible``, one that may work later ``failed``;
``policies.retries`` decides when either is tried again (the actuator only records). Every
attempt and outcome is one INFO line of the audit log (``advisor.controller.audit``), and every
Event is named after its request id and outcome, so the API server itself refuses a second one,
also after a restart.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from advisor.controller.audit import audit
from advisor.controller.gracepatch import MANAGER as GRACE_MANAGER
from advisor.controller.gracepatch import set_grace_ops
from advisor.controller.jobs import JOB_KINDS, PYTORCHJOB, TRAINJOB
from advisor.controller.kueue import Workload
from advisor.controller.retry import call_with_retries
from advisor.model import Action, ActionKind, ActionRecord, Decision, JobView, Mode
from advisor.protocol import (
    CHECKPOINT_REQUEST_ANNOTATION,
    DEFAULT_CHECKPOINT_TIMEOUT_S,
    new_checkpoint_request_id,
)

__all__ = ["DEFAULT_BOOST", "Actuator", "Outcome"]

log = logging.getLogger(__name__)

#: priority boost set on a likely preemption victim while it checkpoints
DEFAULT_BOOST = 1000
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


#: API statuses that say the action cannot work on this job as it stands (forbidden, invalid)
_IMPOSSIBLE_STATUS = frozenset({400, 403, 405, 422})


@dataclass(frozen=True, slots=True)
class Outcome:
    outcome: str  # done | requested | failed | impossible
    detail: str


class Actuator:
    def __init__(
        self,
        api: Any,
        core: Any,
        persist: Callable[[str], None],
        *,
        metrics: Any | None = None,
        boost: int = DEFAULT_BOOST,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.api = api
        self.sleep = sleep or time.sleep
        self.may_act: Callable[[], bool] = lambda: True  # the engine's leader gate
        self.core = core
        self.persist = persist
        self.metrics = metrics
        self.boost = boost
        #: key -> request id -> what is needed to finish the action (persisted with the status)
        self.pending: dict[str, dict[str, dict[str, Any]]] = {}

    # ------------------------------------------------------------------------------ bookkeeping
    def pending_for(self, key: str) -> dict[str, dict[str, Any]]:
        return dict(self.pending.get(key, {}))

    def restore_pending(self, key: str, data: Mapping[str, Any] | None) -> None:
        if data:
            self.pending[key] = {str(k): dict(v) for k, v in data.items() if isinstance(v, Mapping)}

    def forget(self, key: str) -> None:
        self.pending.pop(key, None)

    def _count(self, kind: ActionKind, mode: str, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.actions.labels(kind.value, mode, outcome).inc()

    def _event(
        self,
        job: JobView,
        body: Mapping[str, Any],
        reason: str,
        message: str,
        *,
        warning: bool = False,
        request_id: str | None = None,
    ) -> None:
        """Post one Event; with ``request_id``, at most one per request id and reason, ever (the
        Event's name is derived from both, so a second post is refused by the API server)."""
        meta = body.get("metadata") or {}
        jk = JOB_KINDS.get(job.kind, TRAINJOB)
        involved = {
            "apiVersion": f"{jk.group}/{jk.version}",
            "kind": jk.kind,
            "name": job.name,
            "namespace": job.namespace,
            "uid": meta.get("uid"),
        }
        key = f"{request_id}/{reason}" if request_id else None
        try:
            self.api.create_event(involved, reason=reason, message=message, warning=warning, dedupe_key=key)
        except Exception as exc:  # an Event is best effort; the status keeps the record
            log.warning("event %s on %s not posted: %s", reason, job.key, exc)

    def learning_state_changed(self, job: JobView, body: Mapping[str, Any], previous: str | None) -> None:
        """One Event when a run enters a learning state other than learning (the label STATE shows); a
        Warning for the states that call for a look (overfitting, diverging, hung)."""
        state = job.learning_state
        if state is None:
            return
        detail = ""
        if state.metric is not None and state.best_step is not None:
            detail = (
                f"; best {state.metric} {state.best_value:.4g} at step {state.best_step}"
                f" ({state.evals_since_best} evaluation(s) ago)"
            )
        p = state.probabilities.get(state.label, 0.0)
        self._event(
            job,
            body,
            "LearningState",
            f"{previous or 'unknown'} -> {state.label} (p={p:.2f}){detail}",
            warning=state.label in ("overfitting", "diverging", "hung"),
        )

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
        """Carry out (Apply) or record (Recommend) each action of ``decision``."""
        done: list[ActionRecord] = []
        for action in decision.actions:
            if decision.mode is Mode.APPLY and action.kind is not ActionKind.RECOMMEND:
                rec = self._apply(job, decision, action, body=body, workload=workload, now=now)
            else:
                rec = self._recommend(job, decision, action, body=body, now=now)
            if rec is not None:
                done.append(rec)
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
        rec = ActionRecord(
            kind=action.kind,
            time=now,
            request_id=f"rec-{uuid.uuid4().hex[:10]}",
            policy=decision.policy or "",
            rule=action.rule,
            outcome="recommended",
            reason=action.reason,
        )
        self.core.record_action(job.key, rec)
        audit(
            "outcome",
            job,
            kind=action.kind,
            request_id=rec.request_id,
            policy=rec.policy,
            rule=action.rule,
            mode=Mode.RECOMMEND.value,
            outcome="recommended",
            reason=action.reason,
        )
        what = "" if action.kind is ActionKind.RECOMMEND else f"{action.kind.value}: "
        self._event(
            job,
            body,
            "Recommendation",
            f"{what}{action.reason} (policy {decision.policy}, rule {action.rule}, mode Recommend)",
            request_id=rec.request_id,
        )
        self._count(action.kind, Mode.RECOMMEND.value, "recommended")
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
        rec = ActionRecord(
            kind=action.kind,
            time=now,
            request_id=rid,
            policy=decision.policy or "",
            rule=action.rule,
            outcome="requested",
            reason=action.reason,
            timeout_s=timeout if action.kind is ActionKind.CHECKPOINT else None,
            stamp=job.version,
        )
        self.core.record_action(job.key, rec)
        self.pending.setdefault(job.key, {})[rid] = {
            "kind": action.kind.value,
            "params": params,
            "stage": "recorded",
            "time": now,
            "timeoutSeconds": timeout,
            "policy": rec.policy,
            "rule": action.rule,
            "reason": action.reason,
        }
        audit(
            "attempt",
            job,
            kind=action.kind,
            request_id=rid,
            policy=rec.policy,
            rule=action.rule,
            mode=Mode.APPLY.value,
            outcome="requested",
            reason=action.reason,
        )
        try:
            self.persist(job.key)
        except Exception as exc:
            log.error("not acting on %s: could not record request %s first: %s", job.key, rid, exc)
            self.pending[job.key].pop(rid, None)
            detail = f"not recorded before acting: {exc}"
            self.core.update_action(job.key, rid, "failed", detail=detail)
            self._audit_outcome(job, rid, self._entry_like(rec), "failed", detail)
            self._count(action.kind, Mode.APPLY.value, "failed")
            return rec
        self.finish(job, rid, body=body, workload=workload)
        return rec

    # ------------------------------------------------------------------------- step 3 and 4
    def finish(
        self, job: JobView, rid: str, *, body: Mapping[str, Any], workload: Workload | None
    ) -> Outcome | None:
        """Carry out a recorded action (first time, or after a restart). Idempotent."""
        entry = self.pending.get(job.key, {}).get(rid)
        if entry is None or entry.get("stage") != "recorded":
            return None
        kind = ActionKind(entry["kind"])

        def attempt() -> Outcome:
            if not self.may_act():  # checked before every attempt: a deposed leader must not act
                raise PermissionError("the leader Lease is not held")
            return self._mutate(kind, entry.get("params") or {}, job, body, workload, rid)

        result = self._with_retries(attempt)
        failed = result.outcome in ("failed", "impossible")
        if kind is ActionKind.CHECKPOINT and result.outcome == "requested":
            entry["stage"] = "awaiting-ack"  # stays pending until acknowledged or timed out
        else:
            self.pending[job.key].pop(rid, None)
            self.core.update_action(job.key, rid, result.outcome, detail=result.detail if failed else None)
        self._audit_outcome(job, rid, entry, result.outcome, result.detail)
        reason = _EVENT_REASONS[kind] if not failed else f"{_EVENT_REASONS[kind]}Failed"
        not_again = "; not retried until the job changes" if result.outcome == "impossible" else ""
        self._event(
            job,
            body,
            reason,
            f"{result.detail}{not_again}; {entry.get('reason', '')} "
            f"(rule {entry.get('rule')}, request {rid})",
            warning=failed,
            request_id=rid,
        )
        self._count(kind, Mode.APPLY.value, result.outcome)
        return result

    @staticmethod
    def _entry_like(rec: ActionRecord) -> dict[str, Any]:
        return {"kind": rec.kind.value, "policy": rec.policy, "rule": rec.rule, "reason": rec.reason}

    def _audit_outcome(
        self, job: JobView, rid: str, entry: Mapping[str, Any], outcome: str, detail: str
    ) -> None:
        audit(
            "outcome",
            job,
            kind=ActionKind(entry["kind"]),
            request_id=rid,
            policy=str(entry.get("policy") or ""),
            rule=str(entry.get("rule") or ""),
            mode=Mode.APPLY.value,
            outcome=outcome,
            reason=str(entry.get("reason") or ""),
            detail=detail,
        )

    def _with_retries(self, fn: Callable[[], Outcome]) -> Outcome:
        """``fn`` (which reads what it acts on afresh each time) with the shared retry policy:
        transient errors and conflicts are retried with jittered exponential backoff, anything
        else (403, 404, 422, a bug) fails the action at once with its reason."""
        try:
            return call_with_retries(fn, what="action", retry_conflicts=True, sleep=self.sleep)
        except Exception as exc:
            status = getattr(exc, "status", None)
            why = f"API error: {getattr(exc, 'reason', None) or exc}"
            if isinstance(status, int) and status in _IMPOSSIBLE_STATUS:
                return Outcome("impossible", f"{why} ({status})")
            return Outcome("failed", why)

    def _mutate(
        self,
        kind: ActionKind,
        params: Mapping[str, Any],
        job: JobView,
        body: Mapping[str, Any],
        workload: Workload | None,
        rid: str,
    ) -> Outcome:
        ns = job.namespace
        if kind is ActionKind.CHECKPOINT:
            jk = JOB_KINDS.get(job.kind, TRAINJOB)
            pods = self.api.list_pod_names(ns, f"{jk.pod_label}={job.name}")
            if not pods:
                return Outcome("failed", f"no running pods found with {jk.pod_label}={job.name}")
            for pod in pods:
                self.api.annotate_pod(ns, pod, {CHECKPOINT_REQUEST_ANNOTATION: rid})
            return Outcome("requested", f"checkpoint requested on {len(pods)} pod(s)")
        if kind in (ActionKind.RELEASE_QUOTA, ActionKind.STOP):
            if workload is None:
                return Outcome(
                    "impossible",
                    "no Kueue Workload found for the job; quota is released only through "
                    "Workload.spec.active=false",
                )
            return self._release(job, workload)
        if kind in (ActionKind.BOOST_PRIORITY, ActionKind.DROP_BOOST):
            if workload is None:
                return Outcome("impossible", "no Kueue Workload found for the job")
            value = int(params.get("boost", self.boost)) if kind is ActionKind.BOOST_PRIORITY else None
            self.api.kueue.set_priority_boost(ns, workload.name, value)
            return Outcome("done", f"priority boost on Workload {workload.name} set to {value}")
        if kind is ActionKind.SCALE:
            return self._scale(job, params, workload)
        if kind is ActionKind.SET_GRACE_PERIOD:
            return self._set_grace(job, params)
        return Outcome("impossible", f"unsupported action kind {kind.value}")

    def _set_grace(self, job: JobView, params: Mapping[str, Any]) -> Outcome:
        """The advisor's ``runtimePatches`` entry with the trainer pods' grace period, on a fresh
        read of a suspended TrainJob (``gracepatch``: every write tests ``/spec/suspend``, so a job
        resumed since is refused by the API server, not patched)."""
        seconds = params.get("grace_period_s")
        if job.kind != TRAINJOB.kind or not isinstance(seconds, int | float) or isinstance(seconds, bool):
            return Outcome("impossible", f"grace periods are set on TrainJobs only ({job.kind}, {seconds!r})")
        target = math.ceil(float(seconds))
        try:
            for _ in range(3):  # a value of the advisor's own is replaced in two writes: remove, add
                spec = self.api.get_job(TRAINJOB.kind, job.namespace, job.name).get("spec") or {}
                if spec.get("suspend") is not True:
                    return Outcome(
                        "impossible",
                        "the TrainJob is not suspended: Trainer changes runtimePatches only while it is",
                    )
                ops = set_grace_ops(spec, target)
                if ops is None:
                    return Outcome(
                        "done",
                        f"terminationGracePeriodSeconds {target} for the next start (runtimePatches "
                        f"manager {GRACE_MANAGER})",
                    )
                self.api.json_patch_job(TRAINJOB.kind, job.namespace, job.name, ops)
        except Exception as exc:
            if getattr(exc, "status", None) == 403:
                return Outcome(
                    "impossible",
                    "the controller may not read and patch TrainJobs (setting grace periods is opt-in: "
                    "add the manifests/components/trainjob-grace-period RBAC component)",
                )
            raise
        return Outcome("failed", "the grace period did not hold after three writes (another writer?)")

    def _release(self, job: JobView, workload: Workload) -> Outcome:
        """``Workload.spec.active=false`` on a fresh read, guarded by its resourceVersion: a Workload
        replaced, finished or already inactive since the engine's view is not written, and a
        competing writer in between makes the API server refuse the patch (409, retried)."""
        kueue = self.api.kueue
        fresh = kueue.get_workload(job.namespace, workload.name)
        if workload.uid and fresh.uid and fresh.uid != workload.uid:
            return Outcome("failed", f"Workload {workload.name} was replaced since the decision")
        if fresh.finished:
            return Outcome("impossible", f"Workload {workload.name} has finished; nothing to release")
        if not fresh.active:
            return Outcome("done", f"Workload {workload.name} already inactive ({job.gpus} GPU(s))")
        wl = kueue.set_active(
            job.namespace, workload.name, False, resource_version=fresh.resource_version or None
        )
        return Outcome(
            "done", f"Workload {workload.name} deactivated (active={wl.active}, {job.gpus} GPU(s))"
        )

    def _scale(self, job: JobView, params: Mapping[str, Any], workload: Workload | None) -> Outcome:
        target = params.get("nodes", params.get("replicas"))
        if not isinstance(target, int | float) or isinstance(target, bool) or target < 1:
            return Outcome("impossible", f"scale needs a positive target node count, got {target!r}")
        nodes = int(target)
        if job.kind == PYTORCHJOB.kind:
            lo = job.min_nodes if job.min_nodes is not None else 1
            hi = job.max_nodes if job.max_nodes is not None else nodes
            if not lo <= nodes <= hi:
                return Outcome("impossible", f"target {nodes} outside elasticPolicy bounds [{lo}, {hi}]")
            workers = nodes - 1 if job.nodes > 1 or nodes > 1 else nodes  # the Master counts as one node
            self.api.scale_job(PYTORCHJOB.kind, job.namespace, job.name, max(workers, 0))
            return Outcome("done", f"PyTorchJob scaled from {job.nodes} to {nodes} node(s)")
        patch = {"spec": {"trainer": {"numNodes": nodes}}}
        try:
            self.api.patch_job(TRAINJOB.kind, job.namespace, job.name, patch, dry_run=True)
        except Exception as exc:
            if getattr(exc, "status", None) == 403:
                return Outcome(
                    "failed",
                    "the controller may not patch TrainJobs (resizing is opt-in: add the "
                    "manifests/components/trainjob-resize RBAC component)",
                )
            if getattr(exc, "status", None) in (400, 422):
                return Outcome(
                    "impossible",
                    "this TrainJob API does not allow changing spec.trainer.numNodes "
                    f"(immutable since Trainer v2.2); recreate the job with {nodes} node(s)",
                )
            raise
        if workload is not None and workload.active:
            self.api.kueue.set_active(job.namespace, workload.name, False)
        self.api.patch_job(TRAINJOB.kind, job.namespace, job.name, patch)
        if workload is not None:
            self.api.kueue.set_active(job.namespace, workload.name, True)
        return Outcome(
            "done", f"TrainJob numNodes changed from {job.nodes} to {nodes} (deactivate, patch, reactivate)"
        )

    # ----------------------------------------------------------------- checkpoint completion
    def checkpoint_done(
        self, job: JobView, rid: str, outcome: str, *, body: Mapping[str, Any], detail: str = ""
    ) -> bool:
        """Close a checkpoint request (``acknowledged`` or ``timed-out``); False if not pending."""
        entry = self.pending.get(job.key, {}).get(rid)
        if entry is None or entry.get("kind") != ActionKind.CHECKPOINT.value:
            return False
        self.pending[job.key].pop(rid, None)
        self.core.update_action(job.key, rid, outcome)
        self._audit_outcome(job, rid, entry, outcome, detail)
        if outcome == "acknowledged":
            self._event(
                job,
                body,
                "CheckpointAcknowledged",
                f"checkpoint {rid} saved {detail}".strip(),
                request_id=rid,
            )
        else:
            self._event(
                job,
                body,
                "CheckpointTimedOut",
                f"no acknowledgement of checkpoint {rid} within {entry.get('timeoutSeconds')}s",
                warning=True,
                request_id=rid,
            )
        self._count(ActionKind.CHECKPOINT, Mode.APPLY.value, outcome)
        return True

    def awaiting_ack(self, key: str) -> list[tuple[str, float, float]]:
        """(request id, requested at, timeout) of checkpoint requests waiting for their acknowledgement."""
        return [
            (rid, float(e.get("time", 0.0)), float(e.get("timeoutSeconds", DEFAULT_CHECKPOINT_TIMEOUT_S)))
            for rid, e in self.pending.get(key, {}).items()
            if e.get("stage") == "awaiting-ack"
        ]
