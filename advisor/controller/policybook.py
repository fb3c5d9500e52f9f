"""The AdvisorPolicies the controller knows, and what it writes into their statuses.

``PolicyBook`` holds the loaded policies for the engine (``governing``: what the core evaluates,
each as Recommend under ``--recommend-only``), writes the ``Valid`` and ``RecommendOnly``
conditions (``advisor.controller.policyconditions``) and ``effectiveMode`` when a policy changes,
``status.recentActions`` before each capped action, and the figures
(``advisor.controller.policystatus``, which describes every field) at the
engine's bounded rate, only when they changed: this shard's entry of ``status.shards`` and the
totals, a read-modify-write guarded by the ``resourceVersion`` it read, read again and retried on
a conflict. An invalid policy is held by what stands in for it (``_stand_in``), so that an edit
typo does not hand its jobs to a broader policy. With the figures comes the ``JobsSelected``
condition (``advisor.controller.policyreach``), read off the totals just written: a policy that
selects no job says why, and the log says it once when it starts to (not at every refresh).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from advisor.controller.metrics import Metrics
from advisor.controller.policyconditions import conditions_patch, validity_conditions
from advisor.controller.policyobject import asks_recommend, kept_valid, merged
from advisor.controller.policyreach import JOBS_SELECTED, reach_condition
from advisor.controller.policystatus import (
    DEFAULT_SHARD,
    JobFigures,
    PolicyFigures,
    count_of,
    own_entry,
    policy_figures,
    positive_amount,
    shard_patch,
    watched_namespaces,
)
from advisor.controller.render import iso
from advisor.model import ActionRecord, Decision, Mode
from advisor.protocol import GROUP, VERSION
from policies.rules.release import Abandoned

__all__ = ["CONFLICT_ATTEMPTS", "PolicyBook"]

log = logging.getLogger(__name__)

#: tries of a figures write the API server refuses as a conflict (another writer came between)
CONFLICT_ATTEMPTS = 3


def _is_conflict(exc: BaseException) -> bool:
    return getattr(exc, "status", None) == 409


def _recent_action(request_id: str, t: float) -> dict[str, Any]:
    """One entry of ``status.recentActions``: ``time`` (Unix seconds) is what a controller reads
    back, ``at`` the same moment in RFC 3339, as ``kubectl describe`` shows every other time (a
    float epoch read ``1.796682402357e+09`` there)."""
    return {"requestId": request_id, "time": round(t, 3), "at": iso(t)}


class PolicyBook:
    """The AdvisorPolicies the controller knows, and what it last wrote into their statuses."""

    def __init__(
        self,
        api: Any,
        metrics: Metrics,
        *,
        recommend_only: bool = False,
        recommend_only_why: tuple[str, str] | None = None,
        shard: str = DEFAULT_SHARD,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.metrics = metrics
        #: this release's key in each policy's ``status.shards``: the only entry it writes
        self.shard = shard
        self.clock = clock
        #: the cluster-wide safety rail (``run --recommend-only``): every policy evaluated as Recommend
        self.recommend_only = recommend_only
        #: why, and what lifts it (``EngineConfig.recommend_only_why``; None: the flag's)
        self.recommend_only_why = recommend_only_why
        self.policies: dict[str, Any] = {}
        self.errors: dict[str, str] = {}
        self.hours: dict[str, float] = {}  # GPU-hours flagged non-learning, per policy
        self.deleted: dict[str, PolicyFigures] = {}  # action counts of jobs deleted, per policy
        #: each policy's ``metadata.resourceVersion`` as last seen: what a figures write is guarded by
        self.versions: dict[str, str] = {}
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
        #: each policy's ``metadata.generation`` as last seen: the ``observedGeneration`` of the
        #: conditions written between its events
        self.generations: dict[str, int] = {}
        #: each policy's ``JobsSelected`` condition as this process last computed it
        self.reach: dict[str, dict[str, Any]] = {}
        #: per policy that selects no job, the message the log last warned of (once, not per refresh)
        self.warned_unselected: dict[str, str] = {}
        #: the namespaces that exist (name -> labels), None while not known (the controller has
        #: not listed them): whether a namespace a policy names exists is said only when known
        self.namespaces: Callable[[], Mapping[str, Mapping[str, str]] | None] = lambda: None

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
            self.versions.pop(name, None)
            self.stored.pop(name, None)
            self.recorded.pop(name, None)
            self.generations.pop(name, None)
            self.reach.pop(name, None)
            self.warned_unselected.pop(name, None)
            return
        self._adopt(name, body)
        self.recorded[name] = {rid for rid, _ in self.stored_actions(body)}
        own = own_entry(self.stored[name], self.shard)
        if name not in self.deleted:  # carried over a controller restart, as the hours
            self.deleted[name] = PolicyFigures.from_counts(own.get("fromDeletedJobs"))
        if name not in self.hours:  # carry this shard's total over a controller restart
            self.hours[name] = positive_amount(own.get("gpuHoursFlaggedNonLearning"))
        generation = (body.get("metadata") or {}).get("generation")
        if isinstance(generation, int) and not isinstance(generation, bool):
            self.generations[name] = generation  # the generation the conditions are of
        else:
            self.generations.pop(name, None)
        try:
            self.policies[name] = load_policy({k: v for k, v in body.items() if k != "status"})
            self.last_valid[name] = (self.policies[name], generation if isinstance(generation, int) else None)
        except PolicyError as exc:
            self.errors[name] = str(exc).replace("\n", "; ")
            self._stand_in(name, body, warn=self.errors[name] != known_error)
        self._write_verdict(name, body)

    def _stand_in(self, name: str, body: Mapping[str, Any], *, warn: bool = True) -> None:
        """What governs an invalid policy's jobs: its last valid version, as this process saw it or
        as ``status.lastValid`` keeps it (written at each new valid generation, so that a restart
        keeps it too: without it a restart found only the invalid selector and handed the jobs to a
        broader policy); else (a policy never seen valid) a holding version, its selector and
        priority without rules in Recommend, so that its jobs are not handed to a broader policy
        that would act on them at once (an edit typo must not turn a Recommend policy's jobs over
        to an Apply one)."""
        from policies import PolicyError, load_policy

        if name not in self.last_valid:
            kept = kept_valid(name, body)
            if kept is not None:
                self.last_valid[name] = kept
        if name in self.last_valid:
            previous, generation = self.last_valid[name]
            held = (
                f"generation {generation}, the last valid one, stays in force"
                if generation is not None
                else "its last valid version stays in force"
            )
            if previous.mode is Mode.APPLY and asks_recommend(body):
                # the edit's mode is the safe direction, honoured whatever else in it is invalid: an
                # admin who flips a policy to Recommend in an incident must not see it go on acting
                # (a trial's edit with a selector typo beside mode Recommend released a job in Apply)
                previous = dataclasses.replace(
                    previous, spec=dataclasses.replace(previous.spec, mode=Mode.RECOMMEND)
                )
                held += " in Recommend mode, as its current spec.mode asks"
            self.policies[name] = previous
            self.holding[name] = held
        else:
            given = body.get("spec")
            raw: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
            # its selector and priority alone: with no rule, nothing else in it decides anything,
            # and an invalid field there (safety, metricDirections) handed its jobs to a broader policy
            spec = {k: raw[k] for k in ("selector", "priority") if k in raw}
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
            self._post_invalid(name, body)

    def _post_invalid(self, name: str, body: Mapping[str, Any]) -> None:
        """A Warning Event on the policy (``kubectl describe advisorpolicy``, ``kubectl get events``)
        besides its ``Valid`` condition and the log: where an admin who applied a typo looks first.
        One per generation, also across a restart (the generation names the Event, so the API
        server refuses a second); best effort, as every Event."""
        meta = body.get("metadata") or {}
        generation = meta.get("generation")
        involved = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "AdvisorPolicy",
            "name": name,  # cluster-scoped: no namespace (its Events go to ``default``)
            "uid": meta.get("uid"),
        }
        try:
            posted = self.api.create_event(
                involved,
                reason="InvalidPolicy",
                message=f"{self.errors[name]}; {self.holding[name]}",
                warning=True,
                dedupe_key=f"invalid/{generation}" if isinstance(generation, int) else None,
            )
        except Exception as exc:  # the condition and the log say it still
            log.warning("event InvalidPolicy on AdvisorPolicy %s not posted: %s", name, exc)
            self.metrics.write_errors.labels("event").inc()
            return
        if posted is not False:
            self.metrics.api_writes.labels("event").inc()

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
        try:
            self.api.patch_policy_status(name, {"recentActions": [_recent_action(rid, t) for rid, t in kept]})
        except Exception:
            self.metrics.write_errors.labels("advisorpolicy-status").inc()
            raise
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

    def said_deleted(self, gone: Abandoned, decision: Decision) -> Abandoned:
        """``gone`` (a release sequence a decision abandoned) saying that its policy was deleted,
        when it was: the pure rule cannot tell a deleted policy from one whose selector moved away
        ("policy q governs the job now, not p" was all an admin who deleted p read)."""
        name = gone.request.policy
        if name == decision.policy or name in self.policies or name in self.errors:
            return gone
        if decision.policy is None:
            return gone._replace(why=f"policy {name} was deleted: no AdvisorPolicy governs the job any more")
        return gone._replace(why=f"policy {name} was deleted; policy {decision.policy} governs the job now")

    def effective_mode(self, name: str) -> str | None:
        """The mode the policy is evaluated in (None: nothing of it governs, an invalid policy
        with no stand-in)."""
        policy = self.policies.get(name)
        if policy is None:
            return None
        return Mode.RECOMMEND.value if self.recommend_only else str(policy.mode.value)

    def _write_verdict(self, name: str, body: Mapping[str, Any]) -> None:
        """The conditions and ``effectiveMode``, written when they differ from the stored status
        (with ``status.lastValid`` at a new valid generation)."""
        generation = (body.get("metadata") or {}).get("generation")
        observed = generation if isinstance(generation, int) and not isinstance(generation, bool) else None
        stored = body.get("status") or {}
        # a spec change that leaves the verdict alone must still say which generation was read
        kept = self._to_keep(name, body, observed)
        status = self._verdict(name, observed, stored if isinstance(stored, Mapping) else {})
        if status is None and kept is None:
            return
        self._patch(name, {**(status or {}), **({"lastValid": kept} if kept is not None else {})})

    def _verdict(self, name: str, observed: int | None, stored: Mapping[str, Any]) -> dict[str, Any] | None:
        """The conditions, ``effectiveMode`` and ``observedGeneration`` of generation ``observed``,
        as a merge patch over the status ``stored`` (None: it says all that already). The
        conditions are one list, which a merge patch replaces whole: ``JobsSelected`` is the one
        this process computed last, else the stored one (it carries its own generation)."""
        old = {c.get("type"): c for c in stored.get("conditions") or [] if isinstance(c, Mapping)}
        conditions = validity_conditions(
            error=self.errors.get(name),
            holding=self.holding.get(name),
            policy=self.policies.get(name),
            recommend_only=self.recommend_only,
            why=self.recommend_only_why,
        )
        return conditions_patch(
            conditions,
            reach=(self.reach.get(name) or old.get(JOBS_SELECTED)) if name in self.policies else None,
            stored=stored,
            observed=observed,
            mode=self.effective_mode(name),
            now=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock())),
        )

    def _reach_verdict(self, name: str, after: Mapping[str, Any]) -> dict[str, Any] | None:
        """The ``JobsSelected`` condition from the totals of ``after`` (the policy's status once
        the figures being written are in), as a merge patch of the conditions over it (None: it
        says that already); a warning in the log when the policy comes to select no job (or for
        another reason), once, not at each refresh."""
        policy = self.policies.get(name)
        if policy is None:  # an invalid policy with nothing standing in for it: Valid says it all
            return None
        entries = after.get("shards")
        shards: list[str] = [str(k) for k in entries] if isinstance(entries, Mapping) else []
        status, reason, message = reach_condition(
            policy.selector,
            selected=count_of(after.get("jobsSelected")),
            governed=count_of(after.get("jobsMatched")),
            namespaces=self.namespaces(),
            lost_ties=after.get("lostTies") if isinstance(after.get("lostTies"), Mapping) else None,
            watched=watched_namespaces({self.shard, *shards}),
        )
        generation = self.generations.get(name)
        self.reach[name] = {
            "type": JOBS_SELECTED,
            "status": status,
            "reason": reason,
            "message": message[:1000],
            **({"observedGeneration": generation} if generation is not None else {}),
        }
        if status == "False" and self.warned_unselected.get(name) != message:
            log.warning("AdvisorPolicy %s %s", name, message)
            self.warned_unselected[name] = message
        elif status == "True" and self.warned_unselected.pop(name, None) is not None:
            log.info("AdvisorPolicy %s %s", name, message)
        return self._verdict(name, generation, after)

    def _to_keep(self, name: str, body: Mapping[str, Any], generation: int | None) -> dict[str, Any] | None:
        """``status.lastValid`` for a valid generation its status does not keep yet (None: nothing
        to write). The spec is kept as one JSON string: a merge patch replaces a string whole, while
        it would merge a new spec into the old one and keep the keys an edit removed."""
        if name in self.errors or generation is None or not isinstance(body.get("spec"), Mapping):
            return None
        stored = (body.get("status") or {}).get("lastValid")
        if isinstance(stored, Mapping) and stored.get("generation") == generation:
            return None
        return {"generation": generation, "spec": json.dumps(body["spec"], sort_keys=True)}

    def _adopt(self, name: str, body: Mapping[str, Any]) -> None:
        """The policy as the API server showed it (a watch event, a read, a write's answer)."""
        status = body.get("status")
        self.stored[name] = status if isinstance(status, Mapping) else {}
        version = (body.get("metadata") or {}).get("resourceVersion")
        if version:
            self.versions[name] = str(version)
        else:
            self.versions.pop(name, None)

    def figures_patch(self, name: str, mine: Mapping[str, Any], now: float) -> dict[str, Any] | None:
        """The merge patch that puts ``mine`` (this shard's figures) into the policy's status as
        last seen (``shard_patch``). None when the status says all that already (and the entry is
        fresh)."""
        return shard_patch(self.stored.get(name) or {}, self.shard, mine, now)

    def write_figures(self, jobs: Iterable[JobFigures], now: float | None = None) -> None:
        """``jobs`` as for ``policy_figures``; writes each policy's figures, as this shard's entry
        and into the totals, when the status does not show them (or the entry is due a refresh)."""
        names = sorted({*self.policies, *self.errors})
        if not names:
            return
        at = self.clock() if now is None else now
        for name, figures in policy_figures(names, jobs, self.hours, self.deleted).items():
            gone = self.deleted.get(name)
            self._write_figures(
                name, {**figures.status(), "fromDeletedJobs": (gone or PolicyFigures()).counts()}, at
            )

    def _write_figures(self, name: str, mine: Mapping[str, Any], now: float) -> None:
        """A read-modify-write of the status seen last, guarded by its ``resourceVersion``: on a
        conflict (another shard, or this one's other writes, came between) the policy is read
        again and the patch made anew, up to ``CONFLICT_ATTEMPTS`` times; else the next refresh
        tries again. The ``JobsSelected`` condition the new totals call for goes in the same
        write (``_reach_verdict``), or alone when the figures are written already."""
        for attempt in range(CONFLICT_ATTEMPTS):
            figures = self.figures_patch(name, mine, now)
            stored = self.stored.get(name) or {}
            verdict = self._reach_verdict(name, merged(stored, figures) if figures is not None else stored)
            if figures is None and verdict is None:
                return
            patch = {**(figures or {}), **(verdict or {})}
            version = self.versions.get(name)
            try:
                self._patch(name, patch, resource_version=version, quiet=True)
                return
            except Exception as exc:
                if not _is_conflict(exc) or attempt + 1 == CONFLICT_ATTEMPTS:
                    log.warning("AdvisorPolicy %s figures not written: %s", name, exc)
                    return
            try:
                body = self.api.get_policy(name)
            except Exception as exc:
                log.warning("AdvisorPolicy %s not read again after a conflict: %s", name, exc)
                return
            if body is None:
                return  # deleted meanwhile: its DELETED event follows
            self._adopt(name, body)

    def _patch(
        self,
        name: str,
        status: Mapping[str, Any],
        *,
        resource_version: str | None = None,
        quiet: bool = False,
    ) -> bool:
        """A merge patch of the status (guarded by ``resource_version`` when given); what the API
        server answers, or else the patch applied to the status seen last, becomes that status.
        A failure is logged and False, or raised when ``quiet``."""
        try:
            if resource_version is not None:
                answer = self.api.patch_policy_status(name, status, resource_version=resource_version)
            else:
                answer = self.api.patch_policy_status(name, status)
        except Exception as exc:
            if getattr(exc, "status", None) != 409:  # a guarded write's conflict is read again, not lost
                self.metrics.write_errors.labels("advisorpolicy-status").inc()
            if quiet:
                raise
            log.warning("AdvisorPolicy %s status not written: %s", name, exc)
            return False
        self.metrics.api_writes.labels("advisorpolicy-status").inc()
        if isinstance(answer, Mapping) and isinstance(answer.get("metadata"), Mapping):
            self._adopt(name, answer)
        elif name in self.stored:
            self.stored[name] = merged(self.stored[name], status)
            self.versions.pop(name, None)  # the write made a new one, not known yet
        return True
