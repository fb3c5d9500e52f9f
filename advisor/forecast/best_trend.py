"""A best checkpoint's value beneath the noise of its eval series.

A run keeps the checkpoint whose evaluation was the best of its series; that evaluation is the
luckiest of them, so the value it measured flatters the weights it names. ``trend_at`` reads what
the series' trend says at that step from the evaluations around it, which were not chosen: what
``compare`` ranks a best checkpoint by, and the learning state keeps (``bestTrend``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from advisor.series import evaluation_noise

__all__ = ["TREND_SIDE", "trend_at"]

#: the evaluations each side of a best one that its trend is read from, where it has them
TREND_SIDE = 3
#: a neighbour this many evaluation scatters off the fit (an eval spike) is left out of it
_TREND_OUTLIER = 4.0


def trend_at(steps: Sequence[float], values: Sequence[float], step: float) -> tuple[float, float] | None:
    """What the trend of a series says at ``step``, one of its evaluations (a best checkpoint's),
    and that estimate's sd: a least-squares fit to the evaluations nearest it, the evaluation at
    ``step`` left out, read at ``step``; its sd is one evaluation's scatter (``evaluation_noise``)
    times the fit's leverage there. A parabola through up to ``TREND_SIDE`` evaluations each side
    when it has two or more on each; else (the first or last evaluations, a run still improving)
    a line through the four nearest, as a parabola carried past its points swings wide. None on
    fewer than four finite evaluations (no scatter to read) or when ``step`` is none of them.

    Why not the evaluation at ``step`` itself: a best checkpoint is chosen because its evaluation
    was the best of the series, so that value is the luckiest of them and reads better than the
    checkpoint will on fresh data (the winner's curse: by 1.4 to 1.8 scatters on a 30-evaluation
    series, the more the noisier). Its neighbours were not chosen, and their fit says what the
    weights at ``step`` score beneath the noise (still about 0.2 scatter high, as each neighbour
    lost to the best). A parabola, not a line, at a best between other evaluations: a line
    across a peak or a valley misses it by its curvature (an accuracy peaking at 0.8 read
    0.7975, noise-free)."""
    points = [(float(s), float(v)) for s, v in zip(steps, values, strict=False) if math.isfinite(v)]
    at = next((i for i, (s, _) in enumerate(points) if s == float(step)), None)
    if len(points) < 4 or at is None:
        return None
    noise = evaluation_noise([v for _, v in points])
    before, after = at, len(points) - 1 - at
    if min(before, after) >= 2:
        chosen = [*range(max(0, at - TREND_SIDE), at), *range(at + 1, min(len(points), at + 1 + TREND_SIDE))]
        degree = 2
    else:
        # the four nearest, one each side in turn while both sides have one
        left, right = list(range(at - 1, -1, -1)), list(range(at + 1, len(points)))
        chosen = []
        while len(chosen) < 4 and (left or right):
            side = right if right and (not left or len(chosen) % 2 == 0) else left
            chosen.append(side.pop(0))
        degree = 1
    near = [(points[i][0] - points[at][0], points[i][1]) for i in chosen]
    fit = _fit_at_zero(near, degree)
    if fit is None:
        return None
    # an eval spike beside the best (more than _TREND_OUTLIER scatters off the fit) is left out,
    # the worst first, while a point more than the fit needs is left
    for _ in range(2):
        curve = fit[2]
        worst = max(near, key=lambda p: abs(p[1] - curve(p[0])))
        if noise <= 0 or abs(worst[1] - curve(worst[0])) <= _TREND_OUTLIER * noise or len(near) <= degree + 2:
            break
        near = [p for p in near if p is not worst]
        fit = _fit_at_zero(near, degree) or fit
    value, leverage, _curve = fit
    return value, noise * math.sqrt(leverage)


def _fit_at_zero(
    points: Sequence[tuple[float, float]], degree: int
) -> tuple[float, float, Callable[[float], float]] | None:
    """(value at x = 0, leverage there, the fitted curve) of the least-squares polynomial of
    ``degree`` through ``points`` (x scaled to their span); None when they cannot hold it (a log
    that repeats a step)."""
    x = np.array([p[0] for p in points])
    y = np.array([p[1] for p in points])
    span = float(np.abs(x).max()) or 1.0
    design = np.vander(x / span, degree + 1, increasing=True)
    gram = design.T @ design
    if len(points) <= degree or np.linalg.matrix_rank(gram) <= degree:
        return None
    inverse = np.linalg.inv(gram)
    coef = inverse @ design.T @ y

    def curve(at: float) -> float:
        return float(np.polyval(coef[::-1], at / span))

    return float(coef[0]), float(inverse[0, 0]), curve
