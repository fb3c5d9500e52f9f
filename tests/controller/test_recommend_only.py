"""``--recommend-only``: every AdvisorPolicy reaches the decision engine as mode Recommend."""

from __future__ import annotations

from typing import Any

import pytest

from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.render import iso
from advisor.core import AdvisorCore
from advisor.model import ClusterView, Decision, Forecast, Interval, JobView, Mode
from tests.controller.fakes import FakeApi, _merge_patch, trainjob

T0 = 1_800_000_000.0
APPLY_POLICY = {
    "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
    "kind": "AdvisorPolicy",
    "metadata": {"name": "act", "generation": 1},
    "spec": {"mode": "Apply"},
}


@pytest.mark.parametrize(("recommend_only", "expected"), [(False, Mode.APPLY), (True, Mode.RECOMMEND)])
def test_an_apply_policy_is_seen_as_recommend_under_recommend_only(
    recommend_only: bool, expected: Mode
) -> None:
    seen: list[tuple[str, Mode]] = []

    def decide(job: JobView, cluster: ClusterView, policy: Any, *, now: float) -> Decision:
        seen.append((policy.name, policy.mode))
        return Decision(job=job.key, policy=policy.name, mode=policy.mode, advice="learning")

    flat = Forecast(final_loss=Interval(0.5, 0.4, 0.6), plateau_probability=0.1, divergence_probability=0.0)
    core = AdvisorCore(forecast_interval_s=0, forecaster=lambda c, t: flat, decider=decide)
    config = EngineConfig(
        write_interval_s=0, writer_workers=0, forecast_interval_s=0, recommend_only=recommend_only
    )
    e = Engine(FakeApi(), config=config, core=core)
    e.enqueue("policy", "ADDED", APPLY_POLICY)
    for i in range(3):
        e.enqueue(
            "job", "MODIFIED", trainjob(step=10 * (i + 1), loss=1.0 / (i + 1), updated=iso(T0 + 60 * i))
        )
        e.step(T0 + 60 * i)
    assert seen and set(seen) == {("act", expected)}
    assert e.policies["act"].mode is Mode.APPLY  # the policy itself is unchanged; its status says


def _statuses(api: FakeApi, name: str) -> list[dict[str, Any]]:
    """The writes of the policy's conditions and effective mode (not of its figures, which carry
    the JobsSelected condition with them)."""
    return [
        c[2]
        for c in api.log
        if c[0] == "policy_status" and c[1] == name and "conditions" in c[2] and "shards" not in c[2]
    ]


def _held(api: FakeApi, name: str) -> dict[str, Any]:
    """The policy's status as the API server holds it after every write."""
    held: dict[str, Any] = {}
    for c in api.log:
        if c[0] == "policy_status" and c[1] == name:
            held = _merge_patch(held, c[2])
    return held


@pytest.mark.parametrize("recommend_only", [False, True])
@pytest.mark.parametrize("mode", ["Apply", "Recommend"])
def test_the_status_says_which_mode_the_controller_evaluates_the_policy_in(
    recommend_only: bool, mode: str
) -> None:
    """``kubectl get advisorpolicies`` shows MODE (the spec's) beside EFFECTIVE
    (``status.effectiveMode``): an Apply policy under ``--recommend-only`` reads ``Apply
    Recommend``, and its ``RecommendOnly`` condition says why and what lifts it."""
    api = FakeApi()
    e = Engine(api, config=EngineConfig(write_interval_s=0, writer_workers=0, recommend_only=recommend_only))
    e.enqueue("policy", "ADDED", {**APPLY_POLICY, "spec": {"mode": mode}})
    e.step(T0)
    (status,) = _statuses(api, "act")
    assert status["effectiveMode"] == ("Recommend" if recommend_only else mode)
    valid, held = status["conditions"]
    assert (valid["type"], valid["status"]) == ("Valid", "True")
    assert held["type"] == "RecommendOnly" and held["observedGeneration"] == 1
    if recommend_only:
        assert (held["status"], held["reason"]) == ("True", "ControllerRecommendOnly")
        assert held["message"].startswith(
            "the controller runs with --recommend-only: the policy is evaluated"
        )
        assert ("spec.mode Apply takes effect once" in held["message"]) == (mode == "Apply")
    else:
        assert (held["status"], held["reason"]) == ("False", "SpecMode")
    # the status the server now holds is what the controller would write: no second write
    e.enqueue("policy", "MODIFIED", {**APPLY_POLICY, "spec": {"mode": mode}, "status": _held(api, "act")})
    e.step(T0 + 1)
    assert len(_statuses(api, "act")) == 1


def test_an_invalid_policy_under_recommend_only_is_not_said_to_be_evaluated() -> None:
    """Invalid with nothing standing in for it (its selector invalid too), the policy showed an
    empty EFFECTIVE beside "the policy is evaluated as Recommend". Its condition says nothing of
    it is evaluated; one held by a stand-in says the stand-in is."""
    api = FakeApi()
    e = Engine(api, config=EngineConfig(write_interval_s=0, writer_workers=0, recommend_only=True))
    broken = {**APPLY_POLICY, "spec": {"mode": "Apply", "selector": {"namespaces": "team-a"}}}
    e.enqueue("policy", "ADDED", broken)
    e.step(T0)
    status = _held(api, "act")
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["Valid"]["status"] == "False" and status.get("effectiveMode") is None
    assert conds["RecommendOnly"]["message"] == (
        "the controller runs with --recommend-only; nothing of the invalid policy is evaluated (see Valid)"
    )
    held = {**APPLY_POLICY, "metadata": {"name": "held", "generation": 1}}
    held["spec"] = {"mode": "Apply", "rules": {"checkpoint": {"minInterval": "5h", "maxInterval": "1h"}}}
    e.enqueue("policy", "ADDED", held)
    e.step(T0 + 1)
    conds = {c["type"]: c for c in _held(api, "held")["conditions"]}
    assert conds["Valid"]["status"] == "False"
    assert (
        "what stands in for the invalid policy (see Valid) is evaluated as Recommend"
        in (conds["RecommendOnly"]["message"])
    )


def test_restarted_without_recommend_only_the_status_says_the_spec_mode_again() -> None:
    api = FakeApi()
    e = Engine(api, config=EngineConfig(write_interval_s=0, writer_workers=0, recommend_only=True))
    e.enqueue("policy", "ADDED", APPLY_POLICY)
    e.step(T0)
    (held,) = _statuses(api, "act")
    api = FakeApi()
    e = Engine(api, config=EngineConfig(write_interval_s=0, writer_workers=0))
    e.enqueue("policy", "ADDED", {**APPLY_POLICY, "status": held})
    e.step(T0 + 60)
    (status,) = _statuses(api, "act")
    assert status["effectiveMode"] == "Apply"
    after = {c["type"]: c for c in status["conditions"]}
    assert after["RecommendOnly"]["status"] == "False"
    assert after["Valid"]["lastTransitionTime"] == held["conditions"][0]["lastTransitionTime"]


def test_an_invalid_policy_with_nothing_standing_in_has_no_effective_mode() -> None:
    api = FakeApi()
    e = Engine(api, config=EngineConfig(write_interval_s=0, writer_workers=0))
    broken = {**APPLY_POLICY, "spec": {"mode": "Apply", "selector": {"namespaces": "team-a"}}}
    e.enqueue("policy", "ADDED", broken)
    e.step(T0)
    (status,) = _statuses(api, "act")
    assert status["effectiveMode"] is None  # a merge patch's null: the field goes
    assert status["conditions"][0]["status"] == "False"
    # held in Recommend with no rule while it is invalid (a restart: no valid version known)
    e.enqueue(
        "policy", "MODIFIED", {**APPLY_POLICY, "spec": {"mode": "Apply", "rules": {"stall": {"for": 0}}}}
    )
    e.step(T0 + 1)
    last = _statuses(api, "act")[-1]
    assert last["effectiveMode"] == "Recommend" and "its jobs are held" in last["conditions"][0]["message"]
