"""What a finished run's record says, where its forecasts have nothing left to say: at its last
step every P(plateau) is 1, so whether its training loss still fell after its eval's best, whether
that eval ended worse than its best, and whether a metric still improved are read off the reports
themselves, median against median and beyond their noise (``learning_state`` reads them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from advisor.forecast.robust import MEDIAN_SE, report_noise
from advisor.series import Direction

__all__ = ["MIN_EVALS", "RECENT_FALL", "SeriesLike", "fell_since", "improved_since", "rose_above_best"]

#: a finished run's training loss "still fell" after its eval's best by about this share (the
#: Forecast contract's 1%), its medians over at least this many points compared, and over a
#: quarter of the reports since the best when there are more (up to ``RECENT_POINTS_MAX``): five
#: reports of a fine-tune's training loss, noisy by 8%, could not tell a 9% fall over a thousand
#: steps from none, and the run read "plateaued" where its eval loss had climbed half again
RECENT_POINTS = 5
RECENT_POINTS_MAX = 25
RECENT_FALL = 0.01
#: evaluations an eval series needs before it is judged (two points have no trend to read)
MIN_EVALS = 3


class SeriesLike(Protocol):
    """What the state reads of a series: its points and which way is better."""

    @property
    def steps(self) -> Sequence[int] | Sequence[float]: ...

    @property
    def values(self) -> Sequence[float]: ...

    @property
    def direction(self) -> Direction: ...


def fell_since(history: tuple[Sequence[float], Sequence[float]], step: float) -> float:
    """How sure it is that the training loss fell by more than ``RECENT_FALL`` since ``step``: its
    median over the first points after ``step`` (the last up to it, when too few came after)
    against its median over the last points now (as many as ``RECENT_POINTS`` says), a ramp from
    half to one and a half times the threshold (noise on either side of it)."""
    steps = np.asarray(history[0], dtype=float)
    vals = np.asarray(history[1], dtype=float)
    ok = np.isfinite(steps) & np.isfinite(vals)
    steps, vals = steps[ok], vals[ok]
    later = vals[steps > step]
    k = min(max(RECENT_POINTS, later.size // 4), RECENT_POINTS_MAX)
    # with enough reports since ``step`` the level then is read from the first ones after it, not
    # from those before it, which would count a loss still falling into the best as a fall after
    # it (the two windows never overlap)
    before = later[:k] if later.size >= 2 * k else vals[steps <= step][-k:]
    after = later[-k:]
    if before.size == 0 or after.size == 0:
        return 0.0
    then = float(np.median(before))
    if then == 0.0:
        return 0.0
    fell = (then - float(np.median(after))) / abs(then)
    return _clear_change(fell, report_noise(vals) / abs(then), before.size, after.size)


def improved_since(series: SeriesLike, step: float) -> float:
    """How sure it is that ``series`` got better by more than ``RECENT_FALL`` after ``step``: its
    median over its last evaluations up to ``step`` against its median over its last evaluations,
    on the same ramp as ``fell_since`` (its direction read: a score rises)."""
    pts = [
        (float(x), float(v)) for x, v in zip(series.steps, series.values, strict=False) if math.isfinite(v)
    ]
    before = [v for x, v in pts if x <= step][-MIN_EVALS:]
    after = [v for x, v in pts if x > step][-MIN_EVALS:]
    if not before or not after:
        return 0.0
    then, end = float(np.median(before)), float(np.median(after))
    if then == 0.0:
        return 0.0
    better = (end - then if series.direction is Direction.HIGHER else then - end) / abs(then)
    return float(np.clip((better - 0.5 * RECENT_FALL) / RECENT_FALL, 0.0, 1.0))


def rose_above_best(series: SeriesLike, best: float | None) -> float:
    """How sure it is that the series ended worse than its best by more than ``RECENT_FALL``: its
    median over its last evaluations against the best median of as many consecutive ones, on the
    same ramp as ``fell_since``, beyond the evaluations' noise.

    Against the single best evaluation, the lowest of many noisy ones, a converged run's last
    evaluations always stood above it: an eval loss still falling at 1% noise ended 2% "above its
    best" and its finished run read overfitting 1.00 (and was left out of a ranking)."""
    vals = np.asarray([v for v in series.values if math.isfinite(v)], dtype=float)
    if best is None or best == 0.0 or vals.size == 0:
        return 0.0
    k = min(MIN_EVALS, vals.size)
    medians = np.median(np.lib.stride_tricks.sliding_window_view(vals, k), axis=1)
    higher = series.direction is Direction.HIGHER
    ref = float(medians.max() if higher else medians.min())
    if ref == 0.0:
        return 0.0
    end = float(medians[-1])
    worse = (ref - end if higher else end - ref) / abs(ref)
    return _clear_change(worse, report_noise(vals) / abs(ref), k, k)


def _clear_change(change: float, noise: float, n_before: int, n_after: int) -> float:
    """How sure it is that a relative ``change`` between two medians (of ``n_before`` and
    ``n_after`` reports, one report's relative noise ``noise``) is a change of more than
    ``RECENT_FALL``: a ramp from half to one and a half times the threshold, moved up by two
    standard errors of the medians' difference, so that noise alone reads as no change."""
    se = MEDIAN_SE * noise * math.sqrt(1.0 / n_before + 1.0 / n_after)
    return float(np.clip((change - 2.0 * se - 0.5 * RECENT_FALL) / RECENT_FALL, 0.0, 1.0))
