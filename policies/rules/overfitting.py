"""Overfitting: a fine-tune whose eval metric stopped improving on its best while it still trains.

The training loss of a fine-tune keeps falling long after the model stopped generalising better:
the plateau rule, reading the training loss, would let it burn its whole budget. This rule reads the
run's learning state (``advisor.forecast.state``): P(overfitting) is P(the judged eval series
improves by less than 1% by the end) times P(the training loss still falls). When it holds at or
above ``probability`` for the ``for`` window the rule recommends, or checkpoints and releases, or
stops, like the plateau rule, and its reason names the step of the best eval value: the checkpoint
the user wants to keep (HF ``load_best_model_at_end`` keeps the same one, when it was saved).

``metric`` names the eval series to judge; empty means the one the learning state judged (the
job's primary eval metric). A job reporting too few evaluations for a verdict gets none.
"""

from __future__ import annotations

from advisor.model import ActionKind, LearningState
from policies.rules.base import NO_DIRECTION, Context, Outcome, dur, held_since, let_finish, pct, undirected
from policies.rules.release import release
from policies.spec import RECOMMEND, STOP, OverfittingRule

NAME = "overfitting"
KEY = "overfitting.since"


def _judged(state: LearningState | None, rule: OverfittingRule, ctx: Context) -> str | None:
    """Why there is no verdict, or None when the state judged the rule's metric."""
    if undirected(rule.metric, ctx.policy.metric_directions):
        return f"{rule.metric} is never judged: {NO_DIRECTION}"
    if state is None:
        return "no learning state yet"
    if state.metric is None:
        return "no eval metric with enough evaluations"
    if rule.metric and rule.metric != state.metric:
        return f"the learning state judges {state.metric}, not {rule.metric}"
    return None


def best_checkpoint_text(state: LearningState) -> str:
    """``best eval_loss 0.512 at step 1000 (4 evaluations ago)``."""
    value = "" if state.best_value is None else f" {state.best_value:.4g}"
    return (
        f"best {state.metric}{value} at step {state.best_step} ({state.evals_since_best} evaluation(s) ago)"
    )


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
    why_not = _judged(state, rule, ctx)
    if why_not is not None or state is None:
        out.reasons.append(f"{NAME}: no judgement ({why_not})")
        return out
    if job.total_steps is not None and job.step >= job.total_steps:
        return out  # finished: nothing left to save
    p = state.probabilities.get("overfitting", 0.0)
    since = held_since(job.rule_state, KEY, ctx.now, p >= rule.probability)
    if since is None:
        return out
    out.state[KEY] = since
    held = ctx.now - since
    best = best_checkpoint_text(state)
    numbers = f"P(overfitting)={pct(p)} >= {pct(rule.probability)} for {dur(held)}; {best}"
    if held < rule.hold:
        out.reasons.append(f"{NAME}: {numbers} (acting after {dur(rule.hold)})")
        out.recheck(since + rule.hold)
        out.advice, out.severity = "overfitting?", 2
        return out
    if let_finish(ctx, out, NAME, rule.hold, numbers):
        return out
    keep = f"keep the checkpoint of step {state.best_step}"
    if rule.action == RECOMMEND:
        out.act(
            ActionKind.RECOMMEND,
            NAME,
            f"overfitting: {numbers}; {keep}, consider stopping or releasing quota",
            would="none",
            best_step=state.best_step,
        )
        out.advice, out.severity = "overfitting", 5
        return out
    final = ActionKind.STOP if rule.action == STOP else ActionKind.RELEASE_QUOTA
    release(ctx, out, rule=NAME, final=final, why=f"overfitting: {numbers}; {keep}", since=since)
    out.advice = "overfitting:stop" if final is ActionKind.STOP else "overfitting:release"
    out.severity = 5
    return out
