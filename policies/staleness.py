"""How old the evidence under a decision may be before a rule that rests on it is held back.

Why: the controller sees a job only through its watch. When the API server pauses, restarts or a
watch falls silent, the last forecast keeps describing the job as it was; a plateau's ``for``
window or a deadline can come due in that blind spot, and acting then would release or scale a
job on information older than anyone asked for. The age is measured on the adapter's own clock
(``JobView.progress_seen_at``, when the newest progress *reached* it), never on the reporter's
timestamps, so a skewed training-pod clock neither hides staleness nor fakes it.

The bound is the policy's ``safety.maxEvidenceAge``, lengthened to ``REPORTS`` of the job's usual
intervals between reports for a run that logs rarely: a job logging every 20 minutes is not stale
10 minutes after its last report. The stall rule is not held: the absence of progress is its
evidence. Pure: ``now`` is an argument.
"""

from __future__ import annotations

from advisor.model import JobView
from policies.fields import format_duration
from policies.rules import deadline, divergence, elastic, overfitting, plateau
from policies.spec import Policy

__all__ = ["REPORTS", "RESTS_ON_FORECAST", "evidence_bound", "stale_evidence"]

#: rules whose verdict is the forecast's (or the progress it was fitted on)
RESTS_ON_FORECAST = frozenset({plateau.NAME, overfitting.NAME, divergence.NAME, deadline.NAME, elastic.NAME})

#: a run is overdue after this many of its usual intervals between reports
REPORTS = 3


def evidence_bound(job: JobView, policy: Policy) -> float:
    """The oldest the job's newest progress may be for a forecast-based rule to act, in seconds."""
    interval = (
        job.report_interval_s if job.report_interval_s is not None and job.report_interval_s > 0 else 0.0
    )
    return max(policy.safety.max_evidence_age, REPORTS * interval)


def stale_evidence(job: JobView, policy: Policy, now: float) -> str | None:
    """Why the job's evidence is too old to act on at ``now``, or None when it is fresh enough (or
    the adapter does not say when progress arrived)."""
    seen = job.progress_seen_at
    if seen is None:
        return None
    age = now - seen
    bound = evidence_bound(job, policy)
    if age <= bound:
        return None
    limit = f"maxEvidenceAge {format_duration(policy.safety.max_evidence_age)}"
    if bound > policy.safety.max_evidence_age:
        limit = f"{REPORTS} report intervals ({format_duration(bound)})"
    return f"stale evidence: the newest progress arrived {format_duration(age)} ago > {limit}"
