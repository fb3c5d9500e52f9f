"""The verdict on a real run reads its own later record through one smoothing: one noisy point,
the last included, neither makes nor unmakes it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

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


def test_a_stop_on_a_training_loss_bump_is_judged_against_its_value_at_the_stop() -> None:
    """A training loss that falls to 1.0, jumps to 1.3, stays, then recovers to 1.1: no checkpoint
    keeps the training loss's best, so a stop on the bump kept 1.3, and the run would have gone on
    to 1.1 (about 15% left: a wrong stop); the run stopped learning only near its recovered end."""
    from advisor.backtest.verdict import Judged

    steps = np.arange(300, dtype=float) * 10
    y = np.concatenate([np.linspace(2.0, 1.0, 100), np.full(100, 1.3), np.linspace(1.3, 1.1, 100)])
    smooth = smoothed(y)
    end = float(steps[learning_end_index(smooth, keep_best=False)])
    judged = Judged("loss", steps, smooth, end)
    left, here, best = judged.left_after(1500)
    assert here is not None and abs(here - 1.3) < 0.01 and best is not None and best < 1.12
    assert 0.13 < left < 0.17
    assert end > 2500  # it learned again until its recovery ended
    # judged as an eval series, the same stop kept the 1.0 checkpoint: nothing left
    assert Judged("eval", steps, smooth, 0.0).left_after(1500)[0] == 0.0


def test_a_stop_in_a_stretch_of_nan_reports_is_judged_from_where_the_run_last_stood() -> None:
    """A training loss at 1.2 goes NaN for 20 reports, then recovers and falls to 1.05: a stop
    inside the NaN stretch cut about 12% still to come (it read "0% left": no wrong stop)."""
    from advisor.backtest.verdict import Judged

    steps = np.arange(300, dtype=float) * 10
    y = np.concatenate([np.linspace(2.0, 1.2, 100), np.full(20, np.nan), np.linspace(1.2, 1.05, 180)])
    smooth = smoothed(y)
    judged = Judged("loss", steps, smooth, float(steps[-1]))
    left, here, best = judged.left_after(1100)
    # the running median's value just before the stretch (its window reaches back up the fall)
    assert here is not None and 1.2 <= here < 1.27 and best is not None and best < 1.06
    assert 0.1 < left < 0.2


def test_a_higher_is_better_metric_is_judged_negated_and_reported_in_its_own_units(tmp_path: Path) -> None:
    """A run whose only eval metric is ``eval_accuracy``, rising from 0.70 to 0.89: it is judged
    by that metric; a stop half-way left about 20% (0.89 against 0.74), in accuracy's units."""
    from advisor.backtest.runs import load_runs
    from advisor.backtest.verdict import judged

    rows = ["step,loss,eval_accuracy"]
    for k in range(1, 201):
        acc = f"{0.70 + 0.19 * k / 200:.4f}" if k % 10 == 0 else ""
        rows.append(f"{k * 10},{1.0 + 1.0 / k:.5f},{acc}")
    path = tmp_path / "acc.csv"
    path.write_text("\n".join(rows) + "\n")
    (run,), _ = load_runs([path])
    assert run.eval_metric == "eval_accuracy" and run.eval_higher
    j = judged(run)
    assert j.series == "eval" and j.metric == "eval_accuracy"
    left, here, best = j.left_after(1000)
    assert here is not None and 0.78 < here < 0.81 and best is not None and best > 0.87
    assert left > 0.08
    assert j.learning_end_step >= 1900


def _noisy_plateau(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """1.8 + exp(-s/400) over 5,000 steps (flat within 1% from step ~1,600), 8% report noise, a
    report every 20 steps: a small-batch fine-tune's log."""
    steps = np.arange(20, 5001, 20, dtype=float)
    rng = np.random.default_rng(seed)
    return steps, (1.8 + np.exp(-steps / 400)) * (1.0 + rng.normal(0.0, 0.08, steps.size))


def test_a_stop_on_a_noisy_plateau_is_read_past_the_noise_of_its_best_later_value() -> None:
    """The best of the later running medians lies below the plateau by noise alone: read as
    logged, a stop at 75% of a run flat since 32% left a median 4.9% over twenty noise draws (a
    wrong stop at 2%); read past that depth, under half of it. What is left over is the noise of
    the value at the stop itself, which is as likely high as low (``bench/judging_bench.py``)."""
    from advisor.judging import left_after, smoothing_of

    as_logged, past_noise = [], []
    for seed in range(20):
        steps, y = _noisy_plateau(seed)
        smooth, noise = smoothed(y), smoothing_of(y)
        as_logged.append(left_after(steps, smooth, 3750.0, keep_best=False)[0])
        past_noise.append(left_after(steps, smooth, 3750.0, keep_best=False, noise=noise)[0])
    assert all(p <= a for p, a in zip(past_noise, as_logged, strict=True))
    assert float(np.median(as_logged)) > 0.04
    assert float(np.median(past_noise)) < 0.5 * float(np.median(as_logged))


def test_the_noise_does_not_hide_a_fall_that_was_still_to_come() -> None:
    """A log that falls 6% more after the stop, with 2% report noise: its best later value is one
    window at the end (nothing near it to be the lowest by chance), so the noise takes little: it
    still reads as a wrong stop at every threshold, and a clean log reads exactly as before."""
    from advisor.judging import left_after, smoothing_of

    steps = np.arange(10, 4001, 10, dtype=float)
    clean = 2.0 - 0.12 * steps / 4000
    for seed in range(10):
        y = clean * (1.0 + np.random.default_rng(seed).normal(0.0, 0.02, steps.size))
        left = left_after(steps, smoothed(y), 2000.0, keep_best=False, noise=smoothing_of(y))[0]
        assert left > 0.02
    smooth = smoothed(clean)
    exact = left_after(steps, smooth, 2000.0, keep_best=False)[0]
    assert left_after(steps, smooth, 2000.0, keep_best=False, noise=smoothing_of(clean)) == (
        left_after(steps, smooth, 2000.0, keep_best=False)
    )
    assert exact == pytest.approx((smooth[199] - smooth.min()) / smooth[199]) and exact > 0.025


def test_the_noise_is_read_from_the_reports_not_the_curves_bend() -> None:
    """Second differences leave a smooth bend out of the noise (a clean exponential reads none);
    8% noise reads as about 8% of the level; a series too short to say reads as exact."""
    from advisor.judging import smoothing_of

    x = np.arange(1, 501, dtype=float)
    assert smoothing_of(1.0 + np.exp(-x / 50)).se < 1e-4
    y = 2.0 * (1.0 + np.random.default_rng(0).normal(0.0, 0.08, x.size))
    noise = smoothing_of(y)
    window = noise.window
    assert window == 25
    assert noise.se == pytest.approx(1.2533 * 0.16 / window**0.5, rel=0.2)
    assert smoothing_of(y[:19]).se == 0.0
