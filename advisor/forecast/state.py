"""A run's learning state: one judgement from all its series.

The question the product answers is "has this run stopped learning?". For a pre-training run the
training loss answers it; for a fine-tune it is the eval metric (HF's ``EarlyStoppingCallback``
watches it too): the training loss of a fine-tune keeps falling long after the model stopped
generalising better. So the state reads, in this order:

* ``hung``: no step advance for many report intervals (a probability that grows from
  ``HUNG_FROM`` to ``HUNG_TO`` intervals of silence, never before ``HUNG_MIN_S``);
* ``diverging``: the training loss rising away or non-finite (its forecast's divergence
  probability), or a non-finite latest evaluation. A rising *eval* metric while the training loss
  falls is not divergence: it is overfitting;
* the judged eval series (``metric``, default ``eval_loss`` or the first eval metric with a
  direction), once it has ``MIN_EVALS`` finite evaluations: P(it improves by less than 1% of its
  level by ``total_steps``) is its forecast's P(plateau), a rise counting as no improvement (see
  ``turn``). That probability splits by whether the training loss still falls (1 - its P(plateau);
  for a run at its last step, whether it fell since the eval's best): ``overfitting`` when it does
  and the eval series is past its best, ``plateaued`` otherwise (both stopped, or an eval series
  whose latest point is its best: it has flattened, not turned);
* without an eval series (or with too few evaluations), the training loss alone: ``plateaued``
  with its P(plateau), ``learning`` otherwise.

Each eval series is forecast in its own units and direction, with the run's learning rate at its
steps (``schedule``: the training history's steps and learning rates) when the run reports them:
``advisor.forecast.eval_forecast`` says how and why.

The probabilities are products of those events in that order, so they sum to 1 and every label's
probability is one the policies can set a threshold on. The numbers are the series' own forecasts:
the state, the plateau rule and the divergence rule agree by construction.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence

import numpy as np

from advisor.forecast.best_trend import trend_at
from advisor.forecast.eval_forecast import eval_horizon, forecast_series, lr_at, schedule_end
from advisor.forecast.finished_record import (
    MIN_EVALS,
    SeriesLike,
    fell_since,
    improved_since,
    rose_above_best,
)
from advisor.model import LEARNING_LABELS, EvalJudgement, Forecast, LearningState
from advisor.series import (
    Direction,
    evaluation_noise,
    is_saved_step,
    primary_eval,
    task_metric,
)

__all__ = [
    "HUNG_FROM",
    "HUNG_MIN_S",
    "HUNG_TO",
    "IMPROVING_AT_END_NOTE",
    "MIN_EVALS",
    "SeriesLike",
    "at_last_step",
    "best_checkpoint",
    "best_saved_checkpoint",
    "ended_reading",
    "improving_at_end",
    "improving_metric",
    "learning_state",
    "task_judgement",
]

#: how far another label's probability must lead the one shown before to replace it
LABEL_HYSTERESIS = 0.1
#: the odds at which a run is first called stopped (plateaued or overfitting): 3 to 2. At even
#: odds the label went to "stopped" on coin flips, and on the tuning half of the development
#: fine-tunes a "stopped" label was then right 0.69 of the time (its eval metric never again 1%
#: better); 0.6 is the lowest probability, in steps of 0.05, at which it is right 7 times in 10
#: (0.73, finding 0.62 of the stopped cuts; the held-out half, not used to choose it: 0.87 and
#: 0.62). The rules read the probabilities, never the label, so no action moves with it
STOPPED_LABEL_MIN = 0.6
#: P(hung) rises from 0 at this many report intervals without a step advance ...
HUNG_FROM = 5.0
#: ... to 1 at this many
HUNG_TO = 15.0
#: and is 0 before this much silence, whatever the interval (a run reporting every few seconds
#: that pauses for a checkpoint or an evaluation is not hung)
HUNG_MIN_S = 300.0


def best_point(series: SeriesLike) -> tuple[int | None, float | None, int, int]:
    """(best step, best value, evaluations after it, finite evaluations)."""
    best_i: int | None = None
    finite = 0
    values = series.values
    lower = series.direction is Direction.LOWER
    for i, v in enumerate(values):
        if not math.isfinite(v):
            continue
        finite += 1
        if best_i is None or (v < values[best_i] if lower else v > values[best_i]):
            best_i = i
    if best_i is None:
        return None, None, 0, 0
    return int(series.steps[best_i]), float(values[best_i]), len(values) - 1 - best_i, finite


def best_made_after(series: SeriesLike, since_best: int) -> int | None:
    """The step after which the best evaluation of ``series`` was made, when the report that
    carried it came later (``advisor.core.evals.EvalSeries.made_after``; a series read from a
    file has its evaluations at their own steps, and none)."""
    afters = getattr(series, "made_after", None)
    i = len(series.values) - 1 - since_best
    if not afters or len(afters) != len(series.values) or not 0 <= i < len(afters):
        return None
    after = afters[i]
    return int(after) if isinstance(after, int) else None


def best_checkpoint(series: SeriesLike) -> tuple[int, float] | None:
    """(step, value) where ``series`` was best, the checkpoint worth keeping when a run is judged
    by it; None below ``MIN_EVALS`` finite evaluations, the fewest the run state judges by. Public
    so that ``compare`` can show the best checkpoint of the metric it ranks by, which need not be
    the one the state judged."""
    step, value, _since, finite = best_point(series)
    if step is None or value is None or finite < MIN_EVALS:
        return None
    return step, value


def best_saved_checkpoint(series: SeriesLike, save_steps: int, last_step: float) -> tuple[int, float] | None:
    """(step, value) where ``series`` was best among the steps a checkpoint was saved at (every
    ``save_steps`` steps, and the run's ``last_step``): the checkpoint the user can actually keep.
    The best evaluation may fall between two saves (an eval every 10 steps, a save every 500),
    and its weights were never written; None when no evaluation fell on a saved step."""
    lower = series.direction is Direction.LOWER
    best: tuple[int, float] | None = None
    for step, value in zip(series.steps, series.values, strict=False):
        v = float(value)
        if not math.isfinite(v) or not is_saved_step(float(step), save_steps, last_step):
            continue
        if best is None or (v < best[1] if lower else v > best[1]):
            best = (int(step), v)
    return best


def at_last_step(fc: Forecast) -> bool:
    """The forecast's run is at its planned last step, or no report is left before it
    (``Forecast.at_end``): nothing is left to forecast."""
    return fc.at_end or (
        fc.total_steps is not None and fc.last_step is not None and fc.last_step >= fc.total_steps
    )


def improving_at_end(state: LearningState, train: Forecast) -> bool:
    """A run at its last step whose judged eval metric was at its best at the last evaluation: it
    had not stopped learning, though at its end every P(plateau) is 1 and its label reads
    ``plateaued`` (nothing is left within its budget; a longer run may have gained more)."""
    return improving_metric(state, train) is not None


def improving_metric(state: LearningState, train: Forecast) -> str | None:
    """The eval metric at its best at the last evaluation of a run at its last step
    (``improving_at_end``): the judged one, or the task's score read beside it (the state then
    reads ``learning``: the score kept the run from being called stopped); None otherwise."""
    if not (state.label in ("plateaued", "learning") and state.metric is not None and at_last_step(train)):
        return None
    if state.evals_since_best == 0:
        return state.metric
    task = task_judgement(state)
    return state.task_metric if task is not None and task.evals_since_best == 0 else None


def task_judgement(state: LearningState) -> EvalJudgement | None:
    """The judgement (best step, value) of the task's score read beside the judged eval loss
    (``LearningState.task_metric``); None without one."""
    return state.judgements.get(state.task_metric) if state.task_metric else None


def ended_reading(label: str, ended: bool, improving: bool) -> str:
    """How a run's label reads once the run is at its end: ``plateaued`` (every P(plateau) is 1
    there: nothing is left within its budget) or ``learning`` say nothing of how it ended, so
    ``finished``, or ``finished, improving`` for one still at its best at its last evaluation (an
    under-trained run read ``plateaued``, as if it had converged). ``overfitting``, ``diverging``
    and ``hung`` stay: that is how the run ended. The label itself is unchanged (the contract's
    five names); this is what is shown beside it."""
    if not ended or label not in ("plateaued", "learning"):
        return label
    return "finished, improving" if improving else "finished"


#: what is said of a run ``improving_at_end`` (``{metric}``: its judged eval metric)
IMPROVING_AT_END_NOTE = (
    "at its end, not stalled: {metric} was at its best at the last evaluation (a longer run may "
    "have gained more)"
)


#: evaluations missed in a row after which an eval series no longer speaks for the run: its last
#: evaluation is this many of its usual intervals behind the training loss's last step
STALE_EVALS = 3


def stale_note(name: str, steps: Sequence[float], train_step: float | None) -> str | None:
    """Why eval series ``name`` (evaluated at ``steps``) no longer speaks for a run whose training
    loss is at ``train_step``, or None. A run that stopped evaluating (an eval loop switched off,
    an eval set that vanished) is judged on the evaluations it made: a platform trial's run,
    evaluated to step 4,100 and trained on past 24,000, read "overfitting" and ranked best of its
    sweep by a final forecast from those 4,100 steps. ``STALE_EVALS`` usual intervals (their
    median) behind the training loss, the series stands aside and the run is judged by its
    training loss, as before its first evaluations."""
    if train_step is None or len(steps) < 2 or not math.isfinite(train_step):
        return None
    gaps = np.diff(np.asarray(steps, dtype=float))
    usual = float(np.median(gaps[gaps > 0])) if np.any(gaps > 0) else 0.0
    behind = train_step - float(steps[-1])
    if usual <= 0.0 or behind <= STALE_EVALS * usual:
        return None
    return (
        f"{name}{STALE_NOTE} {float(steps[-1]):,.0f}, {behind:,.0f} steps ago "
        f"({behind / usual:.0f} times its usual interval): judged by the training loss"
    )


#: how ``stale_note`` says it, after the series' name
STALE_NOTE = " has not been evaluated since step"


def stale_in(warnings: Sequence[object], name: str) -> bool:
    """Whether a run state's ``warnings`` say eval series ``name`` stopped being evaluated
    (``stale_note``): its final forecast is read off evaluations the run left behind."""
    return any(isinstance(w, str) and w.startswith(name + STALE_NOTE) for w in warnings)


def _hung(idle_s: float | None, interval_s: float | None) -> float:
    if idle_s is None or idle_s < HUNG_MIN_S:
        return 0.0
    ratio = idle_s / max(interval_s or 0.0, 1.0)
    return min(max((ratio - HUNG_FROM) / (HUNG_TO - HUNG_FROM), 0.0), 1.0)


def learning_state(
    train: Forecast | None,
    evals: Mapping[str, SeriesLike],
    *,
    metric: str | None = None,
    total_steps: int | None = None,
    idle_s: float | None = None,
    report_interval_s: float | None = None,
    forecast_all: bool = False,
    series_forecasts: Mapping[str, Forecast] | None = None,
    schedule: tuple[Sequence[float], Sequence[float | None]] | None = None,
    metric_directions: Mapping[str, str] | None = None,
    previous_label: str | None = None,
    train_history: tuple[Sequence[float], Sequence[float]] | None = None,
    declared: str | None = None,
) -> LearningState:
    """The run's learning state from its training-loss forecast and its eval series.

    ``metric`` names the eval series to judge (default: ``eval_loss``, else the first eval metric
    with a direction); ``"loss"`` judges the training loss alone. ``idle_s`` is the time since the
    last step advance, ``report_interval_s`` the run's usual time between reports. With
    ``forecast_all`` every eval series is forecast, not only the judged one. ``series_forecasts``
    reuses forecasts made earlier (a state re-read for the time since the last step advance needs no
    new fit). ``schedule``: the training history's (steps, learning rates), when it reports them:
    each eval series is forecast with the rate at its steps. ``metric_directions``: the governing
    policy's directions for metrics whose names say none (they may then be the primary one).
    ``previous_label``: the label the run's state had before; it is kept until another leads it by
    ``LABEL_HYSTERESIS`` (the probabilities are unchanged). ``train_history``: the training loss'
    (steps, values), read only when ``train`` has no step left to forecast (a finished run: did
    its training loss still fall after the eval's best?). ``declared``: the eval metric the run
    declared it is judged by (a HF Trainer's ``metric_for_best_model``): judged by default when
    reported (``primary_eval``)."""
    warnings: list[str] = []
    names = tuple(evals)
    judged = (
        primary_eval(names, metric_directions, declared=declared)
        if metric is None
        else (metric if metric in evals else None)
    )
    if metric is not None and metric != "loss" and judged is None:
        warnings.append(f"metric {metric!r} not reported; judged by the training loss")
    train_step = None if train is None else train.last_step
    stale = None if judged is None else stale_note(judged, evals[judged].steps, train_step)
    if stale is not None:
        warnings.append(stale)
        judged = None
    p_hung = _hung(idle_s, report_interval_s)
    finished = train is not None and at_last_step(train)
    p_div = train.divergence_probability if train is not None else 0.0
    series_fc: dict[str, Forecast] = {}
    best_step = best_value = None
    since_best = 0
    p_eval: float | None = None
    # an eval loss judged for want of the run's own choice is judged with the task's score beside
    # it (``advisor.series.task_metric``): a score still improving keeps the run learning
    task = (
        task_metric(names, metric_directions, judged=judged)
        if metric is None and judged is not None and judged != declared
        else None
    )
    wanted = names if forecast_all else tuple(n for n in (judged, task) if n)
    # without a total, the training history's decay says where the run ends, for every series
    run_end = schedule_end(schedule) if total_steps is None and series_forecasts is None else None
    for name in wanted:
        s = evals[name]
        if series_forecasts is not None:
            if name in series_forecasts:
                series_fc[name] = series_forecasts[name]
            continue
        if sum(1 for v in s.values if math.isfinite(v)) < 2:
            continue
        xs = [float(x) for x in s.steps]
        horizon, implied = eval_horizon(xs[-1], total_steps, run_end, finished)
        fc_s = forecast_series(
            xs, list(s.values), s.direction, total_steps=horizon, learning_rates=lr_at(xs, schedule)
        )
        # read to the implied end, but its total is as unknown as the training loss's says
        series_fc[name] = dataclasses.replace(fc_s, total_steps=None) if implied else fc_s
    if judged is not None:
        s = evals[judged]
        best_step, best_value, since_best, finite = best_point(s)
        if s.values and not math.isfinite(s.values[-1]):
            if finite:
                p_div = max(p_div, 0.9)
                warnings.append(f"the latest {judged} is not finite")
            else:
                # never finite: no blow-up from a level it held, but an evaluation that does not
                # compute (a NaN metric from the start, an fp16 overflow in the eval loop); a
                # healthy run read "diverging" (0.90) on it
                warnings.append(
                    f"every {judged} so far is not finite: no evidence of a divergence, not judged"
                )
        if finite >= MIN_EVALS and judged in series_fc:
            p_eval = series_fc[judged].plateau_probability
        else:
            until = "judged by the training loss" if train is not None else "not judged (no training loss)"
            warnings.append(f"{judged} has {finite} finite evaluation(s); {until} until {MIN_EVALS}")
    rest = (1.0 - p_hung) * (1.0 - p_div)
    probs = dict.fromkeys(LEARNING_LABELS, 0.0)
    probs["hung"] = p_hung
    probs["diverging"] = (1.0 - p_hung) * p_div
    train_plateau = train.plateau_probability if train is not None else 0.5
    judgements = {
        name: judgement
        for name in series_fc
        if name in evals
        and (judgement := _judge_eval(evals[name], series_fc[name], train, train_history, rest)) is not None
    }
    judged_by_eval = p_eval is not None and judged is not None and judged in judgements
    if not (judged_by_eval and task in judgements and task in series_fc):
        task = None  # read beside the judged series only when both are judged
    if p_eval is not None and judged is not None and judged_by_eval:
        # the judged series' own judgement: P(overfitting) = rest * p_eval * P(past its best
        # while the training loss falls)
        probs["overfitting"] = judgements[judged].overfitting
        p_stop = p_eval
        q = p_eval
        if task is not None and finished and best_step is not None:
            # at its end every P(plateau) is 1: whether the task's score stopped with the judged
            # series is read off its record since the judged series' best (a classifier's eval
            # loss turned at step 1,200 while its accuracy rose to its best at the last evaluation)
            q = min(p_eval, 1.0 - improved_since(evals[task], best_step))
        elif task is not None:
            q = series_fc[task].plateau_probability
        if q < p_eval:
            # stopped as far as the task's score has stopped too; what overfits is the eval loss
            # alone, in that share
            probs["overfitting"] *= q / p_eval
            p_stop = q
            if q < 0.5 <= p_eval and finished:
                t = judgements[str(task)]
                warnings.append(
                    f"{task} improved after {judged}'s best (step {best_step:,}), to its own best at "
                    f"step {t.best_step:,} ({t.best_value:.4g}): the run is not called stopped by "
                    f"{judged} alone"
                )
            elif q < 0.5 <= p_eval:
                warnings.append(
                    f"{task} still improves (P(plateau) {q:.2f}): the run is not called stopped "
                    f"by {judged} alone"
                )
        probs["plateaued"] = max(rest * p_stop - probs["overfitting"], 0.0)
        probs["learning"] = rest * (1.0 - p_stop)
    elif train is not None:
        probs["plateaued"] = rest * train_plateau
        probs["learning"] = rest * (1.0 - train_plateau)
    else:
        probs["learning"] = rest
    total = sum(probs.values())
    probs = {k: float(np.clip(v / total, 0.0, 1.0)) if total > 0 else 0.0 for k, v in probs.items()}
    # the best checkpoint's value beneath the noise: its own evaluation is the luckiest one
    trend = None
    if p_eval is not None and judged is not None and best_step is not None:
        trend = trend_at(evals[judged].steps, evals[judged].values, best_step)
    return LearningState(
        label=_label(probs, previous_label),
        probabilities=probs,
        metric=judged if p_eval is not None else None,
        best_step=best_step,
        best_value=best_value,
        evals_since_best=since_best,
        series=series_fc,
        best_noise=0.0 if judged is None or p_eval is None else evaluation_noise(evals[judged].values),
        best_trend=None if trend is None else trend[0],
        best_trend_sd=0.0 if trend is None else trend[1],
        best_made_after=None
        if judged is None or best_step is None
        else best_made_after(evals[judged], since_best),
        warnings=tuple(warnings),
        directions={name: str(evals[name].direction) for name in series_fc if name in evals},
        judgements=judgements,
        task_metric=task,
    )


def _overfit_odds(
    series: SeriesLike,
    best: tuple[int | None, float | None, int, int],
    train: Forecast | None,
    train_history: tuple[Sequence[float], Sequence[float]] | None,
) -> float:
    """How sure it is that ``series``, once it has stopped improving, stopped because the run
    overfits: its training loss still falls while the series is past its best (``best``: its
    ``best_point``)."""
    best_step, best_value, since_best, _finite = best
    # overfitting is read against the training loss: a run that reports none (its eval metrics
    # alone) has stopped improving, and nothing says whether it fits its data better
    train_falls = 1.0 - train.plateau_probability if train is not None else 0.0
    # overfitting is the eval metric past its best while the training loss falls: an eval series
    # whose latest point is its best has flattened, not turned; unless it beat the best before it
    # by no more than the noise of its recent evaluations (``new_best_within_noise``)
    past_best = 1.0 if since_best > 0 else new_best_within_noise(series)
    if train is not None and at_last_step(train) and train_history is not None and best_step is not None:
        # a run at its last step has nothing left to forecast (every P(plateau) is 1): whether its
        # training loss still fell is read off its record since the eval's best, and the eval
        # counts as past its best when it ended above it by the threshold, not by noise
        train_falls = max(train_falls, fell_since(train_history, best_step))
        past_best = rose_above_best(series, best_value)
    return train_falls * past_best


#: the recent evaluations whose steps the wrong way ``new_best_within_noise`` reads
RECENT_SCATTER = 8


def new_best_within_noise(series: SeriesLike) -> float:
    """How far the latest evaluation of ``series``, its best, is a best by noise alone: 1 when it
    beat the best before it by at most the median step its recent evaluations took the wrong way,
    0 from twice that on, a ramp between. An eval loss flat within 0.4% while the training loss
    fell made a new best by chance every few evaluations, and each one flipped the run from
    overfitting to plateaued and back (a LearningState Event each, and the two rules' windows
    taking turns); a series still improving by more than its noise (a smooth curve converging)
    reads 0."""
    lower = series.direction is Direction.LOWER
    values = [float(v) if lower else -float(v) for v in series.values if math.isfinite(v)]
    if len(values) < MIN_EVALS + 1:
        return 0.0
    gain = min(values[:-1]) - values[-1]
    # the scatter is read off its recent steps the wrong way (an improving series moves the wrong
    # way by noise alone): a smooth eval loss making ever smaller new bests has none, and second
    # differences read a converging curve's bends as noise
    recent = values[-RECENT_SCATTER:]
    worse = [b - a for a, b in itertools.pairwise(recent) if b > a]
    if gain <= 0.0 or not worse:
        return 0.0
    return float(np.clip(2.0 - gain / float(np.median(worse)), 0.0, 1.0))


def _judge_eval(
    series: SeriesLike,
    fc: Forecast,
    train: Forecast | None,
    train_history: tuple[Sequence[float], Sequence[float]] | None,
    rest: float,
) -> EvalJudgement | None:
    """``series`` judged as the state judges its metric: its best so far, and P(overfitting) by
    it (``rest``: the probability left once hung and diverging are counted); None below
    ``MIN_EVALS`` finite evaluations."""
    best = best_point(series)
    best_step, best_value, since_best, finite = best
    if finite < MIN_EVALS:
        return None
    over = _overfit_odds(series, best, train, train_history)
    return EvalJudgement(
        best_step=best_step,
        best_value=best_value,
        evals_since_best=since_best,
        overfitting=float(np.clip(rest * fc.plateau_probability * over, 0.0, 1.0)),
        best_made_after=best_made_after(series, since_best),
    )


def _label(probs: Mapping[str, float], previous: str | None = None) -> str:
    """The most probable label, where "stopped learning" is one outcome split two ways.

    ``plateaued`` and ``overfitting`` answer the same question (no improvement left) and differ
    only by whether the training loss still falls; compared one by one with ``learning``, a run
    whose eval metric has surely stopped but whose training loss is uncertain would read
    ``learning`` (0.4 against 0.3 and 0.3). So their sum is weighed against the other labels
    first, and the larger of the two names it. A first call of "stopped" also needs odds of
    ``STOPPED_LABEL_MIN``: below them a run that most likely stopped still reads ``learning``, the
    safer reading of a near-even split (not the runner-up, which a three-way split made
    "diverging" at 0.27); once shown, the label stays by the hysteresis below."""
    stopped = probs["plateaued"] + probs["overfitting"]
    others = [k for k in LEARNING_LABELS if k not in ("plateaued", "overfitting")]
    top = max(others, key=lambda k: probs[k])
    if stopped > probs[top]:
        if stopped >= STOPPED_LABEL_MIN:
            label = "overfitting" if probs["overfitting"] > probs["plateaued"] else "plateaued"
        else:
            label = "learning"
    else:
        label = top
    if previous is None or previous == label or previous not in probs:
        return label

    # hysteresis: the label shown before stays until another leads it by a margin, so that odds
    # near even (a flat eval series at 0.45 / 0.55) do not flip STATE, and post an Event, at
    # every re-forecast
    def score(name: str) -> float:
        return stopped if name in ("plateaued", "overfitting") else probs[name]

    if {previous, label} == {"plateaued", "overfitting"}:
        return previous if probs[previous] >= probs[label] - LABEL_HYSTERESIS else label
    return previous if score(previous) >= score(label) - LABEL_HYSTERESIS else label
