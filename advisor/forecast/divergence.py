"""P(divergence) of one series: the loss running away, by non-finite reports at its end, a
significant upward trend that lifted it clearly above its best, or (the training loss) a blow-up
it stays up after.

Apart from ``core``, which reads it beside P(plateau) from the same prepared history, because it
asks a different question of it: not where the fitted curve ends, but whether the latest reports
have left the curve altogether (the fits describe a loss that falls; a run that blew up is not one
of them). The divergence rule counts the same non-finite run (``NON_FINITE_RUN``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr

from advisor.forecast._prep import Prepared, report_noise, smoothed_level
from advisor.forecast.jump import collapsed

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
