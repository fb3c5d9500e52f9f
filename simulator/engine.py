"""The discrete-event engine: a virtual clock, the jobs, the quota model and the actuator.

Events: arrival, phase end (start-up/restart done, checkpoint done, run complete), node failure,
the job's own periodic checkpoint, and the advisor tick. Progress reports are not events: the
samples a job would have logged since the previous tick are generated, in order, when the tick
comes (the controller, too, only sees what was reported by the time it looks), which keeps big
traces cheap.

The actuator carries out the strategy's actions the way the controller's actuators do in a real
cluster: a checkpoint request pauses the job for its checkpoint cost and is acknowledged in its
progress stream; releasing quota deactivates the workload (SIGTERM: a save within the grace period
when the job's helper does that, quota freed at once, never requeued); a priority boost changes
Kueue's effective priority; a scale restarts the job from a checkpoint at its new size. When Kueue
evicts a workload the advisor boosted, the advisor is asked at once (its watch event), before the
workload is requeued, so that it can drop the boost in time.

The ClusterView handed to the advisor is one snapshot per quota change, assembled from
per-ClusterQueue parts, so thousands of ticks between two changes share it (and the policies'
per-snapshot index).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from advisor.model import (
    Action,
    ActionKind,
    ClusterQueueView,
    ClusterView,
    JobView,
    ProgressSample,
    WorkloadView,
)
from simulator.jobs import Phase, SimJob, WorldConfig
from simulator.quota import QuotaModel, Workload
from simulator.strategy import Strategy

__all__ = ["SimRecord", "Simulation"]

ARRIVAL, PHASE_END, FAILURE, OWN_CKPT, TICK, REQUEUE = range(6)
#: a workload preempted again within this long of its previous preemption waits twice as long as
#: then before it is requeued, up to REQUEUE_MAX_S (see ``Simulation._requeue``)
REQUEUE_MEMORY_S = 3600.0
REQUEUE_MAX_S = 3600.0
#: actions the actuator completes on the spot (the others are acknowledged by the job)
_DONE_AT_ONCE = frozenset(
    {
        ActionKind.RELEASE_QUOTA,
        ActionKind.STOP,
        ActionKind.BOOST_PRIORITY,
        ActionKind.DROP_BOOST,
        ActionKind.SCALE,
    }
)
#: a predicted victim counts as right if it is preempted within this long after the prediction
VICTIM_HORIZON_S = 3600.0
#: the peak learning rate reported by simulated jobs (the curve library's schedules are relative)
PEAK_LR = 3e-4
#: pending workloads per ClusterQueue shown in the ClusterView (the head of each queue)
VIEW_PENDING = 50


@dataclass(slots=True)
class SimRecord:
    """What a run leaves behind besides the jobs themselves."""

    usage: list[tuple[float, int]] = field(default_factory=list)  # (time, GPUs in use)
    predictions: list[tuple[int, float]] = field(default_factory=list)  # (job, time)
    preemptions: list[tuple[int, float]] = field(default_factory=list)
    actions: dict[str, int] = field(default_factory=dict)
    end_time: float = 0.0
    ticks: int = 0


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
        self._requests = 0
        self._on_progress = on_progress
        self._by_workload = {j.workload.uid: j for j in jobs}
        self._cluster_cache: tuple[int, float, ClusterView] | None = None
        self._queue_parts: dict[str, tuple[int, ClusterQueueView, tuple[WorkloadView, ...]]] = {}
        self._wl_views: dict[int, tuple[tuple[Any, ...], WorkloadView]] = {}
        self._job_views: dict[int, tuple[tuple[Any, ...], JobView]] = {}
        self._evictions: dict[str, int] = {}
        self._busy_s: dict[str, float] = {}
        self._woken: set[int] = set()
        self._non_finite: dict[int, int | None] = {}  # job -> first step of a non-finite loss
        self._scheduling = False
        self._reschedule = False
        #: per job: (time of its latest preemption, the requeue delay it got)
        self._requeue_backoff: dict[int, tuple[float, float]] = {}

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
                self._schedule()
            elif kind == TICK:
                self._tick(job, gen)
            elif gen != job.gen:
                continue  # superseded by a later state change
            elif kind == REQUEUE:
                if job.phase is Phase.PENDING:
                    self.quota.submit(job.workload)
                    self._schedule()
            elif kind == PHASE_END:
                self._phase_end(job)
            elif kind == FAILURE:
                job.next_failure += 1
                self._evict(job, "failure")
            elif kind == OWN_CKPT:
                self._checkpoint(job, None)
            if self._on_progress is not None and t - last_progress > 3600.0:
                self._on_progress(t)
                last_progress = t
        end = self.now if horizon is None else max(self.now, horizon)
        for job in self.jobs:
            self._account(job, end)
        self.record.end_time = end
        return self.record

    # ---- accounting ------------------------------------------------------------------------
    def _account(self, job: SimJob, now: float) -> None:
        dt = now - job.last_account
        if dt <= 0:
            return
        if job.phase.holds_quota:
            g = job.gpus
            job.gpu_s += dt * g
            self._busy_s[job.cluster_queue] = self._busy_s.get(job.cluster_queue, 0.0) + dt
            if job.phase is Phase.STARTING:
                job.restart_gpu_s += dt * g
            elif job.phase is Phase.CHECKPOINTING:
                job.ckpt_gpu_s += dt * g
            if job.phase is Phase.RUNNING:
                s0 = job.step_at(job.last_account)
                if s0 >= job.learning_end:
                    job.nonlearning_gpu_s += dt * g
                else:
                    cross = (job.learning_end - s0) / job.rate()
                    job.nonlearning_gpu_s += max(0.0, dt - cross) * g
            elif job.step >= job.learning_end:
                job.nonlearning_gpu_s += dt * g
        job.last_account = now

    def _usage_changed(self) -> None:
        use = self.quota.usage()
        if not self.record.usage or self.record.usage[-1][1] != use:
            if self.record.usage and self.record.usage[-1][0] == self.now:
                self.record.usage[-1] = (self.now, use)
            else:
                self.record.usage.append((self.now, use))

    # ---- admission -------------------------------------------------------------------------
    def _schedule(self) -> None:
        if self._scheduling:
            self._reschedule = True  # an action taken inside the pass: one more pass after it
            return
        self._scheduling = True
        try:
            while True:
                self._reschedule = False
                admitted, preempted = self.quota.schedule(self.now)
                for p in preempted:
                    victim = self._by_workload[p.victim.uid]
                    if victim.phase is Phase.PENDING:
                        # admitted and preempted again within this pass: it never started
                        self._requeue(victim)
                        continue
                    self.record.preemptions.append((victim.idx, self.now))
                    self._evict(victim, "preempted")
                    if victim.workload.boost and self.strategy.watches_cluster:
                        self._react(victim)
                for wl in admitted:
                    job = self._by_workload[wl.uid]
                    if wl.admitted and job.phase is Phase.PENDING:
                        self._start(job)
                if not (preempted or self._reschedule):
                    break
        finally:
            self._scheduling = False
        self._usage_changed()
        if self.strategy.watches_cluster:
            self._wake_likely_victims()

    def _wake_likely_victims(self) -> None:
        """A higher-priority workload waits: give the lower-priority running jobs of its cohort a
        tick now (the controller re-evaluates on Workload watch events the same way)."""
        for name, q in self.quota.queues.items():
            if not q.pending:
                continue
            top = max(w.priority for _k, w in q.pending[:8])
            for member in self.quota.members(name):
                for wl in self.quota.queues[member].admitted.values():
                    if wl.priority < top:
                        job = self._by_workload[wl.uid]
                        if job.idx not in self._woken:
                            self._woken.add(job.idx)
                            self._push(self.now + 1.0, TICK, job.idx, -1)

    def _start(self, job: SimJob) -> None:
        self._account(job, self.now)
        job.queue_wait_s += self.now - job.queued_since
        if job.first_start is None:
            job.first_start = self.now
        self._enter(job, Phase.STARTING, self.now + job.restart_cost)
        if job.idx not in self._ticking:
            delay = self.strategy.first_tick(job)
            if delay is not None:
                self._ticking.add(job.idx)
                job.last_report = self.now
                self._push(self.now + delay, TICK, job.idx, 0)

    def _enter(self, job: SimJob, phase: Phase, until: float | None = None) -> None:
        job.gen += 1
        job.phase = phase
        job.phase_start = self.now
        job.phase_step = job.step
        if until is not None:
            self._push(until, PHASE_END, job.idx, job.gen)

    def _enter_running(self, job: SimJob) -> None:
        self._enter(job, Phase.RUNNING)
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

    def _leave_running(self, job: SimJob) -> None:
        if job.phase is Phase.RUNNING:
            job.step = job.step_at(self.now)
            job.compute += self.now - job.phase_start
            job.trajectory.append((self.now, job.step))

    def _phase_end(self, job: SimJob) -> None:
        self._account(job, self.now)
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
                self._push(self.now + 1.0, TICK, job.idx, -1)
        elif job.phase is Phase.RUNNING:
            self._leave_running(job)
            self._finish(job, Phase.DONE)

    def _finish(self, job: SimJob, phase: Phase) -> None:
        if job.workload.admitted:
            self.quota.release(job.workload)
        job.workload.finished = True
        self._enter(job, phase)
        job.end_time = self.now
        job.end_step = job.step
        job.trajectory.clear()
        self.strategy.finished(job, self.now)
        self._ticking.discard(job.idx)
        self._schedule()

    # ---- the actuator ----------------------------------------------------------------------
    def _checkpoint(self, job: SimJob, request: str | None) -> None:
        if job.phase is Phase.CHECKPOINTING:
            if request is not None:
                job.pending_request = request  # the save in progress answers it
            return
        if job.phase is not Phase.RUNNING:
            return  # nothing to save yet; a request times out on the advisor side
        if job.hang_step is not None and job.step_at(self.now) >= job.hang_step:
            return  # a hung training loop cannot save
        self._account(job, self.now)
        self._leave_running(job)
        job.ckpt_started_step = int(job.step)
        job.ckpt_started_compute = job.compute
        job.pending_request = request
        self._enter(job, Phase.CHECKPOINTING, self.now + job.ckpt_cost)

    def _evict(self, job: SimJob, cause: str) -> None:
        """Preemption, node failure, release or stop: the job loses what it had not saved."""
        self._account(job, self.now)
        self._leave_running(job)
        if (
            cause != "failure"
            and job.jit
            and job.ckpt_cost <= self.world.grace_period_s
            and job.phase in (Phase.RUNNING, Phase.CHECKPOINTING)
        ):
            job.ckpt_step = int(job.step)  # saved on SIGTERM within the grace period
            job.ckpt_time = self.now
            job.ckpt_compute = job.compute
        lost_steps = max(0.0, job.step - job.ckpt_step)
        lost = lost_steps * job.step_time / job.rate_factor * job.gpus
        if cause in ("preempted", "failure"):
            job.lost_gpu_s += lost
            if cause == "preempted":
                job.lost_preempt_gpu_s += lost
            job.step = float(job.ckpt_step)
            job.trajectory.append((self.now, job.step))
            job.pending_request = None
        cq = job.cluster_queue
        if cause == "preempted":
            self._evictions[cq] = self._evictions.get(cq, 0) + 1
            job.preemptions += 1
            self._enter(job, Phase.PENDING)
            job.queued_since = self.now
            self._requeue(job)
        elif cause == "failure":
            self._evictions[cq] = self._evictions.get(cq, 0) + 1
            job.failures_met += 1
            self._enter(job, Phase.STARTING, self.now + job.restart_cost)
        else:
            job.workload.active = False
            self._finish(job, Phase.RELEASED if cause == "released" else Phase.STOPPED)

    def apply(self, job: SimJob, action: Action) -> str | None:
        """Carry out one action; returns the request id it was given (None for no-ops)."""
        kind = action.kind
        self.record.actions[kind.value] = self.record.actions.get(kind.value, 0) + 1
        if kind is ActionKind.RECOMMEND or job.phase.terminal:
            return None
        self._requests += 1
        request = f"sim-{job.idx}-{self._requests}"
        self.strategy.record(job, action, request, self.now)  # request id first, then the mutation
        params: dict[str, Any] = dict(action.params)
        # an explicit predicted_victim wins: a standing boost (on while a checkpoint is stale) and
        # the drop of a boost protect work but name no victim, so they must not count as predictions
        predicted = params.get("predicted_victim")
        if predicted is None:
            predicted = kind is ActionKind.BOOST_PRIORITY or "preempt" in action.rule.lower()
        if predicted:
            self.record.predictions.append((job.idx, self.now))
        if kind is ActionKind.CHECKPOINT:
            self._checkpoint(job, request)
        elif kind in (ActionKind.RELEASE_QUOTA, ActionKind.STOP):
            if job.phase is Phase.PENDING:
                self.quota.release(job.workload)
                job.queue_wait_s += self.now - job.queued_since
                job.queued_since = self.now
            self._evict(job, "released" if kind is ActionKind.RELEASE_QUOTA else "stopped")
        elif kind is ActionKind.BOOST_PRIORITY:
            self.quota.set_boost(job.workload, int(params.get("boost", params.get("priority_boost", 1000))))
            self._schedule()
        elif kind is ActionKind.DROP_BOOST:
            self.quota.set_boost(job.workload, 0)
            self._schedule()
        elif kind is ActionKind.SCALE:
            self._scale(job, params)
        return request

    def _scale(self, job: SimJob, params: dict[str, Any]) -> None:
        nodes = int(params.get("nodes", params.get("target_nodes", job.nodes)))
        if nodes < 1 or nodes == job.nodes or job.phase is not Phase.RUNNING:
            return
        per_node = max(1, job.gpus // job.nodes)
        if not self.quota.resize(job.workload, nodes * per_node):
            return
        self._account(job, self.now)
        self._leave_running(job)
        base_nodes = max(1, -(-job.trace.gpus // self.world.gpus_per_node))
        job.rate_factor = (nodes / base_nodes) ** self.world.scaling_exponent
        job.nodes, job.gpus = nodes, nodes * per_node
        job.ckpt_step, job.ckpt_time, job.ckpt_compute = int(job.step), self.now, job.compute
        self._enter(job, Phase.STARTING, self.now + job.ckpt_cost + job.restart_cost)
        self._usage_changed()
        self._schedule()

    # ---- ticks -----------------------------------------------------------------------------
    def _tick(self, job: SimJob, gen: int) -> None:
        if gen == -1:
            self._woken.discard(job.idx)
        if job.phase.terminal:
            return
        if job.phase is Phase.PENDING:
            if gen != -1:
                self._ticking.discard(job.idx)  # resumes when the job is admitted again
            return
        self.record.ticks += 1
        samples = self._collect_samples(job)
        self._run_actions(job, self.strategy.tick(job, samples, self.now))
        if job.phase.terminal:
            return
        if gen != -1 and job.idx in self._ticking:
            delay = self.strategy.next_tick(job, self.now)
            if delay is None:
                self._ticking.discard(job.idx)
            else:
                self._push(self.now + delay, TICK, job.idx, 0)

    def _requeue(self, job: SimJob) -> None:
        """Put a preempted workload back in the queue once its pods have terminated (Kueue sets
        ``Requeued`` when the job is no longer active): after the grace period. A workload
        preempted again within ``REQUEUE_MEMORY_S`` of the last time waits twice as long as then
        (up to ``REQUEUE_MAX_S``). Kueue's rules allow a preemption cycle (a borrower with a high
        priority preempts a cohort member's small workloads, one of which then reclaims its
        queue's nominal quota from that borrower, and so on) that in a cluster thrashes at the
        pace of the pods' termination; the backoff keeps the replay from spending its events on
        one such cycle while still counting each preemption and the work it loses."""
        last = self._requeue_backoff.get(job.idx)
        delay = self.world.grace_period_s
        if last is not None and self.now - last[0] <= REQUEUE_MEMORY_S:
            delay = min(REQUEUE_MAX_S, max(delay, 2.0 * last[1]))
        self._requeue_backoff[job.idx] = (self.now, delay)
        self._push(self.now + delay, REQUEUE, job.idx, job.gen)

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

    def _react(self, job: SimJob) -> None:
        """The controller's answer to the eviction of a workload it boosted, before Kueue's next
        scheduling cycle: a preempted workload is requeued only once its pods have terminated,
        which takes up to the grace period, so the boost can be dropped in time (a boosted
        workload back in the queue would outrank, and could preempt, its equals)."""
        if job.phase.terminal:
            return
        self.record.ticks += 1
        self._run_actions(job, self.strategy.tick(job, self._collect_samples(job), self.now))

    def _run_actions(self, job: SimJob, actions: Sequence[Action]) -> None:
        for action in actions:
            request = self.apply(job, action)
            if request is not None and action.kind in _DONE_AT_ONCE:
                self.strategy.action_outcome(job, request, "done", self.now)
            if job.phase.terminal:
                return

    def _collect_samples(self, job: SimJob) -> list[ProgressSample]:
        """The progress reports logged since the previous tick, in time order."""
        now = self.now
        points = list(job.trajectory)
        if job.hang_step is not None and job.phase is Phase.RUNNING and points:
            # the steps are interpolated between these points: a run that hung since the last one
            # stopped advancing at its hang, not at this tick
            hung_at = job.phase_start + (job.cap_step - job.phase_step) / job.rate()
            if points[-1][0] < hung_at < now:
                points.append((hung_at, job.cap_step))
        points.append((now, job.step_at(now)))
        job.trajectory = [points[-1]]
        start = job.last_report + job.report_interval
        out: list[ProgressSample] = []
        if start <= now:
            times = np.arange(start, now + 1e-9, job.report_interval)
            ts = np.array([p[0] for p in points])
            ss = np.array([p[1] for p in points])
            steps = np.interp(times, ts, ss, left=ss[0]).astype(np.int64)
            keep = np.ones(steps.size, dtype=bool)
            keep[1:] = steps[1:] != steps[:-1]
            keep[0] = steps[0] != job.last_reported_step
            keep &= steps > 0
            if keep.any():
                ks, kt = steps[keep], times[keep]
                loss_arr, lr_arr = job.curve.reports(ks)
                losses, lrs = loss_arr.tolist(), (lr_arr * PEAK_LR).tolist()
                for step, t, loss, lr in zip(ks.tolist(), kt.tolist(), losses, lrs, strict=True):
                    out.append(job.progress_sample(step, t, loss, lr))
                job.last_reported_step = int(ks[-1])
            job.last_report = float(times[-1])
        if job.forced_samples:
            out.extend(job.progress_sample(st, t, checkpoint=(c, r)) for st, t, c, r in job.forced_samples)
            job.forced_samples = []
            out.sort(key=lambda s: s.time or 0.0)
        return out

    # ---- views for the advisor -------------------------------------------------------------
    def job_view(self, job: SimJob) -> JobView:
        """The adapter's base view; the core fills in the history-derived fields. A job's view is
        rebuilt only when a field of it changed (views are frozen, so ticks may share one)."""
        wl = job.workload
        admitted_at = wl.admitted_at if wl.admitted else None
        stamp = (job.gpus, job.nodes, wl.priority, wl.active, wl.admitted, admitted_at, job.first_start)
        cached = self._job_views.get(job.idx)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        view = JobView(
            namespace=job.namespace,
            name=job.trace.name,
            kind="TrainJob",
            labels={"kueue.x-k8s.io/queue-name": job.trace.queue, **job.curve.labels},
            queue_name=job.trace.queue,
            cluster_queue=job.cluster_queue,
            priority=wl.priority,
            gpus=job.gpus,
            nodes=job.nodes,
            min_nodes=1,
            max_nodes=max(job.nodes, 2 * job.nodes),
            active=wl.active,
            admitted=wl.admitted,
            admitted_at=admitted_at,
            started_at=job.first_start,
        )
        self._job_views[job.idx] = (stamp, view)
        return view

    def cluster_view(self) -> ClusterView:
        """The snapshot a controller would read now. One snapshot serves every tick until the
        quota model changes (the eviction rates in it are those of that moment, as a
        controller's would be of its last informer update), so the policies' per-snapshot index
        is built once for all of them. It is assembled from per-ClusterQueue parts rebuilt only
        when their queue changed (and per-workload views only when the workload did)."""
        cached = self._cluster_cache
        if cached is not None and cached[0] == self.quota.version:
            return cached[2]
        queues: dict[str, ClusterQueueView] = {}
        workloads: list[WorkloadView] = []
        for name in self.quota.queues:
            version = self.quota.queue_version[name]
            part = self._queue_parts.get(name)
            if part is None or part[0] != version:
                part = (version, self._queue_view(name), self._queue_workloads(name))
                self._queue_parts[name] = part
            queues[name] = part[1]
            workloads.extend(part[2])
        rates = {name: self._evictions.get(name, 0) / busy for name, busy in self._busy_s.items() if busy > 0}
        view = ClusterView(
            cluster_queues=queues,
            workloads=tuple(workloads),
            preemption_rate=rates,
            priority_boost_enabled=self.world.priority_boost_enabled,
        )
        self._cluster_cache = (self.quota.version, self.now, view)
        return view

    def _queue_view(self, name: str) -> ClusterQueueView:
        q = self.quota.queues[name]
        s = q.spec
        return ClusterQueueView(
            name=name,
            cohort=s.cohort,
            nominal_gpus=s.nominal_gpus,
            borrowing_limit=s.borrowing_limit,
            lending_limit=s.lending_limit,
            usage_gpus=q.usage,
            within_cluster_queue=s.within_cluster_queue,
            reclaim_within_cohort=s.reclaim_within_cohort,
            borrow_within_cohort=s.borrow_within_cohort,
            borrow_max_priority_threshold=s.borrow_max_priority_threshold,
            queueing_strategy=s.queueing_strategy,
        )

    def _queue_workloads(self, name: str) -> tuple[WorkloadView, ...]:
        """The queue's admitted workloads, then the first ``VIEW_PENDING`` of its queue."""
        q = self.quota.queues[name]
        out = [self._wl_view(wl) for wl in q.admitted.values()]
        out.extend(self._wl_view(wl) for _k, wl in q.pending[:VIEW_PENDING])
        return tuple(out)

    def _wl_view(self, wl: Workload) -> WorkloadView:
        stamp = (wl.gpus, wl.admitted, wl.active, wl.admitted_at, wl.boost)
        cached = self._wl_views.get(wl.uid)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        job = self._by_workload[wl.uid]
        view = WorkloadView(
            namespace=job.namespace,
            name=job.trace.name,
            cluster_queue=wl.cluster_queue,
            gpus=wl.gpus,
            priority=wl.priority,
            admitted=wl.admitted,
            active=wl.active,
            job=job.key,
            admitted_at=wl.admitted_at,
            created_at=wl.created_at,
            priority_boost=wl.boost,
        )
        self._wl_views[wl.uid] = (stamp, view)
        return view
