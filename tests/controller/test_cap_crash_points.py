"""A controller killed (``kill -9``) at each step of a capped action, restarted, then the job
deleted and the controller restarted again: the action is carried out once, and the policy's
``maxActionsPerHour`` still counts it, from ``status.recentActions`` alone (the job's
TrainJobForecast, which held its log, went with the job).

The crash points, in the order the actuator takes them:

* ``record``: during the TrainJobForecast write that records the request (nothing durable yet);
* ``forecast``: after that write, before the AdvisorPolicy's ``recentActions`` is written (the
  platform trial's kill);
* ``policy``: after ``recentActions`` is written, before the Workload is patched;
* ``workload``: after the Workload is patched, before the outcome is recorded;
* ``event``: after the outcome is recorded and logged, before its Event is posted.

The audit log, across the processes, has one ``outcome`` line per request and an ``attempt``
line only for a request that got one: no attempt is left without its outcome, none logged twice.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from advisor.controller.audit import AUDIT_LOGGER
from advisor.controller.engine import Engine
from advisor.controller.render import iso
from advisor.model import ActionKind
from tests.controller.fakes import FakeApi, make_engine, trainjob, workload

T0 = 1_800_000_000.0
NS = "team-a"
POLICY = {
    "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
    "kind": "AdvisorPolicy",
    "metadata": {"name": "capped", "generation": 1},
    "spec": {
        "mode": "Apply",
        "safety": {"minRuntime": "0s", "cooldown": "0s", "maxActionsPerHour": 1},
        "rules": {"stall": {"for": "40s", "action": "Release"}, "quotaRelease": {"checkpointFirst": False}},
    },
}
POINTS = ("record", "forecast", "policy", "workload", "event")


class Killed(BaseException):
    """``kill -9``: nothing after it runs, not even an ``except Exception``."""


def _wl_name(job: str) -> str:
    return f"trainjob-{job}-abcde"


def _policy_as_stored(api: FakeApi) -> dict[str, Any]:
    """The AdvisorPolicy as a restarted controller lists it: its status is what was patched."""
    status: dict[str, Any] = {}
    for call in api.log:
        if call[0] == "policy_status" and call[1] == POLICY["metadata"]["name"]:
            status.update(copy.deepcopy(call[2]))
    return {**copy.deepcopy(POLICY), "status": status}


def _recent_actions(api: FakeApi) -> list[str]:
    return [a["requestId"] for a in _policy_as_stored(api)["status"].get("recentActions", [])]


def _releases(api: FakeApi, job: str) -> int:
    return sum(1 for c in api.mutations() if c[0] == "set_active" and c[2] == _wl_name(job))


@dataclass
class Run:
    api: FakeApi = field(default_factory=FakeApi)
    bodies: dict[str, dict[str, Any]] = field(default_factory=dict)  # each job as last reported
    released: str | None = None  # the request id that released j0
    restarted_at: int = 0  # where the second controller's calls start in ``api.log``

    def start(self) -> Engine:
        """A controller (re)starting: the saved statuses, then the listings (policy first)."""
        e = make_engine(self.api)
        e.load_saved(self.api.list_forecasts())
        e.enqueue("policy", "ADDED", _policy_as_stored(self.api))
        for wl in self.api.workloads.values():
            e.enqueue("workload", "ADDED", copy.deepcopy(wl))
        for body in self.bodies.values():
            e.enqueue("job", "ADDED", copy.deepcopy(body))
        return e

    def new_job(self, e: Engine, name: str) -> None:
        self.api.workloads[f"{NS}/{_wl_name(name)}"] = workload(job_name=name, uid=f"u-{name}")
        e.enqueue("workload", "ADDED", copy.deepcopy(self.api.workloads[f"{NS}/{_wl_name(name)}"]))

    def report(self, e: Engine, name: str, t0: float) -> float:
        """Progress every 5 s up to step 500, then nothing: the job hangs (stall rule)."""
        now = t0
        for i, step in enumerate(range(10, 501, 10)):
            now = t0 + 5.0 * i
            self.bodies[name] = trainjob(
                name=name, uid=f"u-{name}", step=step, total=2000, loss="1.5", updated=iso(now)
            )
            e.enqueue("job", "MODIFIED", copy.deepcopy(self.bodies[name]))
            e.step(now)
        return now

    def delete(self, e: Engine, name: str, now: float) -> None:
        """The user deletes the TrainJob; its TrainJobForecast and Workload go with it."""
        e.enqueue("job", "DELETED", self.bodies.pop(name))
        wl = self.api.workloads.pop(f"{NS}/{_wl_name(name)}")
        e.enqueue("workload", "DELETED", wl)
        e.step(now)
        self.api.forecasts.pop(f"{NS}/{name}", None)


def _arm(e: Engine, api: FakeApi, point: str) -> Callable[[], None]:
    """Kill the controller at ``point`` of j0's release; returns what disarms it (the API outlives
    the process)."""
    if point == "record":
        write_now = e.writer.write_now

        def dying_write(key: str, payload: Any, **kw: Any) -> None:
            pending = json.loads(payload["status"].get("pendingActions") or "{}").values()
            if any(p.get("kind") == "release-quota" and p.get("stage") == "recorded" for p in pending):
                raise Killed(point)
            write_now(key, payload, **kw)

        e.writer.write_now = dying_write  # type: ignore[method-assign]
        return lambda: None
    if point == "forecast":
        patch = api.patch_policy_status

        def dying_patch(name: str, status: Any) -> None:
            if "recentActions" in status:
                raise Killed(point)
            patch(name, status)

        api.patch_policy_status = dying_patch  # type: ignore[method-assign]
        return lambda: delattr(api, "patch_policy_status")
    if point in ("policy", "workload"):
        set_active = api.kueue.set_active

        def dying_set_active(*a: Any, **kw: Any) -> Any:
            if point == "workload":
                set_active(*a, **kw)
            raise Killed(point)

        api.kueue.set_active = dying_set_active  # type: ignore[method-assign]
        return lambda: delattr(api.kueue, "set_active")
    assert point == "event"
    create_event = api.create_event

    def dying_event(involved: Any, *, reason: str, **kw: Any) -> bool:
        if reason == "QuotaReleased":
            raise Killed(point)
        return create_event(involved, reason=reason, **kw)

    api.create_event = dying_event  # type: ignore[method-assign]
    return lambda: delattr(api, "create_event")


def _killed_during_release(point: str) -> tuple[Run, float]:
    """j0 hangs and the first controller is killed at ``point`` of its release (the API outlives
    it); returns the run and the time of j0's last report."""
    run = Run()
    first = run.start()
    run.new_job(first, "j0")
    now = run.report(first, "j0", T0)
    disarm = _arm(first, run.api, point)
    with pytest.raises(Killed):
        for t in range(10, 300, 10):
            first.step(now + t)
    disarm()
    return run, now


def _run(point: str) -> Run:
    """j0 hangs and its release is killed at ``point``; the restarted controller sees j0 again and
    j1 hang (the cap of 1 is reached); the user deletes j0; the controller restarts again and
    sees j1 still hung, within the hour of j0's release."""
    run, now = _killed_during_release(point)
    assert _releases(run.api, "j0") == (1 if point in ("workload", "event") else 0)

    run.restarted_at = len(run.api.log)
    second = run.start()
    t1 = T0 + 600
    second.step(t1)
    run.new_job(second, "j1")
    now = run.report(second, "j1", t1)
    for t in range(10, 300, 10):
        second.step(now + t)
    rec = second.core.record(f"{NS}/j0")
    assert rec is not None
    (release,) = [a for a in rec.actions if a.kind is ActionKind.RELEASE_QUOTA]
    assert release.outcome == "done"
    run.released = release.request_id
    run.delete(second, "j0", now + 300)
    second.close()

    third = run.start()
    t2 = T0 + 1800  # j0's release is 25-30 min old: it counts
    for t in range(0, 300, 10):
        third.step(t2 + t)
    third.close()
    return run


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_any_step_of_a_capped_action_loses_no_count(point: str) -> None:
    run = _run(point)
    assert _releases(run.api, "j0") == 1  # carried out once, whatever the kill
    assert _releases(run.api, "j1") == 0  # the cap of 1 holds, from the policy status alone
    assert _recent_actions(run.api).count(run.released) == 1


@pytest.mark.parametrize("point", POINTS)
def test_the_restarted_controller_writes_the_record_only_when_the_policy_lacks_it(point: str) -> None:
    run = _run(point)
    writes = [
        c[2]["recentActions"]
        for c in run.api.log[run.restarted_at :]
        if c[0] == "policy_status" and "recentActions" in c[2]
    ]
    if point == "forecast":  # killed before the record: written once, before the release
        assert [[a["requestId"] for a in w] for w in writes] == [[run.released]]
        first_release = next(
            i for i, c in enumerate(run.api.log) if c[0] == "set_active" and c[2] == _wl_name("j0")
        )
        first_record = next(
            i for i, c in enumerate(run.api.log) if c[0] == "policy_status" and "recentActions" in c[2]
        )
        assert first_record < first_release
    else:  # nothing new to record (``record``: the release after the restart is a new one)
        assert len(writes) == (1 if point == "record" else 0)


def test_a_resumed_action_whose_policy_is_gone_is_not_carried_out() -> None:
    """Deleted while the controller was down: recording the action would overwrite a list never
    seen, carrying it out unrecorded could lose it from a cap; it fails instead."""
    run, _now = _killed_during_release("forecast")
    second = make_engine(run.api)
    second.load_saved(run.api.list_forecasts())
    for wl in run.api.workloads.values():
        second.enqueue("workload", "ADDED", copy.deepcopy(wl))
    second.enqueue("job", "ADDED", copy.deepcopy(run.bodies["j0"]))
    second.step(T0 + 600)
    assert _releases(run.api, "j0") == 0
    rec = second.core.record(f"{NS}/j0")
    assert rec is not None and [a.outcome for a in rec.actions] == ["failed"]
    assert "not seen" in (rec.actions[0].detail or "")
    assert second.actuator.pending_for(f"{NS}/j0") == {}


def test_a_resumed_action_whose_record_cannot_be_written_is_not_carried_out() -> None:
    run, _now = _killed_during_release("forecast")

    def unavailable(name: str, status: Any) -> None:
        if "recentActions" in status:
            raise RuntimeError("API server unavailable")

    run.api.patch_policy_status = unavailable  # type: ignore[method-assign]
    second = run.start()
    second.step(T0 + 600)
    assert _releases(run.api, "j0") == 0
    rec = second.core.record(f"{NS}/j0")
    assert rec is not None and rec.actions[0].outcome == "failed"  # then held back: a recommendation
    assert "recentActions" in (rec.actions[0].detail or "")


def test_a_restart_completes_recent_actions_from_the_saved_job_logs() -> None:
    """A policy status that lacks an action a saved job log holds (left so by a controller that
    resumed it without recording it, or written back by hand): the restarted controller writes
    it in at once, so the cap still counts it after the job is deleted."""
    run = Run()

    def without_recent_actions(name: str, status: Any) -> None:
        kept = {k: v for k, v in status.items() if k != "recentActions"}
        if kept:
            run.api.log.append(("policy_status", name, copy.deepcopy(kept)))

    run.api.patch_policy_status = without_recent_actions  # type: ignore[method-assign]
    first = run.start()
    run.new_job(first, "j0")
    now = run.report(first, "j0", T0)
    for t in range(10, 300, 10):
        first.step(now + t)
    first.close()
    assert _releases(run.api, "j0") == 1 and _recent_actions(run.api) == []
    del run.api.patch_policy_status

    second = run.start()
    second.step(T0 + 600)
    rec = second.core.record(f"{NS}/j0")
    assert rec is not None
    (release,) = [a.request_id for a in rec.actions if a.kind is ActionKind.RELEASE_QUOTA]
    assert _recent_actions(run.api) == [release]
    run.delete(second, "j0", T0 + 610)
    second.close()

    third = run.start()
    run.new_job(third, "j1")
    now = run.report(third, "j1", T0 + 900)
    for t in range(10, 300, 10):
        third.step(now + t)
    assert _releases(run.api, "j1") == 0
    writes = [c for c in run.api.log if c[0] == "policy_status" and "recentActions" in c[2]]
    assert len(writes) == 1  # the completion; nothing rewritten while the status lists it


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_any_step_leaves_each_attempt_with_one_outcome_line(
    point: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        run = _run(point)
    audit = [r.audit for r in caplog.records if r.name == AUDIT_LOGGER]  # type: ignore[attr-defined]
    # (an action the cap held back is logged under the kind it would have been, with no attempt)
    lines = [
        a
        for a in audit
        if a["kind"] == "release-quota" and a.get("mode") == "Apply" and a.get("outcome") != "held"
    ]
    rids = {a["requestId"] for a in lines}
    stages = {rid: [a["audit"] for a in lines if a["requestId"] == rid] for rid in rids}
    # ``record``: the request killed before it was persisted left no line; the restarted
    # controller decided the release again, under a new request id
    assert stages == {run.released: ["attempt", "outcome"]}, stages
    (outcome,) = [a for a in lines if a["audit"] == "outcome"]
    assert outcome["outcome"] == "done"
    resumed = point in ("forecast", "policy", "workload")  # finished by the restarted controller
    assert outcome.get("resumed", False) is resumed


@pytest.mark.parametrize("point", ["forecast", "policy"])
def test_a_resumed_release_of_a_job_preempted_while_the_controller_was_down_is_dropped(point: str) -> None:
    """Killed between recording a release and carrying it out; while it was down Kueue preempted
    the job (its Workload waits in the queue without quota). The restarted controller does not
    deactivate it (it would drop out of the queue until someone resumed it): the action is
    recorded as not carried out, with a Warning saying why."""
    run, _now = _killed_during_release(point)
    key = f"{NS}/{_wl_name('j0')}"
    run.api.workloads[key] = workload(job_name="j0", uid="u-j0", admitted=False)  # preempted, queued
    second = run.start()
    for t in range(0, 120, 10):
        second.step(T0 + 600 + t)
    assert _releases(run.api, "j0") == 0
    rec = second.core.record(f"{NS}/j0")
    assert rec is not None
    (release,) = [a for a in rec.actions if a.kind is ActionKind.RELEASE_QUOTA]
    assert release.outcome == "impossible" and "not carried out after the restart" in (release.detail or "")
    assert second.actuator.pending_for(f"{NS}/j0") == {}
    events = [c for c in run.api.log if c[0] == "event" and "ActionDropped" in str(c)]
    assert events


def test_a_job_made_again_under_the_same_name_while_the_controller_was_down_inherits_nothing() -> None:
    """The saved TrainJobForecast was written for the deleted job (its owner's uid): the new job
    of the same name is a new run, and the release decided for the old one is not its own."""
    run, now = _killed_during_release("policy")
    # deleted and made again while the controller was down (its forecast not collected yet)
    run.api.workloads[f"{NS}/{_wl_name('j0')}"] = workload(job_name="j0", uid="u-j0-new")
    run.bodies["j0"] = trainjob(name="j0", uid="u-j0-new", step=10, total=2000, loss="2.5", updated=iso(now))
    second = run.start()
    second.step(T0 + 600)
    assert _releases(run.api, "j0") == 0
    rec = second.core.record(f"{NS}/j0")
    assert rec is not None and len(rec.history) == 1  # its own report alone, none of the old run's
    assert not any(a.kind is ActionKind.RELEASE_QUOTA for a in rec.actions)
    assert second.actuator.pending_for(f"{NS}/j0") == {}


def test_an_action_the_cap_holds_back_is_said_held_in_apply_mode_not_recommended() -> None:
    """Its Event, audit line and counters said "mode Recommend", and the policy's RECOMMENDED
    count (what an admin reads to see what Apply would do) counted it."""
    run = Run()
    e = run.start()
    run.new_job(e, "j0")
    now = run.report(e, "j0", T0)
    for t in range(10, 300, 10):
        e.step(now + t)
    assert _releases(run.api, "j0") == 1
    run.new_job(e, "j1")
    now = run.report(e, "j1", now + 300)
    from advisor.controller import actuator as actuator_module

    lines: list[dict[str, object]] = []
    real_audit = actuator_module.audit
    actuator_module.audit = lambda *a, **kw: lines.append(kw) or real_audit(*a, **kw)  # type: ignore[assignment,func-returns-value]
    try:
        for t in range(10, 300, 10):
            e.step(now + t)
    finally:
        actuator_module.audit = real_audit  # type: ignore[assignment]
    assert _releases(run.api, "j1") == 0  # the cap of 1 holds it back
    # the audit line names the kind the metric counts it under (it said "recommend")
    held_lines = [kw for kw in lines if kw.get("outcome") == "held"]
    assert held_lines and all(kw["kind"] is ActionKind.RELEASE_QUOTA for kw in held_lines)
    held = [ev for ev in run.api.events if ev["reason"] == "ActionHeld"]
    assert held and "mode Apply" in held[0]["message"]
    assert not [ev for ev in run.api.events if ev["reason"] == "Recommendation"]
    status = _policy_as_stored(run.api)["status"]
    counts = json.dumps(status)
    assert status["recommendations"] == 0 and status["actionsHeld"] == 1, counts
    # the outcomes split actionsTaken (a held action is none of them: counted apart)
    assert sum(status["actionsByOutcome"].values()) == status["actionsTaken"], counts
    assert e.metrics.actions.labels("capped", "release-quota", "Apply", "held")._value.get() == 1
