"""P(divergence) of one series: the loss running away, by non-finite reports at its end, a
significant upward trend that lifted it clearly above its best, or (the training loss) a blow-up
it stays up after.

Apart from ``core``, which reads it beside P(plateau) from the same prepared history, because it
asks a different question of it: not where the fitted curve ends, but whether the latest reports
have left the curve altogether (the fits describe a loss that falls; a run that blew up is not one
of them). The divergence rule counts the same non-finite run (``NON_FINITE_RUN``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
from scipy.special import ndtr

from advisor.forecast._prep import Prepared, reports_of
from advisor.forecast.jump import collapsed
from advisor.forecast.robust import report_noise, smoothed_level

#: a last report this many noise units below the recent peak: the loss is coming back down
_RECOVERED_Z = 4.0

#: the fewest reports the share of recovered non-finite losses is taken over
_NONFINITE_TAIL_MIN = 10
#: non-finite reports in a row that make a divergence: one or two are a mixed-precision step the
#: run skipped; the divergence rule acts on this count too (``policies.rules.divergence``)
NON_FINITE_RUN = 3


def divergence_probability(
    prep: Prepared, training_loss: bool = False, horizon: float | None = None
) -> float:
    """P(the loss is rising away): non-finite values at the end, or a significant upward trend
    that has lifted the loss clearly above its best level; for the training loss also a run that
    blew up and stays up (``jump.collapsed``).

    A non-finite loss the run has reported past is weak evidence: mixed-precision training logs
    an inf or NaN loss on each step whose gradients overflowed, skips that step and carries on.
    So only the non-finite values after the last finite one weigh fully; the recovered ones count
    by their share of the tail (of at least ``_NONFINITE_TAIL_MIN`` reports)."""
    trailing = prep.n_nonfinite_trailing
    recovered = prep.n_nonfinite_tail - min(trailing, prep.n_nonfinite_tail)
    # below a run of NON_FINITE_RUN the state reads "diverging" no sooner than the rule would act
    # (one NaN report flipped STATE to diverging and back, with an Event each way, where the rule
    # said "diverging?")
    p_nonfinite = 0.0 if trailing == 0 else (0.99 if trailing >= NON_FINITE_RUN else 0.2 * trailing)
    if recovered:
        share = recovered / max(prep.tail_size, _NONFINITE_TAIL_MIN)
        p_nonfinite = max(p_nonfinite, min(0.9, 2.0 * share))
    y = prep.values
    n = y.size
    if n < 6:
        return p_nonfinite
    k = max(5, n // 4)
    xs, ys = prep.steps[-k:], y[-k:]
    xc = xs - float(xs.sum()) / k
    sxx = float(xc @ xc)
    if sxx <= 0:
        return p_nonfinite
    ym = float(ys.sum()) / k
    slope = float(xc @ (ys - ym)) / sxx
    resid = ys - ym - slope * xc
    se = math.sqrt(max(float(resid @ resid) / max(k - 2, 1), 1e-300) / sxx)
    t = slope / se if se > 0 else 0.0
    # the window's trend continued to the run's end (unknown: as many steps again as it has run)
    end = horizon if horizon is not None and horizon >= float(xs[-1]) else 2.0 * float(xs[-1])
    reach = end - float(xs.sum()) / k
    p_collapsed = collapsed(y, k, (ym + slope * reach, se * reach)) if training_loss else 0.0
    best = float(np.min(y[:-2] + y[1:-1] + y[2:])) / 3.0  # lowest 3-point moving average
    now = smoothed_level(y)
    rise = (now - best) / max(abs(best), 1e-12)
    p_trend = float(ndtr(t - 2.0)) * min(max(rise / 0.2, 0.0), 1.0)
    if p_trend > 0.0:
        # a loss spike lifts the window's trend as much as a blow-up does, but it comes back down:
        # a last report well below the window's peak (in units of one report's noise) says the
        # loss is recovering, not running away
        sigma = report_noise(ys)
        if sigma > 0.0:
            p_trend *= float(ndtr(_RECOVERED_Z - (float(ys.max()) - float(ys[-1])) / sigma))
    return min(max(p_nonfinite, p_trend, p_collapsed, 0.0), 1.0)


#: a report this many noise units above the run's best level has left it: the blow-up has begun
_LEFT_BEST_Z = 3.0
#: the fewest reports before a blow-up the fits are read again from (fewer: the lowest one reached)
_BEFORE_BLOWUP_MIN = 10


def before_blowup(prep: Prepared) -> int | None:
    """How many of the finite reports came before the blow-up of a loss that ended non-finite
    (``NON_FINITE_RUN`` or more reports after its last finite one); None for any other history.

    Why: the final value of a diverging run is where it would end if it recovered (the caution
    says so), but its fits read the finite climb into the NaN too (1.6 to 15 in 15 reports), and
    their spread put the 80% interval's lower end at 0, a loss no run of it reaches. What it
    would reach had it recovered is what its history before the climb says: the blow-up started
    after the last report within ``_LEFT_BEST_Z`` noise units of its best level (the lowest
    3-report mean), every report after that one standing above it. A climb the noise hides
    stays in, a few reports that barely move the fits."""
    if prep.n_nonfinite_trailing < NON_FINITE_RUN or prep.values.size < 6:
        return None
    y = prep.values
    best = float(np.min(y[:-2] + y[1:-1] + y[2:])) / 3.0
    bound = best + _LEFT_BEST_Z * report_noise(y)
    above = y > bound
    i = y.size
    while i > 0 and above[i - 1]:
        i -= 1
    return i


def recovered_end(
    prep: Prepared, fitted_end: Callable[[Prepared], tuple[float, float] | None]
) -> tuple[float | None, float] | None:
    """(mean, lower end of the 80% interval) of where a run that ended non-finite would end had it
    recovered and gone on as it was going, read by the fits on its reports before the blow-up
    (``before_blowup``; ``fitted_end`` fits a prefix of ``prep``); with fewer than
    ``_BEFORE_BLOWUP_MIN`` reports to fit, (None, the lowest value it reached). None: no bound
    beyond the fits' own. Its forecast ends at neither below these: the blow-up only adds ways to
    end higher, and the fits across the climb read it as anything (a run that blew up at step 900
    read "final 0.2703 (80%: 0.2703 .. 8.556)", its mean below the floor its history set)."""
    cut = before_blowup(prep)
    if cut is None or cut == prep.values.size or cut == 0:
        return None  # no finite climb in the fits (or nothing before it): their own interval stands
    lowest = float(np.min(prep.values[:cut]))
    if cut < _BEFORE_BLOWUP_MIN:
        return None, lowest
    fitted = fitted_end(_prefix(prep, cut))
    if fitted is None or not all(math.isfinite(v) for v in fitted):
        return None, lowest
    return fitted


def _prefix(prep: Prepared, end: int) -> Prepared:
    """``prep``'s first ``end`` reports, as if the run had stopped there."""
    return dataclasses.replace(
        reports_of(prep, slice(None, end)), warnings=[], n_nonfinite_tail=0, n_nonfinite_trailing=0
    )
