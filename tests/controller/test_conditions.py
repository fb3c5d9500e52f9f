"""The TrainJobForecast conditions, one reason per situation."""

from __future__ import annotations

from advisor.controller.conditions import forecast_conditions
from advisor.model import Decision, JobView, Mode, Phase


def _reasons(view: JobView, decision: Decision | None) -> tuple[str, str]:
    conds = {c["type"]: c for c in forecast_conditions(view, decision, now=0.0)}
    return conds["Forecasting"]["reason"], conds["Actionable"]["reason"]


def test_each_situation_has_its_reason() -> None:
    new = JobView(namespace="a", name="j")
    apply = Decision(job="a/j", policy="p", mode=Mode.APPLY)
    assert _reasons(new, None) == ("NoProgress", "NoPolicy")
    assert _reasons(JobView(namespace="a", name="j", step=5, last_sample_time=1.0), apply) == (
        "NotEnoughData",
        "Apply",
    )
    assert _reasons(new, Decision(job="a/j", policy="p", mode=Mode.RECOMMEND))[1] == "RecommendOnly"
    assert _reasons(new, Decision(job="a/j", policy="p", mode=Mode.APPLY, advice="exempt"))[1] == "Exempt"
    for phase in (Phase.PENDING, Phase.SUSPENDED, Phase.FINISHED, Phase.FAILED):
        view = JobView(namespace="a", name="j", phase=phase, phase_reason="why")
        assert _reasons(view, apply)[1] == phase.value.capitalize()


def test_a_job_whose_reports_carry_no_loss_says_so() -> None:
    """Steps and never a loss (a platform trial): "not enough data for a forecast yet" read as if
    more reports would bring one; it says no report has carried a loss. ``explain`` quotes it."""

    def message(view: JobView) -> str:
        conds = {c["type"]: c for c in forecast_conditions(view, None, now=0.0)}
        return str(conds["Forecasting"]["message"])

    no_loss = JobView(namespace="a", name="j", step=400, last_sample_time=1.0)
    assert message(no_loss) == "step 400: not enough data for a forecast yet; no report has carried a loss"
    some = JobView(namespace="a", name="j", step=400, last_sample_time=1.0, last_loss=2.5)
    assert message(some) == "step 400: not enough data for a forecast yet"
