"""``forecast_run_fraction``: a quiet job is re-forecast at most every that fraction of its expected
run (total steps over the measured throughput) when that is longer than the wall-clock bound; the
bound is off by default, and a per-call bound (a job near a decision) still wins."""

from __future__ import annotations

import pytest
from test_loop import JOB, Recorder, make_core

from advisor.core import AdvisorCore
from advisor.model import ClusterView, ProgressSample

TOTAL = 100_000  # steps; fed at 0.1 steps/s (1 step every 10 s), so the whole run is 1,000,000 s


def _feed_with_total(core: AdvisorCore, steps: range) -> None:
    for i in steps:
        core.observe(
            JOB.key,
            ProgressSample(step=i, loss=2.0 / (1 + i), time=10.0 * i, total_steps=TOTAL),
            now=10.0 * i,
        )


def test_the_expected_run_comes_from_total_steps_and_throughput() -> None:
    core = make_core(Recorder(), forecast_interval_s=60.0, forecast_run_fraction=0.01)
    assert core.expected_run_s(JOB.key) is None and core.forecast_bound(JOB.key) == 60.0
    _feed_with_total(core, range(1, 50))
    assert core.steps_per_second(JOB.key) == pytest.approx(0.1)
    assert core.expected_run_s(JOB.key) == pytest.approx(1e6)
    assert core.forecast_bound(JOB.key) == pytest.approx(1e4)  # 1% of the run beats 60 s


def test_a_long_quiet_job_is_reforecast_once_per_fraction_of_its_run() -> None:
    rec = Recorder()
    core = make_core(rec, forecast_interval_s=60.0, forecast_run_fraction=0.01)
    made = []
    for k in range(1, 40):  # 39 looks, 1,000 s apart: 39,000 s = 3.9% of the run
        _feed_with_total(core, range(100 * (k - 1) + 1, 100 * k + 1))
        core.evaluate(JOB, ClusterView(), now=1000.0 * k)
        made.append(core.forecasts_made)
    assert made[-1] == 4  # at 1,000 s, then every 10,000 s (1% of the run)
    assert made[:10] == [1] * 10 and made[10] == 2


def test_a_per_call_bound_wins_over_the_run_fraction() -> None:
    core = make_core(Recorder(), forecast_interval_s=60.0, forecast_run_fraction=0.01)
    _feed_with_total(core, range(1, 101))
    core.evaluate(JOB, ClusterView(), now=1000.0)
    _feed_with_total(core, range(101, 131))
    core.evaluate(JOB, ClusterView(), now=1300.0, forecast_interval_s=300.0)
    assert core.forecasts_made == 2


def test_off_by_default_and_a_short_run_keeps_the_wall_clock_bound() -> None:
    core = make_core(Recorder(), forecast_interval_s=60.0)
    _feed_with_total(core, range(1, 50))
    assert core.forecast_bound(JOB.key) == 60.0
    short = make_core(Recorder(), forecast_interval_s=60.0, forecast_run_fraction=1e-6)
    _feed_with_total(short, range(1, 50))
    assert short.forecast_bound(JOB.key) == 60.0  # 1 s of the run: the wall-clock floor holds


def test_a_bad_fraction_is_refused() -> None:
    with pytest.raises(ValueError, match="forecast_run_fraction"):
        AdvisorCore(forecast_run_fraction=1.5)


def test_throughput_without_total_steps_gives_no_run_length() -> None:
    core = make_core(Recorder(), forecast_interval_s=60.0, forecast_run_fraction=0.5)
    for i in range(1, 20):
        core.observe(JOB.key, ProgressSample(step=i, loss=1.0 / i, time=10.0 * i), now=10.0 * i)
    assert core.steps_per_second(JOB.key) == pytest.approx(0.1)
    assert core.expected_run_s(JOB.key) is None and core.forecast_bound(JOB.key) == 60.0
