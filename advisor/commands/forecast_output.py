"""What ``trainjob-advisor forecast`` prints: the text summary and the JSON.

The JSON's top level holds the ``Forecast`` fields of the series shown (the contract outside
callers read), with the run ``state`` and each ``series`` beside them; the text says the same for
a person, with the warnings that qualify it.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from advisor.commands.forecast_checkpoint import best_lines
from advisor.commands.forecast_outcome import decay_end_step, series_direction, stuck_for
from advisor.commands.number_text import num as _num
from advisor.forecast._prep import DROPPED_WARNING
from advisor.forecast.core import ends_at_decay, holds_trend
from advisor.forecast.jump import JUMP_WARNING
from advisor.forecast.robust import report_noise
from advisor.forecast.state import (
    IMPROVING_AT_END_NOTE,
    at_last_step,
    ended_reading,
    improving_at_end,
    improving_metric,
    task_judgement,
)
from advisor.model import Forecast, Interval, LearningState
from advisor.series import Direction, direction_of

if TYPE_CHECKING:
    from advisor.commands.forecast_outcome import Outcome

__all__ = ["render_text", "to_json"]


#: the report-to-report scatter (a share of the level) from which the text mentions it
NOISY_SCATTER = 0.05


def _no_trend(n: int) -> str:
    """Why a series too short to hold a trend has no P(plateau) worth printing."""
    return f"{n} point{'' if n == 1 else 's'}, no trend yet"


def _caution(fc: Forecast) -> str | None:
    """What the final value of a diverging run is (None for one that is not): the families fit
    the history before the blow-up, so their end is where a run that recovered would land, not
    where this one is heading; a loss that jumped and stayed up is fitted from its jump on, so its
    end follows the loss since. In the text and the JSON alike (a dashboard on ``--json`` showed a
    NaN run's 47.4 as its forecast, with nothing beside it)."""
    if fc.divergence_probability < 0.5:
        return None
    stays = any(w.startswith(JUMP_WARNING) for w in fc.warnings)
    return f"the run is diverging (P = {fc.divergence_probability:.2f}): the final " + (
        "value above follows its loss since the jump, not its curve before it"
        if stays
        else "value above is where it would end if it recovered, not where it is heading"
    )


def decay_end(outcome: Outcome) -> tuple[float, float | None] | None:
    """(the step where the learning rate's decay reaches zero, seconds to it at the run's speed or
    None without one), for a run that reports no total: the end the forecast read the run to
    (``core.IMPLIED_END_WARNING``). Read off the training loss's schedule when the forecast shows
    an eval metric beside it (``--metric``), as the forecast was. None when no decay says where the
    run ends, or it ends by the last step."""
    fc = outcome.forecast
    if not ends_at_decay(fc.warnings) or fc.last_step is None:
        return None
    schedule = outcome.train if outcome.train is not None else outcome.curve
    end = decay_end_step(schedule)
    last = float(fc.last_step) if outcome.train is None else max(float(fc.last_step), schedule.steps[-1])
    if end is None or end <= last:
        return None
    eta = (end - last) / fc.steps_per_second if fc.steps_per_second else None
    return end, eta


def _scatter(values: tuple[float, ...], level: float | None) -> float | None:
    """The scatter of one report about the trend, as a share of the level, when it is at least
    ``NOISY_SCATTER`` (a small-batch fine-tune's loss: its "current" value is a median of a few
    reports, and the forecast moves with them); None otherwise."""
    tail = [v for v in values[-50:] if math.isfinite(v)]
    if level is None or not math.isfinite(level) or level == 0 or len(tail) < 10:
        return None
    share = report_noise(np.asarray(tail, dtype=float)) / abs(level)
    return share if share >= NOISY_SCATTER else None


def _series_warnings(state: LearningState | None, shown: str) -> list[str]:
    """Each eval series' own warnings (a rise, a short series, a score falling), the judged one
    first, as the JSON's ``series`` has them; none of the series ``shown`` (its warnings are the
    forecast's own)."""
    if state is None:
        return []
    names = sorted(state.series, key=lambda name: name != state.metric)
    return [f"{name}: {w}" for name in names if name != shown for w in state.series[name].warnings]


def _worse_note(name: str, sfc: Any) -> str:
    """`` (worse by the end)`` beside the P(plateau) of a series forecast to end worse than it
    stands by more than the contract's 1%: "no improvement left" counts a rise too, and an eval
    loss heading from 38 to 253 read as a mere plateau."""
    level, end = sfc.current_loss, sfc.final_loss.mean if sfc.final_loss is not None else None
    if level is None or end is None or not (math.isfinite(level) and math.isfinite(end)):
        return ""
    worse = end - level if series_direction(name) is Direction.LOWER else level - end
    return " (worse by the end)" if worse > 0.01 * abs(level) else ""


def _duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "n/a"
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f}s"
    minutes = seconds / 60
    if minutes < 90:
        return f"{minutes:.0f}m"
    hours = minutes / 60
    if hours < 48:
        return f"{int(hours)}h {int(minutes % 60):02d}m"
    return f"{int(hours // 24)}d {int(hours % 24)}h"


def _interval(interval: Interval, fmt: Any = _num) -> str:
    return f"{fmt(interval.mean)}  (80%: {fmt(interval.p10)} .. {fmt(interval.p90)})"


def _label(text: str) -> str:
    return f"{text:<15} "


def state_reading(outcome: Outcome) -> str:
    """The run state as shown: its label, or how a run at its end ended (``ended_reading``)."""
    st = outcome.state
    assert st is not None
    fc = outcome.forecast
    return ended_reading(st.label, at_last_step(fc), improving_at_end(st, fc))


def render_text(outcome: Outcome) -> str:
    fc, curve = outcome.forecast, outcome.curve
    lines = [f"trainjob-advisor forecast: {curve.source}"]
    lines += [f"  note            {note}" for note in outcome.notes]
    # the run's last step, where its last report is (a loss gone NaN at the end is not the run
    # stopping two reports back; the forecast's own last step is that of its last finite point)
    last = curve.steps[-1] if curve.steps else fc.last_step
    progress = f"step {last:,.0f}" if last is not None else "no usable step"
    if outcome.total_steps and last is not None:
        progress += f" of {outcome.total_steps:,} ({100 * last / outcome.total_steps:.0f}%)"
    dropped = f", {fc.n_dropped} dropped" if fc.n_dropped else ""
    lines.append(
        f"  progress        {progress}; {fc.n_points} point{'' if fc.n_points == 1 else 's'} used{dropped}"
    )
    scatter = _scatter(curve.values, fc.current_loss)
    noisy = ""
    if scatter is not None and fc.current_loss is not None:
        # a share of a level near zero is no reading ("by about 797%"): past 100%, the amount
        amount = f"{scatter:.0%}" if scatter <= 1.0 else f"±{_num(scatter * abs(fc.current_loss))}"
        noisy = f"; reports scatter by about {amount} around it"
    lines.append(f"  {_label('current ' + curve.metric)}{_num(fc.current_loss)} (smoothed{noisy})")
    implied = ends_at_decay(fc.warnings)
    where = (
        f" at step {outcome.total_steps:,}"
        if outcome.total_steps
        else " (where the learning rate's decay ends: total steps unknown)"
        if implied
        else " (asymptote: total steps unknown)"
    )
    lines.append(f"  {_label('final ' + curve.metric)}{_interval(fc.final_loss)}{where}")
    caution = _caution(fc)
    if caution is not None:
        lines.append(f"  caution         {caution}")
    gone = outcome.observed_nonfinite_from
    if gone is not None and curve.steps and curve.steps[-1] >= gone:
        # the reports used end non-finite: since when (the forecast's last step is the last finite
        # point, the progress line's the last report; neither said when the loss was lost)
        finite = f"; its last finite value at step {fc.last_step:,.0f}" if fc.last_step is not None else ""
        lines.append(
            f"  {_label('non-finite')}{curve.metric} non-finite in every report from step {gone:,.0f} "
            f"to the last{finite}"
        )
    elif gone is not None:
        lines.append(
            f"  observed end    non-finite from step {gone:,.0f} to the end of the file (the run diverged)"
        )
    if outcome.observed_final is not None:
        lo, hi = fc.final_loss.p10, fc.final_loss.p90
        inside = "inside" if lo <= outcome.observed_final <= hi else "outside"
        where = "in the demo run" if curve.source.startswith("synthetic") else "in the file"
        lines.append(
            f"  observed end    {_num(outcome.observed_final)} {where} ({inside} the 80% interval; "
            f"mean off by {_error(fc.final_loss.mean, outcome.observed_final, curve.values)})"
        )
    if not holds_trend(fc):
        lines.append(f"  plateau         P n/a   ({_no_trend(fc.n_points)})")
    else:
        # without a total the end is a guess: the fits read at the curve's asymptote, the recent
        # trend continued over the reach of a run as likely at any share of it (``plateau``); the
        # text says which end it asks about, and how to give the real one
        unknown = (
            ""
            if fc.total_steps
            else "; end read off the learning rate's decay"
            if implied
            else "; end unknown: to the curve's asymptote, or a run as likely at any share of it; "
            "--total-steps gives its end"
        )
        lines.append(
            f"  plateau         P = {fc.plateau_probability:.2f}   (improvement to the end < 1%{unknown})"
        )
    if outcome.total_steps and at_last_step(fc):
        lines.append(f"  {_label('')}{_at_its_end(curve, outcome.total_steps)}")
    lines.append(f"  divergence      P = {fc.divergence_probability:.2f}")
    hung = outcome.state is not None and outcome.state.label == "hung"
    if hung:
        idle, _ = stuck_for(curve)
        lines.append(f"  ETA             n/a (no step advance for the last {_duration(idle)} of reports)")
    elif fc.eta_seconds is not None:
        rate = f" at {fc.steps_per_second:.3g} steps/s" if fc.steps_per_second else ""
        lines.append(f"  ETA             {_interval(fc.eta_seconds, _duration)}{rate}")
    elif (decayed := decay_end(outcome) if not outcome.total_steps else None) and decayed[1] is not None:
        # no total reported, but the decay says where the run ends and the forecast reads it to
        # there: its ETA, said as the inference it is ("n/a" beside "the decay ends it in about
        # 12m" read as a contradiction; the JSON's ``input.implied_end`` carries it)
        lines.append(
            f"  ETA             about {_duration(decayed[1])} at {fc.steps_per_second:.3g} steps/s, to step "
            f"{decayed[0]:,.0f}, where the learning rate's decay ends (no total steps reported)"
        )
    else:
        why = "total steps unknown"
        if outcome.total_steps and not fc.steps_per_second:
            # the total is known: what is missing is a speed, which takes two timed reports
            why = f"no speed yet from {fc.n_points} timed report(s)"
        if curve.times is None:
            why = (
                "a trainer_state.json logs no timestamps"
                if curve.source.startswith("HF trainer state")
                else "no timestamps in the input"
            )
        rate = f"; {fc.steps_per_second:.3g} steps/s" if fc.steps_per_second else ""
        lines.append(f"  ETA             n/a ({why}{rate})")
    if fc.model:
        weights = sorted(fc.model.items(), key=lambda kv: -kv[1])
        shown = ", ".join(f"{name} {weight:.2f}" for name, weight in weights[:5] if weight >= 0.005)
        lines.append(f"  model           {shown or 'none'}")
    for name, sfc in outcome.state.series.items() if outcome.state is not None else ():
        if name == curve.metric:
            continue  # the series forecast above, judged as it is
        seen = (outcome.evals or {}).get(name)
        last = seen.values[-1] if seen is not None and seen.values else None
        level = sfc.current_loss
        now = f"{_num(level)} now"
        final = f"final {_interval(sfc.final_loss)}"
        if last is not None and not math.isfinite(last):
            # the latest evaluation went NaN: "1.611 now" named the last finite one as current,
            # and its final value reads as where the run is heading (the run state says diverging)
            shown = "NaN" if math.isnan(last) else ("inf" if last > 0 else "-inf")
            kept = [v for v in seen.values if math.isfinite(v)] if seen is not None else []
            before = f"last finite {_num(kept[-1])}" if kept else "none finite"
            now = f"{shown} now ({before})"
            final = f"final if it recovered {_interval(sfc.final_loss)}"
        elif last is not None and level is not None and _num(last) != _num(level):
            # the level is a median of the last evaluations: say so whenever the last one shows
            # otherwise (within 1% it read "now", beside a last evaluation the user could see)
            now = f"{_num(sfc.current_loss)} smoothed (last {_num(last)})"
        lines.append(
            f"  {_label(name)}{now}; {final}; "
            + (
                f"P(plateau) n/a ({_no_trend(sfc.n_points)})"
                if not holds_trend(sfc)
                else f"P(plateau) = {sfc.plateau_probability:.2f}{_worse_note(name, sfc)}"
            )
        )
    if outcome.state is not None:
        st = outcome.state
        probs = ", ".join(f"{k} {v:.2f}" for k, v in st.probabilities.items())
        reading = state_reading(outcome)
        # a run at its end reads how it ended first: "plateaued (finished, improving)" read as a
        # contradiction (the label says nothing is left within the budget, not that it stalled)
        within = ": nothing is left within its budget" if st.label == "plateaued" else ""
        shown = st.label if reading == st.label else f"{reading} (label {st.label}{within})"
        judged = st.series.get(st.metric) if st.metric else None
        judged = judged if judged is not None else fc
        if not holds_trend(judged) and st.label not in ("diverging", "hung"):
            # a label read off even odds is no verdict (one point read "learning" as if it were):
            # said as P(plateau) is above
            probs = f"{_no_trend(judged.n_points)}: {probs}"
        lines.append(f"  run state       {shown}   ({probs})")
        at_best = improving_metric(st, fc)
        if at_best is not None:
            # "plateaued" of a finished run says nothing is left within its budget; a run still at
            # its best at the last evaluation had not stopped learning (read as "it stalled")
            lines.append(f"  {_label('')}{IMPROVING_AT_END_NOTE.format(metric=at_best)}")
        lines += best_lines(outcome)
        task = task_judgement(st)
        if task is not None and task.best_step != st.best_step and curve.metric != st.task_metric:
            # the task's score read beside the judged eval loss: where it was best, when that is
            # another step (a classifier's loss turned at 1,200, its accuracy best at 3,000)
            lines.append(
                f"  best by {st.task_metric} step {task.best_step:,} ({st.task_metric} "
                f"{_num(task.best_value)}, {task.evals_since_best} "
                f"evaluation{'' if task.evals_since_best == 1 else 's'} ago)"
            )
        own_best = _best_of_shown(curve, st.metric)
        if own_best is not None:  # --metric shows another eval series: its own best too
            lines.append(
                f"  best by {curve.metric} step {own_best[0]:,.0f} ({curve.metric} {_num(own_best[1])})"
            )
    warnings = [
        *curve.warnings,
        *(w for w in fc.warnings if not _told_by_the_file(w, curve.warnings, curve.metric)),
        *(outcome.state.warnings if outcome.state else ()),
        *_series_warnings(outcome.state, curve.metric),
    ]
    if warnings:
        lines.append("  warnings")
        lines += [f"    - {warning}" for warning in warnings]
    return "\n".join(lines)


def _told_by_the_file(warning: str, file_warnings: Sequence[str], metric: str) -> bool:
    """The forecast's count of the points it dropped, when the file's reading already counted as
    many non-finite values of the series (a run gone NaN read "25 non-finite loss values" and
    "dropped 25 point(s) ..." for one fact). The JSON keeps both lists as they are."""
    suffix = f" non-finite {metric} values"
    counts = (w.removesuffix(suffix) for w in file_warnings if w.endswith(suffix))
    return any(warning == DROPPED_WARNING.format(n=n) for n in counts)


def _best_of_shown(curve: Any, judged: str | None) -> tuple[float, float] | None:
    """(step, value) of the best point of the series shown when it is an eval series other than
    the one the run state judges (``--metric eval_accuracy`` beside an ``eval_loss``)."""
    from advisor.commands.forecast_outcome import _Series, series_direction
    from advisor.forecast.state import best_point

    if curve.metric in ("loss", judged) or not curve.steps:
        return None
    step, value, _since, _finite = best_point(
        _Series(curve.steps, curve.values, series_direction(curve.metric))
    )
    return None if step is None or value is None else (step, value)


def _at_its_end(curve: Any, total: int) -> str:
    """What P(plateau) = 1 means for a run at its last step (nothing is left to come, whether or
    not it still improved), with how much its series moved over its last tenth: a finished run
    read "plateaued" whichever it was."""
    steps = np.asarray(curve.steps, dtype=float)
    values = np.asarray(curve.values, dtype=float)
    ok = np.isfinite(values)
    steps, values = steps[ok], values[ok]
    head = "at its end: nothing is left to improve"
    late = steps >= 0.9 * total
    early = (steps >= 0.8 * total) & ~late
    if late.sum() < 2 or early.sum() < 2:
        return head
    before, after = float(np.median(values[early])), float(np.median(values[late]))
    if before == 0.0:
        return head
    change = (after - before) / abs(before)
    # two medians of noisy reports differ by noise alone: about 1.25 report sd / sqrt(n) each
    noise = report_noise(values[early | late]) * 1.25 * math.sqrt(1 / early.sum() + 1 / late.sum())
    if abs(after - before) <= 2.0 * noise:
        return f"{head}; over its last tenth it stayed level (within the noise of its reports)"
    if direction_of(curve.metric) is Direction.HIGHER:
        change = -change
    moved = "improved" if change < 0 else "got worse"
    return f"{head}; over its last tenth it {moved} by {abs(change):.1%} (median of its last two tenths)"


def _error(mean: float, observed: float, values: tuple[float, ...]) -> str:
    """The forecast's error as a share of the observed end, or in the loss's own units when the
    end is near zero: under 1% of where the run started (the median of its first tenth), where a
    relative error of a loss that ends at 1e-4 says nothing."""
    diff = mean - observed
    finite = [abs(v) for v in values if math.isfinite(v)]
    start = statistics.median(finite[: max(1, len(finite) // 10)]) if finite else 0.0
    if observed != 0.0 and abs(observed) >= 0.01 * start:
        return f"{100 * abs(diff) / abs(observed):.1f}%"
    return f"{_num(abs(diff))} (absolute: the loss ends near zero)"


def _plain(value: Any) -> Any:
    """Forecast fields as JSON values: Intervals as objects, non-finite floats as null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _checkpoints_json(outcome: Outcome) -> dict[str, Any]:
    """The state's fields on saved checkpoints: ``best_step`` stays the best evaluation; these say
    which checkpoint exists (``best_saved_step``: null without a known save interval, or when no
    evaluation fell on a saved step) and which one the trainer kept."""
    trainer, saved = outcome.trainer, outcome.saved_best
    return {
        "save_steps": trainer.save_steps if trainer is not None else None,
        "best_saved_step": saved[0] if saved is not None else None,
        "best_saved_value": _plain(saved[1]) if saved is not None else None,
        "trainer_best_checkpoint": trainer.checkpoint if trainer is not None else None,
        "trainer_best_step": trainer.step if trainer is not None else None,
        "trainer_best_metric": trainer.metric if trainer is not None else None,
        "trainer_best_value": _plain(trainer.best_metric) if trainer is not None else None,
        # the step trainer_best_value was evaluated at when it is not the checkpoint's
        "trainer_best_evaluated_step": trainer.evaluated_step if trainer is not None else None,
    }


def _implied_end_json(curve: Any, outcome: Outcome) -> dict[str, float | None] | None:
    decayed = None if outcome.total_steps else decay_end(outcome)
    return None if decayed is None else {"step": round(decayed[0]), "eta_seconds": decayed[1]}


def to_json(outcome: Outcome) -> dict[str, Any]:
    result: dict[str, Any] = _plain(outcome.forecast)
    curve = outcome.curve
    result["input"] = {
        "source": curve.source,
        "metric": curve.metric,
        "direction": str(series_direction(curve.metric)),
        "points": len(curve),
        "first_step": curve.steps[0] if curve.steps else None,
        "last_step": curve.steps[-1] if curve.steps else None,
        "total_steps": outcome.total_steps,
        # no total reported, but a learning rate decaying to zero says where the run ends: the
        # forecast is read to there (``final_loss``); ``eta_seconds`` of it at the run's speed (the
        # top-level ``eta_seconds`` stays the contract's, None without a total). None otherwise
        "implied_end": _implied_end_json(curve, outcome),
        "has_times": curve.times is not None,
        "has_learning_rates": curve.learning_rates is not None,
        "has_epochs": curve.epochs is not None,
        "notes": list(outcome.notes),
        "warnings": list(curve.warnings),
        # the eval metrics of the file beyond those forecast (``series``), named in a note
        "eval_metrics_not_shown": list(outcome.evals_not_shown),
    }
    if outcome.observed_final is not None:
        result["observed_final_loss"] = _plain(outcome.observed_final)
    if outcome.observed_nonfinite_from is not None:
        result["observed_nonfinite_from_step"] = outcome.observed_nonfinite_from
    caution = _caution(outcome.forecast)
    if caution is not None:
        result["caution"] = caution.replace("value above", "value (final_loss)")
    st = outcome.state
    if st is not None:
        at_best = improving_metric(st, outcome.forecast)
        improving = at_best is not None
        task_best = task_judgement(st)
        result["state"] = {
            "label": st.label,
            "probabilities": _plain(dict(st.probabilities)),
            "metric": st.metric,
            # the task's score read beside an eval loss judged by default (None: none)
            "task_metric": st.task_metric,
            # where that score was best (None without one)
            "task_best_step": task_best.best_step if task_best is not None else None,
            "task_best_value": task_best.best_value if task_best is not None else None,
            "best_step": st.best_step,
            "best_value": _plain(st.best_value),
            "evals_since_best": st.evals_since_best,
            # at its end every P(plateau) is 1 and the label reads "plateaued": how it ended
            "ended": at_last_step(outcome.forecast),
            "improving_at_end": improving,
            "reading": state_reading(outcome),
            "warnings": [*st.warnings, *([IMPROVING_AT_END_NOTE.format(metric=at_best)] * improving)],
            **_checkpoints_json(outcome),
        }
        series = {curve.metric: _plain(outcome.forecast)}
        series.update({name: _plain(sfc) for name, sfc in st.series.items() if name != curve.metric})
        for name, fields in series.items():
            # which way each improves (an accuracy upwards): a reader had only its name to go by
            fields["direction"] = str(series_direction(name))
        result["series"] = series
    return result
