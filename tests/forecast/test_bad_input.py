"""Bad data never raises: it yields a forecast with a warning (and wide intervals when little is
left), and what was dropped is counted."""

from __future__ import annotations

import math

import numpy as np
import pytest

from advisor.forecast import forecast, forecast_curve
from advisor.model import Curve, Forecast

from .conftest import power_curve


def _valid(fc: Forecast) -> None:
    assert isinstance(fc, Forecast)
    assert 0.0 <= fc.plateau_probability <= 1.0
    assert 0.0 <= fc.divergence_probability <= 1.0
    iv = fc.final_loss
    if not math.isnan(iv.mean):
        assert iv.p10 <= iv.mean <= iv.p90


def test_nan_and_inf_are_dropped_and_counted() -> None:
    s, y, final = power_curve(noise=0.002)
    y = y.copy()
    y[[5, 50, 100]] = [np.nan, np.inf, -np.inf]
    fc = forecast(s, y, total_steps=10_000)
    _valid(fc)
    assert fc.n_dropped == 3 and fc.n_points == s.size - 3
    assert any("dropped 3" in w for w in fc.warnings)
    assert abs(fc.final_loss.mean - final) / final < 0.05


def test_a_non_finite_loss_the_run_reported_past_is_not_a_divergence() -> None:
    """Mixed precision logs an inf loss on a step whose gradients overflowed, skips it and goes on;
    a run whose latest three losses are non-finite, or that overflows on a third of its recent
    reports, is another matter. The latest one or two alone are not yet (the divergence rule's
    count: one NaN report flipped the run state to diverging and back where the rule waited)."""
    s, y, _ = power_curve(noise=0.002)
    n = s.size
    once = y.copy()
    once[n - 10] = np.inf
    assert forecast(s, once, total_steps=10_000).divergence_probability < 0.3
    for run, low in ((1, True), (2, True), (3, False)):
        now = y.copy()
        now[-run:] = np.nan
        p = forecast(s, now, total_steps=10_000).divergence_probability
        assert (p < 0.5) if low else (p >= 0.95), (run, p)
    often = y.copy()
    tail = max(3, n // 10)
    often[n - tail :: 3] = np.inf
    assert forecast(s, often, total_steps=10_000).divergence_probability >= 0.6


@pytest.mark.parametrize("overflow", [1e308, 65504.0])
def test_one_overflow_written_as_a_number_is_dropped_not_fitted(overflow: float) -> None:
    s, y, _ = power_curve(noise=0.002)
    clean = forecast(s, y, total_steps=10_000)
    spiked = y.copy()
    spiked[120] = overflow
    fc = forecast(s, spiked, total_steps=10_000)
    assert fc.n_dropped == 1 and any("overflows" in w for w in fc.warnings)
    assert fc.final_loss.mean == pytest.approx(clean.final_loss.mean, rel=0.02)


def test_a_negative_loss_is_kept_and_the_warning_does_not_say_it_was_dropped() -> None:
    # some objectives are negative (a log-likelihood of a continuous density): kept, and the
    # warning about the NaN beside it names only what was dropped
    s = np.arange(1.0, 41.0)
    y = -1.0 - 0.5 * np.log(s)
    y[3] = np.nan
    fc = forecast(s, y)
    assert fc.n_dropped == 1 and fc.n_points == 39
    warning = next(w for w in fc.warnings if "dropped 1" in w)
    assert "negative step, or a non-finite loss" in warning and "negative step or loss" not in warning
    assert fc.final_loss.mean < -2.0


def test_strings_are_coerced_or_dropped() -> None:
    steps = ["1", "2", "3", "four", 5, 6, 7, 8, 9, 10]
    values = ["2.0", "1.8", "1.7", "1.6", "oops", 1.5, 1.45, 1.42, None, 1.40]
    fc = forecast(steps, values, total_steps="20")
    _valid(fc)
    assert fc.n_points == 7 and fc.n_dropped == 3  # "four", "oops", None
    assert fc.total_steps == 20


@pytest.mark.parametrize("as_list", [False, True])
def test_complex_values_are_said_in_the_warnings_not_on_stderr(as_list: bool) -> None:
    """A complex loss printed numpy's ComplexWarning on stderr and lost its imaginary part unsaid.
    One with no imaginary part is a real number in a complex container: read as such, and said; one
    with an imaginary part is no loss: dropped and counted like any other unusable value."""
    import warnings as pywarnings

    s, y, _ = power_curve(n=100, noise=0.002)
    real = forecast(s, y, total_steps=10_000)
    z = y.astype(complex)
    z[[10, 40]] += 0.5j
    values = list(z) if as_list else z
    with pywarnings.catch_warnings():
        pywarnings.simplefilter("error")  # any warning on stderr fails the test
        fc = forecast(s, values, total_steps=10_000)
        clean = forecast(s, y.astype(complex), total_steps=10_000)
    _valid(fc)
    assert fc.n_dropped == 2 and fc.n_points == s.size - 2
    said = "values holds 100 complex number(s), 2 with a non-zero imaginary part"
    assert any(said in w for w in fc.warnings)
    assert clean.final_loss == real.final_loss and clean.n_dropped == 0
    assert any("complex number(s) with no imaginary part: read as real numbers" in w for w in clean.warnings)
    assert not any("complex" in w for w in real.warnings)


def test_duplicated_steps_are_merged_into_one_point() -> None:
    s = [1, 2, 3, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    y = [3.0, 2.5, 9.9, 2.2, 2.0, 1.9, 1.8, 1.75, 1.7, 1.66, 1.63, 1.6]
    fc = forecast(s, y)
    _valid(fc)
    assert fc.n_points == 11
    assert any("duplicated" in w for w in fc.warnings)


def test_consecutive_reports_of_a_step_are_averaged_and_a_resume_is_not() -> None:
    """Gradient accumulation logs each micro-batch under its optimizer step: the step's loss is the
    mean of its reports (the last alone read a 4-micro-batch run's loss 8.7% off). A step logged
    again after the step went back (a resume) is no repeat: the resume is handled as before."""
    from advisor.forecast._prep import prepare

    steps = [s for s in range(5, 105, 5) for _ in range(4)]
    values = [2.0 + (i % 4) * 0.2 for i in range(len(steps))]  # 2.0, 2.2, 2.4, 2.6 at each step
    prep = prepare(steps, values, times=[float(i) for i in range(len(steps))])
    assert prep.steps.tolist() == list(range(5, 105, 5))
    assert prep.values == pytest.approx([2.3] * 20)
    assert prep.times is not None and prep.times.tolist() == [float(i) for i in range(3, len(steps), 4)]
    assert any("merged 60 duplicated step(s)" in w for w in prep.warnings)
    fc = forecast(steps, values, total_steps=200)
    assert fc.current_loss == pytest.approx(2.3, rel=0.02)
    # a resume from step 50: steps 50.. logged again, each once; nothing is averaged across it
    first = [(s, 3.0 - s / 100) for s in range(10, 110, 10)]
    again = [(s, 2.9 - s / 100) for s in range(50, 160, 10)]
    s2, v2 = zip(*(first + again), strict=True)
    prep = prepare(s2, v2)
    assert not any("duplicated" in w for w in prep.warnings)
    assert prep.n_segments == 2
    at = dict(zip(prep.steps.tolist(), prep.values.tolist(), strict=True))
    assert at[60.0] == pytest.approx(2.3) and at[150.0] == pytest.approx(1.4)


def test_unsorted_steps_are_sorted() -> None:
    s, y, _ = power_curve(n=60, noise=0.0)
    rng = np.random.default_rng(3)
    order = rng.permutation(s.size)
    # a permutation is not a restart only if the first segment covers it: shuffle within segments
    # is indistinguishable from restarts, so the contract is: sort when the caller gave segments
    curve = Curve(steps=tuple(s[order]), values=tuple(y[order]))
    fc_sorted = forecast(s, y, total_steps=10_000)
    fc = forecast_curve(curve, total_steps=10_000)
    _valid(fc)
    assert any("sorted" in w for w in fc.warnings)
    assert fc.final_loss.mean == pytest.approx(fc_sorted.final_loss.mean, rel=1e-9)


def test_single_point_gives_a_wide_interval() -> None:
    fc = forecast([100], [2.5], total_steps=1000)
    _valid(fc)
    assert fc.final_loss.mean == pytest.approx(2.5)
    assert fc.final_loss.p90 - fc.final_loss.p10 > 1.0
    assert fc.warnings


def test_constant_loss_is_a_plateau() -> None:
    s = np.arange(1, 101) * 10.0
    fc = forecast(s, np.full(100, 1.25), total_steps=2000, learning_rates=np.full(100, 1e-4))
    _valid(fc)
    assert fc.final_loss.mean == pytest.approx(1.25, rel=1e-3)
    assert fc.plateau_probability > 0.9
    assert fc.divergence_probability < 0.1


@pytest.mark.parametrize("training_loss", [False, True])
@pytest.mark.parametrize("zeros", [np.zeros(100), np.zeros(100, dtype=bool), [0] * 100])
def test_a_constant_zero_loss_is_a_plateau(zeros: object, training_loss: bool) -> None:
    """At a level of 0 the 1% band is empty: a loss never negative can improve on 0 by nothing, so
    a constant zero (an error rate, a 0/1 series at 0) has no improvement left. It read P(plateau)
    0.5 (0.0 as a training loss), half the normal's mass lying below 0, where no end can."""
    s = np.arange(1, 101) * 10.0
    for total in (None, 2000):
        fc = forecast(s, zeros, total_steps=total, training_loss=training_loss)
        _valid(fc)
        assert fc.final_loss.mean == 0.0 and fc.plateau_probability == 1.0, (total, fc.plateau_probability)
    # a loss still falling toward 0 is not at 0: still learning
    assert forecast(s, 2.0 * (s / 10.0) ** -0.7, total_steps=2000).plateau_probability < 0.1


@pytest.mark.parametrize(
    "steps, values",
    [([], []), (None, None), ([np.nan], [np.nan]), ([1, 2], [np.nan, np.inf]), ("abc", "def"), (5, 1.0)],
)
def test_nothing_usable(steps: object, values: object) -> None:
    fc = forecast(steps, values, total_steps=100)
    assert isinstance(fc, Forecast)
    assert fc.warnings
    assert 0.0 <= fc.plateau_probability <= 1.0


def test_mismatched_lengths_are_truncated() -> None:
    fc = forecast([1, 2, 3, 4, 5, 6], [3.0, 2.0, 1.5])
    _valid(fc)
    assert fc.n_points == 3
    assert any("differ in length" in w for w in fc.warnings)


@pytest.mark.parametrize("total", ["soon", -5, 0, float("nan"), float("inf")])
def test_bad_total_steps_is_treated_as_unknown(total: object) -> None:
    s, y, _ = power_curve(n=50)
    fc = forecast(s, y, total_steps=total)
    _valid(fc)
    assert fc.total_steps is None
    assert any("total_steps" in w for w in fc.warnings)


@pytest.mark.parametrize("total, whole", [(5000.7, 5001), (5000.2, 5000), (5000.5, 5001), ("5000.7", 5001)])
def test_a_fractional_total_is_reported_as_the_nearest_whole_step(total: object, whole: int) -> None:
    """A total read off a rescaled counter is fractional: 5000.7 steps end at step 5001, not 5000
    (truncated, the run was told it was a step short of its end); the forecast is read at the
    total as given."""
    s, y, _ = power_curve(n=50)
    fc = forecast(s, y, total_steps=total)
    assert fc.total_steps == whole
    assert forecast([], [], total_steps=total).total_steps == whole


@pytest.mark.parametrize("noise", [0.0, 0.01])
def test_an_extreme_horizon_keeps_the_interval_within_what_the_families_say(noise: float) -> None:
    """The interval's extrapolation term grew linearly with the steps ahead, without bound: told
    1e30 steps, a loss near 2 read p90 1e24; a noiseless curve told 1e9, 0 .. 324 round a truth of
    2.0009. Past a hundred times the current step the reach is held (``calibration.MAX_REACH_U``),
    so a far horizon's interval is the families' own spread round a level-sized number, and an
    ordinary horizon's is as it was."""
    s = np.arange(1, 201) * 10.0
    y = 2.0 + 3.0 * (s / 100.0) ** -0.5 + np.random.default_rng(0).normal(0.0, noise, s.size)
    for total in (10**9, 10**30):
        fc = forecast(s, y, total_steps=total)
        _valid(fc)
        assert fc.final_loss.p10 > 0.5 and fc.final_loss.p90 < float(np.max(y))
        assert fc.final_loss.p90 - fc.final_loss.p10 < 1.0
    truth = 2.0 + 3.0 * (1e9 / 100.0) ** -0.5
    if not noise:
        far = forecast(s, y, total_steps=10**9).final_loss
        assert far.p10 <= truth <= far.p90
    from advisor.forecast import calibration as cal
    from advisor.forecast.interval import reach_of

    # within the measured range, as it was: linear in the steps ahead
    assert reach_of(10.0) == pytest.approx(9.0 * (1.0 - cal.HOLDOUT) / cal.HOLDOUT)
    assert reach_of(1e30) == reach_of(100.0)


def test_total_steps_before_the_last_step() -> None:
    s, y, _ = power_curve(n=50)
    fc = forecast(s, y, total_steps=10)
    _valid(fc)
    assert any("before the last step" in w for w in fc.warnings)


def test_a_run_at_its_last_step_ends_where_it_stands() -> None:
    """Nothing is left to forecast: the end is the smoothed level, with the uncertainty of that
    median only, and no improvement is left."""
    s, y, _ = power_curve(n=200, noise=0.01)
    fc = forecast(s, y, total_steps=float(s[-1]), training_loss=True)
    assert fc.final_loss.mean == fc.current_loss and fc.plateau_probability == 1.0
    assert fc.final_loss.p90 - fc.final_loss.p10 < 0.03
    assert fc.final_loss.p10 <= float(np.median(y[-10:])) <= fc.final_loss.p90


def test_an_eval_series_that_turned_upward_ends_at_its_last_evaluations_at_the_runs_end() -> None:
    """Its rising branch, made to look ahead, has nothing ahead at the last step: it put an eval
    loss that rose at every evaluation at 1.073, beside its last evaluation of 1.083."""
    s = np.arange(100.0, 1201.0, 50.0)
    y = 0.78 + 0.3 * ((s - 400.0) / 800.0) ** 2 + 0.003 * np.sin(s)
    fc = forecast(s, y, total_steps=1200.0)
    assert fc.plateau_probability == 1.0
    assert fc.final_loss.p10 <= float(y[-1]) <= fc.final_loss.p90
    assert abs(fc.final_loss.mean - float(y[-1])) < 0.01


def test_optional_series_of_the_wrong_length_are_ignored() -> None:
    s, y, _ = power_curve(n=50)
    fc = forecast(s, y, total_steps=10_000, times=[1, 2, 3], learning_rates=[0.1])
    _valid(fc)
    assert fc.eta_seconds is None
    assert any("times" in w for w in fc.warnings) and any("learning_rates" in w for w in fc.warnings)


def test_negative_steps_are_dropped() -> None:
    fc = forecast([-3, -1, 1, 2, 3, 4, 5, 6, 7, 8], [5, 4, 3, 2.5, 2.2, 2.0, 1.9, 1.85, 1.8, 1.78])
    _valid(fc)
    assert fc.n_dropped == 2
    assert not any("every step is negative" in w for w in fc.warnings)


def test_a_history_whose_every_step_is_negative_is_read_from_its_first_step() -> None:
    """Steps all below zero count from another origin, not 200 garbled reports: dropped, they left
    no forecast (NaN). Read relative to the first step, the curve is forecast as the same curve
    from step 0 is, and the steps reported (last, total) stay on the caller's axis."""
    s, y, _ = power_curve(n=200, noise=0.002)
    s = s - s[0]  # the curve from step 0, as the shifted history is read
    t = s * 0.5  # 2 steps/s
    shift = 5000.0 + float(s[-1])
    fc = forecast(s - shift, y, total_steps=4 * s[-1] - shift, times=t)
    plain = forecast(s, y, total_steps=4 * s[-1], times=t)
    _valid(fc)
    assert fc.n_dropped == 0 and fc.n_points == plain.n_points
    assert any(w.startswith("every step is negative") for w in fc.warnings)
    assert fc.final_loss == plain.final_loss and fc.plateau_probability == plain.plateau_probability
    assert fc.last_step == float(s[-1]) - shift and fc.total_steps == round(4 * s[-1] - shift)
    assert fc.eta_seconds == plain.eta_seconds
    # a run counting up to 0 ends at 0: a total on that axis need not be positive
    to_zero = forecast(s - shift, y, total_steps=0, times=t)
    assert to_zero.total_steps == 0 and to_zero.eta_seconds is not None
    assert to_zero.eta_seconds.mean == pytest.approx(
        (shift - float(s[-1])) / 2.0, rel=0.01
    )  # 5,000 steps at 2/s


def test_a_short_series_is_at_its_later_half_not_the_mean_of_all_its_points() -> None:
    """Two evaluations, 10.83 then 4.43: the run stands at 4.43 now, not at their mean (7.63, which
    read as "plateaued" above the last point); three: the median of the later two."""
    from advisor.forecast import forecast

    two = forecast([100, 267], [10.83, 4.43])
    assert two.current_loss == 4.43
    assert forecast([100, 200, 300], [10.0, 6.0, 5.0]).current_loss == 5.5
    assert forecast(list(range(1, 21)), [1.0] * 15 + [0.5] * 5).current_loss == 0.5  # five at 20 points


def test_two_points_hold_no_trend_and_an_uninformed_plateau_probability() -> None:
    # two evaluations of an accuracy (negated: lower is better) clearly improving: the forecast is
    # the level with a wide interval, and P(plateau) is the uninformed 0.5 of no points at all,
    # not a number that reads as computed (0.52 from the symmetric interval round the level)
    fc = forecast([200.0, 400.0], [-0.70, -0.7735], total_steps=2400)
    assert fc.plateau_probability == 0.5
    assert forecast([], [], total_steps=2400).plateau_probability == 0.5


def test_a_failure_inside_the_forecaster_is_a_forecast_without_a_value_and_a_logged_error(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A forecast never crashes its caller, but a bug in it only reached a job's status: every job
    went unjudged with nothing in the log."""
    import advisor.forecast.core as core

    def broken(*_: object, **__: object) -> None:
        raise TypeError("a family that returns None")

    monkeypatch.setattr(core, "_run", broken)
    s, y, _ = power_curve(n=50)
    with caplog.at_level("ERROR", logger="advisor.forecast.core"):
        fc = forecast(s, y, total_steps=1000)
    assert math.isnan(fc.final_loss.mean)
    assert fc.warnings == ("forecast failed: TypeError: a family that returns None",)
    assert any("forecast failed: TypeError" in r.getMessage() and r.exc_info for r in caplog.records)


@pytest.mark.parametrize(
    "values",
    [[1e300] * 10, [1e300] * 9 + [1.0], [1e300, 2e300, 3e300, 1.5e300, 1e300, 1.2e300]],
)
def test_losses_near_the_float_limit_give_a_forecast_not_a_failure(values: list[float]) -> None:
    """The interval's scale is a root of a sum of squares: squaring a loss near 1e300 overflowed
    (a float power raises), and the forecast failed instead of giving a wide interval."""
    steps = list(range(10, 10 * len(values) + 1, 10))
    fc = forecast(steps, values, total_steps=10_000)
    _valid(fc)
    assert not any(w.startswith("forecast failed") for w in fc.warnings)
    assert math.isfinite(fc.final_loss.mean) and math.isfinite(fc.final_loss.p90)
