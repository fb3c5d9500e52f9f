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
recent trend, and the schedule-aware ensemble is the one that knows about it. And it only sharpens
the ensemble, never overrules it (``core`` consults it once the fits' own P(plateau) is >= 0.5):
a run that starts slowly is concave in log-step, its recent trend understates what is to come,
and in the trace simulator an unconditional local test released such runs while they still had
4% to gain.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtr

from advisor.forecast._prep import fast_median

FloatArray = NDArray[np.float64]

#: the recent window: this fraction of the history, and at least MIN_POINTS points
WINDOW_FRACTION = 1.0 / 3.0
MIN_POINTS = 8
#: "plateau": less than this relative improvement left (the Forecast contract's 1%)
IMPROVEMENT = 0.01


def local_plateau_probability(
    steps: FloatArray, values: FloatArray, horizon: float | None, level: float
) -> float | None:
    """P(the recent log-step trend, continued to ``horizon``, improves by < 1% of ``level``).

    None when it does not apply: unknown horizon (a log-step trend has no finite end), too few
    points, the horizon already reached, or a degenerate window."""
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
    threshold = IMPROVEMENT * abs(level)
    return float(ndtr((threshold - drop) / (se * reach)))
