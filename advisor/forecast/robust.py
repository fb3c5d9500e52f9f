"""Robust statistics of a noisy history: its level, its noise, its trend, and its reduction.

A loss history is a trend under report-to-report noise with the odd spike (a bad batch, a logging
glitch). Every reading the forecaster takes of "where the curve stands now" and "how noisy one
report is" goes through these medians and median-based estimates, so one spike neither moves the
level nor inflates the noise. They take clean arrays (``advisor.forecast._prep.prepare`` makes
them) and never raise on short ones.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

#: a history longer than this is reduced (bin medians) before fitting; the shape survives
MAX_FIT_POINTS = 64


def average_repeats(steps: FloatArray, values: FloatArray) -> tuple[NDArray[np.bool_], FloatArray]:
    """Where each run of consecutive reports of one step ends (a mask over ``steps``), and the
    mean of each run's finite values (NaN when it has none), one per ``True`` of the mask: a step
    logged once per micro-batch (gradient accumulation) read as the mean of its micro-batches."""
    if steps.size == 0:
        return np.zeros(0, dtype=bool), values[:0]
    last = np.r_[steps[1:] != steps[:-1], True]
    first = np.flatnonzero(np.r_[True, last[:-1]])
    finite = np.isfinite(values)
    sums = np.add.reduceat(np.where(finite, values, 0.0), first)
    counts = np.add.reduceat(finite.astype(float), first)
    with np.errstate(invalid="ignore", divide="ignore"):
        return last, np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def downsample(
    x: FloatArray, y: FloatArray, max_points: int = MAX_FIT_POINTS
) -> tuple[FloatArray, FloatArray]:
    """Reduce a long history to at most ``max_points`` bin medians (robust to spikes).

    Bins are equal-count over the latest points and the earliest ones, so recent detail, which
    drives extrapolation, is kept at the same resolution as the start.
    """
    n = x.size
    if n <= max_points:
        return x, y
    k = math.ceil(n / max_points)
    m = (n // k) * k
    head = n - m  # the oldest points that do not fill a bin are kept as they are
    return np.concatenate((x[:head], row_medians(x[head:].reshape(-1, k)))), np.concatenate(
        (y[:head], row_medians(y[head:].reshape(-1, k)))
    )


def row_medians(a: FloatArray) -> FloatArray:
    """np.median(a, axis=1) by one partition (the same numbers, a fraction of the overhead)."""
    k = a.shape[1]
    if k % 2:
        return np.partition(a, k // 2, axis=1)[:, k // 2]
    part = np.partition(a, (k // 2 - 1, k // 2), axis=1)
    return 0.5 * (part[:, k // 2 - 1] + part[:, k // 2])


def fast_median(a: FloatArray) -> float:
    """Median via one partition (np.median's generality costs ~50 us per call)."""
    n = a.size
    if n == 0:
        return float("nan")
    k = n // 2
    part = np.partition(a, k)
    if n % 2:
        return float(part[k])
    return 0.5 * float(part[k] + np.max(part[:k]))


#: the standard error of a median of k reports is this times one report's sd / sqrt(k) (sqrt(pi/2))
MEDIAN_SE = 1.2533


def report_noise(y: FloatArray) -> float:
    """The noise of one report: a robust sd from first differences (a trend barely moves them, a
    spike inflates one or two only). 0 for fewer than two points."""
    if y.size < 2:
        return 0.0
    return 1.4826 * fast_median(np.abs(y[1:] - y[:-1])) / math.sqrt(2.0)


def smoothed_level(y: FloatArray, k: int = 5) -> float:
    """The current loss level: median of the last ``k`` points (robust to a final spike), and of
    the later half of a shorter series (two points are not smoothed into their mean)."""
    if y.size == 0:
        return float("nan")
    return fast_median(y[-min(k, (y.size + 1) // 2) :])


def _theil_sen(xs: FloatArray, ys: FloatArray) -> float:
    """The median of the pairwise slopes of (``xs``, ``ys``): a line a spike does not tilt."""
    i, j = np.triu_indices(xs.size, 1)
    return float(np.median((ys[j] - ys[i]) / (xs[j] - xs[i])))


def trend_scatter(x: FloatArray, y: FloatArray, k: int = 5) -> float:
    """How far the last ``k`` points of a sparse series scatter about the line ``trend_level``
    carries them along (their Theil-Sen slope): the RMS of their residuals, corrected for the two
    the line takes. What one evaluation's noise is at the end of a series that still moves, where
    first differences are mostly the trend; a slow wiggle over the window counts too. NaN for
    fewer than three points."""
    m = min(k, y.size)
    if m < 3:
        return float("nan")
    xs, ys = x[-m:], y[-m:]
    resid = ys - _theil_sen(xs, ys) * xs
    resid = resid - fast_median(resid)
    return math.sqrt(float(resid @ resid) / max(m - 2, 1))


def trend_level(x: FloatArray, y: FloatArray, k: int = 5) -> float:
    """The current level of a sparse series that still moves (an eval metric every few hundred
    steps): the median of the last ``k`` points each carried to the last step along their
    Theil-Sen slope. A plain median of the last points lags a falling eval loss by about half its
    window, two evaluations; carried along the slope, the points of a trend agree on where it
    stands now, and those of a flat series (slope 0) are the plain median."""
    m = min(k, (y.size + 1) // 2)
    if m < 3:
        return smoothed_level(y, k)
    xs, ys = x[-m:], y[-m:]
    slope = _theil_sen(xs, ys)
    # within the points it reads: a level no point reached is an extrapolation of a slope fitted
    # to a handful of jumpy values (a precision logged as 0, 0.5 or 1 "stood at 1.083")
    return float(np.clip(fast_median(ys + slope * (xs[-1] - xs)), float(np.min(ys)), float(np.max(ys))))
