"""Stall: no step advance for the ``for`` window; a hung collective looks exactly like this.

Measured from the time the step last changed (or the job started), so it needs no forecast, and
never from before the job's current admission: a run preempted (or requeued) and admitted again
after a long wait has not been stuck while it waited in the queue, and its first progress report
comes only after its restart. It waits for the policy's ``minRuntime`` only, not for ``minSteps``
or ``minProgress``: a collective that hangs at start-up never reaches them. The reason says
whether progress reports still arrive with a stuck step (hung training) or stopped arriving
altogether (which may also be a broken reporter). By default no checkpoint is requested first: a
hung process cannot answer one.

A job whose latest progress report has no readable step (a reporter writing garbage) is not
judged either: reports still arrive, so nothing says the run is stuck, and the step it is at is
unknown.

A silence most running jobs share (their latest reports within half a window of each other) is
not judged either: the path that carries the reports broke, not each run
(``policies.shared_silence``); the advice says ``progress-outage``.

A job that has never reported progress, readable or not, is not judged at all: without a report
nothing tells a run that hangs at start-up from one that has no progress source (Kubeflow Trainer's
``TrainJobStatus`` gate is off by default, and a job without the training callback never
reports), and releasing every job of the second kind is the worse mistake. Once a job has reported,
a restart that hangs before its next report is judged as any stall.
"""

from __future__ import annotations

from advisor.model import MALFORMED_BACKS, ActionKind, JobView, Phase, latest_report
from policies.rules.base import Context, Outcome, admitted_at, dur, last_record, runtime_gate
from policies.rules.release import release
from policies.shared_silence import shared_silence
from policies.spec import RECOMMEND, StallRule

NAME = "stall"
#: the last look at which the job's silence was shared (``policies.shared_silence``): once it is
#: no longer shared, the job's silence is counted from then, not from before the outage
SHARED_KEY = "stall.sharedSilence"
_RELEASES = frozenset({ActionKind.RELEASE_QUOTA, ActionKind.STOP})


def evaluate(ctx: Context, rule: StallRule) -> Outcome:
    out = Outcome()
    job, now = ctx.job, ctx.now
    # not the learning gate (minSteps, minProgress): a run stuck before them never reaches them
    if runtime_gate(job, ctx.policy, now) is not None or not job.active or not job.admitted:
        return out
    if job.total_steps is not None and job.step >= job.total_steps:
        return out
    if job.last_sample_time is None and job.unreadable_report_at is None:
        # (reports that could not be read are reports: a job whose reporter writes garbage from its
        # first report read "no progress report seen yet" and ADVICE "observing", a young healthy
        # job, after 480 of them)
        out.reasons.append(
            f"{NAME}: no progress report seen yet: not judged (a job without a progress source is "
            "never called stalled)"
        )
        return out
    # the latest report of any kind, readable or not: while one came within the window, reports
    # still arrive; once none has for a whole window, the job is silent, however its last
    # reports read (a reporter whose step broke, then a hang, held its GPUs with "reports arrive")
    latest = latest_report(job.last_sample_time, job.unreadable_report_at)
    if latest is None:  # not reached: one of them is set (above)
        return out
    quiet = max(now - latest, 0.0)
    malformed = job.backwards_reports >= MALFORMED_BACKS
    if (job.unreadable_report_at is not None or malformed) and quiet < rule.hold:
        out.watchdog(latest + rule.hold)  # judged as silent then, unless another report comes
        if job.unreadable_report_at is not None:
            # reports arrive, but no step can be read from them (a reporter writing garbage): the
            # run is not known to be stuck, and a release would cost its work for a reporter's bug
            out.reasons.append(
                f"{NAME}: progress reports arrive but no step can be read from them (the latest "
                f"{dur(max(now - job.unreadable_report_at, 0.0))} ago; see the progress warnings): not judged"
            )
            out.advice, out.severity = "unreadable-progress", 3
            return out
        # the step goes back report after report (a reporter counting down, or garbled): reports
        # arrive and the step changes, so the run is neither silent nor known to be stuck, and
        # its steps say nothing of progress: said, not judged
        out.reasons.append(
            f"{NAME}: progress reports arrive but their step keeps going backwards ({job.backwards_reports} "
            f"reports in a row, no progress between them, the latest {dur(quiet)} ago; see the "
            "forecast's warnings): not judged"
        )
        out.advice, out.severity = "malformed-progress", 3
        return out
    blind = ctx.cluster.api_unreachable_since
    if blind is not None and blind <= now:
        # the controller cannot reach the API server: no report could arrive, whatever the job
        # does (an outage read every job as hung: 150 "would release: stalled" in a minute)
        out.reasons.append(
            f"{NAME}: the controller has not reached the API server for {dur(now - blind)}: a silence "
            "it cannot see is not judged"
        )
        return out
    if quiet >= rule.hold / 2:
        shared = shared_silence(ctx.cluster, job.key, latest, now, rule.hold / 2)
        if shared is not None:
            out.state[SHARED_KEY] = now
            # most running jobs went silent with this one: their reports' path broke, not each run
            # (a blackout of the trainer's status server released every job it silenced)
            out.reasons.append(
                f"{NAME}: no progress report for {dur(quiet)}, but {shared.silent} of the "
                f"{shared.reporting} running jobs that report went silent within {dur(rule.hold / 2)} "
                "of it: a silence most jobs share points at the progress path (the trainer's status "
                "server, a poller, the network), not at each run: not judged while it is shared"
            )
            out.advice, out.severity = "progress-outage", 3
            out.watchdog(now + rule.hold / 2)  # once fewer share it (jobs deleted or reporting again)
            return out
    since = job.last_step_change if job.last_step_change is not None else job.started_at
    # nor, for a job released and then reactivated (``resume``) with its Workload's admission
    # kept, from before it ran again: it was not stuck while suspended. (Its running phase alone
    # is no mark: a controller that first sees a job stamps it then, and a hung job would gain a
    # whole window.)
    released = last_record(job, _RELEASES)
    resumed = (
        job.phase_since
        if released is not None
        and released.outcome == "done"
        and job.phase_since is not None
        and released.time <= job.phase_since
        else None
    )
    # nor from before the controller reached the API server again after an outage: no report
    # could arrive meanwhile, and a long outage would read every job as hung at once; nor from
    # before a silence most running jobs shared ended (the progress path's outage, its last look
    # kept until a report comes after it): a job that reports less often than the others was
    # released seconds after it ended, judged on the outage as its own silence
    shared_mark = job.rule_state.get(SHARED_KEY)
    if shared_mark is not None and shared_mark <= now and shared_mark >= latest:
        out.state[SHARED_KEY] = shared_mark
    else:
        shared_mark = None
    for mark in (admitted_at(ctx), resumed, ctx.cluster.api_sight_since, shared_mark):
        if mark is not None and mark <= now:
            since = mark if since is None else max(since, mark)
    if since is None or since > now:
        return out
    idle = now - since
    if idle < rule.hold / 2:
        out.watchdog(since + rule.hold)  # when it would act if nothing moves; no earlier look needed
        return out
    if job.last_sample_time is not None and _reports_still_arrive(job, now, idle):
        detail = (
            f"step stuck at {job.step} for {dur(idle)} while progress reports still arrive "
            f"(last {dur(now - job.last_sample_time)} ago)"
        )
    elif job.unreadable_report_at is not None or malformed:
        # silent for a whole window after reports that could not be read or went backwards
        what = "unreadable" if job.unreadable_report_at is not None else "going backwards"
        detail = (
            f"no progress report of any kind for {dur(quiet)}, the last ones {what}, and no step "
            f"advance for {dur(idle)} (step {job.step})"
        )
    elif job.last_sample_time is not None and now - job.last_sample_time < 0.9 * idle:
        # reports came since the step last moved, at a slower pace than the run's usual one (a
        # poller that rewrites the same step): said as it is, not as a silence
        detail = (
            f"no step advance for {dur(idle)} (step {job.step}), the last progress report "
            f"{dur(max(now - job.last_sample_time, 0.0))} ago"
        )
    else:
        detail = f"no step advance and no progress report for {dur(idle)} (step {job.step})"
    if idle < rule.hold:
        out.reasons.append(f"{NAME}: {detail} (acting after {dur(rule.hold)})")
        out.watchdog(since + rule.hold)
        out.advice, out.severity = "stalled?", 3
        return out
    out.advice, out.severity = "hung", 7
    if rule.action == RECOMMEND:
        out.act(ActionKind.RECOMMEND, NAME, f"stalled: {detail}; consider releasing its quota", would="none")
        return out
    release(
        ctx,
        out,
        rule=NAME,
        final=ActionKind.RELEASE_QUOTA,
        why=f"stalled: {detail}",
        since=since,
        checkpoint_first=rule.checkpoint_first,
    )
    return out


def _reports_still_arrive(job: JobView, now: float, idle: float) -> bool:
    """Whether reports kept coming at the stuck step: the last one is recent, within a few of the
    run's report intervals (half the idle time when the interval is unknown). One that came a
    second after the step's last change is no sign of a live reporter."""
    if job.last_sample_time is None:
        return False
    quiet = now - job.last_sample_time
    interval = job.report_interval_s
    recent = 3.0 * interval if interval is not None and interval > 0 else 0.5 * idle
    return quiet < min(recent, 0.5 * idle)


def finished_but_holding(ctx: Context, rule: StallRule) -> Outcome:
    """A run its trainer reported done (100%, its last step) whose Workload still holds its quota
    a whole ``for`` window later: its final save, upload or teardown hangs, or its pods never
    exit, and nothing in Kubernetes says so. Only recommended, in any mode: the run is not
    running, so nothing may act on it, and a release could cut a final save short. Repeated no
    more than a recommendation is (the actuator's own bound)."""
    out = Outcome()
    job, now = ctx.job, ctx.now
    if job.phase is not Phase.FINISHED or not job.holds_quota or job.phase_since is None:
        return out
    held = now - job.phase_since
    if held < rule.hold:
        out.recheck(job.phase_since + rule.hold)
        return out
    out.advice, out.severity = "done-holding", 5
    gpus = f"its {job.gpus} GPU(s)" if job.gpus else "its quota"
    if job.signals is not None and job.signals.deleting:
        # deleted, not done: what holds it is a finalizer (or a foreground deletion's dependents)
        out.act(
            ActionKind.RECOMMEND,
            NAME,
            f"being deleted for {dur(held)} but its Workload still holds {gpus}: a finalizer (or a "
            "foreground deletion's dependents) keeps the job; check its metadata.finalizers",
            would="none",
        )
        return out
    out.act(
        ActionKind.RECOMMEND,
        NAME,
        f"reported done {dur(held)} ago ({job.phase_reason or 'finished'}) but its Workload still "
        f"holds {gpus}, with no Complete condition: check its final save or teardown, or delete the "
        "job once its model is saved",
        would="none",
    )
    return out
