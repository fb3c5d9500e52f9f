"""``--recommend-only``: every AdvisorPolicy reaches the decision engine as mode Recommend."""

from __future__ import annotations

from typing import Any

import pytest

from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.render import iso
from advisor.core import AdvisorCore
from advisor.model import ClusterView, Decision, Forecast, Interval, JobView, Mode
from tests.controller.fakes import FakeApi, trainjob

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
    assert e.policies["act"].mode is Mode.APPLY  # the policy itself (and its status) is unchanged
