"""A run's forecast and learning state as ``forecast`` shows them (``Outcome``, ``outcome_of``).

``outcome_of`` makes the forecast of a curve (with its path along the steps when it is to be
drawn) and the run's learning state from it and the run's eval series; ``forecast FILE`` and
``explain --plot`` (a TrainJobForecast's stored history) both call it, so both draw one picture.
Beside them, the checkpoints a run's trainer kept: the best as known at the cut (``trainer_at``:
a trainer_state.json is written to the end of its run) and the best among the steps it saved at
(``saved_best_of``). What ``forecast_output`` prints and ``forecast_plot`` draws is an ``Outcome``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from advisor.core.record import median_gap
from advisor.forecast.core import ends_at_decay
from advisor.forecast.eval_forecast import eval_horizon, lr_at, schedule_end
from advisor.forecast.schedule import implied_end
from advisor.forecast.state import at_last_step, best_saved_checkpoint, learning_state
from advisor.model import Forecast, LearningState
from advisor.series import Direction, direction_of
from advisor.sources.files import LoadedCurve
from advisor.sources.trainer_choice import TrainerChoice

if TYPE_CHECKING:
    from advisor.forecast.path import ForecastPath

__all__ = [
    "Outcome",
    "last_saved_step",
    "outcome_of",
    "saved_best_of",
    "series_direction",
    "stuck_for",
    "trainer_at",
]


@dataclass(frozen=True)
class Outcome:
    """Everything the renderers need: the input, the forecast, and the hindsight if any."""

    curve: LoadedCurve  # the points the forecast saw
    full: LoadedCurve  # the whole file (equal to ``curve`` without --upto-step)
    forecast: Forecast
    total_steps: int | None
    notes: tuple[str, ...]
    observed_final: float | None  # what the file shows at the end, when the cut hides it
    failure: str | None = None  # why there is no forecast (no usable point, a failed fit)
    path: ForecastPath | None = None  # the forecast along the steps to the end (for --plot)
    evals: Mapping[str, LoadedCurve] | None = None  # the eval series the forecast cut saw, by name
    state: LearningState | None = None  # the run's learning state from all its series
    #: the step from which the file's values are non-finite to its end, with a cut (the run
    #: diverged: its "observed end" is no number)
    observed_nonfinite_from: float | None = None
    #: the file's eval metrics left out beyond ``MAX_EVAL_SERIES`` (a note says how many)
    evals_not_shown: tuple[str, ...] = ()
    #: what a trainer_state.json says of its saves and the model its trainer kept
    trainer: TrainerChoice | None = None
    #: (step, value) of the judged eval series' best at a saved step, when the save interval is
    #: known: the best checkpoint that exists (``best_saved_checkpoint``)
    saved_best: tuple[int, float] | None = None
    #: the eval series as the whole file has them, when the forecast is cut and plotted (the
    #: plot draws their points after the cut)
    evals_whole: Mapping[str, LoadedCurve] | None = None
    #: the run's training loss, when the forecast shows another of its series (``--metric``): its
    #: schedule says where a run that reports no total ends
    train: LoadedCurve | None = None


def decay_end_step(curve: LoadedCurve) -> float | None:
    """The step where the run's learning rate decays to zero (``schedule.implied_end``), None
    without learning rates or a decay that says so: the end a run that reports no total is read
    to (its note, its ETA line and JSON ``input.implied_end``)."""
    if curve.learning_rates is None or len(curve) < 2:
        return None
    end = implied_end(
        np.asarray(curve.steps, dtype=np.float64), np.asarray(curve.learning_rates, dtype=np.float64)
    )
    return None if end is None else float(end[0])


def outcome_of(
    curve: LoadedCurve,
    full: LoadedCurve,
    total: int | None,
    notes: list[str],
    *,
    evals: Mapping[str, LoadedCurve],
    directions: Mapping[str, Direction],
    observed: float | None = None,
    plot: bool = False,
    train: LoadedCurve | None = None,
    declared: str | None = None,
) -> Outcome:
    """The forecast of ``curve`` (the same one as ``forecast()``, with its path along the steps
    when it is to be drawn) and the run's learning state from it and the eval series. Shared by
    this command and ``explain --plot`` (a run's stored history), so both draw one picture.
    ``train``: the run's training loss when ``curve`` is another of its series (``--metric``):
    the state is then made from it and the eval series, as without ``--metric``. ``declared``:
    the eval metric the trainer kept its best model by, judged by default (``learning_state``)."""
    from advisor.forecast.path import forecast_path

    # the run state reads each series as the run that went on made it (``LoadedCurve.resumed``)
    series = {name: _Series(*_kept(e), directions[name]) for name, e in evals.items()}
    judged: str | None = None
    if train is not None and train.steps and full.metric != "loss":
        # an eval metric of a run with a training loss (--metric eval_...): forecast as the run
        # state forecasts it beside the training loss, so both views give one number
        trained = _training_forecast(train, total)
        fc, path = _eval_view(curve, train, trained, total, plot)
        train_fc: Forecast | None = trained
        series[full.metric] = _Series(*_kept(curve), series_direction(full.metric))
    else:
        fc, path = forecast_path(
            curve.steps,
            curve.values,
            total_steps=total,
            times=curve.times,
            learning_rates=curve.learning_rates,
            # epoch boundaries drop a training loss (the model meets its examples again); an eval
            # metric, measured on data it never trains on, shows no such drop, and expecting one
            # bent an eval accuracy's forecast from 0.920 to 0.934
            epochs=curve.epochs if full.metric == "loss" else None,
            points=60 if plot else 0,
            training_loss=full.metric == "loss",
            direction=series_direction(full.metric),
            eval_series=full.metric != "loss",
        )
        train_fc = fc
    history = curve  # the series the idle time, the schedule and the finished run's trend are read on
    if train is not None and train.steps:
        # ``curve`` is another series (--metric): the state is the run's, from its training loss
        history = train
        if full.metric == "loss":
            train_fc = _training_forecast(train, total)
    elif full.metric != "loss":
        # a log of eval metrics alone: the forecast series is judged as the eval series it is (a
        # rise past its best is a stopped run, not a divergence), with no training loss beside it
        judged, train_fc = full.metric, None
        series[judged] = _Series(*_kept(curve), series_direction(judged))
    idle, interval = stuck_for(history)
    state = learning_state(
        train_fc,
        series,
        metric=judged,
        total_steps=total,
        idle_s=idle if total is None or (history.steps and history.steps[-1] < total) else None,
        report_interval_s=interval,
        forecast_all=True,
        # the judged series is the one forecast above: its forecast is taken, not made again
        series_forecasts=None if judged is None else {judged: fc},
        schedule=(history.steps, history.learning_rates) if history.learning_rates is not None else None,
        metric_directions={name: str(d) for name, d in directions.items()},
        train_history=(history.steps, history.values) if train_fc is not None else None,
        declared=declared,
    )
    shown_train = train if train is not None and train.steps and full.metric != "loss" else None
    return Outcome(
        curve, full, fc, total, tuple(notes), observed, _failure(fc), path, evals, state, train=shown_train
    )


def _eval_view(
    curve: LoadedCurve, train: LoadedCurve, train_fc: Forecast, total: int | None, plot: bool
) -> tuple[Forecast, ForecastPath | None]:
    """The forecast of eval series ``curve`` (with its path), made as ``learning_state`` makes it
    beside the run's training loss ``train``: with the training schedule's learning rate at its
    steps and read to the end that schedule implies (``eval_horizon``); its speed and ETA are the
    training loss's. Read from the eval rows alone, the sparse rates there put a cosine's end at
    2,819 rather than 3,000, and the final accuracy at 0.675 beside the default view's 0.678."""
    from advisor.forecast.path import forecast_path

    schedule = (train.steps, train.learning_rates) if train.learning_rates is not None else None
    last = float(curve.steps[-1])
    horizon, implied = eval_horizon(
        last, total, schedule_end(schedule) if total is None else None, at_last_step(train_fc)
    )
    fc, path = forecast_path(
        curve.steps,
        curve.values,
        total_steps=horizon,
        learning_rates=lr_at(curve.steps, schedule),
        points=60 if plot else 0,
        direction=series_direction(curve.metric),
        eval_series=True,
    )
    # read to the implied end, but its total is as unknown as the training loss's says (and its
    # warning says where that end is, as the training loss's does)
    said = tuple(w for w in train_fc.warnings if ends_at_decay([w])) if implied else ()
    fc = dataclasses.replace(
        fc,
        total_steps=None if implied else fc.total_steps,
        warnings=(*fc.warnings, *said),
        eta_seconds=train_fc.eta_seconds,
        steps_per_second=train_fc.steps_per_second,
    )
    return fc, path


def _training_forecast(train: LoadedCurve, total: int | None) -> Forecast:
    """The training loss' forecast, for the run state of a log shown by another series."""
    from advisor.forecast import forecast

    return forecast(
        train.steps,
        train.values,
        total_steps=total,
        times=train.times,
        learning_rates=train.learning_rates,
        epochs=train.epochs,
        training_loss=True,
    )


def _failure(fc: Forecast) -> str | None:
    """Why ``fc`` is no forecast at all (the library never raises: it says so in its warnings)."""
    if fc.n_points > 0 and math.isfinite(fc.final_loss.mean):
        return None
    why = next((w for w in fc.warnings if w.startswith("forecast failed")), None)
    if why is None:
        why = "no usable points" + (f" ({fc.warnings[0]})" if fc.warnings else "")
    return why


def series_direction(metric: str) -> Direction:
    """Which way the forecast series improves: the training loss and a metric whose name says
    none downwards, a score (``eval_accuracy``) upwards."""
    return direction_of(metric) or Direction.LOWER


def stuck_for(curve: LoadedCurve) -> tuple[float | None, float | None]:
    """How long the log's last step has been reported without an advance (the time between its
    first and last report; the file's last report stands for "now"), and the usual time between
    reports before it: what the controller reads as the run's idle time and report interval, so
    that a log whose reports go on at a stuck step reads as hung. (None, None) without times."""
    times, steps = curve.times, curve.steps
    if times is None or len(steps) < 3:
        return None, None
    first = len(steps) - 1
    while first > 0 and steps[first - 1] == steps[-1]:
        first -= 1
    interval = median_gap(times[max(first - 20, 0) : first + 1])
    if interval is None:
        return None, None
    return max(times[-1] - times[first], 0.0), interval


def _kept(curve: LoadedCurve) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(steps, values) of ``curve`` without a resumed run's abandoned attempts."""
    kept = curve.resumed()
    return kept.steps, kept.values


@dataclass(frozen=True)
class _Series:
    steps: tuple[float, ...]
    values: tuple[float, ...]
    direction: Direction


def trainer_at(trainer: TrainerChoice, outcome: Outcome, cut: float) -> tuple[TrainerChoice, str | None]:
    """What the trainer had kept as its best model when the run stood at step ``cut``, and a note
    when that is not what the file says. A trainer_state.json is written to the end of its run:
    its ``best_model_checkpoint`` may be a step after the cut, which a forecast replayed at the
    cut could not have known. Then the trainer's best at the cut is the best of its metric among
    its saves up to the cut, when the log names that metric and the save interval is known; else
    the trainer's choice is left out, and the note says so. Its ``global_step`` (the run's end) is
    left out either way."""
    trainer = dataclasses.replace(trainer, global_step=None)
    if trainer.step is None or trainer.step <= cut:
        return trainer, None
    unknown = dataclasses.replace(trainer, checkpoint=None, step=None, best_metric=None)
    metric, direction = trainer.metric, trainer.direction
    seen = None
    if metric is not None:
        seen = outcome.curve if outcome.curve.metric == metric else (outcome.evals or {}).get(metric)
    if seen is None or direction is None or trainer.save_steps is None:
        why = (
            "the log does not name the metric it keeps it by"
            if metric is None
            else f"its saves up to then are not known ({metric})"
        )
        return unknown, (
            f"the trainer's best checkpoint in the file was chosen after step {cut:,.0f}: left out, as {why}"
        )
    best = best_saved_checkpoint(_Series(*_kept(seen), direction), trainer.save_steps, math.inf)
    if best is None:
        return unknown, f"the trainer had saved no evaluated checkpoint by step {cut:,.0f}"
    step, value = best
    kept = dataclasses.replace(trainer, checkpoint=f"checkpoint-{step}", step=step, best_metric=value)
    return kept, (
        f"trainer kept: as of step {cut:,.0f}, the best {metric} among its saves up to then (the "
        "file's best_model_checkpoint was chosen later)"
    )


def saved_best_of(outcome: Outcome, full: LoadedCurve, truncated: bool) -> tuple[int, float] | None:
    """Where the judged eval series was best among the steps the trainer saved a checkpoint at,
    when the file states its save interval (the last step counts as saved only when the file
    goes to its end: a cut run has not reached its final save)."""
    trainer, state = full.trainer, outcome.state
    if trainer is None or trainer.save_steps is None or state is None or state.metric is None:
        return None
    seen = outcome.curve if outcome.curve.metric == state.metric else (outcome.evals or {}).get(state.metric)
    if seen is None:
        return None
    series = _Series(*_kept(seen), series_direction(state.metric))
    return best_saved_checkpoint(series, trainer.save_steps, last_saved_step(full, truncated))


def last_saved_step(full: LoadedCurve, truncated: bool = False) -> float:
    """The run's last step, where its trainer saved a checkpoint whatever its save interval: the
    last logged step or the trainer's ``global_step``; none for a file cut short (``--upto-step``:
    the run has not reached its final save)."""
    if truncated:
        return math.inf
    global_step = full.trainer.global_step if full.trainer is not None else None
    return max(max(full.steps), global_step or 0)
