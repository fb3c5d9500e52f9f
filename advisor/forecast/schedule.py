"""Learning-rate schedules: infer the rest of the schedule, and the schedule-aware loss law.

Fixed-budget runs (cosine, linear, warmup-stable-decay) keep improving while the LR anneals, which
no saturating curve in the step number can express. Tissue et al. (2024, "Scaling law with
learning rate annealing") model the loss as

    L(s) = L0 + A * S1(s)**(-alpha) - C * S2(s)

with S1 the cumulative LR ("forward area") and S2 the annealing area (a momentum-smoothed sum of
LR decreases). Both areas need the LR up to ``total_steps``; we only see it up to now, so the
future schedule is inferred from the observed LRs: a constant LR is assumed to stay constant (the
law then says "no drop is coming"), a decaying one is matched against linear-to-zero and
cosine-to-zero at ``total_steps`` and a straight-line extrapolation, whichever explains the
observed decay best.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from advisor.forecast.families import Family

FloatArray = NDArray[np.float64]

_N_GRID = 512
#: at most this many points of the observed decay score the candidate schedule shapes
_N_SHAPE = 64
#: prior weight of the schedule-aware law against one saturating family
LR_LAW_PRIOR = 3.0
_ALPHA = np.geomspace(0.05, 3.0, 10)
_SW = np.array([1e-3, 1e-2, 5e-2])
#: momentum decay lengths of the annealing area, as a fraction of the horizon
_MOMENTUM = np.array([0.02, 0.1])


def _fill_lr(steps: FloatArray, lrs: FloatArray) -> FloatArray | None:
    ok = np.isfinite(lrs) & (lrs >= 0)
    if ok.sum() < 2 or float(np.max(lrs[ok])) <= 0:
        return None
    return np.interp(steps, steps[ok], lrs[ok])


def _line(x: FloatArray, y: FloatArray) -> tuple[float, float]:
    """Least-squares straight line (slope, intercept); np.polyfit's generality costs ~10x more."""
    xm, ym = float(x.sum()) / x.size, float(y.sum()) / y.size
    xc = x - xm
    sxx = float(xc @ xc)
    slope = float(xc @ (y - ym)) / sxx if sxx > 0 else 0.0
    return slope, ym - slope * xm


#: a learning rate within this share of its peak has not begun to decay
_AT_PEAK = 0.98
#: a decay that reached zero (within 1 - _AT_PEAK of its peak) this late in its span, or later,
#: reached it at the run's end: at a 2% floor a linear decay spends the last 2% of its span
#: there, a cosine 9%; logged every few percent, both are past this (not a tuned value)
ZERO_AT_THE_END = 0.9
#: a rate reported again at its peak within float rounding is the same rate: a warmup-stable-decay
#: schedule holds it exactly through its stable phase (a representation tolerance, not a setting)
_SAME_RATE = 1e-6


def _usable_peak(lrs: FloatArray) -> tuple[NDArray[np.bool_], int, float] | None:
    """(the usable rates' mask, the index of their peak among them, the peak) of at least three
    usable (finite, non-negative) reported rates with a positive peak; None otherwise."""
    ok = np.isfinite(lrs) & (lrs >= 0)
    if ok.sum() < 3:
        return None
    seen = lrs[ok]
    peak_i = int(np.argmax(seen))
    peak = float(seen[peak_i])
    return (ok, peak_i, peak) if peak > 0 else None


def _decay_start(lr: FloatArray, peak_i: int, peak: float) -> int:
    """The index at which the decay after the peak begins: the last rate still reported at the
    peak. A warmup-stable-decay schedule holds its peak for most of the run and decays only in
    its last stretch; read from the first peak, its decay would be fitted across the stable phase
    and end five times too late."""
    at = np.flatnonzero(lr[peak_i:] >= peak * (1.0 - _SAME_RATE))
    return peak_i + int(at[-1])


def held_at_peak(lrs: FloatArray) -> bool:
    """Whether the learning rates reported so far have stayed at their peak since it was reached
    (a warmup done, no decay begun): the shape ``infer_future`` calls ``constant``, read without
    a horizon. A run that does not report its total steps has no future schedule to infer, but a
    rate held at its peak says no anneal has begun."""
    found = _usable_peak(lrs)
    if found is None:
        return False
    ok, peak_i, peak = found
    seen = lrs[ok]
    return peak_i < seen.size - 1 and float(seen[-1]) >= peak * _AT_PEAK


def implied_end(steps: FloatArray, lrs: FloatArray) -> tuple[float, str] | None:
    """(the step, the shape) at which a learning-rate decay under way reaches zero, for a run that
    does not report its total steps: schedules that decay (linear, cosine) are set to end at the
    budget, so the decay says where the run ends. A decay that reached zero only at the last
    reports ends the run there (the shape ``decayed``). None when no decay has begun (held at its
    peak: ``held_at_peak``), when it reached zero well before the last step, or when neither shape
    puts the end past the last step.

    Both shapes are fitted to the decay since the rate left its peak (the last rate reported at
    it: a stable phase is not part of the decay; linear to zero: least squares through that
    point; cosine to zero: the median of each point's own end), and the one whose rates come
    closer to the reported ones is taken, as ``infer_future`` chooses."""
    found = _usable_peak(lrs)
    if found is None:
        return None
    ok, peak_i, peak = found
    s, lr = steps[ok], lrs[ok]
    peak_i = _decay_start(lr, peak_i, peak)
    if lr.size - peak_i < 3 or float(lr[-1]) >= peak * _AT_PEAK:
        return None
    s0, last = float(s[peak_i]), float(s[-1])
    x = s[peak_i:] - s0
    r = lr[peak_i:] / peak
    if float(r[-1]) <= 1.0 - _AT_PEAK:
        # at zero: the run is at its schedule's end when its rate got there only in its last
        # reports (a finished log whose writer said no total was read as a run still going, and
        # forecast to its curves' asymptote, 0.39 beside a last 0.93); a rate at zero for long
        # is a run going on at zero, with no end to read
        reached = float(x[int(np.argmax(r <= 1.0 - _AT_PEAK))])
        return (last, "decayed") if reached >= ZERO_AT_THE_END * (last - s0) else None
    spans: dict[str, float] = {}
    gap = float(x @ (1.0 - r))
    if gap > 0:
        spans["linear"] = float(x @ x) / gap
    inside = (r > 1.0 - _AT_PEAK) & (r < _AT_PEAK) & (x > 0)
    if inside.any():
        spans["cosine"] = float(np.median(np.pi * x[inside] / np.arccos(2.0 * r[inside] - 1.0)))
    best: tuple[float, str] | None = None
    err = math.inf
    for shape, span in spans.items():
        if not (span > 0 and math.isfinite(span)):
            continue
        u = np.clip(x / span, 0.0, 1.0)
        fit = 1.0 - u if shape == "linear" else 0.5 * (1.0 + np.cos(np.pi * u))
        e = float(((fit - r) ** 2).sum())
        if e < err:
            best, err = (s0 + span, shape), e
    if best is None or best[0] <= last:
        return None
    return best


def infer_future(steps: FloatArray, lrs: FloatArray, horizon: float) -> tuple[FloatArray, FloatArray, str]:
    """The LR on a grid from step 0 to ``horizon`` and the name of the inferred shape."""
    grid: FloatArray = np.arange(_N_GRID, dtype=np.float64) * (horizon / (_N_GRID - 1))  # np.linspace
    grid[-1] = horizon
    s_last = float(steps[-1])
    past = np.interp(np.minimum(grid, s_last), steps, lrs)
    peak_i = int(np.argmax(lrs))
    peak = float(lrs[peak_i])
    last = float(lrs[-1])
    future = grid > s_last
    # the decay since the peak, at most _N_SHAPE points of it (the LR is smooth: a stride loses
    # nothing that tells the candidate shapes apart)
    stride = max(1, (steps.size - peak_i) // _N_SHAPE)
    tail = slice(steps.size - 1 - ((steps.size - 1 - peak_i) // stride) * stride, None, stride)
    s_t, l_t = steps[tail], lrs[tail]
    if peak <= 0 or s_t.size < 3 or last >= peak * _AT_PEAK:
        shape = "constant" if peak_i < steps.size - 1 or steps.size < 3 else "rising"
        return grid, past, shape
    s0 = float(steps[peak_i])
    span = max(horizon - s0, 1e-9)
    cands: dict[str, FloatArray] = {}
    cands["linear"] = peak * np.clip((horizon - s_t) / span, 0, None)
    cands["cosine"] = peak * 0.5 * (1 + np.cos(np.pi * np.clip((s_t - s0) / span, 0, 1)))
    # straight line through the recent decay, clamped at zero
    k = max(3, s_t.size // 2)
    slope, icpt = _line(s_t[-k:], l_t[-k:])
    cands["extrapolated"] = np.clip(icpt + slope * s_t, 0, None)
    err = {name: float(((c - l_t) ** 2).sum()) for name, c in cands.items()}  # same length: sum ~ mean
    shape = min(err, key=lambda n: err[n])
    g = grid[future]
    if shape == "linear":
        fut = peak * np.clip((horizon - g) / span, 0, None)
    elif shape == "cosine":
        fut = peak * 0.5 * (1 + np.cos(np.pi * np.clip((g - s0) / span, 0, 1)))
    else:
        fut = np.clip(last + slope * (g - s_last), 0, None)
    past[future] = fut
    return grid, past, shape


def areas(grid: FloatArray, lr: FloatArray) -> tuple[FloatArray, FloatArray]:
    """S1 (cumulative LR, in units of peak-LR steps) and S2 for each momentum length, on ``grid``.

    Returns S1 (K,) and S2 (M, K)."""
    peak = float(lr.max()) or 1.0
    eta = lr / peak
    d = np.empty_like(grid)
    d[0] = 0.0
    np.subtract(grid[1:], grid[:-1], out=d[1:])
    s1 = np.cumsum(eta * d)
    drop = np.empty_like(eta)  # LR decreases per grid cell
    drop[0] = 0.0
    np.maximum(eta[:-1] - eta[1:], 0.0, out=drop[1:])
    # m_k = lam * m_{k-1} + drop_k; S2 = sum_k m_k * d_k. The recursion is an IIR filter:
    # the closed form via cumulative sums of drop*lam**-k stays stable for <= 512 cells.
    powers, inverse = _momentum_powers(grid.size)
    m = powers * np.cumsum(drop[None, :] * inverse, axis=1)
    return s1, np.cumsum(m * d[None, :], axis=1)


@lru_cache(maxsize=4)
def _momentum_powers(k: int) -> tuple[FloatArray, FloatArray]:
    """lam**j and lam**-j (M, k) for the momentum lengths on a k-cell grid over the horizon.

    The grid is the horizon in k - 1 equal cells and the lengths are fractions of the horizon, so
    lam = exp(-1 / ((k - 1) * fraction)) does not depend on the horizon: built once."""
    lam = np.exp(-1.0 / (max(k - 1, 1) * _MOMENTUM))
    j = np.arange(k, dtype=np.float64)[None, :]
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        powers: FloatArray = lam[:, None] ** j
        inverse: FloatArray = np.where(powers > 0, 1.0 / powers, 0.0)
    powers.setflags(write=False)
    inverse.setflags(write=False)
    return powers, inverse


_A_ROWS, _, _MI_ROWS = (
    g.ravel() for g in np.meshgrid(_ALPHA, np.arange(_SW.size), np.arange(_MOMENTUM.size), indexing="ij")
)
_AS_ALPHA, _AS_SW = (g.ravel() for g in np.meshgrid(_ALPHA, np.arange(_SW.size), indexing="ij"))
#: the (alpha, shift) pair of each grid row (rows run alpha, shift, momentum; momentum fastest)
_AS_ROW = np.arange(_A_ROWS.size) // _MOMENTUM.size


def lr_law_family(
    steps_all: FloatArray,
    grid: FloatArray,
    lr: FloatArray,
    s_ref: float,
) -> Family:
    """The schedule-aware family for this run, with its design built for the points ``steps_all``
    (observed then prediction points, in that order, as the fit concatenates them)."""
    s1g, s2g = areas(grid, lr)
    s1_ref = float(np.interp(s_ref, grid, s1g)) or 1.0
    s1 = np.interp(steps_all, grid, s1g) / s1_ref
    s2 = np.stack([np.interp(steps_all, grid, s2g[j]) for j in range(s2g.shape[0])]) / s1_ref
    X = np.empty((_A_ROWS.size, steps_all.size, 2))
    # S1**-alpha for each (alpha, shift) pair once; the momentum rows repeat them
    power = np.exp(-_AS_ALPHA[:, None] * np.log(s1[None, :] + _SW[:, None])[_AS_SW])
    X[..., 0] = power[_AS_ROW]
    X[..., 1] = -s2[_MI_ROWS]

    return _fixed_family(X)


def _fixed_family(X: FloatArray) -> Family:
    def design(_u: FloatArray) -> FloatArray:
        return X

    return Family("lr_law", design, kind="abc", prior=LR_LAW_PRIOR)
