"""Epoch boundaries: which points lie past how many boundaries, and how many are still to come.

A multi-epoch run's training loss steps down at each epoch boundary, where the model meets data
it has seen. Two conventions reach us, told apart by the data:

* a **fractional progress** (HF ``epoch``, Kubeflow's ``currentEpoch``): ``k.0`` is logged at the
  last step of epoch ``k`` (1-based), still before the boundary; ``k + 1/steps_per_epoch`` is the
  first point after it. A run of ``N`` epochs ends at ``N.0``, and that last boundary ends the
  training: no drop follows it.
* an **epoch index** (Lightning's ``epoch`` column, whole numbers only): ``k`` is logged on every
  step of the ``k``-th epoch (0-based), so the point is past ``k`` boundaries.

Counting ``floor(epoch)`` for both read the end of a finished fine-tune (``10.0`` of 10) as a
boundary crossed and the one at ``total_steps`` as a drop to come.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from advisor.forecast.robust import fast_median

FloatArray = NDArray[np.float64]

#: at least this many points with usable epochs before boundaries are counted at all
_MIN_POINTS = 6
#: a fractional epoch this close to a whole number is that whole number (float noise in k / n)
_EPS = 1e-6


@dataclass(frozen=True)
class EpochTrack:
    """The history's epochs, read in their convention."""

    steps: FloatArray  # steps with a usable epoch
    epochs: FloatArray  # the epoch reported at them
    is_index: bool  # whole numbers only: an epoch index, else fractional progress
    rate: float  # epochs per step, over the observed span (0 when it cannot be measured)
    position: float  # the continuous epoch position at the last step (fractional progress)
    tolerance: float  # in epochs: a boundary this close to the horizon is where training ends


def track(steps: FloatArray, epochs: FloatArray | None, min_points: int = 2) -> EpochTrack | None:
    """The usable epochs of a history, or None without at least ``min_points`` of them."""
    if epochs is None:
        return None
    ok = np.isfinite(epochs) & (epochs >= 0)
    if int(ok.sum()) < min_points:
        return None
    s, e = steps[ok], epochs[ok]
    is_index = bool(np.all(np.abs(e - np.round(e)) <= _EPS)) and float(e[-1]) > float(e[0])
    position = float(e[-1])
    if is_index:
        # the index says which epoch, not how far into it. Each change of index lies between two
        # reports (at their midpoint, as well as one can tell), where the position is the new
        # whole number: the rate comes from those changes (from step 0 when the index has changed
        # once), and the fraction done from the steps since the last change
        changes = np.flatnonzero(np.diff(e) > 0) + 1
        at = 0.5 * (s[changes - 1] + s[changes])
        rate = 0.0
        if changes.size >= 2:
            rate = float(e[changes[-1]] - e[changes[0]]) / max(float(at[-1] - at[0]), 1e-12)
        elif changes.size == 1 and float(at[0]) > 0:
            rate = float(e[changes[0]]) / float(at[0])
        if changes.size:
            position += min(max(float(s[-1] - at[-1]), 0.0) * rate, 1.0 - _EPS)
    else:
        span = float(s[-1] - s[0])
        rate = max(float(e[-1] - e[0]) / span, 0.0) if span > 0 else 0.0
    gap = fast_median(np.diff(s)) if s.size > 1 else 0.0
    # the horizon's position is extrapolated: allow one logging interval of error, never less than
    # a thousandth of an epoch nor more than half of one
    tolerance = max(1e-3, min(rate * gap, 0.5))
    return EpochTrack(s, e, is_index, rate, position, tolerance)


def boundaries_passed(t: EpochTrack, epochs: FloatArray) -> FloatArray:
    """How many boundaries lie behind a point reporting ``epochs`` (in the track's convention)."""
    if t.is_index:
        return np.floor(epochs + _EPS)
    return np.maximum(np.ceil(epochs - _EPS) - 1.0, 0.0)


def boundaries_ahead(t: EpochTrack, horizon: float | None) -> int:
    """Boundaries strictly between the last point and ``horizon`` at the observed rate, leaving out
    one at the horizon itself (within the track's tolerance): that one ends the training."""
    if horizon is None or t.rate <= 0:
        return 0
    at_end = t.position + max(0.0, horizon - float(t.steps[-1])) * t.rate
    # the next boundary: after the current index, or at the next whole number of progress (the
    # point logged at k.0 is the last of its epoch: boundary k is still ahead of it)
    first = math.floor(t.position + _EPS) + 1 if t.is_index else max(1, math.ceil(t.position - _EPS))
    last = math.ceil(at_end - t.tolerance) - 1
    return max(0, last - first + 1)


def boundary_column(
    steps: FloatArray, epochs: FloatArray | None, x: FloatArray, horizon: float | None
) -> tuple[FloatArray, int] | None:
    """The completed-boundary count at the fitted points ``x`` (steps + 1, counted from the first
    point's), and the boundaries still ahead before ``horizon``. None when the history has not
    crossed one with enough points on both sides (the size of the step-down cannot be measured)."""
    t = track(steps, epochs, _MIN_POINTS)
    if t is None or horizon is None:
        return None
    count = boundaries_passed(t, np.interp(x - 1.0, t.steps, t.epochs))
    count -= count[0]
    if count[-1] < 1 or (count == 0).sum() < 3 or (count == count[-1]).sum() < 3:
        return None
    return count, boundaries_ahead(t, horizon)


def last_boundary_drop(steps: FloatArray, values: FloatArray, epochs: FloatArray | None) -> float | None:
    """The step down the loss took at the last epoch boundary crossed (positive: it fell): a line
    with a jump at the boundary, fitted to as many points on each side as the shorter side has
    (the epoch before it and the one since). None without a boundary crossed with at least
    ``_MIN_POINTS`` // 2 points on each side."""
    t = track(steps, epochs, _MIN_POINTS)
    if t is None or epochs is None or steps.size != values.size:
        return None
    # the points ``track`` kept (those with a usable epoch), with their values
    s, y = t.steps, values[np.isfinite(epochs) & (epochs >= 0)]
    count = boundaries_passed(t, t.epochs)
    up = np.flatnonzero(np.diff(count) > 0)
    if up.size == 0:
        return None
    i = int(up[-1]) + 1  # the first point past the last boundary crossed
    before = np.flatnonzero(count[:i] == count[i - 1])
    m = min(before.size, s.size - i)
    if m < _MIN_POINTS // 2:
        return None
    idx = np.concatenate((before[-m:], np.arange(i, i + m)))
    xs, ys = s[idx], y[idx]
    fin = np.isfinite(ys)
    if fin.sum() < 4:
        return None
    at = 0.5 * (float(s[i - 1]) + float(s[i]))
    design = np.column_stack((np.ones(idx.size), xs - at, (xs >= at).astype(np.float64)))[fin]
    coef, *_ = np.linalg.lstsq(design, ys[fin], rcond=None)
    return float(-coef[2])
