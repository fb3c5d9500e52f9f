"""The job lifecycle: which signals end a run, and that the core loop judges only running jobs.

The trial that motivated it: a finished fine-tune (TrainJob Complete, Workload Finished, last
report at step 2610 of 2619 because Hugging Face logs every 10 steps, RHOAI summary "complete")
had its quota "released" by the stall rule 40 s after the end.
"""

from __future__ import annotations

import dataclasses

import pytest

from advisor.core import AdvisorCore
from advisor.core.lifecycle import derive_phase
from advisor.model import (
    ActionKind,
    ActionRecord,
    ClusterView,
    Forecast,
    Interval,
    JobView,
    LifecycleSignals,
    Phase,
    ProgressSample,
)
from policies import load_policy

T0 = 1_000_000.0
RUNNING = LifecycleSignals(
    has_workload=True, workload_active=True, workload_admitted=True, quota_reserved=True
)


def _phase(
    signals: LifecycleSignals | None, *, step: int = 100, total: int | None = 1000, gap: int = 10
) -> Phase:
    return derive_phase(
        signals, active=True, admitted=True, step=step, total_steps=total, report_gap=gap
    ).phase


@pytest.mark.parametrize(
    ("signals", "expected"),
    [
        (RUNNING, Phase.RUNNING),
        (dataclasses.replace(RUNNING, complete=True), Phase.FINISHED),
        (dataclasses.replace(RUNNING, failed=True), Phase.FAILED),
        (
            dataclasses.replace(RUNNING, workload_finished=True, workload_finished_reason="Succeeded"),
            Phase.FINISHED,
        ),
        (
            dataclasses.replace(RUNNING, workload_finished=True, workload_finished_reason="Failed"),
            Phase.FAILED,
        ),
        (dataclasses.replace(RUNNING, remaining_summary="complete"), Phase.FINISHED),
        # a finalizer keeps a deleted job visible: it is going, as a finished one
        (dataclasses.replace(RUNNING, deleting=True), Phase.FINISHED),
        (dataclasses.replace(RUNNING, deleting=True, failed=True), Phase.FAILED),
        (dataclasses.replace(RUNNING, progress_percentage=100.0), Phase.FINISHED),
        (dataclasses.replace(RUNNING, workload_active=False), Phase.SUSPENDED),
        (dataclasses.replace(RUNNING, workload_admitted=False, evicted=True), Phase.PENDING),
        # Kueue sets Evicted (Preempted) before Admitted goes: the pods are being stopped
        (dataclasses.replace(RUNNING, evicted=True), Phase.PENDING),
        (dataclasses.replace(RUNNING, workload_admitted=False, quota_reserved=False), Phase.PENDING),
        # Kueue keeps a queued TrainJob suspended: with a Workload, the Workload says pending
        (dataclasses.replace(RUNNING, workload_admitted=False, suspended=True), Phase.PENDING),
        (dataclasses.replace(RUNNING, suspended=True), Phase.SUSPENDED),
        (LifecycleSignals(suspended=True), Phase.SUSPENDED),
        (None, Phase.RUNNING),
    ],
)
def test_each_signal_gives_its_phase(signals: LifecycleSignals | None, expected: Phase) -> None:
    assert _phase(signals) is expected


def test_a_step_within_one_report_of_the_total_is_the_end_of_the_run() -> None:
    assert _phase(RUNNING, step=2610, total=2619, gap=10) is Phase.FINISHED
    assert _phase(RUNNING, step=2600, total=2619, gap=10) is Phase.RUNNING
    assert _phase(RUNNING, step=2619, total=2619, gap=0) is Phase.FINISHED
    assert _phase(RUNNING, step=5000, total=None, gap=10) is Phase.RUNNING


def test_without_a_workload_the_jobs_own_activity_stands_in() -> None:
    lc = derive_phase(None, active=False, admitted=False, step=1, total_steps=None, report_gap=0)
    assert lc.phase is Phase.SUSPENDED
    lc = derive_phase(None, active=True, admitted=False, step=1, total_steps=None, report_gap=0)
    assert lc.phase is Phase.PENDING


# ------------------------------------------------------------------------------------------------
# Through the core loop, with the stall rule in Apply mode: the trial's failure
# ------------------------------------------------------------------------------------------------


def _policy() -> object:
    return load_policy(
        {
            "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
            "kind": "AdvisorPolicy",
            "metadata": {"name": "stall-release"},
            "spec": {
                "mode": "Apply",
                "safety": {"minRuntime": "0s", "cooldown": "0s"},
                "rules": {
                    "stall": {"for": "40s", "action": "Release"},
                    "quotaRelease": {"checkpointFirst": False},
                },
            },
        }
    )


def _forecaster(curve: object, total: int | None) -> Forecast:
    return Forecast(
        final_loss=Interval(1.0, 0.9, 1.1),
        plateau_probability=0.1,
        divergence_probability=0.0,
        n_points=50,
        total_steps=total,
    )


def _run(core: AdvisorCore, key: str, last_step: int, *, every: int = 10, start: float = T0) -> float:
    t = start
    for step in range(every, last_step + 1, every):
        t = start + step
        core.observe(key, ProgressSample(step=step, time=t, loss=2.0 - step / 2000, total_steps=2619), now=t)
    return t


def _view(signals: LifecycleSignals, **kw: object) -> JobView:
    return JobView(namespace="team-a", name="ft", started_at=T0, signals=signals, admitted_at=T0, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "ended",
    [
        dataclasses.replace(RUNNING, complete=True),
        dataclasses.replace(RUNNING, workload_finished=True, workload_finished_reason="Succeeded"),
        dataclasses.replace(RUNNING, remaining_summary="complete"),
        RUNNING,  # no completion signal at all: only the last report, one logging interval short
    ],
    ids=["complete", "workload-finished", "rhoai-summary", "last-report-one-interval-short"],
)
def test_a_finished_run_is_never_released_by_the_stall_rule(ended: LifecycleSignals) -> None:
    core = AdvisorCore([_policy()], forecaster=_forecaster)
    key = "team-a/ft"
    t = _run(core, key, 2610)
    later = t + 3600.0  # an hour without a step: the stall rule's "hung" if the job were running
    d = core.evaluate(_view(ended), ClusterView(), now=later)
    assert d.actions == ()
    assert d.advice == "finished"
    view = core.view(_view(ended))
    assert view.phase is Phase.FINISHED and view.forecast is not None and view.step == 2610
    assert len(core.record(key).history) > 100  # history kept


def test_a_job_being_deleted_is_never_acted_on() -> None:
    """Deleted while a finalizer (or a foreground deletion) holds it, a job still reporting kept
    being judged: a plateau rule asked it for a checkpoint before a release."""
    from advisor.sources.lifecycle import ended_as, job_signals

    body = {"metadata": {"name": "ft", "deletionTimestamp": "2026-12-07T06:27:31Z", "finalizers": ["x/y"]}}
    signals = job_signals(body)
    assert signals.deleting is True and ended_as(body) == "been marked for deletion"
    assert job_signals({"metadata": {"name": "ft"}}).deleting is None and ended_as({"metadata": {}}) is None
    core = AdvisorCore([_policy()], forecaster=_forecaster)
    t = _run(core, "team-a/ft", 1500)
    d = core.evaluate(_view(dataclasses.replace(RUNNING, deleting=True)), ClusterView(), now=t + 3600.0)
    assert d.actions == () and d.advice == "finished"
    assert any("being deleted" in r for r in d.reasons)


def test_the_final_update_without_a_step_but_at_100_percent_ends_the_run() -> None:
    core = AdvisorCore([_policy()], forecaster=_forecaster)
    key = "team-a/ft"
    t = _run(core, key, 2000, every=100)  # far below the total, so only the percentage can say it
    core.observe(key, ProgressSample(step=-1, time=t + 5, progress_percentage=100.0), now=t + 5)
    d = core.evaluate(_view(RUNNING), ClusterView(), now=t + 3600.0)
    assert d.actions == () and d.advice == "finished"


def test_the_same_hung_run_that_still_runs_is_released() -> None:
    """The control: without the end, the stall rule does act (the gate is not a blanket off)."""
    core = AdvisorCore([_policy()], forecaster=_forecaster)
    key = "team-a/ft"
    t = _run(core, key, 1500)
    d = core.evaluate(_view(RUNNING), ClusterView(), now=t + 3600.0)
    assert [a.kind for a in d.actions] == [ActionKind.RELEASE_QUOTA]


@pytest.mark.parametrize(
    ("signals", "advice"),
    [
        (dataclasses.replace(RUNNING, failed=True), "failed"),
        (dataclasses.replace(RUNNING, suspended=True), "suspended"),
        (dataclasses.replace(RUNNING, workload_admitted=False, evicted=True), "pending"),
        (dataclasses.replace(RUNNING, evicted=True), "pending"),
        (dataclasses.replace(RUNNING, workload_active=False), "suspended"),
    ],
)
def test_failed_suspended_and_pending_jobs_get_no_action(signals: LifecycleSignals, advice: str) -> None:
    core = AdvisorCore([_policy()], forecaster=_forecaster)
    t = _run(core, "team-a/ft", 1500)
    d = core.evaluate(_view(signals), ClusterView(), now=t + 3600.0)
    assert d.actions == () and d.advice == advice
    assert any(r.startswith("not judged: ") for r in d.reasons)


def test_a_resumed_job_is_judged_again_from_its_resume() -> None:
    core = AdvisorCore([_policy()], forecaster=_forecaster)
    key = "team-a/ft"
    t = _run(core, key, 1500)
    hung = t + 3600.0
    d = core.evaluate(_view(RUNNING), ClusterView(), now=hung)
    assert [a.kind for a in d.actions] == [ActionKind.RELEASE_QUOTA]
    core.record_action(
        key, ActionRecord(ActionKind.RELEASE_QUOTA, hung, "r-1", "stall-release", "stall", "done")
    )
    released = dataclasses.replace(RUNNING, workload_active=False, workload_admitted=False)
    assert core.evaluate(_view(released), ClusterView(), now=hung + 60).advice == "released"
    # resumed: Kueue admits the Workload again, the job reports again
    back = hung + 600.0
    for i in range(1, 30):
        core.observe(
            key, ProgressSample(step=1500 + i, time=back + i, loss=1.2, total_steps=2619), now=back + i
        )
    running = core.evaluate(
        dataclasses.replace(_view(RUNNING), admitted_at=back), ClusterView(), now=back + 30
    )
    assert running.actions == () and "already released" not in " ".join(running.reasons)
    # and when it hangs again, it is released again: judged from the resume, not ignored forever
    again = core.evaluate(
        dataclasses.replace(_view(RUNNING), admitted_at=back), ClusterView(), now=back + 30 + 3600.0
    )
    assert [a.kind for a in again.actions] == [ActionKind.RELEASE_QUOTA]


def test_phase_survives_a_restart_of_the_core() -> None:
    core = AdvisorCore([_policy()], forecaster=_forecaster)
    key = "team-a/ft"
    t = _run(core, key, 2610)
    core.evaluate(_view(RUNNING), ClusterView(), now=t + 10)
    other = AdvisorCore([_policy()], forecaster=_forecaster)
    other.restore(key, core.dump(key))
    rec = other.record(key)
    assert rec is not None and rec.phase is Phase.FINISHED and rec.report_gap == 10
    # judged no more: nothing is done to it; still holding its Workload's quota an hour after it
    # reported done, it is only pointed out (a final save or teardown that hangs)
    late = other.evaluate(_view(RUNNING), ClusterView(), now=t + 3600.0)
    assert [a.kind for a in late.actions] == [ActionKind.RECOMMEND] and late.advice == "done-holding"


def test_a_run_resumed_after_an_hour_is_starting_not_hung() -> None:
    """Its last step is an hour old when Kueue runs it again: the time it did not run is no idle
    time (at its resume it read "hung, p=1.00", with a Warning Event), but silence after the
    resume still is."""
    core = AdvisorCore([_policy()], forecaster=_forecaster)
    key = "team-a/ft"
    t = _run(core, key, 1500)
    suspended = dataclasses.replace(RUNNING, workload_active=False, workload_admitted=False)
    core.evaluate(_view(suspended), ClusterView(), now=t + 60)
    back = t + 3600.0
    core.evaluate(dataclasses.replace(_view(RUNNING), admitted_at=back), ClusterView(), now=back + 1)
    state = core.learning_state(key, now=back + 1)
    assert state is not None and state.probabilities["hung"] == 0.0
    later = core.learning_state(key, now=back + 3600.0)
    assert later is not None and later.probabilities["hung"] == 1.0
    # and the resume survives a restart of the core
    other = AdvisorCore([_policy()], forecaster=_forecaster)
    other.restore(key, core.dump(key))
    restored = other.learning_state(key, now=back + 2)
    assert restored is not None and restored.probabilities["hung"] == 0.0


def test_a_reported_100_percent_that_its_step_contradicts_is_the_end_and_says_so() -> None:
    """PROGRESS 18% beside STATE finished read as a contradiction: the end stands (nothing acts on a
    finished job), and its reason names the step that says otherwise."""
    from advisor.core.lifecycle import derive_phase

    signals = dataclasses.replace(RUNNING, progress_percentage=100.0)
    short = derive_phase(signals, active=True, admitted=True, step=360, total_steps=2000, report_gap=20)
    assert short.phase is Phase.FINISHED
    assert short.reason == "the trainer reports 100% progress (its step 360 of 2000 says otherwise)"
    end = derive_phase(signals, active=True, admitted=True, step=1990, total_steps=2000, report_gap=20)
    assert end.reason == "the trainer reports 100% progress"
