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
  from the status when the controller starts, like the GPU-hours; a job deleted while no
  controller ran is carried over at the next start, once its absence from the initial job listing
  shows (``SavedStatuses.gone``);
* ``recentActions``: the request id and time of the policy's capped (disruptive) actions of the last hour,
  written *before* each such action's mutation, also when a restarted controller resumes an
  action it finds recorded in a TrainJobForecast but not here, so that ``maxActionsPerHour``
  holds across a controller restart (and across the deletion of a job whose log held the action);
  written only when the status lacks one of the newest ``maxActionsPerHour`` actions known;
* ``shards``: the figures above as each controller release wrote them, keyed by its identity
  (``<Lease namespace>/<Lease name>``; ``DEFAULT_SHARD`` for a release run as the defaults have it,
  with or without leader election), each with its ``updatedAt``. AdvisorPolicies are cluster-scoped
  but a namespace shard (a release with its own ``watchNamespaces`` and Lease) sees only its
  namespaces' jobs: each writes its own entry only, and the figures at the top of the status
  (``jobsMatched``, ``matchedJobs``, ``actionsTaken``, ``actionsByKind``, ``actionsByOutcome``,
  ``recommendations``, ``lostTies``, ``gpuHoursFlaggedNonLearning``, ``fromDeletedJobs``) are the
  sums over the entries, recomputed by whichever shard writes (a read-modify-write guarded by the
  ``resourceVersion`` it read, read again and retried on a conflict). A shard refreshes its entry at
  least every ``SHARD_REFRESH_S``; an entry not refreshed for ``SHARD_STALE_S`` (a shard
  uninstalled) is dropped by the next writer. What a restarted controller carries over
  (GPU-hours, ``fromDeletedJobs``) is read from its own entry (from the top of a status written
  before entries existed);
* ``effectiveMode``: the mode the controller evaluates the policy in (printer column ``Effective``
  beside ``Mode``, the spec's): Recommend under ``--recommend-only`` whatever ``spec.mode`` says,
  which the ``RecommendOnly`` condition explains; for an invalid policy, the mode of what stands
  in for it (absent when nothing does). An admin who set Apply sees that nothing will act yet.

``policy_figures`` is pure; ``PolicyBook`` holds the loaded policies for the engine, writes the
``Valid`` and ``RecommendOnly`` conditions and ``effectiveMode`` when a policy changes, and the
figures at the engine's bounded rate, only when they changed.
"""

from __future__ import annotations

import calendar
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from advisor.controller.actuator import HELD_DETAIL
from advisor.controller.metrics import Metrics
from advisor.model import ActionRecord, Mode
from policies.rules.base import NO_DIRECTION, direction_warnings, undirected_metrics

__all__ = [
    "DEFAULT_SHARD",
    "MAX_LISTED_JOBS",
    "SHARD_REFRESH_S",
    "SHARD_STALE_S",
    "JobFigures",
    "PolicyBook",
    "PolicyFigures",
    "policy_figures",
    "shard_totals",
]

log = logging.getLogger(__name__)

#: how many job names ``matchedJobs`` lists (the count is always complete)
MAX_LISTED_JOBS = 100
#: the ``status.shards`` key of a release run with the default Lease (``run --leader-election-id``)
#: in the default namespace, or without leader election: a single release keeps one entry
DEFAULT_SHARD = "trainjob-advisor-system/trainjob-advisor"
#: an entry of ``status.shards`` not refreshed for this long is a shard that is gone: dropped
SHARD_STALE_S = 3600.0
#: a shard rewrites its entry's ``updatedAt`` at least this often, even when its figures are the same
SHARD_REFRESH_S = 600.0
#: tries of a figures write the API server refuses as a conflict (another writer came between)
CONFLICT_ATTEMPTS = 3
#: the figures summed over the shards' entries into the top of the status
_SUMMED = ("jobsMatched", "actionsTaken", "recommendations")
_SUMMED_MAPS = ("actionsByKind", "actionsByOutcome", "lostTies")


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


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _parse_iso(raw: Any) -> float | None:
    """An ``updatedAt`` read back (None: absent or malformed)."""
    if not isinstance(raw, str):
        return None
    try:
        return float(calendar.timegm(time.strptime(raw.strip(), "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def _count(raw: Any) -> int:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else 0


def _amount(raw: Any) -> float:
    return float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) and raw > 0 else 0.0


def _sum_maps(maps: Iterable[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for raw in maps:
        for k, v in raw.items() if isinstance(raw, Mapping) else ():
            if _count(v):
                out[str(k)] = out.get(str(k), 0) + _count(v)
    return dict(sorted(out.items()))


def _items(raw: Any) -> list[Any]:
    return raw if isinstance(raw, list) else []


def _table(raw: Any) -> Mapping[str, Any]:
    return raw if isinstance(raw, Mapping) else {}


def shard_totals(entries: Mapping[str, Any]) -> dict[str, Any]:
    """The top of a policy's status from its ``status.shards`` entries: every figure summed, the
    job names merged (``MAX_LISTED_JOBS`` of them; the count is the sum); malformed values count 0."""
    shards: list[Mapping[str, Any]] = [e for e in entries.values() if isinstance(e, Mapping)]
    jobs = sorted({str(j) for e in shards for j in _items(e.get("matchedJobs"))})
    deleted: list[Mapping[str, Any]] = [_table(e.get("fromDeletedJobs")) for e in shards]
    return {
        **{key: sum(_count(e.get(key)) for e in shards) for key in _SUMMED},
        "matchedJobs": jobs[:MAX_LISTED_JOBS],
        **{key: _sum_maps(e.get(key) for e in shards) for key in _SUMMED_MAPS},
        "gpuHoursFlaggedNonLearning": round(
            sum(_amount(e.get("gpuHoursFlaggedNonLearning")) for e in shards), 3
        ),
        "fromDeletedJobs": {
            "actionsByKind": _sum_maps(d.get("actionsByKind") for d in deleted),
            "actionsByOutcome": _sum_maps(d.get("actionsByOutcome") for d in deleted),
            "recommendations": sum(_count(d.get("recommendations")) for d in deleted),
        },
    }


def _merged(target: Any, patch: Mapping[str, Any]) -> dict[str, Any]:
    """``patch`` applied to ``target`` as a JSON merge patch (RFC 7386) is."""
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping):
            out[key] = _merged(out.get(key), value)
        else:
            out[key] = value
    return out


def _is_conflict(exc: BaseException) -> bool:
    return getattr(exc, "status", None) == 409


class PolicyBook:
    """The AdvisorPolicies the controller knows, and what it last wrote into their statuses."""

    def __init__(
        self,
        api: Any,
        metrics: Metrics,
        *,
        recommend_only: bool = False,
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
            return
        self._adopt(name, body)
        self.recorded[name] = {rid for rid, _ in self.stored_actions(body)}
        own = self._own_entry(self.stored[name])
        if name not in self.deleted:  # carried over a controller restart, as the hours
            self.deleted[name] = PolicyFigures.from_counts(own.get("fromDeletedJobs"))
        if name not in self.hours:  # carry this shard's total over a controller restart
            self.hours[name] = _amount(own.get("gpuHoursFlaggedNonLearning"))
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

    def _adopt(self, name: str, body: Mapping[str, Any]) -> None:
        """The policy as the API server showed it (a watch event, a read, a write's answer)."""
        status = body.get("status")
        self.stored[name] = status if isinstance(status, Mapping) else {}
        version = (body.get("metadata") or {}).get("resourceVersion")
        if version:
            self.versions[name] = str(version)
        else:
            self.versions.pop(name, None)

    def _own_entry(self, status: Mapping[str, Any]) -> Mapping[str, Any]:
        """This shard's entry of ``status.shards``; the top of a status that has no entries (written
        by a controller from before them, which was the only writer)."""
        shards = status.get("shards")
        if not isinstance(shards, Mapping):
            return status
        own = shards.get(self.shard)
        return own if isinstance(own, Mapping) else {}

    def figures_patch(self, name: str, mine: Mapping[str, Any], now: float) -> dict[str, Any] | None:
        """The merge patch that puts ``mine`` (this shard's figures) into the policy's status as
        last seen: this shard's entry, the entries gone stale dropped, the totals recomputed over
        the entries. None when the status says all that already (and the entry is fresh)."""
        stored = self.stored.get(name) or {}
        raw = stored.get("shards")
        entries = dict(raw) if isinstance(raw, Mapping) else {}
        own = entries.pop(self.shard, None)
        stale = [
            key
            for key, entry in entries.items()
            if not isinstance(entry, Mapping)
            or (_parse_iso(entry.get("updatedAt")) or -1.0) < now - SHARD_STALE_S
        ]
        for key in stale:
            del entries[key]
        own = own if isinstance(own, Mapping) else None
        own_time = _parse_iso(own.get("updatedAt")) if own is not None else None
        fresh = own is not None and own_time is not None and own_time >= now - SHARD_REFRESH_S
        same = own is not None and {k: v for k, v in own.items() if k != "updatedAt"} == dict(mine)
        entry = {**mine, "updatedAt": own.get("updatedAt") if fresh and same and own else _iso(now)}
        totals = shard_totals({**entries, self.shard: entry})
        if fresh and same and not stale and all(stored.get(k) == v for k, v in totals.items()):
            return None
        shards: dict[str, Any] = {key: None for key in stale}
        shards[self.shard] = _nulling_gone_keys(entry, own) if own is not None else entry
        return {**_nulling_gone_keys(totals, stored), "shards": shards}

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
        tries again."""
        for attempt in range(CONFLICT_ATTEMPTS):
            patch = self.figures_patch(name, mine, now)
            if patch is None:
                return
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
            if quiet:
                raise
            log.warning("AdvisorPolicy %s status not written: %s", name, exc)
            return False
        self.metrics.api_writes.labels("advisorpolicy-status").inc()
        if isinstance(answer, Mapping) and isinstance(answer.get("metadata"), Mapping):
            self._adopt(name, answer)
        elif name in self.stored:
            self.stored[name] = _merged(self.stored[name], status)
            self.versions.pop(name, None)  # the write made a new one, not known yet
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
