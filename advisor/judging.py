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
  smoothed value, relative to the former (0 without a later point), less the depth the lowest of
  the later smoothed values reaches by noise alone (``noise_depth``). The best of many noisy values
  lies below the curve they scatter about: on a log flat from 30% of its run with 8% report noise,
  the lowest of its later running medians lay 2.3% under the level, and stops that left nothing
  were counted wrong at 0.5%, 1% and 2%. The depth is the expected lowest of the independent
  later windows that come within two standard errors of the best (a falling curve's best is one
  window at its end: no depth; a flat one's are all of them), each window's median read with the
  standard error its scatter gives it (``Smoothing``, from the series' own report-to-report noise);
* the run *stopped learning* at the first point from which nothing later improves on what it
  stood at there by more than ``LEARNING_THRESHOLD``, read the same way.

Pure: numpy and scipy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

__all__ = [
    "LEARNING_THRESHOLD",
    "MIN_JUDGED_EVALS",
    "NEAR_END_FRACTION",
    "SMOOTH_FRACTION",
    "WRONG_STOP_THRESHOLDS",
    "Smoothing",
    "attained",
    "improvement_left",
    "last_finite",
    "learning_end_index",
    "left_after",
    "noise_depth",
    "running_median",
    "smoothed",
    "smoothing_of",
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


#: later windows whose median lies within this many standard errors of the lowest could have been
#: the lowest (the usual two-sided 95% reach of a normal error)
NEAR_BEST_SE = 2.0
#: fewer finite values than this are read as exact (see ``smoothing_of``)
MIN_NOISE_POINTS = 20
#: the standard error of the median of n normal values is this times that of their mean
_MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2.0)


@dataclass(frozen=True, slots=True)
class Smoothing:
    """How a series was smoothed: the points its running median spans, and the standard error of
    one smoothed value from the series' own report-to-report noise (0: read as exact)."""

    window: int = 1
    se: float = 0.0


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
    return running_median(vals, _window(vals.size))


def _window(n: int) -> int:
    """The points ``smoothed`` spans on a series of ``n``: ``SMOOTH_FRACTION`` of them, made odd as
    ``running_median`` makes it (the whole series when that is longer; 1: none). One derivation for
    the smoothing and for the standard error ``smoothing_of`` gives it."""
    half = max(1, round(SMOOTH_FRACTION * n)) // 2
    return 1 if half < 1 or n < 3 else min(n, 2 * half + 1)


def smoothing_of(values: np.ndarray) -> Smoothing:
    """The smoothing ``smoothed`` gives ``values``, with the standard error of one smoothed value.
    The noise is read from second differences (robust: 1.4826 times their median absolute
    deviation about their median, over the square root of 6, the spread of a second difference of
    independent values), so a trend, a bend or a few wild reports do not pass for noise. A series of
    fewer than ``MIN_NOISE_POINTS`` finite values is read as exact: its few differences say little
    of its noise, and a bend in them would pass for it."""
    vals = np.asarray(values, dtype=float)
    finite = vals[np.isfinite(vals)]
    window = _window(vals.size)
    if finite.size < MIN_NOISE_POINTS:
        return Smoothing(window, 0.0)
    d2 = np.diff(finite, n=2)
    sd = 1.4826 * float(np.median(np.abs(d2 - np.median(d2)))) / math.sqrt(6.0)
    se = sd if window < 3 else _MEDIAN_SE_FACTOR * sd / math.sqrt(window)
    return Smoothing(window, se if math.isfinite(se) else 0.0)


def _expected_lowest(k: float) -> float:
    """The expected lowest of ``k`` independent standard normal values, as a positive depth
    (Blom's approximation of the expected order statistic; 0 for one value)."""
    if k <= 1.0:
        return 0.0
    return -NormalDist().inv_cdf(0.625 / (k + 0.25))


def noise_depth(later: np.ndarray, noise: Smoothing) -> float:
    """How far below the curve the lowest of ``later`` (smoothed values, finite) lies by noise
    alone, in the series' units: one window's standard error times the expected lowest of the
    independent windows (``noise.window`` points each) whose values come within ``NEAR_BEST_SE``
    standard errors of it."""
    if noise.se <= 0.0 or later.size == 0:
        return 0.0
    near = int(np.count_nonzero(later <= float(later.min()) + NEAR_BEST_SE * noise.se))
    return noise.se * _expected_lowest(near / max(1, noise.window))


def attained(values: np.ndarray) -> np.ndarray:
    """The best (lowest) of ``values`` up to each point; non-finite values attain nothing."""
    vals = np.where(np.isfinite(values), values, np.inf).astype(float)
    return np.minimum.accumulate(vals) if vals.size else vals


def standing(smooth_upto: np.ndarray, *, keep_best: bool) -> np.ndarray:
    """What a run stands at at each point of its smoothed series: what it had attained there
    (``keep_best``: an eval series, whose best checkpoint is kept), else the value itself."""
    return attained(smooth_upto) if keep_best else np.asarray(smooth_upto, dtype=float)


def improvement_left(
    here: float, later: np.ndarray, noise: Smoothing | None = None
) -> tuple[float, float | None]:
    """(share of ``here`` that the best of ``later`` improves on it, that best; None without one).
    The improvement is read past the depth the best reaches by noise alone (``noise_depth``); the
    best returned is the value logged."""
    later = later[np.isfinite(later)]
    if later.size == 0 or not math.isfinite(here) or here == 0:
        return 0.0, None
    best = float(later.min())
    depth = 0.0 if noise is None else noise_depth(later, noise)
    return max(0.0, (here - best - depth) / abs(here)), best


def last_finite(values: np.ndarray) -> float:
    """The last finite value (nan when there is none). A decision taken in a stretch of NaN
    reports is measured from where the run last stood: read at the NaN itself, a stop that cut a
    run which recovered and fell 12% further counted "0% left", no wrong stop."""
    finite = values[np.isfinite(values)]
    return float(finite[-1]) if finite.size else float("nan")


def left_after(
    steps: np.ndarray, smooth: np.ndarray, step: float, *, keep_best: bool, noise: Smoothing | None = None
) -> tuple[float, float, float | None]:
    """(improvement left, what the run stood at, the best later value) for a stop at ``step`` of
    a smoothed series at ``steps``: what it stood at by its last point at or before ``step``
    (``standing``; the last finite one, see ``last_finite``) against its later points. The
    back-test's verdicts and ``simulate --curves``' wrong stops both read it (the simulator's own
    copy read a stop inside a stretch of NaN reports as 0% left, where the back-test read 37%)."""
    i = max(0, int(np.searchsorted(steps, step, side="right")) - 1)
    here = last_finite(standing(smooth[: i + 1], keep_best=keep_best))
    left, best = improvement_left(here, smooth[i + 1 :], noise)
    return left, here, best


def learning_end_index(smooth: np.ndarray, *, keep_best: bool = True, noise: Smoothing | None = None) -> int:
    """The first index from which no later smoothed value improves on what the run stood at
    there (``standing``) by more than ``LEARNING_THRESHOLD`` (read past the noise's depth, as
    ``improvement_left`` reads it)."""
    stand = standing(smooth, keep_best=keep_best)
    suffix_min = np.minimum.accumulate(np.where(np.isfinite(stand), stand, np.inf)[::-1])[::-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        left = np.where(np.isfinite(stand), (stand - suffix_min) / np.abs(stand), 0.0)
    bad = np.nonzero(~(left <= LEARNING_THRESHOLD))[0]
    if noise is not None and noise.se > 0.0:
        # the noise only lowers what is left: of the points read as still learning, the last one
        # that still is past the noise's depth (one whose share cannot be read stays one, as above)
        for i in bad[::-1]:
            i = int(i)
            if (
                not math.isfinite(left[i])
                or improvement_left(stand[i], smooth[i:], noise)[0] > LEARNING_THRESHOLD
            ):
                return i + 1
        return 0
    return 0 if bad.size == 0 else int(bad[-1]) + 1
