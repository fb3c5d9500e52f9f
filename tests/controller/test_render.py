"""TrainJobForecast status rendering, run-state classification and the per-queue summary."""

from __future__ import annotations

import json

import pytest

from advisor.controller.render import classify, format_duration, render_status
from advisor.controller.summary import eta_cdf, summarize
from advisor.model import (
    Action,
    ActionKind,
    ActionRecord,
    Decision,
    Forecast,
    Interval,
    JobView,
    LearningState,
    Mode,
    Phase,
)

NOW = 1_800_000_000.0


def fc(
    plateau: float = 0.1,
    diverge: float = 0.0,
    eta: tuple[float, float, float] | None = (7200, 5400, 9000),
    loss: tuple[float, float, float] = (0.25, 0.22, 0.29),
) -> Forecast:
    return Forecast(
        final_loss=Interval(*loss),
        plateau_probability=plateau,
        divergence_probability=diverge,
        eta_seconds=Interval(*eta) if eta else None,
        steps_per_second=2.5,
        current_loss=0.31,
        model={"pow3": 0.7, "exp3": 0.3},
        warnings=("2 non-finite values dropped",),
        n_points=40,
    )


def view(**kw: object) -> JobView:
    base = dict(
        namespace="team-a",
        name="llm",
        step=450,
        total_steps=1000,
        gpus=16,
        cluster_queue="gpu-cq",
        last_step_change=NOW - 10,
        last_sample_time=NOW - 10,
        forecast=fc(),
    )
    base.update(kw)
    return JobView(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (-1, "-"),
        (float("nan"), "-"),
        (45, "45s"),
        (780, "13m"),
        (7500, "2h5m"),
        (7200, "2h"),
        (3 * 86400 + 4 * 3600, "3d4h"),
    ],
)
def test_durations(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


def test_classification() -> None:
    assert classify(view(), now=NOW) == "learning"
    assert classify(view(forecast=fc(plateau=0.9)), now=NOW) == "plateaued"
    assert classify(view(forecast=fc(diverge=0.8, plateau=0.9)), now=NOW) == "diverging"
    assert classify(view(step=950), now=NOW) == "near-completion"
    assert classify(view(forecast=fc(eta=(600, 400, 900))), now=NOW) == "near-completion"
    assert classify(view(last_step_change=NOW - 3600), now=NOW) == "hung"
    assert classify(view(last_step_change=NOW - 3600, active=False), now=NOW) != "hung"  # released, not hung
    assert classify(view(forecast=None), now=NOW) == "unknown"


def test_a_run_admitted_again_is_not_hung_until_it_stays_silent_that_long_after_admission() -> None:
    """A run resumed (or re-admitted after a preemption) has not advanced since its eviction: its
    silence counts from this admission, not from its last step before the release (it read "hung"
    from the second Kueue admitted it again, counted among the GPUs not learning)."""
    assert classify(view(last_step_change=NOW - 3600, admitted_at=NOW - 5), now=NOW) != "hung"
    assert classify(view(last_step_change=NOW - 3600, admitted_at=NOW - 1000), now=NOW) == "hung"


def test_the_state_never_contradicts_a_policy_that_calls_the_run_hung_or_diverging() -> None:
    """A stall rule with a shorter ``for`` than the learning state's hung window: STATE says hung
    with ADVICE, and the ETA forecast before the step stopped is not shown as if it held."""
    quiet = view(last_step_change=NOW - 400)
    assert classify(quiet, now=NOW) == "learning"
    hung = Decision(job="team-a/llm", advice="hung")
    assert classify(quiet, now=NOW, decision=hung) == "hung"
    assert classify(quiet, now=NOW, decision=Decision(job="team-a/llm", advice="stalled?")) == "learning"
    # a hung run whose release was refused is still hung (ADVICE hung:failed)
    assert classify(quiet, now=NOW, decision=Decision(job="team-a/llm", advice="hung:failed")) == "hung"
    status = render_status(quiet, hung, now=NOW)
    assert status["state"] == "hung" and status["summary"]["eta"] == "-"
    assert render_status(quiet, None, now=NOW)["summary"]["eta"] == "2h"
    released = view(phase=Phase.SUSPENDED, active=False)  # a job that does not run has no ETA
    assert render_status(released, None, now=NOW)["summary"]["eta"] == "-"
    from advisor.controller.metrics import Metrics

    m = Metrics()
    m.observe_job(quiet, state="learning")
    assert m.registry.get_sample_value(
        "trainjob_advisor_job_eta_seconds", {"namespace": "team-a", "kind": "TrainJob", "job": "llm"}
    )
    m.observe_job(quiet, state="hung")  # nor does the metric
    assert (
        m.registry.get_sample_value(
            "trainjob_advisor_job_eta_seconds", {"namespace": "team-a", "kind": "TrainJob", "job": "llm"}
        )
        is None
    )


def test_an_eval_judged_run_shows_its_eval_forecast_in_the_loss_and_plateau_columns() -> None:
    """Training loss still falling (P(plateau) 10%), eval loss past its minimum: the columns show
    the judged eval series, named, not the training loss."""
    rising = fc(plateau=0.97, loss=(0.92, 0.85, 0.99))
    state = LearningState(
        label="overfitting",
        probabilities={"learning": 0.03, "overfitting": 0.97},
        metric="eval_loss",
        best_step=300,
        best_value=0.55,
        series={"eval_loss": rising},
    )
    summary = render_status(view(learning_state=state), None, now=NOW)["summary"]
    assert summary["loss"] == "eval_loss 0.92±0.07" and summary["plateau"] == "97%"
    # no eval metric judged (too few evaluations): the training loss, unnamed, as before
    early = LearningState(label="learning", probabilities={"learning": 1.0}, series={"eval_loss": rising})
    summary = render_status(view(learning_state=early), None, now=NOW)["summary"]
    assert summary["loss"] == "0.25±0.035" and summary["plateau"] == "10%"


def test_status_has_every_field_and_the_printer_column_strings() -> None:
    decision = Decision(
        job="team-a/llm",
        policy="plateau-release",
        mode=Mode.RECOMMEND,
        actions=(Action(ActionKind.RELEASE_QUOTA, "plateau", "no 1% gain in 2h"),),
        reasons=("plateau held 2h",),
        advice="release quota",
    )
    rec = ActionRecord(
        ActionKind.RELEASE_QUOTA, NOW - 5, "rec-1", "plateau-release", "plateau", "recommended", "x"
    )
    status = render_status(
        view(actions=(rec,)),
        decision,
        now=NOW,
        forecast_at=NOW - 1,
        core_state=json.dumps({"history": {}}),
        pending_actions={"r": {"stage": "recorded"}},
    )
    assert status["progress"] == {"step": 450, "totalSteps": 1000, "percent": 45.0, "warnings": []}
    assert status["summary"] == {
        "progress": "45%",
        "eta": "2h",
        "loss": "0.25±0.035",
        "plateau": "10%",
        "advice": "release quota",
    }
    assert status["forecast"]["finalLoss"] == {"mean": 0.25, "p10": 0.22, "p90": 0.29}
    assert status["forecast"]["warnings"] == ["2 non-finite values dropped"]
    assert status["recommendation"]["actions"] == [
        {"kind": "release-quota", "rule": "plateau", "reason": "no 1% gain in 2h"}
    ]
    assert status["actions"][0]["requestId"] == "rec-1" and status["actions"][0]["outcome"] == "recommended"
    assert status["state"] == "learning" and status["job"]["gpus"] == 16
    assert json.loads(status["coreState"]) == {"history": {}}
    assert json.loads(status["pendingActions"]) == {"r": {"stage": "recorded"}}
    assert status["forecast"]["model"] == [{"name": "pow3", "weight": 0.7}, {"name": "exp3", "weight": 0.3}]
    json.dumps(status, allow_nan=False)  # must be valid JSON for the API server


def test_a_recommend_policys_advice_reads_as_a_recommendation_in_the_advice_column() -> None:
    """``overfitting:release`` from a Recommend policy invited "why was it not released?"."""
    acts = (Action(ActionKind.RECOMMEND, "overfitting", "would release quota"),)
    for mode, advice, shown in (
        (Mode.RECOMMEND, "overfitting:release", "overfitting:release (recommended)"),
        (Mode.APPLY, "overfitting:release", "overfitting:release"),
        (Mode.APPLY, "plateau:held", "plateau:held"),
        (Mode.RECOMMEND, "plateau?", "plateau?"),
    ):
        d = Decision(job="team-a/llm", policy="p", mode=mode, actions=acts, advice=advice)
        status = render_status(view(), d, now=NOW)
        assert status["summary"]["advice"] == shown and status["recommendation"]["advice"] == advice


def test_a_recommended_stall_or_divergence_release_reads_as_one_in_the_advice_column() -> None:
    """The stall and divergence rules' advice is the state alone: a Recommend policy's recommended
    release of a hung run read ``hung``, as an Apply policy's does just before it releases."""

    def shown(mode: Mode, advice: str, rule: str, would: str) -> str:
        acts = (Action(ActionKind.RECOMMEND, rule, "would release quota: stalled", {"would": would}),)
        d = Decision(job="team-a/llm", policy="p", mode=mode, actions=acts, advice=advice)
        status = render_status(view(), d, now=NOW)
        assert status["recommendation"]["advice"] == advice  # the decision's own word is kept
        return str(status["summary"]["advice"])

    assert shown(Mode.RECOMMEND, "hung", "stall", "release-quota") == "hung:release (recommended)"
    assert shown(Mode.RECOMMEND, "hung", "stall", "checkpoint") == "hung:release (recommended)"
    assert shown(Mode.RECOMMEND, "diverging", "divergence", "stop") == "diverging:stop (recommended)"
    # a rule whose own action is Recommend would do nothing in Apply either
    assert shown(Mode.RECOMMEND, "hung", "stall", "none") == "hung"
    assert shown(Mode.APPLY, "hung", "stall", "release-quota") == "hung"


def test_without_a_policy_advice_does_not_contradict_the_state() -> None:
    """A hung job no policy governs read ADVICE ``learning`` beside STATE ``hung`` (a platform
    trial, 150 rows after a policy was deleted): the state's hint, said as no policy's."""
    d = Decision(job="team-a/llm", reasons=("no AdvisorPolicy selects this job",), advice="learning")
    hung = render_status(view(last_step_change=NOW - 3600), d, now=NOW)
    assert hung["state"] == "hung" and hung["summary"]["advice"] == "hung? (no policy)"
    assert hung["recommendation"]["advice"] == "learning"  # the decision's own word is kept
    learning = render_status(view(), d, now=NOW)
    assert learning["state"] == "learning" and learning["summary"]["advice"] == "learning"
    # a policy's own word is never replaced
    governed = Decision(job="team-a/llm", policy="p", mode=Mode.APPLY, advice="learning")
    assert (
        render_status(view(last_step_change=NOW - 3600), governed, now=NOW)["summary"]["advice"] == "learning"
    )


def test_status_without_forecast_or_total_is_still_valid_json() -> None:
    status = render_status(view(forecast=None, total_steps=None, last_step_change=None), None, now=NOW)
    assert status["summary"] == {
        "progress": "-",
        "eta": "-",
        "loss": "-",
        "plateau": "-",
        "advice": "unknown",
    }
    json.dumps(status, allow_nan=False)


def test_the_plateau_column_is_blank_on_too_few_points_to_hold_a_trend() -> None:
    """On one or two points P(plateau) is the forecaster's "don't know" (0.5): PLATEAU read 50%."""
    import dataclasses

    two = dataclasses.replace(fc(plateau=0.5), n_points=2)
    assert render_status(view(forecast=two), None, now=NOW)["summary"]["plateau"] == "-"
    three = dataclasses.replace(fc(plateau=0.5), n_points=3)
    assert render_status(view(forecast=three), None, now=NOW)["summary"]["plateau"] == "50%"


def test_nan_forecast_values_become_null() -> None:
    status = render_status(view(forecast=fc(loss=(float("nan"), float("nan"), float("nan")))), None, now=NOW)
    assert status["forecast"]["finalLoss"] == {"mean": None, "p10": None, "p90": None}
    assert status["summary"]["loss"] == "-"
    json.dumps(status, allow_nan=False)


def test_eta_cdf_reads_the_interval_as_a_split_normal() -> None:
    eta = {"mean": 7200.0, "p10": 5400.0, "p90": 9000.0}
    assert eta_cdf(eta, 7200.0) == pytest.approx(0.5)
    assert eta_cdf(eta, 5400.0) == pytest.approx(0.1, abs=1e-6)
    assert eta_cdf(eta, 9000.0) == pytest.approx(0.9, abs=1e-6)
    assert eta_cdf(None, 1e9) == 0.0 and eta_cdf({"mean": None}, 10) == 0.0
    assert eta_cdf({"mean": 10.0, "p10": 10.0, "p90": 10.0}, 11.0) == 1.0


def test_summary_by_queue_counts_states_gpus_not_learning_and_capacity() -> None:
    def st(state: str, gpus: int, cq: str, eta: dict[str, float] | None = None, active: bool = True) -> dict:
        return {
            "state": state,
            "job": {"clusterQueue": cq, "gpus": gpus, "active": active},
            "forecast": {"etaSeconds": eta} if eta else None,
        }

    items = [
        ("a", st("learning", 8, "cq1", {"mean": 1800.0, "p10": 1200.0, "p90": 2400.0})),
        ("a", st("plateaued", 16, "cq1")),
        ("b", st("hung", 4, "cq1", {"mean": 600.0, "p10": 500.0, "p90": 700.0})),  # frees nothing by it
        ("b", st("diverging", 2, "cq2")),
        ("b", st("plateaued", 8, "cq2", active=False)),
    ]
    cq1, cq2 = summarize(items)
    assert (cq1.queue, cq1.jobs, cq1.gpus, cq1.gpus_not_learning) == ("cq1", 3, 28, 20)
    assert cq1.states["plateaued"] == 1 and cq1.states["hung"] == 1 and cq1.states["learning"] == 1
    assert cq1.gpus_freeing["1h"] == pytest.approx(
        8 * eta_cdf({"mean": 1800, "p10": 1200, "p90": 2400}, 3600)
    )
    assert cq1.gpus_freeing["24h"] >= cq1.gpus_freeing["1h"]
    assert (cq2.jobs, cq2.gpus, cq2.gpus_not_learning) == (2, 2, 2)  # the released run holds no GPU
    by_ns = summarize(items, by="namespace")
    assert [s.queue for s in by_ns] == ["a", "b"]
    with pytest.raises(ValueError, match="by must be"):
        summarize(items, by="flavor")


def test_metrics_carry_each_series_final_value_and_the_judged_series() -> None:
    """``predicted_final_value`` per series (training loss and each eval metric), the judged one
    marked, and P(plateau) of the judged series, as the columns show; a job's series go with it."""
    from advisor.controller.metrics import Metrics

    m = Metrics()
    rising = fc(plateau=0.97, loss=(0.92, 0.85, 0.99))
    state = LearningState(
        label="overfitting",
        probabilities={"overfitting": 1.0},
        metric="eval_loss",
        series={"eval_loss": rising, "eval_accuracy": fc(loss=(0.71, 0.7, 0.72))},
    )
    m.observe_job(view(learning_state=state))
    get = m.registry.get_sample_value
    job = {"namespace": "team-a", "kind": "TrainJob", "job": "llm"}
    assert get("trainjob_advisor_job_predicted_final_value", {**job, "series": "loss"}) == 0.25
    assert get("trainjob_advisor_job_predicted_final_value", {**job, "series": "eval_loss"}) == 0.92
    assert get("trainjob_advisor_job_predicted_final_value", {**job, "series": "eval_accuracy"}) == 0.71
    assert get("trainjob_advisor_job_judged_series_info", {**job, "series": "eval_loss"}) == 1
    assert get("trainjob_advisor_job_plateau_probability", job) == 0.97
    m.observe_job(view())  # the evals gone (a restarted run): their series go, the loss is judged
    assert get("trainjob_advisor_job_predicted_final_value", {**job, "series": "eval_loss"}) is None
    assert get("trainjob_advisor_job_judged_series_info", {**job, "series": "eval_loss"}) is None
    assert get("trainjob_advisor_job_judged_series_info", {**job, "series": "loss"}) == 1
    m.forget_job("team-a", "TrainJob", "llm")
    assert get("trainjob_advisor_job_predicted_final_value", {**job, "series": "loss"}) is None
    assert get("trainjob_advisor_job_judged_series_info", {**job, "series": "loss"}) is None


def test_a_trainjob_and_a_pytorchjob_of_one_name_have_series_of_their_own() -> None:
    """Named by namespace and name alone, the two jobs' series were one: each overwrote the
    other's, and forgetting either removed both."""
    from advisor.controller.metrics import Metrics

    m = Metrics()
    get = m.registry.get_sample_value
    m.observe_job(view(step=450))
    m.observe_job(view(kind="PyTorchJob", step=90))
    trainjob = {"namespace": "team-a", "kind": "TrainJob", "job": "llm"}
    pytorchjob = {**trainjob, "kind": "PyTorchJob"}
    assert (get("trainjob_advisor_job_step", trainjob), get("trainjob_advisor_job_step", pytorchjob)) == (
        450,
        90,
    )
    m.forget_job("team-a", "PyTorchJob", "llm")
    assert get("trainjob_advisor_job_step", pytorchjob) is None
    assert get("trainjob_advisor_job_step", trainjob) == 450
    assert get("trainjob_advisor_job_predicted_final_value", {**trainjob, "series": "loss"}) == 0.25


def test_no_usable_forecast_shows_no_plateau_percentage() -> None:
    """Only non-finite losses so far: the forecaster's 50% is "don't know", shown as ``-``."""
    from advisor.forecast import forecast

    empty = forecast([1, 2, 3, 4], [float("nan")] * 4, total_steps=100)
    assert empty.plateau_probability == 0.5  # what the column must not show as a finding
    summary = render_status(view(forecast=empty), None, now=NOW)["summary"]
    assert summary["plateau"] == "-" and summary["loss"] == "-"


def test_a_run_reported_done_that_still_holds_its_gpus_counts_as_not_learning_on_them() -> None:
    """A trainer at 100% whose Workload has not finished (a final save, an upload, a teardown that
    hangs) holds its GPUs and no longer learns on them; one whose Workload finished holds none."""
    lingering = {"state": "finished", "job": {"clusterQueue": "cq", "gpus": 16, "holdsQuota": True}}
    done = {"state": "finished", "job": {"clusterQueue": "cq", "gpus": 8, "holdsQuota": False}}
    learning = {"state": "learning", "job": {"clusterQueue": "cq", "gpus": 4, "holdsQuota": True}}
    (cq,) = summarize([("a", lingering), ("a", done), ("a", learning)])
    assert (cq.jobs, cq.gpus, cq.gpus_not_learning) == (3, 20, 16)


def test_a_job_that_stops_running_keeps_no_verdict_in_the_metrics() -> None:
    """Finished, released, suspended: its P(plateau) and state probabilities go (a dashboard panel
    or an alert on them kept firing for a job that holds no GPUs); its final values stay. A job
    that reports eval metrics alone gets its judged P(plateau) too."""
    from advisor.controller.metrics import Metrics

    m = Metrics()
    get = m.registry.get_sample_value
    job = {"namespace": "team-a", "kind": "TrainJob", "job": "llm"}
    state = LearningState(label="plateaued", probabilities={"plateaued": 0.9, "learning": 0.1})
    m.observe_job(view(learning_state=state))
    assert get("trainjob_advisor_job_plateau_probability", job) is not None
    assert get("trainjob_advisor_job_learning_state_probability", {**job, "state": "plateaued"}) == 0.9
    for phase in (Phase.FINISHED, Phase.SUSPENDED, Phase.PENDING):
        m.observe_job(view(learning_state=state, phase=phase))
        assert get("trainjob_advisor_job_plateau_probability", job) is None
        assert get("trainjob_advisor_job_divergence_probability", job) is None
        assert get("trainjob_advisor_job_learning_state_probability", {**job, "state": "plateaued"}) is None
        assert get("trainjob_advisor_job_predicted_final_value", {**job, "series": "loss"}) == 0.25
        m.observe_job(view(learning_state=state))
    evals = LearningState(
        label="learning",
        probabilities={"learning": 1.0},
        metric="eval_loss",
        series={"eval_loss": fc(plateau=0.3)},
    )
    m.observe_job(view(forecast=None, learning_state=evals))
    assert get("trainjob_advisor_job_plateau_probability", job) == 0.3


def test_a_judged_series_without_a_trend_yet_has_no_verdict_in_the_metrics() -> None:
    """Two evaluations so far: the PLATEAU column shows ``-`` (the forecaster's 0.5 is "don't
    know"), and /metrics served P(plateau) 0.5 and P(plateaued) 0.5 for every new job, which an
    alert on either fired on. They are absent until the series holds a trend; the final values and
    a diverging or hung state, which are findings, stay."""
    import dataclasses

    from advisor.controller.metrics import Metrics

    m = Metrics()
    get = m.registry.get_sample_value
    job = {"namespace": "team-a", "kind": "TrainJob", "job": "llm"}
    two = dataclasses.replace(fc(plateau=0.5, loss=(1.2, 0.9, 1.5)), n_points=2)
    unsure = LearningState(
        label="learning",
        probabilities={"learning": 0.5, "plateaued": 0.5},
        metric="eval_loss",
        series={"eval_loss": two},
    )
    m.observe_job(view(learning_state=unsure))
    assert render_status(view(learning_state=unsure), None, now=NOW)["summary"]["plateau"] == "-"
    assert get("trainjob_advisor_job_plateau_probability", job) is None
    assert get("trainjob_advisor_job_learning_state_probability", {**job, "state": "plateaued"}) is None
    assert get("trainjob_advisor_job_predicted_final_value", {**job, "series": "eval_loss"}) == 1.2
    hung = dataclasses.replace(unsure, label="hung", probabilities={"hung": 1.0})
    m.observe_job(view(learning_state=hung))
    assert get("trainjob_advisor_job_learning_state_probability", {**job, "state": "hung"}) == 1.0
    # the third evaluation: a trend, and its verdicts are served
    three = LearningState(
        label="plateaued",
        probabilities={"plateaued": 0.9, "learning": 0.1},
        metric="eval_loss",
        series={"eval_loss": dataclasses.replace(two, n_points=3, plateau_probability=0.9)},
    )
    m.observe_job(view(learning_state=three))
    assert get("trainjob_advisor_job_plateau_probability", job) == 0.9
    assert get("trainjob_advisor_job_learning_state_probability", {**job, "state": "plateaued"}) == 0.9


def test_an_action_not_carried_out_says_why_in_the_status_and_explain() -> None:
    from advisor.commands.explain import explain_lines

    dropped = ActionRecord(
        kind=ActionKind.RELEASE_QUOTA,
        time=NOW - 60,
        request_id="r1",
        policy="p",
        rule="plateau",
        outcome="impossible",
        reason="no 1% gain",
        detail="not carried out after the restart: the job is pending",
    )
    status = render_status(view(actions=(dropped,)), None, now=NOW)
    assert status["actions"][-1]["detail"] == dropped.detail
    text = "\n".join(explain_lines("team-a", "llm", status))
    assert "-> impossible [r1] p/plateau: no 1% gain (not carried out after the restart" in text


def test_explain_shows_an_action_its_cooldown_held_back_as_held_without_repeating_it() -> None:
    """A held Apply action is logged as a recommendation marked ``held back``, and its reason says
    why already: explain showed "... (resumed 2m22s ago) (held back)" after ``-> recommended``."""
    from advisor.commands.explain import explain_lines
    from advisor.model import HELD_DETAIL

    held = ActionRecord(
        kind=ActionKind.RECOMMEND,
        time=NOW - 60,
        request_id="rec-1",
        policy="p",
        rule="plateau",
        outcome="recommended",
        reason="plateaued: P=0.99; would release quota; held back: cooldown 1h",
        detail=HELD_DETAIL,
    )
    text = "\n".join(explain_lines("team-a", "llm", render_status(view(actions=(held,)), None, now=NOW)))
    said = "-> held [rec-1] p/plateau: plateaued: P=0.99; would release quota; held back: cooldown 1h"
    assert f"{said}\n" in f"{text}\n"
    assert "(held back)" not in text


def test_explain_says_what_the_history_left_out_without_calling_the_latest_report_unreadable() -> None:
    """The interleaving note read "unreadable    the latest report: 7 progress reports below the
    run's step left out ...", although the latest report was fine."""
    from advisor.commands.explain import explain_lines

    note = "7 progress reports below the run's step left out: two writers seem to interleave their steps"
    status = render_status(view(progress_warnings=(note,)), None, now=NOW)
    text = "\n".join(explain_lines("team-a", "llm", status))
    assert f"  reports       {note}" in text and "unreadable" not in text


def test_explain_shows_the_rule_memory_the_reasons_count_from() -> None:
    """When each window opened, and on which evaluation: what "for 4m" and "acting at the next
    evaluation" in the reasons count from (kept in status.coreState)."""
    import json

    from advisor.commands.explain import explain_lines

    status = render_status(view(), None, now=NOW)
    status["coreState"] = json.dumps({"ruleState": {"plateau.since": NOW - 240, "plateau.openedOn": 1000}})
    text = "\n".join(explain_lines("team-a", "llm", status, now=NOW))
    assert "rule memory   plateau.openedOn=1000, plateau.since=" in text and "(4m ago)" in text
    status["coreState"] = json.dumps({"ruleState": {}})
    assert "rule memory" not in "\n".join(explain_lines("team-a", "llm", status, now=NOW))


def test_a_long_warning_is_clipped_at_a_word_with_an_ellipsis() -> None:
    """A platform trial read "... reads the run as it stood before " as the whole warning: a
    status keeps at most WARNING_CHARS of one, and says when it cut it."""
    from advisor.controller.render import WARNING_CHARS, _clipped

    short = "the last 10 steps took 2 min, where 5 s was usual"
    assert _clipped(short) == short
    long = "word " * 100
    clipped = _clipped(long)
    assert len(clipped) <= WARNING_CHARS and clipped.endswith("word…")
    unbroken = "x" * 300
    assert _clipped(unbroken) == "x" * (WARNING_CHARS - 1) + "…"
