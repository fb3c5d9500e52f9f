"""Baseline forecasters for the benchmark, implemented the way their authors (or the usual
practice) do it, so the comparison is honest:

- ``last``: the last smoothed value (median of the last 5 points); no interval.
- ``optimus``: Optimus's 1/(b0*k + b1) + b2 fitted with ``scipy.optimize.curve_fit`` (bounds
  b >= 0, recency weighting as in the official estimator: later thirds of the curve get sigma / 4
  and / 16); interval from the parameter covariance (Laplace approximation, 200 draws).
- ``pow3``: c + a*k**(-alpha) with curve_fit, same weighting and interval.
- ``ens5``: five families (Optimus, pow3, exp3, MMF, Janoschek) each fitted with curve_fit,
  combined with BIC weights; interval by residual bootstrap (refitting every family).

Each returns (mean, p10, p90, plateau probability) for the loss at ``horizon``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import OptimizeWarning, curve_fit

FloatArray = NDArray[np.float64]
Result = tuple[float, float, float, float]


def _level(y: FloatArray) -> float:
    return float(np.median(y[-5:]))


def _plateau(samples: FloatArray, level: float) -> float:
    return float(np.mean(samples > level - 0.01 * abs(level)))


def last_value(x: FloatArray, y: FloatArray, horizon: float) -> Result:
    v = _level(y)
    return v, v, v, 1.0


def _optimus(k: FloatArray, b0: float, b1: float, b2: float) -> FloatArray:
    return 1.0 / (b0 * k + b1) + b2


def _pow3(k: FloatArray, c: float, a: float, alpha: float) -> FloatArray:
    return c + a * k ** (-alpha)


def _exp3(k: FloatArray, c: float, a: float, b: float) -> FloatArray:
    return c + a * np.exp(-b * k)


def _mmf(k: FloatArray, alpha: float, beta: float, kappa: float, delta: float) -> FloatArray:
    return alpha - (alpha - beta) / (1.0 + (kappa * k) ** delta)


def _janoschek(k: FloatArray, alpha: float, beta: float, kappa: float, delta: float) -> FloatArray:
    return alpha - (alpha - beta) * np.exp(-kappa * k**delta)


def _p0_bounds(name: str, y: FloatArray) -> tuple[list[float], tuple[list[float], list[float]]]:
    lo, hi, last = float(np.min(y)), float(np.max(y)), float(y[-1])
    span = max(hi - lo, 1e-6)
    inf = np.inf
    if name == "optimus":
        return [1.0 / span, 1.0 / span, max(lo - 0.1 * span, 0.0)], ([0, 0, 0], [inf, inf, inf])
    if name == "pow3":
        return [lo - 0.1 * span, span, 0.5], ([-inf, 0, 0], [inf, inf, 10])
    if name == "exp3":
        return [lo - 0.1 * span, span, 2.0], ([-inf, 0, 0], [inf, inf, 1e3])
    if name == "mmf":
        return [hi, last, 5.0, 1.0], ([-inf, -inf, 0, 0], [inf, inf, 1e4, 20])
    return [lo - 0.1 * span, hi, 2.0, 0.5], ([-inf, -inf, 0, 0], [inf, inf, 1e4, 20])  # janoschek


_FUNCS: dict[str, Callable[..., FloatArray]] = {
    "optimus": _optimus,
    "pow3": _pow3,
    "exp3": _exp3,
    "mmf": _mmf,
    "janoschek": _janoschek,
}


def _sigma(n: int) -> FloatArray:
    seg = np.minimum(np.arange(n) * 3 // max(n, 1), 2)
    return 1.0 / (4.0**seg)


def _fit(
    name: str, k: FloatArray, y: FloatArray, sigma: FloatArray | None
) -> tuple[FloatArray, FloatArray] | None:
    p0, bounds = _p0_bounds(name, y)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OptimizeWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            popt, pcov = curve_fit(_FUNCS[name], k, y, p0=p0, bounds=bounds, sigma=sigma, maxfev=2000)
    except (RuntimeError, ValueError, np.linalg.LinAlgError):
        return None
    return popt, pcov


def _norm(x: FloatArray, horizon: float) -> tuple[FloatArray, float]:
    ref = float(x[-1]) + 1.0
    return (x + 1.0) / ref, (horizon + 1.0) / ref


def single_fit(name: str, x: FloatArray, y: FloatArray, horizon: float, rng: np.random.Generator) -> Result:
    if y.size < 4:
        return last_value(x, y, horizon)
    k, kh = _norm(x, horizon)
    res = _fit(name, k, y, _sigma(y.size))
    level = _level(y)
    if res is None:
        return level, level, level, 1.0
    popt, pcov = res
    f = _FUNCS[name]
    with np.errstate(all="ignore"):
        mean = float(f(np.array([kh]), *popt)[0])
        if not np.isfinite(mean):
            return level, level, level, 1.0
        if np.all(np.isfinite(pcov)):
            try:
                draws = rng.multivariate_normal(popt, pcov, size=200, check_valid="ignore")
                s = np.array([f(np.array([kh]), *d)[0] for d in draws])
                s = s[np.isfinite(s)]
            except (ValueError, np.linalg.LinAlgError):
                s = np.array([mean])
        else:
            s = np.array([mean])
    if s.size == 0:
        s = np.array([mean])
    p10, p90 = (float(np.quantile(s, 0.1)), float(np.quantile(s, 0.9)))
    return mean, min(p10, mean), max(p90, mean), _plateau(s, level)


def _ens_fit(k: FloatArray, y: FloatArray, kh: float) -> tuple[float, FloatArray] | None:
    n = y.size
    preds, bics, fitted = [], [], []
    for name in _FUNCS:
        res = _fit(name, k, y, None)
        if res is None:
            continue
        popt = res[0]
        with np.errstate(all="ignore"):
            fy = _FUNCS[name](k, *popt)
            ph = float(_FUNCS[name](np.array([kh]), *popt)[0])
        sse = float(np.sum((y - fy) ** 2))
        if not (np.isfinite(ph) and np.isfinite(sse)):
            continue
        bics.append(n * np.log(max(sse, 1e-300) / n) + len(popt) * np.log(n))
        preds.append(ph)
        fitted.append(fy)
    if not preds:
        return None
    b = np.array(bics)
    w = np.exp(-0.5 * (b - b.min()))
    w /= w.sum()
    return float(w @ np.array(preds)), np.einsum("f,fn->n", w, np.array(fitted))


def ensemble5(
    x: FloatArray, y: FloatArray, horizon: float, rng: np.random.Generator, n_boot: int = 20
) -> Result:
    if y.size < 5:
        return last_value(x, y, horizon)
    k, kh = _norm(x, horizon)
    level = _level(y)
    base = _ens_fit(k, y, kh)
    if base is None:
        return level, level, level, 1.0
    mean, fitted = base
    resid = y - fitted
    samples = []
    for _ in range(n_boot):
        yb = fitted + rng.choice(resid, size=resid.size, replace=True)
        r = _ens_fit(k, yb, kh)
        if r is not None:
            samples.append(r[0])
    s = np.array(samples) if samples else np.array([mean])
    p10, p90 = float(np.quantile(s, 0.1)), float(np.quantile(s, 0.9))
    return mean, min(p10, mean), max(p90, mean), _plateau(s, level)
