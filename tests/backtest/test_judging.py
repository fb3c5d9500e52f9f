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


def test_a_stop_past_an_eval_minimum_is_judged_against_the_minimum_the_run_had_attained() -> None:
    """An eval loss that falls to 0.5 at step 26, rises to 0.9, and comes back down to 0.74: a stop
    on the way up kept the 0.5 checkpoint, and nothing later beat it: no improvement left (against
    the value at the stop, the later points looked like improvement); the run stopped learning at
    its minimum. A second descent below the first minimum is improvement left."""
    from advisor.backtest.verdict import Judged
    from advisor.judging import attained

    steps = np.arange(100, dtype=float) * 100
    u = np.concatenate([np.linspace(1.0, 0.5, 27), np.linspace(0.5, 0.9, 40)[1:], np.linspace(0.9, 0.74, 34)])
    smooth = smoothed(u)
    judged = Judged("eval", steps, smooth, float(steps[learning_end_index(attained(smooth))]))
    left, here, best = judged.left_after(4000)
    assert left == 0.0 and here is not None and here < 0.52 and best is not None and best > 0.52
    assert 2200 <= judged.learning_end_step <= 2800
    deeper = np.concatenate([u[:67], np.linspace(0.9, 0.4, 34)])
    again = Judged("eval", steps, smoothed(deeper), 0.0)
    assert again.left_after(4000)[0] > 0.1
