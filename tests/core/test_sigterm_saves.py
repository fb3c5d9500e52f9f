"""Verify, then trust: the core loop counts whether each eviction's save on SIGTERM made it, from
the checkpoint the run reports after it is admitted again."""

from __future__ import annotations

import dataclasses

from advisor.core import AdvisorCore
from advisor.model import ClusterView, Decision, JobView, ProgressSample

JOB = JobView(namespace="ml", name="run-1", gpus=8)


def _core() -> AdvisorCore:
    def decide(job: JobView, cluster: ClusterView, policy: object, *, now: float) -> Decision:
        return Decision(job=job.key)

    return AdvisorCore(
        policies=[object()], forecast_interval_s=1e9, selector=lambda ps, j: ps[0], decider=decide
    )


def _report(core: AdvisorCore, step: int, t: float, ckpt: int | None, **metrics: float) -> None:
    sample = ProgressSample(
        step=step, time=t, loss=2.0 - step * 1e-4, last_checkpoint_step=ckpt, metrics=metrics
    )
    core.observe(JOB.key, sample, now=t)


def _look(core: AdvisorCore, t: float, admitted_at: float) -> JobView:
    base = dataclasses.replace(JOB, admitted_at=admitted_at)
    core.evaluate(base, ClusterView(), now=t)
    return core.view(base)


def test_a_save_that_made_it_and_one_that_did_not_are_told_apart() -> None:
    core = _core()
    for i in range(1, 6):
        _report(core, 100 * i, 60.0 * i, ckpt=200)
    assert _look(core, 300.0, admitted_at=0.0).checkpoint.sigterm_saves == 0
    # evicted after step 500; saved on SIGTERM at 510 (reported by the restarted process)
    _report(core, 520, 1000.0, ckpt=510)
    cp = _look(core, 1000.0, admitted_at=900.0).checkpoint
    assert (cp.sigterm_saves, cp.sigterm_misses) == (1, 0)
    for i in range(1, 4):
        _report(core, 520 + 100 * i, 1000.0 + 60 * i, ckpt=510)
    # evicted again after step 820; the save did not land: back to the checkpoint at 510
    _report(core, 530, 2000.0, ckpt=510)
    cp = _look(core, 2000.0, admitted_at=1900.0).checkpoint
    assert (cp.sigterm_saves, cp.sigterm_misses) == (1, 1)
    # the same admission looked at again counts nothing twice
    cp = _look(core, 2100.0, admitted_at=1900.0).checkpoint
    assert (cp.sigterm_saves, cp.sigterm_misses) == (1, 1)


def test_the_verdict_waits_for_a_report_after_the_new_admission() -> None:
    core = _core()
    for i in range(1, 4):
        _report(core, 100 * i, 60.0 * i, ckpt=None)
    _look(core, 200.0, admitted_at=0.0)
    cp = _look(core, 950.0, admitted_at=900.0).checkpoint  # admitted again, nothing reported yet
    assert (cp.sigterm_saves, cp.sigterm_misses) == (0, 0)
    _report(core, 40, 1000.0, ckpt=None)  # no checkpoint metrics: it rolled back below 300
    cp = _look(core, 1000.0, admitted_at=900.0).checkpoint
    assert (cp.sigterm_saves, cp.sigterm_misses) == (0, 1)


def test_the_helpers_save_time_is_kept_and_the_counts_survive_a_restart() -> None:
    core = _core()
    for i in range(1, 4):
        _report(core, 100 * i, 60.0 * i, ckpt=100 * i, last_checkpoint_seconds=20.0 + i)
    _look(core, 200.0, admitted_at=0.0)
    _report(core, 310, 1000.0, ckpt=305, last_checkpoint_seconds=21.0)
    cp = _look(core, 1000.0, admitted_at=900.0).checkpoint
    assert cp.sigterm_saves == 1
    assert 21.0 < cp.save_seconds <= 23.0  # the longest recent save, decaying towards shorter ones
    again = AdvisorCore()
    again.restore(JOB.key, core.dump(JOB.key))
    restored = again.view(JOB).checkpoint
    assert (restored.sigterm_saves, restored.save_seconds) == (1, cp.save_seconds)


def test_a_runtimes_evidence_outlives_its_jobs() -> None:
    core = _core()
    for i in range(1, 4):
        _report(core, 100 * i, 60.0 * i, ckpt=100 * i)
    run = dataclasses.replace(JOB, runtime="torch")
    core.evaluate(dataclasses.replace(run, admitted_at=0.0), ClusterView(), now=200.0)
    _report(core, 310, 1000.0, ckpt=305)
    core.evaluate(dataclasses.replace(run, admitted_at=900.0), ClusterView(), now=1000.0)
    other = JobView(namespace="ml", name="run-2", runtime="torch")
    core.observe(other.key, ProgressSample(step=1, time=1001.0, loss=2.0), now=1001.0)
    assert core.view(other).runtime_sigterm == (1, 0)
    core.forget(JOB.key)  # the first job finished: what it showed about the runtime stays
    assert core.view(other).runtime_sigterm == (1, 0)


def test_a_runtimes_save_windows_are_pooled_for_its_new_jobs_and_outlive_them() -> None:
    core = _core()
    run = dataclasses.replace(JOB, runtime="torch", admitted_at=0.0)
    newcomer = JobView(namespace="ml", name="run-2", runtime="torch", gpus=8, admitted=False)
    core.evaluate(newcomer, ClusterView(), now=1.0)
    for i in range(1, 4):  # 100 steps a minute: 0.6 s a step, saves of 21-23 s
        _report(core, 100 * i, 60.0 * i, ckpt=100 * i, last_checkpoint_seconds=20.0 + i)
    core.evaluate(run, ClusterView(), now=200.0)
    ((gpus, step, save),) = core.view(newcomer).runtime_save_windows
    assert gpus == 8 and abs(step - 0.6) < 1e-9 and 21.0 < save <= 23.0
    elsewhere = dataclasses.replace(newcomer, name="run-3", runtime="jax")
    core.evaluate(elsewhere, ClusterView(), now=201.0)
    assert core.view(elsewhere).runtime_save_windows == ()  # another runtime's jobs say nothing
    core.forget(JOB.key)  # the measured job is deleted: its window stays with the runtime
    assert core.view(newcomer).runtime_save_windows == ((gpus, step, save),)


def test_a_peers_longer_saves_reach_the_pool_without_the_peer_being_evaluated_again() -> None:
    core = _core()
    run = dataclasses.replace(JOB, runtime="torch", admitted_at=0.0)
    newcomer = JobView(namespace="ml", name="run-2", runtime="torch", gpus=8, admitted=False)
    for i in range(1, 4):
        _report(core, 100 * i, 60.0 * i, ckpt=100 * i, last_checkpoint_seconds=20.0)
    core.evaluate(run, ClusterView(), now=200.0)
    core.evaluate(newcomer, ClusterView(), now=201.0)
    ((_, _, save),) = core.view(newcomer).runtime_save_windows
    assert save == 20.0
    _report(core, 400, 240.0, ckpt=400, last_checkpoint_seconds=80.0)  # a slow save, seen by observe
    ((_, _, save),) = core.view(newcomer).runtime_save_windows
    assert save == 80.0


def test_a_miss_is_counted_when_the_job_rolled_back_and_was_evicted_again_between_two_looks() -> None:
    core = _core()
    for i in range(1, 6):
        _report(core, 100 * i, 60.0 * i, ckpt=100)
    _look(core, 300.0, admitted_at=0.0)
    # evicted after step 500, the save lost; admitted at 900, back at the checkpoint of step 100,
    # evicted again at once: the advisor never looked during that admission
    _report(core, 110, 950.0, ckpt=100)
    # admitted a third time: its last report before is the rolled-back 110, its furthest 500
    _report(core, 120, 2000.0, ckpt=100)
    cp = _look(core, 2000.0, admitted_at=1900.0).checkpoint
    assert (cp.sigterm_saves, cp.sigterm_misses) == (0, 1)
