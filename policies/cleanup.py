"""Undoing the advisor's own writes once their mandate ends: the priority boost it set. Pure.

Why: the preemption guard sets Kueue's ``kueue.x-k8s.io/priority-boost`` annotation on a Workload
while a policy in Apply mode governs the running job, and only that rule, in Apply mode, ever
dropped it. Once the mandate ended (the policy switched to Recommend, deleted or no longer
selecting the job, its guard turned off, the job exempted, or the job no longer running: finished,
failed, suspended, evicted) nobody was left to drop it, and with Kueue's PriorityBoost gate the
boost kept reordering preemption victims with no owner.

Only a boost the advisor can tell is its own is removed: the last boost write in the job's action
log that took effect is a set (not a drop), and the annotation still holds the value that set
wrote. A boost another writer set, or changed since, is not the advisor's to remove.

Removing it is cleanup of the advisor's own write, not an action on the job: it never harms a job
more than leaving it (the boost only shielded the job at its equals' expense, on a mandate that is
gone), so it goes in ``Decision.cleanup``, which adapters carry out whatever the mode, also under
the controller's ``--recommend-only`` and on a job that no longer runs. A failed removal is tried
again on the backoff of any failed action (``policies.retries``).
"""

from __future__ import annotations

from advisor.model import Action, ActionKind, ActionRecord, ClusterView, JobView
from policies.index import cluster_index
from policies.retries import hold_for

__all__ = ["BOOSTS", "BOOST_RULE", "boost_cleanup", "own_boost"]

#: the rule whose write is undone (the only one that sets a boost)
BOOST_RULE = "preemption-guard"
#: the action kinds that write the boost annotation
BOOSTS = frozenset({ActionKind.BOOST_PRIORITY, ActionKind.DROP_BOOST})
#: outcomes of boost records that wrote nothing to the Workload
_NOT_WRITTEN = frozenset({"failed", "impossible", "recommended"})


def _last_write(job: JobView) -> ActionRecord | None:
    """The job's latest boost or drop that took effect (or may have: one still ``requested``)."""
    best: ActionRecord | None = None
    for rec in job.actions:
        if rec.kind in BOOSTS and rec.outcome not in _NOT_WRITTEN and (best is None or rec.time >= best.time):
            best = rec
    return best


def own_boost(job: JobView, cluster: ClusterView) -> int | None:
    """The boost on the job's Workload when the advisor set it and it still holds the value the
    advisor wrote, else None (no boost, not the advisor's, or changed by another writer since)."""
    value = job.workload_boost
    if value is None:
        w = cluster_index(cluster).by_job.get(job.key)
        value = w.priority_boost if w is not None else 0
    if value <= 0:
        return None
    last = _last_write(job)
    if last is None or last.kind is not ActionKind.BOOST_PRIORITY:
        return None
    if last.boost is not None and last.boost != value:
        return None  # another writer changed it since: theirs now
    return value


def boost_cleanup(job: JobView, cluster: ClusterView, now: float, *, why: str) -> Action | None:
    """The removal of the advisor's own boost on ``job``'s Workload, whose mandate ended ``why``;
    None when there is none to remove, or when a failed removal waits out its backoff."""
    value = own_boost(job, cluster)
    if value is None or hold_for(job, ActionKind.DROP_BOOST, now) is not None:
        return None
    params: dict[str, object] = {"predicted_victim": False, "cleanup": True}
    w = cluster_index(cluster).by_job.get(job.key)
    if w is not None:
        params["workload"] = f"{w.namespace}/{w.name}"
    return Action(
        ActionKind.DROP_BOOST,
        BOOST_RULE,
        f"drop the advisor's priority boost {value}: {why}",
        params,
    )
