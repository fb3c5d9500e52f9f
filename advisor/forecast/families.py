"""Parametric learning-curve families, fitted by variable projection over a fixed grid.

Every family used here is linear in all but one or two of its parameters: ``y = a + b*phi(u; theta)``
(Optimus, pow3, exp3, MMF, Janoschek, Weibull, ilog2), ``y = b*phi`` (log-power) or linear in log
space (vapor pressure). For a fixed ``theta`` the linear part has a closed-form weighted least-squares
solution, so instead of a generic nonlinear solver (tens of milliseconds, sensitive to starting
values, prone to wild extrapolations) we evaluate ``phi`` on a small grid of ``theta`` for all points
at once, solve every grid point's linear problem in one vectorised numpy call, and keep the best.
The grid doubles as a prior: it only contains shapes a loss curve can plausibly have, so an
unconstrained fit cannot run off to an absurd asymptote.

Coordinates: ``u = (step + 1) / (last_step + 1)``, so the observed data lies in ``(0, 1]`` and the
grid is scale-free.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from advisor.forecast._prep import fast_median

FloatArray = NDArray[np.float64]
BasisFn = Callable[[FloatArray], FloatArray]

_HUBER_K = 1.5


@dataclass(frozen=True)
class Family:
    """A family linear in all but its grid parameters, with the shape columns built for every grid
    point at once by ``design(u)``."""

    name: str
    design: Callable[[FloatArray], FloatArray]
    kind: str = "ab"  # "ab": y = a + b*phi, "b": y = b*phi (design: phi (G, N));
    # "abc": y = a + b*phi1 + c*phi2 (design: (G, N, 2) holding phi1, phi2)
    log_space: bool = False
    prior: float = 1.0
    constrained: bool = True  # shape coefficients must be >= 0 (the curve falls)


def _grid2(a: FloatArray, b: FloatArray) -> tuple[FloatArray, FloatArray]:
    aa, bb = np.meshgrid(a, b, indexing="ij")
    return aa.ravel(), bb.ravel()


_OPT_C = np.geomspace(1e-3, 30.0, 24)
_POW_A = np.geomspace(0.03, 4.0, 24)
_EXP_B = np.geomspace(0.1, 40.0, 24)
_ILOG_K = np.geomspace(1e-3, 3.0, 24)
_KAPPA = np.geomspace(0.3, 60.0, 6)
_DELTA = np.geomspace(0.3, 2.5, 4)
_K2, _D2 = _grid2(_KAPPA, _DELTA)  # row r of a 2-D family is (_K2[r], _D2[r])
_D_INDEX = np.tile(np.arange(_DELTA.size), _KAPPA.size)
_K2_POW_D2 = _K2**_D2
_LP_S = np.geomspace(0.005, 2.0, 6)
_LP_SC = _grid2(_LP_S, _DELTA)[0] ** -_D2  # s**-c for the log-power grid (c on the delta grid)


#: (u, u**delta rows) of the latest call, as one tuple so that a thread reads a consistent pair
_UPOW_LAST: list[tuple[FloatArray, FloatArray]] = [(np.zeros(0), np.zeros((0, 0)))]


def _upow(u: FloatArray) -> FloatArray:
    """u**delta for the few delta values, shared by the 2-D families (exponentials are the
    dominant cost, so each family reuses these rows instead of computing its own: the rows of
    the latest ``u`` object are kept, and ``fit_all`` builds every family on one fresh array)."""
    last = _UPOW_LAST[0]
    if last[0] is u:
        return last[1]
    rows = np.exp(_DELTA[:, None] * np.log(u)[None, :])[_D_INDEX]
    _UPOW_LAST[0] = (u, rows)
    return rows


def _optimus(u: FloatArray) -> FloatArray:
    # 1/(b0*k + b1) + b2 == b2 + A/(u + c)
    return 1.0 / (u[None, :] + _OPT_C[:, None])


def _pow3(u: FloatArray) -> FloatArray:
    return np.exp(-_POW_A[:, None] * np.log(u)[None, :])


def _exp3(u: FloatArray) -> FloatArray:
    return np.exp(-_EXP_B[:, None] * u[None, :])


def _ilog2(u: FloatArray) -> FloatArray:
    return 1.0 / np.log1p(u[None, :] / _ILOG_K[:, None])


def _janoschek(u: FloatArray) -> FloatArray:
    # alpha - (alpha - beta) * exp(-kappa * u**delta)
    return np.exp(-_K2[:, None] * _upow(u))


def _weibull(u: FloatArray) -> FloatArray:
    # alpha - (alpha - beta) * exp(-(kappa * u)**delta): the same shapes as Janoschek with the
    # grid laid out on kappa**delta, so the two discretisations sample the family differently
    return np.exp(-_K2_POW_D2[:, None] * _upow(u))


def _mmf(u: FloatArray) -> FloatArray:
    # alpha - (alpha - beta) / (1 + (kappa * u)**delta)
    return 1.0 / (1.0 + _K2_POW_D2[:, None] * _upow(u))


def _log_power(u: FloatArray) -> FloatArray:
    # a / (1 + (u / s)**c): no offset, the curve decays towards zero
    return 1.0 / (1.0 + _LP_SC[:, None] * _upow(u))


def _vap(u: FloatArray) -> FloatArray:
    # log y = a + b/u + c*log u, linear in all three; no sign constraint
    out = np.empty((1, u.size, 2))
    out[0, :, 0] = 1.0 / u
    out[0, :, 1] = np.log(u)
    return out


FAMILIES: tuple[Family, ...] = (
    Family("optimus", _optimus),
    Family("pow3", _pow3),
    Family("exp3", _exp3),
    Family("log_power", _log_power, kind="b"),
    Family("vap", _vap, kind="abc", log_space=True, prior=0.5, constrained=False),
    Family("janoschek", _janoschek, prior=0.5),
    Family("weibull", _weibull, prior=0.5),
    Family("mmf", _mmf),
    Family("ilog2", _ilog2),
)


def _solve_ab(
    phi: FloatArray, phi2: FloatArray, y: FloatArray, w: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Closed-form weighted LS of y = a + b*phi for every grid row of ``phi`` (G, N); ``phi2`` is
    ``phi**2``, passed in because it does not change between reweighting passes. Called inside
    ``fit_all``'s ``np.errstate`` (degenerate rows divide by zero and are flagged, not warned about).

    Returns (a, b, sse), with sse = inf where b < 0 (a rising curve) or the row is degenerate."""
    sw = float(w.sum())
    ym = float(w @ y) / sw
    yc = y - ym  # centring keeps the normal equations well conditioned
    wy = w * yc
    sx = phi @ w
    sxx = phi2 @ w
    sxy = phi @ wy
    syy = float(wy @ yc)
    den = sw * sxx - sx * sx
    b = (sw * sxy) / den
    a = ym - b * sx / sw
    sse = syy - b * sxy
    # comparisons with NaN are False, so non-finite rows fail "good" too
    good = (b >= 0) & (den > 1e-12 * sw * sxx) & (sse < np.inf)
    return a, b, np.where(good, np.maximum(sse, 0.0), np.inf)


def _solve_b(
    phi: FloatArray, phi2: FloatArray, y: FloatArray, w: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Closed-form weighted LS of y = b*phi (no offset): (b, sse)."""
    sxx = phi2 @ w
    wy = w * y
    sxy = phi @ wy
    syy = float(wy @ y)
    b = sxy / sxx
    sse = syy - b * sxy
    good = (b >= 0) & (sxx > 0) & (sse < np.inf)
    return b, np.where(good, np.maximum(sse, 0.0), np.inf)


class _Pair:
    """The two shape columns of an ``a + b*p1 + c*p2`` family on the fitted points, with the
    products its normal equations need (they do not change between reweighting passes)."""

    __slots__ = ("p1", "p2", "p11", "p12", "p22")

    def __init__(self, p1: FloatArray, p2: FloatArray) -> None:
        self.p1, self.p2 = p1, p2
        self.p11, self.p22, self.p12 = p1 * p1, p2 * p2, p1 * p2


def _solve_abc(pair: _Pair, y: FloatArray, w: FloatArray, constrained: bool) -> tuple[FloatArray, FloatArray]:
    """Weighted LS of y = a + b*p1 + c*p2 for every grid row of p1, p2 (G, N), via the 3x3
    normal equations built from matrix-vector products (no (G, N, P) temporaries).

    Returns (beta (G, 3), sse (G,)); sse = inf where b or c < 0 and ``constrained``."""
    p1, p2 = pair.p1, pair.p2
    if p1.shape[0] == 1:
        return _solve_abc_one(pair, y, w, constrained)
    sw = float(w.sum())
    ym = float(w @ y) / sw
    yc = y - ym
    wy = w * yc
    s1, s2 = p1 @ w, p2 @ w
    s11, s22, s12 = pair.p11 @ w, pair.p22 @ w, pair.p12 @ w
    s1y, s2y = p1 @ wy, p2 @ wy
    # centre the columns: then a drops out and a 2x2 system remains
    c11 = s11 - s1 * s1 / sw
    c22 = s22 - s2 * s2 / sw
    c12 = s12 - s1 * s2 / sw
    det = c11 * c22 - c12 * c12
    b = (c22 * s1y - c12 * s2y) / det
    c = (c11 * s2y - c12 * s1y) / det
    a = ym - (b * s1 + c * s2) / sw
    sse = float(wy @ yc) - b * s1y - c * s2y
    good = (det > 1e-12 * c11 * c22) & (sse < np.inf) & (sse > -np.inf)
    if constrained:
        good &= (b >= 0) & (c >= 0)
    return np.stack([a, b, c], axis=1), np.where(good, np.maximum(sse, 0.0), np.inf)


def _solve_abc_one(
    pair: _Pair, y: FloatArray, w: FloatArray, constrained: bool
) -> tuple[FloatArray, FloatArray]:
    """``_solve_abc`` for a single grid row, in scalars (a dozen numpy calls on length-1 arrays
    cost more than the whole solve)."""
    p1, p2 = pair.p1[0], pair.p2[0]
    sw = float(w.sum())
    ym = float(w @ y) / sw
    yc = y - ym
    wy = w * yc
    s1, s2 = float(p1 @ w), float(p2 @ w)
    c11 = float(pair.p11[0] @ w) - s1 * s1 / sw
    c22 = float(pair.p22[0] @ w) - s2 * s2 / sw
    c12 = float(pair.p12[0] @ w) - s1 * s2 / sw
    s1y, s2y = float(p1 @ wy), float(p2 @ wy)
    det = c11 * c22 - c12 * c12
    beta = np.zeros((1, 3))
    if not det > 1e-12 * c11 * c22:
        return beta, np.array([np.inf])
    b = (c22 * s1y - c12 * s2y) / det
    c = (c11 * s2y - c12 * s1y) / det
    beta[0] = (ym - (b * s1 + c * s2) / sw, b, c)
    sse = float(wy @ yc) - b * s1y - c * s2y
    ok = math.isfinite(sse) and not (constrained and (b < 0 or c < 0))
    return beta, np.array([max(sse, 0.0) if ok else np.inf])


@dataclass
class Fit:
    name: str
    pred: FloatArray  # predictions at the requested points
    sse: float
    ok: bool


def _huber(r: FloatArray, w: FloatArray, ref: float) -> FloatArray:
    s = 1.4826 * fast_median(np.abs(r - fast_median(r))) + 1e-9 * (1.0 + abs(ref))
    return w * np.minimum(1.0, _HUBER_K * s / np.maximum(np.abs(r), 1e-300))


@dataclass
class _Other:
    """A family solved on its own (no offset, or two shape columns), with its design split into
    the fitted points and the prediction points once, before the reweighting passes."""

    fam: Family
    fit: FloatArray | _Pair  # (G, N) for kind "b"; column pair for kind "abc"
    fit2: FloatArray | None  # phi**2 for kind "b"
    pred: FloatArray  # (G, P) or (G, P, 2)


def _prepare_others(fams: list[Family], uu: FloatArray, n: int, has_log: bool) -> list[_Other]:
    out: list[_Other] = []
    for fam in fams:
        if fam.kind == "ab" or (fam.log_space and not has_log):
            continue
        D = fam.design(uu)
        if fam.kind == "b":
            phi = np.ascontiguousarray(D[:, :n])
            out.append(_Other(fam, phi, phi * phi, D[:, n:]))
        else:
            pair = _Pair(np.ascontiguousarray(D[:, :n, 0]), np.ascontiguousarray(D[:, :n, 1]))
            out.append(_Other(fam, pair, None, D[:, n:]))
    return out


def _solve_other(
    o: _Other, y: FloatArray, ylog: FloatArray | None, ww: FloatArray
) -> tuple[int, FloatArray, float] | None:
    """Best grid row of one separately solved family: (row, coefficients, weighted SSE in y)."""
    fam = o.fam
    yt = ylog if fam.log_space else y
    assert yt is not None
    if fam.kind == "b":
        assert isinstance(o.fit, np.ndarray) and o.fit2 is not None
        b1, sse1 = _solve_b(o.fit, o.fit2, yt, ww)
        g = int(np.argmin(sse1))
        if not np.isfinite(sse1[g]):
            return None
        return g, np.array([0.0, b1[g], 0.0]), float(sse1[g])
    assert isinstance(o.fit, _Pair)
    beta, sse2 = _solve_abc(o.fit, yt, ww, fam.constrained)
    g = int(np.argmin(sse2))
    if not np.isfinite(sse2[g]):
        return None
    if fam.log_space:  # score in the loss itself, so that families compare on one scale
        fitted = np.exp(beta[g, 0] + beta[g, 1] * o.fit.p1[g] + beta[g, 2] * o.fit.p2[g])
        r = y - fitted
        return g, beta[g], float(ww @ (r * r))
    return g, beta[g], float(sse2[g])


def _other_values(o: _Other, g: int, coef: FloatArray, n: int, pred: bool) -> FloatArray:
    """The fitted family's values at the prediction points (``pred``) or at the fitted points."""
    if o.fam.kind == "b":
        col = o.pred[g] if pred else o.fit[g]  # type: ignore[index]
        return coef[1] * col
    if pred:
        v = coef[0] + coef[1] * o.pred[g, :, 0] + coef[2] * o.pred[g, :, 1]
    else:
        assert isinstance(o.fit, _Pair)
        v = coef[0] + coef[1] * o.fit.p1[g] + coef[2] * o.fit.p2[g]
    if o.fam.log_space:
        v = np.exp(np.clip(v, -700.0, 700.0))
    return v


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
    ``-c * completed_epoch_boundaries`` with c >= 0 to the ``a + b*phi`` families: the training loss
    of a multi-epoch run steps down each time the model starts seeing data again.

    All ``a + b*phi`` families are stacked into one matrix and solved together, which is what
    makes a whole ensemble cost about as much as one generic nonlinear fit. Robust (Huber) weights
    are shared: they come from the residuals of the best-fitting family and are a property of the
    data (a spike is a spike whichever curve is fitted), so every family is refitted with them.
    Everything that does not depend on the weights (designs, their squares and products) is built
    once, before the reweighting passes; predictions are formed only after the last pass.
    """
    return fit_all_robust(fams, u, y, w, u_pred, irls, epoch_col)[0]


def fit_all_robust(
    fams: list[Family],
    u: FloatArray,
    y: FloatArray,
    w: FloatArray,
    u_pred: FloatArray,
    irls: int = 2,
    epoch_col: tuple[FloatArray, FloatArray] | None = None,
) -> tuple[dict[str, Fit], FloatArray]:
    """``fit_all``, also returning the point weights of the last pass (``w`` times the robust
    weights), so that another fit of the same points can reuse them instead of re-deriving them."""
    with np.errstate(all="ignore"):  # degenerate grid rows are flagged, not warned about
        return _fit_all(fams, u, y, w, u_pred, irls, epoch_col)


def _fit_all(
    fams: list[Family],
    u: FloatArray,
    y: FloatArray,
    w: FloatArray,
    u_pred: FloatArray,
    irls: int,
    epoch_col: tuple[FloatArray, FloatArray] | None,
) -> tuple[dict[str, Fit], FloatArray]:
    n = u.size
    ylog = np.log(y) if (y > 0).all() else None
    uu = np.concatenate((u, u_pred))
    ab_rows: list[FloatArray] = []
    ab_names: list[str] = []
    for fam in fams:
        if fam.kind == "ab":
            ab_rows.append(fam.design(uu))
            ab_names.append(fam.name)
    others = _prepare_others(fams, uu, n, ylog is not None)
    # every a + b*phi family has the same grid size, so the stack reshapes to (families, grid)
    n_fam = len(ab_rows)
    phi = phip = phi2 = np.zeros((0, n))
    pair: _Pair | None = None
    if n_fam:
        big = np.concatenate(ab_rows, axis=0) if n_fam > 1 else ab_rows[0]
        phi, phip = np.ascontiguousarray(big[:, :n]), big[:, n:]
        if not np.isfinite(phi).all():
            phi = np.where(np.isfinite(phi), phi, 0.0)
        if epoch_col is None:
            phi2 = phi * phi
        else:
            pair = _Pair(phi, np.ascontiguousarray(np.broadcast_to(-epoch_col[0], phi.shape)))
    ref = fast_median(y)
    return _fit_passes(ab_names, phi, phi2, phip, pair, others, y, ylog, w, ref, n, irls, epoch_col)


def _fit_passes(
    ab_names: list[str],
    phi: FloatArray,
    phi2: FloatArray,
    phip: FloatArray,
    pair: _Pair | None,
    others: list[_Other],
    y: FloatArray,
    ylog: FloatArray | None,
    w: FloatArray,
    ref: float,
    n: int,
    irls: int,
    epoch_col: tuple[FloatArray, FloatArray] | None,
) -> tuple[dict[str, Fit], FloatArray]:
    """The reweighting passes of ``fit_all``; returns the fits and the weights of the last pass."""
    n_fam = len(ab_names)
    fits: dict[str, Fit] = {}
    ww = w
    a = b = c = sse = np.zeros(0)
    g = np.zeros(0, dtype=int)
    best_other: list[tuple[_Other, tuple[int, FloatArray, float]]] = []
    for it in range(irls + 1):
        fitted_best: FloatArray | None = None
        best_sse = np.inf
        if n_fam:
            if pair is None:
                a, b, sse = _solve_ab(phi, phi2, y, ww)
            else:
                beta, sse = _solve_abc(pair, y, ww, True)
                a, b, c = beta[:, 0], beta[:, 1], beta[:, 2]
            per = sse.reshape(n_fam, -1)
            g = per.argmin(axis=1) + np.arange(n_fam) * per.shape[1]
            best_f = sse[g]
            jb = int(best_f.argmin())
            if np.isfinite(best_f[jb]):
                best_sse = float(best_f[jb])
                gb = g[jb]
                fitted_best = a[gb] + b[gb] * phi[gb]
                if pair is not None:
                    fitted_best = fitted_best + c[gb] * pair.p2[gb]  # p2 = -epochs
        best_other = []
        for o in others:
            res = _solve_other(o, y, ylog, ww)
            if res is None:
                continue
            best_other.append((o, res))
            if it < irls and res[2] < best_sse:
                best_sse, fitted_best = res[2], _other_values(o, res[0], res[1], n, pred=False)
        if it < irls and fitted_best is not None:
            ww = _huber(y - fitted_best, w, ref)
    if n_fam:
        best_f = sse[g]
        preds = a[g, None] + b[g, None] * phip[g]
        if epoch_col is not None:
            preds = preds - c[g, None] * epoch_col[1][None, :]
        for j, name in enumerate(ab_names):
            if np.isfinite(best_f[j]):
                fits[name] = Fit(name, preds[j], float(best_f[j]), True)
    for o, (row, coef, sse_o) in best_other:
        pred = _other_values(o, row, coef, n, pred=True)
        if np.isfinite(pred).all():
            fits[o.fam.name] = Fit(o.fam.name, pred, sse_o, True)
    return fits, ww
