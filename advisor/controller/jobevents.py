"""The Kubernetes Events the advisor posts on a job: what it did, and how a run's learning changed.

Every action's outcome is told there (``kubectl describe``, ``kubectl get events``), besides the
audit log and the status. An Event tied to an action
is named after its request id and reason (``dedupe_key``), so the API server itself refuses a
second one, also after a restart. Posting is best effort: a refused or failed post is logged and
the status keeps the record.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from advisor.controller.jobs import JOB_KINDS, TRAINJOB
from advisor.model import JobView, Phase
from advisor.series import eval_step_span

__all__ = ["JobEvents"]

log = logging.getLogger(__name__)

_PHASES = frozenset(p.value for p in Phase)


class JobEvents:
    def __init__(self, api: Any, metrics: Any | None = None) -> None:
        self.api = api
        self.metrics = metrics

    def post(
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
            posted = self.api.create_event(
                involved, reason=reason, message=message, warning=warning, dedupe_key=key
            )
        except Exception as exc:  # an Event is best effort; the status keeps the record
            log.warning("event %s on %s not posted: %s", reason, job.key, exc)
            if self.metrics is not None:
                self.metrics.write_errors.labels("event").inc()
            return
        if posted is not False and self.metrics is not None:
            self.metrics.api_writes.labels("event").inc()

    def learning_state_changed(self, job: JobView, body: Mapping[str, Any], previous: str | None) -> None:
        """One Event when a run enters a learning state other than learning, or returns to learning
        from one (the label STATE shows); a Warning for the states that call for a look
        (overfitting, diverging, hung). The status board posts it mid-run only
        (``statusboard._mid_run``), and not for a ``hung`` that is the stall rule's verdict (that
        rule's own Events tell it)."""
        state = job.learning_state
        if state is None:
            return
        detail = ""
        if state.metric is not None and state.best_step is not None:
            where = eval_step_span(state.best_step, state.best_made_after)
            detail = (
                f"; best {state.metric} {state.best_value:.4g} {where}"
                f" ({state.evals_since_best} evaluation{'' if state.evals_since_best == 1 else 's'} ago)"
            )
        probs = state.probabilities
        if state.label in ("plateaued", "overfitting"):
            # the two answer one question (no improvement left): their sum is what named the label
            stopped = probs.get("plateaued", 0.0) + probs.get("overfitting", 0.0)
            odds = (
                f"P(no longer improving)={stopped:.2f}: overfitting {probs.get('overfitting', 0.0):.2f}, "
                f"plateaued {probs.get('plateaued', 0.0):.2f}"
            )
        else:
            odds = f"p={probs.get(state.label, 0.0):.2f}"
        # STATE shows a lifecycle phase while the job does not run: a run judged again after a
        # suspension reads "plateaued after suspended", not as if "suspended" were a learning state
        change = (
            f"{state.label} after {previous}"
            if previous in _PHASES
            else f"{previous or 'unknown'} -> {state.label}"
        )
        self.post(
            job,
            body,
            "LearningState",
            f"{change} ({odds}){detail}",
            warning=state.label in ("overfitting", "diverging", "hung"),
        )

    def evicted(self, job: JobView, body: Mapping[str, Any]) -> None:
        """One Event when Kueue evicts the job's Workload (a preemption, most often): why, as Kueue
        says it, and the work the run will redo, from its last checkpoint known to the advisor to
        the last step it reported. Kueue tells the eviction on the Workload only, where an ML
        engineer does not look; the job read only ``pending``. Named after the eviction's time, so
        a restarted controller does not tell it again."""
        s = job.signals
        if s is None or not s.evicted:
            return
        why = s.eviction or "no reason given"
        saved = job.checkpoint.last_step
        if saved is None:
            work = (
                f"no checkpoint known to the advisor: up to {job.step:,} steps to redo "
                "(unless it saved on the termination signal)"
            )
        else:
            lost = max(job.step - saved, 0)
            work = f"its last checkpoint known is at step {saved:,}, {lost:,} steps before its last report"
        at = f"{s.evicted_at:.0f}" if s.evicted_at is not None else "unknown"
        # a deactivated Workload (a release's, or an admin's spec.active=false) is not queued
        # again: it waits for a resume, not for quota (after the advisor's own release it read
        # "it waits to be admitted again")
        deactivated = s.workload_active is False or why.startswith("Deactivated")
        waits = (
            f"it is deactivated and waits to be resumed (trainjob-advisor resume -n {job.namespace} "
            f"{job.name}), not for quota"
            if deactivated
            else "it waits to be admitted again"
        )
        self.post(
            job,
            body,
            "Evicted",
            f"Kueue evicted its Workload ({why}); {waits}; {work}",
            request_id=f"eviction-{at}",
        )
