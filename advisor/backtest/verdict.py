"""What a decision on a real run cost, judged on what the run did afterwards.

No hidden truth exists for a real run, so every verdict reads the run's own later record, through
one definition for every row (policies and baselines alike), independent of the thresholds the
policies use:

* the *judged series* is the run's eval series when it has at least ``MIN_EVAL_POINTS`` points,
  else the loss it reports; it is smoothed by a running median over ``SMOOTH_FRACTION`` of its
  points (at least 1; ``advisor.judging``, which ``simulate --curves`` shares), so that one noisy
  point neither makes nor unmakes a verdict;
* a higher-is-better eval metric (accuracy, f1, ...) is judged negated, so that below "lower" and
  "best" read the same for every metric;
* a run judged by its eval loss for want of a metric of its own (its log names no best-model
  metric) is read with the task's score it reports beside it (``advisor.series.task_metric``:
  ``eval_accuracy``, ``eval_cer``, ``eval_overall_f1``), as the controller reads it: a stop leaves
  the larger of what the two would still improve, and the run stopped learning when both had. An
  eval loss often turns up while the score still improves: judged on the loss alone, a stop of a
  fine-tune whose accuracy rose from 0.852 to 0.866 afterwards read "0.00% left", no wrong stop;
* a decision at step ``s`` *left* ``(a(s) - min_{s' > s} v(s') - d) / a(s)`` of improvement: the
  best later smoothed value against what the run stood at at the decision, ``a(s)``: on an eval
  series the best smoothed value up to it (the checkpoint a stop keeps), on the training loss its
  smoothed value there (no checkpoint keeps the training loss's best); 0 when the run has no later
  point. ``d`` is the depth the best later value reaches by the log's noise alone
  (``advisor.judging.noise_depth``: 0 on a clean log or a falling one). It is a *wrong stop* at
  threshold t when that exceeds t (0.5%, 1% and 2% are reported);
* the run *stopped learning* at the first judged point from which no later point improves on what
  it stood at there by more than ``LEARNING_THRESHOLD``; GPU-hours after that, to the run's
  recorded end, are its *non-learning* GPU-hours;
* a *near-end release* is a stop in the last ``NEAR_END_FRACTION`` of the run's budget (its planned
  steps, else its last step) and of its recorded time, of a healthy run: one whose judged series did
  not get worse after the stop (it stayed finite and ended no more than ``LEARNING_THRESHOLD`` above
  its smoothed value at the stop). What such a stop spared is the user's budget, not counted as
  saved; a stop there of a run that went on to blow up or overfit spared hours that bought nothing,
  and counts. Near the end in steps alone is not enough: a run that hung at 99% of its steps and
  stood still for hours was not about to finish, and its stall release spared those hours, not
  the user's last 1% (counted near-end, it saved 0 of the 40 GPU-hours it freed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from advisor.backtest.replay import Outcome
from advisor.backtest.runs import Run
from advisor.judging import (
    LEARNING_THRESHOLD,
    MIN_JUDGED_EVALS,
    NEAR_END_FRACTION,
    WRONG_STOP_THRESHOLDS,
    Smoothing,
    last_finite,
    learning_end_index,
    left_after,
    smoothed,
    smoothing_of,
    threshold_key,
)
from advisor.series import Direction, direction_of, task_metric

__all__ = [
    "LEARNING_THRESHOLD",
    "NEAR_END_FRACTION",
    "WRONG_STOP_THRESHOLDS",
    "Judged",
    "judged",
    "judged_eval",
    "row_summary",
    "verdict",
]

#: the judging's (``advisor.judging.MIN_JUDGED_EVALS``), the simulator's too
MIN_EVAL_POINTS = MIN_JUDGED_EVALS


@dataclass(frozen=True)
class Judged:
    """A run's judged series (smoothed), and where it stopped learning."""

    series: str  # "eval" | "loss"
    steps: np.ndarray
    smooth: np.ndarray  # lower is better (a higher-is-better metric negated)
    learning_end_step: float
    metric: str = "loss"  # the series' name (``eval_loss``, ``eval_accuracy``, ``loss``)
    sign: float = 1.0  # -1 for a higher-is-better metric: ``sign * smooth`` is in its own units
    #: the task's score read beside an eval loss judged by default (see the module docstring)
    task: Judged | None = None
    #: the smoothing's window and standard error: what the lowest later value owes to noise
    noise: Smoothing | None = None

    @property
    def keep_best(self) -> bool:
        """Whether a stop keeps the series' best point (an eval series: its best checkpoint)."""
        return self.series == "eval"

    def left_after(self, step: float) -> tuple[float, float | None, float | None]:
        """(improvement left, value the run stood at at ``step``, best later value) for a
        decision at ``step``; the values in the metric's own units. The improvement left is the
        larger of the series' and its task score's (``task_left_after``)."""
        left, here, best = left_after(
            self.steps, self.smooth, step, keep_best=self.keep_best, noise=self.noise
        )
        task = self.task_left_after(step)
        if task is not None:
            left = max(left, task)
        return left, self.sign * here, None if best is None else self.sign * best

    def task_left_after(self, step: float) -> float | None:
        """The improvement the task's score had left after ``step`` (None without one)."""
        if self.task is None:
            return None
        return left_after(self.task.steps, self.task.smooth, step, keep_best=True, noise=self.task.noise)[0]

    def worsened_after(self, step: float) -> bool:
        """Whether the series got worse after ``step``: a non-finite later value, or a smoothed
        end more than ``LEARNING_THRESHOLD`` above its smoothed value at ``step``."""
        i = max(0, int(np.searchsorted(self.steps, step, side="right")) - 1)
        later = self.smooth[i + 1 :]
        if later.size == 0:
            return False
        here = last_finite(self.smooth[: i + 1])
        if not np.all(np.isfinite(later)):
            return True
        return bool(np.isfinite(here) and later[-1] > here + LEARNING_THRESHOLD * abs(here))


def judged_eval(run: Run) -> tuple[np.ndarray, np.ndarray] | None:
    """The run's eval series as (steps, values oriented lower-is-better) when it is the series the
    run is judged by (logged, with at least ``MIN_EVAL_POINTS`` points); None when the run is
    judged by the loss it reports. The one place this is decided: the verdicts and the baselines
    (median stopping groups peers by it) must judge a run by the same series."""
    oriented = run.eval_lower_better()
    if run.eval_steps is not None and oriented is not None and run.eval_steps.size >= MIN_EVAL_POINTS:
        return run.eval_steps, oriented
    return None


def _task_series(run: Run) -> tuple[str, np.ndarray, np.ndarray, float] | None:
    """The task's score read beside the run's judged eval loss: (name, steps, values oriented
    lower-is-better, sign), or None (the run names its metric, is judged by a score or by its
    training loss, reports no score, or too few points of it)."""
    if run.declared_metric is not None or judged_eval(run) is None:
        return None
    names = [name for name, _, _ in run.other_evals]
    task = task_metric(names, judged=run.eval_metric)
    if task is None:
        return None
    _, steps, values = next(e for e in run.other_evals if e[0] == task)
    if steps.size < MIN_EVAL_POINTS:
        return None
    sign = -1.0 if direction_of(task) is Direction.HIGHER else 1.0
    return task, np.asarray(steps, dtype=float), sign * np.asarray(values, dtype=float), sign


def _judged(
    series: str, metric: str, steps: np.ndarray, values: np.ndarray, sign: float, last: float
) -> Judged:
    raw = np.asarray(values, dtype=float)
    smooth, noise = smoothed(raw), smoothing_of(raw)
    first = learning_end_index(smooth, keep_best=series == "eval", noise=noise)
    end_step = float(steps[first]) if first < steps.size else last
    return Judged(series, np.asarray(steps, dtype=float), smooth, end_step, metric, sign, noise=noise)


def judged(run: Run) -> Judged:
    by_eval = judged_eval(run)
    last = float(run.steps[-1])
    if by_eval is not None:
        series, metric, (steps, values) = "eval", run.eval_metric, by_eval
        sign = -1.0 if run.eval_higher else 1.0
    else:
        series, metric, steps, values, sign = "loss", "loss", run.steps, run.values, 1.0
    out = _judged(series, metric, steps, values, sign, last)
    task = _task_series(run)
    if task is None:
        return out
    name, t_steps, t_values, t_sign = task
    score = _judged("eval", name, t_steps, t_values, t_sign, last)
    # the run learned while either improved
    end = max(out.learning_end_step, score.learning_end_step)
    return dataclasses.replace(out, learning_end_step=end, task=score)


def verdict(run: Run, judged_run: Judged, outcome: Outcome) -> dict[str, Any]:
    """One run's decision record for ``backtest --json``: what the row did, when, what it cost."""
    h = 3600.0
    end_s = run.duration_s
    learn_s = min(end_s, run.time_at(judged_run.learning_end_step))
    stop_s = end_s if outcome.time_s is None else min(end_s, outcome.time_s)
    gpu_h = stop_s * run.gpus / h
    out: dict[str, Any] = {
        "run": run.name,
        "group": run.group,
        "gpus": run.gpus,
        "judged_series": judged_run.series,
        "judged_metric": judged_run.metric,
        "action": outcome.kind or None,
        "rule": outcome.rule or None,
        "policy": outcome.policy or None,
        "reason": outcome.reason or None,
        "step": outcome.step,
        "time_s": outcome.time_s,
        "budget_fraction": None if outcome.step is None else outcome.step / run.total_steps,
        "checkpoint_requests": outcome.checkpoints,
        "gpu_hours": gpu_h,
        "gpu_hours_nonlearning": max(0.0, stop_s - learn_s) * run.gpus / h,
        "baseline_gpu_hours": end_s * run.gpus / h,
        "baseline_gpu_hours_nonlearning": max(0.0, end_s - learn_s) * run.gpus / h,
        "improvement_left": None,
        "value_at_decision": None,
        "best_later_value": None,
        "near_end": False,
        # a policy judged the run at some look (False: over before its policy's minRuntime,
        # minSteps or minProgress let it judge: not a run it let be)
        "judged": outcome.judged,
        # a policy selected it at some look (False: the row's selectors leave it out)
        "selected": outcome.selected,
    }
    if outcome.stopped and outcome.step is not None:
        left, here, best = judged_run.left_after(outcome.step)
        out["improvement_left"] = left
        if judged_run.task is not None:
            # the task's score read beside the eval loss: what it alone had left
            out["task_metric"] = judged_run.task.metric
            out["task_improvement_left"] = judged_run.task_left_after(outcome.step)
        out["value_at_decision"] = here
        out["best_later_value"] = best
        late = 1.0 - NEAR_END_FRACTION
        out["near_end"] = (
            outcome.step >= late * run.total_steps
            and stop_s >= late * end_s
            and not judged_run.worsened_after(outcome.step)
        )
    spared = (end_s - stop_s) * run.gpus / h
    # of them, those after the run stopped learning are saved; the rest were a run still learning,
    # cut (a wrong stop's cost): counted in, a row that cut more healthy runs read as saving more
    wasted = max(0.0, end_s - max(stop_s, learn_s)) * run.gpus / h
    out["gpu_hours_saved"] = 0.0 if out["near_end"] else wasted
    out["gpu_hours_cut_learning"] = 0.0 if out["near_end"] else spared - wasted
    # what a near-end release spared: the user's budget, in neither saved nor cut learning
    out["near_end_gpu_hours"] = spared if out["near_end"] else 0.0
    return out


def row_summary(row: str, decisions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One object per row for ``backtest --json`` (the keys the issue fixes, plus a few)."""
    stopped = [d for d in decisions if d["action"]]
    wrong = {
        threshold_key(t): sum(1 for d in stopped if (d["improvement_left"] or 0.0) > t)
        for t in WRONG_STOP_THRESHOLDS
    }
    base_nl = sum(d["baseline_gpu_hours_nonlearning"] for d in decisions)
    nl = sum(d["gpu_hours_nonlearning"] for d in decisions)
    # a near-end release's non-learning tail is still charged: it is no saving
    nl += sum(
        d["baseline_gpu_hours_nonlearning"] - d["gpu_hours_nonlearning"] for d in stopped if d["near_end"]
    )
    runs = len(decisions)
    return {
        "policy": row,
        "runs": runs,
        "gpu_hours": sum(d["gpu_hours"] for d in decisions),
        "gpu_hours_nonlearning": nl,
        "gpu_hours_saved": sum(d["gpu_hours_saved"] for d in decisions),
        # GPU-hours of runs still learning that the row's stops did not spend: a cost, not saved
        "gpu_hours_cut_learning": sum(d["gpu_hours_cut_learning"] for d in decisions),
        # of them, the hours spared by its wrong stops (at 1%): savings that cost learning
        "gpu_hours_saved_on_wrong_stops": sum(
            d["gpu_hours_saved"] for d in stopped if (d["improvement_left"] or 0.0) > WRONG_STOP_THRESHOLDS[1]
        ),
        "wrong_stops_by_threshold": wrong,
        "wrong_stop_fraction_by_threshold": {k: (v / runs if runs else 0.0) for k, v in wrong.items()},
        "near_end_releases": sum(1 for d in stopped if d["near_end"]),
        # with saved and cut learning, they make up no-advisor's GPU-hours minus the row's
        "near_end_gpu_hours": sum(d["near_end_gpu_hours"] for d in stopped),
        "stopped": len(stopped),
        # runs the row's policy never judged (over before its minRuntime, minSteps or minProgress)
        "never_judged": sum(1 for d in decisions if not d.get("judged", True)),
        # of them, those none of its policies selected (its selectors leave them out)
        "never_selected": sum(1 for d in decisions if not d.get("selected", True)),
        "baseline_gpu_hours_nonlearning": base_nl,
        "nonlearning_saved_fraction": (base_nl - nl) / base_nl if base_nl > 0 else None,
        "decisions": list(decisions),
    }
