"""``lazy_forecast``: a job is forecast only once its policy judges it (the rules' only use of a
forecast), then on all data so far and at most every ``forecast_interval_s``; the default loop
(the controller's) forecasts every job so that its status can show the forecast."""

from __future__ import annotations

from typing import Any

from test_loop import JOB, FakePolicy, Recorder, feed

from advisor.core import AdvisorCore
from advisor.model import ClusterView, JobView


class Gate:
    """A judgement gate that opens at ``from_step`` and records what it was asked."""

    def __init__(self, from_step: int) -> None:
        self.from_step = from_step
        self.asked: list[tuple[str, int]] = []

    def __call__(self, policy: Any, job: JobView, now: float) -> bool:
        self.asked.append((policy.name, job.step))
        return job.step >= self.from_step


def _core(rec: Recorder, gate: Gate, *, lazy: bool, interval: float = 0.0) -> AdvisorCore:
    return AdvisorCore(
        [FakePolicy("p")],
        forecast_interval_s=interval,
        forecaster=rec.forecaster,
        selector=rec.selector,
        decider=rec.decider,
        lazy_forecast=lazy,
        judged=gate,
    )


def test_a_job_not_yet_judged_is_not_forecast() -> None:
    rec, gate = Recorder(), Gate(from_step=50)
    core = _core(rec, gate, lazy=True)
    feed(core, range(0, 20))
    core.evaluate(JOB, ClusterView(), now=200.0)
    assert rec.curves == []
    assert rec.views[-1].forecast is None
    assert gate.asked == [("p", 19)]


def test_the_first_forecast_once_judged_uses_all_the_data_so_far() -> None:
    rec, gate = Recorder(), Gate(from_step=50)
    core = _core(rec, gate, lazy=True)
    feed(core, range(0, 20))
    core.evaluate(JOB, ClusterView(), now=200.0)
    feed(core, range(20, 60))
    decision_view_count = len(rec.views)
    core.evaluate(JOB, ClusterView(), now=600.0)
    assert len(rec.curves) == 1 and len(rec.curves[0]) == 60
    assert rec.views[decision_view_count].forecast is not None
    assert core.forecasts_made == 1


def test_the_forecast_interval_still_bounds_a_judged_job() -> None:
    rec, gate = Recorder(), Gate(from_step=0)
    core = _core(rec, gate, lazy=True, interval=300.0)
    feed(core, range(0, 10))
    core.evaluate(JOB, ClusterView(), now=100.0)
    feed(core, range(10, 20))
    core.evaluate(JOB, ClusterView(), now=200.0)  # fresh data, but within the interval
    assert core.forecasts_made == 1
    feed(core, range(20, 40), t0=0.0)
    core.evaluate(JOB, ClusterView(), now=400.0)
    assert core.forecasts_made == 2


def test_without_new_data_the_gate_is_not_even_asked() -> None:
    rec, gate = Recorder(), Gate(from_step=0)
    core = _core(rec, gate, lazy=True)
    feed(core, range(0, 10))
    core.evaluate(JOB, ClusterView(), now=100.0)
    core.evaluate(JOB, ClusterView(), now=200.0)
    assert len(gate.asked) == 1 and core.forecasts_made == 1


def test_the_default_loop_forecasts_every_job_whatever_the_gate() -> None:
    rec, gate = Recorder(), Gate(from_step=10**9)
    core = _core(rec, gate, lazy=False)
    feed(core, range(0, 20))
    core.evaluate(JOB, ClusterView(), now=200.0)
    assert core.forecasts_made == 1 and gate.asked == []


def test_the_real_gate_is_the_policys_minimum_runtime_and_progress() -> None:
    from policies import load_policy

    policy = load_policy(
        """
apiVersion: advisor.trainjob-advisor.io/v1alpha1
kind: AdvisorPolicy
metadata: {name: p}
spec:
  mode: Apply
  safety: {minRuntime: 20m, minProgress: 0.1}
  rules: {plateau: {probability: 0.9, for: 30m, action: Release}}
"""
    )
    core = AdvisorCore([policy], forecast_interval_s=0.0, lazy_forecast=True)
    feed(core, range(0, 200), dt=1.0)  # 200 s, 20% of 1000 steps
    job = JobView(namespace="ml", name="run-1", gpus=8, started_at=0.0)
    core.evaluate(job, ClusterView(), now=600.0)  # 10 minutes < minRuntime
    assert core.forecasts_made == 0
    core.evaluate(job, ClusterView(), now=1300.0)  # 21 minutes, 20% done
    assert core.forecasts_made == 1
