"""The contract every rule passes, run against one triggering scenario per rule.

Pure (same inputs, same output; no clock, no I/O), never mutating in Recommend mode, silent on
exempt jobs, holding back judgement before the minimum runtime/progress, respecting cooldowns and
the per-policy cap, and doing nothing rash on a missing or weak forecast.
"""

from __future__ import annotations

import builtins
import dataclasses
import datetime
import math
import time
from typing import Any

import pytest
from policy_builders import HOUR, T0, cluster, forecast, job, policy, record

from advisor.model import (
    ActionKind,
    CheckpointState,
    ClusterQueueView,
    Forecast,
    Interval,
    JobView,
    LearningState,
    WorkloadView,
)
from policies import decide
from policies.rules import RULES
from policies.rules.base import DISRUPTIVE

STALE = CheckpointState(last_time=T0 - 3 * HOUR, cost_seconds=30.0)
SPOT = [ClusterQueueView(name="cq", nominal_gpus=8, usage_gpus=8, within_cluster_queue="LowerPriority")]
VICTIM = [
    WorkloadView(
        namespace="team-a",
        name="ft-1",
        cluster_queue="cq",
        gpus=8,
        admitted=True,
        job="team-a/ft-1",
        admitted_at=T0 - HOUR,
    ),
    WorkloadView(namespace="x", name="hi", cluster_queue="cq", gpus=8, priority=100, admitted=False),
]

#: name → (rules, job overrides, cluster kwargs, needs a forecast, disruptive kinds expected)
SCENARIOS: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any], bool, set[ActionKind]]] = {
    "plateau": (
        {"plateau": {"for": "10m"}},
        {
            "forecast": forecast(plateau=0.99),
            "rule_state": {"plateau.since": T0 - HOUR},
            "checkpoint": CheckpointState(last_time=T0 - 30),
        },
        {},
        True,
        {ActionKind.RELEASE_QUOTA},
    ),
    "overfitting": (
        {"overfitting": {"for": "10m", "action": "Release"}},
        {
            "forecast": forecast(plateau=0.05),
            "learning_state": LearningState(
                label="overfitting",
                probabilities={
                    "learning": 0.04,
                    "plateaued": 0.01,
                    "overfitting": 0.95,
                    "diverging": 0.0,
                    "hung": 0.0,
                },
                metric="eval_loss",
                best_step=1000,
                best_value=0.51,
                evals_since_best=5,
            ),
            "rule_state": {"overfitting.since": T0 - HOUR},
            "checkpoint": CheckpointState(last_time=T0 - 30),
        },
        {},
        True,
        {ActionKind.RELEASE_QUOTA},
    ),
    "divergence": (
        {"divergence": {"for": "5m", "nonFinite": False, "action": "Stop"}},
        {
            "forecast": forecast(diverge=0.99),
            "rule_state": {"divergence.since": T0 - HOUR},
            "checkpoint": CheckpointState(last_time=T0 - 30),
        },
        {},
        True,
        {ActionKind.STOP},
    ),
    "non-finite": (
        {"divergence": {}},
        {"last_loss": math.nan, "checkpoint": CheckpointState(last_time=T0 - 30)},
        {},
        False,
        {ActionKind.RELEASE_QUOTA},
    ),
    "stall": (
        {"stall": {"for": "30m"}},
        {"last_step_change": T0 - HOUR},
        {},
        False,
        {ActionKind.RELEASE_QUOTA},
    ),
    "deadline": (
        {"deadline": {"scaleUp": True}, "elastic": {"enabled": False}},
        {
            "annotations": {"advisor.trainjob-advisor.io/deadline": str(T0 + HOUR)},
            "forecast": forecast(eta=HOUR),
            "nodes": 2,
            "gpus": 16,
            "max_nodes": 8,
            "throughput": ((1, 1.0), (2, 1.9)),
        },
        {"queues": [ClusterQueueView(name="cq", nominal_gpus=128, usage_gpus=16)]},
        True,
        {ActionKind.SCALE},
    ),
    "elastic": (
        {"elastic": {}},
        {"nodes": 2, "gpus": 16, "max_nodes": 8, "throughput": ((1, 1.0), (2, 1.9))},
        {"queues": [ClusterQueueView(name="cq", nominal_gpus=128, usage_gpus=16)]},
        True,
        {ActionKind.SCALE},
    ),
    "checkpoint": ({"checkpoint": {}}, {"checkpoint": STALE}, {}, False, set()),
    "preemption-guard": (
        {"preemptionGuard": {}},
        {"checkpoint": STALE},
        {"queues": SPOT, "workloads": VICTIM, "priority_boost_enabled": True},
        False,
        set(),
    ),
}
IDS = list(SCENARIOS)


def build(name: str, *, mode: str = "Apply", safety: dict[str, Any] | None = None, **job_kw: Any):
    rules, overrides, ckw, _, _ = SCENARIOS[name]
    return job(**{**overrides, **job_kw}), cluster(**ckw), policy(rules, mode=mode, safety=safety)


def test_every_rule_has_a_scenario() -> None:
    covered = {"non-finite": "divergence"}
    assert {n for n, _, _ in RULES} <= {covered.get(s, s) for s in SCENARIOS}


@pytest.mark.parametrize("name", IDS)
def test_the_scenario_triggers_its_rule(name: str) -> None:
    j, c, p = build(name)
    d = decide(j, c, p, now=T0)
    assert d.actions, d.reasons
    assert {a.kind for a in d.actions} & DISRUPTIVE == SCENARIOS[name][4]
    assert d.policy == "p" and all(a.rule for a in d.actions) and all(a.reason for a in d.actions)


@pytest.mark.parametrize("name", IDS)
def test_pure_no_clock_no_io_same_output(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    j, c, p = build(name)
    first = decide(j, c, p, now=T0)

    def boom(*_: Any, **__: Any) -> Any:
        raise AssertionError("the decision engine must not read the clock or do I/O")

    class NoNow(datetime.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return boom()

    monkeypatch.setattr(time, "time", boom)
    monkeypatch.setattr(time, "monotonic", boom)
    monkeypatch.setattr(datetime, "datetime", NoNow)
    monkeypatch.setattr(builtins, "open", boom)
    again = decide(j, c, p, now=T0)
    assert again == first
    assert j == build(name)[0]  # inputs untouched


@pytest.mark.parametrize("name", IDS)
def test_recommend_mode_never_mutates(name: str) -> None:
    j, c, p = build(name, mode="Recommend")
    d = decide(j, c, p, now=T0)
    assert d.actions and all(a.kind is ActionKind.RECOMMEND for a in d.actions)
    assert all(a.params.get("would") for a in d.actions)


@pytest.mark.parametrize("name", IDS)
def test_exempt_jobs_get_nothing(name: str) -> None:
    j, c, p = build(name, labels={"advisor.trainjob-advisor.io/exempt": "true"})
    d = decide(j, c, p, now=T0)
    assert d.actions == () and d.advice == "exempt"
    j2, c2, p2 = build(name, labels={"advisor.trainjob-advisor.io/exempt": "false"})
    assert decide(j2, c2, p2, now=T0).actions  # "false" does not exempt


@pytest.mark.parametrize("name", IDS)
def test_no_disruptive_judgement_before_minimum_runtime_or_progress(name: str) -> None:
    """Before minRuntime no rule disrupts; before minProgress / minSteps no rule that judges
    learning does. The stall rule waits for minRuntime only: a run stuck before the progress gates
    never reaches them."""
    for safety in ({"minRuntime": "3h"}, {"minProgress": 0.5}, {"minSteps": 10_000}):
        j, c, p = build(name, safety=safety)
        d = decide(j, c, p, now=T0)
        disrupted = {a.kind for a in d.actions} & (DISRUPTIVE | {ActionKind.CHECKPOINT} - _protective(name))
        if name == "stall" and "minRuntime" not in safety:
            assert disrupted, safety
        else:
            assert not disrupted, safety


def _protective(name: str) -> set[ActionKind]:
    return {ActionKind.CHECKPOINT} if name in ("checkpoint", "preemption-guard") else set()


@pytest.mark.parametrize("name", [n for n in IDS if SCENARIOS[n][4]])
def test_cooldown_and_cap_hold_back_disruptive_actions(name: str) -> None:
    recent = (record(ActionKind.SCALE, T0 - 300, outcome="done", policy="other"),)
    j, c, p = build(name, actions=recent, safety={"cooldown": "10m"})
    d = decide(j, c, p, now=T0)
    assert not {a.kind for a in d.actions} & DISRUPTIVE and any("cooldown" in a.reason for a in d.actions)
    j, c, p = build(name, actions=recent, safety={"cooldown": "4m"})
    assert {a.kind for a in decide(j, c, p, now=T0).actions} & DISRUPTIVE  # cooldown over
    j, c, p = build(name, safety={"maxActionsPerHour": 3})
    capped = dataclasses.replace(c, policy_action_times={"p": (T0 - 3000, T0 - 100, T0 - 10)})
    d = decide(j, capped, p, now=T0)
    assert not {a.kind for a in d.actions} & DISRUPTIVE and any("cap of 3" in a.reason for a in d.actions)
    # ADVICE does not say "release" for a release the cap holds back: it says held (the stall
    # rule's "hung" read as if nothing held it)
    assert not d.advice.endswith((":release", ":stop")), d.advice
    assert d.advice.endswith(":held"), d.advice
    old = dataclasses.replace(c, policy_action_times={"p": (T0 - 4000, T0 - 3700, T0 - 3601)})
    assert {a.kind for a in decide(j, old, p, now=T0).actions} & DISRUPTIVE  # outside the hour


WEAK: list[Forecast | None] = [
    None,
    forecast(plateau=0.99, diverge=0.99, points=3, eta=HOUR),
    forecast(plateau=0.99, diverge=0.99, points=20, dropped=500, eta=HOUR),
    Forecast(
        final_loss=Interval(math.nan, math.nan, math.nan),
        plateau_probability=0.99,
        divergence_probability=0.99,
        n_points=80,
    ),
    Forecast(
        final_loss=Interval(1, 1, 1), plateau_probability=math.nan, divergence_probability=0.5, n_points=80
    ),
]


@pytest.mark.parametrize("name", [n for n in IDS if SCENARIOS[n][3]])
@pytest.mark.parametrize("weak", range(len(WEAK)))
def test_missing_or_weak_forecast_means_nothing_rash(name: str, weak: int) -> None:
    j, c, p = build(name)
    j = dataclasses.replace(j, forecast=WEAK[weak])
    d = decide(j, c, p, now=T0)
    assert not {a.kind for a in d.actions} & (DISRUPTIVE | {ActionKind.CHECKPOINT})


def test_an_infinite_eta_is_treated_as_no_eta() -> None:
    j, c, p = build("deadline")
    fc = dataclasses.replace(forecast(), eta_seconds=Interval(math.inf, math.inf, math.inf))
    assert decide(dataclasses.replace(j, forecast=fc), c, p, now=T0).actions == ()


def test_non_finite_now_is_a_programming_error() -> None:
    j, c, p = build("stall")
    with pytest.raises(ValueError, match="now must be finite"):
        decide(j, c, p, now=math.nan)


def test_views_are_frozen() -> None:
    j: JobView = build("stall")[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        j.step = 3  # type: ignore[misc]


def test_continue_names_the_judged_eval_metrics_plateau_probability_beside_the_training_losss() -> None:
    """PLATEAU shows the judged eval metric's P(plateau); the reason gave only the training loss's
    ("P(plateau) 0.00" beside a PLATEAU of 62%)."""
    from advisor.model import LearningState
    from policies.engine import decide

    j, c, p = build("plateau")
    judged = forecast(plateau=0.62, diverge=0.0, points=20, eta=HOUR)
    state = LearningState(
        label="learning", probabilities={"learning": 1.0}, metric="eval_loss", series={"eval_loss": judged}
    )
    calm = dataclasses.replace(
        j, forecast=forecast(plateau=0.0, points=40, eta=HOUR), learning_state=state, rule_state={}
    )
    d = decide(calm, c, p, now=T0)
    said = next(r for r in d.reasons if r.startswith("continue:"))
    assert "eval_loss P(plateau) 0.62, training loss P(plateau) 0.00" in said, d.reasons


@pytest.mark.parametrize("name", [n for n in IDS if SCENARIOS[n][4]])
def test_a_recommend_policy_says_what_a_real_cooldown_or_cap_would_hold(name: str) -> None:
    """A platform trial: a job in the cooldown a real release started (then resumed) read
    ``plateau:release (recommended)`` under Recommend and ``plateau:held`` under Apply seconds
    later, so a Recommend trial overstated what Apply would do. Recommendations start no cooldown
    of their own; real actions' cooldown and cap are said as Apply would hold them."""
    recent = (record(ActionKind.SCALE, T0 - 300, outcome="done", policy="other"),)
    j, c, p = build(name, mode="Recommend", actions=recent, safety={"cooldown": "10m"})
    d = decide(j, c, p, now=T0)
    assert {a.kind for a in d.actions} <= {ActionKind.RECOMMEND, ActionKind.CHECKPOINT}
    held = [a for a in d.actions if a.params.get("held")]
    assert held and all("held back: cooldown" in a.reason for a in held), [a.reason for a in d.actions]
    assert d.advice.endswith(":held"), d.advice
    j, c, p = build(name, mode="Recommend", safety={"maxActionsPerHour": 3})
    capped = dataclasses.replace(c, policy_action_times={"p": (T0 - 3000, T0 - 100, T0 - 10)})
    assert any("cap of 3" in a.reason for a in decide(j, capped, p, now=T0).actions)
    # recommendations alone hold nothing: each one would be the first Apply made
    said = (record(ActionKind.RELEASE_QUOTA, T0 - 300, outcome="recommended", policy="p"),)
    j, c, p = build(name, mode="Recommend", actions=said, safety={"cooldown": "10m"})
    assert not any(a.params.get("held") for a in decide(j, c, p, now=T0).actions)
