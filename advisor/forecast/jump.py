"""A training loss that jumped up and stayed there: how sure the forecaster is of it, and the
report it is fitted from.

The optimiser's own loss does not go back to where it started short of a failure (a learning
rate too high, a bad batch that broke the weights, a precision overflow). Read off the whole
history, such a run confuses the curve families twice: the trend test forgets the blow-up once the
loss stops rising (``collapsed`` keeps it as divergence evidence), and the fits across the jump
put its end anywhere: a loss standing at 7.6 for 900 steps read "final 7.59 (80%: 0 .. 278)",
"with a constant LR the end would be near 36.85" and P(plateau) 0.00. Its curve is the one since
the jump (``jump_start``): the forecast is fitted to that (``after_jump``), as to a run resumed
from a checkpoint, while P(diverge) still reads the whole history.

Both read the same block statistics (``_reading``): where the run started and its best, by
medians of ``FINE_BLOCKS`` blocks of its history, and where it stands, by the median of its last
``k`` reports. Medians of blocks, not single reports: a warmup to a high learning rate lifts a
loss by a third for a while (0.64 to 0.92 on a development fine-tune, which recovered), and a loss
near zero scatters by orders of magnitude; neither reaches these bounds.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtr

from advisor.forecast._prep import Prepared, reports_of
from advisor.forecast.robust import MEDIAN_SE, fast_median, report_noise, row_medians

__all__ = ["FINE_BLOCKS", "JUMP_WARNING", "after_jump", "collapsed", "jump_start"]

FloatArray = NDArray[np.float64]

#: a collapsed level stands this many of its standard errors (``MEDIAN_SE``) above the best; and
#: a run whose trend brings it back under this many times its best by its end is recovering (the
#: lower end of the ramp that weighs how far above its best it stands)
_CLEAR_Z = 3.0
_BACK_UNDER = 1.5
#: where a run started and its best are read off medians of this many blocks of its history
FINE_BLOCKS = 16
#: a loss standing at least this many times its best, having given back at least half of what it
#: learned, is fitted from its jump on (the upper end of ``collapsed``'s ramp: a doubling)
_JUMP_RATIO = 2.0
#: the reports since the jump a fit needs: at least this many, and this share of the history
_JUMP_MIN_POINTS = 10
_JUMP_MIN_SHARE = 0.05
#: a stretch since the jump whose later half stands this many times above its earlier half by
#: their medians is a blow-up still under way, not a loss that stayed up
_STILL_RISING = 1.5
#: the rolling median that places the jump spans this many reports
_JUMP_WINDOW = 5
#: the warning of a forecast fitted from a jump on (the CLI's caution reads it)
JUMP_WARNING = "the loss jumped"


@dataclass(frozen=True)
class _Reading:
    """Where a loss started, its best, where it stands (medians of blocks), how much of what it
    learned it gave back; ``fine``: the block size."""

    first: float
    best: float
    last: float
    lost: float
    fine: int

    def clearance(self, y: FloatArray, k: int) -> tuple[float, float]:
        """(how many standard errors the standing level is above the best, the standing level's
        standard error), from the reports' noise: read only once the ratios call for it (the
        noise is the costly part, and most forecasts never get here)."""
        sigma = report_noise(y)
        level_se = MEDIAN_SE * sigma / math.sqrt(k)
        spread = math.hypot(level_se, MEDIAN_SE * sigma / math.sqrt(self.fine))
        return (self.last - self.best) / max(spread, 1e-300), level_se


def _block_medians(y: FloatArray, stop: int, size: int) -> FloatArray:
    """The medians of ``y[i : i + size]`` for ``i`` in ``range(0, stop, size)``: the blocks that
    lie wholly inside ``y`` by one partition, a last partial one on its own (np.median per block
    was a fifth of a forecast's time)."""
    starts = range(0, max(stop, 0), size)
    full = min(len(starts), y.size // size)
    meds = row_medians(y[: full * size].reshape(full, size)) if full else np.empty(0)
    rest = [fast_median(y[i : i + size]) for i in starts[full:]]
    return np.concatenate((meds, rest)) if rest else meds


def _rolling_medians(y: FloatArray, half: int) -> FloatArray:
    """The median of ``y[max(0, j - half) : j + half + 1]`` at every ``j``: the full windows by one
    partition over a sliding view, the shorter ones at either end on their own."""
    n, width = y.size, 2 * half + 1
    if n < width:
        return np.array([fast_median(y[max(0, j - half) : j + half + 1]) for j in range(n)])
    head = [fast_median(y[: j + half + 1]) for j in range(half)]
    tail = [fast_median(y[j - half :]) for j in range(n - half, n)]
    body = row_medians(np.lib.stride_tricks.sliding_window_view(y, width))
    return np.concatenate((head, body, tail))


def _reading(y: FloatArray, k: int) -> _Reading | None:
    """The block statistics of ``y`` with its last ``k`` reports as where it stands; None when
    there are too few reports, nothing was learned, or the loss is not positive (a ratio of it
    means nothing)."""
    n = y.size
    if n < 2 * k:
        return None
    # where it started and its best, by medians of finer blocks than the recent quarter (a run
    # that blew up within its first quarter had its best inside that quarter's median)
    fine = max(5, n // FINE_BLOCKS)
    meds = _block_medians(y, n - k, fine)
    if meds.size == 0:
        return None
    first, last = float(meds[0]), fast_median(y[-k:])
    best = min(float(meds.min()), last)
    if not (first > best > 0.0):
        return None
    return _Reading(first, best, last, (last - best) / (first - best), fine)


def collapsed(y: FloatArray, k: int, projected: tuple[float, float]) -> float:
    """P(the run blew up and stays up): its last ``k`` reports stand, by their median, where it
    started or higher (all it learned given back) and at least twice its best, clearly beyond
    their noise, and they do not come back down in time: the window's trend continued in steps to
    the run's end (``projected``: mean and its standard error), an optimistic reading of a recovery
    that slows, still ends above one and a half times the best (a loss that jumped five times and
    crept back down, at 2.4 times its best by the end, read "learning" once it stopped rising; a
    spike that decays within its window projects far below and is no collapse).

    The trend test alone forgets a blow-up once the loss stops rising: a fine-tune at 1.4 that
    jumped to 7.5 and stayed there 900 steps read P(diverge) 0.10 and "learning". An eval loss
    returns to where it started past its minimum: overfitting, not this, so the training loss
    only. On the development curves it changes P(diverge) at none of 19 cuts
    (docs/measurements.md)."""
    r = _reading(y, k)
    if r is None:
        return 0.0
    w = min(max((r.lost - 0.5) / 0.5, 0.0), 1.0) * min(max((r.last / r.best - 1.5) / 0.5, 0.0), 1.0)
    if w <= 0.0:
        return 0.0
    z, level_se = r.clearance(y, k)
    end, end_se = projected
    stays = float(ndtr((end - _BACK_UNDER * r.best) / max(math.hypot(end_se, level_se), 1e-300)))
    return w * stays * float(ndtr(z - _CLEAR_Z))


def jump_start(y: FloatArray) -> tuple[int, float] | None:
    """The first report of a training loss's stretch since it jumped up and stayed: its last
    quarter stands at least ``_JUMP_RATIO`` times its best, has given back at least half of what
    it learned, clearly beyond the noise, and a rolling median of ``_JUMP_WINDOW`` reports has
    stood above the geometric midpoint of the best and that level ever since this report, and the
    stretch since is not still climbing (``_STILL_RISING``). None
    when the loss did not jump so, or too few reports (``_JUMP_MIN_POINTS``, ``_JUMP_MIN_SHARE``)
    follow the jump to fit. With it, how many times its best the loss stands."""
    n = y.size
    k = max(5, n // 4)
    r = _reading(y, k)
    if r is None or r.lost < 0.5 or r.last < _JUMP_RATIO * r.best or r.clearance(y, k)[0] < _CLEAR_Z:
        return None
    half = _JUMP_WINDOW // 2
    rolling = _rolling_medians(y, half)
    below = np.flatnonzero(rolling < math.sqrt(r.best * r.last))
    if below.size == 0:
        return None
    start = int(below[-1]) + 1
    if n - start < max(_JUMP_MIN_POINTS, math.ceil(_JUMP_MIN_SHARE * n)):
        return None
    since = y[start:]
    if float(np.median(since[since.size // 2 :])) > _STILL_RISING * float(
        np.median(since[: since.size // 2])
    ):
        return None  # a blow-up still under way: no level to fit yet (P(diverge) says it)
    return start, r.last / r.best


def after_jump(prep: Prepared, start: int) -> tuple[Prepared, float]:
    """``prep`` from report ``start`` on (``jump_start``), on steps counted from the last report
    before the jump, and that step (add it back to read the fit's steps as the run's). The curve
    families start at step 0: a loss that jumped starts over, a transient of its own (its stretch
    since the jump, fitted on the run's steps, read a transient's 4% decline as a power law's and
    carried it on to a quarter below where the loss stood at a constant learning rate)."""
    offset = float(prep.steps[start - 1]) if start > 0 else 0.0
    since = reports_of(prep, slice(start, None))
    return dataclasses.replace(since, steps=since.steps - offset), offset
