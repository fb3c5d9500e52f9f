"""The save-window AdmissionCheck: the advisor marks its checks Active, and lets a workload start
(its check Ready) only after it evaluated the job, never holding one it does not judge."""

from __future__ import annotations

import copy
import dataclasses
import logging
from typing import Any

import pytest

from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.kueue import parse_workload
from advisor.controller.savecheck import (
    CONTROLLER_NAME,
    KIND_NOT_JUDGED,
    NAMESPACE_NOT_WATCHED,
    NamespaceScope,
    SaveWindowCheck,
    UnwatchedWorkloads,
    ready_message,
    unlooked,
)
from advisor.model import Action, ActionKind, ActionRecord, Decision, JobView
from tests.controller.fakes import ApiError, FakeApi, make_engine, trainjob, workload

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
    checks: list[tuple[str, str]], *, reserved: bool = True, kind: str = "TrainJob", namespace: str = "team-a"
) -> dict[str, Any]:
    wl = workload(admitted=False, namespace=namespace)
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


def _engine(custom: FakeCustom, scope: NamespaceScope | None = None) -> Engine:
    api = FakeApi()
    e = make_engine(api)
    e.use_save_check(SaveWindowCheck(custom, "v1beta2", scope=scope, events=api), ["TrainJob"])
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


def test_the_advisor_looks_first_only_at_judged_kinds_in_namespaces_it_watches() -> None:
    """The pure decision: a namespace not watched lets any workload through (nothing there is seen,
    so nothing can be saved, and no look would ever come); then a kind not judged; else: wait."""
    a = NamespaceScope(["team-a"])
    assert unlooked("team-a", "TrainJob", a, {"TrainJob"}) is None
    reason, message = unlooked("team-b", "TrainJob", a, {"TrainJob"}) or ("", "")
    assert reason == NAMESPACE_NOT_WATCHED
    assert message == (
        "trainjob-advisor: namespace team-b not watched by this advisor (it watches team-a): nothing to save"
    )
    assert unlooked("team-b", "Job", a, {"TrainJob"}) == (NAMESPACE_NOT_WATCHED, message)
    assert unlooked("team-a", "Job", a, {"TrainJob"}) == (
        KIND_NOT_JUDGED,
        "trainjob-advisor does not judge Job workloads",
    )
    assert unlooked("team-a", None, a, {"TrainJob"}) == (
        KIND_NOT_JUDGED,
        "trainjob-advisor does not judge ownerless workloads",
    )
    # no namespace named: every namespace is watched
    assert unlooked("anything", "TrainJob", NamespaceScope(), {"TrainJob"}) is None
    assert str(NamespaceScope()) == "every namespace"


def test_the_scope_reads_namespace_patterns_as_kopf_watches_them() -> None:
    """What counts as watched must be what kopf watches: a namespace it watches but the check took
    for unwatched would start before the advisor's look."""
    from kopf._cogs.structs.references import match_namespace  # kopf's own reading

    patterns = ["team-a", "team-*", "!kube-*", "ml-*, !ml-pr-*, ml-pr-7", "!*-dev, x-dev", "a?c"]
    names = ["team-a", "team-b", "kube-system", "ml-x", "ml-pr-3", "ml-pr-7", "b-dev", "x-dev", "abc", "ac"]
    for pattern in patterns:
        scope = NamespaceScope([pattern])
        for name in names:
            assert scope.covers(name) == match_namespace(name, pattern), (pattern, name)  # type: ignore[arg-type]
    two = NamespaceScope(["team-a", "team-b"])
    assert [two.covers(n) for n in ("team-a", "team-b", "team-c")] == [True, True, False]


def test_a_workload_of_a_namespace_not_watched_is_let_through_at_once_said_in_log_and_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The trial's case: ``run -n team-a`` and a queue serving team-a and team-b. team-b's workload
    held its quota behind a check nobody would set; now it goes at once, and says why."""
    custom = FakeCustom()
    e = _engine(custom, NamespaceScope(["team-a"]))
    api = e.api
    b = _waiting([("advisor-check", "Pending")], namespace="team-b")
    b["metadata"]["resourceVersion"] = "41"
    with caplog.at_level(logging.INFO, logger="advisor.controller.savecheck"):
        e.enqueue("unwatched-workload", "ADDED", b)
        e.step(T0 + 1)
    ((target, ops),) = custom.calls
    assert target == "workloads/team-b/trainjob-llm-abcde"
    assert ops[2] == {"op": "replace", "path": "/status/admissionChecks/0/state", "value": "Ready"}
    assert ops[3]["value"] == (
        "trainjob-advisor: namespace team-b not watched by this advisor (it watches team-a): nothing to save"
    )
    (event,) = api.events
    assert event["reason"] == NAMESPACE_NOT_WATCHED and event["warning"] is True
    assert event["involved"] == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "name": "trainjob-llm-abcde",
        "namespace": "team-b",
        "uid": "wl-uid-1",
    }
    assert event["message"].startswith("AdmissionCheck advisor-check set Ready without a look: ")
    (warned,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "team-b/trainjob-llm-abcde" in warned.getMessage() and "not watched" in warned.getMessage()
    # the unwatched workload is nobody's job here: the index (quota, guard) never saw it
    assert e.index.workload_for({"metadata": {"namespace": "team-b", "name": "llm", "uid": "uid-1"}}) is None
    # the same state again (a re-list): no second write, no second Event
    custom.calls.clear()
    b["status"]["admissionChecks"][0]["state"] = "Ready"
    e.enqueue("unwatched-workload", "MODIFIED", b)
    e.step(T0 + 2)
    assert custom.calls == [] and len(api.events) == 1


def test_a_kind_not_judged_is_let_through_with_a_normal_event() -> None:
    custom = FakeCustom()
    e = _engine(custom, NamespaceScope(["team-a"]))
    other = _waiting([("advisor-check", "Pending")], kind="Job")
    e.enqueue("workload", "ADDED", other)
    e.step(T0 + 1)
    ((_, ops),) = custom.calls
    assert ops[3]["value"] == "trainjob-advisor does not judge Job workloads"
    (event,) = e.api.events
    assert (event["reason"], event["warning"]) == (KIND_NOT_JUDGED, False)


def test_a_judged_job_of_a_watched_namespace_still_waits_for_the_look() -> None:
    custom = FakeCustom()
    e = _engine(custom, NamespaceScope(["team-a"]))
    e.enqueue("workload", "ADDED", _waiting([("advisor-check", "Pending")]))
    e.step(T0 + 1)
    assert custom.calls == [] and e.api.events == []


class FakeWatch:
    """``kubernetes.watch.Watch``: each ``stream`` call plays the next script (events, then an
    exception or the end of the stream, as a server timeout ends it); with no script left, it sets
    ``stop`` (the controller stops)."""

    def __init__(self, scripts: list[list[Any]], calls: list[dict[str, Any]], stop: Any) -> None:
        self.scripts = scripts
        self.calls = calls
        self.stop_flag = stop

    def stream(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        if not self.scripts:
            self.stop_flag.set()
            return
        for item in self.scripts.pop(0):
            if isinstance(item, Exception):
                raise item
            yield item

    def stop(self) -> None:
        pass


def _rv(body: dict[str, Any], rv: str) -> dict[str, Any]:
    body = copy.deepcopy(body)
    body["metadata"]["resourceVersion"] = rv
    return body


def test_the_unwatched_namespaces_workloads_are_listed_and_watched_and_only_the_waiting_offered() -> None:
    import threading

    waiting_a = _waiting([("advisor-check", "Pending")], namespace="team-a")
    waiting_b = _rv(_waiting([("advisor-check", "Pending")], namespace="team-b"), "10")
    admitted_b = _rv(_waiting([("advisor-check", "Ready")], namespace="team-b"), "11")
    unreserved_c = _rv(_waiting([("advisor-check", "Pending")], namespace="team-c", reserved=False), "12")
    waiting_c = _rv(_waiting([("advisor-check", "Pending")], namespace="team-c"), "13")
    lists: list[str] = []

    class Custom:
        def list_cluster_custom_object(self, group: str, version: str, plural: str, **kw: Any) -> Any:
            lists.append(plural)
            items = [waiting_a, waiting_b, admitted_b]
            return {"metadata": {"resourceVersion": f"{len(lists)}00"}, "items": items}

    stop = threading.Event()
    offered: list[tuple[str, str]] = []

    def offer(kind: str, body: Any) -> None:
        offered.append((kind, f"{body['metadata']['namespace']}@{body['metadata']['resourceVersion']}"))

    watch_calls: list[dict[str, Any]] = []
    scripts: list[list[Any]] = [
        # a workload that waits on nothing yet, a bookmark, then the server ends the watch (timeout)
        [
            {"type": "ADDED", "raw_object": unreserved_c},
            {"type": "BOOKMARK", "raw_object": {"metadata": {"resourceVersion": "150"}}},
        ],
        # resumed from the bookmark: the version is gone (410), so it lists again
        [ApiError(410, "Expired")],
        # a failure of another kind: retried from where it was
        [ApiError(503, "unavailable")],
        [{"type": "MODIFIED", "raw_object": waiting_c}, {"type": "DELETED", "raw_object": waiting_c}],
    ]
    follower = UnwatchedWorkloads(
        Custom(),
        "v1beta2",
        NamespaceScope(["team-a"]),
        offer,
        retry_s=0,
        watch=lambda: FakeWatch(scripts, watch_calls, stop),
    )
    follower.run(stop)
    assert lists == ["workloads", "workloads"]
    # team-a is kopf's; team-b's admitted one and team-c's unreserved one wait on no check
    assert offered == [("ADDED", "team-b@10"), ("ADDED", "team-b@10"), ("MODIFIED", "team-c@13")]
    assert [c.get("resource_version") for c in watch_calls] == ["100", "150", "200", "200", "13"]
    assert all(c["timeout_seconds"] == 240 and c["allow_watch_bookmarks"] for c in watch_calls)


def test_a_shard_answers_only_the_checks_of_its_own_controller_name() -> None:
    """Two releases' checks side by side: each controller marks Active and answers only its own,
    and its Active condition names the namespaces it watches."""
    custom = FakeCustom()
    shard = SaveWindowCheck(
        custom,
        "v1beta2",
        controller_name="trainjob-advisor.io/tjb-save-window",
        scope=NamespaceScope(["team-b"]),
    )
    shard.on_admission_check("ADDED", _check("trainjob-advisor-save-window"))  # the other release's
    shard.on_admission_check(
        "ADDED", _check("tjb-save-window", controller="trainjob-advisor.io/tjb-save-window")
    )
    assert shard.ours == {"tjb-save-window"}
    ((target, body),) = custom.calls
    assert target == "admissionchecks/tjb-save-window"
    assert body["status"]["conditions"][0]["message"] == (
        "trainjob-advisor (watching team-b) looks at each workload before it starts; "
        "a workload of another namespace goes at once"
    )
    custom.calls.clear()
    wl = parse_workload(_waiting([("trainjob-advisor-save-window", "Pending")], namespace="team-a"))
    assert shard.let_through(wl, ["TrainJob"]) == 0 and custom.calls == []  # not its check
    assert SaveWindowCheck(custom, "v1").active_message == (
        "trainjob-advisor (watching every namespace) looks at each workload before it starts"
    )


def test_two_advisors_answering_one_controller_name_are_told_apart_and_warned_of(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Shards that share a controllerName let each other's workloads through without a look. The
    Active condition says whose it is: another advisor's is taken over once (this release's
    namespaces may have changed), and taken back means two answer it: a warning, no write war."""
    stored = _check("shared")
    a_custom, b_custom = FakeCustom(), FakeCustom()
    a = SaveWindowCheck(a_custom, "v1beta2", scope=NamespaceScope(["team-a"]))
    b = SaveWindowCheck(b_custom, "v1beta2", scope=NamespaceScope(["team-b"]))

    def deliver(check: SaveWindowCheck, custom: FakeCustom) -> None:
        """``check`` sees the stored object; what it writes is stored."""
        custom.calls.clear()
        check.on_admission_check("MODIFIED", copy.deepcopy(stored))
        for _, body in custom.calls:
            stored["status"] = copy.deepcopy(body["status"])

    with caplog.at_level(logging.WARNING, logger="advisor.controller.savecheck"):
        deliver(a, a_custom)  # A marks it Active: its message
        deliver(b, b_custom)  # B finds A's: takes it over once
        assert len(b_custom.calls) == 1
        deliver(a, a_custom)  # A finds B's: takes it over once
        assert len(a_custom.calls) == 1
        deliver(b, b_custom)  # B finds A's again: two advisors; it warns and writes nothing
        deliver(a, a_custom)
        deliver(b, b_custom)
    assert a_custom.calls == [] and b_custom.calls == []
    (warned,) = [r.getMessage() for r in caplog.records]
    assert "AdmissionCheck shared" in warned and "(watching team-a)" in warned
    assert "--save-window-controller-name" in warned
    # an earlier version's message (no namespaces named) is left as it is, and warns of nothing
    old = _check(
        "old",
        conditions=[
            {"type": "Active", "status": "True", "observedGeneration": 1, "message": "trainjob-advisor looks"}
        ],
    )
    c_custom = FakeCustom()
    SaveWindowCheck(c_custom, "v1beta2").on_admission_check("ADDED", old)
    assert c_custom.calls == []
