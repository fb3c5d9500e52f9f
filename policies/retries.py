"""Failed actions are actions: when a kind of action may be tried again on a job. Pure.

Why a policy decision and not the actuator's: without it a job whose Workload cannot be found got
a fresh release attempt (and a Warning Event) at every evaluation, about 120 an hour, because the
failed attempt left the rule's condition as it was. So the engine holds an action back when

* it was found **impossible** on this job as it stands (no Workload, a write the API server finds
  invalid, not supported by the job's API): not tried again until ``JobView.version`` changes (a
  Workload appeared, the job's spec changed), or for BACKOFF_MAX_S. The adapter stamps each
  attempt with the version it saw. The hour: what made it impossible may change outside the job:
  held until the job changed, a plateaued run kept its quota for good, through a failover and a
  restart. Once an hour is the longest wait of a failing action too, so such a job gets at most
  one attempt, and one Warning, an hour. A 403 is no such finding: a permission is the
  installation's and comes back with the act role, so the adapter records it **failed**, below;
* it **failed** recently: the next attempt of that kind waits ``base * 2**(n-1)`` after the
  n-th failure in a row (capped), so a job gets at most one failed attempt, and at most one
  Warning Event, per backoff window. A checkpoint request that **timed out** unanswered counts
  as a failure here: a job that does not answer (its training process has no checkpoint hook, or
  is stuck) was asked again at every timeout, every two minutes for ever, with a Warning each time.

Failed attempts also count toward the cooldown and the policy's hourly cap (``policies.rate``).
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.model import Action, ActionKind, ActionRecord, JobView
from policies.fields import format_duration

__all__ = ["BACKOFF_BASE_S", "BACKOFF_MAX_S", "Hold", "backoff_s", "held_back", "hold_for"]

#: wait after the first failure of a kind; each further failure in a row doubles it
BACKOFF_BASE_S = 60.0
#: the longest wait: a job stuck failing is still tried once an hour
BACKOFF_MAX_S = 3600.0
#: outcomes that are not attempts at a mutation
_NOT_ATTEMPTS = frozenset({"recommended"})
#: outcomes that back the next attempt of their kind off: a failed write, an unanswered request
_FAILURES = frozenset({"failed", "timed-out"})


@dataclass(frozen=True, slots=True)
class Hold:
    """Why an action of one kind may not be tried now, and when it may (None: not before the job
    changes)."""

    reason: str
    until: float | None


def backoff_s(failures: int) -> float:
    """The wait after ``failures`` failed attempts in a row (0 for none)."""
    if failures <= 0:
        return 0.0
    return min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2.0 ** min(failures - 1, 30))


def _attempts(job: JobView, kind: ActionKind) -> list[ActionRecord]:
    same = [a for a in job.actions if a.kind is kind and a.outcome not in _NOT_ATTEMPTS]
    same.sort(key=lambda a: a.time)
    return same


def hold_for(job: JobView, kind: ActionKind, now: float, *, unanswered: bool = True) -> Hold | None:
    """Whether an action of ``kind`` on ``job`` must wait (see the module docstring).
    ``unanswered``: whether timed-out requests back it off too; a release's own checkpoint is
    asked once per sequence and its timeout leads to the release (``releaseOnTimeout``), so it is
    not held by the guard's or the checkpoint rule's unanswered requests before it."""
    attempts = _attempts(job, kind)
    if not attempts:
        return None
    last = attempts[-1]
    if last.outcome == "impossible" and last.stamp == job.version:
        until = last.time + BACKOFF_MAX_S
        if now < until:
            why = f": {last.detail}" if last.detail else ""
            return Hold(
                f"{kind.value} is impossible on this job as it stands{why}; not retried until it "
                f"changes, or in {format_duration(until - now)}",
                until,
            )
        return None
    counted = _FAILURES if unanswered else _FAILURES - {"timed-out"}
    failures = 0
    for a in reversed(attempts):
        if a.outcome not in counted:
            break
        failures += 1
    if failures == 0:
        return None
    until = last.time + backoff_s(failures)
    if now >= until:
        return None
    if last.outcome == "timed-out":
        what = f"{failures} {kind.value} request(s) in a row went unanswered (timed out)"
    else:
        what = f"{failures} failed {kind.value} attempt(s) in a row" + (
            f" ({last.detail})" if last.detail else ""
        )
    return Hold(f"backing off: {what}; next try in {format_duration(until - now)}", until)


def held_back(
    job: JobView,
    actions: list[Action],
    now: float,
    reasons: list[str],
    rechecks: list[float],
    failed: set[ActionKind] | None = None,
) -> list[Action]:
    """The actions that may be tried now: one that failed recently waits out its backoff, one
    found impossible on this job waits for the job to change (``policies.retries``). ``failed``
    collects the kinds of mutations held back so (ADVICE says the action failed, not that it acts)."""
    kept: list[Action] = []
    for a in actions:
        if a.kind is ActionKind.RECOMMEND:
            # a held-back action is not recommended either when it is impossible on this job
            would = a.params.get("would")
            target = next((k for k in ActionKind if k.value == would), None)
            hold = hold_for(job, target, now) if target is not None else None
            if hold is None or hold.until is not None:
                kept.append(a)
            else:
                reasons.append(f"{a.rule}: {hold.reason}")
            continue
        hold = hold_for(job, a.kind, now, unanswered="before" not in a.params)
        if hold is None:
            kept.append(a)
            continue
        reasons.append(f"{a.rule}: held back, {hold.reason} (wanted: {a.reason})")
        if failed is not None:
            failed.add(a.kind)
        if hold.until is not None:
            rechecks.append(hold.until)
    return kept
