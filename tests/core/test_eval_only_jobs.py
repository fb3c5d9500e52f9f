"""A job that reports eval metrics and no training loss (a reporter that sends its evaluations
alone) is judged by them, as ``forecast`` judges a log of eval metrics alone: its step advancing is
progress (it was "no progress report seen yet", and the stall rule never armed), and its primary
eval metric is forecast and judged by the rules that name no series (it was never judged)."""

from __future__ import annotations

import math

from advisor.core import AdvisorCore
from advisor.model import ClusterView, Decision, JobView, ProgressSample
from policies import load_policy

TOTAL = 10_000


def _policy() -> object:
    return load_policy(
        "apiVersion: advisor.trainjob-advisor.io/v1alpha1\nkind: AdvisorPolicy\nmetadata: {name: p}\n"
        "spec:\n  mode: Recommend\n  safety: {minRuntime: 1m}\n"
        "  rules: {plateau: {probability: 0.8, for: 5m}, stall: {for: 20m}}\n"
    )


def _evals(core: AdvisorCore, value, upto: int, *, every: int = 100) -> Decision:
    job = JobView(namespace="ns", name="a", admitted=True, active=True, started_at=0.0)
    decision = core.evaluate(job, ClusterView(), now=0.0)
    for s in range(every, upto + 1, every):
        sample = ProgressSample(step=s, total_steps=TOTAL, time=float(s), metrics={"eval_loss": value(s)})
        core.observe("ns/a", sample, now=float(s))
        decision = core.evaluate(job, ClusterView(), now=float(s))
    return decision


def test_its_step_is_progress_and_its_eval_metric_is_judged_while_it_learns() -> None:
    core = AdvisorCore(policies=[_policy()], forecast_interval_s=0)
    decision = _evals(core, lambda s: 0.6 + 1.0 * math.exp(-s / 6000), 3000)
    view = core.view(JobView(namespace="ns", name="a"), now=3000.0)
    assert view.step == 3000 and view.last_step_change == 3000.0
    assert view.learning_state is not None and view.learning_state.metric == "eval_loss"
    assert view.learning_state.label == "learning"
    assert decision.advice == "continue" and not decision.actions
    assert any("eval_loss P(plateau)" in r for r in decision.reasons)
    assert not any("no progress report" in r for r in decision.reasons)
    assert core.steps_per_second("ns/a") == 1.0  # measured from its reports' steps and times


def test_a_flat_eval_metric_is_recommended_for_release_naming_its_best_step() -> None:
    core = AdvisorCore(policies=[_policy()], forecast_interval_s=0)
    decision = _evals(core, lambda s: 1.0 + 0.5 * math.exp(-s / 300) + 0.002 * math.sin(s), 4000)
    (action,) = decision.actions
    assert action.rule == "plateau" and "best eval_loss" in action.reason
    assert decision.advice.startswith("plateau")


def test_a_job_whose_eval_reports_stop_is_stalled() -> None:
    core = AdvisorCore(policies=[_policy()], forecast_interval_s=0)
    _evals(core, lambda s: 0.6 + 1.0 * math.exp(-s / 6000), 1000)
    job = JobView(namespace="ns", name="a", admitted=True, active=True, started_at=0.0)
    decision = core.evaluate(job, ClusterView(), now=1000.0 + 30 * 60)
    assert any(a.rule == "stall" for a in decision.actions)


def test_its_tjf_state_and_loss_column_are_its_eval_metrics() -> None:
    from advisor.controller.render import classify, render_status

    core = AdvisorCore(policies=[_policy()], forecast_interval_s=0)
    decision = _evals(core, lambda s: 0.6 + 1.0 * math.exp(-s / 6000), 3000)
    job = JobView(namespace="ns", name="a", admitted=True, active=True, started_at=0.0)
    view = core.view(job, now=3000.0)
    assert classify(view, now=3000.0) == "learning"  # it was "unknown" without a training-loss forecast
    status = render_status(view, decision, now=3000.0)
    assert status["summary"]["loss"].startswith("eval_loss ")


def test_reports_of_step_0_without_a_loss_are_no_progress_to_stall_on() -> None:
    """A job that reports step 0 while it loads its data and compiles (RHOAI's annotation, before
    the first log) has not started: the stall rule does not count its wait as a stall."""
    core = AdvisorCore(policies=[_policy()], forecast_interval_s=0)
    job = JobView(namespace="ns", name="a", admitted=True, active=True, started_at=0.0)
    for t in range(0, 3600, 60):
        core.observe("ns/a", ProgressSample(step=0, total_steps=TOTAL, time=float(t)), now=float(t))
        decision = core.evaluate(job, ClusterView(), now=float(t))
    assert not decision.actions
    assert core.view(job).last_step_change is None
