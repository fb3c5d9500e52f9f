"""Apply mode a platform can trust, through the engine and the fake API: a job without a Workload
is tried once (not 120 times an hour), transient failures back off with one Warning per window,
Events are one per request id and outcome even across a restart, and every attempt and outcome is
an INFO line of the audit log."""

from __future__ import annotations

import itertools
import json
import logging
from typing import Any

import pytest

from advisor.controller.actuator import Actuator
from advisor.controller.audit import AUDIT_LOGGER
from advisor.controller.cliutil import JsonFormatter
from advisor.controller.engine import Engine
from advisor.controller.render import iso
from advisor.core import AdvisorCore
from advisor.model import ActionKind, ActionRecord, JobView, ProgressSample
from policies.retries import backoff_s
from tests.controller.fakes import ApiError, FakeApi, make_engine, trainjob, workload

T0 = 1_800_000_000.0
KEY = "team-a/llm"
WL = "team-a/trainjob-llm-abcde"
POLICY = {
    "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
    "kind": "AdvisorPolicy",
    "metadata": {"name": "stall-release", "generation": 1},
    "spec": {
        "mode": "Apply",
        "safety": {"minRuntime": "0s", "cooldown": "0s", "maxActionsPerHour": 1000},
        "rules": {"stall": {"for": "40s", "action": "Release"}, "quotaRelease": {"checkpointFirst": False}},
    },
}


def _engine(api: FakeApi) -> Engine:
    e = make_engine(api)
    e.enqueue("policy", "ADDED", POLICY)
    return e


def _hang(e: Engine) -> float:
    """Reports up to step 500 of 2000, then nothing: hung."""
    now = T0
    for i, step in enumerate(range(10, 501, 10)):
        now = T0 + i * 5.0
        e.enqueue("job", "MODIFIED", trainjob(step=step, total=2000, loss="1.5", updated=iso(now)))
        e.step(now)
    return now


def _warnings(api: FakeApi) -> list[dict[str, Any]]:
    return [ev for ev in api.events if ev["warning"]]


def test_a_job_without_a_workload_is_not_released_until_it_gets_one() -> None:
    """Quota is released through the Workload: without one, no release is attempted (not 120
    times an hour, not once) and the recommendation says why; once Kueue creates it, it works."""
    api = FakeApi()
    e = _engine(api)
    now = _hang(e)
    for t in range(60, 3600, 30):  # an hour of evaluations at the default interval
        e.step(now + t)
    rec = e.core.record(KEY)
    assert not [a for a in rec.actions if a.kind is ActionKind.RELEASE_QUOTA]
    assert _warnings(api) == [] and api.mutations() == []
    held = [a for a in rec.actions if a.kind is ActionKind.RECOMMEND]
    assert held and "the job has no Kueue Workload" in held[-1].reason
    # Kueue creates the Workload: the release is made, and works
    api.workloads[WL] = workload()
    e.enqueue("workload", "ADDED", api.workloads[WL])
    e.step(now + 3600)
    assert api.mutations() == [("set_active", "team-a", "trainjob-llm-abcde", False)]


def test_transient_failures_back_off_with_one_warning_per_window() -> None:
    api = FakeApi()
    api.workloads[WL] = workload()

    def unavailable(*_: Any, **__: Any) -> Any:
        raise ApiError(503, "Service Unavailable")

    api.kueue.get_workload = unavailable  # type: ignore[method-assign]
    e = _engine(api)
    e.actuator.sleep = lambda s: None
    e.enqueue("workload", "ADDED", api.workloads[WL])
    now = _hang(e)
    for t in range(60, 3600, 10):
        e.step(now + t)
    times = [a.time for a in e.core.record(KEY).actions if a.kind is ActionKind.RELEASE_QUOTA]
    assert all(a.outcome == "failed" for a in e.core.record(KEY).actions)
    assert 3 <= len(times) <= 7  # 60 s, doubling: not one every evaluation (that would be 350)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(g >= backoff_s(n + 1) for n, g in enumerate(gaps)), (gaps, times)
    assert len(_warnings(api)) == len(times)  # one Warning per attempt, so one per window


def _ack_actuator(api: FakeApi) -> tuple[Actuator, AdvisorCore, JobView]:
    core = AdvisorCore()
    core.observe(KEY, ProgressSample(step=10, loss=1.0, time=T0), now=T0)
    core.record_action(KEY, ActionRecord(ActionKind.CHECKPOINT, T0, "123456789012345", "p", "checkpoint"))
    act = Actuator(api, core, lambda key: None)
    act.restore_pending(
        KEY,
        {
            "123456789012345": {
                "kind": "checkpoint",
                "stage": "awaiting-ack",
                "time": T0,
                "rule": "checkpoint",
            }
        },
    )
    return act, core, core.view(JobView(namespace="team-a", name="llm"))


def test_one_checkpoint_acknowledged_event_per_request_across_a_restart() -> None:
    """The trial's bug: the ack was handled, the status write was lost in the restart, the
    restarted controller handled the same ack again and posted a second Event."""
    api = FakeApi()
    first, _, job = _ack_actuator(api)
    assert first.checkpoint_done(job, "123456789012345", "acknowledged", body=trainjob(), detail="at step 10")
    restarted, _, job = _ack_actuator(api)  # the same pending entry, restored from the old status
    assert restarted.checkpoint_done(
        job, "123456789012345", "acknowledged", body=trainjob(), detail="at step 10"
    )
    assert [ev["reason"] for ev in api.events] == ["CheckpointAcknowledged"]


def test_each_attempt_and_outcome_is_one_structured_audit_line(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi()
    api.workloads[WL] = workload()
    e = _engine(api)
    e.enqueue("workload", "ADDED", api.workloads[WL])
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        now = _hang(e)
        e.step(now + 120)
    lines = [r for r in caplog.records if r.name == AUDIT_LOGGER]
    assert [r.audit["audit"] for r in lines] == ["attempt", "outcome"]  # type: ignore[attr-defined]
    attempt, outcome = (r.audit for r in lines)  # type: ignore[attr-defined]
    assert attempt["requestId"] == outcome["requestId"] and outcome["outcome"] == "done"
    assert (outcome["job"], outcome["policy"], outcome["rule"], outcome["kind"]) == (
        KEY,
        "stall-release",
        "stall",
        "release-quota",
    )
    assert "stalled" in outcome["reason"] and outcome["step"] == 500 and outcome["totalSteps"] == 2000
    assert "plateauProbability" in outcome and "Workload trainjob-llm-abcde deactivated" in outcome["detail"]
    assert all(r.levelno == logging.INFO for r in lines)
    data = json.loads(JsonFormatter().format(lines[1]))
    assert data["requestId"] == outcome["requestId"] and data["outcome"] == "done" and data["job"] == KEY
    assert f"requestId={json.dumps(outcome['requestId'])}" in lines[1].getMessage()


def test_the_text_audit_line_keeps_the_reasons_characters(caplog: pytest.LogCaptureFixture) -> None:
    from advisor.controller.audit import audit

    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        audit(
            "attempt",
            JobView(namespace="team-a", name="llm"),
            kind=ActionKind.RELEASE_QUOTA,
            request_id="r1",
            policy="p",
            rule="plateau",
            mode="Apply",
            outcome="requested",
            reason="eval_loss 0.94 → 1.03 predicted",
        )
    assert "0.94 → 1.03" in caplog.text and "\\u2192" not in caplog.text
