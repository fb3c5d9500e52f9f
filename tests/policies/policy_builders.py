"""Small builders for policy tests: views, forecasts and policies with readable defaults."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from advisor.model import (
    ActionKind,
    ActionRecord,
    CheckpointState,
    ClusterQueueView,
    ClusterView,
    Forecast,
    Interval,
    JobView,
    LearningState,
    WorkloadView,
)
from policies import Policy, load_policy

T0 = 1_000_000.0
HOUR = 3600.0


def forecast(
    plateau: float = 0.1,
    diverge: float = 0.0,
    *,
    points: int = 60,
    eta: float | None = 3600.0,
    loss: float = 1.0,
    final: float = 0.9,
    dropped: int = 0,
    warnings: tuple[str, ...] = (),
) -> Forecast:
    return Forecast(
        final_loss=Interval(final, final * 0.9, final * 1.1),
        plateau_probability=plateau,
        divergence_probability=diverge,
        eta_seconds=None if eta is None else Interval(eta, eta * 0.8, eta * 1.25),
        steps_per_second=2.0,
        current_loss=loss,
        n_points=points,
        n_dropped=dropped,
        warnings=warnings,
    )


def job(**kw: Any) -> JobView:
    """A healthy running job, two hours in, that made progress a minute ago."""
    now = kw.pop("now", T0)
    base = JobView(
        namespace="team-a",
        name="ft-1",
        queue_name="lq",
        cluster_queue="cq",
        gpus=8,
        nodes=1,
        started_at=now - 2 * HOUR,
        step=5000,
        total_steps=20000,
        last_step_change=now - 60,
        last_sample_time=now - 60,
        forecast=forecast(),
        checkpoint=CheckpointState(last_step=4900, last_time=now - 600, cost_seconds=30.0),
        last_loss=1.0,
    )
    return dataclasses.replace(base, **kw)


def record(
    kind: ActionKind,
    time: float,
    *,
    rule: str = "",
    policy: str = "p",
    outcome: str = "requested",
    rid: str = "r1",
) -> ActionRecord:
    return ActionRecord(kind=kind, time=time, request_id=rid, policy=policy, rule=rule, outcome=outcome)


def policy(
    rules: dict[str, Any] | None = None,
    *,
    mode: str = "Apply",
    name: str = "p",
    safety: dict[str, Any] | None = None,
    selector: dict[str, Any] | None = None,
    priority: int = 0,
) -> Policy:
    spec: dict[str, Any] = {"mode": mode, "priority": priority, "rules": rules or {}}
    spec["safety"] = {"minRuntime": "15m", **(safety or {})}
    if selector is not None:
        spec["selector"] = selector
    return load_policy(
        {
            "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
            "kind": "AdvisorPolicy",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


def cluster(
    queues: list[ClusterQueueView] | None = None, workloads: list[WorkloadView] | None = None, **kw: Any
) -> ClusterView:
    qs = queues if queues is not None else [ClusterQueueView(name="cq", nominal_gpus=32, usage_gpus=8)]
    return ClusterView(cluster_queues={q.name: q for q in qs}, workloads=tuple(workloads or ()), **kw)


def with_state(view: JobView, decision_state: Any) -> JobView:
    return dataclasses.replace(view, rule_state=dict(decision_state))


def eval_state(
    series: Mapping[str, Forecast],
    *,
    overfitting: float = 0.0,
    plateaued: float = 0.0,
    metric: str | None = "eval_loss",
    best_step: int = 1200,
    best_value: float = 0.512,
    evals_since_best: int = 4,
) -> LearningState:
    """A run state judged by eval series ``metric``: the rest of the probability is "learning", the
    label the most probable."""
    probabilities = {
        "learning": 1.0 - overfitting - plateaued,
        "plateaued": plateaued,
        "overfitting": overfitting,
        "diverging": 0.0,
        "hung": 0.0,
    }
    return LearningState(
        label=max(probabilities, key=lambda k: probabilities[k]),
        probabilities=probabilities,
        metric=metric,
        best_step=best_step,
        best_value=best_value,
        evals_since_best=evals_since_best,
        series=series,
    )
