"""The run's learning state: U-shaped eval curves, plateaus, divergence, hung runs, few evals."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from advisor.core import AdvisorCore
from advisor.forecast import forecast
from advisor.forecast.eval_forecast import forecast_series, lr_at
from advisor.forecast.state import learning_state
from advisor.model import LEARNING_LABELS, JobView, LearningState, ProgressSample
from advisor.series import Direction

TOTAL = 3000
MINIMUM = 1000


@dataclass
class Series:
    steps: list[float]
    values: list[float]
    direction: Direction = Direction.LOWER
    extra: dict[str, float] = field(default_factory=dict)


def run(seed: int, *, u_shape: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ts = np.arange(10, TOTAL + 1, 10.0)
    ty = 2 * np.exp(-ts / 600) + 0.3 + rng.normal(0, 0.02, ts.size)
    es = np.arange(100, TOTAL + 1, 100.0)
    rise = 0.3 * ((es - MINIMUM) / MINIMUM) ** 2 * np.where(es < MINIMUM, 1.0, 0.5 if u_shape else 0.0)
    ey = 0.5 + rise + rng.normal(0, 0.004, es.size)
    return ts, ty, es, ey


def states(seed: int, **kw: bool) -> list[tuple[float, str]]:
    ts, ty, es, ey = run(seed, **kw)
    out = []
    for k in range(3, es.size):
        step = es[k - 1]
        m = ts <= step
        fc = forecast(ts[m], ty[m], total_steps=TOTAL)
        st = learning_state(fc, {"eval_loss": Series(list(es[:k]), list(ey[:k]))}, total_steps=TOTAL)
        out.append((float(step), st.label))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_u_shaped_eval_turns_overfitting_within_a_few_evals_after_its_minimum_and_not_before(
    seed: int,
) -> None:
    labels = states(seed)
    assert all(label == "learning" for step, label in labels if step <= MINIMUM)
    first = next(step for step, label in labels if label == "overfitting")
    assert MINIMUM < first <= MINIMUM + 500  # within five evaluations
    assert all(label == "overfitting" for step, label in labels if first + 300 <= step < TOTAL - 200)


def test_the_best_eval_step_is_the_minimum() -> None:
    ts, ty, es, ey = run(0)
    k = int(np.searchsorted(es, 1800)) + 1
    st = learning_state(
        forecast(ts[ts <= es[k - 1]], ty[ts <= es[k - 1]], total_steps=TOTAL),
        {"eval_loss": Series(list(es[:k]), list(ey[:k]))},
        total_steps=TOTAL,
    )
    assert st.label == "overfitting" and st.metric == "eval_loss"
    assert abs(st.best_step - MINIMUM) <= 200  # type: ignore[operator]
    assert st.evals_since_best >= 6


def test_the_best_values_noise_is_how_far_one_evaluation_scatters() -> None:
    """The best value is one evaluation: its scatter about the trend (``compare`` draws it), read
    from second differences so that the U's trend is not taken for noise (sd 0.004 here)."""
    ts, ty, es, ey = run(0)
    st = learning_state(
        forecast(ts, ty, total_steps=TOTAL), {"eval_loss": Series(list(es), list(ey))}, total_steps=TOTAL
    )
    assert 0.002 < st.best_noise < 0.008, st.best_noise
    no_eval = learning_state(forecast(ts, ty, total_steps=TOTAL), {}, total_steps=TOTAL)
    assert no_eval.metric is None and no_eval.best_noise == 0.0


def test_without_a_total_every_series_is_forecast_to_the_end_the_training_decay_says() -> None:
    """One run, one end: read off each eval series' own sparse rates, a cosine decay put the end
    at 1,844 beside the training loss's 2,000 (an LLM fine-tuner's trial)."""
    from advisor.forecast.schedule import implied_end

    ts = np.arange(10, 1201, 10.0)
    lrs = 1e-4 * 0.5 * (1 + np.cos(np.pi * ts / 2000))
    ty = 1.0 + np.exp(-ts / 300)
    es = np.arange(200, 1201, 200.0)
    ey = 1.2 + 0.5 * np.exp(-es / 300)
    train_end = implied_end(ts, lrs)
    assert train_end is not None and abs(train_end[0] - 2000) < 50
    fc = forecast(ts, ty, learning_rates=lrs, training_loss=True)
    st = learning_state(
        fc, {"eval_loss": Series(list(es), list(ey))}, total_steps=None, schedule=(list(ts), list(lrs))
    )
    assert not any("ends the run at about" in w for w in st.series["eval_loss"].warnings)
    # read to the same end as an eval series given that total
    told = learning_state(
        fc,
        {"eval_loss": Series(list(es), list(ey))},
        total_steps=round(train_end[0]),
        schedule=(list(ts), list(lrs)),
    )
    assert st.series["eval_loss"].final_loss == told.series["eval_loss"].final_loss
    assert st.series["eval_loss"].total_steps is None and fc.total_steps is None  # as unknown as the loss's


def test_each_eval_series_is_judged_on_its_own_beside_the_one_the_state_judges() -> None:
    """A fine-tune logging eval_loss (still falling) and eval_accuracy (past its best at step
    1000): the state judges eval_loss, and its judgement of eval_accuracy names that series' own
    best step and a high P(overfitting) by it, which a rule naming eval_accuracy reads."""
    ts, ty, es, ey = run(0)
    k = int(np.searchsorted(es, 1800)) + 1
    m = ts <= es[k - 1]
    falling = 0.9 * np.exp(-es[:k] / 1500) + 0.3
    st = learning_state(
        forecast(ts[m], ty[m], total_steps=TOTAL),
        {
            "eval_loss": Series(list(es[:k]), list(falling)),
            "eval_accuracy": Series(list(es[:k]), list(1.3 - ey[:k]), Direction.HIGHER),
        },
        total_steps=TOTAL,
        forecast_all=True,
    )
    assert st.metric == "eval_loss" and st.label == "learning"
    loss, acc = st.judgements["eval_loss"], st.judgements["eval_accuracy"]
    assert loss.best_step == st.best_step == es[k - 1] and loss.evals_since_best == 0
    assert loss.overfitting == pytest.approx(st.probabilities["overfitting"])
    assert abs(acc.best_step - MINIMUM) <= 200  # type: ignore[operator]
    assert acc.evals_since_best >= 6 and acc.overfitting > 0.8


def _loss_and_score(score: np.ndarray, *, declared: str | None = None) -> object:
    ts, ty, es, ey = run(0)
    k = int(np.searchsorted(es, 1800)) + 1
    m = ts <= es[k - 1]
    return learning_state(
        forecast(ts[m], ty[m], total_steps=TOTAL),
        {
            "eval_loss": Series(list(es[:k]), list(ey[:k])),  # past its best at step 1000
            "eval_cer": Series(list(es[:k]), list(score[:k])),
        },
        total_steps=TOTAL,
        declared=declared,
    )


def test_an_eval_loss_past_its_best_while_the_error_rate_still_falls_is_not_overfitting() -> None:
    """A speech fine-tune's eval_loss turned up at step 5,500 while its CER fell from 48 to 38.8 by
    the end: judged by its eval_loss for want of a declared metric, the run was released as
    overfitting at 73% and told to keep a checkpoint 10 CER points worse. An eval loss chosen by
    default is read with the task's score beside it: stopped only as far as the score has stopped
    too. A run that declares its eval loss, or a score that has stopped as well, is overfitting."""
    es = np.arange(100, TOTAL + 1, 100.0)
    falling = 50.0 - 12.0 * (es / TOTAL) + np.random.default_rng(1).normal(0, 0.05, es.size)
    st = _loss_and_score(falling)
    assert st.metric == "eval_loss" and st.task_metric == "eval_cer"  # type: ignore[attr-defined]
    assert st.label == "learning" and st.probabilities["overfitting"] < 0.3  # type: ignore[attr-defined]
    assert any("eval_cer still improves" in w for w in st.warnings)  # type: ignore[attr-defined]
    assert st.judgements["eval_loss"].overfitting > 0.8  # type: ignore[attr-defined]  # its own
    declared = _loss_and_score(falling, declared="eval_loss")
    assert declared.task_metric is None and declared.label == "overfitting"  # type: ignore[attr-defined]
    flat = 38.8 + np.random.default_rng(2).normal(0, 0.05, es.size)
    stopped = _loss_and_score(flat)
    assert stopped.task_metric == "eval_cer" and stopped.label == "overfitting"  # type: ignore[attr-defined]


def _finished_with_score(score: np.ndarray) -> object:
    ts, ty, es, ey = run(0)
    return learning_state(
        forecast(ts, ty, total_steps=TOTAL),
        {
            "eval_loss": Series(list(es), list(ey)),  # past its best at step 1000 to the end
            "eval_accuracy": Series(list(es), list(score), Direction.HIGHER),
        },
        total_steps=TOTAL,
        train_history=(list(ts), list(ty)),
    )


def test_a_finished_run_whose_score_rose_after_its_eval_loss_turned_is_not_overfitting() -> None:
    """At its end every P(plateau) is 1, so the task's score cannot say "still improving" by its
    forecast: a classifier whose eval_loss turned at step 1,000 while its accuracy rose to its best
    at the last evaluation read ``overfitting``, keep step 1,000 (8 accuracy points worse). Read off
    the score's record since the loss' best, it is not; a score that peaked with the loss and fell
    since leaves the run overfitting."""
    from advisor.forecast.state import improving_metric

    ts, ty, es, _ey = run(0)
    rising = (
        0.8
        + 0.09 * np.clip((es - MINIMUM) / (TOTAL - MINIMUM), 0.0, 1.0)
        + 0.1 * np.minimum(es / MINIMUM, 1.0)
    )
    st = _finished_with_score(rising)
    assert st.metric == "eval_loss" and st.task_metric == "eval_accuracy"  # type: ignore[attr-defined]
    assert st.label != "overfitting" and st.probabilities["overfitting"] < 0.1  # type: ignore[attr-defined]
    assert any("eval_accuracy improved after eval_loss's best" in w for w in st.warnings)  # type: ignore[attr-defined]
    train_fc = forecast(ts, ty, total_steps=TOTAL)
    assert improving_metric(st, train_fc) == "eval_accuracy"  # type: ignore[arg-type]
    peaked = 0.9 - 0.05 * np.abs(es - MINIMUM) / MINIMUM
    turned = _finished_with_score(peaked)
    assert turned.label == "overfitting" and improving_metric(turned, train_fc) is None  # type: ignore[attr-defined,arg-type]


def test_eval_that_flattens_while_train_flattens_is_a_plateau_not_overfitting() -> None:
    steps = np.arange(10, 2001, 10.0)
    train = 0.3 + 1.5 * np.exp(-steps / 150)
    es = np.arange(100, 2001, 100.0)
    ev = 0.5 + 0.5 * np.exp(-es / 150)
    k = 14
    st = learning_state(
        forecast(steps[steps <= es[k - 1]], train[steps <= es[k - 1]], total_steps=2000),
        {"eval_loss": Series(list(es[:k]), list(ev[:k]))},
        total_steps=2000,
    )
    assert st.label == "plateaued"


def test_an_eval_that_flattens_with_its_latest_point_its_best_is_not_overfitting() -> None:
    """Overfitting is the eval metric past its best: one still making (small) new bests while the
    training loss falls has flattened, not turned."""
    steps = np.arange(10, 3001, 10.0)
    train = 0.3 + 1.5 * np.exp(-steps / 900)
    es = np.arange(100, 2001, 100.0)
    ev = 0.5 + 0.5 * np.exp(-es / 150)  # strictly falling: every eval a new best, by less and less
    fc = forecast(steps[steps <= 2000], train[steps <= 2000], total_steps=3000)
    st = learning_state(fc, {"eval_loss": Series(list(es), list(ev))}, total_steps=3000)
    assert st.evals_since_best == 0 and fc.plateau_probability < 0.5
    assert st.label == "plateaued" and st.probabilities["overfitting"] == 0.0


def test_a_finished_run_whose_eval_climbed_while_its_training_loss_fell_is_overfitting() -> None:
    """At its last step nothing is left to forecast: P(plateau) is 1 whatever the rise, the final
    value is where the rise stands (not a median lagging it), and whether the training loss still
    fell is read off its record since the eval's best."""
    ts, ty, es, ey = run(5)
    fc = forecast(ts, ty, total_steps=TOTAL, training_loss=True)
    series = {"eval_loss": Series(list(es), list(ey))}
    st = learning_state(fc, series, total_steps=TOTAL, train_history=(list(ts), list(ty)))
    assert st.label == "overfitting" and st.best_step is not None and abs(st.best_step - MINIMUM) <= 200
    without = learning_state(fc, series, total_steps=TOTAL)  # the forecast alone has nothing left
    assert without.label == "plateaued"
    ev = st.series["eval_loss"]
    assert ev.plateau_probability == 1.0
    assert ev.final_loss.p10 <= ey[-1] <= ev.final_loss.p90
    assert abs(ev.final_loss.mean - ey[-1]) < abs(float(np.median(ey[-5:])) - ey[-1])


@pytest.mark.parametrize("seed", range(4))
def test_a_finished_run_is_read_off_a_noisy_training_loss_over_enough_of_its_reports(seed: int) -> None:
    """A fine-tune's training loss logged every 10 steps is noisy by about 8%: five reports either
    side of a thousand steps tell a fall since the eval's best from noise only past 13%. Read over
    a quarter of the reports since the best (up to 25), a 20% fall reads as one, and the finished
    run whose eval loss climbed half again is overfitting; a loss that fell only *into* the best
    and stayed flat after it is not (the level then is read after the best, not before it)."""
    rng = np.random.default_rng(seed)
    ts = np.arange(10, 2001, 10.0)
    es = np.arange(100, 2001, 100.0)
    ey = 1.2 + 0.5 * ((es - 900) / 1000) ** 2 + rng.normal(0, 0.005, es.size)
    series = {"eval_loss": Series(list(es), list(ey))}
    level = np.where(ts < 900, 0.25 + 0.5 * (900 - ts) / 900, 0.25 - 0.05 * (ts - 900) / 1100)
    falling = level + rng.normal(0, 0.02, ts.size)  # 20% lower at the end than at the best
    fc = forecast(ts, falling, total_steps=2000, training_loss=True)
    st = learning_state(fc, series, total_steps=2000, train_history=(list(ts), list(falling)))
    assert st.label == "overfitting" and st.best_step == 900
    flat_after = np.where(ts < 900, 0.25 + 0.5 * (900 - ts) / 900, 0.25) + rng.normal(0, 0.02, ts.size)
    fc = forecast(ts, flat_after, total_steps=2000, training_loss=True)
    st = learning_state(fc, series, total_steps=2000, train_history=(list(ts), list(flat_after)))
    assert st.label == "plateaued" and st.probabilities["overfitting"] < 0.5


def test_a_fall_since_the_best_is_read_over_a_quarter_of_the_reports_since() -> None:
    """Over 40 draws of a training loss noisy by 8% that falls 12% in the 110 reports after the
    eval's best, five reports either side told the fall in 27; a quarter of the reports since (up
    to 25), read from the first after the best, tells it in 30 or more. A loss flat after the best,
    however steeply it fell into it, reads no fall."""
    from advisor.forecast.finished_record import fell_since

    ts = np.arange(10, 2001, 10.0)
    told = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        level = np.where(ts < 900, 0.25 + 0.5 * (900 - ts) / 900, 0.25 - 0.12 * 0.25 * (ts - 900) / 1100)
        told += fell_since((list(ts), list(level + rng.normal(0, 0.02, ts.size))), 900) >= 0.5
        flat = np.where(ts < 900, 0.25 + 0.5 * (900 - ts) / 900, 0.25) + rng.normal(0, 0.02, ts.size)
        assert fell_since((list(ts), list(flat)), 900) < 0.5
    assert told >= 30


def test_a_flat_eval_series_that_makes_a_new_best_by_noise_alone_still_overfits() -> None:
    """An eval loss flat within 0.4% while the training loss falls overfits, whether or not its
    latest evaluation happens to be a new best: one by less than the steps its evaluations take
    the wrong way is noise (a live run flipped overfitting -> plateaued -> overfitting at each such
    best, a LearningState Event each). A new best by far more than that is the series improving."""
    rng = np.random.default_rng(3)
    ts = np.arange(10, 2401, 10.0)
    ty = 0.3 + 1.5 * np.exp(-ts / 900) + rng.normal(0, 0.01, ts.size)
    es = np.arange(100, 2401, 100.0)
    flat = np.where(es < 900, 1.1 + 0.6 * (900 - es) / 800, 1.1) + rng.normal(0, 0.004, es.size)
    fc = forecast(ts, ty, total_steps=3000, training_loss=True)

    def state_with_last(value: float) -> LearningState:
        ey = [*flat[:-1], value]
        return learning_state(fc, {"eval_loss": Series(list(es), ey)}, total_steps=3000)

    past = state_with_last(float(np.max(flat[8:-1])))
    assert past.evals_since_best > 0 and past.label == "overfitting"
    by_noise = state_with_last(float(np.min(flat[:-1])) - 0.001)
    assert by_noise.evals_since_best == 0 and by_noise.label == "overfitting"
    assert by_noise.probabilities["overfitting"] == pytest.approx(past.probabilities["overfitting"], abs=0.25)
    improving = state_with_last(float(np.min(flat[:-1])) - 0.03)
    assert improving.evals_since_best == 0 and improving.probabilities["overfitting"] == 0.0


def test_a_falling_eval_is_learning_even_when_train_is_flat() -> None:
    es = np.arange(100, 1001, 100.0)
    ev = list(2.0 - 0.15 * np.arange(es.size))
    train = forecast(np.arange(10, 1001, 10.0), np.full(100, 0.4), total_steps=5000)
    assert learning_state(train, {"eval_loss": Series(list(es), ev)}, total_steps=5000).label == "learning"


def test_higher_is_better_metrics_are_judged_upside_down() -> None:
    es = list(np.arange(100, 1501, 100.0))
    acc = [0.5 + 0.3 * (1 - math.exp(-s / 200)) - (0.0 if s < 700 else 0.0004 * (s - 700)) for s in es]
    fc = forecast_series(es, acc, Direction.HIGHER, total_steps=3000)
    assert fc.final_loss.mean <= acc[-1] + 1e-9 and fc.plateau_probability > 0.5
    train = forecast(
        np.arange(10, 1501, 10.0), 1 + np.exp(-np.arange(10, 1501, 10.0) / 2000), total_steps=3000
    )
    st = learning_state(train, {"eval_accuracy": Series(es, acc, Direction.HIGHER)}, total_steps=3000)
    assert st.label == "overfitting" and st.best_value == max(acc)


def test_a_falling_higher_is_better_metric_is_warned_of_as_falling_not_rising() -> None:
    """The forecaster reads the accuracy negated, where its fall is a rise: the warning says what
    the metric itself does, and that it is worsening."""
    es = list(np.arange(100, 2001, 100.0))
    acc = [0.8 - (0.0 if s < 600 else 0.0002 * (s - 600)) for s in es]
    fc = forecast_series(es, acc, Direction.HIGHER, total_steps=3000)
    assert any(w.startswith("the series is falling (worsening) (") for w in fc.warnings), fc.warnings
    assert not any(w.startswith("the series is rising") for w in fc.warnings)
    loss = forecast_series(es, [1.0 - a for a in acc], Direction.LOWER, total_steps=3000)
    assert any(w.startswith("the series is rising (") for w in loss.warnings), loss.warnings


def test_few_evals_fall_back_to_the_training_loss_with_a_warning() -> None:
    train = forecast(np.arange(10, 501, 10.0), 1 / np.arange(1, 51), total_steps=5000)
    st = learning_state(train, {"eval_loss": Series([100.0, 200.0], [0.5, 0.9])}, total_steps=5000)
    assert st.metric is None and st.label == "learning"
    assert any("finite evaluation(s); judged by the training loss until 3" in w for w in st.warnings)
    # a log of eval metrics alone has no training loss to fall back to: said so
    alone = learning_state(None, {"eval_loss": Series([100.0, 200.0], [0.5, 0.9])}, total_steps=5000)
    assert any("finite evaluation(s); not judged (no training loss) until 3" in w for w in alone.warnings)


def test_nan_latest_eval_is_divergence() -> None:
    train = forecast(np.arange(10, 501, 10.0), 1 / np.arange(1, 51), total_steps=5000)
    st = learning_state(
        train, {"eval_loss": Series([100, 200, 300, 400], [0.9, 0.8, 0.7, math.nan])}, total_steps=5000
    )
    assert st.label == "diverging"


def test_an_eval_metric_never_finite_is_no_divergence() -> None:
    """Every evaluation NaN from the first (an eval loop whose metric does not compute) is no
    blow-up from a level the run held: a healthy training loss is not called diverging beside it."""
    train = forecast(np.arange(10, 501, 10.0), 1 / np.arange(1, 51), total_steps=5000)
    st = learning_state(train, {"eval_loss": Series([100, 200, 300, 400], [math.nan] * 4)}, total_steps=5000)
    assert st.label == "learning" and st.probabilities["diverging"] < 0.5
    assert any("every eval_loss so far is not finite" in w for w in st.warnings)


@pytest.mark.parametrize("direction", [Direction.LOWER, Direction.HIGHER])
def test_an_eval_series_past_its_best_is_not_called_diverging_by_its_forecast(direction: Direction) -> None:
    """The state calls a finite eval metric that turned overfitting (or a plateau); its series'
    forecast said "diverging, P 1.00" beside it. Only a non-finite evaluation is divergence."""
    ts, ty, es, ey = run(0)
    es, ey = es[es <= 2500], ey[es <= 2500]  # well past the minimum, before the run's end
    sign = 1.0 if direction is Direction.LOWER else -1.0
    m = ts <= es[-1]
    st = learning_state(
        forecast(ts[m], ty[m], total_steps=TOTAL),
        {"eval_m": Series(list(es), list(sign * ey), direction)},
        total_steps=TOTAL,
        metric="eval_m",
        metric_directions={"eval_m": str(direction)},
    )
    fc = st.series["eval_m"]
    assert st.label == "overfitting" and fc.plateau_probability > 0.9
    assert fc.divergence_probability == 0.0
    broken = forecast_series(list(es), [*(sign * ey[:-1]), math.nan], direction, total_steps=TOTAL)
    assert broken.divergence_probability > 0.5


def test_silence_over_many_report_intervals_is_hung() -> None:
    train = forecast(np.arange(10, 501, 10.0), 1 / np.arange(1, 51), total_steps=5000)
    assert learning_state(train, {}, idle_s=30.0 * 20, report_interval_s=30.0).label == "hung"
    assert learning_state(train, {}, idle_s=200.0, report_interval_s=1.0).label != "hung"


def test_the_core_loop_carries_the_state_and_restores_it() -> None:
    core = AdvisorCore(forecast_interval_s=0)
    ts, ty, es, ey = run(1)
    evals = dict(zip(es.tolist(), ey.tolist(), strict=True))
    last_eval: dict[str, float] = {}
    for s, y in zip(ts.tolist(), ty.tolist(), strict=True):
        if s in evals:
            last_eval = {"eval_loss": evals[s]}
        if s > 1800:
            break
        core.observe(
            "ns/a", ProgressSample(step=int(s), loss=y, total_steps=TOTAL, time=s, metrics=last_eval), now=s
        )
    view = core.view(JobView(namespace="ns", name="a"), now=1800.0)
    assert view.learning_state is not None and view.learning_state.label == "overfitting"
    fresh = AdvisorCore()
    fresh.restore("ns/a", core.dump("ns/a"))
    again = fresh.view(JobView(namespace="ns", name="a"), now=1800.0).learning_state
    assert (
        again is not None
        and again.label == "overfitting"
        and again.best_step == view.learning_state.best_step
    )


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.one_of(st.floats(-1e6, 1e6), st.sampled_from([math.nan, math.inf, -math.inf])),
        min_size=0,
        max_size=30,
    ),
    st.sampled_from(list(Direction)),
    st.one_of(st.none(), st.floats(0, 1e5)),
)
def test_any_eval_series_gives_a_distribution_over_the_labels(
    values: list[float], direction: Direction, idle: float | None
) -> None:
    steps = [float(10 * (i + 1)) for i in range(len(values))]
    train = forecast(steps or [1.0], values or [1.0], total_steps=1000)
    st_ = learning_state(
        train, {"eval_x_loss": Series(steps, values, direction)}, idle_s=idle, report_interval_s=10.0
    )
    assert set(st_.probabilities) == set(LEARNING_LABELS)
    assert abs(sum(st_.probabilities.values()) - 1.0) < 1e-9
    assert st_.label in LEARNING_LABELS and all(0.0 <= p <= 1.0 for p in st_.probabilities.values())


# -- eval series forecast with the run's learning-rate schedule ---------------------------------


def test_lr_at_reads_the_schedule_between_its_points_and_holds_its_ends() -> None:
    sched = ([0.0, 100.0, 200.0, 300.0], [1.0, None, 0.5, float("nan")])
    assert lr_at([0.0, 50.0, 200.0, 250.0, 900.0], sched) == pytest.approx([1.0, 0.875, 0.5, 0.5, 0.5])
    assert lr_at([10.0], ([0.0, 5.0], [None, 1.0])) is None  # one usable point: no schedule
    assert lr_at([10.0], None) is None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 1e6), st.one_of(st.none(), st.floats(0, 10))), max_size=20),
    st.lists(st.floats(0, 2e6), min_size=1, max_size=10),
)
# found by this test: steps a subnormal apart made np.interp's slope overflow to inf
@example(points=[(0.0, None), (0.0, None), (0.0, 0.0), (2e-323, 1.0)], steps=[5e-324])
def test_lr_at_stays_within_the_rates_it_was_given(
    points: list[tuple[float, float | None]], steps: list[float]
) -> None:
    got = lr_at(steps, ([p[0] for p in points], [p[1] for p in points]))
    finite = [v for _, v in points if v is not None]
    if got is None:
        assert len(finite) < 2
        return
    assert len(got) == len(steps)
    assert all(min(finite) - 1e-12 <= v <= max(finite) + 1e-12 for v in got)


def _decaying_finetune() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A fine-tune under a linear LR decay to zero whose eval loss follows the LR area (it
    flattens as the rate runs out), evaluated every 250 steps."""
    total = 3000.0
    ts = np.arange(10.0, total + 1, 10.0)
    lr = 2e-5 * (1.0 - ts / total)
    area = np.cumsum(lr) / np.sum(lr)
    es = np.arange(250.0, total + 1, 250.0)
    ey = 0.6 + 0.5 * np.exp(-4.0 * np.interp(es, ts, area))
    return ts, lr, es, ey


def test_eval_series_are_forecast_with_the_runs_schedule() -> None:
    ts, lr, es, ey = _decaying_finetune()
    k = 6  # six evaluations seen, at step 1500 of 3000
    seen = ts <= es[k - 1]
    evals = {"eval_loss": Series(list(es[:k]), list(ey[:k]))}
    with_lr = learning_state(None, evals, total_steps=3000, schedule=(ts[seen], lr[seen]))
    without = learning_state(None, evals, total_steps=3000)
    fc, plain = with_lr.series["eval_loss"], without.series["eval_loss"]
    assert "lr_law" in fc.model and "lr_law" not in plain.model
    # the forecast that knows the rate runs out is the closer one, and its interval holds the truth
    truth = float(ey[-1])
    assert abs(fc.final_loss.mean - truth) < abs(plain.final_loss.mean - truth)
    assert fc.final_loss.p10 <= truth <= fc.final_loss.p90


def test_the_core_loop_forecasts_eval_series_with_the_reported_learning_rates() -> None:
    ts, lr, es, ey = _decaying_finetune()
    evals = dict(zip(es.tolist(), ey.tolist(), strict=True))
    core = AdvisorCore(forecast_interval_s=0)
    last_eval: dict[str, float] = {}
    for s, r in zip(ts.tolist(), lr.tolist(), strict=True):
        if s > 1500:
            break
        if s in evals:
            last_eval = {"eval_loss": evals[s]}
        loss = 1.0 / (1 + s / 300)
        sample = ProgressSample(
            step=int(s), loss=loss, total_steps=3000, time=s, learning_rate=r, metrics=last_eval
        )
        core.observe("ns/a", sample, now=s)
    view = core.view(JobView(namespace="ns", name="a"), now=1500.0)
    st_ = view.learning_state
    assert st_ is not None and "lr_law" in st_.series["eval_loss"].model


def test_the_label_shown_before_stays_until_another_leads_it_by_a_margin() -> None:
    """Odds near even (a flat eval series) do not flip the label at every re-forecast; a clear
    lead does. The probabilities themselves are not touched."""
    from advisor.forecast.state import _label

    near = {"learning": 0.38, "plateaued": 0.31, "overfitting": 0.31, "diverging": 0.0, "hung": 0.0}
    assert _label(near) == "plateaued"  # stopped 0.62 > 0.38 (a tie between the two: plateaued)
    back = {"learning": 0.54, "plateaued": 0.46, "overfitting": 0.0, "diverging": 0.0, "hung": 0.0}
    assert _label(back) == "learning"
    assert _label(back, "plateaued") == "plateaued"  # learning leads by less than the margin: kept
    assert _label({**back, "learning": 0.65, "plateaued": 0.35}, "plateaued") == "learning"
    clear = {"learning": 0.3, "plateaued": 0.0, "overfitting": 0.7, "diverging": 0.0, "hung": 0.0}
    assert _label(clear, "learning") == "overfitting"
    # between the two "stopped" labels, the same margin
    split = {"learning": 0.1, "plateaued": 0.43, "overfitting": 0.47, "diverging": 0.0, "hung": 0.0}
    assert _label(split) == "overfitting" and _label(split, "plateaued") == "plateaued"


def test_a_run_is_first_called_stopped_only_at_odds_of_three_to_two() -> None:
    """A near-even split reads "learning" (the safer reading), not "stopped", and never the
    runner-up of a three-way split; a label already shown stays by the hysteresis."""
    from advisor.forecast.state import STOPPED_LABEL_MIN, _label

    assert STOPPED_LABEL_MIN == 0.6
    even = {"learning": 0.46, "plateaued": 0.27, "overfitting": 0.27, "diverging": 0.0, "hung": 0.0}
    assert _label(even) == "learning"
    three_way = {"learning": 0.26, "plateaued": 0.0, "overfitting": 0.47, "diverging": 0.27, "hung": 0.0}
    assert _label(three_way) == "learning"
    assert _label(even, "plateaued") == "plateaued"  # shown before: stays within the margin
    sure = {"learning": 0.4, "plateaued": 0.0, "overfitting": 0.6, "diverging": 0.0, "hung": 0.0}
    assert _label(sure) == "overfitting"


def test_a_scores_warning_names_values_on_its_scale_and_calls_it_the_series() -> None:
    from advisor.forecast.eval_forecast import _in_own_terms

    text = _in_own_terms(
        "learning rates unknown: assumed the LR anneals by total_steps; with a constant LR the end "
        "would be near -1.801 (the loss so far cannot tell the two apart)",
        1.0,
    )
    assert "would be near 1 (" in text and "the series so far" in text and "the loss" not in text


def test_a_score_is_never_forecast_below_the_bottom_of_its_scale() -> None:
    """An accuracy on [0, 1] that collapsed and goes on falling is forecast at 0 at worst: its
    fit, turned back from the negated series, had put its end at -0.004 and its band's low end
    at -0.078. A series with no scale (negative values) is left as fitted."""
    from advisor.forecast.eval_forecast import turned_back
    from advisor.model import Forecast, Interval

    negated = Forecast(
        final_loss=Interval(mean=0.05, p10=-0.4, p90=0.08),
        plateau_probability=0.96,
        divergence_probability=0.0,
        eta_seconds=None,
        steps_per_second=None,
        warnings=("learning rates unknown: with a constant LR the end would be near 0.2 (x)",),
        current_loss=-0.53,
    )
    fc = turned_back(negated, [0.88, 0.87, 0.6, 0.53, 0.53])
    assert (fc.final_loss.mean, fc.final_loss.p10, fc.final_loss.p90) == (0.0, 0.0, 0.4)
    assert "would be near 0 (" in fc.warnings[0]
    free = turned_back(negated, [0.5, -0.2, 0.1])
    assert (free.final_loss.mean, free.final_loss.p10) == (-0.05, -0.08)


def test_an_eval_series_that_stopped_being_evaluated_stands_aside_for_the_training_loss() -> None:
    """A platform trial's run, as a curve: evaluated every 100 steps to step 1,400 (its eval loss past its
    best at 1,000 and rising), then trained on to step 3,000 with no evaluation. Judged on those
    evaluations it read "overfitting" at every later step, with no word that they had stopped.
    Three usual intervals behind, the series stands aside: the run is judged by its training loss,
    and the state says why."""
    ts, ty, es, ey = run(0)
    evals = {"eval_loss": Series(list(es[es <= 1400]), list(ey[es <= 1400]))}
    recent = learning_state(
        forecast(ts[ts <= 1500], ty[ts <= 1500], total_steps=TOTAL), evals, total_steps=TOTAL
    )
    assert recent.metric == "eval_loss" and not any("not been evaluated" in w for w in recent.warnings)
    late = learning_state(forecast(ts, ty, total_steps=TOTAL), evals, total_steps=TOTAL)
    assert late.metric is None
    assert late.label != "overfitting" and late.probabilities["overfitting"] == 0.0
    (note,) = [w for w in late.warnings if "not been evaluated" in w]
    assert (
        "since step 1,400, 1,600 steps ago (16 times its usual interval): judged by the training loss" in note
    )
