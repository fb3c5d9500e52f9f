"""A pending checkpoint request whose pods are gone is dropped, so a new one can be made.

Seen on a real cluster: the preemption guard requested a checkpoint on pod ``low-node-0-0``, Kueue
preempted the job, and after re-admission (new pods, no annotation) the guard said "likely
preemption victim; a checkpoint is already requested" for ten minutes: the old request stayed
pending and the new run could never learn its id.
"""

from __future__ import annotations

import dataclasses

from advisor.core import AdvisorCore
from advisor.model import ActionKind, ActionRecord, ClusterView, JobView, ProgressSample

T0 = 1_000_000.0
CLUSTER = ClusterView()
JOB = JobView(namespace="ml", name="run-1", gpus=8, admitted_at=T0 - 3600)


def _requested(core: AdvisorCore, *, at: float = T0) -> None:
    core.record_action(
        JOB.key, ActionRecord(ActionKind.CHECKPOINT, at, "17", rule="preemption-guard", timeout_s=600.0)
    )


def _core() -> AdvisorCore:
    core = AdvisorCore()
    for i in range(5):
        core.observe(
            JOB.key,
            ProgressSample(step=100 * (i + 1), loss=1.0, time=T0 - 300 + 60 * i),
            now=T0 - 300 + 60 * i,
        )
    core.evaluate(JOB, CLUSTER, now=T0 - 10)  # the admission is known before the request
    _requested(core)
    return core


def _request(core: AdvisorCore) -> ActionRecord:
    rec = core.record(JOB.key)
    assert rec is not None
    return next(a for a in rec.actions if a.request_id == "17")


def _pending(core: AdvisorCore) -> str | None:
    rec = core.record(JOB.key)
    assert rec is not None
    return rec.checkpoint.pending_request


def test_a_request_stays_pending_while_the_run_keeps_its_pods() -> None:
    core = _core()
    core.evaluate(JOB, CLUSTER, now=T0 + 60)
    assert _pending(core) == "17" and _request(core).outcome == "requested"


def test_an_eviction_drops_the_pending_request() -> None:
    core = _core()
    evicted = dataclasses.replace(JOB, admitted=False, admitted_at=None)
    core.evaluate(evicted, CLUSTER, now=T0 + 30)
    assert _pending(core) is None
    assert _request(core).outcome == "dropped" and "evicted" in _request(core).detail
    # re-admitted: nothing stands in the way of a new request
    core.evaluate(dataclasses.replace(JOB, admitted_at=T0 + 200), CLUSTER, now=T0 + 210)
    assert _pending(core) is None


def test_a_readmission_between_two_looks_drops_the_request_of_the_earlier_admission() -> None:
    core = _core()
    core.evaluate(dataclasses.replace(JOB, admitted_at=T0 + 100), CLUSTER, now=T0 + 120)
    assert _pending(core) is None
    assert _request(core).outcome == "dropped" and "admitted again" in _request(core).detail


def test_a_restart_of_the_run_drops_the_request_unless_its_report_answers_it() -> None:
    core = _core()
    core.observe(JOB.key, ProgressSample(step=200, loss=1.2, time=T0 + 60), now=T0 + 60)  # step went back
    assert _pending(core) is None
    assert _request(core).outcome == "dropped" and "restarted" in _request(core).detail
    answered = _core()
    report = ProgressSample(
        step=200, loss=1.2, time=T0 + 60, last_checkpoint_step=500, last_checkpoint_request="17"
    )
    answered.observe(JOB.key, report, now=T0 + 60)  # saved on SIGTERM, reported by the restarted run
    assert _request(answered).outcome == "acknowledged"


def test_a_readmission_between_two_looks_starts_the_rules_windows_over() -> None:
    """Evicted and re-admitted within a second, the job is never seen pending: its rules' windows
    (a plateau held before the eviction) start over at the new admission, as a resume's do."""
    from advisor.model import Decision

    def keeps_its_windows(view: JobView, cluster: ClusterView, policy: object, *, now: float) -> Decision:
        return Decision(job=view.key, state={"plateau.since": T0 - 120, **view.rule_state})

    core = AdvisorCore(policies=[object()], selector=lambda ps, job: ps[0], decider=keeps_its_windows)
    core.observe(JOB.key, ProgressSample(step=100, loss=1.0, time=T0 - 60), now=T0 - 60)
    core.evaluate(JOB, CLUSTER, now=T0)
    assert core.record(JOB.key).rule_state == {"plateau.since": T0 - 120}
    core.evaluate(JOB, CLUSTER, now=T0 + 5)  # the same admission: the window holds
    assert core.record(JOB.key).rule_state == {"plateau.since": T0 - 120}
    seen: list[dict[str, float]] = []

    def records(view: JobView, cluster: ClusterView, policy: object, *, now: float) -> Decision:
        seen.append(dict(view.rule_state))
        return Decision(job=view.key, state=dict(view.rule_state))

    core._decider = records
    core.evaluate(dataclasses.replace(JOB, admitted_at=T0 + 9), CLUSTER, now=T0 + 10)
    assert seen == [{}]
