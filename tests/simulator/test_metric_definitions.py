"""The row metrics' definitions: wrong stops at three thresholds, near-end releases of healthy runs
counted apart and not as savings, and the JCT of cut runs apart from completions."""

from __future__ import annotations

import pytest

from simulator.accounting import SimRecord
from simulator.baselines import NoAdvisor
from simulator.jobs import Phase
from simulator.metrics import (
    NEAR_END_FRACTION,
    completion_times_s,
    row_metrics,
    victim_scores,
    wrong_stop_counts,
)
from simulator.runner import run_strategy
from simulator.traces import TraceJob
from tests.simulator.simworld import HEALTHY, one_queue, scenario


def _finished_jobs(n: int = 3):  # type: ignore[no-untyped-def]
    sc = scenario([TraceJob(f"j{i}", 0.0, 8, 3600.0, total_steps=3600) for i in range(n)], one_queue(8 * n))
    res = run_strategy(sc, NoAdvisor(), library=HEALTHY)
    assert all(j.phase is Phase.DONE for j in res.jobs)
    return sc, res


def _cut(job, step: float) -> None:  # type: ignore[no-untyped-def]
    """Pretend the run was released at ``step`` (its GPU time up to there only)."""
    job.phase = Phase.RELEASED
    job.end_step = step
    job.end_time = job.trace.submit + step * job.step_time + job.restart_cost
    job.gpu_s = job.gpus * (job.end_time - job.trace.submit)
    job.nonlearning_gpu_s = job.gpus * max(0.0, step - job.learning_end) * job.step_time


def test_wrong_stops_are_counted_at_each_threshold_from_the_hidden_curve() -> None:
    _sc, res = _finished_jobs()
    a, b, c = res.jobs
    _cut(a, 0.2 * a.total_steps)  # early: far from its plateau
    _cut(b, 0.9 * b.total_steps)
    ahead = {j.trace.name: j.curve.remaining_improvement(j.end_step) for j in (a, b)}
    counts = wrong_stop_counts(res.jobs)
    assert set(counts) == {"0.005", "0.01", "0.02"}
    for key, t in (("0.005", 0.005), ("0.01", 0.01), ("0.02", 0.02)):
        assert counts[key] == sum(1 for v in ahead.values() if v > t), (key, ahead)
    assert counts["0.005"] >= counts["0.01"] >= counts["0.02"] >= 1  # the early cut is wrong at 2%
    assert c.phase is Phase.DONE  # a completed run is never a wrong stop


def test_a_healthy_run_cut_near_its_end_is_no_saving() -> None:
    sc, res = _finished_jobs()
    base = row_metrics("no-advisor", res.jobs, res.record, sc.capacity, None, 0.0, victims=False)
    job = res.jobs[0]
    _cut(job, (1.0 - NEAR_END_FRACTION / 2) * job.total_steps)
    m = row_metrics("cut", res.jobs, res.record, sc.capacity, base["gpu_hours"], 0.0, victims=False)
    assert m["near_end_releases"] == 1
    assert m["gpu_hours"] < base["gpu_hours"]  # it did hold its GPUs for less time ...
    assert m["gpu_hours_freed"] == pytest.approx(0.0, abs=0.05)  # ... but that is not a saving
    assert m["near_end_gpu_hours"] == pytest.approx(base["gpu_hours"] - m["gpu_hours"], rel=0.05)
    # the non-learning tail it would have run is still charged to the row
    assert m["gpu_hours_nonlearning"] == pytest.approx(base["gpu_hours_nonlearning"], rel=0.05)


def test_a_run_with_a_pathology_cut_near_its_end_is_a_saving_not_a_near_end_release() -> None:
    """Near-end releases are of healthy runs only: a run that diverged or hung near its end and was
    cut there saved what it would have burnt."""
    import dataclasses

    sc, res = _finished_jobs()
    job = res.jobs[0]
    job.curve = dataclasses.replace(job.curve, pathology="diverge", at=0.8)
    _cut(job, (1.0 - NEAR_END_FRACTION / 2) * job.total_steps)
    base = row_metrics("no-advisor", res.jobs, res.record, sc.capacity, None, 0.0, victims=False)
    m = row_metrics("cut", res.jobs, res.record, sc.capacity, base["gpu_hours"] + 1.0, 0.0, victims=False)
    assert m["near_end_releases"] == 0


def test_a_cut_earlier_in_the_budget_is_not_near_the_end() -> None:
    sc, res = _finished_jobs()
    job = res.jobs[0]
    _cut(job, 0.5 * job.total_steps)
    m = row_metrics("cut", res.jobs, res.record, sc.capacity, 0.0, 0.0, victims=False)
    assert m["near_end_releases"] == 0


def test_the_jct_of_cut_runs_is_reported_apart_from_completions() -> None:
    sc, res = _finished_jobs()
    done = [j.end_time - j.trace.submit for j in res.jobs[1:]]
    _cut(res.jobs[0], 0.3 * res.jobs[0].total_steps)
    m = row_metrics("cut", res.jobs, res.record, sc.capacity, None, 0.0, victims=False)
    assert m["jct_mean_s"] == pytest.approx(sum(done) / len(done))
    assert m["jct_released_mean_s"] == pytest.approx(res.jobs[0].end_time - res.jobs[0].trace.submit)
    # the report's JCT plot draws the same completions (it drew the released job too)
    assert completion_times_s(res.jobs) == pytest.approx(done)


def test_the_non_learning_hours_by_pathology_and_the_near_end_charge_add_up_in_the_report() -> None:
    """The non-learning tail a near-end release is still charged belongs to no pathology: the
    report's by-pathology table showed shares summing short of the non-learn column by it. Now
    the charge is a metric and a column, and each row of the table adds up to non-learn."""
    from simulator.report import _by_pathology

    sc, res = _finished_jobs()
    job = res.jobs[0]
    _cut(job, (1.0 - NEAR_END_FRACTION / 2) * job.total_steps)
    m = row_metrics("cut", res.jobs, res.record, sc.capacity, None, 0.0, victims=False)
    charge = m["near_end_nonlearning_gpu_hours"]
    assert charge > 0
    shares = sum(m["gpu_hours_nonlearning_by_pathology"].values())
    assert shares + charge == pytest.approx(m["gpu_hours_nonlearning"], abs=0.01)
    table = _by_pathology([m])
    assert "near-end charge" in table[4] and table[4].endswith("| non-learn |")
    cells = [float(c) for c in table[-1].strip("| ").split(" | ")[1:]]
    assert sum(cells[:-1]) == pytest.approx(cells[-1], abs=0.1 * len(cells))
    assert cells[-2] == pytest.approx(charge, abs=0.05)


def test_a_row_that_flags_no_victim_has_neither_victim_precision_nor_recall() -> None:
    """Preemptions happened but the row flagged no victim (its policy has no preemption guard):
    it predicted nothing, so the JSON says null for both, as the table says "-" (recall 0.0
    read as a guard that missed every preemption). A row that flags gets both."""
    preempted = SimRecord(preemptions=[(3, 100.0), (5, 900.0)])
    assert victim_scores(preempted) == (None, None)
    flagged = SimRecord(predictions=[(3, 50.0), (4, 60.0)], preemptions=[(3, 100.0), (5, 900.0)])
    assert victim_scores(flagged) == (0.5, 0.5)
