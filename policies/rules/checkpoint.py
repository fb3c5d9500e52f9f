"""Periodic checkpoints at the Young/Daly interval for this job on this queue.

The cost is the one the job reported (``CheckpointState.cost_seconds``) or the policy's default;
the hazard is the eviction rate observed on the job's ClusterQueue (``ClusterView.preemption_rate``)
or the policy's default. So a calm queue checkpoints rarely and a preemptible one often. A
workload that no preemption rule can reach (top of the priorities in use in its cohort, its queue
unable to borrow, or reclamation limited to lower priorities: ``policies.victims.can_be_preempted``)
keeps ``maxInterval``: the queue's eviction rate is other workloads' risk, not its own. One
request at a time: nothing new while one is pending. The interval counts from the later of the
last checkpoint and the current admission (``unsaved_since``): a workload evicted and admitted
again resumed from that checkpoint, and asking it to save as it restarts would only save it again.
"""

from __future__ import annotations

import math

from advisor.model import ActionKind
from policies.index import cluster_index
from policies.rules.base import Context, Outcome, dur, unsaved_since
from policies.spec import CheckpointRule
from policies.victims import can_be_preempted
from policies.youngdaly import checkpoint_interval

NAME = "checkpoint"


def interval(ctx: Context, rule: CheckpointRule) -> tuple[float, float, float]:
    """``(interval_s, cost_s, hazard_per_s)`` for the job, clamped to the rule's bounds."""
    job, cluster = ctx.job, ctx.cluster
    cost = job.checkpoint.cost_seconds
    if cost is None or not math.isfinite(cost) or cost < 0:
        cost = rule.default_cost
    hazard = cluster.preemption_rate.get(job.cluster_queue or "")
    if hazard is None or not math.isfinite(hazard) or hazard < 0:
        hazard = rule.default_hazard_per_hour / 3600.0
    ideal = checkpoint_interval(cost, hazard)
    return min(max(ideal, rule.min_interval), rule.max_interval), cost, hazard


def evaluate(ctx: Context, rule: CheckpointRule) -> Outcome:
    out = Outcome()
    job, now = ctx.job, ctx.now
    if not job.active or not job.admitted:
        return out
    every, cost, hazard = interval(ctx, rule)
    w = cluster_index(ctx.cluster).by_job.get(job.key)
    safe = w is not None and w.admitted and not can_be_preempted(ctx.cluster, w, as_it_stands=False)
    if safe:
        # nothing in Kueue can evict it, even if its queue starts borrowing: only node failures
        # threaten it, which the queue's eviction rate (others' preemptions) overstates
        every = rule.max_interval
    if job.checkpoint.pending_request is not None:
        return out
    last = unsaved_since(ctx)
    if last is None:
        return out
    age = now - last
    if age < every:
        return out
    mtbf = "∞" if hazard == 0 else dur(1.0 / hazard)
    why = (
        "maxInterval: no preemption can reach it"
        if safe
        else f"Young/Daly for cost {dur(cost)}, MTBF {mtbf} on queue {job.cluster_queue or '-'}"
    )
    since = (
        "last checkpoint"
        if last == job.checkpoint.last_time
        else "start"
        if last == job.started_at
        else "admission"
    )
    reason = f"{since} {dur(age)} ago >= interval {dur(every)} ({why})"
    out.advice, out.severity = "checkpoint", 1
    if ctx.apply:
        out.act(ActionKind.CHECKPOINT, NAME, reason, interval_s=every)
    else:
        out.act(ActionKind.RECOMMEND, NAME, "would checkpoint: " + reason, would=ActionKind.CHECKPOINT.value)
    return out
