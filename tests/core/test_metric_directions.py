"""A policy's ``metricDirections``: metrics whose names say no direction are judged, and a name that
says the wrong one is turned, for the jobs the policy governs."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.core import AdvisorCore
from advisor.core.evals import EvalHistory
from advisor.model import ClusterView, JobView, ProgressSample
from advisor.series import Direction
from policies import load_policy

TOTAL = 3000
MINIMUM = 1000


def _policy(directions: dict[str, str] | None) -> object:
    spec = "\n".join(f"    {k}: {v}" for k, v in (directions or {}).items())
    text = (
        "apiVersion: advisor.trainjob-advisor.io/v1alpha1\nkind: AdvisorPolicy\nmetadata: {name: p}\nspec:\n"
    )
    text += "  mode: Recommend\n  rules: {plateau: {}}\n"
    if spec:
        text += "  metricDirections:\n" + spec + "\n"
    return load_policy(text)


def _sample(step: int, score: float | None) -> ProgressSample:
    train = 2 * np.exp(-step / 600) + 0.3
    metrics = {} if score is None else {"eval_myscore": score}
    return ProgressSample(step=step, loss=float(train), total_steps=TOTAL, time=float(step), metrics=metrics)


def _score(step: int) -> float:
    """Higher is better; it peaks at MINIMUM and falls after (the run overfits)."""
    return 0.8 - 0.3 * ((step - MINIMUM) / MINIMUM) ** 2


def _run(core: AdvisorCore, upto: int) -> JobView:
    job = JobView(namespace="ns", name="a")
    for s in range(10, upto + 1, 10):
        core.observe("ns/a", _sample(s, _score(s) if s % 100 == 0 else None), now=float(s))
        if s % 500 == 0:
            core.evaluate(job, ClusterView(), now=float(s))
    core.evaluate(job, ClusterView(), now=float(upto))
    return core.view(job, now=float(upto))


def test_a_metric_whose_name_says_nothing_is_not_judged_without_the_policys_direction() -> None:
    core = AdvisorCore(policies=[_policy(None)], forecast_interval_s=0)
    view = _run(core, 1800)
    assert view.learning_state is not None and view.learning_state.metric is None
    assert core.record("ns/a").history.evals.names == ()  # type: ignore[union-attr]


def test_the_policys_direction_makes_it_judged_from_the_next_evaluation() -> None:
    core = AdvisorCore(policies=[_policy({"eval_myscore": "higher"})], forecast_interval_s=0)
    view = _run(core, 1800)
    state = view.learning_state
    assert state is not None and state.metric == "eval_myscore"
    assert state.label == "overfitting" and state.best_step == MINIMUM
    series = core.record("ns/a").history.evals.series("eval_myscore")  # type: ignore[union-attr]
    # watched but not kept before the first look that knew the policy (step 500)
    assert series is not None and series.direction is Direction.HIGHER and series.steps[0] == 600


def test_a_direction_that_turns_a_tracked_series_rereads_its_best_at_once() -> None:
    ev = EvalHistory()
    for step, value in ((100, 0.5), (200, 0.7), (300, 0.6)):
        ev.add(ProgressSample(step=step, loss=1.0, metrics={"eval_custom_loss": value}))
    series = ev.series("eval_custom_loss")
    assert series is not None and series.direction is Direction.LOWER and series.best_index() == 0
    assert ev.set_overrides({"eval_custom_loss": "higher"}) is True
    assert series.direction is Direction.HIGHER and series.best_index() == 1
    assert ev.set_overrides({"eval_custom_loss": "higher"}) is False  # nothing changed
    assert ev.set_overrides({"validation_custom_loss": "higher"}) is False  # the same name, canonical


@pytest.mark.parametrize("bad", ["up", "''", "1", "[higher]"])
def test_a_direction_other_than_lower_or_higher_is_refused(bad: str) -> None:
    from policies.errors import PolicyError

    with pytest.raises(PolicyError, match="metricDirections"):
        _policy({"eval_myscore": bad})


def test_eval_forecasts_are_made_again_only_when_an_eval_series_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import advisor.forecast.state as state

    calls: list[str] = []
    real = state.forecast_series

    def counting(*args: object, **kw: object) -> object:
        calls.append("eval")
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(state, "forecast_series", counting)
    core = AdvisorCore(forecast_interval_s=0)
    job = JobView(namespace="ns", name="a")
    for s in range(10, 1010, 10):
        score = {"eval_loss": 1.0 / (1 + s / 500)} if s % 200 == 0 else {}
        core.observe(
            "ns/a",
            ProgressSample(step=s, loss=2.0 / (1 + s / 300), total_steps=TOTAL, time=float(s), metrics=score),
            now=float(s),
        )
    core.evaluate(job, ClusterView(), now=1000.0)
    made = len(calls)
    assert made >= 1
    for s in range(1010, 1190, 10):  # training reports only: the eval series is unchanged
        core.observe(
            "ns/a",
            ProgressSample(step=s, loss=2.0 / (1 + s / 300), total_steps=TOTAL, time=float(s)),
            now=float(s),
        )
        core.evaluate(job, ClusterView(), now=float(s))
    assert core.forecasts_made > 1 and len(calls) == made
    core.observe(
        "ns/a",
        ProgressSample(step=1200, loss=0.4, total_steps=TOTAL, time=1200.0, metrics={"eval_loss": 0.29}),
        now=1200.0,
    )
    core.evaluate(job, ClusterView(), now=1200.0)
    assert len(calls) == made + 1  # a new evaluation: forecast again
