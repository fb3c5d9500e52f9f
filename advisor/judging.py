"""How a real run's own later record judges it: one definition for the back-test and the simulator.

A real run has no hidden truth, so whether it "still learned" at a step is read from what it logged
afterwards, the same way wherever a verdict on a real run is given (``advisor.backtest.verdict``
for ``trainjob-advisor backtest``, ``simulator.real_curves`` for ``simulate --curves``), and
independently of the thresholds any policy uses:

* the series judged is the run's eval series when it has at least ``MIN_JUDGED_EVALS`` points,
  else its training loss;
* the series is smoothed by a running median over ``SMOOTH_FRACTION`` of its points, so that one
  noisy point neither makes nor unmakes a verdict. Near either end the window keeps its size and
  stays inside the series (the median of the first or last points): a window padded with copies
  of the end point, as ``median_filter(mode="nearest")`` pads it, hands the verdict to that one
  point (its copies are the window's majority);
* what the run *stands at* at a point, on an eval series, is the best smoothed value up to it (its
  running minimum): the checkpoint a stop keeps is the best evaluated one (an eval past its
  minimum is overfitting, and HF's ``load_best_model_at_end`` keeps that minimum), and a run
  climbing back to where it had been is not improving. On the training loss no checkpoint keeps
  its best (nothing selects one), so a run stands at its smoothed value there: a run that rose
  and then recovered was still improving on what a stop would have kept (``keep_best``);
* the improvement *left* after a point is what the run stood at there minus the best later
  smoothed value, relative to the former (0 without a later point);
* the run *stopped learning* at the first point from which nothing later improves on what it
  stood at there by more than ``LEARNING_THRESHOLD``.

Pure: numpy and scipy only.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "LEARNING_THRESHOLD",
    "MIN_JUDGED_EVALS",
    "NEAR_END_FRACTION",
    "SMOOTH_FRACTION",
    "WRONG_STOP_THRESHOLDS",
    "attained",
    "improvement_left",
    "last_finite",
    "learning_end_index",
    "left_after",
    "running_median",
    "smoothed",
    "standing",
    "threshold_key",
]

#: the share of a series' points its running median spans
SMOOTH_FRACTION = 0.05
#: a run is judged by its eval series when it logged at least this many evaluations, else by its
#: training loss (fewer say little of a trend, and their running median is a point or two)
MIN_JUDGED_EVALS = 5
#: a run that can still improve by more than this share of its value is still learning
LEARNING_THRESHOLD = 0.01
#: the improvement thresholds at which a stop is counted wrong, the same for the back-test and
#: the simulator (their JSON's ``wrong_stops_by_threshold`` keys: ``threshold_key``)
WRONG_STOP_THRESHOLDS = (0.005, 0.01, 0.02)
#: a release of a healthy run in this last share of its budget is a near-end release, not a saving
NEAR_END_FRACTION = 0.15


def threshold_key(t: float) -> str:
    """A wrong-stop threshold as its JSON key (``"0.005"``)."""
    return f"{t:g}"


def running_median(values: np.ndarray, window: int) -> np.ndarray:
    """Running median over ``window`` points (made odd), centred where the series allows and kept
    inside it near the ends. A non-finite value counts as +inf (a blown-up loss is the worst)."""
    vals = np.where(np.isfinite(values), values, np.inf).astype(float)
    half = window // 2
    if half < 1 or vals.size < 3:
        return vals
    size = 2 * half + 1
    if vals.size <= size:
        return np.full(vals.size, float(np.median(vals)))
    from scipy.ndimage import median_filter

    out = np.asarray(median_filter(vals, size=size, mode="nearest"), dtype=float)
    out[:half] = float(np.median(vals[:size]))
    out[-half:] = float(np.median(vals[-size:]))
    return out


def smoothed(values: np.ndarray) -> np.ndarray:
    """``values`` through the running median of ``SMOOTH_FRACTION`` of their points."""
    vals = np.asarray(values, dtype=float)
    return running_median(vals, max(1, round(SMOOTH_FRACTION * vals.size)))


def attained(values: np.ndarray) -> np.ndarray:
    """The best (lowest) of ``values`` up to each point; non-finite values attain nothing."""
    vals = np.where(np.isfinite(values), values, np.inf).astype(float)
    return np.minimum.accumulate(vals) if vals.size else vals


def standing(smooth_upto: np.ndarray, *, keep_best: bool) -> np.ndarray:
    """What a run stands at at each point of its smoothed series: what it had attained there
    (``keep_best``: an eval series, whose best checkpoint is kept), else the value itself."""
    return attained(smooth_upto) if keep_best else np.asarray(smooth_upto, dtype=float)


def improvement_left(here: float, later: np.ndarray) -> tuple[float, float | None]:
    """(share of ``here`` that the best of ``later`` improves on it, that best; None without one)."""
    later = later[np.isfinite(later)]
    if later.size == 0 or not math.isfinite(here) or here == 0:
        return 0.0, None
    best = float(later.min())
    return max(0.0, (here - best) / abs(here)), best


def last_finite(values: np.ndarray) -> float:
    """The last finite value (nan when there is none). A decision taken in a stretch of NaN
    reports is measured from where the run last stood: read at the NaN itself, a stop that cut a
    run which recovered and fell 12% further counted "0% left", no wrong stop."""
    finite = values[np.isfinite(values)]
    return float(finite[-1]) if finite.size else float("nan")


def left_after(
    steps: np.ndarray, smooth: np.ndarray, step: float, *, keep_best: bool
) -> tuple[float, float, float | None]:
    """(improvement left, what the run stood at, the best later value) for a stop at ``step`` of
    a smoothed series at ``steps``: what it stood at by its last point at or before ``step``
    (``standing``; the last finite one, see ``last_finite``) against its later points. The
    back-test's verdicts and ``simulate --curves``' wrong stops both read it (the simulator's own
    copy read a stop inside a stretch of NaN reports as 0% left, where the back-test read 37%)."""
    i = max(0, int(np.searchsorted(steps, step, side="right")) - 1)
    here = last_finite(standing(smooth[: i + 1], keep_best=keep_best))
    left, best = improvement_left(here, smooth[i + 1 :])
    return left, here, best


def learning_end_index(smooth: np.ndarray, *, keep_best: bool = True) -> int:
    """The first index from which no later smoothed value improves on what the run stood at
    there (``standing``) by more than ``LEARNING_THRESHOLD``."""
    smooth = standing(smooth, keep_best=keep_best)
    suffix_min = np.minimum.accumulate(np.where(np.isfinite(smooth), smooth, np.inf)[::-1])[::-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        left = np.where(np.isfinite(smooth), (smooth - suffix_min) / np.abs(smooth), 0.0)
    bad = np.nonzero(~(left <= LEARNING_THRESHOLD))[0]
    return 0 if bad.size == 0 else int(bad[-1]) + 1
