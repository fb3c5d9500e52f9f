"""Staleness: a rule resting on the forecast does not act on progress older than the policy allows
(``safety.maxEvidenceAge``, or three of the job's report intervals), keeps its timers, and acts on
the first fresh report; the stall rule, whose evidence is the absence of progress, is not held."""

from __future__ import annotations

import dataclasses

import pytest
from policy_builders import HOUR, T0, forecast, job, policy, with_state

from advisor.model import ActionKind, ClusterView
from policies import decide
from policies.errors import PolicyError
from policies.staleness import evidence_bound, stale_evidence

CV = ClusterView()
PLATEAU = {"plateau": {"probability": 0.9, "for": "30m"}}


def kinds(decision) -> list[ActionKind]:
    return [a.kind for a in decision.actions]


def test_a_plateau_due_while_progress_is_stale_is_not_acted_on_and_acts_on_fresh_progress() -> None:
    p = policy(PLATEAU, safety={"maxEvidenceAge": "2m"})
    seen = T0
    j = job(forecast=forecast(plateau=0.95), progress_seen_at=seen, report_interval_s=5.0)
    d1 = decide(j, CV, p, now=T0)
    assert d1.state["plateau.since"] == T0 and kinds(d1) == []
    # the window ends in a blind spot: the newest progress is 31 minutes old
    blind = decide(with_state(j, d1.state), CV, p, now=T0 + 31 * 60)
    assert kinds(blind) == [] and blind.advice == "stale"
    assert any(
        r.startswith(
            "plateau: not acted on, stale evidence: the newest progress arrived 31m ago > maxEvidenceAge 2m"
        )
        for r in blind.reasons
    ), blind.reasons
    assert blind.state["plateau.since"] == T0  # the timer is kept: stale is "cannot tell", not "no"
    # fresh progress arrives: the rule acts at once on the window that held since T0
    fresh = dataclasses.replace(j, progress_seen_at=T0 + 31 * 60 - 1)
    d3 = decide(with_state(fresh, blind.state), CV, p, now=T0 + 31 * 60)
    assert kinds(d3) == [ActionKind.CHECKPOINT] and d3.advice == "plateau:release"


def test_recommend_mode_does_not_recommend_on_stale_progress_either() -> None:
    p = policy(
        {"plateau": {"probability": 0.9, "for": "0s"}}, mode="Recommend", safety={"maxEvidenceAge": "1m"}
    )
    j = job(forecast=forecast(plateau=0.95), progress_seen_at=T0 - 61)
    d = decide(j, CV, p, now=T0)
    assert kinds(d) == [] and d.advice == "stale"
    d_fresh = decide(dataclasses.replace(j, progress_seen_at=T0 - 59), CV, p, now=T0)
    assert kinds(d_fresh) == [ActionKind.RECOMMEND]


def test_the_bound_is_at_least_three_of_the_jobs_report_intervals() -> None:
    p = policy(PLATEAU, safety={"maxEvidenceAge": "10m"})
    rare = job(progress_seen_at=T0 - 50 * 60, report_interval_s=20 * 60.0)
    assert evidence_bound(rare, p) == 3 * 20 * 60
    assert stale_evidence(rare, p, T0) is None  # 50 minutes < 3 x 20 minutes
    msg = stale_evidence(rare, p, T0 + 11 * 60)
    assert msg is not None and "3 report intervals (1h)" in msg
    assert evidence_bound(job(report_interval_s=None), p) == 600.0
    assert evidence_bound(job(report_interval_s=-5.0), p) == 600.0


def test_without_an_arrival_time_nothing_is_held() -> None:
    """An adapter that does not say when progress arrived (a unit test's view, a replay) is not
    second-guessed."""
    p = policy({"plateau": {"probability": 0.9, "for": "0s"}}, safety={"maxEvidenceAge": "1s"})
    d = decide(job(forecast=forecast(plateau=0.95)), CV, p, now=T0 + 10 * HOUR)
    assert kinds(d) == [ActionKind.CHECKPOINT]


def test_the_stall_rule_is_not_held_by_staleness() -> None:
    p = policy({"stall": {"for": "30m"}}, safety={"maxEvidenceAge": "5m"})
    silent = job(
        last_step_change=T0 - HOUR,
        last_sample_time=T0 - HOUR,
        progress_seen_at=T0 - HOUR,
        report_interval_s=5.0,
    )
    d = decide(silent, CV, p, now=T0)
    assert ActionKind.RELEASE_QUOTA in kinds(d) and d.advice == "hung"


def test_a_hung_job_with_a_stale_plateau_is_still_released_by_the_stall_rule() -> None:
    p = policy(
        {"plateau": {"probability": 0.9, "for": "0s"}, "stall": {"for": "30m"}},
        safety={"maxEvidenceAge": "5m"},
    )
    silent = job(
        forecast=forecast(plateau=0.99),
        last_step_change=T0 - HOUR,
        last_sample_time=T0 - HOUR,
        progress_seen_at=T0 - HOUR,
    )
    d = decide(silent, CV, p, now=T0)
    assert {a.rule for a in d.actions} == {"stall"} and d.advice == "hung"


@pytest.mark.parametrize("bad", ["0s", 0, "-1m"])
def test_max_evidence_age_must_be_more_than_zero(bad: object) -> None:
    with pytest.raises(PolicyError, match="maxEvidenceAge"):
        policy(PLATEAU, safety={"maxEvidenceAge": bad})


def test_a_job_admitted_again_is_not_judged_before_it_reports_since() -> None:
    """Evicted and re-admitted, the job's reports describe the run before its eviction: no rule
    resting on the forecast judges it (no checkpoint request, no release) until progress arrives
    after the new admission; then it is judged again."""
    p = policy({"plateau": {"probability": 0.8, "for": "0s", "action": "Release"}})
    before = job(
        forecast=forecast(plateau=0.99), progress_seen_at=T0 - 30, admitted_at=T0 - 10, report_interval_s=2.0
    )
    d = decide(before, CV, p, now=T0)
    assert kinds(d) == []
    assert any("admitted 10s ago and no progress reported since" in r for r in d.reasons), d.reasons
    after = dataclasses.replace(before, progress_seen_at=T0 - 2)
    assert kinds(decide(after, CV, p, now=T0)) != []


def test_a_run_whose_progress_stopped_arriving_reads_stale_not_continue() -> None:
    """No rule wants anything, but the newest progress is older than the policy allows: the
    advice says so rather than vouch for the run on old news (a job silent for minutes under a
    policy without a stall rule read "continue")."""
    p = policy(PLATEAU, safety={"maxEvidenceAge": "30s"})
    j = job(forecast=forecast(plateau=0.1), progress_seen_at=T0, report_interval_s=3.0)
    assert decide(j, CV, p, now=T0 + 20).advice == "continue"
    silent = decide(j, CV, p, now=T0 + 90)
    assert silent.advice == "stale" and kinds(silent) == []
    assert any(
        r.startswith("stale: stale evidence: the newest progress arrived 1m30s ago") for r in silent.reasons
    )
