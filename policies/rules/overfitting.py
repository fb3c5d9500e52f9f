"""Overfitting: a fine-tune whose eval metric stopped improving on its best while it still trains.

The training loss of a fine-tune keeps falling long after the model stopped generalising better:
the plateau rule, reading the training loss, would let it burn its whole budget. This rule reads the
run's learning state (``advisor.forecast.state``): P(overfitting) is P(the judged eval series
improves by less than 1% by the end) times P(the training loss still falls). When it holds at or
above ``probability`` for the ``for`` window the rule recommends, or checkpoints and releases, or
stops, like the plateau rule, and its reason names the step of the best eval value: the checkpoint
the user wants to keep (HF ``load_best_model_at_end`` keeps the same one, when it was saved).

``metric`` names the eval series to judge; empty means the one the learning state judged (the
job's primary eval metric). Another eval metric the job reports is judged on its own as the state
would judge it (``LearningState.judgements``: its P(overfitting), its best step). A job reporting
too few evaluations of it for a verdict gets none.

Like the plateau rule on an eval series, the rule acts only on an evaluation after the one its
window opened on (``OPENED_ON_KEY``): between two evaluations the series brings no new evidence,
however often the run is looked at.
"""

from __future__ import annotations

from advisor.model import ActionKind, EvalJudgement, LearningState
from advisor.series import eval_step_span
from policies.rules.base import (
    NO_DIRECTION,
    Context,
    Outcome,
    dur,
    held_since,
    let_finish,
    new_evaluation,
    overfitting_odds,
    pct,
    task_still_improving,
    undirected,
    waiting_text,
)
from policies.rules.release import release
from policies.spec import RECOMMEND, STOP, OverfittingRule

#: the evaluation (its step) the window opened on: the rule acts only on a later one
OPENED_ON_KEY = "overfitting.openedOn"
NAME = "overfitting"
KEY = "overfitting.since"


def _judged(
    state: LearningState | None, rule: OverfittingRule, ctx: Context
) -> tuple[str, EvalJudgement] | str:
    """(the metric judged, its judgement), or why there is no verdict. An empty ``metric`` is the
    one the state judged; another eval metric the job reports is judged on its own, as the state
    would judge it (its best, P(overfitting) by it)."""
    if undirected(rule.metric, ctx.policy.metric_directions):
        return f"{rule.metric} is never judged: {NO_DIRECTION}"
    if state is None:
        return "no learning state yet"
    name = rule.metric or state.metric
    if name is None:
        return "no eval metric with enough evaluations"
    judgement = state.judgement(name)
    if judgement is None:
        return f"no forecast of {name} (not reported, or too few evaluations)"
    return name, judgement


def best_checkpoint_text(state: LearningState, metric: str | None = None) -> str:
    """``best eval_loss 0.512 at step 1000 (4 evaluations ago)``: of ``metric`` (default: the one
    the state judged)."""
    name = metric or state.metric
    j = state.judgement(name) or state.judgement()
    step, value, since = (j.best_step, j.best_value, j.evals_since_best) if j is not None else (None, None, 0)
    shown = "" if value is None else f" {value:.4g}"
    where = f"at step {step}" if step is None or j is None else eval_step_span(step, j.best_made_after)
    return f"best {name}{shown} {where} ({since} evaluation(s) ago)"


def checkpoint_of(judgement: EvalJudgement) -> str:
    """``of step 3000``, or ``saved between steps 2951 and 3021`` when the job reports no eval
    step (``advisor.series.eval_step_span``): the checkpoint a reason tells the user to keep."""
    step = judgement.best_step
    if step is None or judgement.best_made_after is None:
        return f"of step {step}"
    return f"saved {eval_step_span(step, judgement.best_made_after)}"


def past_best_keep(state: LearningState, series: str) -> tuple[str, bool | None]:
    """(what to keep, whether to checkpoint first: None as the policy says) for a release of a run
    whose eval ``series`` is past its best.

    Its weights now are past that best, and a save of them may rotate out (``save_total_limit``)
    the checkpoint worth keeping, so none is taken; unless the run state reads a task's score
    beside the series (``LearningState.task_metric``) whose best came later: an eval loss turned up
    from over-confidence while the accuracy went on rising. Then the later checkpoint is named
    too, and when the score's best is its latest evaluation the weights now are that best, saved
    first as the policy saves before any release (``quotaRelease.checkpointFirst``). A platform
    trial's run, its eval loss best at step 3,070 and its accuracy best (0.954) at the latest
    evaluation, was released with no save, told to keep step 3,070 (accuracy 0.77)."""
    own = state.judgement(series)
    step = own.best_step if own is not None else None
    at = checkpoint_of(own) if own is not None else f"of step {step}"
    if own is not None and own.evals_since_best == 0:
        # its latest evaluation is its best, by noise alone: the weights now are that best, saved
        # first as the policy saves before any release
        return f"keep the checkpoint {at} (the best evaluation, the latest: the weights now)", None
    keep = (
        f"keep the checkpoint {at} (the best evaluation; if none was saved there, the best-evaluated "
        "one saved)"
    )
    task = state.task_metric
    score = state.judgement(task) if task is not None and task != series else None
    if score is None or score.best_step is None or step is None or score.best_step <= step:
        return f"{keep}; no checkpoint taken (its weights are past the best evaluation)", False
    value = "" if score.best_value is None else f" {score.best_value:.4g}"
    if score.evals_since_best == 0:
        return (
            f"keep the checkpoint {at} (the best {series}) or one of the weights now (the "
            f"best {task},{value} at step {score.best_step}, its latest evaluation)"
        ), None
    return (
        f"keep the checkpoint {at} (the best {series}) or {checkpoint_of(score)} (the best "
        f"{task},{value}); no checkpoint taken (its weights are past both)"
    ), False


def evaluate(ctx: Context, rule: OverfittingRule) -> Outcome:
    out = Outcome()
    job = ctx.job
    if not ctx.judge:
        return out
    if ctx.forecast is None:
        # the same gate as every forecast-based rule: too few points, a weak or broken forecast
        out.reasons.append(f"{NAME}: no judgement ({ctx.forecast_reason})")
        return out
    state = job.learning_state
    judged = _judged(state, rule, ctx)
    if isinstance(judged, str) or state is None:
        out.reasons.append(f"{NAME}: no judgement ({judged})")
        return out
    metric, judgement = judged
    if job.total_steps is not None and job.step >= job.total_steps:
        return out  # finished: nothing left to save
    p = overfitting_odds(state, rule.metric, metric, judgement.overfitting)
    opened = KEY in job.rule_state
    since = held_since(job.rule_state, KEY, ctx.now, p >= rule.probability)
    if since is None:
        task = task_still_improving(state, rule.metric, metric)
        if task is not None and judgement.overfitting >= rule.probability:
            out.reasons.append(
                f"{NAME}: {metric} past its best (P(overfitting)={pct(judgement.overfitting)} by it alone), "
                f"but {task[0]} still improves (P(plateau)={pct(task[1])}): P(overfitting)={pct(p)}"
            )
        return out
    out.state[KEY] = since
    fresh = new_evaluation(ctx, out, OPENED_ON_KEY, opened, state.series.get(metric))
    held = ctx.now - since
    best = best_checkpoint_text(state, metric)
    numbers = f"P(overfitting)={pct(p)} >= {pct(rule.probability)} for {dur(held)}; {best}"
    if held < rule.hold:
        waits_on = None if fresh else out.state.get(OPENED_ON_KEY)
        out.reasons.append(f"{NAME}: {numbers} ({waiting_text(rule.hold, metric, waits_on)})")
        out.recheck(since + rule.hold)
        out.advice, out.severity = "overfitting?", 2
        return out
    if not fresh:
        # between two evaluations the eval series brings no new evidence: act on a later one
        out.reasons.append(f"{NAME}: {numbers} (acting at the next evaluation of {metric})")
        out.advice, out.severity = "overfitting?", 2
        return out
    if let_finish(ctx, out, NAME, rule.hold, numbers):
        return out
    # the best evaluation's step: a checkpoint was saved there only if a save fell on it, which
    # the job does not report (a trainer saving every 100 steps and evaluating every 50 had none
    # at step 350), so the reason says what to keep then
    keep = (
        f"keep the checkpoint {checkpoint_of(judgement)} (the best evaluation; if none was saved "
        f"there, the best-evaluated one saved)"
    )
    if rule.action == RECOMMEND:
        out.act(
            ActionKind.RECOMMEND,
            NAME,
            f"overfitting: {numbers}; {keep}, consider stopping or releasing quota",
            would="none",
            best_step=judgement.best_step,
        )
        out.advice, out.severity = "overfitting", 5
        return out
    final = ActionKind.STOP if rule.action == STOP else ActionKind.RELEASE_QUOTA
    # no save first (``past_best_keep``), unless a task's score read beside it is at its best now
    keep, first = past_best_keep(state, metric)
    why = f"overfitting: {numbers}; {keep}"
    release(ctx, out, rule=NAME, final=final, why=why, since=since, checkpoint_first=first)
    out.advice = "overfitting:stop" if final is ActionKind.STOP else "overfitting:release"
    out.severity = 5
    return out
