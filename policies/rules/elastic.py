"""Elastic: grow into idle quota while it pays, shrink when it does not or when others starve.

Growth needs all of: a trustworthy forecast that the run still converges (P(plateau) below the
policy's bound, no divergence), a marginal throughput per added node, from the Amdahl fit of the
job's own observed ``(nodes, steps/s)`` pairs, of at least ``minMarginalEfficiency`` of the
current per-node rate, free quota for the extra GPUs, and no pending workload of equal or higher
priority in the queue or its cohort (idle quota is theirs first). Shrinking happens when P(plateau)
is high (towards the minimum, but no further than ``maxShrinkSlowdown`` allows: the run still goes
to its end) or when such a workload cannot be admitted (by just enough nodes, and only when that
is enough to admit it). A resize restarts the workers from a save, so neither is proposed when
what it spares over the time left (GPU-time shrinking, time growing) is no more than that save.
Targets always stay within the job's and the policy's min/max; a job that declares no maximum
(not elastic) is never resized.
"""

from __future__ import annotations

import math

from advisor.model import ActionKind, WorkloadView
from policies.index import cluster_index
from policies.quota import effective_priority, free_gpus
from policies.rules.base import Context, Outcome, dur, last_record, pct, propose_scale
from policies.rules.checkpoint import blocking_cost
from policies.spec import ElasticRule
from policies.throughput import ThroughputModel, fit_throughput

NAME = "elastic"
#: the Kubeflow v1 job kind, resized in place through its scale subresource
PYTORCHJOB_KIND = "PyTorchJob"


def bounds(ctx: Context, rule: ElasticRule) -> tuple[int, int]:
    job = ctx.job
    lo = max(job.min_nodes or 1, rule.min_nodes or 1)
    hi_job = job.max_nodes if job.max_nodes is not None else job.nodes
    hi = min(hi_job, rule.max_nodes) if rule.max_nodes is not None else hi_job
    return lo, hi


def gpus_per_node(ctx: Context) -> int:
    job = ctx.job
    return max(1, math.ceil(job.gpus / job.nodes)) if job.nodes > 0 and job.gpus > 0 else 1


def _competitors(ctx: Context) -> list[WorkloadView]:
    """Pending workloads of equal or higher priority that share quota with this job."""
    job = ctx.job
    index = cluster_index(ctx.cluster)
    sharing = index.sharing.get(job.cluster_queue or "")
    if sharing is None:
        return []
    key = job.key
    return [
        w
        for w in index.pending
        if w.cluster_queue in sharing and effective_priority(w) >= job.priority and w.job != key
    ]


def outside_quota(ctx: Context) -> str | None:
    """Why the job's GPUs are not charged to a Kueue queue's quota (None: they are), so that the
    queue's unused quota says nothing of GPUs it may take or give back.

    Free GPUs are read as a ClusterQueue's unused quota. A job in none has no such measure; a job
    with a queue-name label but no Workload (Kueue's ``kubeflow.org/pytorchjob`` integration is
    off by default) runs beside that quota: grown into it, its new GPUs were not charged there
    either, and Kueue admitted another team's 48-GPU Workload into the same "free" GPUs (a
    platform trial: 104 GPUs of running work on a 64-GPU queue). Shrunk for a pending Workload,
    it frees nothing that Workload's queue counts."""
    job = ctx.job
    if job.cluster_queue is None:
        return "in no Kueue ClusterQueue (free GPUs are read as a queue's unused quota)"
    if job.signals is not None and not job.signals.has_workload:
        return (
            f"no Kueue Workload: its GPUs are not charged to {job.cluster_queue}'s quota, whose unused part "
            "Kueue gives to other work"
        )
    return None


def model(ctx: Context, rule: ElasticRule) -> ThroughputModel | None:
    return fit_throughput(ctx.job.throughput, prior_serial=rule.prior_serial_fraction)


def grow_target(ctx: Context, rule: ElasticRule, *, need_factor: float | None = None) -> tuple[int, str]:
    """The node count growth would reach now (``job.nodes`` when none), and why.

    Without ``need_factor``: the largest count, at most ``maxStep`` more, whose every added node
    is efficient enough. With it (the deadline rule): the smallest count whose predicted speed-up
    reaches ``need_factor``, ignoring ``maxStep`` and efficiency but not quota or bounds.
    """
    job = ctx.job
    _, hi = bounds(ctx, rule)
    if job.nodes >= hi:
        return job.nodes, f"already at the maximum of {hi} nodes"
    outside = outside_quota(ctx)
    if outside is not None:
        return job.nodes, outside
    competitors = _competitors(ctx)
    if competitors:
        w = competitors[0]
        return (
            job.nodes,
            f"{len(competitors)} workload(s) of priority >= {job.priority} pending "
            f"(first {w.namespace}/{w.name})",
        )
    m = model(ctx, rule)
    if m is None:
        return job.nodes, "no throughput observed yet"
    gpn = gpus_per_node(ctx)
    free = free_gpus(ctx.cluster, job.cluster_queue)
    base = m.steps_per_second(job.nodes)
    best, why = job.nodes, f"no idle quota ({free} GPUs free, {gpn} per node)"
    limit = hi if need_factor is not None else min(hi, job.nodes + rule.max_step)
    for n in range(job.nodes + 1, limit + 1):
        if (n - job.nodes) * gpn > free:
            break
        speedup = m.steps_per_second(n) / base if base > 0 else 0.0
        if need_factor is not None:
            best, why = n, f"{n} nodes predicted {speedup:.2f}x faster"
            if speedup >= need_factor:
                return n, why + f" (needs {need_factor:.2f}x)"
            continue
        eff = m.marginal_efficiency(n)
        if eff < rule.min_marginal_efficiency:
            if best == job.nodes:
                why = (
                    f"node {n} would add only {pct(eff)} of a node's throughput "
                    f"(< {pct(rule.min_marginal_efficiency)})"
                )
            break
        best = n
        why = (
            f"{n} nodes: {m.steps_per_second(n):.3g} steps/s predicted ({speedup:.2f}x), marginal efficiency "
            f"{pct(eff)} >= {pct(rule.min_marginal_efficiency)}, {free} GPUs free (serial fraction "
            f"{m.serial:.3f} from {m.observed} observation(s))"
        )
    if need_factor is not None and best > job.nodes:
        return best, why + f" (needs {need_factor:.2f}x: not enough)"
    return best, why


def shrink_target(ctx: Context, rule: ElasticRule, lo: int) -> tuple[int, str]:
    """The fewest nodes (not below ``lo``) a plateaued run may shrink to, and what it costs.

    A shrink does not end the run: it goes on to its last step on fewer nodes, so it saves the
    GPU-hours that scaling wasted (Amdahl: fewer nodes are more efficient per GPU) and pays in
    remaining time. To the minimum that can be several times the time left (8 -> 1 nodes at a
    serial fraction of 0.1: 4.7x), holding quota and delaying the job's end for a few percent of
    GPU-hours; releasing a run that no longer learns is the plateau rule's job. So the shrink stops
    at the fewest nodes whose predicted slowdown stays within ``maxShrinkSlowdown``.

    The default (1.5) was chosen on the Microsoft ITP trace (cluster01, 300 jobs, ``--elastic``,
    seeds 0-14) as the loosest limit whose row still ended within 5% of the no-advisor row's last
    job (limits 1.5 / 2 / 3: -2% / +6% / +16% simulated time, 0.8% / 2.1% / 3.5% fewer GPU-hours).
    """
    job = ctx.job
    m = model(ctx, rule) or ThroughputModel(single=1.0, serial=rule.prior_serial_fraction, observed=0)
    # measured from the fastest size the run has had, not from the current one: the rule is asked
    # again at each look while P(plateau) stays high, and a bound per shrink would compound
    # (8 -> 4 -> 2 -> 1 nodes, each within the limit)
    sizes = {job.nodes, *(n for n, _ in job.throughput if n >= 1)}
    base = max(m.steps_per_second(n) for n in sizes)
    now_slow = base / m.steps_per_second(job.nodes)
    left_s = _time_left(ctx)
    # a resize restarts the workers from a save: it pays only if the GPU-time it spares over what
    # is left beats the job's GPUs held through that save (a trial's runs were shrunk 24 steps
    # from their end, "remaining 0.0h -> 0.0h")
    save = blocking_cost(ctx, ctx.policy.rules.checkpoint)
    for n in range(lo, job.nodes):
        slowdown = base / m.steps_per_second(n)
        if slowdown <= rule.max_shrink_slowdown:
            left = ""
            saved = 1.0 - (slowdown / now_slow) * n / job.nodes
            if left_s is not None:
                after = slowdown / now_slow * left_s
                left = f", remaining {left_s / 3600:.1f}h -> {after / 3600:.1f}h"
                if saved * left_s <= save:
                    return job.nodes, (
                        f"{n} nodes would spare {saved:.0%} of the GPU-time left ({dur(saved * left_s)}), "
                        f"no more than the save a resize starts with ({dur(save)})"
                    )
            return n, (
                f"{n} nodes predicted {slowdown:.2f}x slower than its fastest size{left}, "
                f"{saved:.0%} fewer GPU-hours (limit {rule.max_shrink_slowdown:g}x)"
            )
    one = base / m.steps_per_second(job.nodes - 1)
    return job.nodes, (
        f"{job.nodes - 1} nodes would run {one:.2f}x slower than its fastest size "
        f"(> {rule.max_shrink_slowdown:g}x allowed)"
    )


def evaluate(ctx: Context, rule: ElasticRule) -> Outcome:
    out = _judge(ctx, rule)
    if not out.advice:
        out.advice = _resting_advice(ctx)
        out.severity = 1 if out.advice else 0
    return out


def _resting_advice(ctx: Context) -> str:
    """ADVICE of an elastic job the rule leaves as it is, where ``continue`` would hide what the
    rule did or cannot do (a platform trial: right after a resize, and on a PyTorchJob Kueue
    admits, the table read ``continue`` and only the reasons told): ``scaled:5`` for the policy's
    cooldown after a resize to 5 nodes, ``fixed-size (Kueue)`` for a job the rule never resizes.
    The lowest severity: any other rule's advice wins."""
    job = ctx.job
    if job.max_nodes is None or not job.active or not job.admitted:
        return ""
    if job.kind == PYTORCHJOB_KIND and job.signals is not None and job.signals.has_workload:
        return "fixed-size (Kueue)"
    last = last_record(job, {ActionKind.SCALE})
    if last is not None and last.outcome == "done" and ctx.now - last.time < ctx.policy.safety.cooldown:
        return f"scaled:{job.nodes}"
    return ""


def _judge(ctx: Context, rule: ElasticRule) -> Outcome:
    out = Outcome()
    job, fc = ctx.job, ctx.forecast
    if not job.active or not job.admitted:
        return out
    if job.max_nodes is None:
        return out  # a fixed-size job: the policy's bounds can tighten a job's range, never create one
    if job.kind == PYTORCHJOB_KIND and job.signals is not None and job.signals.has_workload:
        # Kueue stops and requeues a running job whose pod counts no longer match its admitted
        # Workload, and has no elastic Workloads for PyTorchJob: a resize would be a restart
        out.reasons.append(f"{NAME}: not resizing a PyTorchJob Kueue admits (it would stop and requeue it)")
        return out
    lo, hi = bounds(ctx, rule)
    if lo > hi:
        out.reasons.append(f"{NAME}: bounds empty (min {lo} > max {hi}); not scaling")
        return out
    gpn = gpus_per_node(ctx)
    outside = outside_quota(ctx)
    if rule.shrink_when_starving and job.nodes > lo and outside is not None:
        cq_free = free_gpus(ctx.cluster, job.cluster_queue)
        starving = [w for w in _competitors(ctx) if w.gpus > cq_free]
        if starving:
            # said with the workload it would have been for (a platform trial read only the
            # general "no Kueue Workload" reason beside a Workload pending in its queue)
            w = starving[0]
            out.reasons.append(
                f"{NAME}: not shrinking for {w.namespace}/{w.name} ({w.gpus} GPUs pending): {outside}; "
                "a shrink frees nothing that queue counts"
            )
    if rule.shrink_when_starving and job.nodes > lo and outside is None:
        cq_free = free_gpus(ctx.cluster, job.cluster_queue)
        starving = [w for w in _competitors(ctx) if w.gpus > cq_free]
        # only a workload this shrink can make room for: one that would still not fit after it
        # gains nothing and waits as long, while this run goes on slower on fewer nodes (on a
        # cluster the size of one big job, every big job then queued behind a run shrunk to its
        # minimum, for hundreds of hours)
        can_give = (job.nodes - lo) * gpn
        helped = [w for w in starving if w.gpus <= cq_free + can_give]
        if helped:
            w = helped[0]
            give = math.ceil((w.gpus - cq_free) / gpn)
            _scale(
                ctx,
                out,
                job.nodes - give,
                f"{w.namespace}/{w.name} (priority {effective_priority(w)}, "
                f"{w.gpus} GPUs) cannot be admitted with {cq_free} GPUs free",
            )
            return out
        if starving:
            w = starving[0]
            out.reasons.append(
                f"{NAME}: not shrinking for {w.namespace}/{w.name}: it needs {w.gpus} GPUs, "
                f"{cq_free} are free and this job can give {can_give} above its minimum"
            )
    if not ctx.judge:
        return out
    if fc is None:
        out.reasons.append(f"{NAME}: not scaling ({ctx.forecast_reason})")
        return out
    if fc.plateau_probability >= rule.shrink_plateau_probability and job.nodes > lo:
        why = f"P(plateau)={pct(fc.plateau_probability)} >= {pct(rule.shrink_plateau_probability)}"
        target, cost = shrink_target(ctx, rule, lo)
        if target < job.nodes:
            _scale(ctx, out, target, f"{why}; {cost}")
        else:
            out.reasons.append(f"{NAME}: not shrinking ({why}): {cost}")
        return out
    if fc.plateau_probability >= rule.max_plateau_for_growth or fc.divergence_probability >= 0.5:
        out.reasons.append(
            f"{NAME}: not growing: P(plateau)={pct(fc.plateau_probability)}, "
            f"P(diverge)={pct(fc.divergence_probability)}"
        )
        return out
    target, why = grow_target(ctx, rule)
    short = _too_short_to_grow(ctx, rule, target)
    if target > job.nodes and short is not None:
        out.reasons.append(f"{NAME}: not growing to {target} nodes: {short}")
    elif target > job.nodes:
        _scale(ctx, out, target, why)
    else:
        out.reasons.append(f"{NAME}: staying at {job.nodes} nodes: {why}")
    return out


def _time_left(ctx: Context) -> float | None:
    """The run's forecast time to its end, in seconds (None: not known)."""
    eta = ctx.forecast.eta_seconds if ctx.forecast is not None else None
    return eta.mean if eta is not None and math.isfinite(eta.mean) else None


def _too_short_to_grow(ctx: Context, rule: ElasticRule, target: int) -> str | None:
    """Why growing to ``target`` nodes does not pay (None: it may): the time it spares of what is
    left is no more than the save a resize starts with (the workers restart from it)."""
    left_s = _time_left(ctx)
    m = model(ctx, rule)
    if left_s is None or m is None or target <= ctx.job.nodes:
        return None
    now, then = m.steps_per_second(ctx.job.nodes), m.steps_per_second(target)
    if now <= 0 or then <= now:
        return None
    spared = left_s * (1.0 - now / then)
    save = blocking_cost(ctx, ctx.policy.rules.checkpoint)
    if spared > save:
        return None
    return (
        f"it would spare {dur(spared)} of the {dur(left_s)} left, no more than the save a resize "
        f"starts with ({dur(save)})"
    )


def _scale(ctx: Context, out: Outcome, nodes: int, why: str) -> None:
    job = ctx.job
    direction = "up" if nodes > job.nodes else "down"
    reason = f"scale {direction} {job.nodes} → {nodes} nodes: {why}"
    out.advice, out.severity = f"scale-{direction}:{nodes}", 4
    propose_scale(out, ctx, NAME, nodes=nodes, reason=reason)
