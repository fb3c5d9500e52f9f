"""Property tests over random views and policies: no exception, nothing on exempt jobs, only
recommendations in Recommend mode, and at most one release (or stop) per job over a whole run."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from policy_builders import T0, policy

from advisor.model import (
    ActionKind,
    ActionRecord,
    CheckpointState,
    ClusterQueueView,
    ClusterView,
    Forecast,
    Interval,
    JobView,
    WorkloadView,
)
from policies import decide

FINAL = {ActionKind.RELEASE_QUOTA, ActionKind.STOP}
_f = st.floats(allow_nan=True, allow_infinity=True, width=32)
_p = st.sampled_from([0.0, 0.2, 0.5, 0.92, 0.97, 1.0, math.nan, -0.1, 1.5])
_t = st.one_of(
    st.none(), st.floats(T0 - 30 * 3600, T0 + 100), st.sampled_from([T0 - 7200, T0 - 600, T0 - 60])
)

forecasts = st.one_of(
    st.none(),
    st.builds(
        lambda p: Forecast(
            final_loss=Interval(1, 1, 1),
            plateau_probability=p,
            divergence_probability=0.0,
            eta_seconds=Interval(9e4, 8e4, 1e5),
            n_points=50,
        ),
        _p,
    ),
    st.builds(
        lambda mean, p, d, eta, pts, drop, cur: Forecast(
            final_loss=Interval(mean, mean, mean),
            plateau_probability=p,
            divergence_probability=d,
            eta_seconds=None if eta is None else Interval(eta, eta, eta),
            n_points=pts,
            n_dropped=drop,
            current_loss=cur,
        ),
        _f,
        _p,
        _p,
        st.one_of(st.none(), st.floats(0, 1e6), st.just(math.inf)),
        st.integers(0, 200),
        st.integers(0, 50),
        st.one_of(st.none(), _f),
    ),
)

rule_sets = st.fixed_dictionaries(
    {"stall": st.just({"for": 600}), "divergence": st.sampled_from([{"for": 0}, {"action": "Stop"}])},
    optional={
        "plateau": st.fixed_dictionaries(
            {"for": st.sampled_from([0, 600]), "action": st.sampled_from(["Recommend", "Release", "Stop"])}
        ),
        "deadline": st.fixed_dictionaries(
            {"maxRuntime": st.sampled_from([600, 7200]), "scaleUp": st.booleans()}
        ),
        "checkpoint": st.fixed_dictionaries({"minInterval": st.sampled_from([60, 600])}),
        "preemptionGuard": st.just({}),
        "elastic": st.fixed_dictionaries({"maxNodes": st.integers(1, 8), "maxStep": st.integers(1, 4)}),
        "quotaRelease": st.fixed_dictionaries(
            {"checkpointFirst": st.booleans(), "releaseOnTimeout": st.booleans()}
        ),
    },
)
policies = st.builds(
    lambda rules, mode, safety: policy(rules, mode=mode, safety=safety),
    rule_sets,
    st.sampled_from(["Recommend", "Apply", "Apply"]),
    st.fixed_dictionaries(
        {},
        optional={
            "minRuntime": st.sampled_from([0, 900]),
            "cooldown": st.sampled_from([0, 1800]),
            "minForecastPoints": st.sampled_from([0, 10]),
        },
    ),
)
queues = st.builds(
    lambda nominal, usage, within, cohort: ClusterQueueView(
        name="cq", cohort=cohort, nominal_gpus=nominal, usage_gpus=usage, within_cluster_queue=within
    ),
    st.integers(0, 64),
    st.integers(0, 80),
    st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"]),
    st.sampled_from([None, "co"]),
)
workloads = st.lists(
    st.builds(
        lambda i, gpus, prio, adm, boost: WorkloadView(
            namespace="ns",
            name=f"w{i}",
            cluster_queue="cq",
            gpus=gpus,
            priority=prio,
            admitted=adm,
            admitted_at=float(i),
            created_at=float(i),
            priority_boost=boost,
            job="ns/j" if i == 0 else None,
        ),
        st.integers(0, 6),
        st.integers(0, 16),
        st.integers(-5, 5),
        st.booleans(),
        st.sampled_from([0, 0, 100]),
    ),
    max_size=6,
)
clusters = st.builds(
    lambda q, wls, rate, gate: ClusterView(
        cluster_queues={"cq": q},
        workloads=tuple(wls),
        preemption_rate={"cq": rate},
        priority_boost_enabled=gate,
    ),
    queues,
    workloads,
    st.one_of(st.floats(0, 0.01), st.just(math.nan)),
    st.booleans(),
)
jobs = st.builds(
    lambda fc, step, total, started, changed, loss, nodes, cp_time, labels, active, tp: JobView(
        namespace="ns",
        name="j",
        cluster_queue="cq",
        gpus=8 * nodes,
        nodes=nodes,
        min_nodes=1,
        max_nodes=8,
        forecast=fc,
        step=step,
        total_steps=total,
        started_at=started,
        last_step_change=changed,
        last_loss=loss,
        checkpoint=CheckpointState(last_time=cp_time, cost_seconds=30.0),
        labels=labels,
        active=active,
        throughput=tp,
        annotations={"advisor.trainjob-advisor.io/deadline": "soon"} if step % 7 == 0 else {},
    ),
    forecasts,
    st.integers(0, 20_000),
    st.one_of(st.none(), st.integers(0, 20_000)),
    _t,
    _t,
    st.one_of(st.none(), _f),
    st.integers(1, 8),
    _t,
    st.sampled_from(
        [{}, {"advisor.trainjob-advisor.io/exempt": "true"}, {"advisor.trainjob-advisor.io/exempt": "false"}]
    ),
    st.sampled_from([True, True, True, False]),
    st.lists(st.tuples(st.integers(0, 8), _f), max_size=4).map(tuple),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(j=jobs, c=clusters, p=policies, now=st.floats(T0, T0 + 3600))
def test_any_view_any_policy_no_exception_and_the_safety_properties(
    j: JobView, c: ClusterView, p: Any, now: float
) -> None:
    d = decide(j, c, p, now=now)
    event(f"actions: {sorted({a.kind.value for a in d.actions})}")
    assert d.job == "ns/j" and d.policy == p.name and isinstance(d.advice, str) and d.advice
    if j.labels.get("advisor.trainjob-advisor.io/exempt") == "true":
        assert d.actions == ()
    if p.mode.value == "Recommend":
        assert all(a.kind is ActionKind.RECOMMEND for a in d.actions)
    kinds = [a.kind for a in d.actions]
    assert sum(k in FINAL for k in kinds) <= 1
    assert kinds.count(ActionKind.CHECKPOINT) <= 1 and kinds.count(ActionKind.SCALE) <= 1
    assert not (ActionKind.CHECKPOINT in kinds and FINAL & set(kinds))  # never "save" and "go" at once
    assert all(isinstance(v, float | int) and math.isfinite(v) for v in d.state.values())
    assert decide(j, c, p, now=now) == d


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(j=jobs, c=clusters, p=policies, acks=st.lists(st.booleans(), min_size=12, max_size=12))
def test_over_a_whole_run_a_job_is_released_at_most_once(
    j: JobView, c: ClusterView, p: Any, acks: list[bool]
) -> None:
    """Play the actuator: record every action, acknowledge some checkpoints, feed the state back."""
    view = j
    finals = 0
    for i, ack in enumerate(acks):
        now = T0 + 600 * i
        d = decide(view, c, p, now=now)
        records = list(view.actions)
        cp = view.checkpoint
        for n, a in enumerate(d.actions):
            if a.kind is ActionKind.RECOMMEND:
                continue
            finals += a.kind in FINAL
            records.append(
                ActionRecord(
                    kind=a.kind,
                    time=now,
                    request_id=f"{i}-{n}",
                    policy=p.name,
                    rule=a.rule,
                    outcome="acknowledged" if ack and a.kind is ActionKind.CHECKPOINT else "done",
                )
            )
            if a.kind is ActionKind.CHECKPOINT and ack:
                cp = dataclasses.replace(cp, last_time=now + 1, last_step=view.step)
        active = view.active and not any(a.kind in FINAL for a in d.actions)
        view = dataclasses.replace(
            view, actions=tuple(records), checkpoint=cp, rule_state=dict(d.state), active=active
        )
    event(f"finals: {finals}")
    assert finals <= 1
