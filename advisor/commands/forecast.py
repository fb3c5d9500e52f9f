"""``trainjob-advisor forecast``: where will this run end, when, and is it still learning?

The command an ML engineer runs on a loss log (CSV/TSV, JSONL or a HF ``trainer_state.json``)
without any cluster: it loads the history with ``advisor.sources``, calls the same
``advisor.forecast.forecast`` the controller uses, and prints a short summary, JSON that mirrors
the ``Forecast`` fields, and optionally a plot. ``--upto-step`` replays the forecast as it would
have been at an earlier step and, when the file goes on to the end, shows what actually happened,
which is the quickest way to judge the forecaster on one's own runs. ``--demo`` needs no file.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from advisor.cli import CommandError, non_negative_int, positive_int, require_extra
from advisor.core.record import median_gap
from advisor.forecast.state import best_saved_checkpoint, learning_state
from advisor.model import Forecast, LearningState
from advisor.series import TRAIN_SERIES, Direction, direction_of, primary_eval, summaries_first
from advisor.sources.assemble import is_series_metric
from advisor.sources.files import LoadedCurve, SourceError, load_curve, load_curve_bytes
from advisor.sources.trainer_choice import TrainerChoice

if TYPE_CHECKING:
    from advisor.forecast.path import ForecastPath

__all__ = ["ForecastRequest", "Outcome", "compute", "outcome_of", "register", "run"]

#: ``--demo`` forecasts from this fraction of the synthetic run unless ``--upto-step`` is given
DEMO_CUT = 0.4


@dataclass(frozen=True)
class ForecastRequest:
    """What to forecast: a run log (``-``: stdin) or the synthetic demo run, the series read from
    it, and the cut and horizon (the command's options; ``compare`` forecasts its files with it)."""

    file: str | None = None
    demo: bool = False
    seed: int = 0
    metric: str | None = None
    curve: str | None = None
    total_steps: int | None = None
    #: the planned total of a log that does not state its own (``compare --total-steps``): unlike
    #: ``total_steps`` (``forecast --total-steps``, which overrides the file), a total the log
    #: states wins, so a finished run is not read as a run with steps still to come
    total_steps_fallback: int | None = None
    upto_step: float | None = None
    plot: bool = False  # the forecast path along the steps is wanted too
    #: without ``metric``, a log with no training loss (nor eval_loss) is forecast by its primary
    #: eval metric (the command's way); off, it is refused as before (``compare`` ranks a file's
    #: forecast as its training loss, which such a log does not have)
    eval_default: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ForecastRequest:
        return cls(
            file=args.file,
            demo=bool(args.demo),
            seed=args.seed,
            metric=args.metric,
            curve=args.curve,
            total_steps=args.total_steps,
            upto_step=args.upto_step,
            plot=bool(args.plot),
            eval_default=True,
        )


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


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "forecast",
        help="forecast final loss, ETA and plateau probability from a loss log",
        description="Forecast the final loss (with an 80% interval), the ETA and the probability "
        "that the run has plateaued or diverged, from a loss log: CSV/TSV "
        "(step,loss[,time][,learning_rate][,epoch]), JSONL, or a HuggingFace trainer_state.json. "
        "Without a total number of steps (in the file or --total-steps) the forecast is the "
        "asymptote the loss tends to; pass the run's last step as --total-steps for a finished run.",
    )
    parser.add_argument(
        "file", nargs="?", metavar="FILE", help="loss log to read ('-': standard input; omit with --demo)"
    )
    parser.add_argument(
        "--total-steps",
        type=positive_int,
        metavar="N",
        help="planned total steps (default: from the file; given, it replaces the file's total, "
        "e.g. to replay a run as planned longer; not below its last step)",
    )
    parser.add_argument(
        "--upto-step", type=float, metavar="K", help="forecast from the points up to step K only"
    )
    parser.add_argument(
        "--metric",
        metavar="NAME",
        help="series to forecast: loss (the training loss), eval_loss, any eval metric of the "
        "file whose name says its direction (eval_accuracy, eval_wer, ...; a higher-is-better one "
        "is forecast upwards), or a column the file names its training loss by (lm_loss; a file "
        "whose only loss it is reads it by itself). Default: the training loss, with every eval "
        "metric with a direction forecast beside it; a log without one, its primary eval metric "
        "(eval_loss, else the first)",
    )
    parser.add_argument(
        "--curve", metavar="ID", help="which run, in a file holding several (curve_id/run_id column)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON mirroring the Forecast fields")
    parser.add_argument("--plot", metavar="OUT.png", help="also write a plot of the curve and the forecast")
    parser.add_argument("--demo", action="store_true", help="forecast a synthetic run generated on the spot")
    parser.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed of the --demo run (0 or more; default 0)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.plot:
        require_extra("matplotlib", "sim", "--plot")
    outcome = compute(ForecastRequest.from_args(args))
    written = None
    if args.plot:
        from advisor.commands.forecast_plot import write_plot

        written = write_plot(outcome, args.plot)
    if outcome.failure is not None:
        # no forecast: no probability, no interval, and not exit 0 (the plot, if asked for, says
        # the same and is kept: it shows the input)
        suffix = f" (plot written to {written})" if written else ""
        raise CommandError(f"{args.file or 'demo'}: no forecast: {outcome.failure}{suffix}")
    from advisor.commands.forecast_output import render_text, to_json

    if args.json:
        print(json.dumps(to_json(outcome), indent=2, allow_nan=False))
    else:
        print(render_text(outcome))
        if written:
            print(f"  plot            {written}")
    return 0


# --------------------------------------------------------------------------------------------
# Loading and forecasting
# --------------------------------------------------------------------------------------------


def _load(args: ForecastRequest) -> tuple[LoadedCurve, list[str], float | None]:
    """The whole curve, notes about it, and the step the forecast is cut at (the demo's own)."""
    if args.demo == bool(args.file):
        raise CommandError("give a FILE or --demo (exactly one)")
    for given in (args.total_steps, args.total_steps_fallback):
        if given is not None and given <= 0:
            raise CommandError(f"--total-steps must be positive, got {given}")
    if args.upto_step is not None and not (math.isfinite(args.upto_step) and args.upto_step >= 0):
        raise CommandError(f"--upto-step must be a non-negative number, got {args.upto_step}")
    if args.demo:
        from advisor.sources.synthetic import synthetic_curve

        curve = synthetic_curve(seed=args.seed)
        cut = args.upto_step if args.upto_step is not None else DEMO_CUT * (curve.total_steps or 0)
        return curve, [f"demo: {curve.source}; forecast from step {cut:,.0f}"], cut
    try:
        loaded = _read(args)
    except SourceError as exc:
        raise CommandError(str(exc)) from None
    notes: list[str] = []
    if args.metric is None and loaded.metric != TRAIN_SERIES:
        notes.append(
            f"no training loss in the file: forecasting its primary eval metric {loaded.metric} "
            f"({series_direction(loaded.metric)} is better; --metric NAME forecasts another)"
        )
    return loaded, notes, args.upto_step


def _one_run_of(args: ForecastRequest) -> ForecastRequest:
    """A folder given is the run it holds (a HuggingFace output folder: its ``trainer_state.json``,
    found as ``compare`` and ``backtest`` find a folder's runs); one that holds several is told to
    name one, or to compare them."""
    from pathlib import Path

    from advisor.sources.runlogs import find_run_logs

    assert args.file is not None
    folder = Path(args.file)
    if args.file == "-" or not folder.is_dir():
        return args
    logs = find_run_logs([folder])
    if len(logs) > 1:
        names = ", ".join(log.name for log in logs[:3]) + (", ..." if len(logs) > 3 else "")
        raise SourceError(
            folder, f"folder: {len(logs)} runs in it ({names}); name one, or `compare` them side by side"
        )
    return dataclasses.replace(args, file=str(logs[0].path))


def _read(args: ForecastRequest) -> LoadedCurve:
    """The file's series ``args.metric``; without one, its training loss, else its eval loss, else
    (``eval_default``) its primary eval metric, the one the run would be judged by."""
    assert args.file is not None
    file = args.file
    if file == "-":
        import sys

        data = sys.stdin.buffer.read()  # once: a fallback series is read from the same bytes

    def read(metric: str | None) -> LoadedCurve:
        if file == "-":
            return load_curve_bytes(data, "<stdin>", metric=metric, curve_id=args.curve)
        return load_curve(file, metric=metric, curve_id=args.curve)

    try:
        curve = read(args.metric)
    except SourceError as exc:
        primary = primary_eval(exc.series or ()) if args.metric is None and args.eval_default else None
        if primary is None:
            raise
        curve = read(primary)
    if args.metric is not None or not args.eval_default:
        return curve
    # the metric the trainer kept its best model by is known once the file is read: a log of eval
    # metrics alone is forecast by it, as it is judged by it
    declared = declared_instead(curve)
    if declared is None:
        return curve
    try:
        return read(declared)
    except SourceError:
        return curve


def declared_instead(curve: LoadedCurve) -> str | None:
    """The eval metric a log of eval metrics alone (read by ``curve``) is to be read by instead:
    the one its trainer kept its best model by, when it is another that a forecast can read."""
    declared = curve.trainer.metric if curve.trainer is not None else None
    if curve.metric == TRAIN_SERIES or declared is None or declared == curve.metric:
        return None
    return declared if is_series_metric(declared) else None


def compute(args: ForecastRequest) -> Outcome:
    """The forecast of ``args``'s run, as the command prints it (errors as ``CommandError``)."""
    if args.file:
        try:
            args = _one_run_of(args)
        except SourceError as exc:
            raise CommandError(str(exc)) from None
    full, notes, cut = _load(args)
    curve = full
    if cut is not None:
        curve = full.upto(cut)
        if not curve.steps:
            raise CommandError(f"no points at or before step {cut:g} (first step {full.steps[0]:g})")
    truncated = len(curve) < len(full)
    last_step = max(full.steps)
    given = args.total_steps
    if given is None and full.total_steps is None:
        given = args.total_steps_fallback  # compare's: only for a log that does not say its total
    if given is not None and given < last_step:
        raise CommandError(f"--total-steps {given:,} is below the last step in the file ({last_step:,.0f})")
    total = given or full.total_steps
    if total is None and truncated:
        total = math.ceil(last_step)
        notes.append(f"total steps taken from the file's last step ({total:,})")
    elif total is None:
        notes.append(
            f"total steps unknown: the final loss is the asymptote. If the run has ended, pass "
            f"--total-steps {math.ceil(last_step)} (its last step); if not, its planned total"
        )
    observed = _observed_end(full, len(curve), total) if truncated else None
    diverged = _nonfinite_from(full, len(curve)) if truncated else None
    train = _training_loss(args, cut) if args.metric is not None and full.metric != TRAIN_SERIES else None
    evals, not_shown = _eval_series(args, curve if train is None else train, cut)
    if not_shown:
        notes.append(_not_shown_note(not_shown))
    directions = {name: direction_of(name) or Direction.LOWER for name in evals}
    outcome = outcome_of(
        curve,
        full,
        total,
        notes,
        evals=evals,
        directions=directions,
        observed=None if diverged is not None else observed,
        plot=args.plot,
        train=train,
        declared=full.trainer.metric if full.trainer is not None else None,
    )
    trainer = full.trainer
    if truncated and cut is not None and trainer is not None:
        trainer, note = trainer_at(trainer, outcome, cut)
        if note is not None:
            outcome = dataclasses.replace(outcome, notes=(*outcome.notes, note))
    return dataclasses.replace(
        outcome,
        observed_nonfinite_from=diverged,
        evals_not_shown=tuple(not_shown),
        trainer=trainer,
        saved_best=_saved_best(outcome, full, truncated),
    )


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
    best = best_saved_checkpoint(_Series(seen.steps, seen.values, direction), trainer.save_steps, math.inf)
    if best is None:
        return unknown, f"the trainer had saved no evaluated checkpoint by step {cut:,.0f}"
    step, value = best
    kept = dataclasses.replace(trainer, checkpoint=f"checkpoint-{step}", step=step, best_metric=value)
    return kept, (
        f"trainer kept: as of step {cut:,.0f}, the best {metric} among its saves up to then (the "
        "file's best_model_checkpoint was chosen later)"
    )


def _saved_best(outcome: Outcome, full: LoadedCurve, truncated: bool) -> tuple[int, float] | None:
    """Where the judged eval series was best among the steps the trainer saved a checkpoint at,
    when the file states its save interval (the last step counts as saved only when the file
    goes to its end: a cut run has not reached its final save)."""
    trainer, state = full.trainer, outcome.state
    if trainer is None or trainer.save_steps is None or state is None or state.metric is None:
        return None
    seen = outcome.curve if outcome.curve.metric == state.metric else (outcome.evals or {}).get(state.metric)
    if seen is None:
        return None
    series = _Series(seen.steps, seen.values, series_direction(state.metric))
    return best_saved_checkpoint(series, trainer.save_steps, last_saved_step(full, truncated))


def last_saved_step(full: LoadedCurve, truncated: bool = False) -> float:
    """The run's last step, where its trainer saved a checkpoint whatever its save interval: the
    last logged step or the trainer's ``global_step``; none for a file cut short (``--upto-step``:
    the run has not reached its final save)."""
    if truncated:
        return math.inf
    global_step = full.trainer.global_step if full.trainer is not None else None
    return max(max(full.steps), global_step or 0)


def _nonfinite_from(full: LoadedCurve, cut: int) -> float | None:
    """The step from which the file's values stay non-finite to its end (None when the file ends
    on a finite value, or holds nothing after the first ``cut`` points)."""
    if cut >= len(full.values):
        return None
    i = len(full.values)
    while i > 0 and not math.isfinite(full.values[i - 1]):
        i -= 1
    return full.steps[i] if i < len(full.values) else None


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
    series = {name: _Series(e.steps, e.values, directions[name]) for name, e in evals.items()}
    judged: str | None = None
    train_fc: Forecast | None = fc
    history = curve  # the series the idle time, the schedule and the finished run's trend are read on
    if train is not None and train.steps:
        # ``curve`` is another series (--metric): the state is the run's, from its training loss
        history, train_fc = train, _training_forecast(train, total)
    elif full.metric != "loss":
        # a log of eval metrics alone: the forecast series is judged as the eval series it is (a
        # rise past its best is a stopped run, not a divergence), with no training loss beside it
        judged, train_fc = full.metric, None
        series[judged] = _Series(curve.steps, curve.values, series_direction(judged))
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
    return Outcome(curve, full, fc, total, tuple(notes), observed, _failure(fc), path, evals, state)


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


@dataclass(frozen=True)
class _Series:
    steps: tuple[float, ...]
    values: tuple[float, ...]
    direction: Direction


#: eval series a file's forecast reads at most (besides its training loss); which ones:
#: ``summaries_first``, and the rest are named in a note
MAX_EVAL_SERIES = 8


def _training_loss(args: ForecastRequest, cut: float | None) -> LoadedCurve | None:
    """The file's training loss up to the cut, when ``--metric`` shows another of its series: the
    run state is the run's whatever series is shown (read from its eval series alone, a run that
    overfits was "plateaued" under ``--metric eval_loss`` and "overfitting" without it)."""
    if not args.file or args.file == "-":
        return None
    try:
        train = load_curve(args.file, metric=TRAIN_SERIES, curve_id=args.curve)
    except SourceError:
        return None  # a log of eval metrics alone
    return train.upto(cut) if cut is not None else train


def _eval_series(
    args: ForecastRequest, curve: LoadedCurve, cut: float | None
) -> tuple[dict[str, LoadedCurve], list[str]]:
    """The file's eval series up to the same cut (``eval_loss`` and every other eval metric whose
    name says its direction: ``eval_accuracy``, ``eval_wer``, ...), when the forecast is of the
    training loss; each is forecast on its own and the run state combines them, as the
    controller's core does with what a job reports. At most ``MAX_EVAL_SERIES`` of them, the
    primary one and the summaries first (``summaries_first``); the others' names come second."""
    from advisor.sources.assemble import eval_metrics

    if curve.metric != "loss" or not args.file or args.file == "-":
        return {}, []
    names = summaries_first(eval_metrics(curve.columns))
    out: dict[str, LoadedCurve] = {}
    for name in names[:MAX_EVAL_SERIES]:
        try:
            evals = load_curve(args.file, metric=name, curve_id=args.curve)
        except SourceError:
            continue  # a column with no usable value: the other series still speak
        if cut is not None:
            evals = evals.upto(cut)
        if evals.steps:
            out[evals.metric] = evals
    return out, names[MAX_EVAL_SERIES:]


def _not_shown_note(names: list[str]) -> str:
    """The note on the eval metrics left out of a forecast (``MAX_EVAL_SERIES``): how many, the
    first few by name (the JSON lists them all)."""
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    return f"{len(names)} more eval metrics not shown ({shown}); --metric NAME forecasts one"


def _failure(fc: Forecast) -> str | None:
    """Why ``fc`` is no forecast at all (the library never raises: it says so in its warnings)."""
    if fc.n_points > 0 and math.isfinite(fc.final_loss.mean):
        return None
    why = next((w for w in fc.warnings if w.startswith("forecast failed")), None)
    if why is None:
        why = "no usable points" + (f" ({fc.warnings[0]})" if fc.warnings else "")
    return why


def _observed_end(full: LoadedCurve, cut: int, total: int | None) -> float | None:
    """What the run the cut is in actually ended at, when the file shows its end.

    A file may hold several runs or attempts one after the other (the step goes back). The run
    that was cut ended at the end of its own segment when that segment reached the total (a file
    of independent runs); otherwise its attempt went on in the later segments (a resume from a
    checkpoint), and the end is the last segment's, if that one reached the total."""
    if total is None:
        return None
    starts = [0, *(i for i in range(1, len(full.steps)) if full.steps[i] < full.steps[i - 1])]
    ends = [*starts[1:], len(full.steps)]
    own = max(j for j, start in enumerate(starts) if start < cut)
    for j in (own, len(starts) - 1):
        if j >= own and max(full.steps[starts[j] : ends[j]]) >= 0.99 * total:
            return _final_level(full.values[starts[j] : ends[j]])
    return None


def _final_level(values: tuple[float, ...]) -> float | None:
    """The run's actual end: the median of its last 5% of finite points (at least one)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return None
    return statistics.median(finite[-max(1, len(finite) // 20) :])
