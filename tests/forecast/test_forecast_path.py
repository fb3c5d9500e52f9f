"""``forecast_path``: the forecast along the steps to the end, for plots. It must be the same
forecast as ``forecast`` (the path is only an addition), end at its final interval, and start at
the current level."""

from __future__ import annotations

from typing import Any

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
    from advisor.forecast.eval_forecast import forecast_series
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


def test_a_collapsing_score_is_drawn_within_its_scale() -> None:
    """An accuracy falling steeply from 0.9: its path, like its final value, stays at or above 0
    (the bottom of a 0-1 scale), however far its trend would carry it."""
    from advisor.series import Direction

    s = [100.0 * i for i in range(1, 21)]
    acc = [0.9 - 0.045 * i for i in range(20)]
    fc, path = forecast_path(
        s, acc, total_steps=6000, points=20, direction=Direction.HIGHER, eval_series=True
    )
    assert path is not None and fc.final_loss.p10 >= 0.0
    assert all(0.0 <= lo <= m <= hi <= 1.0 for lo, m, hi in zip(path.p10, path.mean, path.p90, strict=True))


def _keras_val_loss() -> tuple[list[float], list[float]]:
    """An eval loss past its minimum (a Keras log's val_loss by epoch): it turns up at epoch 6."""
    vals = [1.1, 0.8639, 0.7207, 0.6339, 0.5812, 0.5493, 0.5699, 0.5981, 0.6310, 0.6667]
    vals += [0.7040, 0.7425, 0.7815, 0.8209, 0.8605]
    return [float(e) for e in range(1, 16)], vals


def _lightning_val_loss() -> tuple[list[float], list[float]]:
    """An eval loss every 50 steps that falls, then rises past its minimum at epoch 6."""
    steps = [50.0 * (ep + 1) - 1 for ep in range(20)]
    vals = [0.6 + 0.5 * np.exp(-ep / 2) + (0.03 * (ep - 6) if ep > 6 else 0) for ep in range(20)]
    return steps, [round(float(v), 4) for v in vals]


@pytest.mark.parametrize(("series", "total"), [(_keras_val_loss, 30), (_lightning_val_loss, 2000)])
def test_a_turned_eval_loss_is_drawn_from_its_level_to_its_final_interval(series: Any, total: int) -> None:
    """The forecast of an eval loss turned upward moves from where it stands now to its final
    value (the falling families' path scaled to that rise went to 0 on the way, or jumped up
    after the last point and ended its band outside the final interval); the band stays between
    the current level and the final interval all along; the forecast itself is unchanged."""
    s, y = series()
    plain = forecast(s, y, total_steps=total)
    fc, path = forecast_path(s, y, total_steps=total, points=60, eval_series=True)
    assert fc.final_loss == plain.final_loss and fc.current_loss == plain.current_loss
    assert path is not None and fc.current_loss is not None
    now, final = fc.current_loss, fc.final_loss
    assert final.mean > now  # the forecast says it rises
    assert (path.mean[-1], path.p10[-1], path.p90[-1]) == (final.mean, final.p10, final.p90)
    floor, top = min(now, final.p10), max(now, final.p90)
    for lo, m, hi in zip(path.p10, path.mean, path.p90, strict=True):
        assert floor - 1e-12 <= lo <= m <= hi <= top + 1e-12
        assert now - 1e-12 <= m <= final.mean + 1e-12
    # it starts where the series stands: its first step moves it by no more than its share of the way
    share = (path.steps[0] - s[-1]) / (path.steps[-1] - s[-1])
    assert abs(path.mean[0] - now) <= 1.5 * share * (final.mean - now) + 1e-12
    assert all(b >= a - 1e-12 for a, b in zip(path.mean, path.mean[1:], strict=False))  # no way back


def test_without_a_total_no_path_heads_away_from_the_asymptote() -> None:
    """Without a total, the falling families' path under an eval loss turned upward fell from
    0.93 to 0.83 beside an asymptote of 1.33 the text gives: a path that says the opposite of the
    forecast is not drawn; one that agrees stays between the current level and the asymptote."""
    s, y = _lightning_val_loss()
    fc, path = forecast_path(s, y, points=30, eval_series=True)
    assert fc.current_loss is not None and fc.final_loss.mean > fc.current_loss
    if path is not None:
        now, final = fc.current_loss, fc.final_loss
        assert all(now - 1e-12 <= m <= final.mean + 1e-12 for m in path.mean)
        assert all(min(now, final.p10) - 1e-12 <= lo for lo in path.p10)
        assert all(hi <= max(now, final.p90) + 1e-12 for hi in path.p90)
    s, y = _curve()
    fc, path = forecast_path(s, y, points=30)  # a falling loss, falling to its asymptote
    assert path is not None and fc.current_loss is not None
    assert all(fc.final_loss.mean - 1e-12 <= m <= fc.current_loss + 1e-12 for m in path.mean)
