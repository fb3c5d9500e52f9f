"""Sanity of the engine against closed forms: JCT without faults, Young/Daly lost work, quota
never exceeded, every job accounted for."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest
from simworld import HEALTHY, QUIET, one_queue, scenario

from simulator.baselines import FixedInterval, NoAdvisor
from simulator.jobs import Phase
from simulator.quota import QuotaModel
from simulator.runner import run_strategy
from simulator.scenario import default_scenario
from simulator.traces import TraceJob


def test_jct_equals_start_cost_plus_compute_on_an_idle_cluster() -> None:
    jobs = [TraceJob(f"j{i}", 100.0 * i, 4, 3600.0 + 600 * i, total_steps=1000 + i) for i in range(6)]
    res = run_strategy(scenario(jobs, one_queue(64)), NoAdvisor(), library=HEALTHY)
    for job in res.jobs:
        assert job.phase is Phase.DONE
        expected = job.restart_cost + job.total_steps * job.step_time
        assert job.end_time is not None
        assert job.end_time - job.trace.submit == pytest.approx(expected, rel=1e-9)
        assert job.queue_wait_s == 0.0 and job.lost_gpu_s == 0.0


def test_jct_in_a_fifo_queue_is_the_sum_of_the_jobs_ahead() -> None:
    jobs = [TraceJob(f"j{i}", float(i), 8, 1800.0, total_steps=900) for i in range(4)]
    res = run_strategy(scenario(jobs, one_queue(8)), NoAdvisor(), library=HEALTHY)
    finish = 0.0
    for job in sorted(res.jobs, key=lambda j: j.trace.submit):
        start = max(finish, job.trace.submit)
        finish = start + job.restart_cost + job.total_steps * job.step_time
        assert job.end_time == pytest.approx(finish, rel=1e-9)


def test_own_periodic_checkpoints_add_their_cost_to_jct() -> None:
    world = replace(QUIET, job_checkpoint_interval_s=1000.0)
    jobs = [TraceJob("j", 0.0, 1, 3500.0, total_steps=3500)]
    res = run_strategy(scenario(jobs, one_queue(8), world), NoAdvisor(), library=HEALTHY)
    job = res.jobs[0]
    assert job.checkpoints == 3  # at 1000, 2000 and 3000 s of compute
    assert job.end_time == pytest.approx(job.restart_cost + 3500.0 + 3 * job.ckpt_cost, rel=1e-9)
    assert job.ckpt_gpu_s == pytest.approx(3 * job.ckpt_cost, rel=1e-9)


def test_lost_work_under_periodic_checkpointing_matches_young_daly() -> None:
    """Failures are exponential on the compute clock; with a checkpoint every T of compute the
    work lost per failure is the truncated-exponential mean, ~T/2 when T << MTBF."""
    mtbf_h, interval = 40.0, 1800.0
    world = replace(QUIET, node_mtbf_h=mtbf_h, job_checkpoint_interval_s=interval, gpus_per_node=8)
    jobs = [TraceJob(f"j{i}", 0.0, 1, 20 * 3600.0, total_steps=72000) for i in range(300)]
    res = run_strategy(scenario(jobs, one_queue(300), world, seed=7), NoAdvisor(), library=HEALTHY)
    failures = sum(j.failures_met for j in res.jobs)
    lost = sum(j.lost_gpu_s for j in res.jobs)
    lam = 1.0 / (mtbf_h * 3600.0)
    per_failure = 1.0 / lam - interval * math.exp(-lam * interval) / (1.0 - math.exp(-lam * interval))
    assert failures > 100
    assert lost / failures == pytest.approx(per_failure, rel=0.10)
    assert per_failure == pytest.approx(interval / 2, rel=0.02)  # Young's first-order T/2
    compute = sum(j.compute for j in res.jobs)
    assert failures == pytest.approx(compute * lam, rel=0.15)


class CheckedQuota(QuotaModel):
    """Asserts the quota invariants after every scheduling pass."""

    def schedule(self, now: float):
        out = super().schedule(now)
        for name, q in self.queues.items():
            assert q.usage == sum(w.gpus for w in q.admitted.values())
            limit = q.spec.borrowing_limit
            if limit is not None:
                assert q.usage <= q.spec.nominal_gpus + limit, name
        assert self.usage() <= self.capacity()
        return out


def test_quota_never_exceeded_and_every_job_accounted(monkeypatch: pytest.MonkeyPatch) -> None:
    import simulator.runner as runner

    monkeypatch.setattr(runner, "QuotaModel", CheckedQuota)
    sc = default_scenario(seed=3, n_jobs=60)
    for strategy in (NoAdvisor(), FixedInterval(1800.0)):
        res = run_strategy(sc, strategy)
        assert all(u <= sc.capacity for _t, u in res.record.usage)
        for job in res.jobs:
            assert job.phase.terminal, job.trace.name
            assert job.end_time is not None and job.end_time >= job.trace.submit
        # GPU-seconds booked on the jobs equal the area under the usage curve
        pts = [*res.record.usage, (res.record.end_time, 0)]
        area = sum(u * (t1 - t0) for (t0, u), (t1, _u) in itertools.pairwise(pts))
        assert sum(j.gpu_s for j in res.jobs) == pytest.approx(area, rel=1e-6)
        m = res.metrics
        assert m["completed"] + m["released_or_stopped"] + m["unfinished"] == len(res.jobs)


def test_same_seed_same_result_and_fixed_interval_cuts_preemption_loss() -> None:
    sc = default_scenario(seed=1, n_jobs=60)
    a = run_strategy(sc, NoAdvisor()).metrics
    b = run_strategy(sc, NoAdvisor()).metrics
    assert {k: v for k, v in a.items() if k != "wall_seconds"} == {
        k: v for k, v in b.items() if k != "wall_seconds"
    }
    fixed = run_strategy(sc, FixedInterval(900.0)).metrics
    assert fixed["checkpoint_overhead_gpu_hours"] > a["checkpoint_overhead_gpu_hours"]
    if a["preemptions"]:
        assert fixed["lost_work_preemption_gpu_hours"] < a["lost_work_preemption_gpu_hours"]


def test_progress_reports_come_every_few_minutes_whatever_the_run_length() -> None:
    """A month-long trace job logs like any trainer (every N steps), not 240 times in all: a
    3-hour silence would look like a hang to the stall rule."""
    from simulator.curves import CurveLibrary
    from simulator.jobs import WorldConfig, build_jobs
    from simulator.traces import TraceJob

    world = WorldConfig()
    rows = [
        TraceJob("short", 0.0, 1, 600.0),
        TraceJob("day", 0.0, 8, 86400.0),
        TraceJob("month", 0.0, 8, 734 * 3600.0),
    ]
    jobs = build_jobs(rows, {"default": "cq"}, world, CurveLibrary(mix={"none": 1.0}), seed=0)
    intervals = {j.trace.name: j.report_interval for j in jobs}
    assert intervals["short"] == world.min_report_interval_s
    assert intervals["day"] == 86400.0 / world.report_points
    assert intervals["month"] == world.max_report_interval_s


def test_a_checkpoint_acknowledgement_reports_the_checkpoint_as_it_stood_then() -> None:
    """The ack is logged when the save ends and built into a sample when a tick collects it: it
    carries that checkpoint, not a later one, and the loss the job would have logged at its step."""
    from simulator.engine import Simulation
    from simulator.progress_reports import collect_samples

    sc = scenario([TraceJob("a", 0.0, 8, 3600.0, total_steps=3600)], one_queue(8))
    res = run_strategy(sc, NoAdvisor(), library=HEALTHY)
    job = res.jobs[0]
    sim = Simulation([job], QuotaModel(sc.queues), sc.world, NoAdvisor())
    job.reports_total = job.reports_lr = True  # a reporter that sends both (HF's callback)
    job.step, job.ckpt_step, job.ckpt_time, job.ckpt_request = 600.0, 600, 50.0, "r1"
    job.checkpoint_report(100.0)
    job.ckpt_step, job.ckpt_request = 900, "r2"  # a later save before the tick
    sim.now = job.last_report = 100.0
    (sample,) = collect_samples(job, sim.now)
    assert (sample.step, sample.time) == (600, 100.0)
    assert (sample.last_checkpoint_step, sample.last_checkpoint_request) == (600, "r1")
    # read back from the trainerStatus the job would carry: values as text (7 significant digits)
    assert sample.source == "trainerStatus"
    assert sample.loss == pytest.approx(job.curve.observed(600), rel=1e-6)
    assert sample.learning_rate == pytest.approx(job.curve.learning_rate(600), rel=1e-6)
    assert not job.forced_samples


def test_a_regular_report_carries_the_checkpoint_as_it_stood_when_it_was_made() -> None:
    """Reports are generated at the look: each must carry the last checkpoint of its own time,
    or a report made before a save would show it, up to a look interval early (what no
    controller could read)."""
    from simulator.engine import Simulation
    from simulator.progress_reports import collect_samples

    sc = scenario([TraceJob("a", 0.0, 8, 3600.0, total_steps=3600)], one_queue(8))
    res = run_strategy(sc, NoAdvisor(), library=HEALTHY)
    job = res.jobs[0]
    Simulation([job], QuotaModel(sc.queues), sc.world, NoAdvisor())
    job.phase, job.phase_start, job.phase_step = Phase.RUNNING, 600.0, 600.0  # at step 600 at 600 s
    job.ckpt_step, job.ckpt_time, job.ckpt_request = 100, 10.0, "r1"
    job.ckpt_seen, job.ckpt_changes, job.forced_samples = job.current_checkpoint(), [], []
    job.report_interval, job.last_report, job.last_reported_step = 60.0, 0.0, 0
    job.trajectory = [(0.0, 0.0)]  # a step a second since 0 s
    # a save of step 300 ends at 330 s
    job.ckpt_step, job.ckpt_time, job.ckpt_request = 300, 330.0, "r2"
    job.note_checkpoint(330.0)
    samples = collect_samples(job, 600.0)
    carried = {s.time: (s.last_checkpoint_step, s.last_checkpoint_request) for s in samples}
    assert carried[300.0] == (100, "r1") and carried[360.0] == (300, "r2") and carried[600.0] == (300, "r2")
    # the next look starts from the checkpoint the reports last carried
    assert job.ckpt_seen == (300, "r2") and job.ckpt_changes == []


def test_a_run_that_hangs_between_two_looks_stops_reporting_new_steps_at_its_hang() -> None:
    """The reports a tick collects are interpolated between the job's known (time, step) points:
    a run that hung since the last look must show its steps stuck from the hang on, not creeping
    up to the tick (which would hide the hang from the stall rule until the look after)."""

    class RareLooks(NoAdvisor):
        name = "rare"

        def __init__(self) -> None:
            self.samples: list[tuple[float, int]] = []
            self.ticks: list[float] = []

        def first_tick(self, job):  # type: ignore[no-untyped-def]
            return 600.0

        def next_tick(self, job, now):  # type: ignore[no-untyped-def]
            return 4 * 3600.0

        def tick(self, job, samples, now):  # type: ignore[no-untyped-def]
            self.ticks.append(now)
            self.samples.extend((s.time, s.step) for s in samples)
            return ()

    sc = scenario([TraceJob("h", 0.0, 8, 10 * 3600.0, total_steps=10_000)], one_queue(8), QUIET, seed=1)
    sc.curve_mix = {"hang": 1.0}
    strategy = RareLooks()
    res = run_strategy(sc, strategy)
    job = res.jobs[0]
    assert job.hang_step is not None
    hung_at = job.first_start + job.restart_cost + job.hang_step * job.step_time
    assert any(t > hung_at + 3600.0 for t in strategy.ticks)  # a look long after the hang
    last_time, last_step = strategy.samples[-1]  # only reports with a new step are logged
    assert last_step == job.hang_step
    assert hung_at - job.report_interval <= last_time <= hung_at + job.report_interval
