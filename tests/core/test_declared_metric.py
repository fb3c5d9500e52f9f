"""A run that declares the eval metric it is judged by (a HF Trainer's ``metric_for_best_model``,
reported by the training helper) is judged by it alone; one that declares none is judged by its
eval loss read with the task's score beside it."""

from __future__ import annotations

import json

import numpy as np

from advisor.core import AdvisorCore
from advisor.model import ClusterView, JobView, ProgressSample
from advisor.sources.trainerstatus import parse_trainer_status

JOB = JobView(namespace="ns", name="ft", admitted=True, active=True, started_at=0.0)
TOTAL = 3000


def _feed(core: AdvisorCore, declared: str | None, upto: int = 1800) -> None:
    """Training loss falling; eval loss past its best at step 1000 and rising; accuracy still rising."""
    rng = np.random.default_rng(0)
    for step in range(10, upto + 1, 10):
        metrics = [
            {"name": "current_step", "value": str(step)},
            {"name": "total_steps", "value": str(TOTAL)},
            {"name": "loss", "value": f"{2 * np.exp(-step / 600) + 0.3 + rng.normal(0, 0.01):.5f}"},
        ]
        if declared is not None:
            metrics.append({"name": "metric_for_best_model", "value": declared})
        if step % 100 == 0:
            rise = 0.3 * ((step - 1000) / 1000) ** 2 * (1.0 if step < 1000 else 0.5)
            metrics += [
                {"name": "eval_loss", "value": f"{0.5 + rise + rng.normal(0, 0.004):.5f}"},
                {"name": "eval_accuracy", "value": f"{0.6 + 0.1 * step / TOTAL:.5f}"},
            ]
        sample = parse_trainer_status({"metrics": metrics}, now=float(step))
        core.observe("ns/ft", sample, now=float(step))
        core.evaluate(JOB, ClusterView(), now=float(step))


def test_a_declared_eval_loss_is_judged_alone_and_survives_a_restore() -> None:
    declared = AdvisorCore(forecast_interval_s=0)
    _feed(declared, "loss")  # as HF writes it: the Trainer adds the eval_ prefix
    state = declared.learning_state("ns/ft")
    assert state is not None and state.metric == "eval_loss" and state.task_metric is None
    assert state.label == "overfitting"
    restored = AdvisorCore(forecast_interval_s=0)
    restored.restore("ns/ft", json.loads(json.dumps(declared.dump("ns/ft"))))
    assert restored.record("ns/ft").declared_metric == "eval_loss"  # type: ignore[union-attr]
    # the same run declaring nothing: its accuracy still rises, so it is not called overfitting
    plain = AdvisorCore(forecast_interval_s=0)
    _feed(plain, None)
    state = plain.learning_state("ns/ft")
    assert state is not None and state.task_metric == "eval_accuracy" and state.label == "learning"


def test_the_metric_name_is_read_as_the_trainer_names_it() -> None:
    def judged(value: object) -> tuple[str | None, tuple[str, ...]]:
        s = parse_trainer_status(
            {
                "metrics": [
                    {"name": "current_step", "value": "1"},
                    {"name": "metric_for_best_model", "value": value},
                ]
            },
            now=0.0,
        )
        return s.judged_by, s.warnings

    assert judged("eval_cer")[0] == "eval_cer"
    assert judged("accuracy")[0] == "eval_accuracy"
    assert judged("val_loss")[0] == "eval_loss"
    name, warnings = judged("5")
    assert name is None and any("metric_for_best_model: '5' is not a metric name" in w for w in warnings)
    assert ProgressSample(step=1).judged_by is None
