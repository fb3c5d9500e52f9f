"""The rate limits on disruptive actions: a job's cooldown and a policy's cap per hour.

Both count attempts, not successes (a checkpoint that timed out still paused the job), and both
read only what the job and the cluster view carry (``JobView.actions``, the policy's action
times across jobs), so the controller, the simulator and ``policy explain`` agree on them.
"""

from __future__ import annotations

import math

from advisor.model import ClusterView, JobView
from advisor.protocol import RESUMED_ANNOTATION
from policies.rules.base import DISRUPTIVE, dur
from policies.rules.deadline import parse_deadline
from policies.spec import Policy

__all__ = ["HOUR", "blocked_by_rate"]

#: the window of a policy's cap of actions per hour, in seconds
HOUR = 3600.0


def _resumed_at(job: JobView, now: float) -> float | None:
    """When ``trainjob-advisor resume`` resumed the job (``RESUMED_ANNOTATION``), if it did and
    not after ``now`` (None: never, or unreadable)."""
    raw = job.annotations.get(RESUMED_ANNOTATION)
    at = parse_deadline(raw) if raw else None
    return at if at is not None and math.isfinite(at) and at <= now else None


def blocked_by_rate(job: JobView, cluster: ClusterView, policy: Policy, now: float) -> str | None:
    """Why a disruptive action may not happen now (None: it may): the job's cooldown since its
    last action or its resume, or the policy's cap of actions in the last hour, failed attempts
    included (an action that failed still disrupted the job, and retrying at once is a storm)."""
    s = policy.safety
    last = None
    mine = 0
    for rec in job.actions:
        # a failed or impossible attempt is an action too: it counts toward cooldown and cap
        if rec.kind in DISRUPTIVE and rec.outcome != "recommended":
            last = rec.time if last is None or rec.time > last else last
            if rec.policy == policy.name and now - HOUR < rec.time <= now:
                mine += 1
    resumed = _resumed_at(job, now)
    if resumed is not None and (last is None or resumed > last) and now - resumed < s.cooldown:
        # asked back by its user (``trainjob-advisor resume``) after a release: a full cooldown
        # from the resume (the note promised "released again after the policy's cooldown", and a
        # run resumed 24 minutes after its release was released again 61 s later)
        return f"cooldown {dur(s.cooldown)} (resumed by trainjob-advisor resume {dur(now - resumed)} ago)"
    if last is not None and now - last < s.cooldown:
        return f"cooldown {dur(s.cooldown)} (last action {dur(now - last)} ago)"
    times = cluster.policy_action_times.get(policy.name, ())
    count = max(mine, sum(1 for t in times if now - HOUR < t <= now))
    if count >= s.max_actions_per_hour:
        return f"policy cap of {s.max_actions_per_hour} actions/hour reached ({count} in the last hour)"
    return None
