"""What ``forecast`` reads: a run log's series up to the cut, or the ``--demo`` run.

The series asked for (``--metric``), else the training loss, else the eval loss, else the primary
eval metric (a log of eval metrics alone); a folder's one run (a HuggingFace output folder);
standard input read once for every series read from it. Beside the series forecast: the training
loss when another series is shown, and the eval series the run state reads, at most
``MAX_EVAL_SERIES`` of them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from advisor.cli import CommandError
from advisor.commands.forecast_outcome import series_direction
from advisor.series import (
    TRAIN_SERIES,
    eval_series_name,
    likely_directed_spelling,
    primary_eval,
    summaries_first,
)
from advisor.sources.files import LoadedCurve, SourceError, load_curve, load_curve_bytes
from advisor.sources.metric_choice import eval_metrics, is_series_metric, undirected_eval_metrics
from advisor.sources.normalize import canonical_name

if TYPE_CHECKING:
    from advisor.commands.forecast import ForecastRequest

__all__ = [
    "DEMO_CUT",
    "MAX_EVAL_SERIES",
    "declared_instead",
    "eval_series_upto",
    "load_request",
    "not_shown_note",
    "one_run_of",
    "renamed_warning",
    "training_loss_upto",
    "undirected_evals",
]

#: ``--demo`` forecasts from this fraction of the synthetic run unless ``--upto-step`` is given
DEMO_CUT = 0.4

#: eval series a file's forecast reads at most (besides its training loss); which ones:
#: ``summaries_first``, and the rest are named in a note
MAX_EVAL_SERIES = 8


def load_request(args: ForecastRequest) -> tuple[LoadedCurve, list[str], float | None]:
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


def one_run_of(args: ForecastRequest) -> ForecastRequest:
    """A folder given is the run it holds (a HuggingFace output folder: its ``trainer_state.json``,
    found as ``compare`` and ``backtest`` find a folder's runs); one that holds several is told to
    name one, or to compare them."""
    import sys
    from pathlib import Path

    from advisor.sources.runlogs import find_run_logs

    assert args.file is not None
    folder = Path(args.file)
    if args.file == "-" or not folder.is_dir():
        return args
    # a folder of many runs is an error in one line: its notes on copies read once (1,332 lines
    # before the error on a large tree) are said only of the one run forecast
    notes: list[str] = []
    logs = find_run_logs([folder], note=notes.append)
    if len(logs) == 1:
        for line in notes:
            print(line, file=sys.stderr)
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
            return load_curve_bytes(data, "<stdin>", metric=metric, curve_id=args.curve).in_step_order()
        return load_curve(file, metric=metric, curve_id=args.curve).in_step_order()

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


def training_loss_upto(args: ForecastRequest, cut: float | None) -> LoadedCurve | None:
    """The file's training loss up to the cut, when ``--metric`` shows another of its series: the
    run state is the run's whatever series is shown (read from its eval series alone, a run that
    overfits was "plateaued" under ``--metric eval_loss`` and "overfitting" without it)."""
    if not args.file or args.file == "-":
        return None
    try:
        train = load_curve(args.file, metric=TRAIN_SERIES, curve_id=args.curve).in_step_order()
    except SourceError:
        return None  # a log of eval metrics alone
    return train.upto(cut) if cut is not None else train


def eval_series_upto(
    args: ForecastRequest, curve: LoadedCurve, cut: float | None
) -> tuple[dict[str, LoadedCurve], list[str]]:
    """The file's eval series up to the same cut (``eval_loss`` and every other eval metric whose
    name says its direction: ``eval_accuracy``, ``eval_wer``, ...), when the forecast is of the
    training loss; each is forecast on its own and the run state combines them, as the
    controller's core does with what a job reports. At most ``MAX_EVAL_SERIES`` of them, the
    primary one and the summaries first (``summaries_first``); the others' names come second."""
    if curve.metric != "loss" or not args.file or args.file == "-":
        return {}, []
    names = summaries_first(eval_metrics(curve.columns))
    out: dict[str, LoadedCurve] = {}
    for name in names[:MAX_EVAL_SERIES]:
        try:
            evals = load_curve(args.file, metric=name, curve_id=args.curve).in_step_order()
        except SourceError:
            continue  # a column with no usable value: the other series still speak
        if cut is not None:
            evals = evals.upto(cut)
        if evals.steps:
            out[evals.metric] = evals
    # in order of first appearance, as a run's history keeps them and ``primary_eval`` reads
    # them: a table's columns come in whatever order its writer chose (alphabetical, most
    # often), and a metric first logged at step 1,500 had judged the run over one logged from 250
    by_first = sorted(out.items(), key=lambda item: min(item[1].steps))
    return dict(by_first), names[MAX_EVAL_SERIES:]


def not_shown_note(names: list[str]) -> str:
    """The note on the eval metrics left out of a forecast (``MAX_EVAL_SERIES``): how many, the
    first few by name (the JSON lists them all)."""
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    return f"{len(names)} more eval metrics not shown ({shown}); --metric NAME forecasts one"


def undirected_evals(args: ForecastRequest, curve: LoadedCurve) -> tuple[list[str], str | None]:
    """The file's eval columns that no forecast reads because their names say no direction
    (``undirected_eval_metrics``), and the note that says so, naming the likely intended
    spelling of a typo (``likely_directed_spelling``, the hint ``policy validate`` gives a
    rule's ``metric:``): a misspelt ``eval_acuracy`` was dropped unsaid and the forecast read as
    if it had weighed the run's accuracy. None for the note when there is none."""
    if curve.metric != "loss" or not args.file or args.file == "-":
        return [], None
    names = undirected_eval_metrics(curve.columns)
    if not names:
        return [], None
    hints = [spelt for spelt in map(likely_directed_spelling, names) if spelt is not None]
    which = f"column {names[0]}" if len(names) == 1 else f"columns {', '.join(names)}"
    its = "its name gives" if len(names) == 1 else "their names give"
    hint = f" (did you mean {', '.join(hints)}?)" if hints else " (no loss/error or accuracy/score word)"
    return names, f"{which} ignored: {its} no direction{hint}"


def renamed_warning(columns: tuple[str, ...], shown: list[str]) -> str | None:
    """The warning that the file's columns of the eval series ``shown`` are named otherwise: a
    Lightning log's ``val_loss``/``val_acc`` are shown as ``eval_loss``/``eval_acc``, the one
    spelling of an eval series (``eval_series_name``: what a policy's ``metric:`` and the JSON's
    ``series`` name them), and a user looking for the file's own names found no word of the change.
    None when every shown series has its column's name (up to separators and case: ``eval/loss``
    is ``eval_loss``)."""
    renamed: dict[str, str] = {}
    for column in columns:
        canonical = canonical_name(column)
        series = eval_series_name(canonical)
        if series != canonical and series in shown and series not in renamed:
            renamed[series] = column
    if not renamed:
        return None
    theirs, ours = ", ".join(renamed.values()), ", ".join(renamed)
    return f"the file's {theirs} read as {ours}: an eval series' one name (the JSON's, a policy's metric:)"
