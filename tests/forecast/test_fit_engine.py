"""The fit engine's shortcuts give the answers of the plain computation they replace: the holdout
fit batched into the full fit's products, the no-offset family solved inside the stacked block, the
schedule-aware law kept when its annealing term cannot be checked yet, and a falling family never
forecasting an end above where the run is now."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.forecast import forecast
from advisor.forecast.core import forecast_with_parts
from advisor.forecast.families import FAMILIES
from advisor.forecast.fit_engine import fit_all, fit_all_robust

U = np.linspace(0.05, 1.0, 60)
RNG = np.random.default_rng(3)
Y = 1.5 + 0.8 * U**-0.4 + RNG.normal(0.0, 0.01, U.size)
W = np.exp(2.0 * U)


def test_batched_holdout_equals_a_separate_fit_of_the_training_part() -> None:
    train = U <= 0.6
    batched = fit_all_robust(list(FAMILIES), U, Y, W, np.array([2.0, 1.0]), irls=0, train=train)
    alone = fit_all(list(FAMILIES), U[train], Y[train], W[train], U[~train], irls=0)
    assert set(batched.tail) == set(alone)
    for name, fit in alone.items():
        np.testing.assert_allclose(batched.tail[name], fit.pred, rtol=1e-8, err_msg=name)


def test_holdout_column_does_not_change_the_full_fit() -> None:
    train = U <= 0.6
    with_holdout = fit_all_robust(list(FAMILIES), U, Y, W, np.array([2.0, 1.0]), irls=1, train=train)
    without = fit_all_robust(list(FAMILIES), U, Y, W, np.array([2.0, 1.0]), irls=1)
    assert set(with_holdout.fits) == set(without.fits)
    for name, fit in without.fits.items():
        np.testing.assert_allclose(with_holdout.fits[name].pred, fit.pred, rtol=1e-10, err_msg=name)
    np.testing.assert_allclose(with_holdout.weights, without.weights)


def test_no_offset_family_in_the_stacked_block_matches_its_own_solve() -> None:
    log_power = next(f for f in FAMILIES if f.name == "log_power")
    y = 3.0 / (1.0 + (U / 0.2) ** 0.9) + RNG.normal(0.0, 0.005, U.size)
    together = fit_all(list(FAMILIES), U, y, W, np.array([3.0]), irls=0)["log_power"]
    alone = fit_all([log_power], U, y, W, np.array([3.0]), irls=0)["log_power"]
    assert together.pred[0] == pytest.approx(alone.pred[0], rel=1e-10)
    assert together.sse == pytest.approx(alone.sse, rel=1e-8)


def _wsd_run(total: float = 10_000.0, decay_from: float = 0.8):
    """A warmup-stable-decay run: constant LR, then linear decay to zero over the last 20%; the
    loss follows the schedule-aware law (a power law in the LR area minus an annealing bonus)."""
    s = np.arange(0.0, total + 1.0, 50.0)
    lr = np.where(s < 500, s / 500, 1.0)
    lr = np.where(s > decay_from * total, (total - s) / ((1 - decay_from) * total), lr)
    s1 = np.cumsum(lr * 50.0)
    drop = np.r_[0.0, np.maximum(lr[:-1] - lr[1:], 0.0)]
    m = np.zeros_like(s)
    for i in range(1, s.size):
        m[i] = 0.99 * m[i - 1] + drop[i]
    y = 2.0 + 3.0 * (s1 + 100.0) ** -0.4 - 4e-5 * np.cumsum(m * 50.0)
    return s, y, lr * 3e-4


def test_schedule_aware_law_is_kept_while_the_decay_is_too_recent_to_score() -> None:
    # the decay began after the part of the history the holdout fit sees: the law's annealing
    # term is constant there, so it cannot be scored; it must still take part (with its prior)
    s, y, lr = _wsd_run()
    cut = s <= 0.85 * s[-1]
    fc = forecast(s[cut], y[cut], total_steps=s[-1], learning_rates=lr[cut])
    assert fc.model.get("lr_law", 0.0) > 0.2


def test_a_falling_run_is_never_forecast_to_end_above_its_current_level() -> None:
    s, y, lr = _wsd_run()
    for frac in (0.85, 0.9, 0.95):
        cut = s <= frac * s[-1]
        for kw in ({"learning_rates": lr[cut]}, {}):
            fc, parts = forecast_with_parts(s[cut], y[cut], total_steps=s[-1], **kw)
            assert fc.current_loss is not None
            assert fc.final_loss.mean <= fc.current_loss + 1e-12, (frac, kw.keys())
            # every family's own end, as averaged, is at or below the level too
            assert max(parts["preds"].values()) <= fc.current_loss + 1e-12
