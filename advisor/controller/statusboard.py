"""What the controller shows about each job: its rendered ``TrainJobForecast`` status, and the
changes worth telling (a LearningState Event, a log line).

Kept apart from the engine, which decides *when* a job is evaluated and written: this module holds
the last status shown per job (the reference for "what changed") and turns a view and a decision
into the status, its conditions and its announcements.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from typing import Any

from advisor.controller.actuator import Actuator
from advisor.controller.api import dumps_compact
from advisor.controller.conditions import POLICIES_NOT_LISTED, forecast_conditions
from advisor.controller.jobs import JOB_KINDS, TRAINJOB
from advisor.controller.render import render_status
from advisor.controller.saved import SavedStatuses
from advisor.core import AdvisorCore
from advisor.model import Decision, JobView

__all__ = ["StatusBoard", "owner_reference"]

log = logging.getLogger(__name__)


def owner_reference(body: Mapping[str, Any]) -> dict[str, Any]:
    """The job as the owner of its ``TrainJobForecast`` (deleted with it)."""
    meta = body.get("metadata") or {}
    jk = JOB_KINDS.get(str(body.get("kind") or ""), TRAINJOB)
    return {"apiVersion": f"{jk.group}/{jk.version}", "kind": jk.kind, "uid": meta.get("uid")}


def _not_acted_on(recommendation: dict[str, Any], decision: Decision | None) -> None:
    """While the AdvisorPolicies are not listed the decision is shown but not carried out: without
    a governing policy (none has arrived yet) its reason would read "no AdvisorPolicy selects this
    job", which is not known; with one, its actions would read as under way."""
    if decision is None or decision.policy is None:
        recommendation["reasons"] = [POLICIES_NOT_LISTED]
    else:
        recommendation["reasons"] = [*recommendation["reasons"], f"not carried out: {POLICIES_NOT_LISTED}"]


class StatusBoard:
    """The statuses last rendered per job, and what a new one announces."""

    def __init__(
        self,
        core: AdvisorCore,
        actuator: Actuator,
        restart: SavedStatuses,
        *,
        hung_after_s: float,
        invalid_policies: Mapping[str, str] | None = None,
    ) -> None:
        self.core = core
        self.actuator = actuator
        self.restart = restart
        self.hung_after_s = hung_after_s
        self._shown: dict[str, dict[str, Any]] = {}
        #: the learning state last announced per job (a LearningState Event), so that a return to
        #: learning is told only from a state that was told: STATE also shows the stall rule's
        #: "hung", which that rule's own Events announce
        self._told: dict[str, str] = {}
        #: per job, the eviction time told last (None: an eviction whose time is not known)
        self._evictions: dict[str, float | None] = {}
        #: the tie last warned of per job (winner, losers): the warning is logged once per change,
        #: not at every change of the job's state or advice
        self._ties: dict[str, tuple[Any, tuple[str, ...]]] = {}
        #: False while the AdvisorPolicies could not be listed (``Engine.policies_unknown``): the
        #: Actionable condition says so
        self.policies_listed = True
        #: per invalid policy, what stands in for it (the engine gives ``PolicyBook.holding``, which
        #: it reads live): a job it governs says so in its reasons and its Actionable condition
        self.invalid_policies: Mapping[str, str] = invalid_policies if invalid_policies is not None else {}

    def shown(self, key: str) -> dict[str, Any] | None:
        """The status this controller rendered last for the job (None: none yet)."""
        return self._shown.get(key)

    def items(self) -> Iterator[tuple[str, dict[str, Any]]]:
        return iter(self._shown.items())

    def forget(self, key: str) -> None:
        self._shown.pop(key, None)
        self._told.pop(key, None)
        self._ties.pop(key, None)
        self._evictions.pop(key, None)

    def render(self, key: str, view: JobView, decision: Decision | None, now: float) -> dict[str, Any]:
        """The job's full status (conditions carried over from the last one shown, else from the
        one a previous controller saved), kept as the one shown."""
        rec = self.core.record(key)
        state = self.core.dump(key) if rec else None
        history = state.pop("history", None) if state else None  # stored as its own, appendable field
        status = render_status(
            view,
            decision,
            now=now,
            forecast_at=rec.forecast_at if rec else None,
            core_state=dumps_compact(state) if state is not None else None,
            history=history,
            pending_actions=self.actuator.pending_for(key),
            hung_after_s=self.hung_after_s,
        )
        if not self.policies_listed:
            _not_acted_on(status["recommendation"], decision)
        invalid = self.invalid_policies.get(decision.policy) if decision and decision.policy else None
        if invalid is not None and decision is not None:
            status["recommendation"]["reasons"].append(f"policy {decision.policy} is invalid: {invalid}")
        previous = (self._shown.get(key) or self.restart.conditions(key) or {}).get("conditions")
        status["conditions"] = forecast_conditions(
            view,
            decision,
            now=now,
            previous=previous or (),
            policies_listed=self.policies_listed,
            invalid_policy=invalid,
        )
        self._shown[key] = status
        return status

    def evaluated(
        self, key: str, view: JobView, decision: Decision, body: Mapping[str, Any], now: float
    ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """Render the status of a full evaluation and announce what changed: an Event when the run
        enters a judgement other than learning or returns to learning from one, a log line on a new
        state or advice. Returns the status
        shown before (None: none by this controller) and the new one."""
        # the state shown before: this controller's last status, else the one a previous controller
        # saved (announced already), else none (a job first judged in a state other than learning,
        # e.g. when its reports arrived in one burst, is announced too)
        previous = self._shown.get(key)
        shown = previous.get("state") if previous is not None else self.restart.saved_state(key)
        status = self.render(key, view, decision, now)
        label = view.learning_state.label if view.learning_state is not None else None
        if (
            label is not None
            and shown != status["state"] == label
            # back to learning is told too, after a judgement other than learning was told (the
            # Events read "learning -> plateaued" again and again with nothing between them); not
            # after the "unknown" of a run not yet forecast, a phase (a resume tells itself), a
            # rule's verdict, or a state a previous controller showed (the saved STATE does not
            # say which of them it was: at worst a restart misses one return)
            and (label != "learning" or self._told.get(key, "learning") != "learning")
            and _mid_run(view)
        ):
            self._told[key] = label
            self.actuator.learning_state_changed(view, body, shown)
        self._tell_eviction(key, view, body)
        _log_change(key, previous, status)
        self._warn_tie(key, status)
        return previous, status

    def _tell_eviction(self, key: str, view: JobView, body: Mapping[str, Any]) -> None:
        """An Event once per eviction of the job's Workload (``JobEvents.evicted``): told by this
        controller once per eviction time, and named after it so that a restarted one's post is
        refused by the API server."""
        s = view.signals
        if s is None or not s.evicted:
            self._evictions.pop(key, None)
            return
        at = s.evicted_at
        if key in self._evictions and self._evictions[key] == at:
            return
        self._evictions[key] = at
        self.actuator.evicted(view, body)

    def _warn_tie(self, key: str, status: Mapping[str, Any]) -> None:
        """A warning when the job's governing policy wins a tie, once per (winner, losers): the
        state and advice change often, the tie does not."""
        rec = status.get("recommendation") or {}
        tie = (rec.get("policy"), tuple(rec.get("tiedWith") or ()))
        if self._ties.get(key, (None, ())) == tie:
            return
        self._ties[key] = tie
        if tie[1]:
            log.warning(
                "%s: policy %s governs over %s (same specificity and priority: a Recommend policy "
                "before an Apply one, then by name); set spec.priority on the one meant to govern",
                key,
                tie[0],
                ", ".join(tie[1]),
            )


#: an elapsed time as the rules' reasons say it (``policies.fields.format_duration``: 45s, 13m,
#: 15m19s, 2h5m, 3d4h)
_ELAPSED = re.compile(r"\b\d+(?:d(?:\d+h)?|h(?:\d+m)?|m(?:\d+s)?|s)\b")


def same_but_time(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether a new status says nothing the old one did not (a periodic re-evaluation). A
    recommendation whose reasons differ only in elapsed times ("no step advance for 34m", a
    minute after "for 33m") says nothing new: every hung job was written once a minute for that
    alone (48 writes a second at 650 idle jobs); ``observedAt`` and the heartbeat's write keep
    such a reason's age readable."""
    if old is None:
        return False
    for k, v in new.items():
        if k == "observedAt" or old.get(k) == v:
            continue
        if k != "recommendation" or _elapsed_blind(old.get(k)) != _elapsed_blind(v):
            return False
    return True


def _elapsed_blind(value: Any) -> Any:
    """``value`` with every elapsed time in its strings replaced by one mark."""
    if isinstance(value, str):
        return _ELAPSED.sub("~", value)
    if isinstance(value, Mapping):
        return {k: _elapsed_blind(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_elapsed_blind(v) for v in value]
    return value


def _log_change(key: str, previous: Mapping[str, Any] | None, status: Mapping[str, Any]) -> None:
    """One log line when a job's state, advice or governing policy (and its mode) changes, not at
    every evaluation: what an operator tailing the controller wants to see, without the numbers."""
    rec = status.get("recommendation") or {}
    old = (previous or {}).get("recommendation") or {}

    def said(st: Mapping[str, Any] | None, r: Mapping[str, Any]) -> tuple[Any, ...]:
        tied = tuple(r.get("tiedWith") or ())
        return ((st or {}).get("state"), r.get("advice"), r.get("policy"), r.get("mode"), tied)

    if previous is not None and said(previous, old) == said(status, rec):
        return  # a job moving to another policy or mode (Recommend -> Apply) is logged too
    # the ADVICE column's wording (``plateau:release (recommended)`` of a Recommend policy): the
    # bare word read as a release to an operator grepping the log for one
    advice = (status.get("summary") or {}).get("advice") or rec.get("advice") or ""
    policy = f" (policy {rec['policy']}, {rec.get('mode')})" if rec.get("policy") else ""
    log.info("%s: %s%s%s", key, status.get("state"), f"; {advice}" if advice else "", policy)


def _mid_run(view: JobView) -> bool:
    """Whether a state change is worth an Event: not in the first 10% of steps (a warmup looks like
    anything, as the samples' ``minProgress`` says) nor the last 10% (with almost nothing left to
    learn, any run is "plateaued"). Unknown length: always."""
    if not view.total_steps:
        return True
    return 0.1 * view.total_steps <= view.step < 0.9 * view.total_steps
