"""The forecast's final-value distribution read as the contract's numbers.

The ensemble gives the end of a series as a normal (or a mixture of two, where a rising branch or
a fitted end is mixed in); the contract asks for an 80% interval and P(plateau), the chance that
less than 1% of the current level is still to come. These read one from the other, and hold a
series that was never negative at or above 0, for every path of ``advisor.forecast.core`` alike.
"""

from __future__ import annotations

from scipy.special import ndtr

from advisor.forecast import calibration as cal
from advisor.model import Interval

__all__ = ["floored", "mixture_p90", "plateau_at"]


def plateau_at(mean: float, sd: float, level: float, training_loss: bool, never_negative: bool) -> float:
    """P(the end lies within 1% below ``level``, or above it) for an end ~ N(``mean``, ``sd``).

    ``never_negative``: the series has never been below 0 (a loss, an error rate), whose end is
    not either. At a level of 0 the 1% band is empty and the end can only lie at or above the
    level: no improvement is left, a plateau for certain. Read off the normal, half its mass lay
    below 0, and a constant zero loss (a 0/1 series at 0) read P(plateau) 0.5, the uninformed
    answer, as if a series that has not moved said nothing."""
    thresh = level - 0.01 * abs(level)
    if never_negative and thresh <= 0.0:
        return 1.0
    plateau = float(ndtr((mean - thresh) / sd)) if sd > 0 else float(mean >= thresh)
    if training_loss and sd > 0:
        # the training loss does not end above its level by more than the threshold short of a
        # divergence (reported apart): the final value's upper tail beyond that is no evidence of a
        # plateau, only of a wide interval, and counted as such it put P(plateau) near 0.4 on
        # histories whose interval was wide but whose drop still to come was large
        ceiling = float(ndtr((level + 0.01 * abs(level) - mean) / sd))
        if ceiling > 1e-12:
            plateau = min(max((ceiling - (1.0 - plateau)) / ceiling, 0.0), 1.0)
    return plateau


def floored(final: Interval, never_negative: bool) -> Interval:
    """The final interval of a series never below 0 (a loss, an error rate), held at or above 0.

    The families' own end is read so where it is made, but more is mixed into the interval after
    that: a rising branch's low end reaches down to its trend less its spread, which for a 0/1
    series rising from 0 lies below 0 (an error rate read 0.24, 80%: -0.06 .. 0.61), and the end
    of a finished run is its trend's level give or take one report's scatter. Neither knows the
    series cannot go there; this is the one place the final numbers are held to it, whatever
    path made them."""
    if not never_negative:
        return final
    return Interval(mean=max(final.mean, 0.0), p10=max(final.p10, 0.0), p90=max(final.p90, 0.0))


def mixture_p90(m1: float, s1: float, m2: float, s2: float, w2: float) -> float:
    """The 90% quantile of (1 - w2) N(m1, s1) + w2 N(m2, s2), by bisection."""
    s1, s2 = max(s1, 1e-300), max(s2, 1e-300)
    lo = min(m1 + cal.Z80 * s1, m2 + cal.Z80 * s2)
    hi = max(m1 + cal.Z80 * s1, m2 + cal.Z80 * s2)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if (1.0 - w2) * float(ndtr((mid - m1) / s1)) + w2 * float(ndtr((mid - m2) / s2)) < 0.9:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
