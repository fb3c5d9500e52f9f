"""The LearningState Events tell every change of STATE once a run left learning: into plateaued and
back again (before, only the flips into a state other than learning were told)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from advisor.controller.statusboard import StatusBoard
from advisor.model import LEARNING_LABELS, Decision, Forecast, Interval, JobView, LearningState


class _Core:
    def record(self, key: str) -> None:
        return None


class _Actuator:
    def __init__(self) -> None:
        self.told: list[tuple[str, str | None]] = []

    def pending_for(self, key: str) -> list[Any]:
        return []

    def learning_state_changed(self, job: JobView, body: Mapping[str, Any], previous: str | None) -> None:
        assert job.learning_state is not None
        self.told.append((job.learning_state.label, previous))


class _Saved:
    def saved_state(self, key: str) -> str | None:
        return None

    def conditions(self, key: str) -> None:
        return None


def _state(label: str) -> LearningState:
    probs = {k: (1.0 if k == label else 0.0) for k in LEARNING_LABELS}
    return LearningState(label=label, probabilities=probs)


def test_a_return_to_learning_is_told_once_a_run_had_left_it() -> None:
    actuator = _Actuator()
    board = StatusBoard(_Core(), actuator, _Saved(), hung_after_s=600.0)  # type: ignore[arg-type]
    fc = Forecast(final_loss=Interval(1.0, 0.9, 1.1), plateau_probability=0.5, divergence_probability=0.0)
    job = JobView(namespace="ml", name="run", step=500, total_steps=1000, forecast=fc)
    for t, label in enumerate(["learning", "plateaued", "learning", "learning", "plateaued"]):
        view = dataclasses.replace(job, learning_state=_state(label))
        board.evaluated(job.key, view, Decision(job=job.key), {}, now=1000.0 + t)
    assert actuator.told == [("plateaued", "learning"), ("learning", "plateaued"), ("plateaued", "learning")]


def test_a_first_judgement_of_learning_is_not_told_as_a_return() -> None:
    """A run shown as "unknown" before its first forecast, or in a phase (a resume tells itself),
    that is then judged learning has not come back from anything: no Event."""
    actuator = _Actuator()
    board = StatusBoard(_Core(), actuator, _Saved(), hung_after_s=600.0)  # type: ignore[arg-type]
    fc = Forecast(final_loss=Interval(1.0, 0.9, 1.1), plateau_probability=0.5, divergence_probability=0.0)
    job = JobView(namespace="ml", name="run", step=500, total_steps=1000)
    board.render(job.key, job, None, 999.0)  # no forecast yet: STATE "unknown"
    assert board.shown(job.key)["state"] == "unknown"  # type: ignore[index]
    view = dataclasses.replace(job, forecast=fc, learning_state=_state("learning"))
    board.evaluated(job.key, view, Decision(job=job.key), {}, now=1000.0)
    assert actuator.told == []


def test_leaving_a_hung_shown_by_the_stall_rule_is_not_told_as_a_return() -> None:
    """STATE "hung" from the stall rule's verdict (its own Events tell it) while the learning state
    says learning: new progress after it is no return to announce."""
    actuator = _Actuator()
    board = StatusBoard(_Core(), actuator, _Saved(), hung_after_s=600.0)  # type: ignore[arg-type]
    fc = Forecast(final_loss=Interval(1.0, 0.9, 1.1), plateau_probability=0.5, divergence_probability=0.0)
    job = JobView(namespace="ml", name="run", step=500, total_steps=1000, forecast=fc)
    view = dataclasses.replace(job, learning_state=_state("learning"))
    board.evaluated(job.key, view, Decision(job=job.key, advice="hung"), {}, now=1000.0)
    assert board.shown(job.key)["state"] == "hung"  # type: ignore[index]
    board.evaluated(job.key, view, Decision(job=job.key), {}, now=1001.0)
    assert board.shown(job.key)["state"] == "learning"  # type: ignore[index]
    assert actuator.told == []


def test_a_run_judged_again_after_a_phase_is_told_as_after_it_not_from_it() -> None:
    """STATE shows a lifecycle phase while a job does not run; "suspended -> plateaued" read as if
    "suspended" were a learning state."""
    from advisor.controller.jobevents import JobEvents

    class Api:
        def __init__(self) -> None:
            self.messages: list[str] = []

        def create_event(self, involved: Any, *, reason: str, message: str, **kw: Any) -> bool:
            self.messages.append(message)
            return True

    api = Api()
    events = JobEvents(api)
    job = JobView(namespace="team-a", name="ft", learning_state=_state("plateaued"))
    events.learning_state_changed(job, {"metadata": {"uid": "u"}}, "suspended")
    events.learning_state_changed(job, {"metadata": {"uid": "u"}}, "learning")
    assert api.messages[0].startswith("plateaued after suspended (")
    assert api.messages[1].startswith("learning -> plateaued (")


class _Evictions(_Actuator):
    def __init__(self) -> None:
        super().__init__()
        self.evictions: list[float | None] = []

    def evicted(self, job: JobView, body: Mapping[str, Any]) -> None:
        assert job.signals is not None
        self.evictions.append(job.signals.evicted_at)


def test_each_eviction_of_the_workload_is_told_once() -> None:
    """Kueue tells an eviction on the Workload only: the job gets one Event per eviction (by its
    time), not one per evaluation while it waits, and a later eviction is told again."""
    from advisor.model import LifecycleSignals

    actuator = _Evictions()
    board = StatusBoard(_Core(), actuator, _Saved(), hung_after_s=600.0)  # type: ignore[arg-type]
    job = JobView(namespace="ml", name="run", step=500, total_steps=1000)

    def look(t: float, evicted_at: float | None) -> None:
        signals = LifecycleSignals(has_workload=True, evicted=evicted_at is not None, evicted_at=evicted_at)
        board.evaluated(job.key, dataclasses.replace(job, signals=signals), Decision(job=job.key), {}, now=t)

    for t, at in [(1.0, None), (2.0, 100.0), (3.0, 100.0), (4.0, None), (5.0, 300.0), (6.0, 300.0)]:
        look(t, at)
    assert actuator.evictions == [100.0, 300.0]


def test_the_eviction_event_says_why_and_what_work_the_run_will_redo() -> None:
    from advisor.controller.jobevents import JobEvents
    from advisor.model import CheckpointState, LifecycleSignals

    posted: list[dict[str, Any]] = []

    class _Api:
        def create_event(self, involved: Mapping[str, Any], **kw: Any) -> bool:
            posted.append({"involved": involved, **kw})
            return True

    events = JobEvents(_Api())
    signals = LifecycleSignals(
        has_workload=True, evicted=True, eviction="Preempted: to accommodate ml/urgent", evicted_at=1234.0
    )
    job = JobView(namespace="ml", name="run", step=2400, total_steps=5000, signals=signals)
    events.evicted(job, {"metadata": {"uid": "u1"}})
    saved = dataclasses.replace(job, checkpoint=CheckpointState(last_step=2000))
    events.evicted(saved, {"metadata": {"uid": "u1"}})
    events.evicted(dataclasses.replace(job, signals=LifecycleSignals(has_workload=True)), {})  # not evicted
    assert [p["reason"] for p in posted] == ["Evicted", "Evicted"]
    assert "Kueue evicted its Workload (Preempted: to accommodate ml/urgent)" in posted[0]["message"]
    assert "no checkpoint known to the advisor: up to 2,400 steps to redo" in posted[0]["message"]
    assert "last checkpoint known is at step 2,000, 400 steps before its last report" in posted[1]["message"]
    assert posted[0]["dedupe_key"] == "eviction-1234/Evicted"  # a restarted controller's post is refused
    assert posted[0]["involved"]["uid"] == "u1"
    assert "it waits to be admitted again" in posted[0]["message"]
    # after a release (a platform trial's: "it waits to be admitted again" beside QuotaReleased)
    released = LifecycleSignals(
        has_workload=True,
        workload_active=False,
        evicted=True,
        eviction="Deactivated: The workload is deactivated",
        evicted_at=1300.0,
    )
    events.evicted(dataclasses.replace(job, signals=released), {"metadata": {"uid": "u1"}})
    assert (
        "it is deactivated and waits to be resumed (trainjob-advisor resume -n ml run), not for quota"
        in (posted[-1]["message"])
    )
