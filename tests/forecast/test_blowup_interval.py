"""A run whose loss blew up into NaN: its final value is where it would end had it recovered, and
the lower end of its interval is what its history before the blow-up says, not the 0 that the
fits across the finite climb into the NaN reached down to."""

from __future__ import annotations

import math

import numpy as np

from advisor.forecast import forecast
from advisor.forecast.path import forecast_path

TOTAL = 5000


def _nan_run(seed: int = 3) -> tuple[list[float], list[float], list[float]]:
    """A fine-tune every 10 steps with a cosine decay to step 5,000: its loss falls to about 1.7 by
    step 2,400, then climbs from 1.6 to about 15 in 15 reports, and is NaN from 2,560 to 2,800."""
    rng = np.random.default_rng(seed)
    steps, losses, lrs = [], [], []
    for s in range(10, 2801, 10):
        lr = 3e-4 * 0.5 * (1 + math.cos(math.pi * s / TOTAL))
        loss = (1.55 + 1.2 * (1 + s / 200) ** -0.8) * (1 + 0.04 * rng.standard_normal())
        if 2400 < s < 2560:
            loss = 1.6 * 1.17 ** ((s - 2400) / 10)
        elif s >= 2560:
            loss = math.nan
        steps.append(float(s))
        losses.append(loss)
        lrs.append(lr)
    return steps, losses, lrs


def test_the_lower_end_of_a_run_that_blew_up_is_what_its_history_before_says() -> None:
    steps, losses, lrs = _nan_run()
    fc = forecast(steps, losses, learning_rates=lrs, training_loss=True)
    assert fc.divergence_probability > 0.9
    # the history before the climb, forecast to the same end: its own lower end
    before = [i for i, s in enumerate(steps) if s <= 2400]
    clean = forecast(
        [steps[i] for i in before],
        [losses[i] for i in before],
        learning_rates=[lrs[i] for i in before],
        total_steps=TOTAL,
        training_loss=True,
    )
    lowest = min(losses[i] for i in before)
    assert fc.final_loss.p10 > 0.8 * lowest  # was 0: a loss this run never comes near
    assert fc.final_loss.p10 >= min(clean.final_loss.p10, fc.final_loss.mean) - 0.05
    assert fc.final_loss.p10 <= fc.final_loss.mean <= fc.final_loss.p90
    # the drawn band follows the interval: it never reaches below its lower end
    fc_path, path = forecast_path(steps, losses, learning_rates=lrs, training_loss=True)
    assert fc_path.final_loss == fc.final_loss
    assert path is not None and min(path.p10) >= fc.final_loss.p10 - 1e-9


def test_a_run_that_went_nan_without_a_climb_keeps_the_fits_own_interval() -> None:
    """A NaN out of a steady fall leaves no finite climb in the fits: nothing to bound."""
    steps, losses, lrs = _nan_run()
    steady = [1.6 if 2400 < s < 2560 else v for s, v in zip(steps, losses, strict=True)]
    fc = forecast(steps, steady, learning_rates=lrs, training_loss=True)
    finite = [i for i, v in enumerate(steady) if not math.isnan(v)]
    plain = forecast(
        [steps[i] for i in finite],
        [steady[i] for i in finite],
        learning_rates=[lrs[i] for i in finite],
        training_loss=True,
    )
    assert fc.final_loss == plain.final_loss


def test_the_mean_of_a_run_that_blew_up_is_not_below_what_its_history_before_says() -> None:
    """An outside trial's run at a constant learning rate: a loss falling from 2 to 1 by step 880,
    then climbing to 20 and NaN from step 1,100, no total told. The fits across the climb put the
    end at 0.27, below the lower end its history before the blow-up set, so the mean sat on p10
    ("0.2703 (80%: 0.2703 .. 8.556)"). Had it recovered, it ends where that history goes, at
    neither below."""
    steps = [float(s) for s in range(0, 1600, 20)]
    losses = [
        2.0 * (s / 100 + 1) ** -0.3
        if s < 900
        else (2.0 * 10**-0.3 * math.exp((s - 900) / 60) if s < 1100 else math.nan)
        for s in steps
    ]
    lrs = [1e-3] * len(steps)
    fc = forecast(steps, losses, learning_rates=lrs, training_loss=True)
    before = [i for i, s in enumerate(steps) if s < 900]
    clean = forecast(
        [steps[i] for i in before],
        [losses[i] for i in before],
        learning_rates=[lrs[i] for i in before],
        training_loss=True,
    )
    assert fc.divergence_probability > 0.9
    assert fc.final_loss.p10 < fc.final_loss.mean <= fc.final_loss.p90
    assert fc.final_loss.mean >= clean.final_loss.mean - 1e-9
