"""Property tests: whatever the input, the forecast comes back, ordered and in range."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.forecast import forecast

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
anyfloat = st.one_of(finite, st.just(float("nan")), st.just(float("inf")), st.just(-float("inf")))


@st.composite
def histories(
    draw: st.DrawFn,
) -> tuple[list[float], list[float], int | None, list[float] | None, list[float] | None]:
    n = draw(st.integers(min_value=0, max_value=60))
    steps = draw(st.lists(st.one_of(st.integers(-5, 10_000).map(float), anyfloat), min_size=n, max_size=n))
    values = draw(st.lists(anyfloat, min_size=n, max_size=n))
    total = draw(st.one_of(st.none(), st.integers(-10, 50_000)))
    times = draw(st.one_of(st.none(), st.lists(anyfloat, min_size=n, max_size=n)))
    lrs = draw(st.one_of(st.none(), st.lists(anyfloat, min_size=n, max_size=n)))
    return steps, values, total, times, lrs


@st.composite
def curves(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int]:
    n = draw(st.integers(min_value=1, max_value=200))
    a = draw(st.floats(0.01, 100.0))
    b = draw(st.floats(0.0, 100.0))
    alpha = draw(st.floats(0.05, 3.0))
    noise = draw(st.floats(0.0, 0.5))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    s = np.cumsum(rng.integers(1, 50, n)).astype(float)
    y = a + b * (1 + s / 100.0) ** -alpha + rng.normal(0.0, noise * a, n)
    total = int(s[-1] * draw(st.floats(1.0, 20.0)))
    return s, y, total


def _check(fc) -> None:
    assert 0.0 <= fc.plateau_probability <= 1.0
    assert 0.0 <= fc.divergence_probability <= 1.0
    iv = fc.final_loss
    if fc.n_points > 0:
        assert all(math.isfinite(v) for v in (iv.mean, iv.p10, iv.p90))
        assert iv.p10 <= iv.mean <= iv.p90
    if fc.eta_seconds is not None:
        assert 0.0 <= fc.eta_seconds.p10 <= fc.eta_seconds.mean <= fc.eta_seconds.p90


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_garbage_never_raises(h) -> None:
    steps, values, total, times, lrs = h
    fc = forecast(steps, values, total_steps=total, times=times, learning_rates=lrs)
    _check(fc)
    assert not any(w.startswith("forecast failed") for w in fc.warnings)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(curves())
def test_plausible_curves_give_ordered_intervals(c) -> None:
    s, y, total = c
    fc = forecast(s, y, total_steps=total, times=s * 0.1)
    _check(fc)
    assert fc.n_points == s.size


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.floats(0.01, 10.0), min_size=3, max_size=7),
    st.floats(1.0, 20.0),
)
def test_a_short_history_interval_is_at_least_its_families_disagreement(
    values: list[float], reach: float
) -> None:
    """Below SMALL_N points the interval has no held-out tail to learn from; it must still be at
    least as wide as the families' own disagreement and predicted drop say (Q_SMALL, or
    Q_SMALL_SCHEDULE with learning rates)."""
    from advisor.forecast import calibration as cal
    from advisor.forecast import forecast_with_parts

    steps = [100.0 * (i + 1) for i in range(len(values))]
    _, parts = forecast_with_parts(steps, values, total_steps=int(steps[-1] * reach))
    if not parts["weights"]:  # no family fitted: the current level with its own wide rule
        return
    scale = math.hypot(cal.K_SPREAD * parts["spread"], cal.K_DROP * parts["drop"])
    q = cal.Q_SMALL if parts["lr_shape"] is None else cal.Q_SMALL_SCHEDULE
    assert cal.Z80 * parts["sd"] >= q * scale * (1 - 1e-9)


def test_a_few_steeply_falling_evals_get_an_interval_that_reaches_back_to_a_flattening() -> None:
    """Four evaluations of a fine-tune (learning rates known) falling fast: the families extrapolate
    anything from a small further drop to a large one; the 80% interval must span that, not the
    2-3% of the level of a long history."""
    steps = [250.0, 500.0, 750.0, 1000.0]
    values = [1.2, 0.9, 0.75, 0.68]
    lrs = [2e-5 * (1 - s / 4000) for s in steps]
    fc = forecast(steps, values, total_steps=4000, learning_rates=lrs)
    width = (fc.final_loss.p90 - fc.final_loss.p10) / fc.current_loss
    assert width > 0.15
    assert fc.final_loss.p90 >= 0.6  # a run that flattens soon after is inside it


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.floats(0.05, 5.0), min_size=3, max_size=7))
def test_the_asymptote_of_a_handful_of_points_reaches_up_to_where_the_run_stands(values: list[float]) -> None:
    """Without a total, a history of 3-7 points says nothing about how much of its fall is left:
    its 80% interval reaches up to its current level (3 points falling by 0.3 each had read "final
    0.219 (80%: 0 .. 0.82)" beside a current 2.55)."""
    steps = [100.0 * (i + 1) for i in range(len(values))]
    fc = forecast(steps, values)
    assert fc.final_loss.p90 >= fc.current_loss * (1 - 1e-6)


def test_the_drop_is_weighted_by_how_well_the_families_agree_on_it() -> None:
    from advisor.forecast.interval import drop_shrink

    assert drop_shrink(0.05, 0.0) == 1.0
    assert drop_shrink(0.05, 0.05) == 0.5
    assert drop_shrink(-0.02, 0.0) == 1.0  # a predicted rise is weighted alike
    assert drop_shrink(0.0, 0.0) == 1.0
    assert 0.0 < drop_shrink(0.01, 0.1) < 0.02


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.floats(0.05, 5.0), min_size=3, max_size=7), st.floats(1.3, 8.0), st.booleans())
def test_a_short_schedule_history_forecasts_no_more_drop_than_its_families_do(
    values: list[float], reach: float, with_lr: bool
) -> None:
    """Weighting only ever pulls the forecast from the families' mean towards the current level,
    and only where no held-out tail checks the drop (short histories with learning rates, past the
    run's first 15%); elsewhere the families' mean stands."""
    from advisor.forecast import calibration as cal
    from advisor.forecast import forecast_with_parts

    steps = [100.0 * (i + 1) for i in range(len(values))]
    total = steps[-1] * reach
    lrs = [1e-4 * (1 - s / total) for s in steps] if with_lr else None
    _, parts = forecast_with_parts(steps, values, total_steps=total, learning_rates=lrs)
    if not parts["weights"]:
        return
    shrink = parts["drop_shrink"]
    weighted = parts["lr_shape"] is not None and parts["remaining"] < cal.SHRINK_BELOW_REMAINING
    assert 0.0 <= shrink <= 1.0
    if not weighted:
        assert shrink == 1.0
    # |level - mean| is the families' drop times the weight
    assert abs(parts["level"] - parts["mean"]) == pytest.approx(shrink * parts["drop"], rel=1e-9, abs=1e-12)
