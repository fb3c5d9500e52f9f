"""The actuator: the strategy's actions carried out the way the controller's actuators do.

A checkpoint request pauses the job for its checkpoint cost and is acknowledged in its progress
stream; releasing quota deactivates the workload (SIGTERM: a save within the grace period when the
job's helper does that and it fits, ``sigterm_save_lands``; quota freed at once, never requeued),
and is impossible on a job waiting in the queue, which holds none (the controller's release refuses
it: deactivated, the workload would drop out of the queue until someone resumes it); a
priority boost changes Kueue's effective priority; a scale restarts the job from a checkpoint at its
new size; a grace period set on an evicted job holds from its next start. Preemptions and node
failures go through the same eviction: the job loses what it had not saved.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from advisor.model import Action, ActionKind, boost_of
from simulator.jobs import Phase, SimJob

if TYPE_CHECKING:
    from simulator.engine import Simulation

__all__ = ["DONE_AT_ONCE", "Actuator", "sigterm_save_lands"]

#: actions the actuator completes on the spot (the others are acknowledged by the job)
DONE_AT_ONCE = frozenset(
    {
        ActionKind.RELEASE_QUOTA,
        ActionKind.STOP,
        ActionKind.BOOST_PRIORITY,
        ActionKind.DROP_BOOST,
        ActionKind.SCALE,
        ActionKind.SET_GRACE_PERIOD,
    }
)


def sigterm_save_lands(job: SimJob, now: float) -> bool:
    """Whether the job's save on SIGTERM makes it before SIGKILL.

    Only a job whose training helper saves on SIGTERM (``jit``) and whose save mechanism works
    (``sigterm_ok``, drawn per job with the scenario's ``sigterm_success``) tries. The helper saves
    at its next safe point, the end of the step under way, so the save lands when the rest of that
    step plus the save fit the grace period; a save already under way needs only its rest. Node
    failures send no SIGTERM (the caller never asks)."""
    if not (job.jit and job.sigterm_ok):
        return False
    if job.phase is Phase.CHECKPOINTING:
        return job.phase_start + job.ckpt_cost - now <= job.grace_s
    if job.phase is not Phase.RUNNING:
        return False
    step = job.step_time / job.rate_factor
    into = ((now - job.phase_start) / step) % 1.0 if step > 0 else 0.0
    return (1.0 - into) * step + job.ckpt_cost <= job.grace_s


class Actuator:
    """Carries out actions on one simulation's jobs and quota model."""

    def __init__(self, sim: Simulation) -> None:
        self._sim = sim
        self._requests = 0

    def run_actions(self, job: SimJob, actions: Sequence[Action]) -> None:
        """Apply the decision's actions in order, until the job is gone."""
        for action in actions:
            self.apply(job, action)
            if job.phase.terminal:
                return

    def apply(self, job: SimJob, action: Action) -> str | None:
        """Carry out one action; returns the request id it was given (None for no-ops). The ones
        done on the spot are reported ``done``, the ones refused on the job as it stands
        ``impossible`` (as the controller's actuator reports them); a checkpoint request is
        acknowledged by the job."""
        sim = self._sim
        kind = action.kind
        sim.record.actions[kind.value] = sim.record.actions.get(kind.value, 0) + 1
        if kind is ActionKind.RECOMMEND or job.phase.terminal:
            return None
        self._requests += 1
        request = f"sim-{job.idx}-{self._requests}"
        sim.strategy.record(job, action, request, sim.now)  # request id first, then the mutation
        params: dict[str, Any] = dict(action.params)
        # an explicit predicted_victim wins: a standing boost (on while a checkpoint is stale) and
        # the drop of a boost protect work but name no victim, so they must not count as predictions
        predicted = params.get("predicted_victim")
        if predicted is None:
            predicted = kind is ActionKind.BOOST_PRIORITY or "preempt" in action.rule.lower()
        if predicted:
            sim.record.predictions.append((job.idx, sim.now))
        outcome = "done" if kind in DONE_AT_ONCE else None
        if kind is ActionKind.CHECKPOINT:
            self.checkpoint(job, request)
        elif kind in (ActionKind.RELEASE_QUOTA, ActionKind.STOP):
            if job.phase.holds_quota:
                job.ended_by_rule = action.rule
                job.ended_by_policy = sim.strategy.policy_of(job) or ""
                self.evict(job, "released" if kind is ActionKind.RELEASE_QUOTA else "stopped")
            else:
                outcome = "impossible"  # waiting in the queue without quota: nothing to release
        elif kind is ActionKind.BOOST_PRIORITY:
            sim.quota.set_boost(job.workload, boost_of(params))
            sim.admission.schedule()
        elif kind is ActionKind.DROP_BOOST:
            sim.quota.set_boost(job.workload, 0)
            sim.admission.schedule()
        elif kind is ActionKind.SCALE:
            self._scale(job, params)
        elif kind is ActionKind.SET_GRACE_PERIOD and not self._set_grace(job, params):
            outcome = "impossible"  # the job runs: its pods keep their grace period
        if outcome is not None:
            sim.strategy.action_outcome(job, request, outcome, sim.now)
        return request

    @staticmethod
    def _set_grace(job: SimJob, params: dict[str, Any]) -> bool:
        """The pods' grace period for the job's next start; whether it was set. Trainer takes a
        runtime patch only while the job is suspended with no pod left, so a running job keeps
        its grace period (the controller's actuator refuses it the same way: ``impossible``)."""
        seconds = params.get("grace_period_s")
        if job.phase is Phase.PENDING and isinstance(seconds, int | float) and seconds > 0:
            job.grace_s = float(seconds)
            return True
        return False

    def checkpoint(self, job: SimJob, request: str | None) -> None:
        """Start a save (the job's own, ``request`` None, or the advisor's)."""
        sim = self._sim
        if job.phase is Phase.CHECKPOINTING:
            if request is not None:
                job.pending_request = request  # the save in progress answers it
            return
        if job.phase is not Phase.RUNNING:
            return  # nothing to save yet; a request times out on the advisor side
        if job.hang_step is not None and job.step_at(sim.now) >= job.hang_step:
            return  # a hung training loop cannot save
        sim.account(job)
        sim.leave_running(job)
        job.ckpt_started_step = int(job.step)
        job.ckpt_started_compute = job.compute
        job.pending_request = request
        sim.enter(job, Phase.CHECKPOINTING, sim.now + job.ckpt_cost)

    def evict(self, job: SimJob, cause: str) -> None:
        """Preemption, node failure, release or stop: the job loses what it had not saved."""
        sim = self._sim
        now = sim.now
        sim.account(job)
        sim.leave_running(job)
        if cause != "failure" and sigterm_save_lands(job, now):
            job.ckpt_step = int(job.step)  # saved on SIGTERM within the grace period
            job.ckpt_time = now
            job.ckpt_compute = job.compute
            job.note_checkpoint(now)
        lost_steps = max(0.0, job.step - job.ckpt_step)
        lost = lost_steps * job.step_time / job.rate_factor * job.gpus
        if cause in ("preempted", "failure"):
            job.lost_gpu_s += lost
            # the lost steps past the learning end were charged as non-learning when first run
            past = max(0.0, job.step - max(float(job.ckpt_step), float(job.learning_end)))
            job.overhead_nonlearning_gpu_s += past * job.step_time / job.rate_factor * job.gpus
            if cause == "preempted":
                job.lost_preempt_gpu_s += lost
            job.step = float(job.ckpt_step)
            job.trajectory.append((now, job.step))
            job.pending_request = None
        cq = (job.cluster_queue, job.workload.priority)
        if cause == "preempted":
            sim.evictions[cq] = sim.evictions.get(cq, 0) + 1
            job.preemptions += 1
            if job.workload.admitted_at is not None:
                job.past_admitted_s += max(0.0, now - job.workload.admitted_at)
            sim.enter(job, Phase.PENDING)
            job.queued_since = now
            sim.admission.requeue(job)
        elif cause == "failure":
            sim.evictions[cq] = sim.evictions.get(cq, 0) + 1
            job.failures_met += 1
            sim.enter(job, Phase.STARTING, now + job.restart_cost)
        else:
            job.workload.active = False
            sim.finish(job, Phase.RELEASED if cause == "released" else Phase.STOPPED)

    def _scale(self, job: SimJob, params: dict[str, Any]) -> None:
        sim = self._sim
        nodes = int(params.get("nodes", params.get("target_nodes", job.nodes)))
        if nodes < 1 or nodes == job.nodes or job.phase is not Phase.RUNNING:
            return
        per_node = max(1, job.gpus // job.nodes)
        if not sim.quota.resize(job.workload, nodes * per_node):
            return
        sim.account(job)
        sim.leave_running(job)
        base_nodes = max(1, -(-job.trace.gpus // sim.world.gpus_per_node))
        job.rate_factor = (nodes / base_nodes) ** sim.world.scaling_exponent
        job.nodes, job.gpus = nodes, nodes * per_node
        job.ckpt_step, job.ckpt_time, job.ckpt_compute = int(job.step), sim.now, job.compute
        sim.enter(job, Phase.STARTING, sim.now + job.ckpt_cost + job.restart_cost)
        sim.usage_changed()
        sim.admission.schedule()
