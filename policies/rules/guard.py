"""Preemption guard: checkpoint a likely next victim before Kueue evicts it without notice.

``predict_victims`` replays Kueue's victim choice on the ClusterView. A job whose Workload is
predicted to be evicted for a pending workload and whose last checkpoint is older than
``staleAfter`` gets "boost priority + checkpoint now" (the boost only where Kueue's PriorityBoost
gate is on); the boost is dropped once the checkpoint is acknowledged, or after ``dropAfter``.

Kueue usually preempts in the very scheduling cycle a higher-priority workload arrives in, so a
pending preemptor is rarely seen in advance. Hence the second, weaker signal: the workload first
in Kueue's victim order on a queue whose observed eviction rate is high (``likelyVictims``) keeps
its checkpoint fresh, without a boost (a boost with nothing pending would only push the next
workload to the front). "Fresh" there is the Young/Daly interval for the hazard that workload
faces (the queue's eviction rate times the workloads it stands in front of), at least
``staleAfter``.
"""

from __future__ import annotations

import math

from advisor.model import ActionKind, WorkloadView
from policies.index import cluster_index
from policies.rules.base import Context, Outcome, dur, last_record
from policies.spec import PreemptionGuardRule
from policies.victims import first_in_line, predict_victims
from policies.youngdaly import checkpoint_interval

NAME = "preemption-guard"
_BOOSTS = frozenset({ActionKind.BOOST_PRIORITY, ActionKind.DROP_BOOST})


def workload_of(ctx: Context) -> WorkloadView | None:
    return cluster_index(ctx.cluster).by_job.get(ctx.job.key)


def evaluate(ctx: Context, rule: PreemptionGuardRule) -> Outcome:
    out = Outcome()
    job, now = ctx.job, ctx.now
    w = workload_of(ctx)
    if w is None or not job.active:
        return out
    cp = job.checkpoint
    last_boost = last_record(job, _BOOSTS)
    outstanding = last_boost is not None and last_boost.kind is ActionKind.BOOST_PRIORITY
    if w.priority_boost > 0 or outstanding:
        if last_boost is not None and last_boost.kind is ActionKind.DROP_BOOST:
            return out  # the drop is on its way
        boosted_at = last_boost.time if last_boost is not None else None
        acked = cp.last_time is not None and boosted_at is not None and cp.last_time >= boosted_at
        timed_out = boosted_at is None or now - boosted_at >= rule.drop_after
        if acked or timed_out:
            why = (
                "checkpoint acknowledged"
                if acked
                else "no boost record"
                if boosted_at is None
                else f"no acknowledgement after {dur(now - boosted_at)}"
            )
            if ctx.apply:
                out.act(
                    ActionKind.DROP_BOOST,
                    NAME,
                    f"drop priority boost: {why}",
                    workload=f"{w.namespace}/{w.name}",
                )
            return out
        waited = now - boosted_at if boosted_at is not None else 0.0
        out.reasons.append(
            f"{NAME}: boosted, waiting for the checkpoint ({dur(waited)} of {dur(rule.drop_after)})"
        )
        return out
    if not (job.admitted and w.admitted):
        return out
    index = cluster_index(ctx.cluster)
    if index.victims is None:
        index.victims = frozenset((v.namespace, v.name) for v in predict_victims(ctx.cluster))
    certain = (w.namespace, w.name) in index.victims
    hazard = ctx.cluster.preemption_rate.get(w.cluster_queue, 0.0)
    likely = False
    if not certain and rule.likely_victims and hazard * 3600.0 >= rule.likely_hazard_per_hour:
        if index.first is None:
            index.first = frozenset((v.namespace, v.name) for v in first_in_line(ctx.cluster))
        likely = (w.namespace, w.name) in index.first
    if not (certain or likely):
        return out
    ref = cp.last_time if cp.last_time is not None else job.started_at
    age = None if ref is None else now - ref
    stale_after = rule.stale_after
    if likely:
        # the queue's evictions land on whoever stands first in line: its own hazard is the
        # queue's rate times the workloads sharing it, and Young/Daly turns that into an interval
        sharing = sum(1 for x in ctx.cluster.workloads if x.admitted and x.cluster_queue == w.cluster_queue)
        cost = cp.cost_seconds if cp.cost_seconds is not None and math.isfinite(cp.cost_seconds) else 60.0
        stale_after = max(stale_after, checkpoint_interval(max(cost, 0.0), hazard * max(sharing, 1)))
    if age is not None and age <= stale_after:
        out.reasons.append(f"{NAME}: likely preemption victim, but its checkpoint is {dur(age)} old (fresh)")
        return out
    if cp.pending_request is not None:
        out.reasons.append(f"{NAME}: likely preemption victim; a checkpoint is already requested")
        return out
    stale = "no checkpoint yet" if age is None else f"last checkpoint {dur(age)} old > {dur(stale_after)}"
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
    boost = certain and ctx.cluster.priority_boost_enabled  # nothing pending: a boost would only reorder
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
