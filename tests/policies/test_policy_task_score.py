"""A run judged by its eval loss for want of a metric of its own is not released while the task's
score it reports beside it still improves (``LearningState.task_metric``)."""

from __future__ import annotations

import dataclasses

from policy_builders import T0, cluster, eval_state, forecast, job, policy

from advisor.model import ActionKind, EvalJudgement, Forecast, LearningState
from policies import decide

OVERFITTING = policy({"plateau": {"enabled": False}, "overfitting": {"for": "0s", "action": "Release"}})
PLATEAU = policy({"plateau": {"for": "0s", "action": "Release"}, "quotaRelease": {"checkpointFirst": False}})


def _fc(plateau: float, last_step: int = 8100) -> Forecast:
    return dataclasses.replace(forecast(plateau=plateau, loss=0.7, final=0.7), last_step=float(last_step))


def _state(cer_plateau: float, *, loss_plateau: float = 0.99, overfitting: float = 0.95) -> LearningState:
    """eval_loss past its best at step 5,500 (P(overfitting) 0.95 by it alone), eval_cer beside it."""
    base = eval_state(
        {"eval_loss": _fc(loss_plateau), "eval_cer": _fc(cer_plateau)},
        overfitting=overfitting,
        plateaued=0.0,
        best_step=5500,
        best_value=0.6025,
        evals_since_best=5,
    )
    own = EvalJudgement(best_step=5500, best_value=0.6025, evals_since_best=5, overfitting=overfitting)
    return dataclasses.replace(base, task_metric="eval_cer", judgements={"eval_loss": own})


def _released(rule_policy: object, state: LearningState, *, opened: bool = True) -> object:
    """The decision on a run whose windows opened an hour ago, on the evaluation before the last
    (``opened``), else on a run with none open."""
    windows = {
        "overfitting.since": T0 - 3600,
        "overfitting.openedOn": 8000.0,
        "plateau.since": T0 - 3600,
        "plateau.openedOn": 8000.0,
    }
    rules = windows if opened else {}
    return decide(job(learning_state=state, rule_state=rules), cluster(), rule_policy, now=T0)  # type: ignore[arg-type]


def test_the_overfitting_rule_holds_while_the_task_score_still_improves() -> None:
    held = _released(OVERFITTING, _state(cer_plateau=0.10), opened=False)
    assert not any(a.kind is ActionKind.RELEASE_QUOTA for a in held.actions)  # type: ignore[attr-defined]
    assert any("eval_cer still improves (P(plateau)=0.10)" in r for r in held.reasons)  # type: ignore[attr-defined]
    # the score stopped too: the run overfits, and is released naming its best step
    gone = _released(OVERFITTING, _state(cer_plateau=0.99))
    (release,) = [a for a in gone.actions if a.kind is ActionKind.RELEASE_QUOTA]  # type: ignore[attr-defined]
    assert "keep the checkpoint of step 5500" in release.reason


def test_a_rule_that_names_its_metric_judges_that_one_alone() -> None:
    named = policy(
        {
            "plateau": {"enabled": False},
            "overfitting": {"for": "0s", "action": "Release", "metric": "eval_loss"},
        }
    )
    d = _released(named, _state(cer_plateau=0.10))
    assert any(a.kind is ActionKind.RELEASE_QUOTA for a in d.actions)  # type: ignore[attr-defined]


def test_the_plateau_rule_holds_while_the_task_score_still_improves() -> None:
    flat = dict(loss_plateau=0.99, overfitting=0.0)
    held = _released(PLATEAU, _state(cer_plateau=0.10, **flat), opened=False)
    assert not any(a.kind is ActionKind.RELEASE_QUOTA for a in held.actions)  # type: ignore[attr-defined]
    assert any("eval_cer still improves" in r for r in held.reasons)  # type: ignore[attr-defined]
    gone = _released(PLATEAU, _state(cer_plateau=0.99, **flat))
    assert any(a.kind is ActionKind.RELEASE_QUOTA for a in gone.actions)  # type: ignore[attr-defined]
    # a window open when the score turns up again: the dissent quotes the score's odds
    dissent = _released(PLATEAU, _state(cer_plateau=0.10, **flat))
    assert any(r.startswith("plateau: P(plateau)=0.10: one forecast disagrees") for r in dissent.reasons)  # type: ignore[attr-defined]


def _score_best(cer_best: int, since: int) -> LearningState:
    """The state of ``_state`` whose task score stopped too (P(plateau) 0.99) with its own best at
    step ``cer_best``, ``since`` evaluations ago."""
    state = _state(cer_plateau=0.99)
    cer = EvalJudgement(best_step=cer_best, best_value=0.081, evals_since_best=since, overfitting=0.0)
    return dataclasses.replace(state, judgements={**state.judgements, "eval_cer": cer})


def test_a_release_past_the_eval_loss_best_saves_first_when_the_task_score_is_at_its_best_now() -> None:
    """A platform trial's run: its eval loss best at step 3,070 and rising, its accuracy at its best
    at the latest evaluation. The release went out with no save, telling the user to keep step
    3,070: the weights the task's score rated best were lost with the quota."""
    for rule_policy, saves in ((OVERFITTING, True), (PLATEAU, False)):
        d = _released(rule_policy, _score_best(8000, 0))
        kinds = [a.kind for a in d.actions]  # type: ignore[attr-defined]
        # a save first (the release waits on it), as the policy saves before any release: the
        # plateau sample here says checkpointFirst: false, and is obeyed
        assert (ActionKind.CHECKPOINT in kinds) is saves, (rule_policy, kinds)
        text = " ".join(a.reason for a in d.actions)  # type: ignore[attr-defined]
        assert "keep the checkpoint of step 5500 (the best eval_loss) or one of the weights now" in text
        assert "the best eval_cer, 0.081 at step 8000" in text
        assert "no checkpoint taken" not in text


def test_a_release_past_both_bests_names_both_and_saves_nothing() -> None:
    d = _released(OVERFITTING, _score_best(6500, 3))
    assert ActionKind.CHECKPOINT not in [a.kind for a in d.actions]  # type: ignore[attr-defined]
    (release,) = [a for a in d.actions if a.kind is ActionKind.RELEASE_QUOTA]  # type: ignore[attr-defined]
    both = "keep the checkpoint of step 5500 (the best eval_loss) or of step 6500 (the best eval_cer"
    assert both in release.reason
    assert "no checkpoint taken (its weights are past both)" in release.reason
    # a score whose best came no later than the loss's: the loss's best alone, no save
    d = _released(OVERFITTING, _score_best(5000, 6))
    (release,) = [a for a in d.actions if a.kind is ActionKind.RELEASE_QUOTA]  # type: ignore[attr-defined]
    assert "keep the checkpoint of step 5500 (the best evaluation" in release.reason
