"""ETA from throughput (robust to pauses), plateau and divergence probabilities."""

from __future__ import annotations

import math

import numpy as np
import pytest

from advisor.forecast import forecast


def test_eta_is_none_without_times_or_total_steps() -> None:
    s = np.arange(1, 51) * 10.0
    y = 2.0 + (s / 10.0) ** -0.5
    assert forecast(s, y, total_steps=1000).eta_seconds is None
    no_total = forecast(s, y, times=s * 0.5)
    assert no_total.eta_seconds is None
    assert no_total.steps_per_second == pytest.approx(2.0)


def test_times_in_epoch_milliseconds_are_read_as_milliseconds_and_said() -> None:
    """Epoch-ms times (MLflow, many loggers) read as seconds made every step take 1,000 times as
    long: an ETA of 600,000 s for a run 10 minutes from its end, unsaid. Every time beyond the year
    5138 in seconds is epoch ms (the sources' rule); epoch seconds and elapsed times are as they were."""
    s = np.arange(1, 201) * 10.0
    y = 2.0 + (s / 10.0) ** -0.5
    t = s * 0.5  # 2 steps/s; 2,000 steps left at step 2,000 of 4,000: 1,000 s
    secs = forecast(s, y, total_steps=4000, times=t + 1.7e9)
    ms = forecast(s, y, total_steps=4000, times=(t + 1.7e9) * 1000.0)
    assert secs.eta_seconds is not None and ms.eta_seconds is not None
    assert ms.steps_per_second == pytest.approx(2.0)
    assert ms.eta_seconds.mean == pytest.approx(1000.0, rel=1e-6)
    assert ms.eta_seconds.p90 == pytest.approx(secs.eta_seconds.p90, rel=1e-6)
    assert any(w.startswith("times are epoch milliseconds") for w in ms.warnings)
    for plain in (secs, forecast(s, y, total_steps=4000, times=t)):
        assert not any("milliseconds" in w for w in plain.warnings)
        assert plain.steps_per_second == pytest.approx(2.0)


def test_eta_ignores_eval_pauses_and_checkpoint_stalls() -> None:
    s = np.arange(1, 201) * 10.0
    dt = np.full(200, 5.0)  # 10 steps per 5 s = 2 steps/s
    dt[::20] += 60.0  # an eval pause every 20 reports
    dt[150] += 900.0  # one long checkpoint stall
    t = np.cumsum(dt)
    y = 2.0 + (s / 10.0) ** -0.5
    fc = forecast(s, y, total_steps=4000, times=t)
    assert fc.eta_seconds is not None
    steady = (4000 - 2000) / 2.0
    with_pauses = steady * (1 + 60.0 / (20 * 5.0))  # pauses recur; the one-off stall is amortised
    assert steady <= fc.eta_seconds.mean <= with_pauses * 1.3
    assert fc.eta_seconds.p10 <= fc.eta_seconds.mean <= fc.eta_seconds.p90


def test_eta_uses_the_recent_throughput_after_a_resize() -> None:
    s = np.arange(1, 201) * 10.0
    dt = np.where(np.arange(200) < 100, 10.0, 2.5)  # 4x faster after scaling up
    t = np.cumsum(dt)
    fc = forecast(s, 2.0 + (s / 10.0) ** -0.5, total_steps=4000, times=t)
    assert fc.eta_seconds is not None
    assert fc.eta_seconds.mean == pytest.approx(2000 / 4.0, rel=0.1)


def test_the_downtime_of_a_resume_is_not_charged_to_the_rest_of_the_run() -> None:
    """1 step/s, then a restart from step 1000 after 60 s down at step 1200: the resumed segment is
    joined to the attempt it resumed from (same level), and the wall time across the join (lost
    work and downtime, 270 s for 10 steps) is no pace: the ETA stays at 1 step/s right away."""
    first = np.arange(10, 1201, 10, dtype=float)
    resumed = np.arange(1010, 1121, 10, dtype=float)
    steps = np.r_[first, resumed]
    times = np.r_[first, 1200.0 + 60.0 + (resumed - 1000.0)]
    y = 2.0 - steps / 4000.0
    fc = forecast(steps, y, total_steps=3000, times=times)  # the step going back is the restart
    assert any("joined" in w for w in fc.warnings)
    assert fc.steps_per_second == pytest.approx(1.0, rel=0.02)
    assert fc.eta_seconds is not None and fc.eta_seconds.mean == pytest.approx(1880.0, rel=0.03)


def test_a_run_going_on_in_nan_is_timed_from_its_latest_step_and_pace() -> None:
    """Finite to step 5,000 at 20 steps/s, then NaN to 10,000 at 10 steps/s: the ETA is the
    20,000 steps left from 10,000 at the pace of the latest reports, not from where the loss was
    last finite (it stayed the last finite forecast's while the run went on)."""
    steps = np.arange(100, 10001, 100, dtype=float)
    times = np.where(steps <= 5000, steps / 20.0, 250.0 + (steps - 5000) / 10.0)
    loss = np.where(steps <= 5000, 2.0 + 1.0 / (1.0 + steps / 500.0), np.nan)
    fc = forecast(steps, loss, total_steps=30000, times=times)
    assert fc.steps_per_second == pytest.approx(10.0, rel=0.05)
    assert fc.eta_seconds is not None and fc.eta_seconds.mean == pytest.approx(2000.0, rel=0.05)
    # a report going back among the NaNs (a restart) ends the reports read: no pace across it
    back = np.r_[steps, 4000.0, 4100.0]
    fc = forecast(back, np.r_[loss, np.nan, np.nan], total_steps=30000, times=np.r_[times, 800.0, 810.0])
    assert fc.eta_seconds is not None and fc.eta_seconds.mean == pytest.approx(2000.0, rel=0.05)


def test_plateau_probability_separates_flat_from_falling() -> None:
    s = np.arange(1, 101) * 10.0
    lr = np.full(100, 1e-4)
    flat = forecast(s, 1.5 + 0.001 * np.sin(s), total_steps=3000, learning_rates=lr)
    falling = forecast(s, 1.5 + 3.0 * (s / 100.0) ** -0.7, total_steps=3000, learning_rates=lr)
    assert flat.plateau_probability > 0.8
    assert falling.plateau_probability < 0.2


def test_divergence_from_a_rising_loss_and_from_nan() -> None:
    s = np.arange(1, 101) * 10.0
    good = 2.0 + (s / 100.0) ** -0.5
    rising = good.copy()
    rising[60:] = good[60] + np.linspace(0.0, 3.0, 40)
    nan_tail = good.copy()
    nan_tail[-5:] = np.nan
    assert forecast(s, good).divergence_probability < 0.05
    assert forecast(s, rising).divergence_probability > 0.8
    assert forecast(s, nan_tail).divergence_probability > 0.8


def test_a_loss_spike_on_its_way_back_down_is_not_divergence() -> None:
    # a spike lifts the recent trend as much as a blow-up does; once the loss is falling back
    # toward where it was, the run is recovering, while a blow-up's last report is its worst
    s = np.arange(1, 101) * 10.0
    rng = np.random.default_rng(2)
    good = (2.0 + (s / 100.0) ** -0.5) * (1.0 + 0.005 * rng.standard_normal(s.size))
    spike = good.copy()
    spike[88:] *= 1.0 + 0.5 * np.exp(-np.arange(12) / 4.0)
    blowup = good.copy()
    blowup[88:] *= np.exp(np.arange(12) * 0.08)
    for n in range(90, 97):
        assert forecast(s, spike[:n]).divergence_probability < 0.1
    assert forecast(s, blowup[:95]).divergence_probability > 0.9


def test_a_training_loss_that_blew_up_and_stays_up_is_divergence_not_only_while_it_rises() -> None:
    """A fine-tune at 1.4 jumped to 7.5 at step 1200 and stayed there: P(diverge) 0.99 while it
    rose, then 0.10 and "learning" 900 steps later, once the rise was over. The optimiser's loss
    does not go back to where it started short of a failure; an eval loss may (overfitting), so
    an eval series is left to the trend test. A spike that comes back down is not a blow-up."""
    rng = np.random.default_rng(0)
    s = np.arange(10, 3001, 10, dtype=float)
    base = 1.3 + 1.2 * (s / 10.0) ** -0.4
    good = base + rng.normal(0.0, 0.03, s.size)
    stays = good.copy()
    stays[s >= 1200] = 7.5 + rng.normal(0.0, 0.05, int((s >= 1200).sum()))
    spike = good.copy()
    hit = (s >= 1200) & (s < 1400)
    spike[hit] = base[hit] + 7.5 * np.exp(-(s[hit] - 1200.0) / 60.0)
    for upto in (1600, 2100, 3000):
        m = s <= upto
        assert forecast(s[m], stays[m], total_steps=3000, training_loss=True).divergence_probability > 0.95
        assert forecast(s[m], spike[m], total_steps=3000, training_loss=True).divergence_probability < 0.05
        assert forecast(s[m], good[m], total_steps=3000, training_loss=True).divergence_probability < 0.05
        # the same series as an eval metric: a rise past its minimum is the turn's business
        assert forecast(s[m], stays[m], total_steps=3000).divergence_probability < 0.5


def test_a_blow_up_early_in_the_run_stays_a_divergence_to_its_end() -> None:
    """Jumped at a fifth of its run and flat ever after: at its last step, the first quarter of its
    reports held both its start and its best, so nothing read as given back (P(diverge) 0.17)."""
    rng = np.random.default_rng(5)
    s = np.arange(10, 4001, 10, dtype=float)
    y = np.where(s < 800, 1.2 + 1.5 * (s / 10.0) ** -0.5, 6.9) * (1.0 + 0.01 * rng.standard_normal(s.size))
    for upto in (1500, 3000, 4000):
        m = s <= upto
        assert forecast(s[m], y[m], total_steps=4000, training_loss=True).divergence_probability > 0.95, upto


def test_a_blow_up_that_creeps_back_too_slowly_to_recover_by_the_end_is_a_divergence() -> None:
    """A loss that jumped five times at step 1,600 and crept back down (2.4 times its best at the
    end) read "learning" once it stopped rising; one whose trend gets it back in time is not."""
    rng = np.random.default_rng(1)
    s = np.arange(10, 4001, 10, dtype=float)
    healthy = 1.0 + 2.0 * (s / 10.0) ** -0.5
    for tau, late in ((2500.0, True), (150.0, False)):
        y = np.where(s >= 1600, healthy * (1.0 + 4.0 * np.exp(-(s - 1600) / tau)), healthy)
        y = y * (1.0 + 0.01 * rng.standard_normal(s.size))
        m = s <= 3500
        p = forecast(s[m], y[m], total_steps=4000, training_loss=True).divergence_probability
        assert (p > 0.95) if late else (p < 0.05), (tau, p)


def test_one_long_wait_at_the_same_step_is_not_charged_to_the_rest_of_the_run() -> None:
    """Suspended for 30 minutes at step 30,000 (a release then a resume, a preemption), then 10
    minutes of training: one stall is no pattern, and the rest of the run runs at its pace. Stalls
    that recur (an evaluation every 5,000 steps) still count in full."""
    from advisor.forecast.eta import eta_interval

    t = np.concatenate([np.arange(0.0, 3001.0, 10.0), 4800.0 + np.arange(10.0, 601.0, 10.0)])
    s = np.concatenate([np.arange(0.0, 30001.0, 100.0), 30000.0 + np.arange(100.0, 6001.0, 100.0)])
    eta, _ = eta_interval(s, t, 72_000.0)
    assert eta is not None and eta.mean == pytest.approx((72_000 - s[-1]) / 10.0, rel=0.05)
    steps, times, clock = [], [], 0.0
    for step in range(100, 40_001, 100):
        clock += 10.0 + (120.0 if step % 5000 == 0 else 0.0)
        steps.append(float(step))
        times.append(clock)
    eta, _ = eta_interval(np.array(steps), np.array(times), 80_000.0)
    assert eta is not None and eta.mean == pytest.approx(4000.0 + 8 * 120.0, rel=0.05)


def test_a_latest_report_after_a_long_stall_is_said_beside_the_eta() -> None:
    """One slow interval is left out of the pace (a save, a wait in the queue), but the user sees
    that the run stood still: 10 steps in two hours where 10 s was usual."""
    steps = [float(s) for s in range(10, 1501, 10)] + [1510.0]
    times = [float(s) for s in range(10, 1501, 10)] + [1510.0 + 7200.0]
    values = [2 + 1.5 * math.exp(-s / 500) for s in steps]
    fc = forecast(steps, values, times=times, total_steps=5000)
    assert any("stood still" in w and "the last 10 steps took 2.0 h" in w for w in fc.warnings), fc.warnings
    steady = forecast(steps[:-1], values[:-1], times=times[:-1], total_steps=5000)
    assert not any("stood still" in w for w in steady.warnings)


def test_a_stall_with_reports_at_the_stuck_step_is_said_of_the_steps_not_the_reports() -> None:
    """A reporter that kept reporting the stuck step every minute: its reports are merged into one
    point, and the note read "the latest report came 1.0 h after the one before". It is said of
    the steps, which is true whether the reports kept coming or not."""
    steps = [float(s) for s in range(10, 1501, 10)] + [1510.0] * 61
    times = [float(s) / 2 for s in range(10, 1501, 10)] + [760.0 + 60.0 * k for k in range(61)]
    values = [2 + 1.5 * math.exp(-s / 500) for s in steps]
    fc = forecast(steps, values, times=times, total_steps=5000)
    (note,) = [w for w in fc.warnings if "stood still" in w]
    assert note.startswith("the last 10 steps took 1.0 h") and "latest report" not in note, note
