"""The series a real run is judged by is chosen in one place (``verdict.judged_eval``): the
verdicts and the median-stopping baseline's peer groups read the same choice."""

from __future__ import annotations

import numpy as np

from advisor.backtest import baselines
from advisor.backtest.runs import Run
from advisor.backtest.verdict import MIN_EVAL_POINTS, judged, judged_eval


def _run(evals: int, *, higher: bool = False) -> Run:
    steps = np.arange(100, 1001, 100, dtype=float)
    eval_steps = steps[:evals] if evals else None
    return Run(
        name=f"r{evals}",
        group="g",
        gpus=1,
        steps=steps,
        values=np.linspace(5.0, 1.0, steps.size),
        times=steps.copy(),
        learning_rates=None,
        epochs=None,
        total_steps=1000,
        planned_steps=1000,
        metric="loss",
        eval_steps=eval_steps,
        eval_values=None if eval_steps is None else np.linspace(0.9, 0.5, evals),
        timed=True,
        source="test",
        eval_metric="eval_accuracy" if higher else "eval_loss",
        eval_higher=higher,
    )


def test_the_verdict_and_the_baselines_judge_a_run_by_the_same_series() -> None:
    for evals in (0, MIN_EVAL_POINTS - 1, MIN_EVAL_POINTS, 10):
        for higher in (False, True):
            run = _run(evals, higher=higher)
            by_eval = judged_eval(run)
            assert (by_eval is not None) is (evals >= MIN_EVAL_POINTS)
            steps, values = baselines._series(run)
            if by_eval is None:
                assert judged(run).series == "loss" and baselines._judged_metric(run) == run.metric
                assert steps is run.steps and values is run.values
            else:
                assert judged(run).series == "eval" and baselines._judged_metric(run) == run.eval_metric
                assert steps is run.eval_steps
                # lower is better everywhere: a higher-is-better metric is negated
                sign = -1.0 if higher else 1.0
                np.testing.assert_array_equal(values, sign * run.eval_values)
