"""``forecast_path``: the forecast along the steps to the end, for plots. It must be the same
forecast as ``forecast`` (the path is only an addition), end at its final interval, and start at
the current level."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.forecast import forecast, forecast_path


def _curve(n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    s = np.arange(1, n + 1) * 10.0
    rng = np.random.default_rng(1)
    return s, 2.0 + 3.0 * (s / 100.0) ** -0.5 + rng.normal(0, 0.01, n)


@pytest.mark.parametrize("with_lr", [True, False])
@pytest.mark.parametrize("total", [6000, None])
def test_the_path_changes_nothing_and_ends_at_the_forecast(with_lr: bool, total: int | None) -> None:
    s, y = _curve()
    lr = np.full(s.size, 3e-4) if with_lr else None
    plain = forecast(s, y, total_steps=total, learning_rates=lr)
    fc, path = forecast_path(s, y, total_steps=total, learning_rates=lr, points=30)
    assert fc == plain
    assert path is not None and len(path.steps) == 30
    assert path.steps[0] > s[-1]
    assert all(lo <= m <= hi for lo, m, hi in zip(path.p10, path.mean, path.p90, strict=True))
    if total is not None:
        assert path.steps[-1] == total
        assert (path.mean[-1], path.p10[-1], path.p90[-1]) == (
            fc.final_loss.mean,
            fc.final_loss.p10,
            fc.final_loss.p90,
        )
    # a falling curve is forecast to fall along the way, not in one jump at the end
    assert fc.current_loss is not None
    assert path.mean[0] <= fc.current_loss + 0.05 and path.mean[len(path.mean) // 2] >= path.mean[-1] - 1e-9


def test_no_path_without_a_forecast() -> None:
    fc, path = forecast_path([1.0, 2.0], [float("nan"), float("nan")], total_steps=10, points=5)
    assert path is None and fc.n_points == 0


def test_a_higher_is_better_series_is_forecast_upwards_as_the_state_forecasts_it() -> None:
    """An accuracy: the same forecast as ``forecast_series`` gives it (negated, turned back), its
    path rising from the current level to the final value and never past the scale's top; a value
    the forecaster names in a warning is the accuracy's, not its negation."""
    from advisor.forecast.state import forecast_series
    from advisor.series import Direction

    s = np.arange(1, 21) * 100.0
    acc = 0.9 - 0.4 * np.exp(-s / 600.0)
    fc, path = forecast_path(
        s, acc, total_steps=5000, points=20, direction=Direction.HIGHER, eval_series=True
    )
    assert fc == forecast_series(list(s), list(acc), Direction.HIGHER, total_steps=5000)
    assert fc.current_loss is not None and acc[-1] - 0.02 < fc.current_loss <= fc.final_loss.mean <= 1.0
    assert path is not None and path.mean[-1] == fc.final_loss.mean and path.p90[-1] == fc.final_loss.p90
    assert all(lo <= m <= hi <= 1.0 for lo, m, hi in zip(path.p10, path.mean, path.p90, strict=True))
    near = [w for w in fc.warnings if "the end would be near" in w]
    assert near and all(float(w.split("near ")[1].split()[0]) > 0 for w in near), fc.warnings
