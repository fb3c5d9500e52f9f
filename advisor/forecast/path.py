"""The forecast along the steps to the end (``forecast_path``), for plots.

The same fits and weights as the forecast at the horizon (``core._estimate`` with path steps),
read at each step after the last one, with the calibrated interval rule at that step's remaining
fraction; the end point is the forecast's final loss itself. A higher-is-better metric (an
accuracy) is forecast negated and turned back, as ``state.forecast_series`` forecasts it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from advisor.forecast import calibration as cal
from advisor.forecast.core import Parts, _run
from advisor.forecast.state import eval_divergence, score_top, turned_back
from advisor.model import Forecast, Interval
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
    except Exception as exc:
        return Forecast(
            final_loss=Interval(float("nan"), float("nan"), float("nan")),
            plateau_probability=0.5,
            divergence_probability=0.0,
            warnings=(f"forecast failed: {type(exc).__name__}: {exc}",),
        ), None
    path = _path_band(fc, parts, read)
    if eval_series:
        fc = eval_divergence(fc, np.asarray(values, dtype=np.float64).tolist())
    if higher:
        return turned_back(fc, own.tolist()), None if path is None else _turned_path(path, own.tolist())
    return fc, path


def _path_band(fc: Forecast, parts: Parts, values: Any) -> ForecastPath | None:
    """The path's interval, made to agree with the reported forecast: where the final mean was
    moved after the ensemble (the recent-trend rule, the clip at zero), the path's drop from the
    current level is scaled to end there; a loss never negative stays at or above zero."""
    if parts.path_steps is None or parts.path_mean is None or parts.path_sd is None:
        return None
    level, mean, sd = parts.level, parts.path_mean.copy(), parts.path_sd
    if not (np.isfinite(mean).all() and np.isfinite(sd).all() and math.isfinite(fc.final_loss.mean)):
        return None
    final = fc.final_loss.mean
    if fc.total_steps is not None and math.isfinite(parts.mean) and abs(parts.mean - level) > 0:
        mean = level + (mean - level) * ((final - level) / (parts.mean - level))
    half = cal.Z80 * sd
    lo, hi = mean - half, mean + half
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if finite.size and float(finite.min()) >= 0.0:
        lo, mean = np.maximum(lo, 0.0), np.maximum(mean, 0.0)
    if fc.total_steps is not None:  # the end point is the forecast itself
        mean[-1], lo[-1], hi[-1] = final, fc.final_loss.p10, fc.final_loss.p90
    return ForecastPath(
        tuple(float(v) for v in parts.path_steps),
        tuple(float(v) for v in mean),
        tuple(float(v) for v in np.minimum(lo, mean)),
        tuple(float(v) for v in np.maximum(hi, mean)),
    )


def _turned_path(path: ForecastPath, values: Any) -> ForecastPath:
    """The path of a negated higher-is-better series, in the series' own units (capped at its
    scale's top as its final value is: ``turned_back``)."""
    top = score_top(values)
    return ForecastPath(
        path.steps,
        tuple(min(-v, top) for v in path.mean),
        tuple(min(-v, top) for v in path.p90),
        tuple(min(-v, top) for v in path.p10),
    )
