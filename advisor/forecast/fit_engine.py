"""The solver that fits every curve family of ``families`` at once: variable projection over each
family's grid, several weightings of the same points per call, Huber reweighting passes and a
refinement of one-parameter families between their grid neighbours.

Split from the families themselves because the two change for different reasons: a new family is a
shape and a grid; a faster or more robust fit is a change here that every family shares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from advisor.forecast.families import Family, FloatArray
from advisor.forecast.robust import fast_median

_HUBER_K = 1.5


# Every solver below handles several weightings of the same points at once: ``W`` is (K, N), one
# row per fit, and every result is (K, G). The forecaster fits the whole history and, in the same
# matrix products, the history without its tail (row 1, the tail weighted zero), which is what
# scores each family's extrapolation: two fits for the numpy overhead of one. All the sums the
# normal equations need come out of a single matrix product per block: [W; W*y] times the block's
# stacked columns (built once per fit, they do not change between reweighting passes).


@dataclass
class Fit:
    name: str
    pred: FloatArray  # predictions at the requested points
    sse: float
    ok: bool


def _huber(r: FloatArray, w: FloatArray, ref: float) -> FloatArray:
    s = 1.4826 * fast_median(np.abs(r - fast_median(r))) + 1e-9 * (1.0 + abs(ref))
    return w * np.minimum(1.0, _HUBER_K * s / np.maximum(np.abs(r), 1e-300))


class _Block:
    """Grid rows solved together. ``kind`` "ab": ``y = a + b*p1`` (the ``a + b*phi`` families, all
    their grids stacked: one set of matrix products for the whole ensemble); "abc":
    ``y = a + b*p1 + c*p2`` (the schedule-aware law, vapor pressure in log space, or the
    ``a + b*phi`` families with an epoch term in p2); "b": ``y = b*p1`` (log-power, no offset).

    ``sizes``: grid rows of each family, in order. ``droppable``: p2 may be left out when it is
    constant under a weighting (the epoch count of a history that crossed no boundary in the part
    that is fitted: its coefficient cannot be measured, so it is 0 rather than the row lost)."""

    def __init__(
        self,
        kind: str,
        names: list[str],
        sizes: list[int],
        p1: FloatArray,
        pred1: FloatArray,
        p2: FloatArray | None = None,
        pred2: FloatArray | None = None,
        *,
        log_space: bool = False,
        constrained: bool = True,
        droppable: bool = False,
        offset_rows: int | None = None,
    ) -> None:
        self.kind, self.names, self.sizes = kind, names, sizes
        #: kind "ab": rows from this one on are ``y = b*p1`` (no offset), solved in the same products
        self.offset_rows = p1.shape[0] if offset_rows is None else offset_rows
        self.equal_sizes = len(set(sizes)) == 1
        self.p1, self.p2, self.pred1, self.pred2 = p1, p2, pred1, pred2
        self.log_space, self.constrained, self.droppable = log_space, constrained, droppable
        # right operands of the products, built once: [W; W*y] times q, W times r
        if p2 is None:
            self.q, self.r = p1.T, (p1 * p1).T
        else:
            self.q = np.concatenate((p1, p2)).T
            self.r = np.concatenate((p1 * p1, p2 * p2, p1 * p2)).T
        self.coef: tuple[FloatArray, FloatArray, FloatArray] = (np.zeros(0), np.zeros(0), np.zeros(0))
        #: the one-parameter families among ``names`` (their index there), and the points the
        #: designs were built on (fitted and prediction points, how many are fitted, the epoch
        #: column): what ``_refine`` needs to build a row between two grid points
        self.refinable: list[tuple[int, Family]] = []
        self.points: tuple[FloatArray, int, tuple[FloatArray, FloatArray] | None] | None = None
        self.sse = np.zeros(0)
        #: kind "abc": where p2 was constant under a weighting (K, G), from the latest solve
        self.flat = np.zeros((0, 0), dtype=bool)

    def solve(self, y: FloatArray, W: FloatArray) -> None:
        """Solve every row for every weighting (rows of ``W``): (a, b, c) and the SSE, (K, G)."""
        k, g = W.shape[0], self.p1.shape[0]
        if self.kind == "b":  # y = b*p1
            wy = W * y
            sxy, sxx = wy @ self.q, W @ self.r
            b = sxy / sxx
            sse = (wy @ y)[:, None] - b * sxy
            good = (b >= 0) & (sxx > 0) & (sse < np.inf)
            zero = np.zeros_like(b)
            self.coef = (zero, b, zero)
            self.sse = np.where(good, np.maximum(sse, 0.0), np.inf)
            return
        sw = W.sum(axis=1)[:, None]
        ym = (W @ y)[:, None] / sw
        yc = y - ym  # centring keeps the normal equations well conditioned
        wy = W * yc
        m = np.concatenate((W, wy)) @ self.q
        syy = (wy * yc).sum(axis=1)[:, None]
        if self.kind == "ab":
            sx, sxy, sxx = m[:k], m[k:], W @ self.r
            den = sw * sxx - sx * sx
            b = (sw * sxy) / den
            a = ym - b * sx / sw
            sse = syy - b * sxy
            # comparisons with NaN are False, so non-finite rows fail "good" too
            good = (b >= 0) & (den > 1e-12 * sw * sxx) & (sse < np.inf)
            o = self.offset_rows
            if o < b.shape[1]:
                # the last rows have no offset (y = b*p1): the same sums, uncentred
                sxy0 = sxy[:, o:] + ym * sx[:, o:]
                b0 = sxy0 / sxx[:, o:]
                b[:, o:] = b0
                a[:, o:] = 0.0
                sse[:, o:] = syy + sw * ym * ym - b0 * sxy0
                good[:, o:] = (b0 >= 0) & (sxx[:, o:] > 0) & (sse[:, o:] < np.inf)
            self.coef = (a, b, np.zeros_like(b))
            self.sse = np.where(good, np.maximum(sse, 0.0), np.inf)
            return
        rr = W @ self.r
        s1, s2, s1y, s2y = m[:k, :g], m[:k, g:], m[k:, :g], m[k:, g:]
        s11, s22, s12 = rr[:, :g], rr[:, g : 2 * g], rr[:, 2 * g :]
        # centre the columns: then a drops out and a 2x2 system remains
        c11 = s11 - s1 * s1 / sw
        c22 = s22 - s2 * s2 / sw
        c12 = s12 - s1 * s2 / sw
        det = c11 * c22 - c12 * c12
        b = (c22 * s1y - c12 * s2y) / det
        c = (c11 * s2y - c12 * s1y) / det
        good = det > 1e-12 * c11 * c22
        flat = c22 <= 1e-12 * s22
        self.flat = flat
        if self.droppable:
            b = np.where(flat, s1y / c11, b)
            c = np.where(flat, 0.0, c)
            good |= flat & (c11 > 0)
        a = ym - (b * s1 + c * s2) / sw
        sse = syy - b * s1y - c * s2y
        good &= (sse < np.inf) & (sse > -np.inf)
        if self.constrained:
            good &= (b >= 0) & (c >= 0)
        self.coef = (a, b, c)
        self.sse = np.where(good, np.maximum(sse, 0.0), np.inf)

    def best(self, k: int) -> NDArray[np.intp]:
        """Best row of each family under weighting ``k``, as row indices into the block."""
        size = self.sizes[0]
        if self.equal_sizes:
            per = self.sse[k].reshape(len(self.sizes), size)
            return per.argmin(axis=1) + np.arange(len(self.sizes)) * size
        starts = np.cumsum([0, *self.sizes[:-1]])
        return np.array(
            [st + int(self.sse[k, st : st + sz].argmin()) for st, sz in zip(starts, self.sizes, strict=True)],
            dtype=np.intp,
        )

    def values(self, rows: NDArray[np.intp], k: int, cols: NDArray[np.intp] | None = None) -> FloatArray:
        """Fitted values of ``rows`` (in the loss itself) at the fitted points ``cols`` (all when
        None), with weighting ``k``'s coefficients."""
        a, b, c = (x[k, rows][:, None] for x in self.coef)
        p1 = self.p1[rows] if cols is None else self.p1[rows][:, cols]
        v = a + b * p1
        if self.p2 is not None:
            v = v + c * (self.p2[rows] if cols is None else self.p2[rows][:, cols])
        return np.exp(np.clip(v, -700.0, 700.0)) if self.log_space else v

    def predict(self, rows: NDArray[np.intp], k: int) -> FloatArray:
        """Values of ``rows`` at the prediction points, with weighting ``k``'s coefficients."""
        a, b, c = (x[k, rows][:, None] for x in self.coef)
        v = a + b * self.pred1[rows]
        if self.pred2 is not None:
            v = v + c * self.pred2[rows]
        return np.exp(np.clip(v, -700.0, 700.0)) if self.log_space else v


def _blocks(
    fams: list[Family],
    u: FloatArray,
    u_pred: FloatArray,
    has_log: bool,
    epoch_col: tuple[FloatArray, FloatArray] | None,
) -> list[_Block]:
    """Build every family's design once (on the fitted and the prediction points together)."""
    n = u.size
    uu = np.concatenate((u, u_pred))
    out: list[_Block] = []
    ab = [f for f in fams if f.kind == "ab"]
    # without an epoch term, the no-offset families join the stacked block (same grid size)
    joined = [f for f in fams if f.kind == "b"] if (ab and epoch_col is None) else []
    if ab:
        designs = [f.design(uu) for f in ab + joined]
        big = np.concatenate(designs, axis=0) if len(designs) > 1 else designs[0]
        phi = np.ascontiguousarray(big[:, :n])
        if not np.isfinite(phi).all():
            phi = np.where(np.isfinite(phi), phi, 0.0)
        names = [f.name for f in ab + joined]
        sizes = [d.shape[0] for d in designs]
        if epoch_col is None:
            n_off = sum(sizes[: len(ab)])
            out.append(_Block("ab", names, sizes, phi, big[:, n:], offset_rows=n_off))
        else:
            # a term -c * completed_epoch_boundaries, c >= 0: the training loss of a multi-epoch
            # run steps down each time the model starts seeing the data again
            p2 = np.ascontiguousarray(np.broadcast_to(-epoch_col[0], phi.shape))
            p2p = np.broadcast_to(-epoch_col[1], (big.shape[0], u_pred.size))
            out.append(_Block("abc", names, sizes, phi, big[:, n:], p2, p2p, droppable=True))
        out[-1].refinable = [(i, f) for i, f in enumerate(ab) if f.shape is not None and f.grid is not None]
        out[-1].points = (uu, n, epoch_col)
    for fam in fams:
        if fam.kind == "ab" or fam in joined or (fam.log_space and not has_log):
            continue
        D = fam.design(uu)
        g = D.shape[0]
        if fam.kind == "b":
            out.append(_Block("b", [fam.name], [g], np.ascontiguousarray(D[:, :n]), D[:, n:]))
        else:
            out.append(
                _Block(
                    "abc",
                    [fam.name],
                    [g],
                    np.ascontiguousarray(D[:, :n, 0]),
                    D[:, n:, 0],
                    np.ascontiguousarray(D[:, :n, 1]),
                    D[:, n:, 1],
                    log_space=fam.log_space,
                    constrained=fam.constrained,
                )
            )
    return out


def fit_all(
    fams: list[Family],
    u: FloatArray,
    y: FloatArray,
    w: FloatArray,
    u_pred: FloatArray,
    irls: int = 2,
    epoch_col: tuple[FloatArray, FloatArray] | None = None,
) -> dict[str, Fit]:
    """Fit every family on (u, y, w) and predict at ``u_pred``.

    ``epoch_col`` (values at the fitted points, at the prediction points) adds a term
    ``-c * completed_epoch_boundaries`` with c >= 0 to the ``a + b*phi`` families.

    All ``a + b*phi`` families are stacked into one matrix and solved together, which is what makes
    a whole ensemble cost about as much as one generic nonlinear fit. Robust (Huber) weights are
    shared: they come from the residuals of the best-fitting family and are a property of the data
    (a spike is a spike whichever curve is fitted), so every family is refitted with them.
    Everything that does not depend on the weights (designs, their squares and products) is built
    once, before the reweighting passes; predictions are formed only after the last pass.
    """
    return fit_all_robust(fams, u, y, w, u_pred, irls, epoch_col).fits


@dataclass
class RobustFit:
    """``fit_all_robust``'s result: the fits, the point weights of the last pass (``w`` times the
    robust weights), and, when a holdout was asked for, each family's prediction of the held-out
    points from its fit on the others (same weights, same designs)."""

    fits: dict[str, Fit]
    weights: FloatArray
    tail: dict[str, FloatArray] = field(default_factory=dict)
    #: families fitted on the whole history that the part without its tail cannot identify (the
    #: schedule-aware law before any LR decay: its annealing term is then constant); their skill
    #: is unknown, not bad
    unscored: set[str] = field(default_factory=set)


def fit_all_robust(
    fams: list[Family],
    u: FloatArray,
    y: FloatArray,
    w: FloatArray,
    u_pred: FloatArray,
    irls: int = 2,
    epoch_col: tuple[FloatArray, FloatArray] | None = None,
    train: NDArray[np.bool_] | None = None,
) -> RobustFit:
    """``fit_all``, also returning the point weights of the last pass and, with a ``train`` mask,
    every family refitted on the ``train`` points alone (in the last pass, with its weights)
    predicting the others."""
    with np.errstate(all="ignore"):  # degenerate grid rows are flagged, not warned about
        ylog = np.log(y) if (y > 0).all() else None
        blocks = _blocks(fams, u, u_pred, ylog is not None, epoch_col)
        return _fit_passes(blocks, y, ylog, w, fast_median(y), irls, train)


def _fit_passes(
    blocks: list[_Block],
    y: FloatArray,
    ylog: FloatArray | None,
    w: FloatArray,
    ref: float,
    irls: int,
    train: NDArray[np.bool_] | None,
) -> RobustFit:
    """The reweighting passes: each pass but the last refits with Huber weights from the residuals
    of the best family; the last one also fits the ``train`` part alone (weighting 1).

    Only the first block (the stacked ``a + b*phi`` families, when there are any) takes part in
    the passes before the last: they exist to find the robust weights, which are a property of the
    points, and seven families already tell a spike from the curve; solving the other blocks there
    too would double their cost for the same weights."""
    ww = w
    for it in range(irls + 1):
        last = it == irls
        W = np.stack((ww, ww * train)) if (last and train is not None) else ww[None, :]
        best: tuple[float, _Block, int] | None = None
        for blk in blocks if last else blocks[:1]:
            blk.solve(ylog if blk.log_space else y, W)  # type: ignore[arg-type]
            if last:
                continue
            g = blk.best(0)
            j = int(blk.sse[0, g].argmin())
            if best is None or blk.sse[0, g[j]] < best[0]:
                best = (float(blk.sse[0, g[j]]), blk, int(g[j]))
        if not last and best is not None and math.isfinite(best[0]):
            fitted = best[1].values(np.array([best[2]]), 0)[0]
            ww = _huber(y - fitted, w, ref)
    out = RobustFit({}, ww)
    tail_idx = np.flatnonzero(~train) if train is not None else None
    for blk in blocks:
        better = _refine(blk, ylog if (blk.log_space and ylog is not None) else y, W)
        g = blk.best(0)
        preds = blk.predict(g, 0)
        sse0 = blk.sse[0, g]
        for j, (fine, r) in better.get(0, {}).items():
            preds[j], sse0[j] = fine.predict(np.array([r]), 0)[0], fine.sse[0, r]
        ok = np.isfinite(sse0) & np.isfinite(preds).all(axis=1)
        for j, name in enumerate(blk.names):
            if ok[j]:
                out.fits[name] = Fit(name, preds[j], float(sse0[j]), True)
        if tail_idx is None:
            continue
        g1 = blk.best(1)
        tail = blk.values(g1, 1, tail_idx)
        sse1 = blk.sse[1, g1]
        for j, (fine, r) in better.get(1, {}).items():
            tail[j], sse1[j] = fine.values(np.array([r]), 1, tail_idx)[0], fine.sse[1, r]
        ok = np.isfinite(sse1) & np.isfinite(tail).all(axis=1)
        for j, name in enumerate(blk.names):
            if ok[j]:
                out.tail[name] = tail[j]
            elif name in out.fits and blk.kind == "abc" and not blk.droppable:
                start = sum(blk.sizes[:j])
                if blk.flat[1, start : start + blk.sizes[j]].all():
                    out.unscored.add(name)
    return out


def _refine(blk: _Block, y: FloatArray, W: FloatArray) -> dict[int, dict[int, tuple[_Block, int]]]:
    """Each one-parameter family's best grid point refined between its neighbours, per weighting:
    the vertex of the parabola through the three SSEs in log-parameter (the grid is geometric),
    kept where it fits better than the grid point. Returns, per weighting, the family index ->
    (the block holding the refined rows, the row).

    The grid steps the parameter by about 30%; on a curve the family describes exactly (an
    exponential decay with its time constant a third of the steps seen), the nearest grid rate
    fitted the held-out tail ten times worse than the true one, lost the skill weighting to
    families that decay to zero, and the forecast halved the loss still to come. One parabola
    step recovers most of that at the cost of a few more design rows."""
    if not blk.refinable or blk.points is None:
        return {}
    uu, n, epoch_col = blk.points
    starts = np.cumsum([0, *blk.sizes[:-1]])
    wanted: list[tuple[int, int, float]] = []  # (weighting, family index, parameter)
    best_by_k = {k: blk.best(k) for k in range(W.shape[0])}
    for k, best in best_by_k.items():
        for j, fam in blk.refinable:
            assert fam.grid is not None
            g = int(best[j] - starts[j])
            if not 0 < g < fam.grid.size - 1:
                continue
            s0, s1, s2 = (float(v) for v in blk.sse[k, best[j] - 1 : best[j] + 2])
            curv = s0 - 2.0 * s1 + s2
            if not (math.isfinite(curv) and curv > 0.0):
                continue
            step = math.log(float(fam.grid[g + 1]) / float(fam.grid[g]))
            shift = 0.5 * (s0 - s2) / curv  # in grid steps, within (-1, 1) when s1 is the least
            if abs(shift) < 1e-3:
                continue
            wanted.append((k, j, float(fam.grid[g]) * math.exp(shift * step)))
    if not wanted:
        return {}
    shapes = {j: fam.shape for j, fam in blk.refinable}
    rows = np.concatenate([shapes[j](np.array([theta]), uu) for _, j, theta in wanted])  # type: ignore[misc]
    p1 = np.ascontiguousarray(rows[:, :n])
    if not np.isfinite(p1).all():
        p1 = np.where(np.isfinite(p1), p1, 0.0)
    names = [blk.names[j] for _, j, _ in wanted]
    if epoch_col is None:
        fine = _Block("ab", names, [1] * len(names), p1, rows[:, n:])
    else:
        p2 = np.ascontiguousarray(np.broadcast_to(-epoch_col[0], p1.shape))
        p2p = np.broadcast_to(-epoch_col[1], (p1.shape[0], uu.size - n))
        fine = _Block("abc", names, [1] * len(names), p1, rows[:, n:], p2, p2p, droppable=True)
    fine.solve(y, W)
    out: dict[int, dict[int, tuple[_Block, int]]] = {}
    for r, (k, j, _) in enumerate(wanted):
        if fine.sse[k, r] < blk.sse[k, best_by_k[k][j]]:
            out.setdefault(k, {})[j] = (fine, r)
    return out
