"""Plateau: stop burning quota on a run that no longer learns.

Fires when the forecast has found the run plateaued for the whole ``for`` window, then recommends,
or checkpoints and releases the quota, or stops, per policy.

What "found plateaued" means, and why:

* The window opens when ``plateau_probability`` reaches the rule's ``probability``, and the rule
  acts only if it is at or above it again when the window has run its course.
* In between, the window stays open while the forecast still finds the plateau more likely than not
  (P(plateau) > 0.5). A single re-fit that wobbles from 0.99 to 0.8 is noise of the fit, not news
  about the run; letting it restart the window made the rule slower the more often the run was
  looked at.
* One forecast at or below even odds between agreeing ones is such noise too: on flat constant-LR
  runs the fit swings 0.99 -> 0.3 -> 1.0 from one re-fit to the next. The window survives it and
  restarts only when the *next* forecast (a fit of new data, told apart by its last step) is still
  at or below even odds, or when the forecast is too weak to trust or has the loss rising (below).
  While one forecast dissents the rule never acts: it acts only on a forecast at or above
  ``probability``. (Measured on the simulator's default scenario, five seeds, ``for: 10m``:
  restarting at every such dip left 6 to 39 more non-learning GPU-hours per seed, 1-6% of them,
  for no fewer wrong stops.)
* P(plateau) is the probability that less than 1% improvement is left, so a forecast predicting the
  series to *rise* counts as a plateau too. On the training loss, which the forecaster holds does
  not turn, a rising prediction is a fit not following the curve (it happens, for instance, while
  the learning rate is annealed and the loss is falling fastest), so it is not taken as evidence
  there: the predicted final loss must stay within the same 1% band above the current level
  (``FLAT_BAND``); a training loss rising for real is the divergence rule's business. On an eval
  metric, a series that does turn, the rise is the finding: an eval loss climbing past its best
  while the training loss is flat is neither overfitting (the training loss no longer falls) nor
  a divergence, and without this no rule judged it. The reason then names the step of the best
  eval value, the checkpoint to keep.
* On an eval series the rule acts only on an evaluation after the one its window opened on
  (``OPENED_ON_KEY``, ``base.new_evaluation``). The controller re-forecasts at every report, and
  between two evaluations the eval series brings no new evidence: a wall-time window could open and
  pass on a single evaluation of a run that reports no planned steps. (Measured in the simulator at
  the controller's pace, tuning seeds 0-14 with labels: eval-judged runs released on their first few
  evaluations with 2-58% still to gain were 15 of 29 wrong stops at 1%; with the rule 5 of 19, for
  1.2 points of savings.)
* A release that would keep only an older checkpoint (its checkpoint request timed out, say because
  the job was preempted meanwhile and rolled back) is held when the loss logged at that checkpoint
  is more than 1% above the current one (``JobView.checkpoint_loss``): the plateau was found at the
  latest report, the checkpoint still had learning left. The window starts over, on what the run
  reports once it runs again and can save first. (Found in the trace simulator, where such a
  release was the one wrong stop over 15 seeds with ``for: 10m``.)
* Once the rule has asked for the checkpoint before its release, the sequence runs to its end (the
  acknowledgement, or the timeout and ``releaseOnTimeout``) and the window stays open with it,
  whatever later forecasts say (``release.in_flight``): the rule decided when it asked. A forecast
  that turned a second after the request (one predicting a rise, on a flat run, in a trial on a
  real cluster) used to close the window; the window opened again later no longer covered the
  request, so a second checkpoint was asked for and the release came a whole window and a second
  timeout late, or never, on a controller restarted more often than that.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from advisor.forecast.core import PEAK_LR_WARNING
from advisor.model import ActionKind, Forecast, JobView, LearningState
from advisor.series import TRAIN_SERIES
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
from policies.rules.overfitting import best_checkpoint_text, past_best_keep
from policies.rules.release import in_flight, release
from policies.spec import RECOMMEND, STOP, PlateauRule

NAME = "plateau"
KEY = "plateau.since"
#: the forecast (its last step) that dissented while the window was open, if one did
DISSENT_KEY = "plateau.dissent"
#: the eval forecast (its last step) the window opened on: an eval series acts only on a later one
OPENED_ON_KEY = "plateau.openedOn"
#: once open, the window stays open while P(plateau) is above this ("more likely than not")
KEEP_PROBABILITY = 0.5
#: the predicted final loss may exceed the current level by at most this fraction (the 1% of the
#: forecaster's plateau definition) for the forecast to count as evidence of a plateau
FLAT_BAND = 0.01


def predicts_flat(fc: Forecast) -> bool:
    """The forecast expects the loss to stay (within the band) at or below its current level."""
    cur, final = fc.current_loss, fc.final_loss.mean
    if cur is None or not math.isfinite(cur) or cur <= 0:
        return True  # no level to compare with: the probability alone speaks
    return final <= cur * (1.0 + FLAT_BAND)


def judged_series(ctx: Context, metric: str) -> tuple[Forecast | None, str, str]:
    """(the forecast of the series a rule judges, its name, why there is none).

    ``metric`` ``loss`` is the training loss; a named eval metric is that series' forecast in the
    run's learning state; empty is the eval metric the learning state judged (the job's primary
    eval metric, once it has enough evaluations), else the training loss."""
    state = ctx.job.learning_state
    if metric == TRAIN_SERIES:
        return ctx.forecast, TRAIN_SERIES, ctx.forecast_reason
    name = metric or (state.metric if state is not None else None) or ""
    if name and state is not None and name in state.series and (metric or state.metric == name):
        return state.series[name], name, ""
    if metric:
        if undirected(metric, ctx.policy.metric_directions):
            return None, metric, f"{metric} is never judged: {NO_DIRECTION}"
        return None, metric, f"no forecast of {metric} (not reported, or too few evaluations)"
    return ctx.forecast, TRAIN_SERIES, ctx.forecast_reason


def _past_best(state: LearningState | None, metric: str, series: str) -> float | None:
    """P(overfitting) of an eval series ``series`` that is past its best (or at a best by noise
    alone, ``state.new_best_within_noise``), at least as likely overfitting as not (None: the
    training loss, or not past it), as the overfitting rule judging by ``metric`` reads it. Read
    whether or not an evaluation came since the best: a flat eval series' chance new bests handed
    the run to this rule and back, and ADVICE read ``plateau?`` under STATE ``overfitting``."""
    if series == TRAIN_SERIES or state is None:
        return None
    j = state.judgement(series)
    if j is None or j.best_step is None:
        return None
    p = overfitting_odds(state, metric, series, j.overfitting)
    return p if p >= 0.5 else None


def evaluate(ctx: Context, rule: PlateauRule) -> Outcome:
    out = Outcome()
    job = ctx.job
    if not ctx.judge:
        return out
    fc, series, why_not = judged_series(ctx, rule.metric)
    if fc is None:
        out.reasons.append(f"{NAME}: no judgement ({why_not})")
        since = job.rule_state.get(KEY)
        if since is not None and in_flight(job, NAME, since) is not None:
            # no forecast to judge now (a restart, say) ends no sequence under way
            out.state[KEY] = since
            _carry_on(ctx, out, rule, since, f"plateau found, window opened {dur(ctx.now - since)} ago")
        return out
    if job.total_steps is not None and job.step >= job.total_steps:
        return out  # finished: nothing left to save
    past_best = _past_best(job.learning_state, rule.metric, series)
    overfitting = ctx.policy.rules.overfitting
    deferred: str | None = None
    if (
        past_best is not None
        and overfitting is not None
        and overfitting.enabled
        and past_best >= overfitting.probability
    ):
        opened_at = job.rule_state.get(KEY)
        if opened_at is None or in_flight(job, NAME, opened_at) is None:
            # an eval series past its best, as sure as the overfitting rule asks, is that rule's: it
            # takes no checkpoint of weights past the best and names the one to keep. Judged by the
            # plateau rule too (a rise counts as "no improvement left"), the run was released by
            # whichever window opened first: a platform trial's run saved at step 2,000, six
            # evaluations past its best at 800, and released without naming it. The plateau
            # window is kept meanwhile (below): restarted at each such look, a flat eval series
            # whose P(overfitting) flickers about the overfitting rule's level was released by
            # neither rule (the overfitting rule's window does not outlast the flicker either)
            state = job.learning_state
            assert state is not None  # past its best: judged by the state
            deferred = (
                f"{NAME}: {series} is past its best ({best_checkpoint_text(state, series)}, "
                f"P(overfitting)={pct(past_best)}): left to the overfitting rule"
            )
    p = fc.plateau_probability
    task = task_still_improving(job.learning_state, rule.metric, series)
    if task is not None:
        p = task[1]  # stopped only as far as the task's score has stopped too
    # a rising prediction is evidence only on a series that may turn (an eval metric); on the
    # training loss, which the forecaster holds does not turn, it is a fit not following the curve
    flat = predicts_flat(fc) or series != TRAIN_SERIES
    opened = KEY in job.rule_state
    # the window's checkpoint request is out: the sequence runs to its end, the window with it
    going = in_flight(job, NAME, job.rule_state[KEY]) if opened else None
    level = min(KEEP_PROBABILITY, rule.probability) if opened else rule.probability
    holds = going is not None or (flat and (p > level if opened else p >= level))
    if opened and flat and not holds and _tolerated_dissent(job.rule_state, fc):
        return _dissent(out, ctx, rule, fc, p)
    since = held_since(job.rule_state, KEY, ctx.now, holds)
    if since is not None and going is not None and going.time < since:
        # a window opened again (its state lost) over the request still pending on the same pods:
        # it goes on from that request, which it waits for rather than asking a second time
        since = going.time
    if since is None:
        if deferred is not None:
            out.reasons.append(deferred)
            return out
        if task is not None and fc.plateau_probability >= rule.probability:
            out.reasons.append(
                f"{NAME}: {series} P(plateau)={pct(fc.plateau_probability)}, but {task[0]} still improves "
                f"(P(plateau)={pct(task[1])}): not a plateau while the task's score improves"
            )
        if not flat and p >= rule.probability:
            out.reasons.append(
                f"{NAME}: P(plateau)={pct(p)} not taken as a plateau: the forecast has the loss rising "
                f"({fc.current_loss:.4g} → {fc.final_loss.mean:.4g}) "
                f"with P(diverge)={pct(fc.divergence_probability)}"
            )
        return out
    out.state[KEY] = since
    # every report is a new point of the training loss: only an eval series waits for a new one
    fresh = series == TRAIN_SERIES or new_evaluation(ctx, out, OPENED_ON_KEY, opened, fc)
    held = ctx.now - since
    if deferred is not None:
        out.reasons.append(f"{deferred}; the plateau window, open {dur(held)}, is kept meanwhile")
        return out
    if going is not None and (p < rule.probability or not flat):
        numbers = (
            f"P(plateau) >= {pct(rule.probability)} when the checkpoint was requested "
            f"(now {pct(p)}), window opened {dur(held)} ago"
        )
    else:
        numbers = f"P(plateau)={pct(p)} >= {pct(rule.probability)} for {dur(held)}"
    if fc.current_loss is not None:
        numbers += f", {series} {fc.current_loss:.4g} → {fc.final_loss.mean:.4g} predicted at the end"
    state = job.learning_state
    if (
        series != TRAIN_SERIES
        and state is not None
        and ((state.metric == series and state.best_step is not None) or series in state.judgements)
    ):
        numbers += f"; {best_checkpoint_text(state, series)}"
    if p < rule.probability and going is None:
        out.reasons.append(
            f"{NAME}: P(plateau)={pct(p)} below {pct(rule.probability)} but above {pct(level)}: "
            f"the window opened {dur(held)} ago stays open (acting only at or above {pct(rule.probability)})"
        )
        if held < rule.hold:
            out.recheck(since + rule.hold)  # past the window only a new forecast can change the verdict
        out.advice, out.severity = "plateau?", 2
        return out
    if held < rule.hold:
        waits_on = None if fresh else out.state.get(OPENED_ON_KEY)
        out.reasons.append(f"{NAME}: {numbers} ({waiting_text(rule.hold, series, waits_on)})")
        out.recheck(since + rule.hold)
        out.advice, out.severity = "plateau?", 2
        return out
    if not fresh and going is None:
        # between two evaluations an eval series brings no new evidence: the window acts on an
        # evaluation after the one it opened on, however long it has been open
        out.reasons.append(f"{NAME}: {numbers} (acting at the next evaluation of {series})")
        out.advice, out.severity = "plateau?", 2
        return out
    if let_finish(ctx, out, NAME, rule.hold, numbers):
        return out
    if rule.hold_at_peak_lr and rule.action != RECOMMEND and going is None and lr_at_peak(ctx):
        # the LR has not begun to decay with a share of the budget left: a warmup-stable-decay run's
        # stable phase is as flat as a plateau, and its decay still to come (``holdAtPeakLR``). The
        # window stays open: the rule acts at the first forecast without the warning, if the plateau
        # still holds then
        left = "much of the run left" if job.total_steps else "total_steps unknown"
        why = f"the learning rate has not begun to decay with {left} (holdAtPeakLR)"
        out.reasons.append(f"{NAME}: {numbers}; not released: {why}")
        # said as a held action, as a cooldown's hold is (ADVICE plateau:held, an ActionHeld Event,
        # counted as held): silent, it read as a window still open
        final = _final_kind(rule)
        out.act(
            ActionKind.RECOMMEND,
            NAME,
            f"plateaued: {numbers}; would {final.value.replace('-', ' ')}; held back: {why}",
            would=final.value,
            held=why,
        )
        out.advice = _final_advice(final)
        out.severity = 2
        return out
    if rule.action == RECOMMEND:
        out.act(
            ActionKind.RECOMMEND,
            NAME,
            f"plateaued: {numbers}; consider stopping or releasing quota",
            would="none",
        )
        out.advice, out.severity = "plateau", 5
        return out
    unsaved = unsaved_improvement(job, fc)
    lost = (
        None
        if unsaved is None
        else f"its last checkpoint (step {job.checkpoint.last_step}) is {unsaved:.1%} above the current loss"
    )
    final = _final_kind(rule)
    first: bool | None = None
    if past_best is not None and going is None:
        # past its best, but not the overfitting rule's (none in the policy, or not as sure as it
        # asks): the plateau rule releases it as that rule would, without saving weights past the
        # best (a save may rotate out the best checkpoint, ``save_total_limit``), and names the
        # checkpoint to keep
        state = job.learning_state
        assert state is not None
        keep, first = past_best_keep(state, series)
        numbers += f"; {keep}"
        lost = None
    elif job.learning_state is not None and job.learning_state.label == "diverging":
        # the run state calls it diverging (a non-finite evaluation beside a finite training
        # loss, which the divergence rule does not judge): its weights may be non-finite, and a
        # save of them may rotate out (``save_total_limit``) the last good checkpoint, so none is
        # asked for, as the divergence rule asks for none
        numbers += f"; no checkpoint taken (the run state is diverging: {_diverging_why(job.learning_state)})"
        first, lost = False, None
    if not release(
        ctx, out, rule=NAME, final=final, why=numbers, since=since, checkpoint_first=first, unsaved=lost
    ):
        # the plateau was found at the latest report, but the release would keep only an older
        # checkpoint that had more than 1% still to learn: judged again from scratch, on what the
        # run reports once it runs again (and so can save first)
        for key in (KEY, DISSENT_KEY, OPENED_ON_KEY):
            out.state.pop(key, None)
        out.advice, out.severity = "plateau?", 2
        return out
    out.advice = _final_advice(final)
    out.severity = 5
    return out


def _diverging_why(state: LearningState) -> str:
    """What made the run state diverging, in its own words (its warning about a non-finite
    series), or its probability."""
    said = [w for w in state.warnings if "not finite" in w]
    return said[0] if said else f"P {state.probabilities.get('diverging', 0.0):.0%}"


def lr_at_peak(ctx: Context) -> bool:
    """The run's forecast (of its training loss, or of the judged series) found its learning rate
    still at its peak with a share of the budget left, or its budget unknown (``PEAK_LR_WARNING``)."""
    for f in (ctx.job.forecast, ctx.forecast):
        if f is not None and any(w.startswith(PEAK_LR_WARNING) for w in f.warnings):
            return True
    return False


def _final_kind(rule: PlateauRule) -> ActionKind:
    return ActionKind.STOP if rule.action == STOP else ActionKind.RELEASE_QUOTA


def _final_advice(final: ActionKind) -> str:
    """ADVICE of a window that has decided: what its sequence ends in."""
    return "plateau:stop" if final is ActionKind.STOP else "plateau:release"


def _carry_on(ctx: Context, out: Outcome, rule: PlateauRule, since: float, why: str) -> None:
    """The next step of the window's sequence under way, with no forecast to judge by."""
    final = _final_kind(rule)
    release(ctx, out, rule=NAME, final=final, why=why, since=since)
    out.advice = _final_advice(final)
    out.severity = 5


def unsaved_improvement(job: JobView, fc: Forecast) -> float | None:
    """How much higher (relative) the loss at the last checkpoint is than the current one, when it
    is more than the 1% band: the learning a release would lose unless the job saves first."""
    cur, saved = fc.current_loss, job.checkpoint_loss
    if cur is None or saved is None or not (math.isfinite(cur) and math.isfinite(saved)) or cur <= 0:
        return None
    gap = (saved - cur) / cur
    return gap if gap > FLAT_BAND else None


def _identity(fc: Forecast) -> float:
    """Tells one forecast from the next: the last step it saw (a new forecast has new data)."""
    return float(fc.last_step) if fc.last_step is not None else float(fc.n_points)


def _tolerated_dissent(state: Mapping[str, float], fc: Forecast) -> bool:
    """Whether this dissenting forecast is the first since the window opened (or that same one
    looked at again), rather than a second one in a row."""
    seen = state.get(DISSENT_KEY)
    return seen is None or seen == _identity(fc)


def _dissent(out: Outcome, ctx: Context, rule: PlateauRule, fc: Forecast, p: float) -> Outcome:
    since = ctx.job.rule_state[KEY]
    out.state[KEY] = since
    out.state[DISSENT_KEY] = _identity(fc)
    if OPENED_ON_KEY in ctx.job.rule_state:
        out.state[OPENED_ON_KEY] = ctx.job.rule_state[OPENED_ON_KEY]
    out.reasons.append(
        f"{NAME}: P(plateau)={pct(p)}: one forecast disagrees; the window opened "
        f"{dur(ctx.now - since)} ago stays open until the next forecast (it restarts if that one "
        f"disagrees too; acting only at or above {pct(rule.probability)})"
    )
    if ctx.now - since < rule.hold:
        out.recheck(since + rule.hold)
    out.advice, out.severity = "plateau?", 2
    return out
