"""When a series has turned: the rising branch of a curve past its minimum.

Every curve family is monotone and saturating, which is right for a training loss and wrong for an
eval loss past its minimum (overfitting), a metric that degrades late, or a loss that creeps up.
Fitted to such a series they read the rise as noise around a plateau or, worse, as "still
falling", and the forecast keeps promising an improvement the run will not make.

So the recent window is also read for a rise: the least-squares trend in log-step over the last
third of the points (at least ``MIN_POINTS``), with its standard error from the window's own
residuals. Its significance ``t`` says how sure the rise is, and the rise's weight in the forecast
is ``Phi(t - RISE_Z)``: 0.5 at two standard errors, 0.84 at three, negligible for a flat or
falling window, so a training loss that keeps falling is left exactly as the families forecast it.
The rising branch is that trend continued in log-step from where it stands at the last point to
``total_steps`` (a rise that decelerates in steps, as overfitting does; no further than
``MAX_REACH``, the reach at which the interval's own extrapolation is held), with the trend's own
uncertainty and the scatter of one more report about it (the larger of the window's residuals and
the whole series' point-to-point noise: four evals that happen to lie on a line leave two degrees
of freedom and an error far too small); its low end reaches down to where the trend stands now,
less one report's scatter (the rise may stop at any report, see ``core``), and its
P(plateau) counts the rise as "less than 1% improvement left", as the contract says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtr

from advisor.forecast import calibration as cal
from advisor.forecast.robust import report_noise

FloatArray = NDArray[np.float64]

#: fewest points whose trend is read (two degrees of freedom left for its error)
MIN_POINTS = 4
#: the share of the most recent points the trend is read over
WINDOW_FRACTION = 1.0 / 3.0
#: a rise this many standard errors above zero carries half the weight
RISE_Z = 2.0
#: without total_steps the rising branch is read one doubling of the steps ahead
UNKNOWN_REACH = math.log(2.0)
#: the farthest the rise is carried, in log-step past the last point: to ``MAX_REACH_U`` times the
#: current step, where the interval's extrapolation term is held too. The rise is measured over the
#: recent third of the history, and the benchmarks' forecasts reach 14 times the current step at
#: most; a decade past that nothing says the rise goes on, and carried to any horizon told it put
#: an eval loss rising to 1.08 at 3.75 told 100 times its steps, 9.0 told 1e9 and 37 told 1e30
MAX_REACH = math.log(cal.MAX_REACH_U)
#: "plateau": less than this relative improvement left (the Forecast contract's 1%)
IMPROVEMENT = 0.01


@dataclass(frozen=True, slots=True)
class Turn:
    """The rising branch: its weight, its final value (mean, sd) and its P(plateau)."""

    weight: float
    mean: float
    sd: float
    plateau: float
    slope_t: float
    #: where the trend stands at the last point, and the scatter of one report about it: the rise
    #: may stop at any report, so an end reads about there at the least
    now: float
    scatter: float


def rising_branch(steps: FloatArray, values: FloatArray, horizon: float | None, level: float) -> Turn | None:
    """The rise of the recent window continued to ``horizon``, or None when the window does not
    rise (or is too short or degenerate to tell)."""
    n = values.size
    if n < MIN_POINTS or not math.isfinite(level):
        return None
    k = max(MIN_POINTS, math.ceil(n * WINDOW_FRACTION))
    x = np.log(steps[-k:] + 1.0)
    y = values[-k:]
    xc = x - float(x.mean())
    sxx = float(xc @ xc)
    if sxx <= 0.0:
        return None
    slope = float(xc @ y) / sxx
    if slope <= 0.0:
        return None
    resid = y - float(y.mean()) - slope * xc
    floor = 1e-9 * (abs(level) + 1e-12)
    se = max(math.sqrt(float(resid @ resid) / max(k - 2, 1) / sxx), floor)
    t = slope / se
    weight = float(ndtr(t - RISE_Z))
    if weight < 1e-3:
        return None
    last = float(steps[-1])
    reach = math.log((horizon + 1.0) / (last + 1.0)) if horizon is not None else UNKNOWN_REACH
    # no further than the interval's own reach is held (``calibration.MAX_REACH_U``): a rise
    # continued in log-step has no bound, and an eval loss rising to 1.08 read 37 told 1e30 steps
    reach = min(max(reach, 0.0), MAX_REACH)
    rise = slope * reach
    # the final value is one more report: the trend's own uncertainty at the horizon, plus the
    # scatter of a single report about it, read off the whole series as well (four evals on a
    # near-straight line leave two degrees of freedom and an error too small to trust)
    scatter = max(math.sqrt(float(resid @ resid) / max(k - 2, 1)), report_noise(values))
    sd = max(math.hypot(se * reach, scatter), floor)
    # the branch starts where the trend stands at the last point, not at the smoothed level: a
    # median of the last reports lags a steady rise by half its window (an eval loss climbing
    # from 2.4 to 3.6 read 3.35 "now" and ended there when the run was over)
    anchor = float(y.mean()) + slope * (float(x[-1]) - float(x.mean()))
    threshold = IMPROVEMENT * abs(level)
    plateau = float(ndtr((threshold + rise + anchor - level) / sd))
    return Turn(
        weight=weight, mean=anchor + rise, sd=sd, plateau=plateau, slope_t=t, now=anchor, scatter=scatter
    )
