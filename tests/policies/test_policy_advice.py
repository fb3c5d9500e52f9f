"""ADVICE says a verdict only when there is one, and ``continue`` says why."""

from __future__ import annotations

from policy_builders import T0, cluster, job, policy

from policies import decide

PLATEAU = {"plateau": {"probability": 0.8, "for": "10m", "action": "Release"}}


def test_continue_gives_its_reason() -> None:
    d = decide(job(), cluster(), policy(PLATEAU), now=T0)
    assert d.advice == "continue" and d.actions == ()
    (why,) = [r for r in d.reasons if r.startswith("continue: ")]
    assert "P(plateau) 0.10" in why and "step 5000 of 20000" in why


def test_no_forecast_yet_is_observing_not_continue() -> None:
    d = decide(job(forecast=None), cluster(), policy(PLATEAU), now=T0)
    assert d.advice == "observing" and any(r.startswith("observing: no forecast") for r in d.reasons)
    young = decide(job(started_at=T0 - 60), cluster(), policy(PLATEAU), now=T0)
    assert young.advice == "observing" and any("minRuntime" in r for r in young.reasons)
