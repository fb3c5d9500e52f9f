"""Property tests: whatever the input, the forecast comes back, ordered and in range."""

from __future__ import annotations

import math

import numpy as np
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
