"""``decide``: one job, one policy, one instant → one ``Decision``. Pure and deterministic.

The engine owns everything rules must not decide alone:

* the lifecycle gate: only a running, admitted job is judged (``JobView.phase``, derived by the
  core loop from what the cluster says). A finished, failed, suspended or pending job is given to
  no rule at all: it keeps its forecast and history, gets no action (not even a recommendation),
  and its advice is its phase. The one exception is cleanup of the advisor's own mutation: a
  priority boost left on its Workload is dropped (back in the queue the job would jump ahead of
  its equals; on a finished Workload nobody else would ever drop it);
* cleanup (``policies.cleanup``, ``Decision.cleanup``): the advisor's own boost is removed, in any
  mode, once nothing gives it a mandate: the policy recommends only, its guard is off, the job is
  exempt or not running (a job no policy governs: the core loop asks the same module);
* exemption (the policy's ``exemptLabel``): an exempt job gets no action at all;
* the gates: minimum runtime / steps / progress before judging learning, and a forecast strong
  enough to act on (enough points, finite numbers, not mostly dropped data);
* cooldown (per job) and the cap of actions per hour (per policy) for disruptive actions, failed
  attempts included (``policies.rate``); the backoff of a kind of action that failed, and the
  hold on one found impossible on the job as it stands (``policies.retries``);
* staleness (``policies.staleness``): a rule that rests on the forecast neither acts nor
  recommends while the job's newest progress is older than ``safety.maxEvidenceAge`` (or three of
  its report intervals): after an outage the forecast describes the past;
* merging: once a rule releases or stops the job, growth and periodic checkpoints are moot; at
  most one checkpoint, one release/stop and one scale per decision;
* Recommend mode: every action becomes a ``RECOMMEND`` that says what Apply would do.

``Decision.state`` carries the rules' timers (``<rule>.since``) for the caller to pass back as
``JobView.rule_state``.

``Decision.advice`` (the ADVICE printer column) is the label of the most serious rule that spoke:
``diverging`` / ``diverging?``, ``hung`` / ``stalled?``, ``plateau:release`` / ``plateau:stop`` /
``plateau`` (recommend only) / ``plateau?`` (holding, not yet long enough), ``scale-up:N`` /
``scale-down:N``, ``deadline-miss``, ``guard:checkpoint``, ``checkpoint``; else ``continue``,
``observing`` (no forecast yet), ``stale`` (a rule would act, on progress older than the policy
allows), ``exempt``, or the lifecycle phase of a job that is not running
(``finished``, ``failed``, ``suspended``, ``pending``; ``released`` when the advisor released it).
A trailing ``?`` means "condition seen, still waiting".
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from advisor.model import (
    DISRUPTIVE_KINDS,
    Action,
    ActionKind,
    ClusterView,
    Decision,
    Forecast,
    JobView,
    Mode,
    Phase,
)
from policies.cleanup import boost_cleanup
from policies.index import cluster_index
from policies.rate import blocked_by_rate
from policies.retries import held_back, hold_for
from policies.rules import RULES
from policies.rules.base import Context, Outcome, dur, last_record, runtime_gate
from policies.rules.checkpoint import grace_period_action
from policies.rules.guard import boost_to_drop
from policies.rules.stall import finished_but_holding
from policies.spec import Policy
from policies.staleness import RESTS_ON_FORECAST, stale_evidence

__all__ = ["decide", "evaluate_rules", "is_exempt", "judge", "not_running"]

_RELEASES = frozenset({ActionKind.RELEASE_QUOTA, ActionKind.STOP})


def not_running(job: JobView) -> str | None:
    """Why ``job`` may not be judged (it is not running and admitted), or None when it may.

    The one lifecycle gate: ``evaluate_rules`` calls no rule for such a job, so no rule can act
    on it whatever the rule forgets to check."""
    if job.phase is not Phase.RUNNING:
        return f"{job.phase.value}: {job.phase_reason}" if job.phase_reason else job.phase.value
    if not job.active:
        return "inactive: its Workload is deactivated"
    if not job.admitted:
        return "pending: not admitted"
    return None


def is_exempt(job: JobView, policy: Policy) -> bool:
    value = job.labels.get(policy.safety.exempt_label)
    return value is not None and value.strip().lower() != "false"


def judge(job: JobView, policy: Policy, now: float) -> tuple[bool, str]:
    """Whether ``policy`` may judge ``job``'s learning yet (minimum runtime, steps, progress met),
    and why not: warmup looks like anything, and a forecast nobody reads need not be made."""
    s = policy.safety
    young = runtime_gate(job, policy, now)
    if young is not None:
        return False, young
    unseen = unseen_since_admission(job, now)
    if unseen is not None:
        return False, unseen
    if job.step < s.min_steps:
        return False, f"step {job.step} < minSteps {s.min_steps}"
    if s.min_progress > 0 and job.total_steps:
        # without a total, minRuntime and minSteps alone hold judgement: such a job's forecast
        # is read against the curve's asymptote, a stricter test than its own last step
        done = job.step / job.total_steps
        if done < s.min_progress:
            # three digits: rounded to whole percents, 1.7% read "progress 2% < minProgress 2%"
            return False, f"progress {done * 100:.3g}% < minProgress {s.min_progress * 100:.3g}%"
    return True, ""


def unseen_since_admission(job: JobView, now: float) -> str | None:
    """Why the job's learning may not be judged yet after Kueue admitted it (again): no progress
    has reached the adapter since. Its reports describe the run before its eviction; judged on
    them, a job re-admitted within the second was asked for a checkpoint its restarting pods could
    not answer and released 20 s later, before it had run a step. None when it may be judged, or
    when the adapter does not say when progress arrived or when the job was admitted."""
    if job.admitted_at is None or job.progress_seen_at is None or job.progress_seen_at >= job.admitted_at:
        return None
    return f"admitted {dur(max(now - job.admitted_at, 0.0))} ago and no progress reported since"


def judged_from(
    policy: Policy,
    *,
    started_at: float,
    step: float,
    total_steps: int | None,
    steps_per_second: float | None,
    now: float,
) -> float | None:
    """When ``judge`` will first let ``policy`` judge a job that keeps its pace: its minimum
    runtime passed and the step, projected at ``steps_per_second``, past ``minSteps`` and
    ``minProgress`` (when the total is known). None when that cannot be projected (throughput
    unknown). A policy with a stall rule speaks of a job once its minimum runtime has passed
    (``rules.base.runtime_gate``): before then, that is the time (the look then arms the stall
    rule's watchdog, which brings the next one if the job stops).
    A caller that looks at jobs on its own schedule (the simulator) need not look before then."""
    s = policy.safety
    at = started_at + s.min_runtime
    stall = policy.rules.stall
    if stall is not None and stall.enabled and at > now:
        return at  # the stall rule may speak from then on; its watchdog then says when to look
    need = float(s.min_steps)
    if s.min_progress > 0 and total_steps:
        need = max(need, math.ceil(s.min_progress * total_steps))
    if need > step:
        if not steps_per_second:
            return None
        at = max(at, now + (need - step) / steps_per_second)
    return at


def _judged_eval(job: JobView, metric: str = "") -> tuple[str, Forecast] | None:
    """The eval metric the run state judges the job by and its forecast (``LearningState.judged``),
    or ``metric``'s when the job reports it: the series a plateau rule names is the one its
    ``continue`` is read against."""
    state = job.learning_state
    if state is None:
        return None
    if metric in state.series:
        return metric, state.series[metric]
    return state.judged()


def _odds(ctx: Context) -> str:
    """The probabilities a ``continue`` is read against: of the series the job is judged by (an
    eval metric's P(plateau) is what PLATEAU shows; the training loss's, alone, read "P(plateau)
    0.00" beside a PLATEAU of 62%), with the training loss's beside it when the job reports one."""
    plateau_rule = ctx.policy.rules.plateau
    fc, judged = ctx.forecast, _judged_eval(ctx.job, plateau_rule.metric if plateau_rule is not None else "")
    if judged is None:
        assert fc is not None  # (a job with neither is observed, not continued)
        plateau = f"P(plateau) {fc.plateau_probability:.2f}"
    elif fc is None:  # a job that reports eval metrics alone
        plateau = f"{judged[0]} P(plateau) {judged[1].plateau_probability:.2f}"
    else:
        plateau = (
            f"{judged[0]} P(plateau) {judged[1].plateau_probability:.2f}, "
            f"training loss P(plateau) {fc.plateau_probability:.2f}"
        )
    diverging = fc.divergence_probability if fc is not None else judged[1].divergence_probability  # type: ignore[index]
    return f"{plateau}, P(diverging) {diverging:.2f}"


def _forecast(job: JobView, policy: Policy) -> tuple[Forecast | None, str]:
    fc = job.forecast
    if fc is None:
        if job.last_loss is None and job.learning_state is not None:
            return None, "no training loss reported: judged by its eval metrics alone"
        return None, "no forecast"
    try:
        finite = math.isfinite(fc.final_loss.mean)
        in_range = 0.0 <= fc.plateau_probability <= 1.0 and 0.0 <= fc.divergence_probability <= 1.0
    except TypeError:
        return None, "forecast has non-numeric fields"
    if not finite:
        return None, "forecast has a non-finite final loss"
    if not in_range:  # NaN compares false, so it lands here too
        return None, "forecast probabilities are not in [0, 1]"
    if fc.n_points < policy.safety.min_forecast_points:
        return (
            None,
            f"forecast on {fc.n_points} points < minForecastPoints {policy.safety.min_forecast_points}",
        )
    if fc.n_dropped > fc.n_points:
        return None, f"forecast dropped {fc.n_dropped} of {fc.n_points + fc.n_dropped} points"
    if fc.eta_seconds is not None and not math.isfinite(fc.eta_seconds.p90):
        fc = dataclasses.replace(fc, eta_seconds=None)
    return fc, ""


def _recommend(action: Action) -> Action:
    if action.kind is ActionKind.RECOMMEND:
        return action
    reason = (
        action.reason if action.reason.startswith("would ") else f"would {action.kind.value}: {action.reason}"
    )
    params: dict[str, Any] = {"would": action.kind.value, **action.params}
    return Action(kind=ActionKind.RECOMMEND, rule=action.rule, reason=reason, params=params)


def _merge(outcomes: list[tuple[str, Outcome]]) -> list[Action]:
    """One coherent list: the most serious releasing rule owns the job; the rest is cleanup only."""
    owner = next((o for _, o in outcomes if o.terminal), None)
    moot_kinds = (ActionKind.SCALE, ActionKind.CHECKPOINT, ActionKind.BOOST_PRIORITY)
    moot = {k.value for k in moot_kinds}
    actions: list[Action] = []
    seen: set[ActionKind] = set()
    for name, o in outcomes:
        for a in o.actions:
            if owner is not None and o is not owner:
                # another rule releases the job: its sequence brings its own checkpoint, growth and
                # boosts are moot, and a second release is never added; dropping a boost still is
                if o.terminal or a.kind in moot_kinds:
                    continue
                if a.kind is ActionKind.RECOMMEND and a.params.get("would") in moot:
                    continue
            key = ActionKind.RELEASE_QUOTA if a.kind is ActionKind.STOP else a.kind
            if key is not ActionKind.RECOMMEND and key in seen:
                continue
            if a.kind is ActionKind.SCALE and name == "elastic" and ActionKind.SCALE in seen:
                continue
            seen.add(key)
            actions.append(a)
    return actions


def evaluate_rules(
    job: JobView, cluster: ClusterView, policy: Policy, *, now: float
) -> tuple[Context, list[tuple[str, Outcome]]]:
    """Each enabled rule's own outcome, before merging and Recommend mode (for ``explain``).

    Exempt jobs are not special-cased here; ``decide`` never calls this for them.
    """
    if not math.isfinite(now):
        raise ValueError(f"now must be finite, got {now!r}")
    apply = policy.mode is Mode.APPLY
    gate = not_running(job)
    if gate is not None:
        ctx = Context(
            job=job,
            cluster=cluster,
            policy=policy,
            now=now,
            apply=apply,
            judge=False,
            judge_reason=f"job is {gate}",
            forecast=None,
            forecast_reason="job not running",
            blocked=None,
        )
        return ctx, []
    judged, judge_reason = judge(job, policy, now)
    fc, fc_reason = _forecast(job, policy)
    ctx = Context(
        job=job,
        cluster=cluster,
        policy=policy,
        now=now,
        apply=apply,
        judge=judged,
        judge_reason=judge_reason,
        forecast=fc,
        forecast_reason=fc_reason,
        # in Recommend mode too: a cooldown or cap that real actions started (an earlier Apply, a
        # resume) holds what Apply would do, and the recommendation says so (a Recommend trial read
        # "plateau:release (recommended)" where Apply, seconds later, read "plateau:held")
        blocked=blocked_by_rate(job, cluster, policy, now),
    )
    outcomes: list[tuple[str, Outcome]] = []
    for name, module, attr in RULES:
        spec = getattr(policy.rules, attr)
        if spec is None or not spec.enabled:
            continue
        outcomes.append((name, module.evaluate(ctx, spec)))
    return ctx, outcomes


def decide(job: JobView, cluster: ClusterView, policy: Policy, *, now: float) -> Decision:
    """What ``policy`` says about ``job`` at ``now``: pure (no clock, no I/O), deterministic."""
    if not math.isfinite(now):
        raise ValueError(f"now must be finite, got {now!r}")
    if is_exempt(job, policy):
        label = policy.safety.exempt_label
        exempt = f"exempt: label {label}={job.labels[label]}"
        drop = boost_cleanup(job, cluster, now, why=f"the job is {exempt}")
        return Decision(
            job=job.key,
            policy=policy.name,
            mode=policy.mode,
            advice="exempt",
            reasons=(exempt,),
            cleanup=(drop,) if drop is not None else (),
        )
    ctx, outcomes = evaluate_rules(job, cluster, policy, now=now)
    if not_running(job) is not None:
        return _idle(job, cluster, policy, ctx, now)
    actions = _merge(outcomes)
    cleanup = _no_mandate(job, cluster, policy, now)
    if cleanup:  # the removal is done, not recommended
        actions = [a for a in actions if a.params.get("would") != ActionKind.DROP_BOOST.value]
    reasons: list[str] = []
    stale = stale_evidence(job, policy, now)
    held_stale = False
    refused: set[ActionKind] = set()
    if stale is not None:
        kept = [a for a in actions if a.rule not in RESTS_ON_FORECAST]
        for a in actions:
            if a.rule in RESTS_ON_FORECAST:
                reasons.append(f"{a.rule}: not acted on, {stale} (wanted: {a.reason})")
        held_stale = len(kept) < len(actions)
        actions = kept
    rechecks = [o.recheck_at for _, o in outcomes if o.recheck_at is not None]
    if ctx.apply:
        actions = held_back(job, actions, now, reasons, rechecks, refused)
    else:
        actions = [_recommend(a) for a in actions]
    if not ctx.judge:
        reasons.append(f"no judgement yet: {ctx.judge_reason}")
    for a in actions:
        reasons.append(f"{a.rule}: {a.reason}")
    for _, o in outcomes:
        reasons.extend(o.reasons)
    state: dict[str, float] = {}
    for _, o in outcomes:
        state.update(o.state)
    best = max((o for _, o in outcomes if o.advice), key=lambda o: o.severity, default=None)
    if held_stale:
        advice = "stale"  # a rule wants to act, on progress older than the policy allows
    elif best is not None:
        advice = best.advice
    elif (ctx.forecast is None and _judged_eval(job) is None) or not ctx.judge:
        advice = "observing"  # nothing judged yet: "continue" would claim a verdict
        if ctx.judge:  # (without judgement, "no judgement yet" above says why)
            reasons.append(f"observing: {ctx.forecast_reason}")
    elif stale is not None:
        # no rule wants anything, but of a run whose progress stopped arriving: "continue" would
        # vouch for it on old news (a job silent for minutes under a policy without a stall rule
        # read "continue" with the ETA of its last forecast)
        advice = "stale"
        reasons.append(f"stale: {stale}; no rule's condition held on the last progress ({_odds(ctx)})")
    else:
        advice = "continue"
        reasons.append(
            f"continue: no rule's condition holds ({_odds(ctx)}, step {job.step}"
            + (f" of {job.total_steps})" if job.total_steps else ")")
        )
    acting = best is not None and advice == best.advice and not advice.endswith("?")
    if acting and any(a.kind is ActionKind.RECOMMEND and a.params.get("held") for a in actions):
        # the rule's action is held back (cooldown, the policy's cap): ADVICE says so, not that
        # the job is being released; the reasons say by what (the stall rule's "hung", which has
        # no ":", read "hung" while the policy's cap held its release: a platform trial)
        advice = advice.split(":", 1)[0] + ":held"
    elif acting and refused & DISRUPTIVE_KINDS:
        # the rule's release, stop or resize was refused (a 403, no Workload) and waits for the job
        # to change or its backoff: "plateau:release" read as a release under way (a platform trial)
        advice = advice.split(":", 1)[0] + ":failed"
    watchdogs = [o.idle_recheck_at for _, o in outcomes if o.idle_recheck_at is not None]
    return Decision(
        job=job.key,
        policy=policy.name,
        mode=policy.mode,
        actions=tuple(actions),
        reasons=tuple(reasons),
        state=state,
        advice=advice,
        recheck_at=min(rechecks) if rechecks else None,
        idle_recheck_at=min(watchdogs) if watchdogs else None,
        cleanup=cleanup,
        judged=ctx.judge,
    )


def _no_mandate(job: JobView, cluster: ClusterView, policy: Policy, now: float) -> tuple[Action, ...]:
    """The removal of the advisor's own boost on a running job whose policy gives it no mandate to
    keep one: the policy recommends only, or its preemption guard (the one rule that sets and drops
    boosts) is off. Left there, the boost would reorder Kueue's victims with no rule to drop it."""
    guard = policy.rules.preemption_guard
    if policy.mode is not Mode.APPLY:
        why = f"policy {policy.name} is in {policy.mode.value} mode"
    elif guard is None or not guard.enabled:
        why = f"policy {policy.name} has no preemptionGuard rule enabled"
    else:
        return ()
    drop = boost_cleanup(job, cluster, now, why=why)
    return (drop,) if drop is not None else ()


def _idle(job: JobView, cluster: ClusterView, policy: Policy, ctx: Context, now: float) -> Decision:
    """The decision on a job that is not running: no rule spoke, nothing is done but dropping a
    priority boost the advisor left on its Workload, and setting the grace period of a waiting
    TrainJob for its next start (``checkpoint.grace_period_action``: the only moment the Trainer
    API allows it), in Apply mode (in Recommend mode the grace period is a recommendation).
    Neither stops, releases or changes what the job runs.

    The boost's mandate ends with the run (``policies.cleanup``): in the queue it would jump ahead
    of its equals, and on a finished Workload nobody would ever drop it. Its removal is cleanup in
    any mode. A boost the advisor did not set (``policies.cleanup.own_boost``) is never touched."""
    gate = ctx.judge_reason
    actions: list[Action] = []
    cleanup: list[Action] = []
    w = cluster_index(cluster).by_job.get(job.key)
    # acknowledged, or evicted; never "no acknowledgement after ...": the run's end is the reason
    why = (
        boost_to_drop(job, w, now, drop_after=math.inf) if w is not None else None
    ) or "the job is not running"
    drop = boost_cleanup(job, cluster, now, why=f"{why} ({gate})")
    queued = ctx.apply and job.phase not in (Phase.FINISHED, Phase.FAILED)
    if drop is not None:
        (actions if queued else cleanup).append(drop)
    grace = policy.rules.checkpoint
    if grace is not None and grace.enabled and hold_for(job, ActionKind.SET_GRACE_PERIOD, now) is None:
        action = grace_period_action(ctx, grace)
        if action is not None:
            actions.append(action)
    released = last_record(job, _RELEASES)
    advice = job.phase.value if job.phase is not Phase.RUNNING else ("pending" if job.active else "suspended")
    if advice == Phase.SUSPENDED.value and released is not None and released.outcome == "done":
        advice = "released"
    recheck: float | None = None
    stall = policy.rules.stall
    if stall is not None and stall.enabled and not is_exempt(job, policy):
        # a run reported done that still holds its quota: said, never acted on (see the rule)
        held = finished_but_holding(ctx, stall)
        actions.extend(held.actions)
        advice = held.advice or advice
        recheck = held.recheck_at
    return Decision(
        job=job.key,
        policy=policy.name,
        mode=policy.mode,
        actions=tuple(actions),
        reasons=(f"not judged: {gate}",),
        advice=advice,
        cleanup=tuple(cleanup),
        recheck_at=recheck,
    )
