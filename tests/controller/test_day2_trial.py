"""Findings of a platform engineer's day-2 trial on a real API server, each reproduced with the
fakes: a job deleted during an outage, a cold start's first policy figures, a pending checkpoint
whose job stopped during an outage, a release a policy change cancelled, the tie warning."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.render import iso
from advisor.core import AdvisorCore
from advisor.model import Action, ActionKind, ClusterView, Decision, JobView, Mode, Phase
from tests.controller.fakes import FakeApi, trainjob, workload

T0 = 1_800_000_000.0
KEY = "team-a/llm"


def engine(api: FakeApi, decide: Any = None, **cfg: Any) -> Engine:
    core = None
    if decide is not None:
        core = AdvisorCore(
            policies=[object()], forecast_interval_s=0, selector=lambda ps, job: ps[0], decider=decide
        )
    config = EngineConfig(write_interval_s=0, writer_workers=0, forecast_interval_s=0, **cfg)
    return Engine(api, config=config, core=core)


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
