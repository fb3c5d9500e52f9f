"""The sample plateau-release policy in the engine: plateaued runs go, learning runs stay, and the
advisor looks closely at a job only while a decision is near."""

from __future__ import annotations

import itertools
from pathlib import Path

from simworld import QUIET, one_queue, scenario

from simulator.advisor_strategy import AdvisorStrategy
from simulator.curves import CurveLibrary, load_curve_params
from simulator.jobs import Phase, SimJob
from simulator.runner import policy_strategies, run_strategy
from simulator.traces import TraceJob

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"


def _row() -> AdvisorStrategy:
    strategy = policy_strategies([SAMPLE])[0]
    assert isinstance(strategy, AdvisorStrategy)
    return strategy


def _jobs(n: int, hours: float, gpus: int = 2) -> list[TraceJob]:
    return [TraceJob(f"j{i}", 60.0 * i, gpus, hours * 3600.0, total_steps=8000) for i in range(n)]


def _learning_end_and_end(job: SimJob) -> tuple[float, float]:
    """When the run crossed its hidden "stopped learning" step, and when it would have finished
    (it ran without interruption)."""
    assert job.first_start is not None
    start = job.first_start + job.restart_cost
    return start + job.learning_end * job.step_time, start + job.total_steps * job.step_time


def test_plateaued_runs_are_released_within_hours_of_their_plateau_after_a_checkpoint() -> None:
    """Constant-LR fine-tunes that plateau (a plateau on a decaying schedule still gains what its
    anneal brings, so it has not stopped learning when its loss first goes flat)."""
    sc = scenario(_jobs(3, 8.0), one_queue(16), QUIET, seed=3)
    params = {**load_curve_params(), "schedules": {"constant": 1.0}}
    res = run_strategy(sc, _row(), library=CurveLibrary(params, mix={"early_plateau": 1.0}))
    for job in res.jobs:
        assert job.phase is Phase.RELEASED, job.trace.name
        assert job.end_time is not None and job.checkpoints >= 1  # saved before its quota went
        stopped, end = _learning_end_and_end(job)
        # released after the plateau began and early enough to give back at least 30% of the
        # GPU time the run would have burnt without learning (the forecast needs a few hours of
        # flat loss to be sure, and the window must hold)
        assert stopped < job.end_time < stopped + 0.7 * (end - stopped), (job.trace.name, stopped, end)
    assert res.metrics["wrong_stops"] == 0


def test_runs_that_still_learn_are_never_released() -> None:
    for mix, seed in (({"slow": 1.0}, 1), ({"none": 1.0}, 2)):
        sc = scenario(_jobs(4, 6.0), one_queue(16), QUIET, seed=seed)
        sc.curve_mix = mix
        res = run_strategy(sc, _row())
        assert res.metrics["wrong_stops"] == 0, mix
        for job in res.jobs:
            if job.phase is not Phase.DONE:  # a cosine run's flat tail may go, never its learning part
                assert job.curve.remaining_improvement(job.end_step) <= 0.01, (mix, job.trace.name)


def test_a_job_near_a_decision_is_forecast_every_watch_interval_and_a_quiet_one_rarely() -> None:
    strategy = _row()
    sc = scenario(_jobs(2, 8.0), one_queue(16), QUIET, seed=3)
    sc.curve_mix = {"early_plateau": 1.0}
    forecasts: dict[str, list[tuple[float, str]]] = {}
    original = strategy.tick

    def spy(job, samples, now):
        acts = original(job, samples, now)
        rec = strategy.core.record(job.key)
        assert rec is not None and rec.last_decision is not None
        log = forecasts.setdefault(job.key, [])
        if rec.forecast_at is not None and (not log or log[-1][0] != rec.forecast_at):
            log.append((rec.forecast_at, rec.last_decision.advice))
        return acts

    strategy.tick = spy  # type: ignore[method-assign]
    run_strategy(sc, strategy)
    for key, log in forecasts.items():
        gaps_holding = [b[0] - a[0] for a, b in itertools.pairwise(log) if a[1] == "plateau?"]
        assert gaps_holding, key  # the rule held its window at least once before acting
        assert max(gaps_holding) <= strategy.looks.watch_interval_s + 1.0, (key, gaps_holding)
        quiet = [b[0] - a[0] for a, b in itertools.pairwise(log) if a[0] > 3600.0 and a[1] == "continue"]
        assert all(g >= strategy.looks.watch_interval_s for g in quiet), (key, quiet)


def test_only_rows_that_act_on_forecast_probabilities_watch() -> None:
    samples = sorted((ROOT / "manifests" / "samples").glob("policy-*.yaml"))
    rows = {s.name: s for s in policy_strategies(samples)}
    plateau = rows["advisor-plateau-release"]
    assert isinstance(plateau, AdvisorStrategy)
    assert plateau.looks.watch_plateau and plateau.looks.watch_divergence
    growth = rows["advisor-elastic-growth"]  # its plateau rule only recommends
    assert isinstance(growth, AdvisorStrategy) and not growth.looks.watch_plateau


def test_a_preempted_run_admitted_again_after_a_long_wait_is_not_taken_for_hung() -> None:
    """Preempted an hour in by a two-hour high-priority job: when it comes back, its last step
    change is two hours old, but it was waiting in the queue, not stuck. A still higher-priority
    workload that does not fit waits in the queue, so the advisor looks at the job the moment it is
    admitted again (the controller's watch event), before its first report after the restart."""
    low = TraceJob("low", 0.0, 8, 4 * 3600.0, total_steps=8000, priority=0)
    high = TraceJob("high", 3600.0, 8, 2 * 3600.0, total_steps=8000, priority=10)
    wide = TraceJob("wide", 3700.0, 16, 3600.0, total_steps=8000, priority=20)  # never fits in 8 GPUs
    sc = scenario([low, high, wide], one_queue(8, within_cluster_queue="LowerPriority"), QUIET, seed=5)
    sc.curve_mix = {"slow": 1.0}  # still learning when it is preempted
    strategy = _row()
    rules: list[tuple[str, str, float]] = []
    original = strategy.record

    def spy(job, action, request_id, now):
        original(job, action, request_id, now)
        rules.append((job.trace.name, action.rule, now))

    strategy.record = spy  # type: ignore[method-assign]
    res = run_strategy(sc, strategy)
    low_job = res.jobs[0]
    assert low_job.preemptions == 1 and res.metrics["preemptions"] == 1
    assert not [r for r in rules if r[1] == "stall"], rules
    back = res.jobs[1].end_time  # it was admitted again when the high-priority job finished
    assert back is not None and low_job.end_time is not None and low_job.end_time > back + 3600.0


def test_any_forecast_interval_gives_a_finite_tick_cadence() -> None:
    """``--forecast-interval`` below the watch interval, or zero (a forecast at every tick), must
    neither be refused nor make a job tick without time passing."""
    for interval in (0.0, 60.0, 1200.0):
        strategy = policy_strategies([SAMPLE], forecast_interval_s=interval)[0]
        assert isinstance(strategy, AdvisorStrategy)
        assert 0 < strategy.looks.watch_interval_s <= max(interval, 300.0)
        sc = scenario(_jobs(1, 1.0), one_queue(16), QUIET, seed=3)
        sc.curve_mix = {"early_plateau": 1.0}
        res = run_strategy(sc, strategy)
        assert 0 < res.record.ticks < 100, (interval, res.record.ticks)
