"""The forecast along the steps to the end (``forecast_path``), for plots.

The same fits and weights as the forecast at the horizon (``core._estimate`` with path steps),
read at each step after the last one, with the calibrated interval rule at that step's remaining
fraction. With a known total the path is drawn from the current level to the forecast's final
loss and interval themselves, along the ensemble's shape where it heads the same way
(``_path_band``). A higher-is-better metric (an
accuracy) is forecast negated and turned back, as ``eval_forecast.forecast_series`` forecasts it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from advisor.forecast import calibration as cal
from advisor.forecast.core import Parts, _run, failed_forecast
from advisor.forecast.eval_forecast import eval_divergence, score_scale, turned_back
from advisor.model import Forecast
from advisor.series import Direction

__all__ = ["ForecastPath", "forecast_path"]


@dataclass(frozen=True)
class ForecastPath:
    """The forecast along the steps after the last one: the predicted loss and its 80% interval at
    each step (for plots; the end point, with a known total, is the forecast's final loss)."""

    steps: tuple[float, ...]
    mean: tuple[float, ...]
    p10: tuple[float, ...]
    p90: tuple[float, ...]


def forecast_path(
    steps: Any,
    values: Any,
    *,
    total_steps: Any = None,
    times: Any = None,
    learning_rates: Any = None,
    epochs: Any = None,
    points: int = 40,
    training_loss: bool = False,
    direction: Direction = Direction.LOWER,
    eval_series: bool = False,
) -> tuple[Forecast, ForecastPath | None]:
    """``forecast`` (the same numbers) and the forecast along ``points`` steps from the last one to
    ``total_steps`` (unknown: over as many steps again as the history spans); None when there is
    no forecast. ``training_loss`` as in ``forecast``; ``direction``: which way the series improves
    (``Direction.HIGHER``: forecast as ``forecast_series`` does); ``eval_series``: the series is an
    eval metric, whose P(divergence) counts non-finite evaluations only, as ``forecast_series``
    has it (a rise is its P(plateau)'s). Never raises on bad data."""
    higher = direction is Direction.HIGHER
    try:
        with np.errstate(all="ignore"):
            # a higher-is-better series is forecast negated (a loss), then turned back
            own = np.asarray(values, dtype=np.float64) if higher else values
            read, loss = (-own, False) if higher else (values, training_loss)
            fc, parts = _run(steps, read, total_steps, times, learning_rates, epochs, None, points, loss)
    except Exception as exc:  # as ``forecast``: never crash the caller, and say so in the log
        return failed_forecast(exc), None
    path = _path_band(fc, parts, read)
    if eval_series:
        fc = eval_divergence(fc, np.asarray(values, dtype=np.float64).tolist())
    if higher:
        return turned_back(fc, own.tolist()), None if path is None else _turned_path(path, own.tolist())
    return fc, path


def _path_band(fc: Forecast, parts: Parts, values: Any) -> ForecastPath | None:
    """The path drawn, made to agree with the reported forecast. With a known total it runs from
    the current level (``fc.current_loss``) to the final value and its 80% interval, exactly: the
    mean moves from the one to the other along the ensemble's own shape where the ensemble moves
    the way the forecast does (``_progress``), along a straight line where it does not (an eval
    loss turned upward by its rising branch, which the falling families do not see: scaling their
    drop to a rise put the path at 0 on the way, or had it jump up after the last point); the
    interval opens with the ensemble's sd to the final one's. Neither ever leaves the range between
    the current level and the final interval, nor goes below 0 for a loss never negative. Without
    a total the path is the ensemble's own (the asymptote is drawn apart), kept between the current
    level and the asymptote's interval, and none when it heads away from the asymptote."""
    if parts.path_steps is None or not len(parts.path_steps):
        return None
    steps = np.asarray(parts.path_steps, dtype=np.float64)
    ens_mean, ens_sd = parts.path_mean, parts.path_sd
    usable = (
        ens_mean is not None
        and ens_sd is not None
        and ens_mean.shape == steps.shape
        and ens_sd.shape == steps.shape
        and bool(np.isfinite(ens_mean).all() and np.isfinite(ens_sd).all())
    )
    final = fc.final_loss
    if not (math.isfinite(final.mean) and math.isfinite(final.p10) and math.isfinite(final.p90)):
        return None
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    never_negative = bool(finite.size) and float(finite.min()) >= 0.0
    start, last = fc.current_loss, fc.last_step
    if fc.total_steps is None or start is None or last is None or not math.isfinite(start):
        if not usable or ens_mean is None or ens_sd is None:
            return None
        mean, half = ens_mean.copy(), cal.Z80 * ens_sd
        lo, hi = mean - half, mean + half
        if start is not None and math.isfinite(start):
            # heading away from the asymptote the forecast gives (falling families under an eval
            # loss turned upward) it says the opposite of the text: not drawn; else kept between
            # the current level and the asymptote's interval
            if (final.mean - start) * (float(ens_mean[-1]) - parts.level) < 0.0:
                return None
            mean = np.clip(mean, min(start, final.mean), max(start, final.mean))
            lo = np.clip(lo, min(start, final.p10), mean)
            hi = np.clip(hi, mean, max(start, final.p90))
        if never_negative:
            lo, mean = np.maximum(lo, 0.0), np.maximum(mean, 0.0)
    else:
        span = float(steps[-1]) - last
        linear = np.clip((steps - last) / span, 0.0, 1.0) if span > 0 else np.ones_like(steps)
        linear[-1] = 1.0
        along = linear
        opens = linear
        if usable and ens_mean is not None and ens_sd is not None:
            along = _progress(ens_mean - parts.level, final.mean - start, linear)
            if float(ens_sd[-1]) > 0:
                opens = _progress(ens_sd, 1.0, linear, relative=float(ens_sd[-1]))
        mean = start + along * (final.mean - start)
        lo = mean - opens * (final.mean - final.p10)
        hi = mean + opens * (final.p90 - final.mean)
        lo = np.clip(lo, min(start, final.p10), mean)
        hi = np.clip(hi, mean, max(start, final.p90))
        if never_negative:
            lo, mean = np.maximum(lo, 0.0), np.maximum(mean, 0.0)
        # the end point is the forecast itself
        mean[-1], lo[-1], hi[-1] = final.mean, final.p10, final.p90
    return ForecastPath(
        tuple(float(v) for v in steps),
        tuple(float(v) for v in mean),
        tuple(float(v) for v in np.minimum(lo, mean)),
        tuple(float(v) for v in np.maximum(hi, mean)),
    )


def _progress(moved: Any, target: float, linear: Any, *, relative: float | None = None) -> Any:
    """How far along (0 at the last point, 1 at the end) a path whose move from the current level
    is ``moved`` at each step is, for a forecast that moves by ``target`` in all: ``moved`` over its
    own end value (or over ``relative``), kept in [0, 1] and never going back; ``linear`` (the
    share of the steps gone) when ``moved`` does not head the way ``target`` does all along (it
    ends the other way, or goes back or past its end by more than a tenth of it on the way)."""
    end = float(moved[-1]) if relative is None else relative
    if not (math.isfinite(end) and end != 0.0 and target * end > 0.0):
        return linear
    share = np.asarray(moved, dtype=np.float64) / end
    if float(share.min()) < -0.1 or float(share.max()) > 1.1:
        return linear
    share = np.maximum.accumulate(np.clip(share, 0.0, 1.0))
    share[-1] = 1.0
    return share


def _turned_path(path: ForecastPath, values: Any) -> ForecastPath:
    """The path of a negated higher-is-better series, in the series' own units (held to its
    scale, 0 to its top, as its final value is: ``turned_back``)."""
    floor, top = score_scale(values)
    return ForecastPath(
        path.steps,
        tuple(min(max(-v, floor), top) for v in path.mean),
        tuple(min(max(-v, floor), top) for v in path.p90),
        tuple(min(max(-v, floor), top) for v in path.p10),
    )
