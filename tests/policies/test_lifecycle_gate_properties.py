"""Property: over any sequence of lifecycle events, no rule ever acts on a job that is not running
and admitted.

A job lives through random events (reports that advance or repeat the step, NaN losses, long
silences, completion, failure, suspension, eviction and re-admission, deactivation and
reactivation, its Workload finishing) under an Apply policy whose rules are eager to act (stall,
plateau, divergence, periodic checkpoints, releases without a checkpoint first). After each event
the core loop decides; what it asks for is carried out in the model (a release deactivates the
Workload). Whenever the model's job is not running and admitted, the decision holds no action.
"""

from __future__ import annotations

import dataclasses
import math

from hypothesis import event, given, settings
from hypothesis import strategies as st

from advisor.core import AdvisorCore
from advisor.model import (
    ActionKind,
    ActionRecord,
    ClusterView,
    Curve,
    Forecast,
    Interval,
    JobView,
    LifecycleSignals,
    ProgressSample,
)
from policies import load_policy

T0 = 1_000_000.0
KEY = "team-a/ft"

POLICY = load_policy(
    {
        "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
        "kind": "AdvisorPolicy",
        "metadata": {"name": "eager"},
        "spec": {
            "mode": "Apply",
            "safety": {
                "minRuntime": "0s",
                "cooldown": "0s",
                "maxActionsPerHour": 1000,
                "minForecastPoints": 1,
            },
            "rules": {
                "stall": {"for": "60s", "action": "Release"},
                "plateau": {"probability": 0.5, "for": "0s", "action": "Release"},
                "divergence": {"probability": 0.5, "for": "0s", "action": "Release"},
                "checkpoint": {"minInterval": "2m", "maxInterval": "2m"},
                "quotaRelease": {"checkpointFirst": False},
            },
        },
    }
)


def _forecaster(curve: Curve, total: int | None) -> Forecast:
    """Plateaued whenever the last two losses are equal: the plateau rule is eager to release."""
    flat = len(curve.values) >= 2 and abs(curve.values[-1] - curve.values[-2]) < 1e-9
    return Forecast(
        final_loss=Interval(1.0, 0.9, 1.1),
        plateau_probability=0.99 if flat else 0.05,
        divergence_probability=0.0,
        n_points=len(curve.values),
        total_steps=total,
    )


EVENTS = st.sampled_from(
    [
        "report",
        "report",
        "report",
        "flat-report",
        "nan-report",
        "silence",
        "complete",
        "fail",
        "suspend",
        "unsuspend",
        "evict",
        "admit",
        "deactivate",
        "reactivate",
        "workload-finished",
    ]
)


@dataclasses.dataclass
class World:
    step: int = 0
    t: float = T0
    complete: bool = False
    failed: bool = False
    suspended: bool = False
    active: bool = True
    admitted: bool = True
    wl_finished: bool = False
    admitted_at: float = T0
    loss: float = 2.0

    def running(self) -> bool:
        ended = self.complete or self.failed or self.wl_finished
        return not ended and not self.suspended and self.active and self.admitted

    def signals(self) -> LifecycleSignals:
        return LifecycleSignals(
            complete=self.complete,
            failed=self.failed,
            suspended=self.suspended,
            has_workload=True,
            workload_active=self.active,
            quota_reserved=self.admitted,
            workload_admitted=self.admitted,
            evicted=not self.admitted,
            workload_finished=self.wl_finished,
            workload_finished_reason="Failed" if self.failed and self.wl_finished else "Succeeded",
        )

    def view(self) -> JobView:
        return JobView(
            namespace="team-a",
            name="ft",
            started_at=T0,
            active=self.active,
            admitted=self.admitted,
            admitted_at=self.admitted_at if self.admitted else None,
            signals=self.signals(),
        )


def _apply(world: World, core: AdvisorCore, event_name: str) -> None:
    w = world
    if event_name in ("report", "flat-report", "nan-report"):
        w.t += 30.0
        if w.running():  # only a running job reports progress
            w.step += 50
            if event_name == "report":
                w.loss *= 0.99
            loss = math.nan if event_name == "nan-report" else w.loss
            core.observe(KEY, ProgressSample(step=w.step, time=w.t, loss=loss, total_steps=100_000), now=w.t)
    elif event_name == "silence":
        w.t += 900.0
    elif event_name == "complete":
        w.complete = True
    elif event_name == "fail":
        w.failed = True
    elif event_name == "suspend":
        w.suspended = True
    elif event_name == "unsuspend":
        w.suspended = False
    elif event_name == "evict":
        w.admitted = False
    elif event_name == "admit" and w.active:
        if not w.admitted:
            w.admitted_at = w.t
        w.admitted = True
    elif event_name == "deactivate":
        w.active = w.admitted = False
    elif event_name == "reactivate":
        w.active = True
    elif event_name == "workload-finished":
        w.wl_finished = True


@settings(max_examples=300, deadline=None)
@given(st.lists(EVENTS, min_size=1, max_size=40))
def test_no_rule_ever_acts_on_a_job_that_is_not_running_and_admitted(events: list[str]) -> None:
    core = AdvisorCore([POLICY], forecaster=_forecaster, forecast_interval_s=0.0)
    world = World()
    acted_running = 0
    for i, name in enumerate(events):
        _apply(world, core, name)
        world.t += 1.0
        decision = core.evaluate(world.view(), ClusterView(), now=world.t)
        if not world.running():
            assert decision.actions == (), (name, world, decision)
            continue
        for j, action in enumerate(decision.actions):
            acted_running += 1
            rid = f"{i}-{j}"
            outcome = "requested" if action.kind is ActionKind.CHECKPOINT else "done"
            core.record_action(
                KEY, ActionRecord(action.kind, world.t, rid, POLICY.name, action.rule, outcome)
            )
            if action.kind in (ActionKind.RELEASE_QUOTA, ActionKind.STOP):
                world.active = world.admitted = False  # Kueue evicts the deactivated Workload
    event("acted while running" if acted_running else "no action while running")
