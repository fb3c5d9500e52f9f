"""One metric series forecast in its own units and direction, as the run state reads it.

The forecaster reads a loss (lower is better). A higher-is-better metric (``eval_accuracy``) is
forecast negated and turned back (``turned_back``): its values, its interval, the warnings that
name a value or a direction, and the top of its scale (1 for a fraction, 100 for a percentage),
which a score never passes. An eval series' P(divergence) counts non-finite evaluations only
(``eval_divergence``): a rising eval metric is the run state's overfitting or plateau, not
divergence. ``advisor.forecast.state`` judges the run by these forecasts and ``forecast_path``
draws them.

Each eval series is forecast with the run's learning rate at its steps (``lr_at``: the training
history's steps and learning rates) when the run reports them. The eval loss of a fine-tune follows
the same schedule as its training loss: a linear or cosine decay to zero flattens both by the end.
Forecast without it, a sparse eval series is read by the anneal prior made for pre-training
validation curves, and on the development fine-tunes' tuning half that doubled the median
final-value error of the eval series (0.076 with the schedule, 0.135 without) and covered 0.17 of
their outcomes with its 80% interval (0.47 with it).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence

import numpy as np

from advisor.forecast.core import RISING_WARNING, forecast
from advisor.forecast.schedule import implied_end
from advisor.model import Forecast, Interval
from advisor.series import Direction

__all__ = [
    "eval_divergence",
    "eval_horizon",
    "forecast_series",
    "lr_at",
    "schedule_end",
    "score_scale",
    "score_top",
    "turned_back",
]


def schedule_end(schedule: tuple[Sequence[float], Sequence[float | None]] | None) -> float | None:
    """Where the training history's learning-rate decay ends the run (``implied_end``), for a run
    that reports no total: its eval series are forecast to that end. Read off each eval series'
    own sparse rates, the same decay put the end at 1,844 beside the training loss's 2,000 (an LLM
    fine-tuner's trial): one run, one end. None without a decay to read."""
    if schedule is None:
        return None
    pairs = sorted(
        (float(s), float(v))
        for s, v in zip(schedule[0], schedule[1], strict=False)
        if v is not None and math.isfinite(float(v)) and math.isfinite(float(s))
    )
    if len(pairs) < 3:
        return None
    implied = implied_end(np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs]))
    return None if implied is None else implied[0]


def eval_horizon(
    last_eval: float, total_steps: int | None, run_end: float | None, finished: bool
) -> tuple[int | None, bool]:
    """(the step an eval series is forecast to, whether that end is the one its learning-rate decay
    implies). A run whose training is at its end evaluates no more: the series ends at its last
    evaluation (its last 100 steps of 2,616 read "final 0.833" below a last eval of 0.866). A run
    that reports no total is read to where the training schedule's decay ends it (``run_end``,
    ``schedule_end``), when that is not behind its last evaluation. One reading for the run state's
    eval forecasts and for ``forecast --metric eval_...``, so the two give one number."""
    horizon = int(last_eval) if finished and total_steps is not None else total_steps
    if horizon is None and run_end is not None and run_end >= last_eval:
        return round(run_end), True
    return horizon, False


def lr_at(
    steps: Sequence[float], schedule: tuple[Sequence[float], Sequence[float | None]] | None
) -> list[float] | None:
    """The learning rate at each of ``steps``, read off ``schedule`` (steps, learning rates of the
    training history; non-finite or missing rates skipped), linearly between its points and held
    at its ends; None without at least two usable points. Only the schedule's past is read: a
    step after its last point gets the last rate, as the controller knows it at that report."""
    if schedule is None:
        return None
    pairs = [
        (float(s), float(v))
        for s, v in zip(schedule[0], schedule[1], strict=False)
        if v is not None and math.isfinite(float(v)) and math.isfinite(float(s))
    ]
    if len(pairs) < 2:
        return None
    pairs.sort()
    xs = np.array([p[0] for p in pairs])
    ys = np.array([p[1] for p in pairs])
    at = np.asarray(steps, dtype=float)
    vals = np.interp(at, xs, ys)
    # two steps a subnormal apart make the slope overflow (inf, or inf * 0 = nan): take the rate
    # logged at or before the step there, and keep every rate within those it was given
    odd = ~np.isfinite(vals)
    if odd.any():
        left = np.clip(np.searchsorted(xs, at[odd], side="right") - 1, 0, len(ys) - 1)
        vals[odd] = ys[left]
    return [float(v) for v in np.clip(vals, ys.min(), ys.max())]


def forecast_series(
    steps: Sequence[float],
    values: Sequence[float],
    direction: Direction,
    *,
    total_steps: int | float | None = None,
    learning_rates: Sequence[float] | None = None,
) -> Forecast:
    """``forecast`` for a metric of either direction, in the metric's own units.

    The forecaster reads a loss (lower is better); a higher-is-better metric is forecast negated
    and turned back, so its P(plateau) is P(it rises by less than 1% of its level).
    ``learning_rates``: the run's learning rate at each of ``steps`` (see ``lr_at``).

    Its P(divergence) counts non-finite evaluations only: an eval metric that rises while it stays
    finite has stopped improving (its P(plateau) counts a rise), which the run state calls
    overfitting or a plateau, not divergence; a divergence is the training loss's to show. So the
    series' forecast and the run state say the same (a rising eval loss read "diverging, P 1.00"
    beside a state of ``overfitting``)."""
    if direction is Direction.LOWER:
        return eval_divergence(
            forecast(steps, values, total_steps=total_steps, learning_rates=learning_rates), values
        )
    fc = eval_divergence(
        forecast(steps, [-float(v) for v in values], total_steps=total_steps, learning_rates=learning_rates),
        values,
    )
    return turned_back(fc, values)


def turned_back(fc: Forecast, values: Sequence[float]) -> Forecast:
    """The forecast of a higher-is-better metric's negated ``values``, in the metric's own units
    and direction (``forecast_series``; ``forecast_path`` with ``Direction.HIGHER``)."""
    f = fc.final_loss
    # a score never leaves its scale: an accuracy reported in [0, 1] (or percent) ends at most at
    # 1 (100), however steeply its early points rise, and at least at 0, however it collapsed
    floor, top = score_scale(values)
    low = min(max(-f.p90, floor), top)
    warnings = tuple(_in_own_terms(w, top, floor) for w in fc.warnings)
    current = None if fc.current_loss is None else -fc.current_loss
    if low >= top and current is not None and current < top:
        # the whole band passes the top (a score still rising in a straight line): where it
        # levels off between where it stands and the top is not in its history, and a band of
        # zero width at the top ("1 (80%: 1 .. 1)") would claim it is
        low = current
        warnings += (f"the forecast passes the top of the scale ({top:g}): it ends between now and the top",)
    # every other field as forecast (``replace``): a field listed by hand was lost when it was
    # not listed (``at_end``: a score at its run's end read "not at its end" beside its loss)
    return dataclasses.replace(
        fc,
        final_loss=Interval(mean=min(max(-f.mean, floor), top), p10=low, p90=min(max(-f.p10, floor), top)),
        warnings=warnings,
        current_loss=current,
    )


def eval_divergence(fc: Forecast, values: Sequence[float]) -> Forecast:
    """``fc``, the forecast of an eval series' ``values``, with its P(divergence) kept only when
    the latest evaluation is not finite (see ``forecast_series``)."""
    if values and not math.isfinite(float(values[-1])):
        return fc
    if fc.divergence_probability == 0.0:
        return fc
    return dataclasses.replace(fc, divergence_probability=0.0)


#: a value the forecaster names in a warning (the end with a constant learning rate), in the
#: units of the series it forecast
_VALUE_IN_WARNING = re.compile(r"(?<=the end would be near )(\S+)(?= )")


def _in_own_terms(warning: str, top: float = math.inf, floor: float = -math.inf) -> str:
    """A warning about the negated series, in a higher-is-better metric's own direction: the
    negated series rising is the metric falling, which is its worsening (an accuracy "rising"
    read as good news), a value it names is the metric's, not its negation, and no higher than
    the top of its scale (an accuracy's constant-LR end "near 1.801") nor below its bottom; what
    it calls "the loss" is the series."""
    if warning.startswith(RISING_WARNING):
        return "the series is falling (worsening)" + warning[len(RISING_WARNING) :]
    own = _VALUE_IN_WARNING.sub(lambda m: _negated(m.group(1), top, floor), warning)
    return own.replace("the loss ", "the series ")


def _negated(text: str, top: float = math.inf, floor: float = -math.inf) -> str:
    try:
        return f"{min(max(-float(text), floor), top):.4g}"
    except ValueError:
        return text


def score_scale(values: Sequence[float]) -> tuple[float, float]:
    """(bottom, top) of a higher-is-better metric's scale as its values show it: 0 and 1 for a
    fraction, 0 and 100 for a percentage, else unbounded (``score_top``)."""
    top = score_top(values)
    return (0.0 if math.isfinite(top) else -math.inf), top


def score_top(values: Sequence[float]) -> float:
    """The top of a higher-is-better metric's scale as its values show it: 1 for a fraction, 100
    for a percentage, else none (``inf``). A scale with a top has its bottom at 0."""
    finite = [float(v) for v in values if math.isfinite(v)]
    if not finite or min(finite) < 0:
        return math.inf
    peak = max(finite)
    return 1.0 if peak <= 1.0 else 100.0 if peak <= 100.0 else math.inf
