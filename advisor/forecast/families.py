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


def _upow(u: FloatArray) -> FloatArray:
    """u**delta for the few delta values, shared by the 2-D families (exponentials are the
    dominant cost, so each family reuses these rows instead of computing its own)."""
    return np.exp(_DELTA[:, None] * np.log(u)[None, :])[_D_INDEX]


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


def _solve_ab(phi: FloatArray, y: FloatArray, w: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Closed-form weighted LS of y = a + b*phi for every grid row of ``phi`` (G, N).

    Returns (a, b, sse), with sse = inf where b < 0 (a rising curve) or the row is degenerate."""
    sw = float(w.sum())
    ym = float(w @ y) / sw
    yc = y - ym  # centring keeps the normal equations well conditioned
    wy = w * yc
    sx = phi @ w
    sxx = (phi * phi) @ w
    sxy = phi @ wy
    syy = float(wy @ yc)
    den = sw * sxx - sx * sx
    with np.errstate(divide="ignore", invalid="ignore"):
        b = (sw * sxy) / den
        a = ym - b * sx / sw
        sse = syy - b * sxy
    bad = ~np.isfinite(sse) | ~np.isfinite(b) | (b < 0) | (den <= 1e-12 * np.maximum(sw * sxx, 1e-300))
    return a, b, np.where(bad, np.inf, np.maximum(sse, 0.0))


def _solve_b(phi: FloatArray, y: FloatArray, w: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Closed-form weighted LS of y = b*phi (no offset)."""
    sxx = (phi * phi) @ w
    sxy = phi @ (w * y)
    syy = float((w * y) @ y)
    with np.errstate(divide="ignore", invalid="ignore"):
        b = sxy / sxx
        sse = syy - b * sxy
    bad = ~np.isfinite(sse) | (b < 0) | (sxx <= 0)
    return np.zeros_like(b), b, np.where(bad, np.inf, np.maximum(sse, 0.0))


def _solve_abc(
    p1: FloatArray, p2: FloatArray, y: FloatArray, w: FloatArray, constrained: bool
) -> tuple[FloatArray, FloatArray]:
    """Weighted LS of y = a + b*p1 + c*p2 for every grid row of p1, p2 (G, N), via the 3x3
    normal equations built from matrix-vector products (no (G, N, P) temporaries).

    Returns (beta (G, 3), sse (G,)); sse = inf where b or c < 0 and ``constrained``."""
    sw = float(w.sum())
    ym = float(w @ y) / sw
    yc = y - ym
    wy = w * yc
    s1, s2 = p1 @ w, p2 @ w
    s11, s22, s12 = (p1 * p1) @ w, (p2 * p2) @ w, (p1 * p2) @ w
    s1y, s2y = p1 @ wy, p2 @ wy
    # centre the columns: then a drops out and a 2x2 system remains
    c11 = s11 - s1 * s1 / sw
    c22 = s22 - s2 * s2 / sw
    c12 = s12 - s1 * s2 / sw
    det = c11 * c22 - c12 * c12
    with np.errstate(divide="ignore", invalid="ignore"):
        b = (c22 * s1y - c12 * s2y) / det
        c = (c11 * s2y - c12 * s1y) / det
        a = ym - (b * s1 + c * s2) / sw
        sse = float(wy @ yc) - b * s1y - c * s2y
    bad = ~np.isfinite(sse) | (det <= 1e-12 * np.maximum(c11 * c22, 1e-300))
    if constrained:
        bad |= (b < 0) | (c < 0)
    return np.stack([a, b, c], axis=1), np.where(bad, np.inf, np.maximum(sse, 0.0))


@dataclass
class Fit:
    name: str
    pred: FloatArray  # predictions at the requested points
    sse: float
    ok: bool


def _huber(r: FloatArray, w: FloatArray, ref: float) -> FloatArray:
    s = 1.4826 * fast_median(np.abs(r - fast_median(r))) + 1e-9 * (1.0 + abs(ref))
    return w * np.minimum(1.0, _HUBER_K * s / np.maximum(np.abs(r), 1e-300))


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
    """
    n = u.size
    ylog = np.log(y) if np.all(y > 0) else None
    uu = np.r_[u, u_pred]
    ab_rows: list[FloatArray] = []
    ab_names: list[str] = []
    others: list[tuple[Family, FloatArray]] = []
    with np.errstate(all="ignore"):
        for fam in fams:
            if fam.kind == "ab":
                ab_rows.append(fam.design(uu))
                ab_names.append(fam.name)
            elif fam.kind == "b" or not (fam.log_space and ylog is None):
                others.append((fam, fam.design(uu)))
    # every a + b*phi family has the same grid size, so the stack reshapes to (families, grid)
    n_fam = len(ab_rows)
    big = np.concatenate(ab_rows, axis=0) if ab_rows else np.zeros((0, uu.size))
    phi, phip = np.ascontiguousarray(big[:, :n]), big[:, n:]
    if not np.all(np.isfinite(phi)):
        phi = np.where(np.isfinite(phi), phi, 0.0)
    ref = fast_median(y)
    ww = w
    fits: dict[str, Fit] = {}
    e_obs, e_pred = epoch_col if epoch_col is not None else (np.zeros(n), np.zeros(u_pred.size))
    for it in range(irls + 1):
        fits = {}
        fitted_best: FloatArray | None = None
        best_sse = np.inf
        if n_fam:
            if epoch_col is None:
                a, b, sse = _solve_ab(phi, y, ww)
                c = np.zeros_like(a)
            else:
                beta, sse = _solve_abc(phi, np.broadcast_to(-e_obs, phi.shape), y, ww, True)
                a, b, c = beta[:, 0], beta[:, 1], beta[:, 2]
            per = sse.reshape(n_fam, -1)
            g = np.argmin(per, axis=1) + np.arange(n_fam) * per.shape[1]
            best_f = sse[g]
            preds = a[g, None] + b[g, None] * phip[g] - c[g, None] * e_pred[None, :]
            for j, name in enumerate(ab_names):
                if np.isfinite(best_f[j]):
                    fits[name] = Fit(name, preds[j], float(best_f[j]), True)
            jb = int(np.argmin(best_f))
            if np.isfinite(best_f[jb]):
                best_sse = float(best_f[jb])
                gb = g[jb]
                fitted_best = a[gb] + b[gb] * phi[gb] - c[gb] * e_obs
        for fam, D in others:
            yt = ylog if fam.log_space else y
            assert yt is not None
            if fam.kind == "b":
                _, b1, sse1 = _solve_b(np.ascontiguousarray(D[:, :n]), yt, ww)
                g = int(np.argmin(sse1))
                if not np.isfinite(sse1[g]):
                    continue
                fitted = b1[g] * D[g, :n]
                pred = b1[g] * D[g, n:]
                sse_g = float(sse1[g])
            else:
                p1, p2 = np.ascontiguousarray(D[:, :n, 0]), np.ascontiguousarray(D[:, :n, 1])
                beta, sse2 = _solve_abc(p1, p2, yt, ww, fam.constrained)
                g = int(np.argmin(sse2))
                if not np.isfinite(sse2[g]):
                    continue
                fitted = beta[g, 0] + beta[g, 1] * p1[g] + beta[g, 2] * p2[g]
                pred = beta[g, 0] + beta[g, 1] * D[g, n:, 0] + beta[g, 2] * D[g, n:, 1]
                if fam.log_space:
                    fitted, pred = np.exp(fitted), np.exp(np.clip(pred, -700, 700))
                sse_g = float(np.sum(ww * (y - fitted) ** 2))
            if np.all(np.isfinite(pred)):
                fits[fam.name] = Fit(fam.name, pred, sse_g, True)
                if sse_g < best_sse:
                    best_sse, fitted_best = sse_g, fitted
        if it < irls and fitted_best is not None:
            ww = _huber(y - fitted_best, w, ref)
    return fits
