"""Per-row results: GPU-hours, what was saved and what was risked, completion times.

The definitions are the same for every row (baselines and advisor rows alike) and are judged on the
run's hidden clean curve, which no strategy sees. All GPU-hours are GPU-seconds held under admitted
quota / 3600.

- ``wrong_stops_by_threshold``: runs released or stopped whose clean loss would still have improved
  by more than a threshold (relative) had they run on to the end of their budget, at 0.5%, 1% and
  2% (keys ``"0.005"``, ``"0.01"``, ``"0.02"``). Three thresholds because the advisor's own plateau
  definition is 1%: a row tuned to that very number must also answer for what it cut at 0.5%.
  ``wrong_stops`` / ``wrong_stop_fraction`` are the 1% column (the key kept from before);
  ``wrong_stop_gpu_hours`` is what those runs had consumed.
- ``near_end_releases``: releases and stops of healthy runs (no pathology that ends their learning
  early: a plain, slow or spiky run) in the last 15% of their budget. Such a run's tail is flat
  under any threshold near 1% by construction of a cosine or WSD schedule, so cutting it looks
  like a correct, cheap release; it is the user's budget, though, not a stalled run. They are
  counted apart and are **not savings**: ``gpu_hours_saved`` excludes the GPU-hours their early end
  spared (``near_end_gpu_hours``), and ``gpu_hours_nonlearning`` charges the row the non-learning
  GPU-hours such a run would have burnt to its end, as if it had not been cut
  (``near_end_nonlearning_gpu_hours``: in no pathology's share, since the run was not burnt).
- ``gpu_hours_nonlearning``: held while the job's progress was past its hidden "stopped learning"
  point (no more than 1% improvement of the clean loss ever ahead: plateau, divergence, hang, or
  the flat tail of a run), including checkpoints and restarts there, plus the near-end charge above.
- ``gpu_hours_freed``: the no-advisor row's GPU-hours minus this row's, minus ``near_end_gpu_hours``:
  what the row did not use, of which ``gpu_hours_saved`` is the part that was waste.
- ``gpu_hours_saved`` = ``gpu_hours_saved_nonlearning`` (non-learning GPU-hours not burnt: what a
  release is for) + ``gpu_hours_saved_overheads`` (lost work, checkpoints and restarts avoided while
  runs learned; negative when added). ``gpu_hours_saved_learning`` is the rest of what was freed:
  GPU-hours of runs *still learning* not spent (work cut short, or not reached by the end of the
  replay; negative when the row's runs got further by then, work not lost or quota freed letting
  them start sooner). It is a cost, not a saving, and is not in ``gpu_hours_saved``: counted in, a
  row that cut more healthy runs read as saving more (``savings``).
- ``lost_work_gpu_hours``: progress thrown away by preemptions and node failures (recomputed).
- ``checkpoint_overhead_gpu_hours``: GPU time spent saving checkpoints (blocking saves).
- JCT: ``jct_mean_s`` / ``jct_p95_s`` from submission until the job *completes*; a released or
  stopped run did not complete, so its time is reported apart (``jct_released_mean_s`` /
  ``jct_released_p95_s``). Jobs never admitted are counted in ``unfinished`` and left out of both.
- ``utilization``: GPU-seconds held / (capacity x span from the first arrival to the last event).
- Victim prediction: a prediction (a boost, or a checkpoint rule about preemption) is right when
  the job is preempted within an hour; recall is the share of preemptions preceded by one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from advisor.judging import NEAR_END_FRACTION, WRONG_STOP_THRESHOLDS, threshold_key
from simulator.accounting import VICTIM_HORIZON_S, SimRecord
from simulator.curves import LEARNING_THRESHOLD
from simulator.jobs import Phase, SimJob

__all__ = [
    "HEALTHY_PATHOLOGIES",
    "NEAR_END_FRACTION",
    "WRONG_STOP_THRESHOLDS",
    "is_near_end_release",
    "reported_metrics",
    "row_metrics",
    "savings",
    "victim_scores",
    "wrong_stop_counts",
]

#: pathologies that leave a run learning to the end of its budget (the others end it early); a
#: real run's curve (``simulate --curves``) has no known pathology and counts as healthy here
HEALTHY_PATHOLOGIES = frozenset({"none", "slow", "spikes", "real"})


def _cut(job: SimJob) -> bool:
    return job.phase in (Phase.RELEASED, Phase.STOPPED)


def completion_times_s(jobs: Sequence[SimJob]) -> list[float]:
    """The JCT of each job that completed (ended, and not released or stopped): the table's JCT
    and the report's JCT plot, which drew released jobs too and so disagreed with the table."""
    return [j.end_time - j.trace.submit for j in jobs if j.end_time is not None and not _cut(j)]


def wrong_stop_counts(jobs: Sequence[SimJob]) -> dict[str, int]:
    """``{"0.005": n, "0.01": n, "0.02": n}``: runs cut with more than that improvement ahead."""
    ahead = [j.curve.remaining_improvement(j.end_step) for j in jobs if _cut(j)]
    return {threshold_key(t): sum(1 for a in ahead if a > t) for t in WRONG_STOP_THRESHOLDS}


def stop_record(job: SimJob) -> dict[str, Any]:
    """One run the row released or stopped, as ``simulate --json`` lists it: which run (with
    ``--curves``, the real run its curve came from), where in its budget, and what it still had
    to gain (the wrong-stop measure): so that a row's wrong stops can be looked up one by one, as
    ``backtest --json``'s decisions can, with the ``rule`` that ended it and its ``policy`` (None
    for a baseline's rule), to tell a plateau call from an overfitting or stall one."""
    curve = job.curve
    source = getattr(curve, "source", None)
    return {
        "job": job.key,
        "curve": source if source else f"{curve.pathology}/{getattr(curve, 'schedule', '-')}",
        "pathology": curve.pathology,
        "phase": job.phase.value,
        "step": int(job.end_step),
        "total_steps": int(job.total_steps),
        "budget_fraction": round(job.end_step / job.total_steps, 4) if job.total_steps else None,
        "improvement_left": round(float(curve.remaining_improvement(job.end_step)), 6),
        "near_end": is_near_end_release(job),
        "gpus": job.gpus,
        "rule": job.ended_by_rule or None,
        "policy": job.ended_by_policy or None,
    }


def reported_metrics(jobs: Sequence[SimJob]) -> set[str]:
    """The series the jobs' progress reports carry that a rule's ``metric:`` may name: the training
    loss, and the eval metric of each job that evaluates (by the name its run logged it under)."""
    return {"loss"} | {j.curve.eval_metric for j in jobs if j.curve.has_evals}


def is_near_end_release(job: SimJob) -> bool:
    """A healthy run released or stopped in the last ``NEAR_END_FRACTION`` of its budget."""
    return (
        _cut(job)
        and job.curve.pathology in HEALTHY_PATHOLOGIES
        and job.end_step >= (1.0 - NEAR_END_FRACTION) * job.total_steps
    )


def _spared_gpu_s(job: SimJob, from_step: float) -> float:
    """GPU-seconds the job would have run from ``from_step`` to the end of its budget."""
    return max(0.0, job.total_steps - from_step) * job.step_time / job.rate_factor * job.gpus


def _victim_model(record: SimRecord) -> dict[str, Any]:
    """The victim predictor against the quota model's choice (``WorldConfig.score_victims``):
    precision = predicted victims the next pass preempted / predicted; recall = preempted victims
    that were predicted / preempted. Empty unless scored."""
    if not (record.victims_predicted or record.victims_chosen):
        return {}
    return {
        "victim_model_predicted": record.victims_predicted,
        "victim_model_chosen": record.victims_chosen,
        "victim_model_precision": record.victims_hit / record.victims_predicted
        if record.victims_predicted
        else None,
        "victim_model_recall": record.victims_hit / record.victims_chosen if record.victims_chosen else None,
    }


def victim_scores(record: SimRecord) -> tuple[float | None, float | None]:
    """(precision, recall) of the row's victim flags; both None for a row that flags none: it
    makes no victim predictions, so it has no recall to speak of either (0.0 in the JSON read as a
    guard that missed every preemption, where the table showed "-")."""
    preds = record.predictions
    pre = record.preemptions
    if not preds:
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
    judged: bool = False,
) -> dict[str, Any]:
    h = 3600.0
    gpu_s = sum(j.gpu_s for j in jobs)
    wrong = [j for j in jobs if _cut(j) and j.curve.remaining_improvement(j.end_step) > LEARNING_THRESHOLD]
    stopped = [j for j in jobs if _cut(j)]
    near_end = [j for j in stopped if is_near_end_release(j)]
    near_end_gpu_s = sum(_spared_gpu_s(j, j.end_step) for j in near_end)
    # what a near-end release would have burnt past its learning end had it run on: still charged
    near_end_nonlearning_s = sum(_spared_gpu_s(j, max(j.end_step, j.learning_end)) for j in near_end)
    ended = [j for j in jobs if j.end_time is not None]
    jct = np.array(completion_times_s(jobs))
    jct_cut = np.array([j.end_time - j.trace.submit for j in stopped if j.end_time is not None])
    started = [j for j in jobs if j.first_start is not None]
    waits = np.array([j.queue_wait_s for j in started]) if started else np.array([0.0])
    t0 = min(j.trace.submit for j in jobs)
    span = max(1.0, record.end_time - t0)
    precision, recall = victim_scores(record) if victims else (None, None)
    nonlearning = (sum(j.nonlearning_gpu_s for j in jobs) + near_end_nonlearning_s) / h
    by_pathology: dict[str, float] = {}
    for j in jobs:
        by_pathology[j.curve.pathology] = by_pathology.get(j.curve.pathology, 0.0) + j.nonlearning_gpu_s / h
    return {
        "policy": name,
        "gpu_hours": gpu_s / h,
        "gpu_hours_nonlearning": nonlearning,
        "gpu_hours_freed": (
            None if baseline_gpu_hours is None else baseline_gpu_hours - (gpu_s + near_end_gpu_s) / h
        ),
        "wrong_stops": len(wrong),
        "wrong_stops_by_threshold": wrong_stop_counts(jobs),
        "near_end_releases": len(near_end),
        "near_end_gpu_hours": near_end_gpu_s / h,
        # the near-end charge in gpu_hours_nonlearning: with the pathologies' shares, it adds up to it
        "near_end_nonlearning_gpu_hours": near_end_nonlearning_s / h,
        "wrong_stop_fraction": len(wrong) / len(jobs),
        "wrong_stop_gpu_hours": sum(j.gpu_s for j in wrong) / h,
        "lost_work_gpu_hours": sum(j.lost_gpu_s for j in jobs) / h,
        "lost_work_preemption_gpu_hours": sum(j.lost_preempt_gpu_s for j in jobs) / h,
        "checkpoint_overhead_gpu_hours": sum(j.ckpt_gpu_s for j in jobs) / h,
        "restart_overhead_gpu_hours": sum(j.restart_gpu_s for j in jobs) / h,
        "overhead_nonlearning_gpu_hours": sum(j.overhead_nonlearning_gpu_s for j in jobs) / h,
        "jct_mean_s": float(jct.mean()) if jct.size else None,
        "jct_p95_s": float(np.percentile(jct, 95)) if jct.size else None,
        "jct_released_mean_s": float(jct_cut.mean()) if jct_cut.size else None,
        "jct_released_p95_s": float(np.percentile(jct_cut, 95)) if jct_cut.size else None,
        "queue_wait_mean_s": float(waits.mean()),
        "utilization": gpu_s / (capacity * span),
        "victim_precision": precision,
        "victim_recall": recall,
        **_victim_model(record),
        "jobs": len(jobs),
        # the jobs the row's policy judged at some look (None for a baseline): a wrong-stop rate
        # over every job reads lower the more jobs the policy never looks at
        "jobs_judged": sum(1 for j in jobs if j.judged) if judged else None,
        "completed": sum(1 for j in jobs if j.phase is Phase.DONE),
        "released_or_stopped": len(stopped),
        "unfinished": len(jobs) - len(ended),
        "preemptions": len(record.preemptions),
        "failures": sum(j.failures_met for j in jobs),
        "checkpoints": sum(j.checkpoints for j in jobs),
        "actions": dict(sorted(record.actions.items())),
        "advisor_ticks": record.ticks,
        "gpu_hours_nonlearning_by_pathology": {k: round(v, 3) for k, v in sorted(by_pathology.items())},
        "stops": [stop_record(j) for j in stopped],
        "simulated_hours": span / h,
        "wall_seconds": wall_s,
    }


_OVERHEADS = ("lost_work_gpu_hours", "checkpoint_overhead_gpu_hours", "restart_overhead_gpu_hours")


def savings(row: dict[str, Any], base: dict[str, Any]) -> dict[str, float]:
    """What a row saved against the no-advisor row ``base``: ``gpu_hours_saved`` and its two parts,
    and ``gpu_hours_saved_learning``, the GPU-hours of runs still learning it did not spend (the
    rest of ``gpu_hours_freed``; not a saving). The reference row saves nothing; a row without
    its figures, nothing either."""
    zero = {
        "gpu_hours_saved": 0.0,
        "gpu_hours_saved_nonlearning": 0.0,
        "gpu_hours_saved_overheads": 0.0,
        "gpu_hours_saved_learning": 0.0,
    }
    freed = row.get("gpu_hours_freed")
    if freed is None or row is base or row.get("policy") == base.get("policy"):
        return zero
    try:
        nonlearning = float(base["gpu_hours_nonlearning"]) - float(row["gpu_hours_nonlearning"])
        overheads = sum(float(base.get(k) or 0.0) - float(row.get(k) or 0.0) for k in _OVERHEADS)
        # the overheads after runs stopped learning are in ``nonlearning`` already
        key = "overhead_nonlearning_gpu_hours"
        overheads -= float(base.get(key) or 0.0) - float(row.get(key) or 0.0)
    except (KeyError, TypeError):
        return zero
    return {
        "gpu_hours_saved": nonlearning + overheads,
        "gpu_hours_saved_nonlearning": nonlearning,
        "gpu_hours_saved_overheads": overheads,
        "gpu_hours_saved_learning": float(freed) - nonlearning - overheads,
    }
