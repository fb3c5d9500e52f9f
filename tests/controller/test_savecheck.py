"""The save-window AdmissionCheck: the advisor marks its checks Active, and lets a workload start
(its check Ready) only after it evaluated the job, never holding one it does not judge."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.kueue import parse_workload
from advisor.controller.savecheck import CONTROLLER_NAME, SaveWindowCheck, ready_message
from advisor.model import Action, ActionKind, ActionRecord, Decision, JobView
from tests.controller.fakes import ApiError, FakeApi, trainjob, workload

T0 = 1_800_000_000.0
WL = "team-a/trainjob-llm-abcde"


class FakeCustom:
    """The two status patches the check makes, recorded; ``fail`` makes the next one raise."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.fail: Exception | None = None

    def patch_cluster_custom_object_status(
        self, group: str, version: str, plural: str, name: str, body: Any
    ) -> Any:
        self._maybe_fail()
        self.calls.append((f"{plural}/{name}", body))
        return {}

    def patch_namespaced_custom_object_status(
        self, group: str, version: str, ns: str, plural: str, name: str, body: Any, **kw: Any
    ) -> Any:
        self._maybe_fail()
        self.calls.append((f"{plural}/{ns}/{name}", body))
        return {}

    def _maybe_fail(self) -> None:
        if self.fail is not None:
            exc, self.fail = self.fail, None
            raise exc


def _check(name: str = "advisor-check", controller: str = CONTROLLER_NAME, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "generation": 1},
        "spec": {"controllerName": controller},
        "status": status,
    }


def _waiting(
    checks: list[tuple[str, str]], *, reserved: bool = True, kind: str = "TrainJob"
) -> dict[str, Any]:
    wl = workload(admitted=False)
    wl["status"]["conditions"] = [{"type": "QuotaReserved", "status": "True" if reserved else "False"}]
    wl["status"]["admissionChecks"] = [
        {"name": n, "state": s, "message": "", "lastTransitionTime": "2026-08-21T10:00:02Z"}
        for n, s in checks
    ]
    wl["metadata"]["ownerReferences"][0]["kind"] = kind
    return wl


def test_our_checks_are_marked_active_once_and_others_are_left_alone() -> None:
    custom = FakeCustom()
    check = SaveWindowCheck(custom, "v1beta2")
    check.on_admission_check("ADDED", _check())
    check.on_admission_check("ADDED", _check("prov", controller="kueue.x-k8s.io/provisioning-request"))
    ((target, body),) = custom.calls
    assert target == "admissionchecks/advisor-check"
    (cond,) = body["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["observedGeneration"]) == ("Active", "True", 1)
    active = _check(conditions=[dict(cond)])
    check.on_admission_check("MODIFIED", active)
    assert len(custom.calls) == 1  # already Active for this generation: no write
    assert check.ours == {"advisor-check"}
    check.on_admission_check("DELETED", active)
    assert check.ours == set()


def test_only_our_pending_checks_with_quota_reserved_are_set_ready_each_guarded_by_a_test() -> None:
    custom = FakeCustom()
    check = SaveWindowCheck(custom, "v1beta2")
    check.on_admission_check("ADDED", _check())
    custom.calls.clear()
    wl = parse_workload(_waiting([("prov", "Pending"), ("advisor-check", "Pending")]))
    assert check.pending(wl) == [(1, "advisor-check")]
    assert check.settle(wl, "looked") == 1
    ((target, ops),) = custom.calls
    assert target == "workloads/team-a/trainjob-llm-abcde"
    assert ops[:3] == [
        {"op": "test", "path": "/status/admissionChecks/1/name", "value": "advisor-check"},
        {"op": "test", "path": "/status/admissionChecks/1/state", "value": "Pending"},
        {"op": "replace", "path": "/status/admissionChecks/1/state", "value": "Ready"},
    ]
    # nothing to do: already Ready, no quota reserved yet, or no check of ours
    assert check.settle(parse_workload(_waiting([("advisor-check", "Ready")])), "x") == 0
    assert check.settle(parse_workload(_waiting([("advisor-check", "Pending")], reserved=False)), "x") == 0
    assert check.settle(parse_workload(_waiting([("prov", "Pending")])), "x") == 0
    # a refused write (Kueue reset the entry meanwhile: the test fails, 422) is left for the next event
    custom.fail = ApiError(422)
    assert check.settle(wl, "looked") == 0
    assert check.settle(wl, "looked") == 1


def _engine(custom: FakeCustom) -> Engine:
    e = Engine(FakeApi(), config=EngineConfig(write_interval_s=0, writer_workers=0, forecast_interval_s=0))
    e.use_save_check(SaveWindowCheck(custom, "v1beta2"), ["TrainJob"])
    e.enqueue("admissioncheck", "ADDED", _check())
    e.step(T0)
    custom.calls.clear()
    return e


def test_the_engine_lets_a_trainjob_start_after_evaluating_it_and_other_kinds_at_once() -> None:
    custom = FakeCustom()
    e = _engine(custom)
    e.enqueue("workload", "ADDED", _waiting([("advisor-check", "Pending")]))
    e.step(T0 + 1)
    assert custom.calls == []  # its TrainJob has not been seen yet: nothing looked at it
    job = trainjob(step=None)
    job["spec"]["suspend"] = True
    e.enqueue("job", "ADDED", job)
    e.step(T0 + 2)
    ((target, ops),) = custom.calls
    assert target == "workloads/team-a/trainjob-llm-abcde"
    assert ops[3]["value"].startswith("trainjob-advisor looked at the job before its start")
    # a batch Job's workload on the same queue: the advisor judges no such job, so it goes at once
    custom.calls.clear()
    other = copy.deepcopy(_waiting([("advisor-check", "Pending")], kind="Job"))
    other["metadata"]["name"] = "job-batch-1"
    other["metadata"]["ownerReferences"][0]["name"] = "batch-1"
    e.enqueue("workload", "ADDED", other)
    e.step(T0 + 3)
    ((target, ops),) = custom.calls
    assert target == "workloads/team-a/job-batch-1" and "does not judge Job workloads" in ops[3]["value"]


def test_without_the_option_the_engine_answers_no_check() -> None:
    custom = FakeCustom()
    e = Engine(FakeApi(), config=EngineConfig(write_interval_s=0, writer_workers=0))
    e.enqueue("admissioncheck", "ADDED", _check())
    e.enqueue("workload", "ADDED", _waiting([("advisor-check", "Pending")], kind="Job"))
    e.step(T0)
    assert custom.calls == [] and e.save_check is None


def test_the_ready_message_names_the_grace_period_written_while_the_job_waited_by_any_look() -> None:
    """The grace period may be written by one evaluation and the check settled by a later one whose
    decision sets nothing (its first settle was refused): the message still names it, but never one
    written before the job's current wait (a grace period of an earlier start)."""
    reason = "set terminationGracePeriodSeconds to 43 for the next start (was 30): a save needs 42 s"
    grace = Action(ActionKind.SET_GRACE_PERIOD, "save-window", reason, {"grace_period_s": 43.0})
    written = ActionRecord(ActionKind.SET_GRACE_PERIOD, T0 + 5, "r1", outcome="done", reason=reason)
    waiting = JobView(namespace="team-a", name="llm", active=False, admitted=False, phase_since=T0)
    plain = "trainjob-advisor looked at the job before its start"
    assert ready_message(Decision(job="team-a/llm", actions=(grace,)), waiting) == f"{plain}: {reason}"
    later = Decision(job="team-a/llm")
    assert ready_message(later, dataclasses.replace(waiting, actions=(written,))) == f"{plain}: {reason}"
    # written for an earlier start (the job waits again since T0 + 10), or not written: the plain message
    earlier = dataclasses.replace(waiting, actions=(written,), phase_since=T0 + 10)
    assert ready_message(later, earlier) == plain
    failed = dataclasses.replace(written, outcome="failed")
    assert ready_message(later, dataclasses.replace(waiting, actions=(failed,))) == plain
