"""Parametric learning-curve families, fitted by variable projection over a fixed grid (the solver:
``fit_engine``).

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

FloatArray = NDArray[np.float64]
BasisFn = Callable[[FloatArray], FloatArray]


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
    #: one-parameter families: ``shape(thetas, u)`` gives the design rows at any ``thetas`` and
    #: ``grid`` is the (geometric) grid ``design`` uses, so that the best grid point can be refined
    #: between its neighbours (see ``_refine``)
    shape: Callable[[FloatArray, FloatArray], FloatArray] | None = None
    grid: FloatArray | None = None


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


def _optimus_shape(c: FloatArray, u: FloatArray) -> FloatArray:
    # 1/(b0*k + b1) + b2 == b2 + A/(u + c)
    return 1.0 / (u[None, :] + c[:, None])


def _pow3_shape(a: FloatArray, u: FloatArray) -> FloatArray:
    return np.exp(-a[:, None] * np.log(u)[None, :])


def _exp3_shape(b: FloatArray, u: FloatArray) -> FloatArray:
    return np.exp(-b[:, None] * u[None, :])


def _ilog2_shape(k: FloatArray, u: FloatArray) -> FloatArray:
    return 1.0 / np.log1p(u[None, :] / k[:, None])


def _optimus(u: FloatArray) -> FloatArray:
    return _optimus_shape(_OPT_C, u)


def _pow3(u: FloatArray) -> FloatArray:
    return _pow3_shape(_POW_A, u)


def _exp3(u: FloatArray) -> FloatArray:
    return _exp3_shape(_EXP_B, u)


def _ilog2(u: FloatArray) -> FloatArray:
    return _ilog2_shape(_ILOG_K, u)


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
    Family("optimus", _optimus, shape=_optimus_shape, grid=_OPT_C),
    Family("pow3", _pow3, shape=_pow3_shape, grid=_POW_A),
    Family("exp3", _exp3, shape=_exp3_shape, grid=_EXP_B),
    Family("log_power", _log_power, kind="b"),
    Family("vap", _vap, kind="abc", log_space=True, prior=0.5, constrained=False),
    Family("janoschek", _janoschek, prior=0.5),
    Family("weibull", _weibull, prior=0.5),
    Family("mmf", _mmf),
    Family("ilog2", _ilog2, shape=_ilog2_shape, grid=_ILOG_K),
)
