"""The controller reads a job's lifecycle from the cluster: a finished run is never acted on.

The trial's failure, through the engine with a real policy (the stall rule in Apply mode) and the
fake API: a TrainJob that reported its last step one logging interval short of the total, then
went ``Complete=True`` with its Workload ``Finished=True``, must get no release, no Event, and a
TrainJobForecast that says ``finished`` in STATE and ADVICE.
"""

from __future__ import annotations

import copy
from typing import Any

from advisor.controller.engine import Engine
from advisor.controller.render import iso
from tests.controller.fakes import FakeApi, make_engine, trainjob, workload

T0 = 1_800_000_000.0
KEY = "team-a/llm"
WL = "team-a/trainjob-llm-abcde"

POLICY = {
    "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
    "kind": "AdvisorPolicy",
    "metadata": {"name": "stall-release", "generation": 1},
    "spec": {
        "mode": "Apply",
        "safety": {"minRuntime": "0s", "cooldown": "0s"},
        "rules": {"stall": {"for": "40s", "action": "Release"}, "quotaRelease": {"checkpointFirst": False}},
    },
}


def _engine(api: FakeApi) -> Engine:
    e = make_engine(api)
    e.enqueue("policy", "ADDED", POLICY)
    e.enqueue("workload", "ADDED", api.workloads[WL])
    return e


def _feed(e: Engine, last: int, *, total: int = 2619) -> tuple[float, dict[str, Any]]:
    now, body = T0, {}
    for i, step in enumerate(range(10, last + 1, 10)):
        now = T0 + i * 5.0
        body = trainjob(step=step, total=total, loss=f"{2.0 - step / 2000:.5f}", updated=iso(now))
        e.enqueue("job", "MODIFIED", body)
        e.step(now)
    return now, body


def _conditioned(obj: dict[str, Any], *conds: tuple[str, str, str]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    status = out.setdefault("status", {})
    status["conditions"] = [
        *(status.get("conditions") or []),
        *({"type": t, "status": s, "reason": r} for t, s, r in conds),
    ]
    return out


def test_a_completed_trainjob_is_not_released_and_its_forecast_says_finished() -> None:
    api = FakeApi()
    api.workloads[WL] = workload()
    e = _engine(api)
    now, body = _feed(e, 2610)
    e.enqueue("job", "MODIFIED", _conditioned(body, ("Complete", "True", "JobsCompleted")))
    e.enqueue("workload", "MODIFIED", _conditioned(api.workloads[WL], ("Finished", "True", "Succeeded")))
    for dt in (10.0, 60.0, 600.0, 3600.0):
        e.step(now + dt)
    assert api.mutations() == []
    assert not [c for c in api.log if c[0] == "event"]
    status = api.forecasts[KEY]["status"]
    assert status["state"] == "finished" and status["summary"]["advice"] == "finished"
    assert status["job"]["phase"] == "finished"
    assert status["forecast"] is not None and status["progress"]["step"] == 2610
    conds = {c["type"]: c for c in status["conditions"]}
    assert (conds["Forecasting"]["status"], conds["Forecasting"]["reason"]) == ("True", "Forecast")
    assert (conds["Actionable"]["status"], conds["Actionable"]["reason"]) == ("False", "Finished")


def test_a_running_job_under_an_apply_policy_is_actionable_and_a_new_one_is_observing() -> None:
    api = FakeApi()
    api.workloads[WL] = workload()
    e = _engine(api)
    e.enqueue("job", "ADDED", trainjob(step=10, total=2619, loss="2.0", updated=iso(T0)))
    e.step(T0)
    status = api.forecasts[KEY]["status"]
    assert status["summary"]["advice"] == "observing"  # one point: no verdict, so no "continue"
    conds = {c["type"]: c for c in status["conditions"]}
    # a forecast is made on the first point (wide), too weak for any rule: hence "observing"
    assert conds["Forecasting"]["message"] == "forecast on 1 point(s)"
    assert (conds["Actionable"]["status"], conds["Actionable"]["reason"]) == ("True", "Apply")
    first = conds["Actionable"]["lastTransitionTime"]
    _feed(e, 500)
    conds = {c["type"]: c for c in api.forecasts[KEY]["status"]["conditions"]}
    assert conds["Forecasting"]["status"] == "True"
    assert conds["Actionable"]["lastTransitionTime"] == first  # unchanged status, unchanged time


def test_the_same_run_silent_but_not_complete_is_released() -> None:
    """The control: a run that stops reporting far from its end is hung, and released."""
    api = FakeApi()
    api.workloads[WL] = workload()
    e = _engine(api)
    now, _ = _feed(e, 1500)
    for dt in (10.0, 60.0, 600.0):
        e.step(now + dt)
    assert api.mutations() == [("set_active", "team-a", "trainjob-llm-abcde", False)]


def test_a_run_whose_step_stops_while_reports_arrive_is_shown_hung_before_the_policy_acts() -> None:
    """Reports every 30 s keep coming with the step stuck: the status's learning state (STATE, its
    hung probability) is judged at the time of each look, not at the last forecast, so it says hung
    while a stall rule with a longer ``for`` still waits ("stalled?")."""
    api = FakeApi()
    api.workloads[WL] = workload()
    e = make_engine(api)
    policy = copy.deepcopy(POLICY)
    policy["spec"].update(mode="Recommend", rules={"stall": {"for": "30m"}})
    e.enqueue("policy", "ADDED", policy)
    e.enqueue("workload", "ADDED", api.workloads[WL])
    now = T0
    for i, step in enumerate(range(10, 1001, 10)):
        now = T0 + i * 30.0
        e.enqueue(
            "job",
            "MODIFIED",
            trainjob(step=step, total=3000, loss=f"{2.0 - step / 2000:.5f}", updated=iso(now)),
        )
        e.step(now)
    assert api.forecasts[KEY]["status"]["state"] == "learning"
    stuck = now
    for k in range(1, 41):  # 20 minutes of reports at step 1000
        now = stuck + k * 30.0
        e.enqueue("job", "MODIFIED", trainjob(step=1000, total=3000, loss="1.5", updated=iso(now)))
        e.step(now)
    status = api.forecasts[KEY]["status"]
    assert status["state"] == "hung"
    assert status["learningState"]["probabilities"]["hung"] == 1.0
    assert status["recommendation"]["advice"] == "stalled?"
    assert status["summary"]["eta"] == "-"
    # the reports kept coming: the reason says the step is stuck, not that the reporter is silent
    assert any("while progress reports still arrive" in r for r in status["recommendation"]["reasons"])
