"""What a platform does without the advisor, on the same runs: the rows the policies must beat.

* ``no-advisor``: every run goes on to its recorded end (the GPU-hours everything is measured from);
* ``patience``: Hugging Face's ``EarlyStoppingCallback`` (``early_stopping_patience`` evaluations
  without an improvement of the eval metric by more than ``early_stopping_threshold``), on the
  run's eval series; a run that logs no eval series is never stopped by it;
* ``median-stopping``: the median stopping rule (Golovin et al., "Google Vizier", 2017; Optuna's
  ``MedianPruner``): at each point of the judged series after ``warmup`` of its budget, a run whose
  best value so far is worse than the median of the other runs of its group's running means at the
  same step is stopped. Needs at least ``min_peers`` other runs in the group that reached that step;
  the peers are all the group's other runs, as if they had run first (a sweep's earlier trials);
* ``fixed-budget``: every run is cut at ``fraction`` of its budget.

The budget is the steps a run planned (``Run.planned_steps``), as a platform would know it. A log
that does not say its planned steps has no budget a rule could read while it runs (its last step is
its future): ``fixed-budget`` leaves it uncut, and median stopping's warm-up is read off the
finished peers' lengths (they ran first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from advisor.backtest.replay import Outcome
from advisor.backtest.runs import Run
from advisor.backtest.verdict import judged_eval

__all__ = ["BASELINES", "BaselineSettings", "baseline_outcomes"]

BASELINES = ("no-advisor", "patience", "median-stopping", "fixed-budget")


@dataclass(frozen=True)
class BaselineSettings:
    patience: int = 3
    patience_threshold: float = 0.0
    median_warmup: float = 0.1
    median_min_peers: int = 2
    fixed_fraction: float = 0.75


def _stop(row: str, run: Run, step: float, rule: str, reason: str) -> Outcome:
    return Outcome(
        row=row,
        run=run.name,
        stopped=True,
        kind="stop",
        rule=rule,
        reason=reason,
        step=step,
        time_s=run.time_at(step),
    )


def _series(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """The judged series (``verdict.judged_eval``), lower is better (a higher-is-better eval
    metric negated)."""
    by_eval = judged_eval(run)
    return by_eval if by_eval is not None else (run.steps, run.values)


def _judged_metric(run: Run) -> str:
    """The name of the series ``_series`` judges the run by."""
    return run.eval_metric if judged_eval(run) is not None else run.metric


def patience(run: Run, s: BaselineSettings) -> Outcome:
    row = "patience"
    evals = run.eval_lower_better()
    if run.eval_steps is None or evals is None:
        return Outcome(row=row, run=run.name)
    best = np.inf
    waited = 0
    sign = -1.0 if run.eval_higher else 1.0
    for step, value in zip(run.eval_steps.tolist(), evals.tolist(), strict=True):
        if not np.isfinite(value):
            waited += 1
        elif value < best and abs(value - best) > s.patience_threshold:
            best, waited = value, 0
        else:
            waited += 1
        if waited >= s.patience:
            why = f"{run.eval_metric} not improved for {s.patience} evaluations (best {sign * best:.4g})"
            return _stop(row, run, step, "patience", why)
    return Outcome(row=row, run=run.name)


def median_stopping(run: Run, peers: Sequence[Run], s: BaselineSettings) -> Outcome:
    row = "median-stopping"
    # peers judged by the same series only: a training loss of 2 against an eval loss of 0.8, or
    # a negated accuracy, is no comparison (a folder of mixed runs stopped its learning ones)
    metric = _judged_metric(run)
    others = [_series(p) for p in peers if p is not run and _judged_metric(p) == metric]
    if len(others) < s.median_min_peers:
        return Outcome(row=row, run=run.name)
    steps, values = _series(run)
    finite = np.where(np.isfinite(values), values, np.inf)
    best = np.minimum.accumulate(finite)
    # the peers' running means, read at any step by their last point at or before it
    means = []
    for ps, pv in others:
        pv = np.where(np.isfinite(pv), pv, np.nan)
        counts = np.cumsum(np.isfinite(pv))
        sums = np.nancumsum(pv)
        means.append((ps, np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)))
    # the warm-up: a share of the run's planned steps, else of its finished peers' median length
    budget = run.planned_steps or float(np.median([float(ps[-1]) for ps, _ in others]))
    for i, step in enumerate(steps.tolist()):
        if step < s.median_warmup * budget:
            continue
        at = []
        for ps, pm in means:
            if ps[-1] < step:
                continue  # this peer never got that far
            j = int(np.searchsorted(ps, step, side="right")) - 1
            if j >= 0 and np.isfinite(pm[j]):
                at.append(float(pm[j]))
        if len(at) < s.median_min_peers:
            continue
        median = float(np.median(at))
        if best[i] > median:
            sign = -1.0 if steps is run.eval_steps and run.eval_higher else 1.0
            why = (
                f"best {sign * best[i]:.4g} worse than the median {sign * median:.4g} of {len(at)} peers'"
                " running means"
            )
            return _stop(row, run, step, "median", why)
    return Outcome(row=row, run=run.name)


def fixed_budget(run: Run, s: BaselineSettings) -> Outcome:
    row = "fixed-budget"
    if run.planned_steps is None:
        return Outcome(row=row, run=run.name, reason="no planned steps in the log: no budget to cut at")
    cut = s.fixed_fraction * run.planned_steps
    if run.steps[-1] <= cut:
        return Outcome(row=row, run=run.name)
    # the budget is kept by the clock, not by the next report: a sparse log (an eval every 250
    # steps) would otherwise be cut late, near its end
    return _stop(row, run, cut, "budget", f"cut at {s.fixed_fraction:.0%} of {run.planned_steps} steps")


def baseline_outcomes(name: str, run: Run, group: Sequence[Run], s: BaselineSettings) -> Outcome:
    if name == "no-advisor":
        return Outcome(row=name, run=run.name)
    if name == "patience":
        return patience(run, s)
    if name == "median-stopping":
        return median_stopping(run, group, s)
    if name == "fixed-budget":
        return fixed_budget(run, s)
    raise ValueError(f"unknown baseline {name!r}")
