"""A training loss that jumped up and stayed there is forecast from its jump on, while its
P(diverge) still reads the whole history (``advisor.forecast.jump``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from advisor.forecast import forecast
from advisor.forecast.jump import JUMP_WARNING, _block_medians, _rolling_medians, jump_start

from .conftest import power_curve


def _jumped(at: int = 1500, upto: int = 2400, noise: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    s = np.arange(10.0, upto + 1.0, 10.0)
    clean = np.where(s < at, 1.4 + 1.2 * np.exp(-s / 300), 7.5 + 0.3 * np.exp(-(s - at) / 400))
    return s, clean * (1 + noise * rng.standard_normal(s.size))


def test_a_loss_that_jumped_and_stayed_is_forecast_where_it_stays() -> None:
    """Fitted across the jump it read "final 7.59 (80%: 0 .. 278)" and "with a constant LR the end
    would be near 36.85"; from the jump on, an interval round where it stands."""
    s, y = _jumped()
    constant = np.full(s.size, 1e-4)
    fc = forecast(s, y, total_steps=6000, training_loss=True, learning_rates=constant)
    assert fc.divergence_probability >= 0.9  # the whole history still says it blew up
    assert any(w.startswith(f"{JUMP_WARNING} at step 1,500") for w in fc.warnings), fc.warnings
    # where it stays (7.53) is inside an interval narrower than the level it stands at
    assert fc.final_loss.p10 <= 7.53 <= fc.final_loss.p90
    assert fc.current_loss is not None and fc.final_loss.p90 - fc.final_loss.p10 < fc.current_loss
    assert not any("put the end above the current level" in w for w in fc.warnings)
    # without learning rates an anneal is assumed: the stretch since the jump falls further, but
    # within reach of where it stands, not across the decades the fits across the jump spread to
    s, y = _jumped(noise=0.03)
    blind = forecast(s, y, total_steps=6000, training_loss=True)
    assert blind.current_loss is not None
    assert 0.3 * blind.current_loss < blind.final_loss.p10 <= blind.final_loss.p90 <= 1.2 * blind.current_loss


def test_a_blow_up_still_under_way_and_a_healthy_run_are_not_read_as_a_jump() -> None:
    s = np.arange(1.0, 200.0)
    climbing = np.where(s < 150, 2.0 / (1 + s / 20), 0.5 * 1.1 ** (s - 150))
    assert jump_start(climbing) is None
    _, y, _ = power_curve(n=300, noise=0.02)
    assert jump_start(np.asarray(y, dtype=float)) is None
    # an eval loss past its minimum returns to where it started: overfitting, never fitted so
    s2, y2 = _jumped()
    fc = forecast(s2, y2, total_steps=6000)
    assert not any(w.startswith(JUMP_WARNING) for w in fc.warnings)


def test_too_few_reports_since_the_jump_are_no_curve_to_fit() -> None:
    s, y = _jumped(at=2350)  # five reports since the jump
    assert jump_start(y) is None or len(y) - jump_start(y)[0] >= 10  # type: ignore[index]
    fc = forecast(s, y, total_steps=6000, training_loss=True)
    assert not any(w.startswith(JUMP_WARNING) for w in fc.warnings)
    assert math.isfinite(fc.final_loss.mean)


@pytest.mark.parametrize("seed", range(5))
def test_block_and_rolling_medians_are_np_medians_of_the_same_slices(seed: int) -> None:
    """The jump reading's block and rolling medians are taken by partitions over whole arrays (one
    np.median per block was a fifth of a forecast's time): the same numbers as np.median of every
    slice, at every length, block size and window, partial blocks and short ends included."""
    rng = np.random.default_rng(seed)
    for _ in range(300):
        n = int(rng.integers(1, 120))
        y = rng.lognormal(size=n)
        size, stop = int(rng.integers(1, 20)), int(rng.integers(0, n + 1))
        want = [np.median(y[i : i + size]) for i in range(0, stop, size)]
        assert np.array_equal(_block_medians(y, stop, size), np.array(want))
        half = int(rng.integers(0, 5))
        want = [np.median(y[max(0, j - half) : j + half + 1]) for j in range(n)]
        assert np.array_equal(_rolling_medians(y, half), np.array(want))
