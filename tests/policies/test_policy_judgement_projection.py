"""``judged_from`` projects when ``judge`` first lets a policy judge a job that keeps its pace, so
that an adapter looking at jobs on its own schedule can skip the looks before then."""

from __future__ import annotations

import dataclasses

import pytest
from policy_builders import HOUR, T0, job, policy

from policies.engine import judge, judged_from


def test_the_projection_is_where_the_gate_opens() -> None:
    p = policy({"plateau": {}}, safety={"minRuntime": "30m", "minProgress": 0.5})
    young = job(started_at=T0 - 600, step=1000, total_steps=20_000)
    rate = 2.0  # steps per second
    at = judged_from(p, started_at=T0 - 600, step=1000, total_steps=20_000, steps_per_second=rate, now=T0)
    assert at == pytest.approx(T0 + (10_000 - 1000) / rate)  # the 50% progress comes last
    step_then = 1000 + rate * (at - T0)
    before = dataclasses.replace(young, step=int(step_then) - 10)
    after = dataclasses.replace(young, step=int(step_then))
    assert not judge(before, p, at - 5)[0]
    assert judge(after, p, at)[0]


def test_the_runtime_can_be_what_is_waited_for() -> None:
    p = policy({"plateau": {}}, safety={"minRuntime": "2h", "minProgress": 0.0})
    at = judged_from(p, started_at=T0, step=10, total_steps=None, steps_per_second=None, now=T0)
    assert at == pytest.approx(T0 + 2 * HOUR)


def test_unknown_totals_or_pace_cannot_be_projected() -> None:
    p = policy({"plateau": {}}, safety={"minProgress": 0.1})
    assert judged_from(p, started_at=T0, step=0, total_steps=None, steps_per_second=1.0, now=T0) is None
    assert judged_from(p, started_at=T0, step=0, total_steps=1000, steps_per_second=None, now=T0) is None
