"""What each AdvisorPolicy is doing, for its status: jobs matched, actions taken, GPU-hours flagged.

Admins read a policy's effect from ``kubectl get advisorpolicies`` (printer columns ``Jobs`` and
``Actions``) before switching it from Recommend to Apply. The figures are derived from state the
controller already persists, so that a restart does not reset them:

* ``jobsMatched`` / ``matchedJobs``: jobs whose latest decision came from the policy;
* ``jobsSelected``: jobs its selector matches, whichever policy governs them (at least
  ``jobsMatched``): 0 is a policy that reaches no job, which its ``JobsSelected`` condition
  explains (``advisor.controller.policyreach``);
* ``actionsTaken`` / ``actionsByKind`` / ``actionsByOutcome``: actions the policy carried out or
  attempted (any outcome but ``recommended``) in the action logs of the jobs the controller follows
  (each job's log is persisted in its TrainJobForecast), split by kind and by outcome (``done``,
  ``acknowledged``, ``failed``, ``impossible``, ...: an admin tells attempts from effects), and
  ``actionsFailed`` those failed or impossible (printer column ``Failed``: a 403 from an install
  without the act role read as ``Actions`` alone);
  ``recommendations`` counts the Recommend-mode ones; ``actionsHeld`` an Apply policy's actions its
  cooldown or hourly cap held back (neither taken nor recommended: counted in ``actionsByOutcome``
  as ``held`` they made its outcomes add up to more than ``actionsTaken``);
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
* ``recentActions``: the request id and time (``time``, Unix seconds, read back; ``at``, RFC 3339,
  for people) of the policy's capped (disruptive) actions of the last hour,
  written *before* each such action's mutation, also when a restarted controller resumes an
  action it finds recorded in a TrainJobForecast but not here, so that ``maxActionsPerHour``
  holds across a controller restart (and across the deletion of a job whose log held the action);
  written only when the status lacks one of the newest ``maxActionsPerHour`` actions known;
* ``shards``: the figures above as each controller release wrote them, keyed by its identity
  (``<Lease namespace>/<Lease name>``; ``DEFAULT_SHARD`` for a release run as the defaults have it,
  with or without leader election; without it a namespace-scoped controller's key also names its
  namespaces, ``advisor.commands.run.status_shard``), each with its ``updatedAt``. AdvisorPolicies
  are cluster-scoped but a namespace shard (a release with its own ``watchNamespaces`` and Lease)
  sees only its namespaces' jobs: each writes its own entry only, and the figures at the top of the status
  (``jobsMatched``, ``matchedJobs``, ``jobsSelected``, ``actionsTaken``, ``actionsByKind``,
  ``actionsByOutcome``, ``recommendations``, ``lostTies``, ``gpuHoursFlaggedNonLearning``,
  ``fromDeletedJobs``) are the sums over the entries, recomputed by whichever shard writes (a
  read-modify-write guarded by the ``resourceVersion`` it read, read again and retried on a
  conflict). A shard refreshes its entry at least every ``SHARD_REFRESH_S``; an entry not
  refreshed for ``SHARD_STALE_S`` (a shard uninstalled) is dropped by the next writer. What a
  restarted controller carries over (GPU-hours, ``fromDeletedJobs``) is read from its own entry
  (from the top of a status written before entries existed);
* ``effectiveMode``: the mode the controller evaluates the policy in (printer column ``Effective``
  beside ``Mode``, the spec's): Recommend under ``--recommend-only`` whatever ``spec.mode`` says,
  which the ``RecommendOnly`` condition explains; for an invalid policy, the mode of what stands
  in for it (absent when nothing does). An admin who set Apply sees that nothing will act yet.

This module is the arithmetic of those figures, pure: each policy's figures from the jobs
followed (``policy_figures``), the totals over the shards' entries (``shard_totals``) and the
merge patch that puts one shard's entry into a status (``shard_patch``).
``advisor.controller.policybook.PolicyBook`` holds the loaded policies for the engine and writes
their statuses.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from advisor.model import HELD_DETAIL, ActionRecord

__all__ = [
    "DEFAULT_SHARD",
    "MAX_LISTED_JOBS",
    "SHARD_REFRESH_S",
    "SHARD_STALE_S",
    "JobFigures",
    "PolicyFigures",
    "count_of",
    "own_entry",
    "policy_figures",
    "positive_amount",
    "shard_patch",
    "shard_totals",
]

#: how many job names ``matchedJobs`` lists (the count is always complete)
MAX_LISTED_JOBS = 100
#: the ``status.shards`` key of a release run with the default Lease (``run --leader-election-id``)
#: in the default namespace, or without leader election: a single release keeps one entry
DEFAULT_SHARD = "trainjob-advisor-system/trainjob-advisor"
#: an entry of ``status.shards`` not refreshed for this long is a shard that is gone: dropped
SHARD_STALE_S = 3600.0
#: a shard rewrites its entry's ``updatedAt`` at least this often, even when its figures are the same
SHARD_REFRESH_S = 600.0
#: the figures summed over the shards' entries into the top of the status
_SUMMED = ("jobsMatched", "jobsSelected", "actionsTaken", "actionsFailed", "recommendations", "actionsHeld")
#: the outcomes of an attempt that had no effect (counted in ``actionsFailed``)
FAILED_OUTCOMES = ("failed", "impossible")
_SUMMED_MAPS = ("actionsByKind", "actionsByOutcome", "lostTies")


@dataclass
class PolicyFigures:
    jobs: list[str] = field(default_factory=list)
    actions: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)
    recommendations: int = 0
    held: int = 0
    gpu_hours: float = 0.0
    lost_ties: dict[str, int] = field(default_factory=dict)
    selected: int = 0  # jobs its selector matches, whichever policy governs them

    def add(self, records: Iterable[ActionRecord]) -> None:
        """Count ``records`` (the policy's own) as actions or recommendations."""
        for rec in records:
            if rec.outcome == "recommended" and rec.detail == HELD_DETAIL:
                # an Apply policy's action its cooldown or cap held back: neither taken nor a
                # recommendation of what Apply would do
                self.held += 1
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
        self.held += other.held

    def counts(self) -> dict[str, Any]:
        """The action counts alone (what ``fromDeletedJobs`` stores)."""
        return {
            "actionsByKind": dict(sorted(self.actions.items())),
            "actionsByOutcome": dict(sorted(self.outcomes.items())),
            "recommendations": self.recommendations,
            "actionsHeld": self.held,
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
        # "held" among the outcomes: written by a controller from before actionsHeld
        out.held = count_of(data.get("actionsHeld")) + out.outcomes.pop("held", 0)
        out.recommendations = count_of(data.get("recommendations"))
        return out

    def status(self) -> dict[str, Any]:
        jobs = sorted(self.jobs)
        return {
            "jobsMatched": len(jobs),
            "matchedJobs": jobs[:MAX_LISTED_JOBS],
            "jobsSelected": max(self.selected, len(jobs)),
            "actionsTaken": sum(self.actions.values()),
            "actionsFailed": sum(self.outcomes.get(o, 0) for o in FAILED_OUTCOMES),
            "actionsByKind": dict(sorted(self.actions.items())),
            "actionsByOutcome": dict(sorted(self.outcomes.items())),
            "recommendations": self.recommendations,
            "actionsHeld": self.held,
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
    selected: tuple[str, ...] = ()  # the policies that select it (``policies.selection.selecting``)


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
        for name in job.selected:
            if name in out:
                out[name].selected += 1
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


def count_of(raw: Any) -> int:
    """A count read back from a status (0 for anything but a positive integer)."""
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else 0


def positive_amount(raw: Any) -> float:
    """A figure read back that must be a positive number (GPU-hours); 0.0 for anything else."""
    return float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) and raw > 0 else 0.0


def _sum_maps(maps: Iterable[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for raw in maps:
        for k, v in raw.items() if isinstance(raw, Mapping) else ():
            if count_of(v):
                out[str(k)] = out.get(str(k), 0) + count_of(v)
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
        **{key: sum(count_of(e.get(key)) for e in shards) for key in _SUMMED},
        "matchedJobs": jobs[:MAX_LISTED_JOBS],
        **{key: _sum_maps(e.get(key) for e in shards) for key in _SUMMED_MAPS},
        "gpuHoursFlaggedNonLearning": round(
            sum(positive_amount(e.get("gpuHoursFlaggedNonLearning")) for e in shards), 3
        ),
        "fromDeletedJobs": {
            "actionsByKind": _sum_maps(d.get("actionsByKind") for d in deleted),
            "actionsByOutcome": _sum_maps(d.get("actionsByOutcome") for d in deleted),
            "recommendations": sum(count_of(d.get("recommendations")) for d in deleted),
            "actionsHeld": sum(count_of(d.get("actionsHeld")) for d in deleted),
        },
    }


def _shard_scope(key: str) -> tuple[str, frozenset[str] | None]:
    """(the Lease, the namespaces watched; None: every namespace) of a shard key as
    ``advisor.commands.run.status_shard`` writes it: ``ns/lease`` or ``ns/lease[a,b]``."""
    lease, bracket, rest = key.partition("[")
    if not bracket or not rest.endswith("]"):
        return key, None
    return lease, frozenset(n for n in rest[:-1].split(",") if n)


def watched_namespaces(keys: Iterable[str]) -> frozenset[str] | None:
    """The namespaces the releases whose shard ``keys`` these are watch between them; None when
    one of them watches every namespace (or none is known). An entry of a release no longer
    running counts too: a namespace is said unwatched only when no entry names it."""
    out: set[str] = set()
    seen = False
    for key in keys:
        _, scope = _shard_scope(key)
        if scope is None:
            return None
        out |= scope
        seen = True
    return frozenset(out) if seen else None


def superseded(shard: str, keys: Iterable[str]) -> list[str]:
    """The entries among ``keys`` that ``shard`` replaces: the same Lease, watching namespaces that
    overlap its own. They count the same jobs: a controller restarted with one more namespace wrote
    a second entry beside its first, and the policy's figures summed both for an hour (a platform
    trial read 24 jobs and 12 actions of 14 and 7). Disjoint namespace shards are kept."""
    lease, mine = _shard_scope(shard)
    out = []
    for key in keys:
        if key == shard:
            continue
        other_lease, theirs = _shard_scope(key)
        if other_lease == lease and (mine is None or theirs is None or mine & theirs):
            out.append(key)
    return out


def own_entry(status: Mapping[str, Any], shard: str) -> Mapping[str, Any]:
    """Shard ``shard``'s entry of ``status.shards``; the top of a status that has no entries (written
    by a controller from before them, which was the only writer). Without an entry of its own, what
    the entries it supersedes carried over (GPU-hours, ``fromDeletedJobs``), which its first write
    drops: they are its own figures under its former key."""
    shards = status.get("shards")
    if not isinstance(shards, Mapping):
        return status
    own = shards.get(shard)
    if isinstance(own, Mapping):
        return own
    former = [e for k in superseded(shard, shards) if isinstance(e := shards.get(k), Mapping)]
    if not former:
        return {}
    deleted = PolicyFigures()
    for entry in former:
        deleted.merge(PolicyFigures.from_counts(entry.get("fromDeletedJobs")))
    return {
        "gpuHoursFlaggedNonLearning": sum(
            positive_amount(e.get("gpuHoursFlaggedNonLearning")) for e in former
        ),
        "fromDeletedJobs": deleted.counts(),
    }


def shard_patch(
    stored: Mapping[str, Any], shard: str, mine: Mapping[str, Any], now: float
) -> dict[str, Any] | None:
    """The merge patch that puts ``mine`` (shard ``shard``'s figures) into a policy's status as
    last seen (``stored``): that shard's entry, the entries gone stale dropped, the totals
    recomputed over the entries. None when the status says all that already (and the entry is
    fresh)."""
    raw = stored.get("shards")
    entries = dict(raw) if isinstance(raw, Mapping) else {}
    own = entries.pop(shard, None)
    replaced = set(superseded(shard, entries))
    stale = [
        key
        for key, entry in entries.items()
        if key in replaced
        or not isinstance(entry, Mapping)
        or (_parse_iso(entry.get("updatedAt")) or -1.0) < now - SHARD_STALE_S
    ]
    for key in stale:
        del entries[key]
    own = own if isinstance(own, Mapping) else None
    own_time = _parse_iso(own.get("updatedAt")) if own is not None else None
    fresh = own is not None and own_time is not None and own_time >= now - SHARD_REFRESH_S
    same = own is not None and {k: v for k, v in own.items() if k != "updatedAt"} == dict(mine)
    entry = {**mine, "updatedAt": own.get("updatedAt") if fresh and same and own else _iso(now)}
    totals = shard_totals({**entries, shard: entry})
    if fresh and same and not stale and all(stored.get(k) == v for k, v in totals.items()):
        return None
    shards: dict[str, Any] = {key: None for key in stale}
    shards[shard] = _nulling_gone_keys(entry, own) if own is not None else entry
    return {**_nulling_gone_keys(totals, stored), "shards": shards}
