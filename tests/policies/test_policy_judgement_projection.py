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


def test_an_unknown_pace_cannot_be_projected() -> None:
    p = policy({"plateau": {}}, safety={"minProgress": 0.1})
    assert judged_from(p, started_at=T0, step=0, total_steps=1000, steps_per_second=None, now=T0) is None


def test_without_a_total_minprogress_gives_way_to_minruntime_and_minsteps() -> None:
    """A job that never reports its planned steps is judged once minRuntime and minSteps are met
    (with minProgress it would never be: a hung or NaN run among them was never released)."""
    p = policy({"plateau": {}}, safety={"minRuntime": "20m", "minProgress": 0.1, "minSteps": 500})
    assert judged_from(
        p, started_at=T0, step=100, total_steps=None, steps_per_second=1.0, now=T0
    ) == pytest.approx(T0 + 20 * 60)
    assert judged_from(
        p, started_at=T0, step=0, total_steps=None, steps_per_second=0.1, now=T0
    ) == pytest.approx(T0 + 5000)
    unknown = job(started_at=T0 - 3600, step=400, total_steps=None)
    ok, why = judge(unknown, p, T0)
    assert not ok and "minSteps" in why
    ok, why = judge(dataclasses.replace(unknown, step=600), p, T0)
    assert ok and why == ""
    known = dataclasses.replace(unknown, step=600, total_steps=10_000)  # 6% < 10%: held
    ok, why = judge(known, p, T0)
    assert not ok and "minProgress" in why
