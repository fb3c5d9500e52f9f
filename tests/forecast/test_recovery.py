"""Known parameters are recovered: each family, fitted to a clean curve of its own form, predicts
that curve's value far beyond the data; the ensemble forecast lands on the true final loss."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.forecast import families as fm
from advisor.forecast import forecast
from advisor.forecast.families import FAMILIES
from advisor.forecast.fit_engine import fit_all

from .conftest import power_curve

U = np.linspace(0.05, 1.0, 80)
W = np.ones_like(U)
# nonlinear parameters on grid nodes (exact recovery expected) ...
K, D = fm._KAPPA[4], fm._DELTA[3]
TRUE = {
    "optimus": lambda u: 1.5 + 0.4 / (u + fm._OPT_C[10]),
    "pow3": lambda u: 1.5 + 0.8 * u ** -fm._POW_A[12],
    "exp3": lambda u: 1.5 + 2.0 * np.exp(-fm._EXP_B[8] * u),
    "ilog2": lambda u: 1.5 + 0.5 / np.log1p(u / fm._ILOG_K[5]),
    "mmf": lambda u: 1.5 + 2.0 / (1.0 + (K * u) ** D),
    "janoschek": lambda u: 1.5 + 2.0 * np.exp(-K * u**D),
    "weibull": lambda u: 1.5 + 2.0 * np.exp(-((K * u) ** D)),
    "log_power": lambda u: 3.0 / (1.0 + (u / fm._LP_S[3]) ** D),
    "vap": lambda u: np.exp(0.5 - 0.05 / u - 0.2 * np.log(u)),
}
# ... and off the grid (the grid is a discretisation: close, not exact)
OFF_GRID = {
    "optimus": lambda u: 1.5 + 0.4 / (u + 0.1),
    "pow3": lambda u: 1.5 + 0.8 * u**-0.5,
    "exp3": lambda u: 1.5 + 2.0 * np.exp(-3.0 * u),
    "mmf": lambda u: 1.5 + 2.0 / (1.0 + (4.0 * u) ** 1.2),
}


@pytest.mark.parametrize("name", list(TRUE))
def test_each_family_recovers_its_own_curve(name: str) -> None:
    fam = next(f for f in FAMILIES if f.name == name)
    y = TRUE[name](U)
    fits = fit_all([fam], U, y, W, np.array([3.0]), irls=0)
    assert name in fits
    want = TRUE[name](np.array([3.0]))[0]
    assert fits[name].pred[0] == pytest.approx(want, rel=1e-6)
    assert fits[name].sse == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("name", list(OFF_GRID))
def test_off_grid_parameters_are_approximated(name: str) -> None:
    fam = next(f for f in FAMILIES if f.name == name)
    fits = fit_all([fam], U, OFF_GRID[name](U), W, np.array([3.0]), irls=0)
    assert fits[name].pred[0] == pytest.approx(OFF_GRID[name](np.array([3.0]))[0], rel=0.1)


@pytest.mark.parametrize("name", ["optimus", "pow3", "exp3"])
def test_a_one_parameter_family_refines_its_grid_point(name: str) -> None:
    """Between two grid points the parabola step lands near the true parameter: ten times closer
    than the grid's own tolerance above."""
    fam = next(f for f in FAMILIES if f.name == name)
    fits = fit_all([fam], U, OFF_GRID[name](U), W, np.array([3.0]), irls=0)
    assert fits[name].pred[0] == pytest.approx(OFF_GRID[name](np.array([3.0]))[0], rel=0.01)


@pytest.mark.parametrize("tau", [3000.0, 6000.0])
def test_an_exponential_decay_slow_against_the_steps_seen_lands_in_its_interval(tau: float) -> None:
    """A plain exponential whose time constant is a third to a half of the steps seen: its own
    family must win the skill weighting. With the grid's nearest rate it fitted the held-out tail
    ten times worse than the true one, and the forecast halved the loss left (0.56 for 1.0)."""
    rng = np.random.default_rng(0)
    s = np.arange(10, 10_001, 10.0)
    y = 1.0 + 3.0 * np.exp(-s / tau) + rng.normal(0.0, 0.005, s.size)
    truth = 1.0 + 3.0 * np.exp(-20_000 / tau)
    fc = forecast(s, y, total_steps=20_000, learning_rates=np.full(s.size, 1e-4))
    assert fc.final_loss.p10 <= truth <= fc.final_loss.p90
    assert abs(fc.final_loss.mean - truth) / truth < 0.08
    asymptote = forecast(s, y)
    assert asymptote.final_loss.p10 <= 1.0 <= asymptote.final_loss.p90


def test_robust_fit_ignores_loss_spikes() -> None:
    fam = next(f for f in FAMILIES if f.name == "pow3")
    y = TRUE["pow3"](U).copy()
    y[[10, 30, 50, 70]] += 3.0  # four spikes of 3x the total drop
    robust = fit_all([fam], U, y, W, np.array([3.0]), irls=2)["pow3"].pred[0]
    plain = fit_all([fam], U, y, W, np.array([3.0]), irls=0)["pow3"].pred[0]
    want = TRUE["pow3"](np.array([3.0]))[0]
    assert abs(robust - want) < 0.2 * abs(plain - want)
    assert robust == pytest.approx(want, rel=0.02)


def test_forecast_recovers_final_loss_of_a_constant_lr_power_law() -> None:
    s, y, final = power_curve(noise=0.003)
    fc = forecast(s, y, total_steps=10_000, learning_rates=np.full(s.size, 3e-4))
    assert fc.final_loss.mean == pytest.approx(final, rel=0.01)
    assert fc.final_loss.p10 <= final <= fc.final_loss.p90
    assert fc.total_steps == 10_000 and fc.n_points == s.size
    assert set(fc.model) <= {f.name for f in FAMILIES}
    assert sum(fc.model.values()) == pytest.approx(1.0)


def test_interval_narrows_as_the_run_progresses() -> None:
    widths = []
    for cut in (0.2, 0.5, 0.8):
        s, y, _ = power_curve(cut=cut, noise=0.01, seed=1)
        fc = forecast(s, y, total_steps=10_000)
        widths.append(fc.final_loss.p90 - fc.final_loss.p10)
    assert widths[2] < widths[0]


def test_unknown_total_steps_forecasts_the_asymptote() -> None:
    u = np.linspace(1, 200, 150)
    y = 1.0 + 2.0 * np.exp(-u / 30.0)
    fc = forecast(u, y)
    assert fc.total_steps is None and fc.eta_seconds is None
    assert fc.final_loss.mean == pytest.approx(1.0, abs=0.05)


def test_unknown_schedule_with_a_budget_expects_an_annealing_drop() -> None:
    # without learning rates, a fixed budget is assumed to end with an LR decay (the usual case for
    # fixed-budget runs): the forecast is below the constant-LR extrapolation, and says why
    s, y, _ = power_curve(noise=0.003)
    known = forecast(s, y, total_steps=10_000, learning_rates=np.full(s.size, 3e-4))
    unknown = forecast(s, y, total_steps=10_000)
    assert unknown.final_loss.mean < known.final_loss.mean
    assert any("assumed" in w for w in unknown.warnings)
    assert not any("assumed" in w for w in known.warnings)


def test_warmup_transient_does_not_bend_a_budgeted_forecast_without_learning_rates() -> None:
    # the first few percent of a fixed-budget run (warmup and the fast fall right after it) are a
    # different regime; without learning rates nothing models it, so it must not steer the fit
    s = np.linspace(10.0, 2_000.0, 200)
    clean = 2.0 + 3.0 * (1.0 + s / 100.0) ** -0.5
    transient = clean + 6.0 * np.exp(-s / 50.0)  # gone well before 5% of the budget
    fc_clean = forecast(s, clean, total_steps=10_000)
    fc_warm = forecast(s, transient, total_steps=10_000)
    assert fc_warm.final_loss.mean == pytest.approx(fc_clean.final_loss.mean, rel=2e-3)


@pytest.mark.parametrize("with_lr", [True, False])
def test_a_loss_that_falls_steeply_towards_zero_is_not_forecast_below_its_floor(with_lr: bool) -> None:
    """A fine-tune whose loss falls steeply towards a small floor: several families extrapolate
    below zero. Averaged in, they pulled the mean under zero, clipped to an interval of exactly
    [0, 0]; they are left out for a loss that was never negative, so the forecast stays above the
    floor, below the current level, with an interval of some width."""
    rng = np.random.default_rng(3)
    steps = np.arange(10, 401, 10.0)
    total = 2000
    floor = 0.02
    values = floor + 0.8 * np.exp(-steps / 150) + 0.005 * rng.standard_normal(steps.size)
    lrs = 5e-5 * (1 - steps / total) if with_lr else None
    fc = forecast(steps, values, total_steps=total, learning_rates=lrs)
    assert 0.0 < fc.final_loss.mean < fc.current_loss
    assert fc.final_loss.p90 > fc.final_loss.p10
