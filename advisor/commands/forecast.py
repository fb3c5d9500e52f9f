"""``trainjob-advisor forecast``: where will this run end, when, and is it still learning?

The command an ML engineer runs on a loss log (CSV/TSV, JSONL or a HF ``trainer_state.json``)
without any cluster: it loads the history with ``advisor.sources``, calls the same
``advisor.forecast.forecast`` the controller uses, and prints a short summary, JSON that mirrors
the ``Forecast`` fields, and optionally a plot. ``--upto-step`` replays the forecast as it would
have been at an earlier step and, when the file goes on to the end, shows what actually happened,
which is the quickest way to judge the forecaster on one's own runs. ``--demo`` needs no file.

Here: the options, the request and ``compute``, with what the file shows after the cut. What is
read is ``forecast_input``'s, the forecast and run state ``forecast_outcome``'s, what is printed
``forecast_output``'s and what is drawn ``forecast_plot``'s.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
from dataclasses import dataclass
from typing import Any

from advisor.cli import CommandError, non_negative_int, positive_int, require_extra
from advisor.commands.forecast_input import (
    eval_series_upto,
    load_request,
    not_shown_note,
    one_run_of,
    renamed_warning,
    training_loss_upto,
    undirected_evals,
)
from advisor.commands.forecast_outcome import Outcome, decay_end_step, outcome_of, saved_best_of, trainer_at
from advisor.series import TRAIN_SERIES, Direction, direction_of
from advisor.sources.files import LoadedCurve, SourceError

__all__ = ["ForecastRequest", "compute", "register", "run"]


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
        "--curve", metavar="RUN", help="which run, in a file holding several (curve_id/run_id column)"
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
# Forecasting, and what the file shows after the cut
# --------------------------------------------------------------------------------------------


def compute(args: ForecastRequest) -> Outcome:
    """The forecast of ``args``'s run, as the command prints it (errors as ``CommandError``)."""
    if args.file:
        try:
            args = one_run_of(args)
        except SourceError as exc:
            raise CommandError(str(exc)) from None
    full, notes, cut = load_request(args)
    curve = full
    if cut is not None:
        curve = full.upto(cut)
        if not curve.steps:
            where = f"{args.file}: " if args.file else ""
            raise CommandError(f"{where}no points at or before step {cut:g} (first step {full.steps[0]:g})")
    truncated = len(curve) < len(full)
    last_step = max(full.steps)
    if cut is not None and cut > last_step and not args.demo:
        # the whole file is used: said, since the forecast reads as if made at the step asked
        # for (a console log's steps count its logs: --upto-step 1000 on 200 of them was ignored)
        past = f"--upto-step {cut:,.0f} is past the file's last step ({last_step:,.0f})"
        notes.append(f"{past}: every point used")
    # the run's last step is its training loss's, not its last evaluation's (an eval metric's
    # forecast told a run at step 3,300 to pass --total-steps 2500, its last evaluation)
    whole_train = (
        training_loss_upto(args, None) if args.metric is not None and full.metric != TRAIN_SERIES else None
    )
    run_last = (
        max(last_step, max(whole_train.steps)) if whole_train is not None and whole_train.steps else last_step
    )
    train = whole_train.upto(cut) if whole_train is not None and cut is not None else whole_train
    given = args.total_steps
    if given is None and full.total_steps is None:
        given = args.total_steps_fallback  # compare's: only for a log that does not say its total
    if given is not None and given < run_last:
        raise CommandError(f"--total-steps {given:,} is below the last step in the file ({run_last:,.0f})")
    total = given or full.total_steps
    decays_to = decay_end_step(full if whole_train is None else whole_train)
    if total is None and truncated and decays_to is not None and decays_to > run_last:
        # the file stops before the run did (an export taken mid-run): its last step is no end,
        # and its last value no observed end; the learning rate's decay says where the run ends
        total = math.ceil(decays_to)
        notes.append(
            f"total steps not reported: the learning rate's decay in the file ends the run at about "
            f"step {total:,}, past the file's last step ({run_last:,.0f}), where the cut forecast "
            "reads it to; the file stops before that end, so there is no observed end to check "
            "against (--total-steps sets another end)"
        )
    elif total is None and truncated:
        total = math.ceil(run_last)
        notes.append(
            f"total steps taken from the file's last step ({total:,}): hindsight a live run that does "
            "not report its total lacks (the controller reads its end as unknown; --total-steps sets it)"
        )
    if total is None and not truncated and decays_to is not None and decays_to > run_last:
        # the decay says where the run ends and the forecast reads it to there: the note says that
        # much (the one below told a user to pass a total the output had already found)
        notes.append(
            f"total steps not reported: the learning rate's decay ends the run at about step "
            f"{decays_to:,.0f}, where the forecast reads it to (--total-steps sets another end)"
        )
    elif total is None and not truncated and decays_to is not None and decays_to == run_last:
        # the rate reached zero at the last report: the run is over, which the note says rather
        # than asking whether it has ended
        notes.append(
            f"total steps not reported: the learning rate's decay reached zero at the file's last "
            f"step ({run_last:,.0f}), so the run ended there; the forecast reads it to there"
        )
    elif total is None and not truncated:
        what = "final loss" if full.metric == TRAIN_SERIES else f"final {full.metric}"
        notes.append(
            f"total steps unknown: the {what} is the asymptote (or where a decaying learning rate "
            f"reaches zero). If the run has ended, pass "
            f"--total-steps {math.ceil(run_last)} (its last step); if not, its planned total"
        )
    observed = _observed_end(full, len(curve), total) if truncated else None
    # where the file's values went non-finite for good: after the cut, what the run did next; in a
    # whole file, when it diverged (the forecast's last step is its last finite point, the
    # progress line's the last report)
    diverged = _nonfinite_from(full, len(curve) if truncated else 0)
    evals, not_shown = eval_series_upto(args, curve if train is None else train, cut)
    if not_shown:
        notes.append(not_shown_note(not_shown))
    undirected, undirected_note = undirected_evals(args, curve if train is None else train)
    if undirected_note is not None:
        notes.append(undirected_note)
    directions = {name: direction_of(name) or Direction.LOWER for name in evals}
    renamed = renamed_warning(full.columns, [curve.metric, *evals])
    if renamed is not None:
        curve = dataclasses.replace(curve, warnings=(*curve.warnings, renamed))
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
    # the plot shows what came after the cut: the training loss's later points, and the eval
    # series' too (an overfitting run's rise after the cut was drawn for the one, not the other)
    later = (
        eval_series_upto(args, curve if train is None else train, None)[0] if args.plot and truncated else {}
    )
    return dataclasses.replace(
        outcome,
        evals_whole=later,
        observed_nonfinite_from=diverged,
        evals_not_shown=(*not_shown, *undirected),
        trainer=trainer,
        saved_best=saved_best_of(outcome, full, truncated),
    )


def _nonfinite_from(full: LoadedCurve, cut: int) -> float | None:
    """The step from which the file's values stay non-finite to its end (None when the file ends
    on a finite value, or holds nothing after the first ``cut`` points)."""
    if cut >= len(full.values):
        return None
    i = len(full.values)
    while i > 0 and not math.isfinite(full.values[i - 1]):
        i -= 1
    return full.steps[i] if i < len(full.values) else None


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
