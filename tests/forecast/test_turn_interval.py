"""The interval of a series that has turned upward reaches as far as its rising branch does."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.forecast import forecast
from advisor.forecast.turn import rising_branch


def test_the_upper_end_of_a_rising_eval_loss_lets_the_rise_continue() -> None:
    """A user trial's LoRA eval loss past its minimum (0.876 at step 1000), cut at 1200 of 1500:
    the rise is sure enough to carry most of the weight, and the eval loss ended at 1.09. The
    upper end was a blend of the falling fit's end and the rising branch's, 0.968 beside a last
    eval of 0.942: below the rising branch's own median. It is now the mixture's 90% quantile."""
    steps = np.arange(100.0, 1201.0, 100.0)
    values = np.array(
        [1.2231, 1.0738, 0.9945, 0.9527, 0.9319, 0.9199, 0.8903, 0.8845, 0.8903, 0.8762, 0.9105, 0.942]
    )
    fc = forecast(steps, values, total_steps=1500)
    assert fc.current_loss is not None
    turn = rising_branch(steps, values, 1500.0, fc.current_loss)
    assert turn is not None and turn.weight > 0.5
    assert fc.final_loss.p90 >= turn.mean
    assert fc.final_loss.p90 > 1.0
    assert fc.final_loss.p10 <= fc.current_loss


def test_an_eval_series_flat_after_its_fall_told_no_end_is_not_forecast_to_rise() -> None:
    """An eval loss that fell to 0.59 by step 800 and stayed there within 0.01 for 22 evaluations,
    its run telling no total: a curve family with a slow log-step term (vap) rose past the level
    when carried 10,000 spans ahead and put the end at 0.70 (80%: 0.58 .. 0.83), an overfitting
    run's forecast, while any total up to twice the run's steps read 0.596. A rise the recent
    points do not show is read one doubling ahead, as the turn reads its own."""
    steps = np.arange(100.0, 3001.0, 100.0)
    fall = [1.1041, 0.8943, 0.7966, 0.7238, 0.6715, 0.6378, 0.6142, 0.5906]
    flat = [0.5983, 0.5885, 0.5889, 0.5805, 0.5961, 0.5969, 0.5842, 0.6067, 0.5927, 0.5916, 0.5841]
    flat_on = [0.5975, 0.5943, 0.6003, 0.595, 0.5961, 0.5932, 0.5886, 0.6006, 0.5959, 0.5828, 0.5982]
    values = np.array([*fall, *flat, *flat_on])
    lrs = np.full(steps.size, 1e-4)
    told = forecast(steps, values, total_steps=6000, learning_rates=lrs)
    untold = forecast(steps, values, learning_rates=lrs)
    assert abs(told.final_loss.mean - 0.596) < 0.005
    assert untold.final_loss.mean < 0.61, untold.final_loss
    assert untold.final_loss.p90 < 0.65, untold.final_loss
    assert untold.plateau_probability > 0.9


def test_an_eval_series_rising_for_sure_told_no_end_still_ends_above_where_it_stands() -> None:
    """The rise the recent points show is kept without a total: the reading one doubling ahead is
    for a rise they do not show."""
    steps = np.arange(100.0, 1201.0, 100.0)
    values = np.array(
        [1.2231, 1.0738, 0.9945, 0.9527, 0.9319, 0.9199, 0.8903, 0.8845, 0.8903, 0.8762, 0.9105, 0.942]
    )
    fc = forecast(steps, values)
    assert fc.current_loss is not None
    assert fc.final_loss.mean > fc.current_loss + 0.05
    assert fc.plateau_probability > 0.5


def test_a_rising_branch_mixed_into_a_series_never_negative_does_not_take_it_below_0() -> None:
    """An error rate, reported as 0 or 1, rising over its last evaluations: the falling families'
    interval was held at 0, but the rising branch mixed in after that reaches down to its trend
    less its spread, which for a series this coarse lies below 0; the end read 0.24, 80%:
    -0.06 .. 0.61, for a rate that cannot be negative. The final interval is held at 0 whatever
    was mixed into it, and the rise is still mixed in (its upper end is not drawn in)."""
    steps = np.arange(10.0, 141.0, 10.0)
    values = np.array([1, 0, 1, 0, 0, 0, 0, 1, 1, 0, 1, 1, 0, 1], dtype=float)
    for total in (280, None):
        fc = forecast(steps, values, total_steps=total)
        assert fc.current_loss is not None
        horizon = None if total is None else float(total)
        assert rising_branch(steps, values, horizon, fc.current_loss) is not None
        assert 0.0 <= fc.final_loss.p10 <= fc.final_loss.mean <= fc.final_loss.p90
        assert fc.final_loss.p90 > 0.5


def test_a_rise_is_carried_no_further_than_the_interval_reaches() -> None:
    """An eval loss rising at every evaluation to 1.08 at step 1200: its rise continued in log-step
    has no bound, and told 1e30 steps it read 37 (9.0 told 1e9). Past a hundred times the current
    step, where the interval's own extrapolation term is held (``calibration.MAX_REACH_U``), the
    rise is held too: farther horizons read what that one does, and nearer ones are as they were,
    rising further the further they are told."""
    steps = np.arange(100.0, 1201.0, 50.0)
    values = 0.78 + 0.3 * ((steps - 400.0) / 800.0) ** 2 + 0.003 * np.sin(steps)
    level = float(np.median(values[-5:]))
    near = [rising_branch(steps, values, h, level) for h in (2400.0, 12_000.0, 100.0 * 1201.0 - 1.0)]
    assert all(t is not None for t in near)
    means = [t.mean for t in near if t is not None]
    assert means[0] < means[1] < means[2]
    for far in (1e9, 1e30):
        t = rising_branch(steps, values, far, level)
        assert t is not None and t.mean == means[2]
    at_cap = forecast(steps, values, total_steps=120_000).final_loss
    for far in (10**9, 10**30):
        fc = forecast(steps, values, total_steps=far)
        assert fc.final_loss.mean == pytest.approx(at_cap.mean, rel=1e-3)
        assert fc.final_loss.p90 == pytest.approx(at_cap.p90, rel=1e-3)
        assert fc.final_loss.p90 < 5.0
    assert forecast(steps, values, total_steps=2400).final_loss.mean > 1.3


def test_the_lower_end_of_a_steady_rise_is_where_the_rise_stands_not_where_it_stood() -> None:
    """An outside trial's eval loss past its minimum at step 800 and rising about 0.045 an
    evaluation, noise-free, cut at 2,000 of 4,000. Its low end reached down to the median of the
    last five evaluations, 1.306, a value the series passed three evaluations back (its last was
    1.401): the rise may stop at any report, but where it stands now, give or take one report's
    scatter, not where it stood."""
    steps = np.arange(200.0, 2001.0, 200.0)
    values = np.array([1.5661, 1.3163, 1.2124, 1.1834, 1.1928, 1.222, 1.2613, 1.3058, 1.353, 1.4015])
    fc = forecast(steps, values, total_steps=4000)
    assert any("rising" in w for w in fc.warnings)
    assert fc.final_loss.p10 > values[-3], fc.final_loss
    assert fc.final_loss.p10 <= values[-1] <= fc.final_loss.mean
