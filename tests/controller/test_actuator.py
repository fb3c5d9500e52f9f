"""Carrying out decisions: Recommend mutates nothing; Apply records before it mutates; resumes once."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from advisor.controller.actuator import Actuator
from advisor.controller.kueue import parse_workload
from advisor.core import AdvisorCore
from advisor.model import Action, ActionKind, Decision, JobView, Mode, ProgressSample
from tests.controller.fakes import ApiError, FakeApi, trainjob, workload

NOW = 1_800_000_000.0
KEY = "team-a/llm"


class Setup:
    def __init__(self, *, persist_fails: bool = False) -> None:
        self.api = FakeApi()
        self.api.workloads["team-a/trainjob-llm-abcde"] = workload()
        self.api.pods["team-a/jobset.sigs.k8s.io/jobset-name=llm"] = ["llm-node-0-0", "llm-node-0-1"]
        self.core = AdvisorCore()
        self.core.observe(KEY, ProgressSample(step=10, loss=1.0, time=NOW - 60), now=NOW - 60)
        self.persisted: list[list[str]] = []
        self.saves: list[tuple[dict[str, Any], dict[str, Any]]] = []  # (pending, core state) per persist
        self.persist_fails = persist_fails
        self.actuator = Actuator(self.api, self.core, self.persist)
        self.body = trainjob()
        self.job = JobView(namespace="team-a", name="llm", gpus=16)

    def persist(self, key: str) -> None:
        if self.persist_fails:
            raise RuntimeError("API server unavailable")
        # what would be in the TrainJobForecast at this instant
        self.persisted.append([c[0] for c in self.api.log])
        self.saved_pending = copy.deepcopy(self.actuator.pending_for(key))  # not the live entries
        self.saved_core = copy.deepcopy(self.core.dump(key))
        self.saves.append((self.saved_pending, self.saved_core))

    @property
    def wl(self):
        raw = self.api.workloads.get("team-a/trainjob-llm-abcde")
        return None if raw is None else parse_workload(raw)

    def run(self, mode: Mode, *actions: Action) -> None:
        decision = Decision(job=KEY, policy="p", mode=mode, actions=actions)
        self.actuator.execute(self.core.view(self.job), decision, body=self.body, workload=self.wl, now=NOW)


RELEASE = Action(ActionKind.RELEASE_QUOTA, "plateau", "no 1% gain in 2h")


def test_recommend_mode_only_records_and_posts_one_event() -> None:
    s = Setup()
    s.run(Mode.RECOMMEND, RELEASE, Action(ActionKind.CHECKPOINT, "checkpoint", "before release"))
    assert s.api.mutations() == []
    assert [e["reason"] for e in s.api.events] == ["Recommendation", "Recommendation"]
    rec = s.core.record(KEY)
    assert rec is not None and [a.outcome for a in rec.actions] == ["recommended", "recommended"]
    s.run(Mode.RECOMMEND, RELEASE)  # the same advice again soon: no second Event
    assert len(s.api.events) == 2


def test_apply_release_records_the_request_before_patching_the_workload() -> None:
    s = Setup()
    s.run(Mode.APPLY, RELEASE)
    assert s.api.mutations() == [("set_active", "team-a", "trainjob-llm-abcde", False)]
    # persisted before any mutation, then with the outcome (before its audit line)
    assert s.persisted == [[], ["set_active"]]
    (pending, core), (pending_after, core_after) = s.saves
    ((rid, entry),) = pending.items()
    assert entry["stage"] == "recorded" and entry["kind"] == "release-quota"
    assert [a["requestId"] for a in core["actions"]] == [rid]
    assert pending_after == {} and [a["outcome"] for a in core_after["actions"]] == ["done"]
    rec = s.core.record(KEY)
    assert rec is not None and rec.actions[-1].outcome == "done"
    assert s.actuator.pending_for(KEY) == {}
    assert [e["reason"] for e in s.api.events] == ["QuotaReleased"]
    assert s.wl.active is False


def test_no_mutation_when_the_request_cannot_be_recorded() -> None:
    s = Setup(persist_fails=True)
    s.run(Mode.APPLY, RELEASE)
    assert s.api.mutations() == []
    rec = s.core.record(KEY)
    assert rec is not None and rec.actions[-1].outcome == "failed"


def test_a_restart_between_record_and_patch_finishes_exactly_once() -> None:
    s = Setup()
    crashed = Actuator(s.api, s.core, s.persist)
    s.actuator = crashed  # persist() snapshots this process's pending actions
    crashed.finish = lambda *a, **k: None  # type: ignore[method-assign]  # the process dies after persisting
    decision = Decision(job=KEY, policy="p", mode=Mode.APPLY, actions=(RELEASE,))
    crashed.execute(s.core.view(s.job), decision, body=s.body, workload=s.wl, now=NOW)
    assert s.api.mutations() == []
    # a new process restores what was persisted
    core2 = AdvisorCore()
    core2.restore(KEY, s.saved_core)
    fresh = Actuator(s.api, core2, s.persist)
    fresh.restore_pending(KEY, s.saved_pending)
    (rid,) = s.saved_pending
    for _ in range(2):  # resumed twice (e.g. two evaluations): still one mutation, one Event
        fresh.finish(core2.view(s.job), rid, body=s.body, workload=s.wl)
    assert s.api.mutations() == [("set_active", "team-a", "trainjob-llm-abcde", False)]
    assert [e["reason"] for e in s.api.events] == ["QuotaReleased"]
    rec = core2.record(KEY)
    assert rec is not None and [(a.request_id, a.outcome) for a in rec.actions] == [(rid, "done")]


def _crash_after_recording(s: Setup, action: Action) -> tuple[AdvisorCore, Actuator, str]:
    """Record ``action`` and die before carrying it out; a new process restores what was kept."""
    crashed = Actuator(s.api, s.core, s.persist)
    s.actuator = crashed
    crashed.finish = lambda *a, **k: None  # type: ignore[method-assign]
    decision = Decision(job=KEY, policy="p", mode=Mode.APPLY, actions=(action,))
    crashed.execute(s.core.view(s.job), decision, body=s.body, workload=s.wl, now=NOW)
    core2 = AdvisorCore()
    core2.restore(KEY, s.saved_core)
    fresh = Actuator(s.api, core2, s.persist)
    fresh.restore_pending(KEY, s.saved_pending)
    (rid,) = s.saved_pending
    return core2, fresh, rid


def test_a_resize_recorded_before_a_restart_is_dropped_if_the_job_was_resized_since() -> None:
    """A platform trial: 2 -> 4 nodes decided and recorded, the controller killed, a person set
    the job to 3 nodes, and the restarted controller wrote 4 over their setting."""
    s = Setup()
    s.api.workloads.clear()  # not queued by Kueue
    s.job = JobView(namespace="team-a", name="llm", kind="PyTorchJob", nodes=2, min_nodes=1, max_nodes=4)
    grow = Action(ActionKind.SCALE, "elastic", "grow", {"nodes": 4, "from_nodes": 2})
    core2, fresh, rid = _crash_after_recording(s, grow)
    resized = JobView(namespace="team-a", name="llm", kind="PyTorchJob", nodes=3, min_nodes=1, max_nodes=4)
    out = fresh.finish(core2.view(resized), rid, body=s.body, workload=None, resumed=True)
    assert out is not None and out.outcome == "impossible"
    assert "resized since the decision (2 -> 3 node(s))" in out.detail
    assert s.api.mutations() == []


def test_a_resize_a_restart_carries_out_starts_its_cooldown_then(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its decision older than the cooldown, the resumed resize was followed 63 ms later by
    another: the disruption is when it is carried out."""
    import advisor.controller.actuator as actuator_module

    s = Setup()
    s.api.workloads.clear()
    s.job = JobView(namespace="team-a", name="llm", kind="PyTorchJob", nodes=2, min_nodes=1, max_nodes=4)
    grow = Action(ActionKind.SCALE, "elastic", "grow", {"nodes": 4, "from_nodes": 2})
    core2, fresh, rid = _crash_after_recording(s, grow)
    decided = core2.record(KEY).actions[-1].time  # type: ignore[union-attr]
    monkeypatch.setattr(actuator_module.time, "time", lambda: decided + 90.0)  # restarted 90 s later
    out = fresh.finish(core2.view(s.job), rid, body=s.body, workload=None, resumed=True)
    assert out is not None and out.outcome == "done"
    (action,) = core2.record(KEY).actions  # type: ignore[union-attr]
    assert action.outcome == "done" and action.time == decided + 90.0


def test_a_release_of_a_workload_preempted_since_the_decision_is_not_written() -> None:
    """Decided while it ran; Kueue preempted it before the patch (its Workload waits in the queue
    without quota): deactivated, it would drop out of the queue until someone resumed it."""
    s = Setup()
    wl = s.wl  # the engine's view, from before the preemption
    s.api.workloads["team-a/trainjob-llm-abcde"] = workload(admitted=False)
    decision = Decision(job=KEY, policy="p", mode=Mode.APPLY, actions=(RELEASE,))
    s.actuator.execute(s.core.view(s.job), decision, body=s.body, workload=wl, now=NOW)
    assert s.api.mutations() == []
    rec = s.core.record(KEY)
    assert rec is not None and rec.actions[-1].outcome == "impossible"
    assert "waiting in the queue without quota" in (rec.actions[-1].detail or "")


@pytest.mark.parametrize("condition", ["Complete", "Failed", "deleting", None])
def test_a_release_of_a_job_done_since_the_decision_is_not_written(condition: str | None) -> None:
    """Decided while it ran; the job was marked Complete (or Failed) before the patch, and Kueue
    marks its Workload Finished only after that (a platform trial measured the window a watch
    event wide): the job is read afresh and not released. A job gone (404) is not either."""
    from tests.controller.fakes import ApiError

    s = Setup()
    if condition is None:

        def gone(kind: str, namespace: str, name: str) -> dict[str, object]:
            raise ApiError(404, "Not Found")

        s.api.get_job = gone  # type: ignore[method-assign]
    elif condition == "deleting":  # a finalizer keeps it visible while it goes
        s.api.job_bodies["team-a/llm"] = {"metadata": {"deletionTimestamp": "2026-12-07T06:27:31Z"}}
    else:
        s.api.job_bodies["team-a/llm"] = {"status": {"conditions": [{"type": condition, "status": "True"}]}}
    decision = Decision(job=KEY, policy="p", mode=Mode.APPLY, actions=(RELEASE,))
    s.actuator.execute(s.core.view(s.job), decision, body=s.body, workload=s.wl, now=NOW)
    assert s.api.mutations() == []
    rec = s.core.record(KEY)
    assert rec is not None and rec.actions[-1].outcome == "impossible"
    said = {
        "Complete": "has completed since the decision",
        "Failed": "has failed since the decision",
        "deleting": "has been marked for deletion since the decision",
        None: "is gone",
    }
    assert said[condition] in (rec.actions[-1].detail or "")


def test_checkpoint_request_annotates_every_pod_and_waits_for_the_ack() -> None:
    s = Setup()
    s.run(Mode.APPLY, Action(ActionKind.CHECKPOINT, "checkpoint", "periodic", {"timeout_s": 120}))
    annotated = [c for c in s.api.mutations() if c[0] == "annotate_pod"]
    assert [c[2] for c in annotated] == ["llm-node-0-0", "llm-node-0-1"]
    rid = annotated[0][3]["advisor.trainjob-advisor.io/checkpoint-request"]
    assert s.actuator.awaiting_ack(KEY) == [(rid, NOW, 120.0)]
    assert s.core.view(s.job).checkpoint.pending_request == rid
    # the training side answers through the progress stream
    s.core.observe(
        KEY,
        ProgressSample(
            step=11, loss=0.9, time=NOW + 30, last_checkpoint_step=11, last_checkpoint_request=rid
        ),
        now=NOW + 30,
    )
    assert s.actuator.checkpoint_done(s.core.view(s.job), rid, "acknowledged", body=s.body)
    assert s.actuator.awaiting_ack(KEY) == []
    assert [e["reason"] for e in s.api.events] == ["CheckpointRequested", "CheckpointAcknowledged"]
    assert not s.actuator.checkpoint_done(s.core.view(s.job), rid, "acknowledged", body=s.body)


def test_checkpoint_without_pods_fails_clearly() -> None:
    s = Setup()
    s.api.pods.clear()
    s.run(Mode.APPLY, Action(ActionKind.CHECKPOINT, "checkpoint", "periodic"))
    assert s.api.events[-1]["reason"] == "CheckpointRequestedFailed" and s.api.events[-1]["warning"]
    assert "no running pods" in s.api.events[-1]["message"]
    # what did not happen is not told as done: the rule's reason is what it asked for
    assert "not done; the rule asked because: periodic" in s.api.events[-1]["message"]


def test_release_without_a_workload_never_suspends_the_job() -> None:
    s = Setup()
    decision = Decision(job=KEY, policy="p", mode=Mode.APPLY, actions=(RELEASE,))
    s.actuator.execute(s.core.view(s.job), decision, body=s.body, workload=None, now=NOW)
    assert s.api.mutations() == []
    assert "Workload.spec.active=false" in s.api.events[-1]["message"]


def test_priority_boost_set_and_dropped() -> None:
    s = Setup()
    s.run(Mode.APPLY, Action(ActionKind.BOOST_PRIORITY, "guard", "likely victim", {"boost": 500}))
    assert s.wl.priority_boost == 500
    s.run(Mode.APPLY, Action(ActionKind.DROP_BOOST, "guard", "checkpoint done"))
    assert s.wl.priority_boost == 0


@pytest.mark.parametrize("immutable", [True, False])
def test_trainjob_scale_detects_an_immutable_num_nodes(immutable: bool) -> None:
    s = Setup()
    s.api.immutable_num_nodes = immutable
    s.run(Mode.APPLY, Action(ActionKind.SCALE, "elastic", "grow", {"nodes": 4}))
    if immutable:
        assert s.api.mutations() == []
        assert "does not allow changing spec.trainer.numNodes" in s.api.events[-1]["message"]
    else:
        kinds = [c[0] for c in s.api.mutations()]
        assert kinds == ["patch_job", "set_active", "patch_job", "set_active"]  # dry run, off, patch, on
        assert s.wl.active is True


def test_trainjob_scale_resumes_only_the_workload_it_paused_whatever_the_patch_does() -> None:
    """A Workload deactivated by someone else was set active again by the resize, and one whose
    patch failed after the pause stayed inactive with no release recorded."""
    s = Setup()
    s.api.immutable_num_nodes = False
    s.api.workloads["team-a/trainjob-llm-abcde"] = workload(active=False)
    s.run(Mode.APPLY, Action(ActionKind.SCALE, "elastic", "grow", {"nodes": 4}))
    assert "set_active" not in [c[0] for c in s.api.mutations()] and s.wl.active is False

    s = Setup()
    s.api.immutable_num_nodes = False
    patch_job = s.api.patch_job

    def refused(kind: str, namespace: str, name: str, patch: Any, *, dry_run: bool = False) -> Any:
        if not dry_run:
            raise ApiError(409, "Conflict")
        return patch_job(kind, namespace, name, patch, dry_run=dry_run)

    s.api.patch_job = refused  # type: ignore[method-assign]
    s.run(Mode.APPLY, Action(ActionKind.SCALE, "elastic", "grow", {"nodes": 4}))
    assert s.wl.active is True  # resumed although the patch failed


def test_pytorchjob_scale_respects_elastic_bounds() -> None:
    s = Setup()
    s.api.workloads.clear()  # not queued by Kueue
    s.job = JobView(namespace="team-a", name="llm", kind="PyTorchJob", nodes=2, min_nodes=1, max_nodes=4)
    s.run(Mode.APPLY, Action(ActionKind.SCALE, "elastic", "grow", {"nodes": 8}))
    assert s.api.mutations() == [] and "outside elasticPolicy bounds [1, 4]" in s.api.events[-1]["message"]
    s.run(Mode.APPLY, Action(ActionKind.SCALE, "elastic", "grow", {"nodes": 3}))
    (call,) = s.api.mutations()
    assert call == ("scale_job", "PyTorchJob", "team-a", "llm", 3)  # Worker replicas: no Master here


@pytest.mark.parametrize(("fixed", "target", "workers"), [(0, 1, 1), (0, 4, 4), (1, 2, 1), (1, 5, 4)])
def test_a_pytorchjob_resize_writes_the_workers_of_its_target_beside_any_master(
    fixed: int, target: int, workers: int
) -> None:
    """The scale subresource is ``Worker.replicas``. A worker-only job (the usual elastic layout)
    shrunk to 1 node had been written 0 workers, and grown to 4 stopped at 3, asked again at every
    cooldown, each counted ``done``; a Master, when there is one, is a node no resize touches."""
    s = Setup()
    s.job = JobView(
        namespace="team-a",
        name="llm",
        kind="PyTorchJob",
        nodes=2 + fixed,
        min_nodes=1 + fixed,
        max_nodes=4 + fixed,
        fixed_nodes=fixed,
    )
    s.api.workloads.clear()  # not queued by Kueue
    s.run(Mode.APPLY, Action(ActionKind.SCALE, "elastic", "resize", {"nodes": target}))
    assert s.api.mutations() == [("scale_job", "PyTorchJob", "team-a", "llm", workers)]


def test_a_pytorchjob_kueue_admitted_is_not_resized_in_place() -> None:
    """Kueue stops and requeues a running job whose pod counts no longer match its admitted
    Workload, and has no elastic Workloads for PyTorchJob: a resize would be a restart."""
    s = Setup()
    s.job = JobView(namespace="team-a", name="llm", kind="PyTorchJob", nodes=2, min_nodes=1, max_nodes=4)
    s.run(Mode.APPLY, Action(ActionKind.SCALE, "elastic", "grow", {"nodes": 3}))
    assert s.api.mutations() == [] and "would stop and requeue" in s.api.events[-1]["message"]


def test_a_pytorchjob_resize_that_would_leave_only_its_master_is_refused() -> None:
    s = Setup()
    s.api.workloads.clear()
    s.job = JobView(namespace="team-a", name="llm", kind="PyTorchJob", nodes=2, fixed_nodes=1)
    s.run(Mode.APPLY, Action(ActionKind.SCALE, "elastic", "shrink", {"nodes": 1}))
    assert s.api.mutations() == [] and "leaves no worker beside the Master" in s.api.events[-1]["message"]


class Killed(BaseException):
    """``kill -9``: nothing after it runs."""


def test_a_kill_after_a_checkpoint_is_requested_logs_its_outcome_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The trial's repeated ``outcome=requested``: killed after the pods were annotated and the
    outcome logged, before the status said so, the restarted controller annotated them again
    and logged the outcome a second time. The outcome is now in the status before its line."""
    from advisor.controller.audit import AUDIT_LOGGER

    s = Setup()
    posted = s.api.create_event

    def dying(involved: Any, *, reason: str, **kw: Any) -> bool:
        if reason == "CheckpointRequested":
            raise Killed(reason)
        return posted(involved, reason=reason, **kw)

    s.api.create_event = dying  # type: ignore[method-assign]
    checkpoint = Action(ActionKind.CHECKPOINT, "checkpoint", "before release")
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER), pytest.raises(Killed):
        s.run(Mode.APPLY, checkpoint)
    del s.api.create_event
    pending, core_state = s.saves[-1]  # what the TrainJobForecast holds
    core2 = AdvisorCore()
    core2.restore(KEY, core_state)
    fresh = Actuator(s.api, core2, lambda key: None)
    fresh.restore_pending(KEY, pending)
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        for rid in pending:  # what the engine resumes after a restart
            fresh.finish(core2.view(s.job), rid, body=s.body, workload=s.wl, resumed=True)
    audit = [r.audit for r in caplog.records if r.name == AUDIT_LOGGER]  # type: ignore[attr-defined]
    lines = [(a["audit"], a["outcome"]) for a in audit]
    assert lines == [("attempt", "requested"), ("outcome", "requested")]
    assert len([c for c in s.api.log if c[0] == "annotate_pod"]) == 2  # once per pod
    assert fresh.awaiting_ack(KEY)  # still waiting for the acknowledgement


def test_a_checkpoint_timing_out_after_its_release_was_cancelled_is_said_not_warned_of() -> None:
    """A platform trial: a Warning CheckpointTimedOut a minute after ReleaseCancelled, for a request
    nothing waited for any more. Without the cancellation the timeout stays a Warning."""
    from policies.rules.release import CANCELLED

    for cancelled in (False, True):
        s = Setup()
        s.run(Mode.APPLY, Action(ActionKind.CHECKPOINT, "plateau", "before release", {"timeout_s": 60}))
        (rid, _at, _timeout) = s.actuator.awaiting_ack(KEY)[0]
        if cancelled:
            s.core.update_action(KEY, rid, "requested", detail=f"{CANCELLED}policy p was deleted")
        assert s.actuator.checkpoint_done(s.core.view(s.job), rid, "timed-out", body=s.body)
        (event,) = [e for e in s.api.events if e["reason"] == "CheckpointTimedOut"]
        assert event["warning"] is (not cancelled), event
        assert ("its release was cancelled before" in event["message"]) is cancelled
