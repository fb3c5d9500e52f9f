"""The overfitting rule and the rules' ``metric:``: which series a rule judges, and what it says."""

from __future__ import annotations

import dataclasses

import pytest
from policy_builders import HOUR, T0, cluster, eval_state, forecast, job, policy

from advisor.model import ActionKind, EvalJudgement, Forecast, LearningState
from policies import decide
from policies.loader import load_policy

EVAL_FC = forecast(plateau=0.97, loss=0.6, final=0.6)
#: windows open for an hour, opened on an evaluation before the one the forecasts saw last
OPEN_OVERFITTING = {"overfitting.since": T0 - HOUR, "overfitting.openedOn": 0.0}
OPEN_PLATEAU = {"plateau.since": T0 - HOUR, "plateau.openedOn": 0.0}


def state(p_overfit: float = 0.95, *, metric: str | None = "eval_loss") -> LearningState:
    return eval_state({"eval_loss": EVAL_FC} if metric else {}, overfitting=p_overfit, metric=metric)


def with_secondary(
    name: str, fc: Forecast, judgement: EvalJudgement | None = None, *, loss_judged: bool = True
) -> LearningState:
    """A run judged by its eval loss (learning, best at its last evaluation, step 2000; with a
    judgement of its own unless ``loss_judged`` is False) that also reports ``name``, forecast
    ``fc`` and judged ``judgement`` (none: not judged yet)."""
    loss = EvalJudgement(best_step=2000, best_value=0.41, evals_since_best=0, overfitting=0.02)
    judgements = {"eval_loss": loss} if loss_judged else {}
    return LearningState(
        label="learning",
        probabilities=state(0.02).probabilities,
        metric="eval_loss",
        best_step=2000,
        best_value=0.41,
        evals_since_best=0,
        series={"eval_loss": EVAL_FC, name: fc},
        judgements={**judgements, name: judgement} if judgement is not None else {},
    )


def test_recommendation_names_the_best_eval_step() -> None:
    pol = policy({"overfitting": {"for": "10m"}}, mode="Recommend")
    view = job(forecast=forecast(plateau=0.05), learning_state=state(), rule_state=OPEN_OVERFITTING)
    d = decide(view, cluster(), pol, now=T0)
    (action,) = [a for a in d.actions if a.rule == "overfitting"]
    assert action.kind is ActionKind.RECOMMEND
    assert "step 1200" in action.reason and "eval_loss" in action.reason
    assert d.advice == "overfitting"


def test_the_window_must_hold_before_acting() -> None:
    pol = policy({"overfitting": {"for": "30m", "action": "Release"}})
    view = job(forecast=forecast(plateau=0.05), learning_state=state())
    d = decide(view, cluster(), pol, now=T0)
    assert not [a for a in d.actions if a.rule == "overfitting"]
    assert d.state["overfitting.since"] == T0 and d.recheck_at == T0 + 1800


def test_no_eval_metric_no_verdict() -> None:
    pol = policy({"overfitting": {"for": "0s"}})
    view = job(forecast=forecast(plateau=0.05), learning_state=state(0.0, metric=None))
    d = decide(view, cluster(), pol, now=T0)
    assert not d.actions
    assert any("overfitting: no judgement" in r for r in d.reasons)


def test_release_in_apply_mode_keeps_the_best_step_in_the_reason() -> None:
    pol = policy(
        {"overfitting": {"for": "0s", "action": "Release"}, "quotaRelease": {"checkpointFirst": False}}
    )
    view = job(forecast=forecast(plateau=0.05), learning_state=state(), rule_state=OPEN_OVERFITTING)
    d = decide(view, cluster(), pol, now=T0)
    kinds = {a.kind for a in d.actions}
    assert ActionKind.RELEASE_QUOTA in kinds or ActionKind.CHECKPOINT in kinds
    assert any("step 1200" in a.reason for a in d.actions)


def test_plateau_rule_judges_the_primary_eval_metric_by_default_and_the_named_series_otherwise() -> None:
    view = job(forecast=forecast(plateau=0.05), learning_state=state(), rule_state=OPEN_PLATEAU)
    by_default = decide(view, cluster(), policy({"plateau": {"for": "10m"}}, mode="Recommend"), now=T0)
    assert any(a.rule == "plateau" and "eval_loss" in a.reason for a in by_default.actions)
    on_loss = decide(
        view, cluster(), policy({"plateau": {"for": "10m", "metric": "loss"}}, mode="Recommend"), now=T0
    )
    assert not [a for a in on_loss.actions if a.rule == "plateau"]
    missing = decide(
        view, cluster(), policy({"plateau": {"for": "10m", "metric": "eval_bleu"}}, mode="Recommend"), now=T0
    )
    assert any("no forecast of eval_bleu" in r for r in missing.reasons)


def test_policies_without_the_new_fields_still_load() -> None:
    doc = {
        "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
        "kind": "AdvisorPolicy",
        "metadata": {"name": "old"},
        "spec": {"rules": {"plateau": {"probability": 0.8, "for": "10m"}}},
    }
    pol = load_policy(doc)
    assert pol.rules.plateau is not None and pol.rules.plateau.metric == "" and pol.rules.overfitting is None


def test_an_eval_loss_climbing_past_its_best_while_training_is_flat_is_a_plateau() -> None:
    """Neither overfitting (the training loss no longer falls) nor a divergence: the eval metric has
    no improvement left, and a rising forecast of an eval series is the finding, not a bad fit."""
    rising = forecast(plateau=0.99, diverge=0.7, loss=0.94, final=1.03)
    plateaued = eval_state(
        {"eval_loss": rising},
        plateaued=0.9,
        overfitting=0.08,
        best_step=1000,
        best_value=0.92,
        evals_since_best=5,
    )
    flat_train = forecast(plateau=0.99, loss=0.3, final=0.3)
    view = job(forecast=flat_train, learning_state=plateaued, rule_state=OPEN_PLATEAU)
    d = decide(view, cluster(), policy({"plateau": {"for": "10m"}}, mode="Recommend"), now=T0)
    (action,) = [a for a in d.actions if a.rule == "plateau"]
    assert "eval_loss 0.94 → 1.03" in action.reason and "at step 1000" in action.reason
    # the same rising prediction of the training loss is a fit not following the curve: no plateau
    on_loss = job(forecast=rising, rule_state=OPEN_PLATEAU)
    d = decide(
        on_loss, cluster(), policy({"plateau": {"for": "10m", "metric": "loss"}}, mode="Recommend"), now=T0
    )
    assert not [a for a in d.actions if a.rule == "plateau"]
    assert any("not taken as a plateau" in r for r in d.reasons)


def test_a_rule_metric_whose_name_says_no_direction_says_why_it_never_judges() -> None:
    """``metric: eval_myscore``: the job's history keeps no undirected series, so no verdict ever
    comes; the reasons say so and name the fix, until ``metricDirections`` gives the direction."""
    view = job(forecast=forecast(plateau=0.05), learning_state=state())
    for rules in (
        {"overfitting": {"for": "0s", "metric": "eval_myscore"}},
        {"plateau": {"metric": "eval_myscore"}},
    ):
        d = decide(view, cluster(), policy(rules), now=T0)
        assert not d.actions
        assert any("eval_myscore is never judged" in r and "metricDirections" in r for r in d.reasons), (
            d.reasons
        )
    directed = load_policy(
        {
            "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
            "kind": "AdvisorPolicy",
            "metadata": {"name": "p"},
            "spec": {
                "rules": {"overfitting": {"for": "0s", "metric": "eval_myscore"}},
                "metricDirections": {"eval_myscore": "higher"},
            },
        }
    )
    d = decide(view, cluster(), directed, now=T0)
    assert not any("never judged" in r for r in d.reasons)


def test_a_rule_naming_a_secondary_eval_metric_judges_it_with_its_own_best_step() -> None:
    """The state judges eval_loss (learning); the rule names eval_accuracy, past its best at step
    800: the rule acts on P(overfitting) by eval_accuracy and names its best step, not eval_loss's."""
    judged = with_secondary(
        "eval_accuracy",
        forecast(plateau=0.95, loss=0.81, final=0.8),
        EvalJudgement(best_step=800, best_value=0.83, evals_since_best=12, overfitting=0.93),
    )
    view = job(forecast=forecast(plateau=0.05), learning_state=judged, rule_state=OPEN_OVERFITTING)
    on_acc = decide(
        view,
        cluster(),
        policy({"overfitting": {"for": "10m", "metric": "eval_accuracy"}}, mode="Recommend"),
        now=T0,
    )
    (action,) = [a for a in on_acc.actions if a.rule == "overfitting"]
    assert (
        "best eval_accuracy 0.83 at step 800" in action.reason and "checkpoint of step 800" in action.reason
    )
    assert action.params["best_step"] == 800
    by_default = decide(view, cluster(), policy({"overfitting": {"for": "10m"}}, mode="Recommend"), now=T0)
    assert not [a for a in by_default.actions if a.rule == "overfitting"]
    missing = decide(view, cluster(), policy({"overfitting": {"for": "10m", "metric": "eval_f1"}}), now=T0)
    assert any("no forecast of eval_f1" in r for r in missing.reasons)


@pytest.mark.parametrize("written", ["eval_rougeL", "eval/rougeL", "val_rougeL", "Eval_RougeL"])
def test_a_rule_naming_a_metric_as_the_trainer_logs_it_judges_that_series(written: str) -> None:
    """HF logs ``eval_rougeL``; the history keeps it as ``eval_rouge_l``, the one spelling of each
    series. A rule that names it as the trainer logs it judges it: looked up as written, it had
    said "no forecast of eval_rougeL" at every look, and ``policy validate`` had said OK."""
    judged = with_secondary(
        "eval_rouge_l",
        forecast(plateau=0.95, loss=0.31, final=0.3),
        EvalJudgement(best_step=700, best_value=0.33, evals_since_best=9, overfitting=0.93),
    )
    view = job(forecast=forecast(plateau=0.05), learning_state=judged, rule_state=OPEN_OVERFITTING)
    rule = policy({"overfitting": {"for": "10m", "metric": written}}, mode="Recommend")
    assert rule.rules.overfitting is not None and rule.rules.overfitting.metric == "eval_rouge_l"
    (action,) = [a for a in decide(view, cluster(), rule, now=T0).actions if a.rule == "overfitting"]
    assert "best eval_rouge_l 0.33 at step 700" in action.reason and action.params["best_step"] == 700


def test_a_continue_reads_the_odds_of_the_series_the_plateau_rule_names() -> None:
    """A rule judging eval_rouge_l whose condition does not hold says that series' P(plateau),
    not that of the eval loss the run state judges by default (which the rule never reads)."""
    judged = dataclasses.replace(
        with_secondary("eval_rouge_l", forecast(plateau=0.33, loss=0.31)),
        series={
            "eval_loss": forecast(plateau=0.2, loss=0.6),
            "eval_rouge_l": forecast(plateau=0.33, loss=0.31),
        },
    )
    view = job(forecast=forecast(plateau=0.05), learning_state=judged)
    named = decide(view, cluster(), policy({"plateau": {"for": "10m", "metric": "eval_rougeL"}}), now=T0)
    assert any("eval_rouge_l P(plateau) 0.33" in r for r in named.reasons), named.reasons
    default = decide(view, cluster(), policy({"plateau": {"for": "10m"}}), now=T0)
    assert any("eval_loss P(plateau) 0.20" in r for r in default.reasons), default.reasons


@pytest.mark.parametrize(("written", "series"), [("train_loss", "loss"), ("val_loss", "eval_loss")])
def test_a_plateau_rule_names_the_training_loss_or_eval_loss_by_any_of_their_names(
    written: str, series: str
) -> None:
    """``train_loss`` is the training loss and ``val_loss`` the eval loss, as the parsers read
    them: a plateau rule naming either judges that series, not a series of that name."""
    rule = policy({"plateau": {"for": "10m", "metric": written}})
    assert rule.rules.plateau is not None and rule.rules.plateau.metric == series


def test_a_series_judged_on_its_own_travels_through_the_status_and_back() -> None:
    """What the status writes of each series (``learning_state_dict``) is what ``policy explain``
    reads back from a pasted status: the rule naming the secondary metric judges it the same."""
    from advisor.controller.render import learning_state_dict
    from policies.jobstate_forecast import learning_state as _learning_state

    original = with_secondary(
        "eval_accuracy",
        forecast(plateau=0.95, loss=0.81, final=0.8),
        EvalJudgement(best_step=800, best_value=0.83, evals_since_best=12, overfitting=0.93),
        loss_judged=False,
    )
    data = learning_state_dict(original)
    assert data is not None and data["series"]["eval_accuracy"]["overfittingProbability"] == 0.93
    assert "overfittingProbability" not in data["series"]["eval_loss"]
    back = _learning_state(data, "job.learningState")
    assert back.judgements == original.judgements
    # and the scatter of the judged series' evaluations (``compare`` reads it from the status)
    noisy = dataclasses.replace(original, best_noise=0.004)
    assert learning_state_dict(noisy)["bestNoise"] == 0.004  # type: ignore[index]
    assert _learning_state(learning_state_dict(noisy), "job.learningState").best_noise == 0.004
    # and where a best evaluation reported late was made (the job reports no eval step)
    late = dataclasses.replace(
        original,
        best_made_after=740,
        judgements={
            "eval_accuracy": dataclasses.replace(original.judgements["eval_accuracy"], best_made_after=760)
        },
    )
    data = learning_state_dict(late)
    assert data is not None and data["bestMadeAfter"] == 740
    assert data["series"]["eval_accuracy"]["bestMadeAfter"] == 760
    back = _learning_state(data, "job.learningState")
    assert back.best_made_after == 740 and back.judgements == late.judgements
    assert "bestMadeAfter" not in learning_state_dict(original)  # type: ignore[operator]


def test_an_overfitting_release_takes_no_checkpoint_of_the_weights_past_the_best() -> None:
    """A save now would store weights past the best evaluation and may rotate out the checkpoint
    the reason tells the user to keep: the release goes without one, and says so."""
    pol = policy({"overfitting": {"for": "0s", "action": "Release"}})  # checkpointFirst by default
    view = job(forecast=forecast(plateau=0.05), learning_state=state(), rule_state=OPEN_OVERFITTING)
    d = decide(view, cluster(), pol, now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.RELEASE_QUOTA]
    assert "no checkpoint taken" in d.actions[0].reason and "step 1200" in d.actions[0].reason


def test_a_best_by_noise_is_released_with_a_save_and_not_by_the_plateau_rule() -> None:
    """A flat eval series whose latest evaluation is a new best by noise alone still overfits: the
    weights now are that best, so the release saves them first as the policy says, and the plateau
    rule leaves the run to the overfitting rule as it does one past its best (ADVICE read
    ``plateau?`` under STATE ``overfitting`` at each such best)."""
    at_best = eval_state({"eval_loss": EVAL_FC}, overfitting=0.95, best_step=2400, evals_since_best=0)
    pol = policy(
        {"overfitting": {"for": "0s", "action": "Release"}, "plateau": {"for": "0s", "probability": 0.7}}
    )
    view = job(forecast=forecast(plateau=0.05), learning_state=at_best, rule_state=OPEN_OVERFITTING)
    d = decide(view, cluster(), pol, now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.CHECKPOINT]
    assert d.actions[0].rule == "overfitting" and "step 2400" in d.actions[0].reason
    assert "the weights now" in d.actions[0].reason and "no checkpoint taken" not in d.actions[0].reason
    assert any("left to the overfitting rule" in r for r in d.reasons)


def test_a_release_of_a_job_without_a_kueue_workload_is_a_recommendation_not_a_save() -> None:
    import dataclasses

    from advisor.model import LifecycleSignals

    pol = policy({"plateau": {"probability": 0.9, "for": "0s", "action": "Release"}})
    view = job(forecast=forecast(plateau=0.99), signals=LifecycleSignals(has_workload=False))
    d = decide(view, cluster(), pol, now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.RECOMMEND]
    assert "the job has no Kueue Workload" in d.actions[0].reason
    with_one = dataclasses.replace(view, signals=LifecycleSignals(has_workload=True))
    assert ActionKind.CHECKPOINT in [a.kind for a in decide(with_one, cluster(), pol, now=T0).actions]


def test_a_plateau_release_of_a_run_the_state_calls_diverging_takes_no_checkpoint() -> None:
    """A flat training loss beside an eval loss gone NaN: the run state reads diverging, which
    the divergence rule (judging the finite training loss) does not act on, and the plateau rule
    releases it. Its weights may be non-finite and a save may rotate out the last good one: no
    checkpoint is asked for, and the reason says why; the same run with a finite eval is saved
    first."""
    pol = policy({"plateau": {"probability": 0.9, "for": "0s", "action": "Release"}})
    diverging = dataclasses.replace(
        state(0.0),
        label="diverging",
        probabilities={"learning": 0.1, "plateaued": 0.0, "overfitting": 0.0, "diverging": 0.9, "hung": 0.0},
        warnings=("the latest eval_loss is not finite",),
    )
    view = job(forecast=forecast(plateau=0.99), learning_state=diverging, rule_state=OPEN_PLATEAU)
    d = decide(view, cluster(), pol, now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.RELEASE_QUOTA]
    assert (
        "no checkpoint taken (the run state is diverging: the latest eval_loss is not finite)"
        in d.actions[0].reason
    )
    finite = job(forecast=forecast(plateau=0.99), learning_state=state(0.0), rule_state=OPEN_PLATEAU)
    assert ActionKind.CHECKPOINT in [a.kind for a in decide(finite, cluster(), pol, now=T0).actions]


def test_a_flat_eval_series_flickering_about_the_overfitting_level_is_still_released() -> None:
    """P(overfitting) about the overfitting rule's level (0.5), P(plateau) high throughout: the
    plateau rule leaves the run to the overfitting rule while that one is as sure as it asks, and
    keeps its own window meanwhile. Restarted at each such look, neither window lasted: the run was
    released by neither rule, although a stricter overfitting rule let the plateau rule release it."""
    from policy_builders import with_state

    pol = policy(
        {
            "plateau": {"probability": 0.9, "for": "20m", "action": "Release"},
            "overfitting": {"probability": 0.5, "for": "10m", "action": "Release"},
        }
    )
    base = job(forecast=forecast(plateau=0.05))
    rule_state: dict[str, float] = {}
    acted: list[tuple[float, str]] = []
    for i in range(12):  # a look every 5 minutes for an hour
        now = T0 + 300.0 * i
        p_overfit = 0.55 if i % 2 == 0 else 0.45
        view = with_state(
            dataclasses.replace(
                base, learning_state=eval_state({"eval_loss": EVAL_FC}, overfitting=p_overfit, plateaued=0.4)
            ),
            rule_state,
        )
        d = decide(view, cluster(), pol, now=now)
        rule_state = dict(d.state)
        acted += [(now - T0, a.rule) for a in d.actions if a.kind is not ActionKind.RECOMMEND]
        if acted:
            break
    assert acted, "neither rule released the run in an hour"
    assert acted[0][0] <= 25 * 60 and acted[0][1] == "plateau"
