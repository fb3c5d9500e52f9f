"""The engine's update path: every progress update shows at once, forecasts stay rate-limited,
re-evaluations happen when a decision asks for them, and idle re-evaluations write nothing."""

from __future__ import annotations

from typing import Any

from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.render import iso
from advisor.core import AdvisorCore
from advisor.model import ClusterView, Curve, Decision, Forecast, Interval, JobView
from tests.controller.fakes import FakeApi, trainjob

T0 = 1_800_000_000.0
KEY = "team-a/llm"


class Counting:
    """A forecaster and a decider that count their calls."""

    def __init__(self, recheck_in: float | None = None) -> None:
        self.forecasts: list[int] = []
        self.decisions: list[float] = []
        self.recheck_in = recheck_in

    def forecast(self, curve: Curve, total: int | None) -> Forecast:
        self.forecasts.append(len(curve))
        return Forecast(
            final_loss=Interval(0.5, 0.4, 0.6), plateau_probability=0.1, divergence_probability=0.0
        )

    def decide(self, job: JobView, cluster: ClusterView, policy: Any, *, now: float) -> Decision:
        self.decisions.append(now)
        recheck = now + self.recheck_in if self.recheck_in is not None else None
        return Decision(job=job.key, policy="p", advice="learning", recheck_at=recheck)


def make(api: FakeApi, counting: Counting, **cfg: Any) -> Engine:
    core = AdvisorCore(
        policies=[object()],
        forecast_interval_s=30.0,
        forecaster=counting.forecast,
        selector=lambda ps, job: ps[0],
        decider=counting.decide,
    )
    config = EngineConfig(write_interval_s=0, writer_workers=0, forecast_interval_s=30.0, **cfg)
    return Engine(api, config=config, core=core)


def report(e: Engine, step: int, at: float, name: str = "llm", uid: str = "uid-1") -> None:
    e.enqueue("job", "MODIFIED", trainjob(name=name, uid=uid, step=step, loss=1.0 / step, updated=iso(at)))


def test_every_update_is_written_while_the_forecast_stays_rate_limited() -> None:
    api, counting = FakeApi(), Counting()
    e = make(api, counting)
    for i in range(24):  # 2 minutes of reports every 5 s
        now = T0 + 5.0 * i
        report(e, 10 * (i + 1), now)
        e.step(now)
        assert api.forecasts[KEY]["status"]["progress"]["step"] == 10 * (i + 1)  # shown at once
    assert len(counting.forecasts) == 4  # at 0, 30, 60, 90 s: not once per update
    assert len(counting.decisions) == 4  # the decision follows the forecast
    writes = [c for c in api.log if c[0] in ("write_forecast", "json_patch_forecast")]
    assert len(writes) == 24  # one per update: evaluations go out in the update's own write
    status = api.forecasts[KEY]["status"]
    assert status["forecast"]["finalLoss"]["mean"] == 0.5 and status["recommendation"]["advice"] == "learning"
    assert status["lastSampleTime"] == iso(T0 + 5.0 * 23)
    assert status["history"]["count"] == 24
    stages = {
        s: e.metrics.registry.get_sample_value("trainjob_advisor_pipeline_seconds_count", {"stage": s})
        for s in ("queue", "engine", "writer_wait", "write")
    }
    assert all(v and v >= 24 for v in stages.values()), stages


def test_a_decision_recheck_time_is_honoured_without_new_progress() -> None:
    api, counting = FakeApi(), Counting(recheck_in=7.0)
    e = make(api, counting, evaluate_interval_s=30.0)
    report(e, 10, T0)
    e.step(T0)
    assert counting.decisions == [T0]
    e.step(T0 + 5.0)
    assert counting.decisions == [T0]  # not due yet, and nothing new arrived
    counting.recheck_in = None  # the next decision asks for nothing
    e.step(T0 + 7.0)
    assert counting.decisions == [T0, T0 + 7.0]  # the decision asked for it, before the 30 s interval
    e.step(T0 + 14.0)
    e.step(T0 + 30.0)
    assert counting.decisions == [T0, T0 + 7.0]  # no recheck asked: the interval rules (30 s after 7)
    e.step(T0 + 37.0)
    assert counting.decisions == [T0, T0 + 7.0, T0 + 37.0]


def test_an_idle_re_evaluation_that_changes_nothing_writes_nothing() -> None:
    api, counting = FakeApi(), Counting()
    e = make(api, counting, evaluate_interval_s=10.0)
    report(e, 10, T0)
    e.step(T0)
    writes = [c for c in api.log if c[0] in ("write_forecast", "json_patch_forecast")]
    for k in range(1, 4):
        e.step(T0 + 10.0 * k)
    assert len(counting.decisions) == 4
    assert [c for c in api.log if c[0] in ("write_forecast", "json_patch_forecast")] == writes


def test_forecasts_beyond_the_step_budget_wait_but_every_job_is_shown() -> None:
    api, counting = FakeApi(), Counting()
    e = make(api, counting, evaluate_budget_s=0.0)  # one full evaluation per step
    for j in range(5):
        report(e, 10, T0, name=f"job-{j}", uid=f"uid-{j}")
    assert e.step(T0) == 1
    assert len(counting.forecasts) == 1
    assert {k.split("/")[1] for k in api.forecasts} == {f"job-{j}" for j in range(5)}  # all shown
    for k in range(1, 5):
        assert e.step(T0 + 0.2 * k) == 1
    assert len(counting.forecasts) == 5  # the rest, one per step, oldest first
    assert all(f["status"]["forecast"] is not None for f in api.forecasts.values())


def test_policy_status_counts_jobs_actions_and_flagged_gpu_hours() -> None:
    from advisor.controller.policystatus import SHARD_REFRESH_S
    from advisor.model import Action, ActionKind, Mode

    api = FakeApi()
    plateaued = Forecast(
        final_loss=Interval(0.5, 0.4, 0.6), plateau_probability=0.95, divergence_probability=0.0
    )

    def decide(job: JobView, cluster: ClusterView, policy: Any, *, now: float) -> Decision:
        acts = () if job.actions else (Action(ActionKind.RECOMMEND, "plateau", "flat for 20m"),)
        return Decision(job=job.key, policy=policy.name, mode=Mode.RECOMMEND, actions=acts, advice="plateau")

    core = AdvisorCore(forecast_interval_s=0, forecaster=lambda c, t: plateaued, decider=decide)
    e = Engine(
        api,
        config=EngineConfig(
            write_interval_s=0, writer_workers=0, forecast_interval_s=0, policy_status_interval_s=60
        ),
        core=core,
    )
    body = {
        "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
        "kind": "AdvisorPolicy",
        "metadata": {"name": "flat", "generation": 1},
        "spec": {"mode": "Recommend"},
        "status": {"gpuHoursFlaggedNonLearning": 2.0},  # written by an earlier controller
    }
    e.enqueue("policy", "ADDED", body)
    for i in range(13):  # an hour of reports, every 5 minutes, from a 2 x 8 GPU job
        report(e, 10 * (i + 1), T0 + 300.0 * i)
        e.step(T0 + 300.0 * i)
    figures = [c[2] for c in api.log if c[0] == "policy_status" and "jobsMatched" in c[2]]
    assert len(figures) >= 2  # refreshed at a bounded rate (every 60 s here), only when changed
    last = figures[-1]
    assert last["jobsMatched"] == 1 and last["matchedJobs"] == [KEY]
    assert last["actionsTaken"] == 0 and last["recommendations"] == 1 and last["actionsByKind"] == {}
    # 16 GPUs flagged plateaued for the hour between the first and the last evaluation, plus the 2 h
    assert abs(last["gpuHoursFlaggedNonLearning"] - (2.0 + 16 * 3600 / 3600)) < 1e-6
    writes = len(figures)
    e._write_policy_figures()  # nothing changed since: nothing written
    assert len([c for c in api.log if c[0] == "policy_status" and "jobsMatched" in c[2]]) == writes
    # the job is deleted: JOBS drops at the next step, the recommendation it got is still counted
    later = T0 + 300.0 * 12 + 1.0
    e.enqueue("job", "DELETED", {"kind": "TrainJob", "metadata": {"namespace": "team-a", "name": "llm"}})
    e.step(later)
    last = [c[2] for c in api.log if c[0] == "policy_status" and "jobsMatched" in c[2]][-1]
    assert last["jobsMatched"] == 0 and last["recommendations"] == 1
    assert last["fromDeletedJobs"] == {
        "actionsByKind": {},
        "actionsByOutcome": {},
        "recommendations": 1,
        "actionsHeld": 0,
    }
    # a new controller reads the deleted jobs' counts back from the status it finds
    again = Engine(
        FakeApi(), config=EngineConfig(write_interval_s=0, writer_workers=0, policy_status_interval_s=60)
    )
    again.enqueue("policy", "ADDED", {**body, "status": last})
    again.step(later + 1.0)  # the status shows its figures already: nothing to write
    assert not [c for c in again.api.log if c[0] == "policy_status" and "jobsMatched" in c[2]]
    again.step(later + 1.0 + SHARD_REFRESH_S)  # its entry's refresh: the same counts
    restored = [c[2] for c in again.api.log if c[0] == "policy_status" and "jobsMatched" in c[2]][-1]
    assert restored["recommendations"] == 1 and restored["jobsMatched"] == 0
