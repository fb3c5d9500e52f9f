"""GPU accounting: what each job's GPU-seconds were spent on, and the run's record.

A job's GPU-seconds are split as it moves between phases: starting (restart cost), checkpointing,
running, and of the running time the part after the job's curve stopped learning
(``SimJob.learning_end``), which is what a policy that releases a plateaued run gives back. The
``SimRecord`` keeps what a run leaves behind besides the jobs: the GPUs in use over time, the
predicted and actual preemptions, and the actions taken.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simulator.jobs import Phase, SimJob

__all__ = ["VICTIM_HORIZON_S", "SimRecord", "account", "note_usage"]

#: a predicted victim counts as right if it is preempted within this long after the prediction
VICTIM_HORIZON_S = 3600.0


@dataclass(slots=True)
class SimRecord:
    """What a run leaves behind besides the jobs themselves."""

    usage: list[tuple[float, int]] = field(default_factory=list)  # (time, GPUs in use)
    predictions: list[tuple[int, float]] = field(default_factory=list)  # (job, time)
    preemptions: list[tuple[int, float]] = field(default_factory=list)
    actions: dict[str, int] = field(default_factory=dict)
    end_time: float = 0.0
    ticks: int = 0
    #: the victim predictor checked against the quota model's own choice on every scheduling pass
    #: (``WorldConfig.score_victims``): victims predicted, predicted and chosen, chosen
    victims_predicted: int = 0
    victims_hit: int = 0
    victims_chosen: int = 0


def account(job: SimJob, now: float, busy_s: dict[tuple[str, int], float]) -> None:
    """Charge the job's GPUs from its last accounting to ``now`` to the phase it was in (and the
    time it held quota to ``busy_s``, by ClusterQueue and priority: the denominator of the
    eviction rate)."""
    dt = now - job.last_account
    if dt <= 0:
        return
    if job.phase.holds_quota:
        g = job.gpus
        job.gpu_s += dt * g
        key = (job.cluster_queue, job.workload.priority)
        busy_s[key] = busy_s.get(key, 0.0) + dt
        if job.phase is Phase.STARTING:
            job.restart_gpu_s += dt * g
        elif job.phase is Phase.CHECKPOINTING:
            job.ckpt_gpu_s += dt * g
        if job.phase is not Phase.RUNNING and job.step >= job.learning_end:
            job.overhead_nonlearning_gpu_s += dt * g
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


def note_usage(record: SimRecord, now: float, use: int) -> None:
    """Append the GPUs in use at ``now`` when they changed (one point per instant)."""
    if not record.usage or record.usage[-1][1] != use:
        if record.usage and record.usage[-1][0] == now:
            record.usage[-1] = (now, use)
        else:
            record.usage.append((now, use))
