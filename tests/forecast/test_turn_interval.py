"""The interval of a series that has turned upward reaches as far as its rising branch does."""

from __future__ import annotations

import numpy as np

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
