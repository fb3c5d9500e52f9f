"""Quota release (and stop): what to do, in which order, and never twice.

The order is the one in DESIGN.md: checkpoint first (unless a fresh one exists), wait for its
acknowledgement or its timeout, then deactivate the Kueue Workload (``spec.active=false``) or stop
the job. The sequence is stateless: which step comes next is read from the job's action log and
checkpoint state, so it survives controller restarts. A job that was already released or stopped,
or that is inactive, is never released again.

In Recommend mode the whole sequence is one recommendation that describes it.
"""

from __future__ import annotations

from typing import NamedTuple

from advisor.model import ActionKind, ActionRecord, Decision, JobView, Mode, Phase
from policies.rules.base import Context, Outcome, admitted_at, dur, last_record
from policies.spec import QuotaReleaseRule

__all__ = ["CANCELLED", "Abandoned", "abandoned", "already_released", "in_flight", "release"]

_FINAL = frozenset({ActionKind.RELEASE_QUOTA, ActionKind.STOP})
_CHECKPOINT = frozenset({ActionKind.CHECKPOINT})
#: how the reason of a sequence's checkpoint request begins (``checkpoint before release quota: ...``)
_BEFORE = "checkpoint before "
#: how the detail of a sequence's checkpoint request begins once the sequence was abandoned
CANCELLED = "release cancelled: "


def already_released(ctx: Context) -> bool:
    """Whether this run was already released or stopped. A release before the current admission
    or the current running phase does not count: the job was resumed since, and a resumed job is
    judged again from its resume (a Workload reactivated without a new admission, as Kueue does
    when its quota was kept, has only the phase to say so)."""
    rec = last_record(ctx.job, _FINAL)
    if rec is None or rec.outcome in ("failed", "impossible"):
        return False
    marks = [t for t in (admitted_at(ctx), ctx.job.phase_since) if t is not None]
    return not marks or rec.time >= max(marks)


def in_flight(job: JobView, rule: str, since: float) -> ActionRecord | None:
    """Whether ``rule``'s checkpoint-first sequence started in its window opened at ``since`` is
    under way: its checkpoint request was made and neither dropped (its pods gone) nor followed by
    the release or stop. Such a sequence runs to its end (the answer, or the timeout and then
    ``releaseOnTimeout``) whatever later forecasts say: the rule decided when it asked, the pods
    may be saving now, and a window started again would ask them a second time and put the
    release off by a whole window (and by a second timeout). Returns that request, else None."""
    request = _own_request(job, rule, since)
    if request is None:
        return None
    final = last_record(job, _FINAL)
    if final is None or final.time < request.time or final.outcome in ("failed", "impossible"):
        return request
    return None


def _own_request(job: JobView, rule: str, since: float) -> ActionRecord | None:
    """The checkpoint request ``rule``'s sequence goes on from: its own (not a periodic one), made
    since its window opened, or still waiting for its answer on the pods it was written on (a
    window opened again meanwhile does not ask them a second time). A request dropped unanswered
    (its pods gone) is no request: the sequence asks again."""
    request = last_record(job, _CHECKPOINT, rule=rule)
    if request is None or request.outcome == "dropped" or request.detail.startswith(CANCELLED):
        return None  # a sequence abandoned (``abandoned``) is over: asked again, it starts anew
    pending = request.outcome == "requested" and job.checkpoint.pending_request == request.request_id
    return request if request.time >= since or pending else None


def release(
    ctx: Context,
    out: Outcome,
    *,
    rule: str,
    final: ActionKind,
    why: str,
    since: float,
    checkpoint_first: bool | None = None,
    unsaved: str | None = None,
) -> bool:
    """Append the next step of the release/stop sequence started by ``rule`` to ``out``.

    ``unsaved``: why releasing on the last checkpoint as it stands would lose learning (the rule
    knows; the sequence does not). Given, the sequence saves first or holds: a release without a
    fresh checkpoint (none wanted, or the request timed out) is held back, and False is returned so
    that the rule can start over. True otherwise."""
    spec = ctx.policy.rules.quota_release or QuotaReleaseRule()
    want_checkpoint = spec.checkpoint_first if checkpoint_first is None else checkpoint_first
    verb = "release quota" if final is ActionKind.RELEASE_QUOTA else "stop"
    job, now = ctx.job, ctx.now
    out.terminal = True
    if already_released(ctx) or not job.active:
        out.reasons.append(f"{rule}: job already released or inactive; nothing more to do")
        return True
    if final is ActionKind.RELEASE_QUOTA and job.signals is not None and not job.signals.has_workload:
        # Kueue releases quota, through its Workload: without one there is nothing to release, and
        # a checkpoint asked for first was a save for nothing (one that may rotate out an older one)
        out.act(
            ActionKind.RECOMMEND,
            rule,
            f"would {verb}, but the job has no Kueue Workload (quota is released through "
            f"Workload.spec.active=false): {why}",
            would=final.value,
            held="no Kueue Workload",
        )
        return True
    cp = job.checkpoint
    fresh = cp.last_time is not None and now - cp.last_time <= spec.max_checkpoint_age
    fresh = fresh or (cp.last_step is not None and cp.last_step >= job.step > 0)
    if not ctx.apply:
        after = ""
        if want_checkpoint and not fresh:
            # one asked for already (in Apply mode, before the policy turned to Recommend) is
            # still awaited: said so, not as a save yet to ask for
            after = " after the checkpoint already requested" if cp.pending_request else " after a checkpoint"
        held = f"; held back: {ctx.blocked}" if ctx.blocked else ""
        out.act(
            ActionKind.RECOMMEND,
            rule,
            f"would {verb}{after}{held}: {why}",
            would=final.value,
            after="checkpoint" if after else None,
            **({"held": ctx.blocked} if ctx.blocked else {}),
        )
        return True
    request = _own_request(job, rule, since)
    first = _first_asked(job, rule, since, request)
    acked = request is not None and (
        request.outcome in ("acknowledged", "done")
        or (cp.last_time is not None and cp.last_time >= request.time)
    )
    saved = fresh or acked
    if unsaved is not None and not saved and (not want_checkpoint or _given_up(request, now, spec, first)):
        out.reasons.append(f"{rule}: would {verb} without a fresh checkpoint, but {unsaved}; held back")
        return False
    if not want_checkpoint or fresh:
        start = request is None  # no checkpoint of ours in between: this is the sequence's first step
        note = "" if not want_checkpoint else f" (checkpoint {dur(now - (cp.last_time or now))} old is fresh)"
        _final(ctx, out, rule, final, f"{verb}: {why}{note}", followup=not start)
        return True
    if request is None:
        if ctx.blocked:
            out.act(
                ActionKind.RECOMMEND,
                rule,
                f"would checkpoint then {verb}, held back: {ctx.blocked}; {why}",
                would=final.value,
                after="checkpoint",
                held=ctx.blocked,
            )
            return True
        out.act(
            ActionKind.CHECKPOINT,
            rule,
            f"checkpoint before {verb}: {why}",
            before=final.value,
            timeout_s=spec.checkpoint_timeout,
        )
        return True
    waited = now - request.time
    if acked:
        _final(
            ctx,
            out,
            rule,
            final,
            f"{verb} after checkpoint {request.request_id or ''}: {why}".replace("  ", " "),
            followup=True,
        )
    elif request.outcome == "failed" and not _given_up(request, now, spec, first):
        # the request never reached the job (the API server refused the write, or was down): no
        # answer was possible, so it is asked again, after the failure's backoff
        # (``policies.retries``), until the sequence's timeout, counted from its first request,
        # runs out. Given up at once, a 3-second API-server blip released runs without the save
        # they would have made
        left = spec.checkpoint_timeout - (now - (request.time if first is None else first))
        detail = f": {request.detail}" if request.detail else ""
        out.act(
            ActionKind.CHECKPOINT,
            rule,
            f"checkpoint before {verb}, asked again (the last request failed{detail}; "
            f"{dur(left)} of {dur(spec.checkpoint_timeout)} left): {why}",
            before=final.value,
            timeout_s=max(left, 0.0),
        )
    elif _given_up(request, now, spec, first):
        failed = request.outcome in ("failed", "impossible")
        detail = f" ({request.detail})" if failed and request.detail else ""
        missing = (
            f"the checkpoint request failed{detail}" if failed else "the checkpoint was not acknowledged"
        )
        if spec.release_on_timeout:
            what = (
                f"{missing}, released without it"
                if failed
                else f"checkpoint not acknowledged after {dur(waited)}"
            )
            _final(ctx, out, rule, final, f"{verb}, {what} (releaseOnTimeout): {why}", followup=True)
        else:
            out.act(
                ActionKind.RECOMMEND,
                rule,
                f"would {verb}, but {missing} and releaseOnTimeout is false: {why}",
                would=final.value,
            )
    else:
        out.recheck(request.time + spec.checkpoint_timeout)
        out.reasons.append(
            f"{rule}: waiting for checkpoint acknowledgement "
            f"({dur(waited)} of {dur(spec.checkpoint_timeout)}) before {verb}"
        )
    return True


def _given_up(request: ActionRecord | None, now: float, spec: QuotaReleaseRule, first: float | None) -> bool:
    """Whether our (unacknowledged) checkpoint request is past waiting for: it timed out, or the
    sequence's timeout has run out since its first request (``first``; a request that failed to be
    written is asked again until then)."""
    if request is None:
        return False
    start = request.time if first is None else first
    return request.outcome == "timed-out" or now - start >= spec.checkpoint_timeout


def _first_asked(job: JobView, rule: str, since: float, request: ActionRecord | None) -> float | None:
    """When the sequence asked for its checkpoint first: the earliest of the rule's checkpoint
    requests since its window opened (``since``), up to ``request``, its latest."""
    if request is None:
        return None
    times = [
        a.time
        for a in job.actions
        if a.kind is ActionKind.CHECKPOINT and a.rule == rule and since <= a.time <= request.time
    ]
    return min(times, default=request.time)


def _final(ctx: Context, out: Outcome, rule: str, final: ActionKind, reason: str, *, followup: bool) -> None:
    if not followup and ctx.blocked:
        out.act(
            ActionKind.RECOMMEND,
            rule,
            f"would {reason}; held back: {ctx.blocked}",
            would=final.value,
            held=ctx.blocked,
        )
        return
    out.act(final, rule, reason, followup=followup)


class Abandoned(NamedTuple):
    """A release (or stop) sequence a decision no longer carries on (``abandoned``)."""

    request: ActionRecord
    """its checkpoint request (acknowledged or still pending)"""
    final: ActionKind
    """the step that will not come (``release-quota`` or ``stop``)"""
    why: str


def abandoned(job: JobView, decision: Decision) -> Abandoned | None:
    """The checkpoint-first sequence under way on ``job`` (its checkpoint asked for, acknowledged or
    not yet, no release or stop after it) that ``decision`` no longer carries on: another policy or
    none governs the job now (its policy deleted, or its selector moved away), its policy is no
    longer in Apply mode, or the rule no longer calls for it (an edited window or gate); or the run
    ended (finished or failed) between the acknowledgement and the release, which a controller
    that was down at that moment first sees after its restart. The release that was to follow will
    not come; an adapter records that, once (it marks the request's detail with ``CANCELLED``,
    which ends the sequence for good: ``_own_request``). None when the sequence goes on, ended, or
    the job is evicted, suspended or queued (a pending request is dropped then, which is recorded
    as such)."""
    request = next(
        (
            a
            for a in reversed(job.actions)
            if a.kind is ActionKind.CHECKPOINT and a.reason.startswith(_BEFORE) and a.policy
        ),
        None,
    )
    if (
        request is None
        or request.outcome not in ("requested", "acknowledged")
        or request.detail.startswith(CANCELLED)
    ):
        return None
    over = job.phase in (Phase.FINISHED, Phase.FAILED)
    if not over and (job.phase is not Phase.RUNNING or not job.active):
        return None
    final = last_record(job, _FINAL)
    if final is not None and final.time >= request.time and final.outcome not in ("failed", "impossible"):
        return None
    kind = ActionKind.STOP if request.reason.startswith(f"{_BEFORE}stop") else ActionKind.RELEASE_QUOTA
    if over:
        return Abandoned(request, kind, f"the job {job.phase.value} first")
    policy, rule = request.policy, request.rule
    if decision.policy == policy and decision.mode is Mode.APPLY:
        carried = (
            any(k.split(".", 1)[0] == rule for k in decision.state)
            or any(a.rule == rule for a in decision.actions)
            or any(r.startswith(f"{rule}:") for r in decision.reasons)
        )
        if carried:
            return None
        exempt = next((r for r in decision.reasons if r.startswith("exempt: ")), None)
        why = (
            f"the job is {exempt}, which policy {policy} acts on no more"
            if exempt is not None
            else f"rule {rule} of policy {policy} no longer calls for it"
        )
    elif decision.policy is None:
        why = (
            f"no AdvisorPolicy governs the job any more (policy {policy} was deleted or no longer selects it)"
        )
    elif decision.policy != policy:
        why = f"policy {decision.policy} governs the job now, not {policy}"
    else:
        why = f"policy {policy} is in {decision.mode.value} mode now"
    return Abandoned(request, kind, why)
