"""What each AdvisorPolicy is doing, for its status: jobs matched, actions taken, GPU-hours flagged.

Admins read a policy's effect from ``kubectl get advisorpolicies`` (printer columns ``Jobs`` and
``Actions``) before switching it from Recommend to Apply. The figures are derived from state the
controller already persists, so that a restart does not reset them:

* ``jobsMatched`` / ``matchedJobs``: jobs whose latest decision came from the policy;
* ``actionsTaken`` / ``actionsByKind`` / ``actionsByOutcome``: actions the policy carried out or
  attempted (any outcome but ``recommended``) in the action logs of the jobs the controller follows
  (each job's log is persisted in its TrainJobForecast), split by kind and by outcome (``done``,
  ``acknowledged``, ``failed``, ``impossible``, ...: an admin tells attempts from effects);
  ``recommendations`` counts the Recommend-mode ones;
* ``gpuHoursFlaggedNonLearning``: GPU-hours held by jobs the policy governs while their state was
  plateaued, overfitting, hung or diverging (``summary.NOT_LEARNING``), accumulated by the
  controller from the value found in the status when it started.

* ``lostTies``: jobs the policy selects but another one governs, which ties it on specificity and
  priority and wins by its mode (Recommend before Apply) or name, by that policy's name: the
  reason a policy an admin just created may govern no job (set ``spec.priority`` on the one meant to govern);
* ``fromDeletedJobs``: the actions and recommendations of jobs deleted since (their logs went with
  their TrainJobForecasts), kept so that the counts above never shrink when a job goes; read back
  from the status when the controller starts, like the GPU-hours;
* ``recentActions``: the request id and time of the policy's capped (disruptive) actions of the last hour,
  written *before* each such action's mutation, also when a restarted controller resumes an
  action it finds recorded in a TrainJobForecast but not here, so that ``maxActionsPerHour``
  holds across a controller restart (and across the deletion of a job whose log held the action);
  written only when the status lacks one of the newest ``maxActionsPerHour`` actions known;
* ``effectiveMode``: the mode the controller evaluates the policy in (printer column ``Effective``
  beside ``Mode``, the spec's): Recommend under ``--recommend-only`` whatever ``spec.mode`` says,
  which the ``RecommendOnly`` condition explains; for an invalid policy, the mode of what stands
  in for it (absent when nothing does). An admin who set Apply sees that nothing will act yet.

``policy_figures`` is pure; ``PolicyBook`` holds the loaded policies for the engine, writes the
``Valid`` and ``RecommendOnly`` conditions and ``effectiveMode`` when a policy changes, and the
figures at the engine's bounded rate, only when they changed.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from advisor.controller.actuator import HELD_DETAIL
from advisor.controller.metrics import Metrics
from advisor.model import ActionRecord, Mode
from policies.rules.base import NO_DIRECTION, direction_warnings, undirected_metrics

__all__ = ["MAX_LISTED_JOBS", "JobFigures", "PolicyBook", "PolicyFigures", "policy_figures"]

log = logging.getLogger(__name__)

#: how many job names ``matchedJobs`` lists (the count is always complete)
MAX_LISTED_JOBS = 100


@dataclass
class PolicyFigures:
    jobs: list[str] = field(default_factory=list)
    actions: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)
    recommendations: int = 0
    gpu_hours: float = 0.0
    lost_ties: dict[str, int] = field(default_factory=dict)

    def add(self, records: Iterable[ActionRecord]) -> None:
        """Count ``records`` (the policy's own) as actions or recommendations."""
        for rec in records:
            if rec.outcome == "recommended" and rec.detail == HELD_DETAIL:
                # an Apply policy's action its cooldown or cap held back: neither taken nor a
                # recommendation of what Apply would do
                self.outcomes["held"] = self.outcomes.get("held", 0) + 1
            elif rec.outcome == "recommended":
                self.recommendations += 1
            else:
                self.actions[rec.kind.value] = self.actions.get(rec.kind.value, 0) + 1
                self.outcomes[rec.outcome] = self.outcomes.get(rec.outcome, 0) + 1

    def merge(self, other: PolicyFigures) -> None:
        for mine, theirs in ((self.actions, other.actions), (self.outcomes, other.outcomes)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v
        self.recommendations += other.recommendations

    def counts(self) -> dict[str, Any]:
        """The action counts alone (what ``fromDeletedJobs`` stores)."""
        return {
            "actionsByKind": dict(sorted(self.actions.items())),
            "actionsByOutcome": dict(sorted(self.outcomes.items())),
            "recommendations": self.recommendations,
        }

    @classmethod
    def from_counts(cls, data: Any) -> PolicyFigures:
        """``counts()`` read back; malformed entries are skipped."""
        out = cls()
        if not isinstance(data, Mapping):
            return out

        def table(raw: Any) -> dict[str, int]:
            items = raw.items() if isinstance(raw, Mapping) else ()
            return {str(k): v for k, v in items if isinstance(v, int) and not isinstance(v, bool) and v > 0}

        out.actions, out.outcomes = table(data.get("actionsByKind")), table(data.get("actionsByOutcome"))
        recs = data.get("recommendations")
        out.recommendations = recs if isinstance(recs, int) and not isinstance(recs, bool) and recs > 0 else 0
        return out

    def status(self) -> dict[str, Any]:
        jobs = sorted(self.jobs)
        return {
            "jobsMatched": len(jobs),
            "matchedJobs": jobs[:MAX_LISTED_JOBS],
            "actionsTaken": sum(self.actions.values()),
            "actionsByKind": dict(sorted(self.actions.items())),
            "actionsByOutcome": dict(sorted(self.outcomes.items())),
            "recommendations": self.recommendations,
            "gpuHoursFlaggedNonLearning": round(self.gpu_hours, 3),
            "lostTies": dict(sorted(self.lost_ties.items())),
        }


@dataclass(frozen=True)
class JobFigures:
    """What one job adds to the policies' figures."""

    key: str
    policy: str | None  # the policy its latest decision came from
    actions: Iterable[ActionRecord]  # its action log
    tied_with: tuple[str, ...] = ()  # policies that tied ``policy`` and lost by name


def policy_figures(
    policies: Iterable[str],
    jobs: Iterable[JobFigures],
    gpu_hours: Mapping[str, float],
    deleted: Mapping[str, PolicyFigures] | None = None,
) -> dict[str, PolicyFigures]:
    """Each policy's figures from the jobs followed now, plus ``deleted`` (the counts of jobs gone)."""
    out = {name: PolicyFigures(gpu_hours=float(gpu_hours.get(name, 0.0))) for name in policies}
    for name, gone in (deleted or {}).items():
        if name in out:
            out[name].merge(gone)
    for job in jobs:
        if job.policy in out:
            out[job.policy].jobs.append(job.key)
        for loser in job.tied_with:
            if loser in out and job.policy is not None:
                out[loser].lost_ties[job.policy] = out[loser].lost_ties.get(job.policy, 0) + 1
        for rec in job.actions:
            figures = out.get(rec.policy)
            if figures is not None:
                figures.add((rec,))
    return out


def _nulling_gone_keys(status: Mapping[str, Any], before: Mapping[str, Any] | None) -> dict[str, Any]:
    """``status`` as a merge patch over ``before``: each map field also names, as null, the keys
    it had before and has no longer (a merge patch would otherwise keep them)."""
    out: dict[str, Any] = dict(status)
    for key, value in status.items():
        old = (before or {}).get(key)
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            out[key] = {**_nulling_gone_keys(value, old), **{k: None for k in old if k not in value}}
    return out


class PolicyBook:
    """The AdvisorPolicies the controller knows, and what it last wrote into their statuses."""

    def __init__(self, api: Any, metrics: Metrics, *, recommend_only: bool = False) -> None:
        self.api = api
        self.metrics = metrics
        #: the cluster-wide safety rail (``run --recommend-only``): every policy evaluated as Recommend
        self.recommend_only = recommend_only
        self.policies: dict[str, Any] = {}
        self.errors: dict[str, str] = {}
        self.hours: dict[str, float] = {}  # GPU-hours flagged non-learning, per policy
        self.deleted: dict[str, PolicyFigures] = {}  # action counts of jobs deleted, per policy
        self.written: dict[str, dict[str, Any]] = {}  # figures last written, per policy
        #: the status as the API server last showed it, per policy: what a merge patch must null
        #: out of its maps (a key a merge patch leaves out stays: a tie no longer lost, an outcome
        #: count that went to zero)
        self.stored: dict[str, Mapping[str, Any]] = {}
        #: each policy's last valid version and its generation (what an invalid edit leaves in force)
        self.last_valid: dict[str, tuple[Any, int | None]] = {}
        #: per invalid policy, what stands in for it (``_stand_in``), said in its condition
        self.holding: dict[str, str] = {}
        #: per policy, the request ids its ``status.recentActions`` carries (as last seen, plus what
        #: this process wrote since), or that it no longer needs (older than the newest
        #: ``maxActionsPerHour`` written)
        self.recorded: dict[str, set[str]] = {}

    def governing(self) -> list[Any]:
        """The valid policies, by name; under ``recommend_only`` (the cluster-wide safety rail) each
        as if its mode were Recommend, whatever it says."""
        policies = sorted(self.policies.values(), key=lambda p: p.name)
        if not self.recommend_only:
            return policies
        return [
            dataclasses.replace(p, spec=dataclasses.replace(p.spec, mode=Mode.RECOMMEND)) for p in policies
        ]

    def on_event(self, event_type: str, body: Mapping[str, Any]) -> None:
        from policies import PolicyError, load_policy

        name = str((body.get("metadata") or {}).get("name"))
        self.policies.pop(name, None)
        known_error = self.errors.pop(name, None)
        self.holding.pop(name, None)
        if event_type == "DELETED":
            self.last_valid.pop(name, None)
            self.hours.pop(name, None)
            self.deleted.pop(name, None)
            self.written.pop(name, None)
            self.stored.pop(name, None)
            self.recorded.pop(name, None)
            return
        stored_status = body.get("status")
        self.stored[name] = stored_status if isinstance(stored_status, Mapping) else {}
        self.recorded[name] = {rid for rid, _ in self.stored_actions(body)}
        if name not in self.deleted:  # carried over a controller restart, as the hours
            self.deleted[name] = PolicyFigures.from_counts((body.get("status") or {}).get("fromDeletedJobs"))
        if name not in self.hours:  # carry the total over a controller restart
            stored = (body.get("status") or {}).get("gpuHoursFlaggedNonLearning")
            valid = isinstance(stored, int | float) and not isinstance(stored, bool) and stored > 0
            self.hours[name] = float(stored) if valid and stored is not None else 0.0
        generation = (body.get("metadata") or {}).get("generation")
        try:
            self.policies[name] = load_policy({k: v for k, v in body.items() if k != "status"})
            self.last_valid[name] = (self.policies[name], generation if isinstance(generation, int) else None)
        except PolicyError as exc:
            self.errors[name] = str(exc).replace("\n", "; ")
            self._stand_in(name, body, warn=self.errors[name] != known_error)
        self._write_verdict(name, body)

    def _stand_in(self, name: str, body: Mapping[str, Any], *, warn: bool = True) -> None:
        """What governs an invalid policy's jobs: its last valid version, while this process has
        seen one; else (a restart) a holding version, its selector and priority without rules in
        Recommend, so that its jobs are not handed to a broader policy that would act on them at
        once (an edit typo must not turn a Recommend policy's jobs over to an Apply one)."""
        from policies import PolicyError, load_policy

        if name in self.last_valid:
            previous, generation = self.last_valid[name]
            self.policies[name] = previous
            self.holding[name] = (
                f"generation {generation}, the last valid one, stays in force"
                if generation is not None
                else "its last valid version stays in force"
            )
        else:
            spec = dict(body.get("spec") or {}) if isinstance(body.get("spec"), Mapping) else {}
            spec.update(mode="Recommend", rules={})
            try:
                self.policies[name] = load_policy(
                    {k: v for k, v in body.items() if k not in ("status", "spec")} | {"spec": spec}
                )
                self.holding[name] = "its jobs are held: no rule acts on them and no other policy takes them"
            except PolicyError:
                self.holding[name] = "its selector is invalid too: it holds no job"
        if warn:  # once per new error, not at each status-only event of the same spec
            log.warning("AdvisorPolicy %s is invalid (%s); %s", name, self.errors[name], self.holding[name])

    @staticmethod
    def stored_actions(body: Mapping[str, Any]) -> list[tuple[str, float]]:
        """``status.recentActions`` of an AdvisorPolicy as (request id, time); malformed entries skipped."""
        raw = (body.get("status") or {}).get("recentActions")
        out: list[tuple[str, float]] = []
        for item in raw if isinstance(raw, list) else []:
            if not isinstance(item, Mapping):
                continue
            rid, t = item.get("requestId"), item.get("time")
            if isinstance(rid, str) and isinstance(t, int | float) and not isinstance(t, bool):
                out.append((rid, float(t)))
        return out

    def _newest(self, name: str, actions: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
        """The newest ``maxActionsPerHour`` of ``actions``, oldest first: enough to enforce the cap
        (it holds while any ``maxActionsPerHour`` of them are in the hour)."""
        policy = self.policies.get(name)
        cap = policy.safety.max_actions_per_hour if policy is not None else None
        kept = sorted(actions, key=lambda a: a[1])
        return kept[-cap:] if cap is not None else kept

    def persist_actions(self, name: str, actions: Iterable[tuple[str, float]]) -> None:
        """Write the policy's recent capped actions (the newest ``maxActionsPerHour`` are enough to
        enforce the cap). Raises when the write fails: the action must then not run. The list
        replaces the stored one, so ``actions`` must hold what the status showed (the engine adopts
        it at each event of the policy)."""
        actions = list(actions)
        kept = self._newest(name, actions)
        self.api.patch_policy_status(
            name, {"recentActions": [{"requestId": rid, "time": round(t, 3)} for rid, t in kept]}
        )
        self.metrics.api_writes.labels("advisorpolicy-status").inc()
        self.recorded.setdefault(name, set()).update(rid for rid, _ in actions)

    def record_actions(self, name: str, actions: Iterable[tuple[str, float]]) -> bool:
        """Make the policy's ``status.recentActions`` carry the newest ``maxActionsPerHour`` of
        ``actions`` (its recent capped actions as the engine knows them), writing them only when
        it lacks one (a request id is never listed twice). Returns whether it wrote; raises as
        ``persist_actions``."""
        actions = list(actions)
        known = self.recorded.get(name, set())
        if all(rid in known for rid, _ in self._newest(name, actions)):
            return False
        self.persist_actions(name, actions)
        return True

    def job_deleted(self, actions: Iterable[ActionRecord]) -> None:
        """A job went, and its action log with its TrainJobForecast: keep its counts."""
        for rec in actions:
            if rec.policy:
                self.deleted.setdefault(rec.policy, PolicyFigures()).add((rec,))

    def add_hours(self, policy: str, hours: float) -> None:
        self.hours[policy] = self.hours.get(policy, 0.0) + hours

    def effective_mode(self, name: str) -> str | None:
        """The mode the policy is evaluated in (None: nothing of it governs, an invalid policy
        with no stand-in)."""
        policy = self.policies.get(name)
        if policy is None:
            return None
        return Mode.RECOMMEND.value if self.recommend_only else str(policy.mode.value)

    def _conditions(self, name: str) -> list[dict[str, Any]]:
        """``Valid``: whether the loader accepts the policy (and what governs its jobs if not);
        ``RecommendOnly``: whether the controller holds every policy to Recommend."""
        error = self.errors.get(name)
        valid = {
            "type": "Valid",
            "status": "False" if error else "True",
            "reason": "Invalid" if error else "Valid",
            "message": (f"{error}; {self.holding[name]}" if name in self.holding else error)
            if error
            else "the policy is valid" + _warnings(self.policies.get(name)),
        }
        policy = self.policies.get(name)
        if self.recommend_only:
            held = (
                f"; its spec.mode {policy.mode.value} takes effect once the controller runs without it"
                if policy is not None and policy.mode is not Mode.RECOMMEND
                else ""
            )
            recommend_only = {
                "type": "RecommendOnly",
                "status": "True",
                "reason": "ControllerRecommendOnly",
                "message": "the controller runs with --recommend-only: the policy is evaluated as Recommend "
                f"and changes no job{held}",
            }
        else:
            recommend_only = {
                "type": "RecommendOnly",
                "status": "False",
                "reason": "SpecMode",
                "message": "the controller evaluates the policy in its spec.mode",
            }
        return [valid, recommend_only]

    def _write_verdict(self, name: str, body: Mapping[str, Any]) -> None:
        """The conditions and ``effectiveMode``, written when they differ from the stored status."""
        conditions = self._conditions(name)
        generation = (body.get("metadata") or {}).get("generation")
        observed = generation if isinstance(generation, int) and not isinstance(generation, bool) else None
        if observed is not None:
            for cond in conditions:
                cond["observedGeneration"] = observed
        mode = self.effective_mode(name)
        stored = body.get("status") or {}
        old = {c.get("type"): c for c in stored.get("conditions") or [] if isinstance(c, Mapping)}
        # a spec change that leaves the verdict alone must still say which generation was read
        if (
            all(
                c["type"] in old and all(old[c["type"]].get(k) == v for k, v in c.items()) for c in conditions
            )
            and stored.get("observedGeneration") == observed
            and stored.get("effectiveMode") == mode
        ):
            return
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for cond in conditions:
            before = old.get(cond["type"]) or {}
            same_verdict = before.get("status") == cond["status"] and before.get("lastTransitionTime")
            cond["lastTransitionTime"] = before["lastTransitionTime"] if same_verdict else now
        status = {
            "conditions": conditions,
            "effectiveMode": mode,  # None nulls it out: nothing of the policy governs
            **({"observedGeneration": observed} if observed is not None else {}),
        }
        self._patch(name, status)

    def write_figures(self, jobs: Iterable[JobFigures]) -> None:
        """``jobs`` as for ``policy_figures``; writes each policy's figures when they changed."""
        names = sorted({*self.policies, *self.errors})
        if not names:
            return
        for name, figures in policy_figures(names, jobs, self.hours, self.deleted).items():
            gone = self.deleted.get(name)
            status = {**figures.status(), "fromDeletedJobs": (gone or PolicyFigures()).counts()}
            before = self.written.get(name)
            patch = _nulling_gone_keys(status, before or self.stored.get(name))
            if before != status and self._patch(name, patch):
                self.written[name] = status

    def _patch(self, name: str, status: Mapping[str, Any]) -> bool:
        try:
            self.api.patch_policy_status(name, status)
        except Exception as exc:
            log.warning("AdvisorPolicy %s status not written: %s", name, exc)
            return False
        self.metrics.api_writes.labels("advisorpolicy-status").inc()
        return True


def _warnings(policy: Any) -> str:
    """What ``policy validate`` warns of, for whoever applied the policy with kubectl: a rule's
    metric whose name says no direction is never judged; a ``metricDirections`` entry that is
    ignored or turns a metric against its name."""
    if policy is None:
        return ""
    found = [f"{field}: {metric} is never judged" for field, metric in undirected_metrics(policy)]
    text = f"; warning: {'; '.join(found)} ({NO_DIRECTION})" if found else ""
    return text + "".join(f"; warning: {field}: {why}" for field, why in direction_warnings(policy))
