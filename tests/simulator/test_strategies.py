"""Baselines and the advisor row (the real core loop and sample policies) in the engine."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from simworld import HEALTHY, QUIET, one_queue, scenario

from advisor.model import Action, ActionKind, ProgressSample
from simulator.advisor_strategy import AdvisorStrategy
from simulator.baselines import FixedInterval, MedianStopping, NoAdvisor, Patience
from simulator.jobs import Phase, SimJob
from simulator.runner import policy_strategies, run_strategy
from simulator.traces import TraceJob

ROOT = Path(__file__).resolve().parents[2]


def _plateau_world(pathology: str) -> tuple[list[TraceJob], dict[str, float]]:
    jobs = [TraceJob(f"j{i}", 60.0 * i, 2, 8 * 3600.0, total_steps=8000) for i in range(4)]
    return jobs, {pathology: 1.0}


def test_patience_releases_plateaued_runs_more_than_learning_ones() -> None:
    """Patience (no 1% gain over three periods) releases plateaued runs, each saved first; on slow
    runs still learning it releases fewer, and each such release is a wrong stop (a noisy slow
    run's three flat periods fool it: that is the baseline's known failure, counted as such)."""
    released: dict[str, int] = {}
    for pathology in ("early_plateau", "slow"):
        jobs, mix = _plateau_world(pathology)
        sc = scenario(jobs, one_queue(16))
        sc.curve_mix = mix
        res = run_strategy(sc, Patience(period_s=1800.0, patience=3))
        gone = [j for j in res.jobs if j.phase is Phase.RELEASED]
        released[pathology] = len(gone)
        for j in gone:
            assert j.ckpt_time is not None and j.end_time is not None  # saved before its quota went
            assert j.end_time < j.trace.submit + 8 * 3600.0
        if pathology == "slow":
            assert res.metrics["wrong_stops"] == len(gone)
    assert released["early_plateau"] >= 2 and released["slow"] < released["early_plateau"]


def test_median_stopping_waits_for_completed_runs() -> None:
    jobs, mix = _plateau_world("early_plateau")
    sc = scenario(jobs, one_queue(16))
    sc.curve_mix = mix
    res = run_strategy(sc, MedianStopping(min_samples=3))
    assert all(j.phase is Phase.DONE for j in res.jobs)  # nothing completed before they all ran


def test_advisor_row_runs_the_core_loop_and_records_before_acting() -> None:
    strategy = policy_strategies(
        [ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"], forecast_interval_s=600.0
    )[0]
    assert isinstance(strategy, AdvisorStrategy) and strategy.name == "advisor-plateau-release"
    jobs = [TraceJob(f"j{i}", 60.0 * i, 2, 10 * 3600.0, total_steps=10000) for i in range(3)]
    sc = scenario(jobs, one_queue(16), QUIET)
    sc.curve_mix = {"hang": 1.0}
    seen: list[tuple[str, str]] = []
    original = strategy.record

    def spy(job, action, request_id, now):
        original(job, action, request_id, now)
        rec = strategy.core.record(job.key)
        assert rec is not None and any(a.request_id == request_id for a in rec.actions)
        seen.append((action.kind.value, action.rule))

    strategy.record = spy  # type: ignore[method-assign]
    res = run_strategy(sc, strategy)
    assert strategy.core.forecasts_made > 0
    released = [j for j in res.jobs if j.phase is Phase.RELEASED]
    assert released, seen
    assert ("release-quota", "stall") in seen
    for j in released:
        # a hung run is released within the stall rule's hold plus a tick or two of its hang
        hang_at = j.restart_cost + j.curve.hang_step * j.step_time  # type: ignore[operator]
        assert j.end_time is not None and j.end_time - (j.first_start or 0.0) < hang_at + 2 * 3600.0
    assert res.metrics["wrong_stops"] == 0


def test_the_advisor_row_looks_again_when_a_rule_window_falls_due() -> None:
    """A hung job sends nothing new: the stall rule's watchdog (``idle_recheck_at``) alone brings the
    next tick, so the release comes when the 30-minute window ends, not at the next (up to 30 min)
    cadence tick."""
    strategy = policy_strategies([ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"])[0]
    assert isinstance(strategy, AdvisorStrategy)
    jobs = [TraceJob(f"j{i}", 60.0 * i, 2, 10 * 3600.0, total_steps=10000) for i in range(3)]
    sc = scenario(jobs, one_queue(16), QUIET)
    sc.curve_mix = {"hang": 1.0}
    idle_at_release: dict[str, float] = {}
    original = strategy.record

    def spy(job, action, request_id, now):
        original(job, action, request_id, now)
        rec = strategy.core.record(job.key)
        if (
            action.kind.value == "release-quota"
            and action.rule == "stall"
            and rec is not None
            and rec.last_step_change is not None
        ):
            idle_at_release[job.key] = now - rec.last_step_change

    strategy.record = spy  # type: ignore[method-assign]
    run_strategy(sc, strategy)
    # a hung run near its end may be released by the plateau rule first (nothing left to learn);
    # every release by the stall rule comes as its window ends
    assert len(idle_at_release) >= 2
    assert all(1800.0 <= idle <= 1800.0 + 1.0 for idle in idle_at_release.values()), idle_at_release


def _one_job() -> SimJob:
    from simulator.jobs import build_jobs

    rows = [TraceJob("j0", 0.0, 2, 8 * 3600.0, total_steps=8000)]
    return build_jobs(rows, {"default": "cq"}, QUIET, HEALTHY, seed=0)[0]


def test_fixed_interval_counts_from_the_acknowledged_checkpoint_not_the_simulators_truth() -> None:
    """The baseline sees what a controller would: the checkpoints the job's reports carried and
    the acknowledgements of its own requests, never the job's true last save."""
    now = 10_000.0
    # the job saved a minute ago (on its own, or on SIGTERM) but no report has carried it yet
    job = _one_job()
    job.first_start, job.ckpt_step, job.ckpt_time = 0.0, 4000, now - 60.0
    fixed = FixedInterval(1800.0)
    reports = [ProgressSample(step=4100, time=now - 30.0, loss=1.0)]
    assert [a.kind for a in fixed.tick(job, reports, now)] == [ActionKind.CHECKPOINT]

    # the truth knows of no save since the start, but a report acknowledged one 5 minutes ago
    job = _one_job()
    job.first_start, job.ckpt_time = 0.0, None
    fixed = FixedInterval(1800.0)
    reports = [
        ProgressSample(step=3000, time=now - 600.0, loss=1.0),
        ProgressSample(step=3100, time=now - 300.0, loss=1.0, last_checkpoint_step=3050),
        ProgressSample(step=3200, time=now - 10.0, loss=1.0, last_checkpoint_step=3050),
    ]
    assert fixed.tick(job, reports, now) == ()
    # the same checkpoint carried on by later reports is not a new one: due an interval after it
    later = now + 1500.0
    assert [a.kind for a in fixed.tick(job, [], later)] == [ActionKind.CHECKPOINT]

    # the acknowledgement of its own request counts from when it came
    job = _one_job()
    job.first_start, job.ckpt_time = 0.0, None
    fixed = FixedInterval(1800.0)
    fixed.action_outcome(job, "sim-0-1", "acknowledged", now - 100.0)
    assert fixed.tick(job, [], now) == ()


class _ReleaseWhileQueued(NoAdvisor):
    """Releases (or stops) every job it is shown while the job waits in the queue."""

    name = "release-while-queued"
    watches_cluster = True

    def __init__(self, kind: ActionKind) -> None:
        self.kind = kind
        self.outcomes: list[tuple[str, str]] = []

    def tick(self, job: SimJob, samples: Sequence[ProgressSample], now: float) -> Sequence[Action]:
        if job.phase is Phase.PENDING:
            return (Action(self.kind, "test", "queued"),)
        return ()

    def action_outcome(self, job: SimJob, request_id: str, outcome: str, now: float) -> None:
        self.outcomes.append((job.trace.name, outcome))


def test_a_job_waiting_in_the_queue_cannot_be_released_or_stopped() -> None:
    """As the controller's release refuses a Workload waiting without quota (deactivated, it would
    drop out of the queue until someone resumes it): the request is impossible, and the job stays
    queued and runs when quota frees up."""
    for kind in (ActionKind.RELEASE_QUOTA, ActionKind.STOP):
        jobs = [TraceJob(f"j{i}", 60.0 * i, 8, 3600.0, total_steps=1000) for i in range(2)]
        strategy = _ReleaseWhileQueued(kind)
        res = run_strategy(scenario(jobs, one_queue(8)), strategy)
        assert [j.phase for j in res.jobs] == [Phase.DONE, Phase.DONE], kind
        assert strategy.outcomes == [("j1", "impossible")], kind
        first, second = res.jobs
        assert first.end_time is not None and second.first_start is not None
        assert second.first_start >= first.end_time  # it waited for the quota, then ran


def test_fixed_interval_checkpoints_once_an_interval_after_each_acknowledged_one() -> None:
    """A look an interval after a request came before its acknowledgement (the save takes time)
    and found the checkpoint too young; the baseline then waited for the look after, saving every
    second interval: an 8-hour job at 15 minutes got 16 checkpoints instead of about 32."""
    import dataclasses

    jobs = [TraceJob("j0", 0.0, 2, 8 * 3600.0, total_steps=8000)]
    sc = scenario(jobs, one_queue(16))
    sc.world = dataclasses.replace(sc.world, job_checkpoint_interval_s=None)
    res = run_strategy(sc, FixedInterval(900.0))
    (job,) = res.jobs
    ran = job.end_time - job.first_start
    # one per interval plus its save, give or take the restarts' and the last interval's
    assert ran / 900.0 * 0.8 <= job.checkpoints <= ran / 900.0 + 1


class _GraceWhileRunning(NoAdvisor):
    """Asks for a grace period at every look of a running job."""

    name = "grace-while-running"

    def __init__(self) -> None:
        self.outcomes: list[str] = []

    def first_tick(self, job: SimJob) -> float | None:
        return 600.0

    def tick(self, job: SimJob, samples: Sequence[ProgressSample], now: float) -> Sequence[Action]:
        if job.phase is Phase.RUNNING and not self.outcomes:
            return (Action(ActionKind.SET_GRACE_PERIOD, "test", "grace", {"grace_period_s": 120}),)
        return ()

    def action_outcome(self, job: SimJob, request_id: str, outcome: str, now: float) -> None:
        self.outcomes.append(outcome)


def test_a_grace_period_for_a_running_job_is_impossible_as_the_controller_says() -> None:
    """Trainer takes a runtime patch only while the job is suspended: the controller reports a
    grace period for a running TrainJob impossible, and so does the simulator (it said done)."""
    strategy = _GraceWhileRunning()
    res = run_strategy(scenario([TraceJob("j0", 0.0, 8, 3600.0, total_steps=1000)], one_queue(8)), strategy)
    assert strategy.outcomes == ["impossible"]
    assert res.jobs[0].grace_s != 120.0
