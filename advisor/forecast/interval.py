"""The forecast's interval and the share of its predicted drop it keeps: what the calibrated knots
(``calibration``) multiply, and how far a forecast reaches past the held-out tail they were
measured on. ``ensemble`` builds the forecast; this sizes its uncertainty;
``bench/calibrate_forecast.py`` measures the knots against ``interval_scale``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from advisor.forecast import calibration as cal

if TYPE_CHECKING:
    from advisor.forecast.ensemble import Parts

__all__ = ["drop_shrink", "interval_scale", "interval_sd", "reach_of"]


def drop_shrink(drop: float, spread: float) -> float:
    """The share of the ensemble's predicted drop (or rise) to keep: ``drop**2 / (drop**2 +
    spread**2)``, its signal-to-noise weight.

    The families agree on a drop they can read off the history and disagree on one they cannot;
    their spread is the uncertainty of the drop itself. Reading the average drop as the forecast
    treats a drop of 5% +- 5% like one of 5% +- 0.5%, and a sparse eval series (a handful of
    evaluations) is mostly of the first kind: on the development fine-tunes the ensemble
    over-predicted what was left (the eval finals lay above the forecast at the median). Weighting
    the drop by how well determined it is, the usual Wiener / empirical-Bayes weight with the drop's
    own size as the prior scale, leaves a well-determined drop as it is and halves one whose
    spread is as large as itself. It has no constant of its own (the spread is the interval's
    ``K_SPREAD`` = 1 term) and the interval is the ensemble's, unchanged.

    Applied where nothing else checks the drop: histories shorter than ``SMALL_N`` (no held-out
    tail to weight the families by) on the schedule path, once the run is past its fast first
    phase (``calibration.SHRINK_BELOW_REMAINING``). Longer histories have their families
    weighted by how well each predicted the held-out tail. Without learning rates the anneal prior
    reads the families at a stretched horizon chosen so that the pre-training curves' drop comes
    out unbiased, and shrinking it undid that (pre-training error at a fifth of the run 2.4% ->
    5.6%). On the tuning half's fine-tunes the median error of the eval final value went 0.076 ->
    0.059 and of the training loss 0.201 -> 0.203; applied to every schedule-path history it also
    helped the tuning half's training loss (0.144) but not the held-out half's (0.212), and cost
    the pre-training benchmark's HF training curves at a tenth of the run (36.8% -> 51.3%). Early
    in a fine-tune the loss is still in its fast fall, which the families under-predict already:
    there the shrink only made it worse (every one of the tuning half's short histories it changed
    at a tenth of the run, four of four), so it waits for the run's first 15%."""
    d2 = drop * drop
    s2 = spread * spread
    if d2 + s2 <= 0.0 or not math.isfinite(d2 + s2):
        return 1.0
    return d2 / (d2 + s2)


def reach_of(u: float) -> float:
    """How far a forecast ``u`` times the current step ahead reaches, in units of the held-out
    tail's reach: the lever on the holdout term of ``interval_scale``, linear in the steps ahead
    out to ``calibration.MAX_REACH_U`` and held there beyond.

    The linear growth is what the calibrated knots measured, out to a tenth of the run. Carried to
    any horizon it has no bound: told 1e30 steps, a loss near 2 got an 80% interval up to 3.5e24,
    and a noiseless curve told 1e9 one from 0 to 86, while the families themselves, saturating,
    disagree there by a few tenths (their spread, which the scale keeps). Beyond a horizon nothing
    measured, more steps ahead are no more evidence of error than the families' spread says."""
    return (min(u, cal.MAX_REACH_U) - 1.0) / (cal.HOLDOUT / (1.0 - cal.HOLDOUT))


def interval_scale(spread: float, drop: float, holdout_err: float, reach: float, level: float) -> float:
    """The scale the calibrated ``Q`` knots multiply into the 80% half-width (see ``calibration``):
    the families' disagreement, the predicted drop, this curve's own extrapolation skill over the
    reach (``holdout_err`` NaN: no tail was held out, no such term) and the relative floor.
    ``bench/calibrate_forecast.py`` measures the knots against this very scale."""
    ho = holdout_err if math.isfinite(holdout_err) else 0.0
    # the root of the sum of squares without squaring: a loss near 1e300 overflowed the square
    # (an OverflowError the float power raises, where the forecast wants an infinite scale at worst)
    return math.hypot(
        cal.K_SPREAD * spread,
        cal.K_DROP * drop,
        cal.K_HOLDOUT * ho * reach,
        cal.REL_FLOOR * abs(level),
    )


def interval_sd(parts: Parts, n: int) -> float:
    """The sd whose +-Z80 band is the calibrated 80% interval (see ``calibration``)."""
    rem = parts.remaining
    level = abs(parts.level)
    if n < cal.SMALL_N:
        # no tail to hold out, so no measure of this curve's own extrapolation skill; but the
        # families' disagreement and the drop they predict are there, and with a handful of points
        # (a sparse eval series) they are large: the coarse relative rule alone ignored them
        # (see ``calibration.Q_SMALL``)
        half = float(np.interp(rem, cal.REM_KNOTS, cal.SMALL_REL_KNOTS)) * level
        scale = interval_scale(parts.spread, parts.drop, math.nan, parts.reach, level)
        half = max(half, (cal.Q_SMALL if parts.lr_shape is None else cal.Q_SMALL_SCHEDULE) * scale)
    else:
        scale = interval_scale(parts.spread, parts.drop, parts.holdout_err, parts.reach, level)
        knots = cal.Q_KNOTS if parts.lr_shape is None else cal.Q_KNOTS_SCHEDULE
        half = float(np.interp(rem, cal.REM_KNOTS, knots)) * scale
    return max(half, 1e-12 * (1.0 + level)) / cal.Z80
