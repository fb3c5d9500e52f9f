"""A checkpoint request whose pods went away (eviction) is closed as dropped, with an Event, so
that the next run of the job can be asked again instead of waiting out the old request's timeout."""

from __future__ import annotations

import json

from advisor.controller.render import iso
from advisor.core import AdvisorCore
from advisor.model import Action, ActionKind, ClusterView, Decision, JobView, Mode, Phase
from tests.controller.fakes import FakeApi, make_engine, trainjob, workload

T0 = 1_800_000_000.0
KEY = "team-a/llm"
WL = "team-a/trainjob-llm-abcde"


def test_an_eviction_closes_the_awaiting_request_as_dropped() -> None:
    api = FakeApi()
    api.workloads[WL] = workload()
    api.pods["team-a/jobset.sigs.k8s.io/jobset-name=llm"] = ["low-node-0-0"]
    asked: list[float] = []

    def decide(job: JobView, cluster: ClusterView, policy: object, *, now: float) -> Decision:
        acts: tuple[Action, ...] = ()
        if job.admitted and job.checkpoint.pending_request is None:
            asked.append(now)
            acts = (Action(ActionKind.CHECKPOINT, "preemption-guard", "likely victim", {"timeout_s": 600}),)
        return Decision(job=job.key, policy="p", mode=Mode.APPLY, actions=acts)

    core = AdvisorCore(
        policies=[object()], forecast_interval_s=0, selector=lambda ps, job: ps[0], decider=decide
    )
    e = make_engine(api, core=core)
    e.enqueue("workload", "ADDED", api.workloads[WL])
    e.enqueue("job", "MODIFIED", trainjob(step=10, loss="1.0", updated=iso(T0)))
    e.step(T0)
    assert len(asked) == 1 and e.actuator.awaiting_ack(KEY)
    e.enqueue("workload", "MODIFIED", workload(admitted=False))  # Kueue preempted it
    e.step(T0 + 30)
    assert e.actuator.awaiting_ack(KEY) == []
    dropped = [ev for ev in api.events if ev["reason"] == "CheckpointRequestDropped"]
    assert len(dropped) == 1 and "evicted" in dropped[0]["message"]
    status = api.forecasts[KEY]["status"]
    assert status["pendingActions"] == "{}" and status["checkpoint"]["pendingRequest"] is None
    outcomes = [a["outcome"] for a in json.loads(status["coreState"])["actions"]]
    assert outcomes == ["dropped"]
    readmitted = workload()
    readmitted["status"]["conditions"][1]["lastTransitionTime"] = iso(T0 + 60)
    e.enqueue("workload", "MODIFIED", readmitted)
    e.step(T0 + 90)
    assert len(asked) == 2  # the new run is asked again at once, not after the old timeout


def test_a_job_that_completes_while_its_request_is_pending_closes_it_as_dropped_not_timed_out() -> None:
    """Its pods are done: no one will answer, and a CheckpointTimedOut Warning on a finished job
    (twenty seconds later) said something was wrong where nothing was."""
    api = FakeApi()
    api.workloads[WL] = workload()
    api.pods["team-a/jobset.sigs.k8s.io/jobset-name=llm"] = ["llm-node-0-0"]

    def decide(job: JobView, cluster: ClusterView, policy: object, *, now: float) -> Decision:
        acts: tuple[Action, ...] = ()
        if job.phase is Phase.RUNNING and job.checkpoint.pending_request is None:
            acts = (Action(ActionKind.CHECKPOINT, "plateau", "before release", {"timeout_s": 20}),)
        return Decision(job=job.key, policy="p", mode=Mode.APPLY, actions=acts)

    core = AdvisorCore(
        policies=[object()], forecast_interval_s=0, selector=lambda ps, job: ps[0], decider=decide
    )
    e = make_engine(api, core=core)
    e.enqueue("workload", "ADDED", api.workloads[WL])
    e.enqueue("job", "MODIFIED", trainjob(step=10, loss="1.0", updated=iso(T0)))
    e.step(T0)
    assert e.actuator.awaiting_ack(KEY)
    done = trainjob(step=10, loss="1.0", updated=iso(T0 + 5))
    done["status"]["conditions"] = [{"type": "Complete", "status": "True", "lastTransitionTime": iso(T0 + 5)}]
    e.enqueue("job", "MODIFIED", done)
    for t in (10, 30, 60):
        e.step(T0 + t)
    assert e.actuator.awaiting_ack(KEY) == []
    reasons = [ev["reason"] for ev in api.events]
    assert "CheckpointTimedOut" not in reasons and "CheckpointRequestDropped" in reasons
