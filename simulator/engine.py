"""The discrete-event engine: a virtual clock and the jobs' lifecycle, around its parts.

Events: arrival, phase end (start-up/restart done, checkpoint done, run complete), node failure,
the job's own periodic checkpoint, the requeue of a preempted workload, and the advisor tick. The
engine moves jobs between phases and hands the rest to the modules named for it:

* ``simulator.accounting``: where each job's GPU-seconds went, and the run's ``SimRecord``;
* ``simulator.admission``: Kueue's scheduling passes, requeues, wake-ups of likely victims;
* ``simulator.actuator``: the strategy's actions carried out as the controller's actuators do;
* ``simulator.progress_reports``: the progress a job logged since the advisor last looked;
* ``simulator.advisor_views``: the ``JobView`` / ``ClusterView`` snapshots the advisor reads.

When Kueue evicts a workload the advisor boosted, the advisor is asked at once (its watch event),
before the workload is requeued, so that it can drop the boost in time.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from advisor.model import Action, ClusterView, JobView
from simulator.accounting import VICTIM_HORIZON_S, SimRecord, account, note_usage
from simulator.actuator import Actuator
from simulator.admission import Admission
from simulator.advisor_views import AdvisorViews
from simulator.jobs import Phase, SimJob, WorldConfig
from simulator.progress_reports import collect_samples
from simulator.quota import QuotaModel
from simulator.strategy import Strategy

__all__ = ["VICTIM_HORIZON_S", "SimRecord", "Simulation"]

ARRIVAL, PHASE_END, FAILURE, OWN_CKPT, TICK, REQUEUE = range(6)
#: the ``gen`` of an extra tick (a wake-up, an acknowledgement) that does not reschedule the next
_EXTRA = -1


class Simulation:
    def __init__(
        self,
        jobs: list[SimJob],
        quota: QuotaModel,
        world: WorldConfig,
        strategy: Strategy,
        *,
        on_progress: Callable[[float], None] | None = None,
    ) -> None:
        self.jobs = jobs
        self.quota = quota
        self.world = world
        self.strategy = strategy
        self.record = SimRecord()
        self.now = 0.0
        self._events: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        self._ticking: set[int] = set()
        self._on_progress = on_progress
        self.by_workload = {j.workload.uid: j for j in jobs}
        #: evictions (preemptions and failures) per ClusterQueue, and the time it held quota
        # by (ClusterQueue, workload priority): the hazard's evidence per queue and per priority
        self.evictions: dict[tuple[str, int], int] = {}
        self.busy_s: dict[tuple[str, int], float] = {}
        self._non_finite: dict[int, int | None] = {}  # job -> first step of a non-finite loss
        self.admission = Admission(self)
        self.actuator = Actuator(self)
        self.views = AdvisorViews(self)

    # ---- event plumbing --------------------------------------------------------------------
    def _push(self, t: float, kind: int, idx: int, gen: int) -> None:
        self._seq += 1
        heapq.heappush(self._events, (t, self._seq, kind, idx, gen))

    def run(self) -> SimRecord:
        self.strategy.reset(self)
        for job in self.jobs:
            self._push(job.trace.submit, ARRIVAL, job.idx, 0)
        horizon = self.world.horizon_s
        last_progress = 0.0
        while self._events:
            t, _seq, kind, idx, gen = heapq.heappop(self._events)
            if horizon is not None and t > horizon:
                break
            self.now = t
            job = self.jobs[idx]
            if kind == ARRIVAL:
                job.queued_since = t
                job.last_account = t
                self.quota.submit(job.workload)
                watched = self.strategy.watches_cluster
                if watched and self.world.save_window_check:
                    # Kueue admits it only once the advisor's admission check is Ready: the
                    # controller always decides on a new job before its first start
                    self.react(job)
                self.admission.schedule()
                if watched and not self.world.save_window_check and job.phase is Phase.PENDING:
                    # the controller sees the new job (a watch event) while it waits for quota: a
                    # grace period can be set before its first start (one admitted at once had none)
                    self.react(job)
            elif kind == TICK:
                self._tick(job, gen)
            elif gen != job.gen:
                continue  # superseded by a later state change
            elif kind == REQUEUE:
                if job.phase is Phase.PENDING:
                    self.quota.submit(job.workload)
                    self.admission.schedule()
            elif kind == PHASE_END:
                self._phase_end(job)
            elif kind == FAILURE:
                job.next_failure += 1
                self.actuator.evict(job, "failure")
            elif kind == OWN_CKPT:
                self.actuator.checkpoint(job, None)
            if self._on_progress is not None and t - last_progress > 3600.0:
                self._on_progress(t)
                last_progress = t
        end = self.now if horizon is None else max(self.now, horizon)
        for job in self.jobs:
            account(job, end, self.busy_s)
        self.record.end_time = end
        return self.record

    def wake(self, job: SimJob) -> None:
        """An extra tick for the job a second from now (a watch event the controller would get)."""
        self._push(self.now + 1.0, TICK, job.idx, _EXTRA)

    def requeue_at(self, job: SimJob, t: float) -> None:
        self._push(t, REQUEUE, job.idx, job.gen)

    # ---- accounting ------------------------------------------------------------------------
    def account(self, job: SimJob) -> None:
        account(job, self.now, self.busy_s)

    def usage_changed(self) -> None:
        note_usage(self.record, self.now, self.quota.usage())

    # ---- the job's lifecycle ---------------------------------------------------------------
    def start(self, job: SimJob) -> None:
        self.account(job)
        job.queue_wait_s += self.now - job.queued_since
        if job.first_start is None:
            job.first_start = self.now
        self.enter(job, Phase.STARTING, self.now + job.restart_cost)
        if job.idx not in self._ticking:
            delay = self.strategy.first_tick(job)
            if delay is not None:
                self._ticking.add(job.idx)
                job.last_report = self.now
                self._push(self.now + delay, TICK, job.idx, 0)

    def enter(self, job: SimJob, phase: Phase, until: float | None = None) -> None:
        job.gen += 1
        job.phase = phase
        job.phase_start = self.now
        job.phase_step = job.step
        if until is not None:
            self._push(until, PHASE_END, job.idx, job.gen)

    def _enter_running(self, job: SimJob) -> None:
        self.enter(job, Phase.RUNNING)
        job.trajectory.append((self.now, job.step))
        rate = job.rate()
        if job.hang_step is not None:
            remaining = max(0.0, job.total_steps * job.step_time - job.compute)
        else:
            remaining = max(0.0, (job.total_steps - job.step) / rate)
        self._push(self.now + remaining, PHASE_END, job.idx, job.gen)
        if job.next_failure < len(job.failures):
            self._push(
                self.now + max(0.0, job.failures[job.next_failure] - job.compute), FAILURE, job.idx, job.gen
            )
        interval = self.world.job_checkpoint_interval_s
        if interval:
            since = job.compute - job.ckpt_compute
            self._push(self.now + max(1.0, interval - since), OWN_CKPT, job.idx, job.gen)

    def leave_running(self, job: SimJob) -> None:
        if job.phase is Phase.RUNNING:
            job.step = job.step_at(self.now)
            job.compute += self.now - job.phase_start
            job.trajectory.append((self.now, job.step))

    def _phase_end(self, job: SimJob) -> None:
        self.account(job)
        if job.phase is Phase.STARTING:
            self._enter_running(job)
        elif job.phase is Phase.CHECKPOINTING:
            job.ckpt_step = job.ckpt_started_step
            job.ckpt_time = self.now
            job.ckpt_compute = job.ckpt_started_compute
            job.checkpoints += 1
            request = job.pending_request
            job.pending_request = None
            if request is not None:
                job.ckpt_request = request
            job.checkpoint_report(self.now)
            self._enter_running(job)
            if request is not None:
                self.strategy.action_outcome(job, request, "acknowledged", self.now)
                self._push(self.now + 1.0, TICK, job.idx, _EXTRA)
        elif job.phase is Phase.RUNNING:
            self.leave_running(job)
            self.finish(job, Phase.DONE)

    def finish(self, job: SimJob, phase: Phase) -> None:
        if job.workload.admitted:
            self.quota.release(job.workload)
        job.workload.finished = True
        self.enter(job, phase)
        job.end_time = self.now
        job.end_step = job.step
        job.trajectory.clear()
        self.strategy.finished(job, self.now)
        self._ticking.discard(job.idx)
        self.admission.schedule()

    # ---- ticks -----------------------------------------------------------------------------
    def _tick(self, job: SimJob, gen: int) -> None:
        if gen == _EXTRA:
            self.admission.woken.discard(job.idx)
        if job.phase.terminal:
            return
        if job.phase is Phase.PENDING:
            if gen != _EXTRA:
                self._ticking.discard(job.idx)  # resumes when the job is admitted again
            return
        self.record.ticks += 1
        samples = collect_samples(job, self.now)
        self.actuator.run_actions(job, self.strategy.tick(job, samples, self.now))
        if job.phase.terminal:
            return
        if gen != _EXTRA and job.idx in self._ticking:
            delay = self.strategy.next_tick(job, self.now)
            if delay is None:
                self._ticking.discard(job.idx)
            else:
                self._push(self.now + delay, TICK, job.idx, 0)

    def react(self, job: SimJob) -> None:
        """The controller's answer to a job waiting for quota (a watch event: its creation, or its
        eviction, before Kueue's next scheduling cycle). A preempted workload is requeued only once
        its pods have terminated, which takes up to the grace period, so a boost can be dropped in
        time (a boosted workload back in the queue would outrank, and could preempt, its equals);
        and the waiting job can be given the grace period its next start needs."""
        if job.phase.terminal:
            return
        self.record.ticks += 1
        self.actuator.run_actions(job, self.strategy.tick(job, collect_samples(job, self.now), self.now))

    # ---- what a strategy may ask -------------------------------------------------------------
    def apply(self, job: SimJob, action: Action) -> str | None:
        """Carry out one action; returns the request id it was given (None for no-ops)."""
        return self.actuator.apply(job, action)

    def job_view(self, job: SimJob) -> JobView:
        return self.views.job_view(job)

    def cluster_view(self) -> ClusterView:
        return self.views.cluster_view()

    def advances_until(self, job: SimJob, t: float) -> bool:
        """Whether the job, left alone, still reports new steps at ``t``: it is running and does not
        hang before then (finishing first is fine: nothing is left to watch). The controller is
        woken by every such report, so a decision's watchdog (``Decision.idle_recheck_at``, which
        any step advance re-arms) need not bring a tick of its own before ``t``."""
        if job.phase is not Phase.RUNNING:
            return False
        hang = job.hang_step
        return hang is None or job.step_at(t) < hang

    def reports_finite_to_end(self, job: SimJob) -> bool:
        """Whether every loss the job reports from now to its last step is finite. The controller
        is woken by every report, and a non-finite loss is a decision by itself (the divergence
        rule acts on it at once, no forecast needed), so a strategy that skips looks must not skip
        past one."""
        if job.idx not in self._non_finite:
            self._non_finite[job.idx] = job.curve.non_finite_from()
        bad = self._non_finite[job.idx]
        return bad is None or bad >= job.cap_step
