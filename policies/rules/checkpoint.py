"""Periodic checkpoints at the Young/Daly interval for this job on this queue.

The cost is the save time the job reported (``blocking_cost``) or the policy's default;
the hazard is the eviction rate observed on the job's ClusterQueue (``ClusterView.preemption_rate``)
or the policy's default, refined by the workload's own record (``policies.hazard.workload_hazard``:
Kueue evicts the newest of the lowest priority first, so a workload it keeps evicting faces more
than the queue's average and one that has run for hours untouched less). So a calm queue
checkpoints rarely and a preemptible one often. A
workload that no preemption rule can reach (top of the priorities in use in its cohort, its queue
unable to borrow, or reclamation limited to lower priorities: ``policies.victims.can_be_preempted``)
keeps ``maxInterval``: the queue's eviction rate is other workloads' risk, not its own. One
request at a time: nothing new while one is pending. The interval counts from the later of the
last checkpoint and the current admission (``unsaved_since``): a workload evicted and admitted
again resumed from that checkpoint, and asking it to save as it restarts would only save it again.
"""

from __future__ import annotations

import math

from advisor.model import Action, ActionKind, ClusterView, Phase, WorkloadView
from policies.hazard import admitted_seconds, priority_hazard, queue_hazard, workload_hazard
from policies.index import cluster_index
from policies.rules.base import Context, Outcome, dur, last_record, unsaved_since
from policies.savewindow import miss_probability, needed_grace, peer_grace, save_seconds, step_seconds
from policies.spec import CheckpointRule
from policies.victims import can_be_preempted
from policies.youngdaly import checkpoint_interval

NAME = "checkpoint"
#: the rule name of the grace-period advice (its own, so that it is paced apart from checkpoints)
SAVE_WINDOW = "save-window"
#: the rule name of the advice on a job evicted faster than its interval (paced apart likewise)
EVICTED_FASTER = "evicted-faster"


#: the checkpoint rule's settings where a policy has none (its ``defaultHazardPerHour``: the prior)
_DEFAULTS = CheckpointRule()


def queue_rate(cluster: ClusterView, cq_name: str | None, rule: CheckpointRule | None) -> float:
    """The preemption hazard per admitted second a rule plans for on ``cq_name``:
    ``policies.hazard.queue_hazard``, the queue's evidence shrunk toward a prior worth one
    interruption at the checkpoint rule's ``defaultHazardPerHour`` (the field's default where
    the policy has no checkpoint rule). One estimate for every rule that reads a queue's hazard:
    the preemption guard's too, where the bare count over a short exposure (one eviction 78 s
    after admission: 46 per workload-hour) took a queue for a hostile one for hours."""
    prior = (rule or _DEFAULTS).default_hazard_per_hour
    return queue_hazard(
        cq_name,
        evidence=cluster.hazard_evidence,
        rates=cluster.preemption_rate,
        default_per_s=prior / 3600.0,
    )


def blocking_cost(ctx: Context, rule: CheckpointRule | None) -> float:
    """What one checkpoint costs the run, in seconds: the save time the job's helper measures
    (``CheckpointState.save_duration``: ``last_checkpoint_seconds``), else the latency of the
    advisor's requests, else the policy's ``defaultCost``. The save blocks training; the latency
    also holds the wait for a safe point and the next report (a job reporting 30 s saves, answered
    within 2 s, was planned for at a cost of 1-4 s)."""
    cost = ctx.job.checkpoint.save_duration
    if cost is None or not math.isfinite(cost) or cost < 0:
        return (rule or _DEFAULTS).default_cost
    return cost


def interval(ctx: Context, rule: CheckpointRule, w: WorkloadView | None) -> tuple[float, float, float]:
    """``(interval_s, cost_s, hazard_per_s)`` for the job, clamped to the rule's bounds.

    The hazard is the queue's, refined by its workloads' of the job's priority, then by the
    workload's own evictions and admitted time (``policies.hazard``), times
    the chance that an eviction loses the unsaved work
    (``policies.savewindow.miss_probability``): 1 until the job's saves on SIGTERM are seen to
    work, so an unverified job keeps the Young/Daly interval for the full hazard."""
    job, cluster = ctx.job, ctx.cluster
    cost = blocking_cost(ctx, rule)
    priority = w.priority if w is not None else job.priority
    queue = queue_rate(cluster, job.cluster_queue, rule)
    level = priority_hazard(queue, job.cluster_queue, priority, cluster.priority_hazard_evidence)
    hazard = workload_hazard(level, w, ctx.now)
    hazard *= miss_probability(job)
    ideal = checkpoint_interval(cost, hazard)
    return min(max(ideal, rule.min_interval), rule.max_interval), cost, hazard


def _hazard_basis(ctx: Context, rule: CheckpointRule, w: WorkloadView | None) -> str:
    """What the MTBF rests on: the prior (``defaultHazardPerHour``, worth one interruption) and
    the queue's and the workload's own evidence (``policies.hazard``). A prior of 20 an hour read
    as an MTBF of 24 minutes four minutes later, with nothing to say that a fresh queue's admitted
    time, without an eviction, had diluted it."""
    prior = dur(3600.0 / rule.default_hazard_per_hour) if rule.default_hazard_per_hour > 0 else "∞"
    found = ctx.cluster.hazard_evidence.get(ctx.job.cluster_queue or "")
    queue = (
        f"{found[0]} interruption(s) in {dur(found[1])} admitted on the queue"
        if found is not None
        else "no queue evidence"
    )
    cq, priority = ctx.job.cluster_queue or "", w.priority if w is not None else ctx.job.priority
    level = ctx.cluster.priority_hazard_evidence.get((cq, priority))
    if level is not None and found is not None and level[1] < found[1]:
        # said only where it is a part of the queue's: a queue of one priority says it once
        queue += f", {level[0]} in {dur(level[1])} at its priority {priority}"
    own = ""
    if w is not None:
        own = f", {max(0, w.interruptions)} in its own {dur(admitted_seconds(w, ctx.now))}"
    return f" (prior MTBF {prior}; {queue}{own})"


def releases_possible(ctx: Context) -> bool:
    """Whether the job's policy may release or stop it (a SIGTERM of its own making)."""
    if not ctx.apply:
        return False
    rules = ctx.policy.rules
    return any(
        r is not None and r.enabled for r in (rules.plateau, rules.divergence, rules.stall, rules.deadline)
    )


def _grace_advice(ctx: Context, preemptible: bool, out: Outcome) -> None:
    """Recommend a grace period that fits a save on SIGTERM, where an eviction can come.

    A recommendation in both modes: the grace period belongs to the pod template (the runtime,
    or the TrainJob's ``runtimePatches`` on Trainer v2.3+), which the pods running now do not
    take up, so the platform engineer or the job's owner sets it for the next start.
    """
    job = ctx.job
    if job.grace_period_s is None or not (preemptible or releases_possible(ctx)):
        return
    need = needed_grace(job)
    if need is None or job.grace_period_s >= need:
        return
    step, save = step_seconds(job), save_seconds(job)
    out.act(
        ActionKind.RECOMMEND,
        SAVE_WINDOW,
        f"set terminationGracePeriodSeconds >= {need:.0f} (now {job.grace_period_s:.0f}): a save on "
        f"SIGTERM needs the step under way ({dur(step or 0.0)}) plus a save ({dur(save or 0.0)})",
        would="set-grace-period",
        grace_period_s=need,
        current_grace_period_s=job.grace_period_s,
    )


def grace_period_action(ctx: Context, rule: CheckpointRule) -> Action | None:
    """Set the grace period a save on SIGTERM needs, for the next start of a waiting TrainJob.

    The grace period belongs to the pod template, and Trainer (v2.3+) lets a TrainJob's
    ``runtimePatches`` change only while the job is suspended with no pod left: while it waits for
    quota, before its first start or after an eviction. After one, the job's own step and save
    times (measured while it ran) give the need; before its first start, the save windows of the
    jobs of its runtime do (``policies.savewindow.peer_grace``), so that its first eviction can
    save too. So only then, with the rule's ``setGracePeriod`` (in Recommend mode, the same said as a
    recommendation), on a Kueue-managed
    TrainJob (a queue that can preempt it) or one a release may stop; the adapter checks that the
    job is still suspended before it writes. The value is whole seconds with no margin below the
    need; a grace period already at or above it is left alone. Trainer makes the value of a patch
    immutable, so a larger one later replaces the advisor's own patch."""
    job = ctx.job
    if not rule.set_grace_period or job.kind != "TrainJob":
        return None
    if job.phase not in (Phase.PENDING, Phase.SUSPENDED) or job.grace_period_s is None:
        return None
    if job.queue_name is None and not releases_possible(ctx):
        return None  # not Kueue-managed (no preemption) and no release of the advisor's own
    need = needed_grace(job)
    if need is not None:
        step, save = step_seconds(job), save_seconds(job)
        why = f"the step under way ({_fine(step or 0.0)}) plus a save ({_fine(save or 0.0)})"
    else:
        peers = peer_grace(job)
        if peers is None:
            return None
        need = peers[0]
        why = (
            f"the step under way plus a save, as measured on {peers[1]} jobs of runtime "
            f"{job.runtime} (its own not yet measured)"
        )
    if job.grace_period_s >= need:
        return None
    done = last_record(job, {ActionKind.SET_GRACE_PERIOD})
    if done is not None and done.outcome == "done" and done.stamp == job.version:
        return None  # written for this version of the job; the view has not caught up yet
    reason = (
        f"set terminationGracePeriodSeconds to {need:.0f} for the next start (was "
        f"{job.grace_period_s:.0f}): a save on SIGTERM needs {why}"
    )
    params = {"grace_period_s": need, "current_grace_period_s": job.grace_period_s}
    if not ctx.apply:  # what Apply would write, said once an hour (the actuator's repeat window)
        return Action(
            ActionKind.RECOMMEND, SAVE_WINDOW, "would " + reason, {**params, "would": "set-grace-period"}
        )
    return Action(ActionKind.SET_GRACE_PERIOD, SAVE_WINDOW, reason, params)


def _fine(seconds: float) -> str:
    """A part of a save window: tenths below ten seconds, since the window is their sum rounded up
    (a 0.4-s step and a 30-s save need 31 s, not "0s plus 30s")."""
    return f"{seconds:.1f}s" if seconds < 10 else dur(seconds)


def _evicted_faster_advice(
    ctx: Context, rule: CheckpointRule, w: WorkloadView | None, every: float, out: Outcome
) -> None:
    """Recommend, in both modes, what a job needs when its own record shows it evicted faster
    than its checkpoint interval: each eviction then loses all it did since its admission, and
    no periodic checkpoint can come in time. With the hazard floor (``policies.hazard``) the
    interval follows such a record down to ``minInterval``; below that the admin's bound holds,
    and only the admin can lower it (or give the job a priority its queue does not preempt). A
    platform trial's job was evicted every 70 s of running and stood at the same step for eleven
    minutes while every table read "learning"."""
    if w is None or w.interruptions < 2:
        return
    exposure = admitted_seconds(w, ctx.now)
    span = exposure / w.interruptions
    if not 0.0 < span < every:
        return
    bound = " (its policy's checkpoint.minInterval)" if every <= rule.min_interval else ""
    out.act(
        ActionKind.RECOMMEND,
        EVICTED_FASTER,
        f"evicted {w.interruptions} times in {dur(exposure)} admitted (one every {dur(span)}), more often "
        f"than its checkpoint interval {dur(every)}{bound}: each eviction loses its work since it was "
        "admitted; lower minInterval for it, or give it a priority its queue does not preempt",
        would="lower-min-interval",
        span_s=span,
        interval_s=every,
    )


def evaluate(ctx: Context, rule: CheckpointRule) -> Outcome:
    out = Outcome()
    job, now = ctx.job, ctx.now
    if not job.active or not job.admitted:
        return out
    w = cluster_index(ctx.cluster).by_job.get(job.key)
    every, cost, hazard = interval(ctx, rule, w)
    safe = w is not None and w.admitted and not can_be_preempted(ctx.cluster, w, as_it_stands=False)
    if safe:
        # nothing in Kueue can evict it, even if its queue starts borrowing: only node failures
        # threaten it, which the queue's eviction rate (others' preemptions) overstates
        every = rule.max_interval
    _grace_advice(ctx, w is not None and not safe, out)
    if not safe:
        _evicted_faster_advice(ctx, rule, w, every, out)
    if job.checkpoint.pending_request is not None:
        return out
    last = unsaved_since(ctx)
    if last is None:
        return out
    age = now - last
    if age < every:
        return out
    mtbf = "∞" if hazard == 0 else dur(1.0 / hazard)
    cp = job.checkpoint
    trust = (
        f", {cp.sigterm_saves} of {cp.sigterm_saves + cp.sigterm_misses} saves on SIGTERM verified"
        if cp.sigterm_saves
        else ""
    )
    why = (
        "maxInterval: no preemption can reach it"
        if safe
        else f"Young/Daly for cost {dur(cost)}, MTBF {mtbf} on queue {job.cluster_queue or '-'}"
        f"{_hazard_basis(ctx, rule, w)}{trust}"
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
