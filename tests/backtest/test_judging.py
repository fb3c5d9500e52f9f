"""The verdict on a real run reads its own later record through one smoothing: one noisy point,
the last included, neither makes nor unmakes it."""

from __future__ import annotations

import numpy as np

from advisor.judging import learning_end_index, running_median, smoothed


def _flat_from_half(last: float) -> np.ndarray:
    """Falls for 1,000 points, then flat at 1.0 (noise 0.2%) for 1,000; the last point is ``last``."""
    rng = np.random.default_rng(3)
    y = np.concatenate([1.0 + np.linspace(1.0, 0.0, 1000) ** 2, 1.0 + rng.normal(0.0, 0.002, 1000)])
    y[-1] = last
    return y


def test_the_last_point_alone_does_not_move_where_learning_ended() -> None:
    ends = {last: learning_end_index(smoothed(_flat_from_half(last))) for last in (1.004, 0.985, 1.2)}
    assert len(set(ends.values())) == 1, ends
    assert 900 <= ends[1.004] <= 1100  # where the curve went flat, not where the log ends


def test_the_window_keeps_its_size_near_the_ends() -> None:
    y = np.array([5.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 9.0])
    out = running_median(y, 5)
    assert out[0] == 1.0 and out[-1] == 1.0  # a lone end point is outvoted, not copied
    np.testing.assert_array_equal(out[2:-2], 1.0)


def test_a_blown_up_value_counts_as_the_worst_and_short_series_pass_through() -> None:
    y = np.array([3.0, 2.0, np.nan, 1.5, 1.4, 1.3, 1.2])
    assert np.isinf(running_median(y, 1)[2])
    np.testing.assert_array_equal(running_median(np.array([2.0, 1.0]), 5), [2.0, 1.0])
    assert running_median(np.array([3.0, 1.0, 2.0]), 5).tolist() == [2.0, 2.0, 2.0]
