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

The window is the last WINDOW_FRACTION of the points: short enough to sit inside the flat stretch
soon after a run stops learning, long enough (MIN_POINTS) for its own noise estimate.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtr

from advisor.forecast._prep import fast_median

FloatArray = NDArray[np.float64]

#: the recent window: this fraction of the history, and at least MIN_POINTS points
WINDOW_FRACTION = 0.2
MIN_POINTS = 8
#: a window whose trend rises by more than this many standard errors is not judged at all
RISING_Z = 2.0
#: "plateau": less than this relative improvement left (the Forecast contract's 1%)
IMPROVEMENT = 0.01


def local_plateau_probability(
    steps: FloatArray, values: FloatArray, horizon: float | None, level: float
) -> float | None:
    """P(the recent log-step trend, continued to ``horizon``, improves by < 1% of ``level``).

    None when it does not apply: unknown horizon (a log-step trend has no finite end), too few
    points, the horizon already reached, or a degenerate window."""
    trend = local_trend(steps, values, horizon, level)
    return None if trend is None else trend[0]


def local_trend(
    steps: FloatArray, values: FloatArray, horizon: float | None, level: float
) -> tuple[float, float] | None:
    """(``local_plateau_probability``, the drop the recent log-step trend gives by ``horizon``)."""
    n = values.size
    if horizon is None or n < MIN_POINTS or not math.isfinite(level):
        return None
    last = float(steps[-1])
    reach = math.log((horizon + 1.0) / (last + 1.0))
    if reach <= 0.0:
        return None
    k = max(MIN_POINTS, int(n * WINDOW_FRACTION))
    xs = np.log(steps[-k:] + 1.0)
    ys = values[-k:]
    xc = xs - float(xs.sum()) / xs.size
    sxx = float(xc @ xc)
    if sxx <= 0.0:
        return None
    slope = float(xc @ ys) / sxx
    # the noise of one report, from first differences (a spike inflates one or two of them only)
    sigma = 1.4826 * fast_median(np.abs(np.diff(ys))) / math.sqrt(2.0)
    se = max(sigma, 1e-12 * (abs(level) + 1e-12)) / math.sqrt(sxx)
    drop = -slope * reach
    if drop < -RISING_Z * se * reach:
        # the window is rising: a spike on its way back down, or a divergence (the divergence
        # rule's business); neither is a plateau, and the continuation says nothing about either
        return None
    threshold = IMPROVEMENT * abs(level)
    return float(ndtr((threshold - drop) / (se * reach))), drop
