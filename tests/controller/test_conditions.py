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
