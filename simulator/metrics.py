"""Per-row results: GPU-hours, what was saved and what was risked, completion times.

Definitions (all GPU-hours are GPU-seconds held under admitted quota / 3600):

- ``gpu_hours_nonlearning``: held while the job's progress was past its hidden "stopped learning"
  point (no more than 1% improvement of the clean loss ever ahead: plateau, divergence, hang, or
  the flat tail of a run), including checkpoints and restarts there.
- ``wrong_stops``: runs released or stopped whose clean loss would still have improved by more than
  1% had they run on to their end; ``wrong_stop_gpu_hours`` is what those runs had consumed.
- ``lost_work_gpu_hours``: progress thrown away by preemptions and node failures (recomputed).
- ``checkpoint_overhead_gpu_hours``: GPU time spent saving checkpoints (blocking saves).
- JCT: from submission until the job completes or is released/stopped; jobs never admitted are
  counted in ``unfinished`` and left out of JCT.
- ``utilization``: GPU-seconds held / (capacity x span from the first arrival to the last event).
- Victim prediction: a prediction (a boost, or a checkpoint rule about preemption) is right when
  the job is preempted within an hour; recall is the share of preemptions preceded by one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simulator.accounting import VICTIM_HORIZON_S, SimRecord
from simulator.curves import LEARNING_THRESHOLD
from simulator.jobs import Phase, SimJob

__all__ = ["row_metrics", "victim_scores"]


def victim_scores(record: SimRecord) -> tuple[float | None, float | None]:
    preds = record.predictions
    pre = record.preemptions
    if not preds and not pre:
        return None, None
    by_job: dict[int, list[float]] = {}
    for idx, t in pre:
        by_job.setdefault(idx, []).append(t)
    preds_by_job: dict[int, list[float]] = {}
    for idx, t in preds:
        preds_by_job.setdefault(idx, []).append(t)
    hits = sum(1 for idx, t in preds if any(t <= p <= t + VICTIM_HORIZON_S for p in by_job.get(idx, ())))
    caught = sum(
        1 for idx, t in pre if any(p <= t <= p + VICTIM_HORIZON_S for p in preds_by_job.get(idx, ()))
    )
    precision = hits / len(preds) if preds else None
    recall = caught / len(pre) if pre else None
    return precision, recall


def row_metrics(
    name: str,
    jobs: list[SimJob],
    record: SimRecord,
    capacity: int,
    baseline_gpu_hours: float | None,
    wall_s: float,
    *,
    victims: bool,
) -> dict[str, Any]:
    h = 3600.0
    gpu_s = sum(j.gpu_s for j in jobs)
    wrong = [
        j
        for j in jobs
        if j.phase in (Phase.RELEASED, Phase.STOPPED)
        and j.curve.remaining_improvement(j.end_step) > LEARNING_THRESHOLD
    ]
    stopped = [j for j in jobs if j.phase in (Phase.RELEASED, Phase.STOPPED)]
    ended = [j for j in jobs if j.end_time is not None]
    jct = np.array([j.end_time - j.trace.submit for j in ended if j.end_time is not None])
    started = [j for j in jobs if j.first_start is not None]
    waits = np.array([j.queue_wait_s for j in started]) if started else np.array([0.0])
    t0 = min(j.trace.submit for j in jobs)
    span = max(1.0, record.end_time - t0)
    precision, recall = victim_scores(record) if victims else (None, None)
    nonlearning = sum(j.nonlearning_gpu_s for j in jobs) / h
    by_pathology: dict[str, float] = {}
    for j in jobs:
        by_pathology[j.curve.pathology] = by_pathology.get(j.curve.pathology, 0.0) + j.nonlearning_gpu_s / h
    return {
        "policy": name,
        "gpu_hours": gpu_s / h,
        "gpu_hours_nonlearning": nonlearning,
        "gpu_hours_saved": None if baseline_gpu_hours is None else baseline_gpu_hours - gpu_s / h,
        "wrong_stops": len(wrong),
        "wrong_stop_fraction": len(wrong) / len(jobs),
        "wrong_stop_gpu_hours": sum(j.gpu_s for j in wrong) / h,
        "lost_work_gpu_hours": sum(j.lost_gpu_s for j in jobs) / h,
        "lost_work_preemption_gpu_hours": sum(j.lost_preempt_gpu_s for j in jobs) / h,
        "checkpoint_overhead_gpu_hours": sum(j.ckpt_gpu_s for j in jobs) / h,
        "restart_overhead_gpu_hours": sum(j.restart_gpu_s for j in jobs) / h,
        "jct_mean_s": float(jct.mean()) if jct.size else None,
        "jct_p95_s": float(np.percentile(jct, 95)) if jct.size else None,
        "queue_wait_mean_s": float(waits.mean()),
        "utilization": gpu_s / (capacity * span),
        "victim_precision": precision,
        "victim_recall": recall,
        "jobs": len(jobs),
        "completed": sum(1 for j in jobs if j.phase is Phase.DONE),
        "released_or_stopped": len(stopped),
        "unfinished": len(jobs) - len(ended),
        "preemptions": len(record.preemptions),
        "failures": sum(j.failures_met for j in jobs),
        "checkpoints": sum(j.checkpoints for j in jobs),
        "actions": dict(sorted(record.actions.items())),
        "advisor_ticks": record.ticks,
        "gpu_hours_nonlearning_by_pathology": {k: round(v, 3) for k, v in sorted(by_pathology.items())},
        "simulated_hours": span / h,
        "wall_seconds": wall_s,
    }
