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
