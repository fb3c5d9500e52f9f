"""A rule judging an eval series acts only on an evaluation after the one its window opened on.

Between two evaluations the eval series brings no new evidence, however often the controller
re-forecasts the run: a wall-time window alone could open and pass on one evaluation."""

from __future__ import annotations

import dataclasses

from policy_builders import HOUR, T0, cluster, eval_state, forecast, job, policy

from advisor.model import ActionKind, Forecast, LearningState
from policies import decide
from policies.rules.overfitting import OPENED_ON_KEY as OVERFITTING_OPENED_ON
from policies.rules.plateau import OPENED_ON_KEY as PLATEAU_OPENED_ON


def eval_forecast(last_step: int, *, plateau: float = 0.97) -> Forecast:
    return dataclasses.replace(forecast(plateau=plateau, loss=0.6, final=0.6), last_step=float(last_step))


def learning(eval_fc: Forecast, *, p_overfit: float = 0.05) -> LearningState:
    return eval_state(
        {"eval_loss": eval_fc},
        overfitting=p_overfit,
        plateaued=1.0 - p_overfit,
        best_step=800,
        best_value=0.55,
        evals_since_best=3,
    )


PLATEAU = policy({"plateau": {"for": "10m", "action": "Release"}, "quotaRelease": {"checkpointFirst": False}})
OVERFITTING = policy(
    {"plateau": {"enabled": False}, "overfitting": {"for": "10m", "action": "Release"}},
)


def released(d: object) -> bool:
    return any(a.kind is ActionKind.RELEASE_QUOTA for a in d.actions)  # type: ignore[attr-defined]


def test_a_plateau_window_past_its_length_on_the_same_evaluation_waits_for_the_next() -> None:
    opened = decide(job(learning_state=learning(eval_forecast(1000))), cluster(), PLATEAU, now=T0)
    assert opened.state["plateau.since"] == T0 and opened.state[PLATEAU_OPENED_ON] == 1000.0

    same = job(learning_state=learning(eval_forecast(1000)), rule_state=dict(opened.state))
    held = decide(same, cluster(), PLATEAU, now=T0 + HOUR)
    assert not released(held) and held.advice == "plateau?"
    assert any("acting at the next evaluation of eval_loss" in r for r in held.reasons)
    assert held.state[PLATEAU_OPENED_ON] == 1000.0 and held.state["plateau.since"] == T0

    later = job(learning_state=learning(eval_forecast(1100)), rule_state=dict(held.state))
    assert released(decide(later, cluster(), PLATEAU, now=T0 + HOUR + 60))


def test_a_new_evaluation_inside_the_window_still_waits_for_the_window() -> None:
    """The evaluation rule adds to the ``for`` window; it does not replace it."""
    state = {"plateau.since": T0, PLATEAU_OPENED_ON: 1000.0}
    d = decide(
        job(learning_state=learning(eval_forecast(1100)), rule_state=state), cluster(), PLATEAU, now=T0 + 60
    )
    assert not released(d) and any(r.endswith("(acting after 10m)") for r in d.reasons)


def test_an_open_window_says_it_also_waits_for_a_later_evaluation() -> None:
    """Inside the window on the evaluation it opened on, the reason names both conditions: the
    window's end alone would not act."""
    d = decide(job(learning_state=learning(eval_forecast(1000))), cluster(), PLATEAU, now=T0)
    assert any("(acting after 10m, at an evaluation of eval_loss after step 1000)" in r for r in d.reasons)
    d = decide(
        job(learning_state=learning(eval_forecast(1000), p_overfit=0.95)), cluster(), OVERFITTING, now=T0
    )
    assert any("(acting after 10m, at an evaluation of eval_loss after step 1000)" in r for r in d.reasons)


def test_a_window_open_without_the_evaluation_it_opened_on_waits_for_the_next_one() -> None:
    """State written before the key existed: one evaluation more, not less evidence than now."""
    old = job(learning_state=learning(eval_forecast(1000)), rule_state={"plateau.since": T0 - HOUR})
    d = decide(old, cluster(), PLATEAU, now=T0)
    assert not released(d) and d.state[PLATEAU_OPENED_ON] == 1000.0


def test_the_training_loss_is_judged_by_the_window_alone() -> None:
    """Every report is a new point of the training loss: no evaluation to wait for, no key kept."""
    on_loss = policy(
        {
            "plateau": {"for": "10m", "action": "Release", "metric": "loss"},
            "quotaRelease": {"checkpointFirst": False},
        }
    )
    flat = forecast(plateau=0.97, loss=1.0, final=1.0)
    d = decide(job(forecast=flat, rule_state={"plateau.since": T0 - HOUR}), cluster(), on_loss, now=T0)
    assert released(d) and PLATEAU_OPENED_ON not in d.state


def test_a_dissenting_forecast_keeps_the_evaluation_the_window_opened_on() -> None:
    state = {"plateau.since": T0 - HOUR, PLATEAU_OPENED_ON: 1000.0}
    dip = decide(
        job(learning_state=learning(eval_forecast(1100, plateau=0.3)), rule_state=state),
        cluster(),
        PLATEAU,
        now=T0,
    )
    assert not released(dip) and dip.state[PLATEAU_OPENED_ON] == 1000.0
    back = job(learning_state=learning(eval_forecast(1200)), rule_state=dict(dip.state))
    assert released(decide(back, cluster(), PLATEAU, now=T0 + 60))


def test_an_overfitting_window_acts_on_the_evaluation_after_the_one_it_opened_on() -> None:
    view = {"forecast": forecast(plateau=0.05)}
    opened = decide(
        job(learning_state=learning(eval_forecast(1000), p_overfit=0.95), **view),
        cluster(),
        OVERFITTING,
        now=T0,
    )
    assert opened.state[OVERFITTING_OPENED_ON] == 1000.0
    same = job(
        learning_state=learning(eval_forecast(1000), p_overfit=0.95), rule_state=dict(opened.state), **view
    )
    held = decide(same, cluster(), OVERFITTING, now=T0 + HOUR)
    assert not released(held) and held.advice == "overfitting?"
    assert any("acting at the next evaluation of eval_loss" in r for r in held.reasons)
    later = job(
        learning_state=learning(eval_forecast(1100), p_overfit=0.95), rule_state=dict(held.state), **view
    )
    d = decide(later, cluster(), OVERFITTING, now=T0 + HOUR + 60)
    assert released(d) and any("keep the checkpoint of step 800" in a.reason for a in d.actions)


def test_a_closed_window_forgets_the_evaluation_it_opened_on() -> None:
    state = {"plateau.since": T0 - HOUR, PLATEAU_OPENED_ON: 1000.0}
    learning_again = job(learning_state=learning(eval_forecast(1100, plateau=0.05)), rule_state=state)
    d = decide(learning_again, cluster(), PLATEAU, now=T0)
    # one dissent is tolerated; a second forecast at or below even odds closes the window
    d2 = decide(
        job(learning_state=learning(eval_forecast(1200, plateau=0.05)), rule_state=dict(d.state)),
        cluster(),
        PLATEAU,
        now=T0 + 60,
    )
    assert "plateau.since" not in d2.state and PLATEAU_OPENED_ON not in d2.state


def test_a_series_without_its_last_step_is_judged_by_the_window_alone() -> None:
    """A status pasted from an older controller: its points cannot be compared with the step an
    opened-on evaluation is kept as, so nothing is gated and nothing is kept."""
    no_step = dataclasses.replace(eval_forecast(1000), last_step=None)
    state = {"plateau.since": T0 - HOUR, PLATEAU_OPENED_ON: 1000.0}
    d = decide(job(learning_state=learning(no_step), rule_state=state), cluster(), PLATEAU, now=T0)
    assert released(d) and PLATEAU_OPENED_ON not in d.state


def test_a_run_past_its_best_is_the_overfitting_rules_and_never_saved_past_its_best() -> None:
    """A platform trial: the plateau rule, judging the same eval loss (whose rise counts as "no
    improvement left"), opened its window first, saved the weights at step 2,000, six evaluations
    past the best at 800, and released without naming the checkpoint to keep."""
    both = policy(
        {
            "plateau": {"for": "1m", "action": "Release"},
            "overfitting": {"for": "1m", "action": "Release"},
            "quotaRelease": {"checkpointFirst": True},
        }
    )
    state: dict[str, float] = {}
    actions: list[tuple[str, str]] = []
    for i, step in enumerate(range(1000, 2100, 100)):
        now = T0 + 60.0 * i
        # read as flat at first (the plateau window opens), then as past its best
        p_overfit = 0.3 if i < 1 else 0.95
        j = job(learning_state=learning(eval_forecast(step), p_overfit=p_overfit), rule_state=dict(state))
        d = decide(j, cluster(), both, now=now)
        state = dict(d.state)
        actions += [(a.kind.value, a.rule) for a in d.actions]
        if released(d):
            assert "keep the checkpoint of step 800" in d.actions[0].reason
            break
    assert ("checkpoint", "plateau") not in actions and actions[-1] == ("release-quota", "overfitting")
    # a policy without an overfitting rule: the plateau rule releases it as that rule would
    only = policy({"plateau": {"for": "1m", "action": "Release"}, "quotaRelease": {"checkpointFirst": True}})
    state, kinds = {}, []
    for i, step in enumerate(range(1000, 2100, 100)):
        j = job(learning_state=learning(eval_forecast(step), p_overfit=0.95), rule_state=dict(state))
        d = decide(j, cluster(), only, now=T0 + 60.0 * i)
        state = dict(d.state)
        kinds += [a.kind for a in d.actions]
        if released(d):
            assert "keep the checkpoint of step 800" in d.actions[0].reason
            assert "no checkpoint taken (its weights are past the best evaluation)" in d.actions[0].reason
            break
    assert kinds and ActionKind.CHECKPOINT not in kinds and kinds[-1] is ActionKind.RELEASE_QUOTA
    # a flat eval, not past its best by the state's reading, is saved first as before
    flat = job(learning_state=learning(eval_forecast(1000), p_overfit=0.05))
    assert _past_best_reads(flat) is None


def _past_best_reads(j: object) -> float | None:
    from policies.rules.plateau import _past_best

    return _past_best(j.learning_state, "", "eval_loss")  # type: ignore[attr-defined]


def test_a_best_evaluation_reported_late_is_named_by_the_steps_it_was_made_between() -> None:
    """A platform trial: evaluations ran at steps 500, 1000, ... and reached the controller with
    the next report (518, 1029, ..., 3071). Every reason said "keep the checkpoint of step 3071";
    the trainer had saved checkpoint-3000. The job reports no eval step: the reason names the steps
    the evaluation was made between, the report before it and the one that carried it."""
    late = dataclasses.replace(learning(eval_forecast(1100), p_overfit=0.95), best_made_after=740)
    view = {"forecast": forecast(plateau=0.05)}
    state = {"overfitting.since": T0 - HOUR, OVERFITTING_OPENED_ON: 1000.0}
    d = decide(job(learning_state=late, rule_state=state, **view), cluster(), OVERFITTING, now=T0)
    (act,) = [a for a in d.actions if a.kind is ActionKind.RELEASE_QUOTA]
    assert "keep the checkpoint saved between steps 741 and 800 (the best evaluation" in act.reason
    assert "best eval_loss 0.55 between steps 741 and 800 (3 evaluation(s) ago)" in act.reason
