"""A run at its end: its last step, or no report left before it. Nothing is left to forecast,
and where it ended is read from enough of its last reports to stand above their noise."""

from __future__ import annotations

import numpy as np

from advisor.forecast import forecast
from advisor.forecast.core import no_report_left
from advisor.forecast.state import at_last_step


def _noisy_flat_end(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A fine-tune's per-batch loss, every 10 steps to 150,010, annealed flat at 0.072 over its
    last half with reports scattering by a fifth, its last five reports high by chance."""
    rng = np.random.default_rng(seed)
    steps = np.arange(10, 150_011, 10.0)
    level = 0.072 + 0.5 * np.exp(-steps / 8000)
    values = level * (1 + 0.2 * rng.standard_normal(steps.size))
    values[-5:] = [0.097, 0.091, 0.169, 0.102, 0.080]
    return steps, values


def test_no_report_left_before_the_planned_end_is_the_end() -> None:
    steps, values = _noisy_flat_end()
    fc = forecast(steps, values, total_steps=150_018, training_loss=True)
    assert fc.at_end and at_last_step(fc)
    assert fc.plateau_probability == 1.0
    # where it ended: the last twentieth of its reports, not the median of its last five (0.097)
    assert abs(fc.final_loss.mean - 0.072) < 0.004 and fc.current_loss == fc.final_loss.mean
    assert fc.final_loss.p10 <= 0.072 <= fc.final_loss.p90


def test_a_run_a_report_or_more_from_its_end_is_still_forecast() -> None:
    steps, values = _noisy_flat_end()
    fc = forecast(steps, values, total_steps=150_030, training_loss=True)
    assert not fc.at_end and not at_last_step(fc)


def test_a_history_starting_late_is_not_taken_for_a_sparse_one() -> None:
    """A run resumed at step 100,000 reporting every 50: its spacing is 50, not 100,000 / n."""
    steps = np.arange(100_000, 101_001, 50.0)
    assert not no_report_left(steps, 105_000.0)
    assert no_report_left(steps, 101_020.0) and no_report_left(steps, 101_000.0)
    assert not no_report_left(steps[:2], 100_060.0)  # two points: no spacing to read


def test_an_eval_series_ends_with_its_runs_training() -> None:
    """Evaluations every 100 steps, the last at 2,600 of 2,616: alone, the series is not at its
    end (the run trains on, and its model may improve unobserved); once the run's training loss is
    at its end, so is the eval series: its end is its last evaluations' trend level, P(plateau) 1
    (it had read "final 0.833" below a last eval of 0.866)."""
    from advisor.forecast.state import learning_state
    from advisor.series import Direction

    steps = np.arange(100, 2601, 100.0)
    values = 0.86 + 0.4 * np.exp(-steps / 500)
    assert not forecast(steps, values, total_steps=2616).at_end
    train_steps = np.arange(10, 2611, 10.0)
    train = forecast(train_steps, 0.5 + np.exp(-train_steps / 400), total_steps=2616, training_loss=True)
    assert train.at_end

    class Evals:
        def __init__(self) -> None:
            self.steps, self.values, self.direction = list(steps), list(values), Direction.LOWER

    state = learning_state(train, {"eval_loss": Evals()}, total_steps=2616)
    fc = state.series["eval_loss"]
    assert fc.at_end and fc.plateau_probability == 1.0
    assert abs(fc.final_loss.mean - values[-1]) < 0.005


def test_an_end_level_stays_within_the_values_it_was_read_from() -> None:
    """A precision logged as 0, 0.5 or 1: its trend carried to the last step passed 1 (1.083)."""
    from advisor.forecast.robust import trend_level

    steps = np.arange(100, 1001, 100.0)
    values = np.array([0.0, 0.5, 0.0, 0.5, 0.5, 0.0, 0.5, 1.0, 1.0, 1.0])
    level = trend_level(steps, values)
    assert 0.0 <= level <= 1.0


def test_a_finished_eval_series_is_as_sure_of_its_end_as_its_scatter_about_the_trend() -> None:
    """Eight evaluations of an eval loss still falling at the run's end: the interval of where it
    ended is what one evaluation there reads, from the scatter of the last points about the line
    they are carried along (here mostly the curve's bend, which five points cannot tell from
    noise), not from the steps between evaluations (first differences, mostly the trend, read
    "1.241 (1.194 .. 1.288)", 7.6% wide)."""
    steps = np.arange(250.0, 2001.0, 250.0)
    values = np.array([1.9476, 1.6587, 1.4867, 1.3791, 1.3167, 1.2851, 1.2516, 1.241])
    fc = forecast(steps, values, total_steps=2000)
    assert fc.at_end and fc.plateau_probability == 1.0
    width = (fc.final_loss.p90 - fc.final_loss.p10) / fc.final_loss.mean
    assert width < 0.05, fc.final_loss
    assert fc.final_loss.p10 <= 1.241 <= fc.final_loss.p90


def test_a_score_at_its_runs_end_is_at_its_end_as_a_loss_of_the_same_steps_is() -> None:
    """An accuracy is forecast negated and turned back (``turned_back``): the fields it rebuilt by
    hand left ``at_end`` out, so a Lightning log's ``eval_acc`` read ``at_end: false`` beside its
    ``eval_loss`` of the same steps at ``true``. Every other field is the forecast's too."""
    from advisor.forecast.eval_forecast import forecast_series
    from advisor.series import Direction

    at = np.arange(390.0, 9751.0, 390.0)
    late = np.maximum(0.0, at / 1000 - 3.5)
    steps = at.tolist()
    loss = (0.55 + 1.8 * np.exp(-at / 900) + 0.012 * late**2).tolist()
    acc = (0.86 - 0.5 * np.exp(-at / 900) - 0.0025 * late**1.5).tolist()
    by_loss = forecast_series(steps, loss, Direction.LOWER, total_steps=9750)
    by_acc = forecast_series(steps, acc, Direction.HIGHER, total_steps=9750)
    assert by_loss.at_end and by_acc.at_end
    negated = forecast_series(steps, [-v for v in acc], Direction.LOWER, total_steps=9750)
    for field in ("plateau_probability", "at_end", "last_step", "total_steps", "n_points", "model"):
        assert getattr(by_acc, field) == getattr(negated, field), field


def test_a_finished_series_never_negative_ends_at_or_above_0() -> None:
    """An error rate reported as 0 or 1, at 0 over its last evaluations when its run ended: its end
    is its trend's level give or take one report's scatter, and that scatter is as large as the
    reports, so the interval read -0.81 .. 0.81 round an end of 0, for a rate that cannot be
    negative. The final interval is held at 0; a metric that has been below 0 is not (the same
    reports less 1 end at -1, their interval reaching below it as before)."""
    steps = np.arange(10.0, 181.0, 10.0)
    values = np.array([1, 1, 1, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0], dtype=float)
    fc = forecast(steps, values, total_steps=180)
    assert fc.at_end
    assert fc.final_loss.mean == 0.0 and fc.final_loss.p10 == 0.0 and fc.final_loss.p90 > 0.5
    shifted = forecast(steps, values - 1.0, total_steps=180)
    assert shifted.at_end and shifted.final_loss.mean == -1.0
    assert shifted.final_loss.p10 < -1.5
