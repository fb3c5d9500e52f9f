"""Preemption guard: checkpoint a likely next victim before Kueue evicts it without notice.

``predict_victims`` replays Kueue's victim choice on the ClusterView. A job whose Workload is
predicted to be evicted for a pending workload and whose last checkpoint is older than
``staleAfter`` gets "boost priority + checkpoint now" (the boost only where Kueue's PriorityBoost
gate is on); the boost is dropped once the checkpoint is acknowledged, or after ``dropAfter``.

Kueue usually preempts in the very scheduling cycle a higher-priority workload arrives in, so a
pending preemptor is rarely seen in advance. Hence the second, weaker signal: the workload first
in Kueue's victim order on a queue seen evicting at a high rate (``likelyVictims``; the rate as
the checkpoint rule estimates it, shrunk toward its ``defaultHazardPerHour``) keeps its
checkpoint fresh, without a boost (a boost with nothing pending would only push the next
workload to the front). "Fresh" there is the Young/Daly interval for the hazard that workload
faces (the queue's eviction rate times the workloads it stands in front of), at least
``staleAfter``.

``standingBoost`` (> 0) turns the boost into a standing one, the use Kueue's priority-boost was
designed for: on a preemptible queue every running workload whose checkpoint is older than
``staleAfter`` carries the boost, and drops it once its checkpoint is acknowledged. Kueue orders
victims by effective priority (priority + boost) before admission time, so among equals it picks a
workload that has just checkpointed, whatever arrives and whenever: no notice is needed. The boost
stays below the gap to the next higher priority in the cohort, so it never changes *whether* a
higher-priority workload may preempt, only *which* equal gets picked; on a queue that preempts
equal priorities (``LowerOrNewerEqualPriority``) a boost would exempt rather than reorder, so none
is set there. Without the PriorityBoost gate the rule falls back to the behaviour above. While the
checkpoint is fresh the decision asks for a look (``recheck_at``) the moment it turns stale, so the
boost is set on time; the adapter drops it when Kueue evicts the workload (its requeue waits for
the pods' grace period), since a boosted workload back in the queue would outrank its equals.

Nothing is done for a workload no preemption rule can reach in its present state
(``policies.victims.can_be_preempted``: the top of the priorities in use, its queue not borrowing):
checkpoints there only cost.
"""

from __future__ import annotations

import math

from advisor.model import ActionKind, ClusterView, JobView, WorkloadView
from policies.cleanup import BOOSTS as _BOOSTS
from policies.cleanup import own_boost
from policies.index import cluster_index
from policies.rules.base import Context, Outcome, dur, last_record, unsaved_since
from policies.rules.checkpoint import blocking_cost, queue_rate
from policies.savewindow import miss_probability
from policies.spec import PreemptionGuardRule
from policies.victims import can_be_preempted, first_in_line, predict_victims
from policies.youngdaly import checkpoint_interval

NAME = "preemption-guard"


def workload_of(ctx: Context) -> WorkloadView | None:
    return cluster_index(ctx.cluster).by_job.get(ctx.job.key)


def _preemptible(cluster: ClusterView, cq_name: str) -> bool:
    """Whether anything in the cluster's preemption settings can evict a workload of ``cq_name``."""
    cq = cluster.cluster_queues.get(cq_name)
    if cq is None:
        return False
    if cq.within_cluster_queue != "Never":
        return True
    if cq.cohort is None:
        return False
    return any(
        q.cohort == cq.cohort and q.name != cq.name and q.reclaim_within_cohort != "Never"
        for q in cluster.cluster_queues.values()
    )


def _hazard(ctx: Context, cq_name: str, *, observed: bool = False) -> float:
    """The queue's hazard per admitted second: the checkpoint rule's estimate
    (``policies.rules.checkpoint.queue_rate``, shrunk toward the policy's ``defaultHazardPerHour``,
    so that one eviction soon after an admission is not read as dozens per workload-hour). With
    ``observed``, 0 on a queue never seen evicting: a queue "that evicts often" must have been
    seen evicting, the prior alone never makes one."""
    if observed and not _seen_evicting(ctx.cluster, cq_name):
        return 0.0
    return queue_rate(ctx.cluster, cq_name, ctx.policy.rules.checkpoint)


def _seen_evicting(cluster: ClusterView, cq_name: str) -> bool:
    found = cluster.hazard_evidence.get(cq_name)
    if found is not None:
        return found[0] > 0
    return cluster.preemption_rate.get(cq_name, 0.0) > 0.0  # an adapter that gives only a rate


def _unsaved(ctx: Context, age: float | None) -> str:
    """What an eviction would lose now, in words. ``age`` counts from ``unsaved_since``, the later
    of the last checkpoint and the current admission: it is a checkpoint's age only when the job
    has one and has not been admitted again since (a job with none said "last checkpoint 1m18s
    old": the time since its admission)."""
    last = ctx.job.checkpoint.last_time
    if age is None:
        return "no checkpoint yet"
    if last is None:
        return f"no checkpoint yet, {dur(age)} of work unsaved"
    if ctx.now - last > age:
        old = dur(ctx.now - last)
        return f"{dur(age)} of work unsaved since it resumed from its last checkpoint ({old} old)"
    return f"last checkpoint {dur(age)} old"


def standing_boost(ctx: Context, rule: PreemptionGuardRule, w: WorkloadView) -> int:
    """The standing boost ``w`` may carry now (0: none; the rule then behaves as without it).

    Zero without the PriorityBoost gate, on a queue nothing can preempt, on a queue whose eviction
    rate (observed, else the checkpoint rule's default) is below ``likelyHazardPerHour``, and on a
    queue that preempts equal priorities. Otherwise ``standingBoost`` capped one below the gap to
    the next higher base priority among the cohort's workloads: a boost reaching a preemptor's
    priority would make the workload ineligible for ``LowerPriority`` preemption (Kueue compares
    effective priorities), which is protection, not reordering.
    """
    cluster = ctx.cluster
    if rule.standing_boost <= 0 or not cluster.priority_boost_enabled:
        return 0
    cq = cluster.cluster_queues.get(w.cluster_queue)
    if cq is None or cq.within_cluster_queue == "LowerOrNewerEqualPriority":
        return 0
    if not _preemptible(cluster, cq.name) or not can_be_preempted(cluster, w):
        return 0
    hazard = _hazard(ctx, cq.name)
    if hazard * 3600.0 < rule.likely_hazard_per_hour:
        return 0
    sharing = cluster_index(cluster).sharing.get(cq.name, frozenset({cq.name}))
    gap = min(
        (
            x.priority - w.priority
            for x in cluster.workloads
            if x.cluster_queue in sharing and x.priority > w.priority
        ),
        default=None,
    )
    return rule.standing_boost if gap is None else max(0, min(rule.standing_boost, gap - 1))


def _standing(ctx: Context, rule: PreemptionGuardRule, w: WorkloadView, value: int, out: Outcome) -> None:
    """Set or drop the standing boost so that it is on exactly while the checkpoint is stale.

    Staleness counts from ``unsaved_since``: a workload just (re)admitted restarted from its
    checkpoint and has nothing to lose yet. And it is the work an eviction is expected to lose,
    the checkpoint's age times the chance that the save on SIGTERM misses
    (``policies.savewindow.miss_probability``), that must exceed ``staleAfter``: a workload whose
    saves on SIGTERM are verified loses little whenever it is evicted, so it is the victim a boost
    should steer Kueue to, not one to shield (in the simulator, with 30% of the saves broken, the
    boost on every stale equal shielded the verified savers as much as the broken ones). The
    intent is read from the action log (the last boost or drop requested), not from the view, so
    that a write on its way is not repeated. A workload that is not admitted never keeps a boost:
    in the queue it would jump ahead of its equals.
    """
    job, now = ctx.job, ctx.now
    ref = unsaved_since(ctx)
    age = None if ref is None else now - ref
    miss = miss_probability(job)
    at_risk = rule.stale_after / miss if miss > 0.0 else math.inf
    stale = age is None or age > at_risk
    want = value if (stale and w.admitted and job.admitted) else 0
    if ref is not None and not stale and w.admitted and math.isfinite(at_risk):
        out.recheck(ref + at_risk)  # the boost falls due the moment the checkpoint turns stale
    last = last_record(job, _BOOSTS)
    boosted = last.kind is ActionKind.BOOST_PRIORITY if last is not None else w.priority_boost > 0
    if want > 0 and (not boosted or w.priority_boost not in (0, want)):
        if age is None:
            why = _unsaved(ctx, age)
        elif miss < 1.0:
            why = (
                f"{_unsaved(ctx, age)}, a save on SIGTERM missing with p={miss:.2f}: "
                f"{dur(miss * age)} of work expected lost > {dur(rule.stale_after)}"
            )
        else:
            why = f"{_unsaved(ctx, age)} > {dur(rule.stale_after)}"
        kind = ActionKind.BOOST_PRIORITY
        reason = (
            f"set a standing priority boost of {want} on a preemptible queue ({why}), so that Kueue "
            "picks a freshly checkpointed equal first"
        )
    elif want == 0 and boosted:
        why = "checkpoint fresh" if w.admitted and not stale else "not admitted"
        kind, reason = ActionKind.DROP_BOOST, f"drop standing priority boost: {why}"
    else:
        return
    if ctx.apply:
        out.act(
            kind,
            NAME,
            reason,
            boost=want,
            workload=f"{w.namespace}/{w.name}",
            standing=True,
            predicted_victim=False,
        )
    else:
        out.act(ActionKind.RECOMMEND, NAME, f"would {reason}", would=kind.value, boost=want, standing=True)


def boost_to_drop(job: JobView, w: WorkloadView, now: float, *, drop_after: float) -> str | None:
    """Why the guard's (non-standing) boost on ``w`` must go now, or None while it still shields
    a save in progress.

    The boost exists to let a likely victim finish a checkpoint before Kueue picks it; so it goes
    once a checkpoint newer than the boost is acknowledged, after ``drop_after`` without one, and
    as soon as the workload is no longer admitted (evicted anyway: back in the queue, a boosted
    workload would outrank, and could preempt, its equals). One decision for every adapter: the
    controller and the simulator both only carry it out.
    """
    last = last_record(job, _BOOSTS)
    boosted_at = last.time if last is not None and last.kind is ActionKind.BOOST_PRIORITY else None
    cp = job.checkpoint
    if boosted_at is None:
        return "no boost record"
    if cp.last_time is not None and cp.last_time >= boosted_at:
        return "checkpoint acknowledged"
    if not (w.admitted and job.admitted):
        return "workload evicted"
    if now - boosted_at >= drop_after:
        return f"no acknowledgement after {dur(now - boosted_at)}"
    return None


def _foreign_boost(ctx: Context, w: WorkloadView) -> int | None:
    """The boost on ``w`` when another writer set it (or changed the advisor's since), else None:
    the advisor neither drops nor overwrites it, and adds none of its own on top (an admin who
    boosted a workload by hand meant it). A drop of the advisor's own still on its way is its own."""
    if w.priority_boost <= 0:
        return None
    last = last_record(ctx.job, _BOOSTS)
    if last is not None and last.kind is ActionKind.DROP_BOOST and last.outcome == "requested":
        return None
    if last is not None and last.kind is ActionKind.BOOST_PRIORITY and last.outcome == "requested":
        return None  # its own write, not seen on the Workload yet
    return None if own_boost(ctx.job, ctx.cluster) is not None else w.priority_boost


def evaluate(ctx: Context, rule: PreemptionGuardRule) -> Outcome:
    out = Outcome()
    job, now = ctx.job, ctx.now
    w = workload_of(ctx)
    if w is None or not job.active:
        return out
    foreign = _foreign_boost(ctx, w)
    if foreign is not None:
        out.reasons.append(
            f"{NAME}: its Workload carries a priority boost of {foreign} the advisor did not set: left "
            "alone, and no boost of its own on top"
        )
        if not (job.admitted and w.admitted):
            return out
        return _guard(ctx, rule, w, out, boost_allowed=False)
    standing = standing_boost(ctx, rule, w)
    if standing > 0:
        _standing(ctx, rule, w, standing, out)
        if not (job.admitted and w.admitted):
            return out
        return _guard(ctx, rule, w, out, boost_allowed=False)
    last_boost = last_record(job, _BOOSTS)
    outstanding = last_boost is not None and last_boost.kind is ActionKind.BOOST_PRIORITY
    if w.priority_boost > 0 or outstanding:
        if last_boost is not None and last_boost.kind is ActionKind.DROP_BOOST:
            return out  # the drop is on its way
        why = boost_to_drop(job, w, now, drop_after=rule.drop_after)
        if why is not None:
            if ctx.apply:
                out.act(
                    ActionKind.DROP_BOOST,
                    NAME,
                    f"drop priority boost: {why}",
                    workload=f"{w.namespace}/{w.name}",
                    predicted_victim=False,
                )
            return out
        boosted_at = last_boost.time if last_boost is not None else now
        out.recheck(boosted_at + rule.drop_after)
        out.reasons.append(
            f"{NAME}: boosted, waiting for the checkpoint ({dur(now - boosted_at)} of {dur(rule.drop_after)})"
        )
        return out
    if not (job.admitted and w.admitted):
        return out
    return _guard(ctx, rule, w, out, boost_allowed=ctx.cluster.priority_boost_enabled)


def _guard(
    ctx: Context, rule: PreemptionGuardRule, w: WorkloadView, out: Outcome, *, boost_allowed: bool
) -> Outcome:
    """Checkpoint a predicted (or first-in-line) victim whose checkpoint is stale; with
    ``boost_allowed`` a predicted victim of a pending workload is also boosted while it saves."""
    now, cp = ctx.now, ctx.job.checkpoint
    index = cluster_index(ctx.cluster)
    if index.victims is None:
        index.victims = frozenset((v.namespace, v.name) for v in predict_victims(ctx.cluster))
    certain = (w.namespace, w.name) in index.victims
    hazard = _hazard(ctx, w.cluster_queue, observed=True)
    likely = False
    if not certain and rule.likely_victims and hazard * 3600.0 >= rule.likely_hazard_per_hour:
        if index.first is None:
            index.first = frozenset((v.namespace, v.name) for v in first_in_line(ctx.cluster))
        likely = (w.namespace, w.name) in index.first
    if not (certain or likely):
        return out
    if not can_be_preempted(ctx.cluster, w):
        return out
    ref = unsaved_since(ctx)
    age = None if ref is None else now - ref
    stale_after = rule.stale_after
    # the job's measured save cost, else what the policy's checkpoint rule assumes (its
    # ``defaultCost``), as that rule reads it
    cost = blocking_cost(ctx, ctx.policy.rules.checkpoint)
    miss = miss_probability(ctx.job)
    if likely:
        # the queue's evictions land on whoever stands first in line: its own hazard is the
        # queue's rate times the workloads sharing it (times the chance that its save on SIGTERM
        # fails), and Young/Daly turns that into an interval
        sharing = sum(1 for x in ctx.cluster.workloads if x.admitted and x.cluster_queue == w.cluster_queue)
        stale_after = max(stale_after, checkpoint_interval(max(cost, 0.0), hazard * max(sharing, 1) * miss))
    elif miss < 1.0 and age is not None and miss * age <= max(cost, 0.0):
        # a victim that saves on SIGTERM (verified): the work it is expected to lose is less than
        # what a checkpoint now costs, so neither a checkpoint nor a boost pays
        cps = ctx.job.checkpoint
        out.reasons.append(
            f"{NAME}: likely preemption victim, but its saves on SIGTERM worked on "
            f"{cps.sigterm_saves} of {cps.sigterm_saves + cps.sigterm_misses} evictions"
        )
        return out
    if age is not None and age <= stale_after:
        # the bound it is fresh within: the rule's staleAfter, or the Young/Daly interval of the
        # queue's evictions when that is longer (said, or "fresh" read as a mistake)
        out.reasons.append(
            f"{NAME}: likely preemption victim, but {_unsaved(ctx, age)} (fresh: <= {dur(stale_after)})"
        )
        return out
    if cp.pending_request is not None:
        out.reasons.append(f"{NAME}: likely preemption victim; a checkpoint is already requested")
        return out
    stale = _unsaved(ctx, age) if age is None else f"{_unsaved(ctx, age)} > {dur(stale_after)}"
    if certain:
        why = (
            f"likely next preemption victim of a pending workload ({len(index.victims)} predicted in the "
            f"cluster, effective priority {w.priority + w.priority_boost})"
        )
    else:
        why = (
            f"first in Kueue's victim order on queue {w.cluster_queue}, which evicts "
            f"{hazard * 3600.0:.2f}/workload-hour (>= {rule.likely_hazard_per_hour:g})"
        )
    reason = f"{why}; {stale}"
    out.advice, out.severity = "guard:checkpoint", 2
    boost = certain and boost_allowed  # nothing pending: a boost would only reorder
    if not ctx.apply:
        what = "boost priority + checkpoint now" if boost else "checkpoint now"
        out.act(
            ActionKind.RECOMMEND,
            NAME,
            f"would {what}: {reason}",
            would=ActionKind.CHECKPOINT.value,
            boost=rule.boost if boost else 0,
        )
        return out
    if boost:
        out.act(
            ActionKind.BOOST_PRIORITY,
            NAME,
            f"boost priority by {rule.boost} while checkpointing: {reason}",
            boost=rule.boost,
            workload=f"{w.namespace}/{w.name}",
            predicted_victim=True,
        )
    out.act(
        ActionKind.CHECKPOINT,
        NAME,
        "checkpoint now: " + reason,
        timeout_s=rule.drop_after,
        predicted_victim=True,
    )
    return out
