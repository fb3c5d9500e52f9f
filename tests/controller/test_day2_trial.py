"""Findings of a platform engineer's day-2 trial on a real API server, each reproduced with the
fakes: a job deleted during an outage, a cold start's first policy figures, a pending checkpoint
whose job stopped during an outage, a release a policy change cancelled, the tie warning."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from advisor.controller.engine import Engine
from advisor.controller.render import iso
from advisor.core import AdvisorCore
from advisor.model import Action, ActionKind, ClusterView, Decision, JobView, Mode, Phase
from tests.controller.fakes import FakeApi, make_engine, release_sequence, trainjob, workload

T0 = 1_800_000_000.0
KEY = "team-a/llm"


engine = make_engine


# ------------------------------------------------------------------------------------ LOW-8
def test_the_tie_warning_is_logged_once_per_change_of_winner_or_losers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """It was logged with every change of the job's state or advice (13 times in 90 s for two jobs)."""
    winner = ["pol-c1"]

    def decide(job: JobView, cluster: ClusterView, policy: object, *, now: float) -> Decision:
        advice = "plateau?" if job.step % 20 else "keep going"  # the advice flips at each report
        return Decision(
            job=job.key, policy=winner[0], mode=Mode.RECOMMEND, advice=advice, tied_with=("pol-c2",)
        )

    e = engine(FakeApi(), decide)
    caplog.set_level(logging.WARNING, logger="advisor.controller.statusboard")

    def ties() -> int:
        return sum("governs over" in r.getMessage() for r in caplog.records)

    for i, step in enumerate(range(10, 200, 10)):
        e.enqueue("job", "MODIFIED", trainjob(step=step, loss=f"{1 + 1 / step:.4f}", updated=iso(T0 + 5 * i)))
        e.step(T0 + 5 * i)
    assert ties() == 1
    winner[0] = "pol-c0"  # another winner: said again, once
    for i, step in enumerate(range(200, 260, 10), start=40):
        e.enqueue("job", "MODIFIED", trainjob(step=step, loss=f"{1 + 1 / step:.4f}", updated=iso(T0 + 5 * i)))
        e.step(T0 + 5 * i)
    assert ties() == 2


# ------------------------------------------------------------------------------------ LOW-6
WL = "team-a/trainjob-llm-abcde"


@pytest.mark.parametrize("how", ["complete", "suspend"])
def test_a_request_whose_job_stopped_during_an_outage_is_dropped_as_with_the_controller_running(
    how: str,
) -> None:
    """A job that completed or was suspended while no controller ran, its checkpoint timeout past
    at the restart, was recorded ``timed-out`` with a CheckpointTimedOut Warning; the running
    controller records the same case ``dropped`` (``test_checkpoint_dropped``)."""
    api = FakeApi()
    api.workloads[WL] = workload()
    api.pods["team-a/jobset.sigs.k8s.io/jobset-name=llm"] = ["llm-node-0-0"]

    def decide(job: JobView, cluster: ClusterView, policy: object, *, now: float) -> Decision:
        acts: tuple[Action, ...] = ()
        if job.phase is Phase.RUNNING and job.checkpoint.pending_request is None and not job.actions:
            acts = (Action(ActionKind.CHECKPOINT, "plateau", "before release", {"timeout_s": 30}),)
        return Decision(job=job.key, policy="p", mode=Mode.APPLY, actions=acts)

    first = engine(api, decide)
    first.enqueue("workload", "ADDED", api.workloads[WL])
    first.enqueue("job", "MODIFIED", trainjob(step=10, loss="1.0", updated=iso(T0)))
    first.step(T0)
    assert first.actuator.awaiting_ack(KEY)
    # killed; the job stops while no controller runs; a controller starts after the timeout
    stopped = trainjob(step=10, loss="1.0", updated=iso(T0))
    if how == "complete":
        stopped["status"]["conditions"] = [
            {"type": "Complete", "status": "True", "lastTransitionTime": iso(T0 + 5)}
        ]
        wl = api.workloads[WL]
    else:
        stopped["spec"]["suspend"] = True
        stopped["status"]["conditions"] = [
            {"type": "Suspended", "status": "True", "lastTransitionTime": iso(T0 + 5)}
        ]
        wl = workload(active=False, admitted=False)
    second = engine(api, decide)
    second.load_saved(api.list_forecasts())
    second.enqueue("workload", "MODIFIED", wl)
    second.enqueue("job", "MODIFIED", stopped)
    second.step(T0 + 60)
    assert second.actuator.awaiting_ack(KEY) == []
    reasons = [ev["reason"] for ev in api.events]
    assert "CheckpointTimedOut" not in reasons and "CheckpointRequestDropped" in reasons
    outcomes = [a["outcome"] for a in json.loads(api.forecasts[KEY]["status"]["coreState"])["actions"]]
    assert outcomes == ["dropped"]


def test_a_release_whose_job_finished_during_an_outage_is_recorded_cancelled_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The checkpoint before a release was acknowledged, the controller died before the release,
    and the job completed meanwhile: the restarted controller left the sequence without a word (no
    Event, no audit line), as if the release were still to come."""
    api = FakeApi()
    api.workloads[WL] = workload()
    api.pods["team-a/jobset.sigs.k8s.io/jobset-name=llm"] = ["llm-node-0-0"]

    def decide(job: JobView, cluster: ClusterView, policy: object, *, now: float) -> Decision:
        return release_sequence(job, T0)

    first = engine(api, decide)
    first.enqueue("workload", "ADDED", api.workloads[WL])
    first.enqueue("job", "MODIFIED", trainjob(step=10, loss="1.0", updated=iso(T0)))
    first.step(T0)
    rid = api.pod_annotations["team-a/llm-node-0-0"]["advisor.trainjob-advisor.io/checkpoint-request"]
    ack = [{"name": "last_checkpoint_step", "value": "20"}, {"name": "last_checkpoint_request", "value": rid}]
    first.enqueue("job", "MODIFIED", trainjob(step=20, loss="1.0", updated=iso(T0 + 10), extra_metrics=ack))
    first.step(T0 + 10)
    reasons = [ev["reason"] for ev in api.events]
    assert "CheckpointAcknowledged" in reasons and "ReleaseCancelled" not in reasons
    # killed before the release; the job completes while no controller runs
    done = trainjob(step=30, loss="1.0", updated=iso(T0 + 20), extra_metrics=ack)
    done["status"]["conditions"] = [
        {"type": "Complete", "status": "True", "lastTransitionTime": iso(T0 + 25)}
    ]
    caplog.set_level(logging.INFO, logger="trainjob_advisor.audit")
    for restart in range(2):  # said once, and not again by the next restart
        again = engine(api, decide)
        again.load_saved(api.list_forecasts())
        again.enqueue("workload", "MODIFIED", api.workloads[WL])
        again.enqueue("job", "MODIFIED", done)
        for t in (60, 70):
            again.step(T0 + t + 100 * restart)
    cancelled = [ev for ev in api.events if ev["reason"] == "ReleaseCancelled"]
    assert len(cancelled) == 1 and "the job finished first" in cancelled[0]["message"], cancelled
    lines = [r.audit for r in caplog.records if getattr(r, "audit", {}).get("outcome") == "cancelled"]  # type: ignore[attr-defined]
    assert len(lines) == 1 and lines[0]["kind"] == "release-quota" and lines[0]["requestId"] == rid


# ----------------------------------------------------------------------------- MED-1, LOW-4
APPLY = {
    "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
    "kind": "AdvisorPolicy",
    "metadata": {"name": "pol-d", "generation": 1},
    "spec": {"mode": "Apply"},
}


def _checkpointing(api: FakeApi) -> Engine:
    """An engine whose policy asks each job once for a checkpoint before a release."""

    def decide(job: JobView, cluster: ClusterView, policy: Any, *, now: float) -> Decision:
        acts: tuple[Action, ...] = ()
        if not job.actions:
            acts = (
                Action(
                    ActionKind.CHECKPOINT, "plateau", "checkpoint before release quota", {"timeout_s": 600}
                ),
            )
        return Decision(job=job.key, policy=policy.name, mode=Mode.APPLY, actions=acts)

    return make_engine(api, core=AdvisorCore(forecast_interval_s=0, decider=decide))


def _figures(api: FakeApi) -> list[dict[str, Any]]:
    return [c[2] for c in api.log if c[0] == "policy_status" and "jobsMatched" in c[2]]


def _start(api: FakeApi, jobs: dict[str, str], now: float) -> Engine:
    """A controller's start as ``run_operator`` makes it: saved statuses, policies, the listing."""
    e = _checkpointing(api)
    e.load_saved(api.list_forecasts())
    getattr(e, "expect_job_listing", lambda: None)()  # (so that the test fails as it did before)
    e.enqueue("policy", "ADDED", api.get_policy("pol-d"))
    e.enqueue("workload", "ADDED", api.workloads[WL])
    e.enqueue("joblisting", "ADDED", {"kinds": ["TrainJob", "PyTorchJob"], "jobs": jobs})
    e.step(now)
    return e


def _two_jobs_checkpointing(api: FakeApi) -> Engine:
    api.add_policy(APPLY)
    api.workloads[WL] = workload()
    for name in ("llm", "other"):
        api.pods[f"team-a/jobset.sigs.k8s.io/jobset-name={name}"] = [f"{name}-node-0-0"]
    first = _checkpointing(api)
    first.enqueue("policy", "ADDED", api.get_policy("pol-d"))
    first.enqueue("workload", "ADDED", api.workloads[WL])
    for name, uid in (("llm", "uid-1"), ("other", "uid-2")):
        first.enqueue("job", "MODIFIED", trainjob(name=name, uid=uid, step=10, loss="1.0", updated=iso(T0)))
    first.step(T0)
    first.step(T0 + 1)
    assert _figures(api)[-1]["actionsTaken"] == 2 and _figures(api)[-1]["jobsMatched"] == 2
    return first


def test_a_job_deleted_while_no_controller_ran_keeps_its_actions_in_its_policys_counts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """pol-d 9/6 -> 8/5 after kill, delete, restart: the saved status of a job never seen again
    never went through the deletion path. Once the listing says which jobs exist, it does, once."""
    api = FakeApi()
    _two_jobs_checkpointing(api)
    rid = next(iter(json.loads(api.forecasts[KEY]["status"]["pendingActions"])))
    # killed; team-a/llm deleted while no controller runs (its TrainJobForecast not collected yet)
    caplog.set_level(logging.INFO, logger="trainjob_advisor.audit")
    second = _start(api, {"team-a/other": "uid-2"}, T0 + 60)
    second.enqueue("job", None, trainjob(name="other", uid="uid-2", step=10, loss="1.0", updated=iso(T0)))
    second.step(T0 + 61)
    last = _figures(api)[-1]
    assert last["actionsTaken"] == 2 and last["jobsMatched"] == 1
    assert last["fromDeletedJobs"]["actionsByKind"] == {"checkpoint": 1}
    dropped = [r.audit for r in caplog.records if getattr(r, "audit", {}).get("outcome") == "dropped"]  # type: ignore[attr-defined]
    assert [(d["job"], d["requestId"]) for d in dropped] == [(KEY, rid)]
    assert KEY not in second.jobs and KEY not in second.saved
    conditions = {c["type"]: c for c in api.forecasts[KEY]["status"]["conditions"]}
    assert conditions["JobDeleted"]["status"] == "True"
    # a third start, the forecast still there: counted once, not again
    caplog.clear()
    third = _start(api, {"team-a/other": "uid-2"}, T0 + 120)
    third.enqueue("job", None, trainjob(name="other", uid="uid-2", step=10, loss="1.0", updated=iso(T0)))
    third.step(T0 + 121)
    third.step(T0 + 121 + 3600)
    last = _figures(api)[-1]
    assert last["actionsTaken"] == 2 and last["fromDeletedJobs"]["actionsByKind"] == {"checkpoint": 1}
    assert not [r for r in caplog.records if getattr(r, "audit", {}).get("outcome") == "dropped"]


def test_a_job_made_again_under_the_same_name_during_the_outage_carries_the_old_runs_actions() -> None:
    api = FakeApi()
    _two_jobs_checkpointing(api)
    second = _start(api, {"team-a/other": "uid-2", KEY: "uid-new"}, T0 + 60)
    second.enqueue("job", None, trainjob(name="other", uid="uid-2", step=10, loss="1.0", updated=iso(T0)))
    second.enqueue("job", None, trainjob(uid="uid-new", step=5, loss="1.0", updated=iso(T0 + 50)))
    second.step(T0 + 61)
    last = _figures(api)[-1]
    assert last["fromDeletedJobs"]["actionsByKind"] == {"checkpoint": 1}
    assert last["jobsMatched"] == 2 and last["actionsTaken"] == 3  # the new run was asked for its own


def test_a_cold_start_writes_no_policy_figures_before_the_listed_jobs_are_loaded() -> None:
    """Each policy's first write after a cold start read JOBS 0, RECOMMENDED 0 and the deleted jobs'
    actions alone, corrected a second later."""
    api = FakeApi()
    _two_jobs_checkpointing(api)
    before = len(_figures(api))
    jobs = {"team-a/llm": "uid-1", "team-a/other": "uid-2"}
    second = _start(api, jobs, T0 + 60)
    second.enqueue("job", None, trainjob(uid="uid-1", step=10, loss="1.0", updated=iso(T0)))
    second.step(T0 + 61)  # one of the two listed jobs came: still held
    assert len(_figures(api)) == before
    second.enqueue("job", None, trainjob(name="other", uid="uid-2", step=10, loss="1.0", updated=iso(T0)))
    second.step(T0 + 62)
    written = _figures(api)[before:]
    assert all(f["jobsMatched"] == 2 and f["actionsTaken"] == 2 for f in written)
    status = api.policies["pol-d"]["status"]  # what a watcher sees, throughout
    assert status["jobsMatched"] == 2 and status["actionsTaken"] == 2


# ------------------------------------------------------------------------------------ LOW-7
@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ("recommend", "policy p is in Recommend mode now"),
        ("deleted", "policy p was deleted: no AdvisorPolicy governs the job any more"),
        ("other", "policy q governs the job now, not p"),
        ("deleted-other", "policy p was deleted; policy q governs the job now"),
        ("window", "rule plateau of policy p no longer calls for it"),
        (
            "exempt",
            "the job is exempt: label advisor.trainjob-advisor.io/exempt=true, which policy p acts on "
            "no more",
        ),
    ],
)
def test_a_policy_change_that_abandons_a_pending_release_is_recorded_once(
    edit: str, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    """After a policy edit or deletion with a checkpoint-before-release pending, the log showed only
    ``acknowledged`` and ``pendingActions`` emptied: nothing said the release was abandoned."""
    api = FakeApi()
    api.workloads[WL] = workload()
    api.pods["team-a/jobset.sigs.k8s.io/jobset-name=llm"] = ["llm-node-0-0"]
    edited = [False]

    def decide(job: JobView, cluster: ClusterView, policy: object, *, now: float) -> Decision:
        if edited[0] and edit == "recommend":
            return Decision(job=job.key, policy="p", mode=Mode.RECOMMEND, state={"plateau.since": T0})
        if edited[0] and edit == "deleted":
            return Decision(job=job.key, reasons=("no AdvisorPolicy selects this job",))
        if edited[0] and edit in ("other", "deleted-other"):
            return Decision(job=job.key, policy="q", mode=Mode.APPLY)
        if edited[0] and edit == "exempt":
            why = "exempt: label advisor.trainjob-advisor.io/exempt=true"
            return Decision(job=job.key, policy="p", mode=Mode.APPLY, advice="exempt", reasons=(why,))
        if edited[0]:
            return Decision(job=job.key, policy="p", mode=Mode.APPLY, reasons=("stall: reporting",))
        return release_sequence(job, T0)

    e = engine(api, decide)
    # the book knows policy p (the decider plays its decisions) until a deletion removes it
    e.book.on_event("ADDED", {**APPLY, "metadata": {"name": "p", "generation": 1}})
    e.enqueue("workload", "ADDED", api.workloads[WL])
    e.enqueue("job", "MODIFIED", trainjob(step=10, loss="1.0", updated=iso(T0)))
    e.step(T0)
    e.step(T0 + 10)  # the sequence goes on: nothing said
    assert not [ev for ev in api.events if ev["reason"] == "ReleaseCancelled"]
    caplog.set_level(logging.INFO, logger="trainjob_advisor.audit")
    edited[0] = True
    if edit.startswith("deleted"):
        e.book.on_event("DELETED", {**APPLY, "metadata": {"name": "p", "generation": 1}})
    e.enqueue("workload", "MODIFIED", api.workloads[WL])  # (the decider plays the edit: a look now)
    for t in (20, 30, 40):
        e.step(T0 + t)
    cancelled = [ev for ev in api.events if ev["reason"] == "ReleaseCancelled"]
    assert len(cancelled) == 1 and not cancelled[0]["warning"] and said in cancelled[0]["message"]
    lines = [r.audit for r in caplog.records if getattr(r, "audit", {}).get("outcome") == "cancelled"]  # type: ignore[attr-defined]
    assert len(lines) == 1 and lines[0]["kind"] == "release-quota" and said in lines[0]["detail"]
    # the checkpoint itself is still awaited; a restart does not say it again
    assert e.actuator.awaiting_ack(KEY)
    again = engine(api, decide)
    again.load_saved(api.list_forecasts())
    again.enqueue("workload", "ADDED", api.workloads[WL])
    again.enqueue("job", "MODIFIED", trainjob(step=20, loss="1.0", updated=iso(T0 + 50)))
    again.step(T0 + 60)
    assert len([ev for ev in api.events if ev["reason"] == "ReleaseCancelled"]) == 1


def test_a_job_made_again_while_the_controller_runs_keeps_its_history_across_a_restart() -> None:
    """Deleted and made again under its name while the controller ran, the job found the old run's
    TrainJobForecast (no garbage collector had removed it: ``--cascade=orphan``, a GC backlog) and
    its ownerReference stayed the old run's uid. A restart then read the new run's status as the
    deleted run's: its history and its checkpoint request were dropped and its actions counted in
    the policy's ``fromDeletedJobs``."""
    api = FakeApi()
    api.add_policy(APPLY)
    api.workloads[WL] = workload()
    api.pods["team-a/jobset.sigs.k8s.io/jobset-name=llm"] = ["llm-node-0-0"]
    first = _checkpointing(api)
    first.enqueue("policy", "ADDED", api.get_policy("pol-d"))
    first.enqueue("workload", "ADDED", api.workloads[WL])
    first.enqueue("job", "ADDED", trainjob(uid="uid-old", step=10, loss="1.0", updated=iso(T0)))
    first.step(T0)
    first.enqueue("job", "DELETED", trainjob(uid="uid-old", step=10, loss="1.0", updated=iso(T0)))
    first.step(T0 + 5)
    for i in range(1, 6):
        first.enqueue(
            "job", "MODIFIED", trainjob(uid="uid-new", step=10 * i, loss="2.0", updated=iso(T0 + 10 * i))
        )
        first.step(T0 + 10 * i + 1)
    assert (
        api.forecasts[KEY]["metadata"]["ownerReferences"][0]["uid"] == "uid-old"
    )  # as the API server keeps it
    second = _start(api, {KEY: "uid-new"}, T0 + 70)
    second.enqueue("job", "ADDED", trainjob(uid="uid-new", step=60, loss="2.0", updated=iso(T0 + 70)))
    second.step(T0 + 71)
    rec = second.core.record(KEY)
    assert rec is not None and len(rec.history) == 6  # the new run's five reports kept, and this one
    assert second.actuator.pending_for(KEY)  # its own checkpoint request still awaited
    assert _figures(api)[-1]["fromDeletedJobs"]["actionsByKind"] == {"checkpoint": 1}  # the old run's alone
