"""A local, conservative plateau test: does even the current trend, continued, gain less than 1%?

The ensemble's plateau probability comes from curve families fitted to the whole history. They
assume a smooth decay, so after a run has abruptly stopped learning they keep bending slowly down
for a long while (the old, steep part of the history still pulls them), and P(plateau) lingers
well below 1 on a curve that has been flat for many reports. The question itself is local: will
the loss improve by 1% between now and ``total_steps``?

So the recent window is also summarised by its own trend in log-step, with a standard error from
the point-to-point noise (robust to spikes), and the remaining drop is that trend continued to
``total_steps``. For a learning curve this over-states the drop (the slope in log-step only ever
flattens as a run saturates), so the resulting probability is conservative: when even this
continuation gains less than 1%, the run has plateaued. It only applies when no learning-rate
decay and no new epoch is coming (a constant schedule): an annealing or epoch drop is not in the
recent trend, and the schedule-aware ensemble is the one that knows about it.

``core`` consults it when the fits' own P(plateau) is already >= 0.5, or when the fits, refitted
without the held-out tail of the history, expected that tail no higher than it stayed (their mean
error there is not positive): the curve has not fallen faster than a saturating curve would. That
gate is what keeps out the case that makes the continuation unsafe: a run that starts slowly is
concave in log-step, its recent trend under-states what is to come, its tail falls faster than the
fits expect, and in the trace simulator an ungated local test released such runs while they still
had 4% to gain. When it raises P(plateau), the final-loss forecast follows it (no more drop than
the continuation gives), so that the two numbers a policy reads agree.

The window is the longest recent stretch that is still a straight line in log-step (tried from the
last WINDOW_FRACTIONS[0] of the points up): short enough never to reach back across the bend where
a run stopped learning, as long as that allows, because the standard error of the trend falls with
the window's spread. And the continuation is only trusted once the run has shown that it
decelerates: the points before the window must have fallen significantly faster (KNEE_Z) than the
window does. A slow starter, whose history is nearly flat in log-step because most of log-step lies
in its first few percent, has no such knee: its trend is concave, the continuation would
under-state what is to come, and the test abstains. It abstains too while a loss spike is in the
window (consecutive reports well above its trend line): a spike early in the window and the
recovery after it flatten the straight-line trend of a run that is still learning (a fine-tune
with 1.2% left was released so in the trace simulator when it re-forecast every minute). And it
abstains when the window's trend, continued, is too uncertain to resolve the 1% band (RESOLVE_MAX):
its probability is then noise near Phi(1 / ratio), not a bound, and ``core`` takes the larger of it
and the fits' own.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtr

from advisor.forecast.robust import report_noise

FloatArray = NDArray[np.float64]

#: the recent windows tried, as fractions of the points (the shortest is always used; a longer one
#: only while the history over it is still a straight line in log-step)
WINDOW_FRACTIONS = (0.2, 0.3, 0.45, 0.65)
MIN_POINTS = 8
#: a window is straight when a quadratic term in log-step is within this many standard errors of 0
STRAIGHT_Z = 2.0
#: the points before the window must fall faster than the window by this many standard errors
KNEE_Z = 2.0
#: a window whose trend rises by more than this many standard errors is not judged at all
RISING_Z = 2.0
#: a window holds a loss spike when this many consecutive reports stand this many report noises
#: above its trend line
SPIKE_Z = 3.0
SPIKE_POINTS = 2
#: "plateau": less than this relative improvement left (the Forecast contract's 1%)
IMPROVEMENT = 0.01
#: the test abstains when the standard error of its continued trend exceeds this many times the 1%
#: band it is asked about: such a window cannot tell a plateau from a run still falling, and its
#: probability is no bound but noise near Phi(1 / ratio) (a short window whose trend was -0.015 +-
#: 0.11 put P(plateau) at 0.64 on a run still falling 4.5%, its neighbours' cuts at 0.01-0.10).
#: Chosen on the tuning half (1.0 and 1.5 measured alike there): one standard error within the band
RESOLVE_MAX = 1.0


#: the log-step reach still ahead, ``log(total / last)``, at elapsed shares ``last / total`` evenly
#: spaced over (0, 1) (``_unknown_end``)
_REACH = -np.log((np.arange(1024) + 0.5) / 1024)


def local_plateau_probability(
    steps: FloatArray, values: FloatArray, horizon: float | None, level: float
) -> float | None:
    """P(the recent log-step trend, continued to ``horizon``, improves by < 1% of ``level``).

    With ``horizon`` None (the run does not report its total steps) the trend is continued over the
    reach a scale-free prior expects (``_unknown_end``). None when it does not apply: too few
    points, the horizon already reached, or a degenerate window."""
    trend = local_trend(steps, values, horizon, level)
    return None if trend is None else trend[0]


def local_trend(
    steps: FloatArray, values: FloatArray, horizon: float | None, level: float
) -> tuple[float, float] | None:
    """(``local_plateau_probability``, the drop the recent log-step trend gives by ``horizon``)."""
    n = values.size
    if n < MIN_POINTS or not math.isfinite(level):
        return None
    last = float(steps[-1])
    # unknown horizon: the expected remaining log-step reach (1) scales the trend (see ``_unknown_end``)
    reach = 1.0 if horizon is None else math.log((horizon + 1.0) / (last + 1.0))
    if reach <= 0.0:
        return None
    x = np.log(steps + 1.0)
    window = _straight_window(x, values)
    if window is None:
        return None
    slope, se, k = window
    se = max(se, 1e-12 * (abs(level) + 1e-12))
    drop = -slope * reach
    if drop < -RISING_Z * se * reach:
        # the window is rising: a spike on its way back down, or a divergence (the divergence
        # rule's business); neither is a plateau, and the continuation says nothing about either
        return None
    if not _decelerated(x[:-k], values[:-k], slope, se):
        return None
    threshold = IMPROVEMENT * abs(level)
    if se * reach > RESOLVE_MAX * threshold:
        return None
    if horizon is None:
        return _unknown_end(threshold, slope, se), drop
    return float(ndtr((threshold - drop) / (se * reach))), drop


def _unknown_end(threshold: float, slope: float, se: float) -> float:
    """P(the trend, continued to the run's unknown end, improves by < ``threshold``).

    A run that does not say how long it will train is, at a look taken at no particular moment of
    it, as likely to be at any fraction of its length: its elapsed share ``last / total`` is uniform
    (Gott's Copernican argument, the scale-free prior on a duration), so the log-step reach still
    ahead, ``log(total / last)``, is exponentially distributed with mean 1. Its median is a
    doubling, and one run in ten goes on ten times as long; the probability is the trend's, averaged
    over that reach: the mean over evenly spaced elapsed shares, where a trend known exactly makes
    the integrand a step. No constant is chosen: the prior has no parameter."""
    with np.errstate(divide="ignore", over="ignore"):
        p = ndtr((threshold + slope * _REACH) / (se * _REACH))
    return float(p.mean())


def _decelerated(x: FloatArray, y: FloatArray, slope: float, se: float) -> bool:
    """Whether the points before the window fell faster (in log-step) than the window's trend by
    KNEE_Z standard errors: the run decelerates, so continuing the window's trend over-states what
    is left. Too few earlier points to tell is not evidence of it."""
    m = y.size
    if m < 3:
        return False
    xc = x - float(x.sum()) / m
    sxx = float(xc @ xc)
    if sxx <= 0.0:
        return False
    before = float(xc @ y) / sxx
    sigma = report_noise(y)
    se_before = sigma / math.sqrt(sxx)
    return slope - before > KNEE_Z * math.hypot(se, se_before)


def _has_spike(xc: FloatArray, y: FloatArray, sxx: float, sigma: float) -> bool:
    """Whether the window holds a loss spike: SPIKE_POINTS consecutive reports more than SPIKE_Z
    report noises above its trend line. A spike rises in a report or two and decays over several;
    one stray report (a bad batch) is not one."""
    if sigma <= 0.0:
        return False
    ym = float(y.sum()) / y.size
    high = (y - ym - (float(xc @ (y - ym)) / sxx) * xc) > SPIKE_Z * sigma
    run = high[SPIKE_POINTS - 1 :].copy()
    for lag in range(1, SPIKE_POINTS):
        run &= high[SPIKE_POINTS - 1 - lag : high.size - lag]
    return bool(run.any())


def _later_half(x: FloatArray, y: FloatArray, k: int, sigma: float) -> tuple[float, float, int] | None:
    """(slope, its standard error, points) over the later half of a shortest window that held a
    spike, when that half holds none (None otherwise, or when it is too short)."""
    h = k // 2
    if h < MIN_POINTS:
        return None
    xs, ys = x[-h:], y[-h:]
    xc = xs - float(xs.sum()) / h
    sxx = float(xc @ xc)
    if sxx <= 0.0 or _has_spike(xc, ys, sxx, sigma):
        return None
    return float(xc @ ys) / sxx, sigma / math.sqrt(sxx), h


def _straight_window(x: FloatArray, y: FloatArray) -> tuple[float, float, int] | None:
    """(slope, its standard error, its number of points) over the longest recent window that is
    still a straight line.

    Why longer windows: the standard error of the slope falls with the window's spread in
    log-step, so the last fifth of a run that went flat at 30% says far less than everything since
    30% does. A longer window is taken only while it stays straight (no significant quadratic term),
    so it never reaches back across the bend where the run stopped learning, and over a smoothly
    saturating stretch, whose older part falls faster, its mean slope only over-states what is to
    come. The noise of one report comes from first differences of the shortest window (a spike
    inflates one or two of them only) and serves every window."""
    n = y.size
    best: tuple[float, float, int] | None = None
    sigma = 0.0
    for k in sorted({min(n, max(MIN_POINTS, int(n * frac))) for frac in WINDOW_FRACTIONS}):
        xs, ys = x[-k:], y[-k:]
        if best is None:
            sigma = report_noise(ys)
        xc = xs - float(xs.sum()) / k
        sxx = float(xc @ xc)
        if sxx <= 0.0:
            break
        if _has_spike(xc, ys, sxx, sigma):
            # a loss spike and its recovery bend the window's trend (early in the window it reads
            # as a flat stretch, a run still learning as a plateau): no verdict while one is in
            # the shortest window, and no longer window that reaches back to one. What stands
            # above the shortest window's line may also be the steep end of a run that stopped
            # dead inside it (an abrupt plateau): then the window's later half, clear of it, is
            # judged alone
            if best is None:
                return _later_half(x, y, k, sigma)
            break
        if best is not None:
            # the quadratic term, orthogonalised against the line: its z-score tests straightness
            q = xc * xc
            q = q - float(q.sum()) / k
            q = q - (float(q @ xc) / sxx) * xc
            sqq = float(q @ q)
            if sqq <= 0.0 or abs(float(q @ ys)) > STRAIGHT_Z * sigma * math.sqrt(sqq):
                break
        best = (float(xc @ ys) / sxx, sigma / math.sqrt(sxx), k)
    return best
