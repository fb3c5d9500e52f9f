"""Plateau, divergence and stall, and the release sequence they share (checkpoint, wait, release, once)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from policy_builders import HOUR, T0, forecast, job, policy, record, with_state

from advisor.model import ActionKind, ActionRecord, CheckpointState, ClusterView, JobView, Mode, WorkloadView
from policies import decide
from policies.crd import crd_manifest
from policies.spec import QuotaReleaseRule, StallRule

CV = ClusterView()


def kinds(decision) -> list[ActionKind]:
    return [a.kind for a in decision.actions]


def test_plateau_must_hold_for_the_window_before_acting() -> None:
    p = policy({"plateau": {"probability": 0.9, "for": "30m"}})
    j = job(forecast=forecast(plateau=0.95))
    d1 = decide(j, CV, p, now=T0)
    assert kinds(d1) == [] and d1.advice == "plateau?" and d1.state["plateau.since"] == T0
    d2 = decide(with_state(j, d1.state), CV, p, now=T0 + 29 * 60)
    assert kinds(d2) == []
    d3 = decide(with_state(j, d2.state), CV, p, now=T0 + 31 * 60)
    assert kinds(d3) == [ActionKind.CHECKPOINT] and d3.advice == "plateau:release"
    assert d3.actions[0].rule == "plateau" and d3.actions[0].params["before"] == "release-quota"
    assert "P(plateau)=0.95 >= 0.90 for 31m" in d3.actions[0].reason


def test_two_forecasts_in_a_row_below_even_odds_restart_the_window() -> None:
    p = policy({"plateau": {"probability": 0.9, "for": "30m"}})
    d1 = decide(job(forecast=forecast(plateau=0.95, points=60)), CV, p, now=T0)
    dip = decide(with_state(job(forecast=forecast(plateau=0.5, points=61)), d1.state), CV, p, now=T0 + 300)
    assert dip.state["plateau.since"] == T0  # one dissenting forecast: the window stays open
    dip2 = decide(with_state(job(forecast=forecast(plateau=0.4, points=62)), dip.state), CV, p, now=T0 + 600)
    assert "plateau.since" not in dip2.state and "plateau.dissent" not in dip2.state
    again = decide(
        with_state(job(forecast=forecast(plateau=0.95, points=63)), dip2.state), CV, p, now=T0 + 1900
    )
    assert again.state["plateau.since"] == T0 + 1900 and kinds(again) == []


def test_one_dissenting_forecast_keeps_the_window_open_but_is_never_acted_on() -> None:
    """On flat runs the fit swings 0.99 -> 0.3 -> 1.0 between re-fits: one such dip is noise."""
    p = policy({"plateau": {"probability": 0.9, "for": "30m"}})
    d1 = decide(job(forecast=forecast(plateau=0.95, points=60)), CV, p, now=T0)
    dipped = job(forecast=forecast(plateau=0.3, points=61))
    dip = decide(with_state(dipped, d1.state), CV, p, now=T0 + 600)
    assert dip.state["plateau.since"] == T0 and dip.advice == "plateau?" and kinds(dip) == []
    assert any("one forecast disagrees" in r for r in dip.reasons)
    assert dip.recheck_at == T0 + 1800
    # the same forecast looked at again after the window's end: still no action, still open
    late = decide(with_state(dipped, dip.state), CV, p, now=T0 + 2400)
    assert kinds(late) == [] and late.state["plateau.since"] == T0 and late.recheck_at is None
    # the next forecast agrees: the window has held since T0 and the rule acts
    back = decide(
        with_state(job(forecast=forecast(plateau=0.97, points=62)), late.state), CV, p, now=T0 + 2500
    )
    assert kinds(back) == [ActionKind.CHECKPOINT] and "for 41m40s" in back.actions[0].reason
    assert "plateau.dissent" not in back.state
    # after an agreeing forecast, a later single dissent is tolerated again
    again = decide(
        with_state(job(forecast=forecast(plateau=0.2, points=63)), back.state), CV, p, now=T0 + 2600
    )
    assert again.state["plateau.since"] == T0


def test_a_dissent_needs_an_open_window_and_does_not_open_one() -> None:
    p = policy({"plateau": {"probability": 0.9, "for": "30m"}})
    d = decide(job(forecast=forecast(plateau=0.3)), CV, p, now=T0)
    assert "plateau.since" not in d.state and "plateau.dissent" not in d.state and d.advice != "plateau?"


def test_a_wobble_above_even_odds_keeps_the_window_open_but_never_acts() -> None:
    p = policy({"plateau": {"probability": 0.9, "for": "30m"}})
    d1 = decide(job(forecast=forecast(plateau=0.95)), CV, p, now=T0)
    wobble = decide(with_state(job(forecast=forecast(plateau=0.7)), d1.state), CV, p, now=T0 + 600)
    assert wobble.state["plateau.since"] == T0 and wobble.advice == "plateau?"
    assert any("stays open" in r for r in wobble.reasons)
    late = decide(with_state(job(forecast=forecast(plateau=0.7)), wobble.state), CV, p, now=T0 + 3600)
    assert kinds(late) == [] and late.state["plateau.since"] == T0  # below the threshold: no action
    assert late.recheck_at is None  # the window is over: only a new forecast can change the verdict
    back = decide(with_state(job(forecast=forecast(plateau=0.93)), late.state), CV, p, now=T0 + 3700)
    assert kinds(back) == [ActionKind.CHECKPOINT] and "for 1h1m" in back.actions[0].reason


def test_a_forecast_of_a_rising_loss_is_not_evidence_of_a_plateau() -> None:
    """P(plateau) counts a predicted rise as "no improvement left"; with a low P(diverge) that is a
    fit not following the curve (seen during LR anneals), so the plateau rule does not take it."""
    p = policy({"plateau": {"probability": 0.9, "for": "10m"}})
    rising = job(forecast=forecast(plateau=1.0, loss=3.0, final=3.1))
    d = decide(with_state(rising, {"plateau.since": T0 - HOUR}), CV, p, now=T0)
    assert kinds(d) == [] and "plateau.since" not in d.state
    assert any("not taken as a plateau" in r and "3 → 3.1" in r for r in d.reasons)
    flat = job(forecast=forecast(plateau=1.0, loss=3.0, final=3.02))  # within the 1% band
    assert decide(flat, CV, p, now=T0).state["plateau.since"] == T0


def test_release_follows_the_acknowledged_checkpoint_and_never_repeats() -> None:
    p = policy({"plateau": {"for": "10m"}})
    since = T0 - HOUR
    base = job(forecast=forecast(plateau=0.97), rule_state={"plateau.since": since})
    asked = record(ActionKind.CHECKPOINT, T0 - 120, rule="plateau", rid="ck-1")
    waiting = dataclasses.replace(base, actions=(asked,))
    d = decide(waiting, CV, p, now=T0)
    assert kinds(d) == [] and any("waiting for checkpoint" in r for r in d.reasons)
    acked = dataclasses.replace(
        waiting,
        actions=(dataclasses.replace(asked, outcome="acknowledged"),),
        checkpoint=dataclasses.replace(base.checkpoint, last_time=T0 - 60, last_step=base.step),
    )
    d = decide(acked, CV, p, now=T0)
    assert kinds(d) == [ActionKind.RELEASE_QUOTA] and d.actions[0].params["followup"] is True
    released = dataclasses.replace(
        acked, actions=(*acked.actions, record(ActionKind.RELEASE_QUOTA, T0, rule="plateau"))
    )
    assert kinds(decide(released, CV, p, now=T0 + 60)) == []
    assert kinds(decide(dataclasses.replace(acked, active=False), CV, p, now=T0)) == []


def test_a_checkpoint_request_dropped_with_its_pods_is_asked_again_before_releasing() -> None:
    """The run restarted on new pods before answering: no process will answer the old request, so
    the sequence starts over rather than wait out its timeout and release without a checkpoint."""
    p = policy({"plateau": {"for": "10m"}})
    base = job(forecast=forecast(plateau=0.97), rule_state={"plateau.since": T0 - HOUR})
    dropped = dataclasses.replace(
        record(ActionKind.CHECKPOINT, T0 - 120, rule="plateau", rid="ck-1", outcome="dropped"),
        detail="the run restarted (its step went back from 5000 to 4000)",
    )
    d = decide(dataclasses.replace(base, actions=(dropped,)), CV, p, now=T0)
    assert kinds(d) == [ActionKind.CHECKPOINT] and d.actions[0].params["before"] == "release-quota"


def test_checkpoint_timeout_releases_only_when_the_policy_says_so() -> None:
    base = job(
        forecast=forecast(plateau=0.97),
        rule_state={"plateau.since": T0 - HOUR},
        checkpoint=dataclasses.replace(job().checkpoint, last_time=T0 - 2 * HOUR, last_step=100),
    )
    stuck = dataclasses.replace(base, actions=(record(ActionKind.CHECKPOINT, T0 - 700, rule="plateau"),))
    d = decide(stuck, CV, policy({"plateau": {"for": "10m"}}), now=T0)
    assert kinds(d) == [ActionKind.RELEASE_QUOTA] and "not acknowledged after 11m40s" in d.actions[0].reason
    strict = policy({"plateau": {"for": "10m"}, "quotaRelease": {"releaseOnTimeout": False}})
    assert kinds(decide(stuck, CV, strict, now=T0)) == [ActionKind.RECOMMEND]

    # a request that failed to reach the job (the API server refused it, or was down: an answer
    # was never possible) is asked again after its backoff, not given up at once: a 3-second
    # API-server blip released runs without the save they would have made
    def failed_at(at: float) -> ActionRecord:
        return dataclasses.replace(
            record(ActionKind.CHECKPOINT, at, rule="plateau", outcome="failed"),
            detail="API error: 503 Service Unavailable",
        )

    lenient = policy({"plateau": {"for": "10m"}})
    d = decide(dataclasses.replace(base, actions=(failed_at(T0 - 5),)), CV, lenient, now=T0)
    assert kinds(d) == [] and any("held back" in r and "asked again" in r for r in d.reasons), d.reasons
    d = decide(dataclasses.replace(base, actions=(failed_at(T0 - 120),)), CV, lenient, now=T0)
    assert kinds(d) == [ActionKind.CHECKPOINT] and "asked again" in d.actions[0].reason
    assert "8m of 10m left" in d.actions[0].reason
    # once the sequence's timeout has run out since its first request, it is said as a failure
    again = (failed_at(T0 - 700), failed_at(T0 - 400))
    d = decide(dataclasses.replace(base, actions=again), CV, lenient, now=T0)
    assert kinds(d) == [ActionKind.RELEASE_QUOTA]
    assert "the checkpoint request failed (API error: 503 Service Unavailable), released without it" in (
        d.actions[0].reason
    )
    d = decide(dataclasses.replace(base, actions=again), CV, strict, now=T0)
    assert (
        "but the checkpoint request failed (API error: 503 Service Unavailable) and releaseOnTimeout is false"
        in (d.actions[0].reason)
    )


def test_a_release_on_an_old_checkpoint_that_still_had_learning_left_is_held() -> None:
    # the checkpoint request timed out (the job was preempted back to step 100 meanwhile): the
    # plateau was found at the latest report, but a release keeps only that checkpoint, whose loss
    # was 5% higher; the window starts over, to be judged on what the run reports once it runs
    def stuck(checkpoint_loss: float | None) -> JobView:
        return job(
            forecast=forecast(plateau=0.97, loss=1.0),
            rule_state={"plateau.since": T0 - HOUR},
            checkpoint=dataclasses.replace(job().checkpoint, last_time=T0 - 2 * HOUR, last_step=100),
            checkpoint_loss=checkpoint_loss,
            actions=(record(ActionKind.CHECKPOINT, T0 - 700, rule="plateau"),),
        )

    p = policy({"plateau": {"for": "10m"}})
    held = decide(stuck(1.05), CV, p, now=T0)
    assert kinds(held) == [] and "plateau.since" not in held.state and held.advice == "plateau?"
    assert any("5.0% above the current loss; held back" in r for r in held.reasons)
    assert kinds(decide(stuck(1.005), CV, p, now=T0)) == [ActionKind.RELEASE_QUOTA]  # within 1%
    assert kinds(decide(stuck(None), CV, p, now=T0)) == [ActionKind.RELEASE_QUOTA]  # nothing known
    # acknowledged: the job saved what it had, so the release goes ahead
    acked = dataclasses.replace(
        stuck(1.05),
        actions=(record(ActionKind.CHECKPOINT, T0 - 700, rule="plateau", outcome="acknowledged"),),
    )
    assert kinds(decide(acked, CV, p, now=T0)) == [ActionKind.RELEASE_QUOTA]
    # no checkpoint wanted first: the same hold
    no_first = policy({"plateau": {"for": "10m"}, "quotaRelease": {"checkpointFirst": False}})
    assert kinds(decide(stuck(1.05), CV, no_first, now=T0)) == []


def test_a_fresh_checkpoint_means_release_at_once() -> None:
    fresh = job(
        forecast=forecast(plateau=0.97),
        rule_state={"plateau.since": T0 - HOUR},
        checkpoint=dataclasses.replace(job().checkpoint, last_time=T0 - 60),
    )
    d = decide(fresh, CV, policy({"plateau": {"for": "10m"}}), now=T0)
    assert kinds(d) == [ActionKind.RELEASE_QUOTA] and "fresh" in d.actions[0].reason


def test_a_job_resumed_after_its_release_is_judged_again() -> None:
    """Released 10 minutes ago, reactivated by its user 1 minute ago without a new admission (the
    Workload kept its quota): the release is history, not "already released"."""
    from policies.rules.base import Context
    from policies.rules.release import already_released

    done = record(ActionKind.RELEASE_QUOTA, T0 - 600, rule="plateau", outcome="done")
    p = policy({"plateau": {"for": "10m"}})

    def ctx(**kw: object) -> Context:
        j = job(actions=(done,), admitted_at=T0 - HOUR, **kw)
        return Context(j, CV, p, T0, True, True, "", j.forecast, "", None)

    assert already_released(ctx(phase_since=T0 - 900))  # running since before the release
    assert not already_released(ctx(phase_since=T0 - 60))  # running again since the resume


def test_plateau_stop_and_recommend_actions() -> None:
    j = job(
        forecast=forecast(plateau=0.97),
        rule_state={"plateau.since": T0 - HOUR},
        checkpoint=dataclasses.replace(job().checkpoint, last_time=T0 - 10),
    )
    assert kinds(decide(j, CV, policy({"plateau": {"for": "10m", "action": "Stop"}}), now=T0)) == [
        ActionKind.STOP
    ]
    d = decide(j, CV, policy({"plateau": {"for": "10m", "action": "Recommend"}}), now=T0)
    assert kinds(d) == [ActionKind.RECOMMEND] and d.advice == "plateau"


def test_recommend_mode_describes_the_whole_sequence_in_one_recommendation() -> None:
    j = job(
        forecast=forecast(plateau=0.97),
        rule_state={"plateau.since": T0 - HOUR},
        checkpoint=dataclasses.replace(job().checkpoint, last_time=T0 - 2 * HOUR),
    )
    d = decide(j, CV, policy({"plateau": {"for": "10m"}}, mode="Recommend"), now=T0)
    assert d.mode is Mode.RECOMMEND and kinds(d) == [ActionKind.RECOMMEND]
    assert d.actions[0].params["would"] == "release-quota" and d.actions[0].params["after"] == "checkpoint"
    assert d.advice == "plateau:release"
    assert "would release quota after a checkpoint:" in d.actions[0].reason
    # a checkpoint asked for in Apply mode, still awaited after the policy turned to Recommend
    asked = dataclasses.replace(j, checkpoint=dataclasses.replace(j.checkpoint, pending_request="r1"))
    d = decide(asked, CV, policy({"plateau": {"for": "10m"}}, mode="Recommend"), now=T0)
    assert "would release quota after the checkpoint already requested:" in d.actions[0].reason


def test_a_finished_run_is_not_a_plateau() -> None:
    j = job(step=20000, forecast=forecast(plateau=1.0), rule_state={"plateau.since": T0 - HOUR})
    assert kinds(decide(j, CV, policy({"plateau": {"for": "10m"}}), now=T0)) == []


def test_non_finite_loss_diverges_at_once_without_saving_its_weights() -> None:
    """A save now would be the newest checkpoint, of NaN weights, the one a resume starts from (and
    with a bounded number kept it could push out the last good one): none is taken, and the
    reason names what to resume from."""
    p = policy({"divergence": {"action": "Stop"}})
    for bad in (math.nan, math.inf):
        d = decide(job(last_loss=bad), CV, p, now=T0)
        assert kinds(d) == [ActionKind.STOP] and d.advice == "diverging"
        reason = d.actions[0].reason
        assert d.state["divergence.since"] == T0 and "latest loss is" in reason
        assert "no checkpoint taken (its weights would be non-finite)" in reason
    saved = dataclasses.replace(
        job(last_loss=math.nan, forecast=dataclasses.replace(forecast(), last_step=4500.0)),
        checkpoint=CheckpointState(last_step=4000, last_time=T0 - HOUR),
    )
    reason = decide(saved, CV, p, now=T0).actions[0].reason
    assert "resume from the checkpoint of step 4,000 or one at or before step 4,500" in reason
    # finite reports after the latest forecast: the history's last finite step is named, not the
    # forecast's last point
    later = dataclasses.replace(saved, last_finite_step=4700)
    reason = decide(later, CV, p, now=T0).actions[0].reason
    assert "one at or before step 4,700 (the last finite loss reported)" in reason
    # a gradual blow-up: the loss had risen 100-fold before it went NaN; a checkpoint on the way up
    # holds those weights, so the step of its lowest loss is named
    risen = dataclasses.replace(later, last_finite_loss=200.0, lowest_loss=(3900, 2.0))
    reason = decide(risen, CV, p, now=T0).actions[0].reason
    assert (
        "one at or before step 3,900 (the lowest loss reported, 2; the loss rose after it, "
        "to 200 at step 4,700" in reason
    )
    # a loss still near its lowest when it went NaN: the last finite step stays the one named
    near = dataclasses.replace(later, last_finite_loss=2.05, lowest_loss=(4600, 2.0))
    assert (
        "one at or before step 4,700 (the last finite loss reported)"
        in decide(near, CV, p, now=T0).actions[0].reason
    )
    # a loss that rose 100-fold and is still finite: its latest report is named as such, not as
    # the last finite one (nothing went non-finite)
    finite = dataclasses.replace(
        job(forecast=forecast(diverge=0.99), last_loss=200.0),
        last_finite_step=4700,
        last_finite_loss=200.0,
        lowest_loss=(3900, 2.0),
    )
    p_rise = policy({"divergence": {"probability": 0.9, "for": "0s", "action": "Stop"}})
    reason = decide(finite, CV, p_rise, now=T0).actions[0].reason
    assert "to 200 at step 4,700, the latest report)" in reason and "last finite" not in reason, reason


def test_a_diverged_runs_resume_point_is_named_as_what_was_reported() -> None:
    """A run reports at intervals: a back-test's run logged 10.34 at step 1,040 and 20.13 at 1,080,
    then NaN, and its reports, a minute apart, held 1,040 and then NaN. The reason called 1,040
    "the last finite one" while the run's was 1,080: it names the last finite *report*, and the
    lowest loss as the lowest reported, facts the advisor has."""
    p = policy({"divergence": {"action": "Stop"}})
    j = dataclasses.replace(
        job(last_loss=math.nan),
        last_finite_step=1040,
        last_finite_loss=10.336744621457562,
        lowest_loss=(880, 1.0079),
        checkpoint=CheckpointState(last_step=800, last_time=T0 - HOUR),
    )
    reason = decide(j, CV, p, now=T0).actions[0].reason
    assert (
        "resume from the checkpoint of step 800 or one at or before step 880 "
        "(the lowest loss reported, 1.008; the loss rose after it, "
        "to 10.34 at step 1,040, the last finite report)" in reason
    ), reason
    assert "the last finite one" not in reason


def test_a_non_finite_loss_acts_once_it_is_a_run_of_reports() -> None:
    """One NaN report is a mixed-precision step skipped (the run carries on); three in a row are a
    divergence. A pasted job state that does not count them acts on the latest loss, as before."""
    p = policy({"divergence": {"probability": 0.95, "for": "10m"}})
    one = decide(job(last_loss=math.nan, non_finite_reports=1), CV, p, now=T0)
    assert kinds(one) == [] and one.advice == "diverging?"
    assert any("1 report(s) in a row; acting at 3" in r for r in one.reasons), one.reasons
    three = decide(job(last_loss=math.nan, non_finite_reports=3), CV, p, now=T0)
    assert kinds(three) == [ActionKind.RELEASE_QUOTA] and "latest loss is nan" in three.actions[0].reason
    unknown = decide(job(last_loss=math.nan), CV, p, now=T0)
    assert kinds(unknown) == [ActionKind.RELEASE_QUOTA]


def test_divergence_probability_must_hold_and_non_finite_can_be_turned_off() -> None:
    p = policy({"divergence": {"probability": 0.9, "for": "10m", "nonFinite": False}})
    assert kinds(decide(job(last_loss=math.nan), CV, p, now=T0)) == []
    j = job(forecast=forecast(diverge=0.99))
    d = decide(j, CV, p, now=T0)
    assert kinds(d) == [] and d.advice == "diverging?"
    d = decide(with_state(j, d.state), CV, p, now=T0 + 601)
    assert kinds(d) == [ActionKind.RELEASE_QUOTA] and "P(diverge)=0.99" in d.actions[0].reason
    assert "worse than any saved before" in d.actions[0].reason


def test_stall_releases_without_a_checkpoint_by_default_and_says_why() -> None:
    p = policy({"stall": {"for": "30m"}})
    hung = job(last_step_change=T0 - 40 * 60, last_sample_time=T0 - 30)
    d = decide(hung, CV, p, now=T0)
    assert kinds(d) == [ActionKind.RELEASE_QUOTA] and d.advice == "hung"
    assert "step stuck at 5000 for 40m while progress reports still arrive" in d.actions[0].reason
    silent = job(last_step_change=T0 - 40 * 60, last_sample_time=T0 - 40 * 60)
    assert "no progress report" in decide(silent, CV, p, now=T0).actions[0].reason
    # one report a little after the step's last change, then silence: no live reporter
    gone = job(last_step_change=T0 - 40 * 60, last_sample_time=T0 - 39 * 60, report_interval_s=5.0)
    assert "no progress report" in decide(gone, CV, p, now=T0).actions[0].reason
    # reports still come, slower than the pace learned before the step stopped (a poller that
    # rewrites the same step): not said to be a silence
    slower = job(last_step_change=T0 - 40 * 60, last_sample_time=T0 - 60, report_interval_s=5.0)
    reason = decide(slower, CV, p, now=T0).actions[0].reason
    assert "no step advance for 40m (step 5000), the last progress report 1m ago" in reason, reason
    early = job(last_step_change=T0 - 20 * 60)
    assert kinds(decide(early, CV, p, now=T0)) == [] and decide(early, CV, p, now=T0).advice == "stalled?"
    careful = policy({"stall": {"for": "30m", "checkpointFirst": True}})
    assert kinds(decide(hung, CV, careful, now=T0)) == [ActionKind.CHECKPOINT]


def test_a_silence_the_controller_cannot_see_is_not_a_stall() -> None:
    """While the controller cannot reach the API server no report can arrive, whatever the job
    does: an outage read every job as hung. Once it reaches the server again, a job's silence is
    counted from then, so a long outage does not release every job at once on its return."""
    p = policy({"stall": {"for": "30m"}})
    silent = job(last_step_change=T0 - 40 * 60, last_sample_time=T0 - 40 * 60)
    assert kinds(decide(silent, CV, p, now=T0)) == [ActionKind.RELEASE_QUOTA]
    blind = dataclasses.replace(CV, api_unreachable_since=T0 - 5 * 60)
    d = decide(silent, blind, p, now=T0)
    assert kinds(d) == [] and d.advice != "hung"
    assert any("has not reached the API server for 5m" in r for r in d.reasons), d.reasons
    back = dataclasses.replace(CV, api_sight_since=T0 - 10 * 60)
    d = decide(silent, back, p, now=T0)
    assert kinds(d) == [] and d.advice != "hung"
    assert kinds(decide(silent, back, p, now=T0 + 21 * 60)) == [ActionKind.RELEASE_QUOTA]


class _Sight:
    """The other running jobs' latest reports, as a core loop would list them."""

    def __init__(self, *times: float) -> None:
        self.times = times

    def latest_reports(self):
        return ((f"team-a/other-{i}", t) for i, t in enumerate(self.times))


def test_a_silence_most_running_jobs_share_is_the_progress_paths_not_a_stall() -> None:
    """A blackout of the trainer's status server silences every job at once: each read as hung,
    and the rule released all of them up to its policy's cap. Most running jobs silent within half
    a window of each other: not judged, said. A few of many, or fewer than three, are hangs."""
    p = policy({"stall": {"for": "30m"}})
    silent = job(last_step_change=T0 - 40 * 60, last_sample_time=T0 - 40 * 60)
    went = T0 - 40 * 60
    blackout = dataclasses.replace(CV, report_sight=_Sight(went + 20, went - 30, went + 5, T0 - 10))
    d = decide(silent, blackout, p, now=T0)
    assert kinds(d) == [] and d.advice == "progress-outage", d.reasons
    assert any("4 of the 5 running jobs that report went silent within 15m" in r for r in d.reasons), (
        d.reasons
    )
    assert d.idle_recheck_at == T0 + 15 * 60
    # the same in Recommend mode: no recommendation to release a job the path silenced
    assert decide(silent, blackout, policy({"stall": {"for": "30m"}}, mode="Recommend"), now=T0).actions == ()
    # a few of many: the others report
    few = dataclasses.replace(CV, report_sight=_Sight(went, went + 60, *[T0 - 5] * 5))
    assert kinds(decide(silent, few, p, now=T0)) == [ActionKind.RELEASE_QUOTA]
    # two hangs at once, on a cluster of two
    two = dataclasses.replace(CV, report_sight=_Sight(went))
    assert kinds(decide(silent, two, p, now=T0)) == [ActionKind.RELEASE_QUOTA]
    # silent, but not together: the others went quiet hours apart (each a hang of its own)
    apart = dataclasses.replace(CV, report_sight=_Sight(went - 3 * HOUR, went - 5 * HOUR, went - 7 * HOUR))
    assert kinds(decide(silent, apart, p, now=T0)) == [ActionKind.RELEASE_QUOTA]
    # reports still arrive at a stuck step: a hang the path is not to blame for, whatever the others do
    stuck = job(last_step_change=T0 - 40 * 60, last_sample_time=T0 - 30)
    assert kinds(decide(stuck, blackout, p, now=T0)) == [ActionKind.RELEASE_QUOTA]
    # the outage ends (the others report again) and this job has not reported yet: its silence
    # counts from the outage's last look, not from before it (released seconds after, a trial)
    after = dataclasses.replace(CV, report_sight=_Sight(*[T0 + 50] * 4))
    d2 = decide(with_state(silent, d.state), after, p, now=T0 + 60)
    assert kinds(d2) == [] and d2.advice != "hung", d2.reasons
    later = decide(with_state(silent, d2.state), after, p, now=T0 + 31 * 60)
    assert kinds(later) == [ActionKind.RELEASE_QUOTA]
    # a report after the outage ends the grace: the job is judged from its own step again
    reported = job(last_step_change=T0 - 40 * 60, last_sample_time=T0 + 30)
    assert "stall.sharedSilence" not in decide(with_state(reported, d.state), after, p, now=T0 + 60).state


def test_a_job_whose_reports_arrive_unreadable_is_not_called_stalled() -> None:
    """Its step last moved 40 minutes ago, but reports still arrive and no step can be read from
    them (a reporter writing "-310"): nothing says the run is stuck, and a release would cost its
    work for a reporter's bug. Once a readable report stands again, the rule judges as before."""
    p = policy({"stall": {"for": "30m"}})
    garbled = job(last_step_change=T0 - 40 * 60, last_sample_time=T0 - 40 * 60, unreadable_report_at=T0 - 2)
    d = decide(garbled, CV, p, now=T0)
    assert kinds(d) == [] and d.advice != "hung"
    assert any("no step can be read from them" in r and "not judged" in r for r in d.reasons), d.reasons
    readable = dataclasses.replace(garbled, unreadable_report_at=None)
    assert kinds(decide(readable, CV, p, now=T0)) == [ActionKind.RELEASE_QUOTA]
    # the look when the window would end without another report is asked for ...
    assert d.idle_recheck_at == pytest.approx(T0 - 2 + 30 * 60)
    # ... and then, no report of any kind for a whole window, the job is silent: judged
    silent = dataclasses.replace(garbled, unreadable_report_at=T0 - 31 * 60)
    d = decide(silent, CV, p, now=T0)
    assert kinds(d) == [ActionKind.RELEASE_QUOTA] and d.advice != "unreadable-progress"
    assert "no progress report of any kind for 31m, the last ones unreadable" in d.actions[0].reason


def test_a_job_whose_every_report_was_unreadable_reads_unreadable_progress() -> None:
    """A reporter writing garbage from its first report (a platform trial: ``current_step:
    "twelve"``): ADVICE read ``observing`` and the reason "no progress report seen yet" after 480
    reports. They are reports: ADVICE says ``unreadable-progress``, and once none of any kind has
    come for a window the job is silent and judged; a job never heard from stays unjudged."""
    p = policy({"stall": {"for": "30m"}})
    never = job(last_step_change=None, last_sample_time=None, step=0, unreadable_report_at=None)
    d = decide(never, CV, p, now=T0)
    assert kinds(d) == [] and any("no progress report seen yet" in r for r in d.reasons), d.reasons
    garbage = dataclasses.replace(never, unreadable_report_at=T0 - 5)
    d = decide(garbage, CV, p, now=T0)
    assert kinds(d) == [] and d.advice == "unreadable-progress"
    assert not any("no progress report seen yet" in r for r in d.reasons), d.reasons
    gone = dataclasses.replace(garbage, unreadable_report_at=T0 - 31 * 60)
    d = decide(gone, CV, p, now=T0)
    assert kinds(d) == [ActionKind.RELEASE_QUOTA]
    assert "no progress report of any kind for 31m, the last ones unreadable" in d.actions[0].reason


def test_a_job_whose_step_keeps_going_backwards_is_said_to_report_malformed_progress() -> None:
    """A reporter whose step goes back at every report (a platform trial: STATE learning, ADVICE
    observing for 15 minutes, nothing said): the stall rule says the progress is malformed and
    does not judge it, whatever its step's last change reads; the ADVICE column says so."""
    from advisor.model import MALFORMED_BACKS

    p = policy({"stall": {"for": "30m"}})
    countdown = job(
        last_step_change=T0 - 40 * 60, last_sample_time=T0 - 3, backwards_reports=MALFORMED_BACKS + 5
    )
    d = decide(countdown, CV, p, now=T0)
    assert kinds(d) == [] and d.advice == "malformed-progress"
    assert any("keeps going backwards" in r and "not judged" in r for r in d.reasons), d.reasons
    resumed = dataclasses.replace(countdown, backwards_reports=1)  # one step back: a restart
    assert decide(resumed, CV, p, now=T0).advice != "malformed-progress"
    # a platform trial: the step broke, then the reporter went quiet; minutes later the job still
    # read "progress reports arrive ... not judged" and held its GPUs. Silent for a window: judged
    hung = dataclasses.replace(countdown, last_step_change=T0 - 32 * 60, last_sample_time=T0 - 32 * 60)
    d = decide(hung, CV, p, now=T0)
    assert kinds(d) == [ActionKind.RELEASE_QUOTA] and d.advice != "malformed-progress"
    assert "the last ones going backwards" in d.actions[0].reason


def test_the_readme_and_the_crd_say_which_releases_checkpoint_first() -> None:
    """Releases checkpoint first by default (``quotaRelease.checkpointFirst``), but not the stall
    rule's (its own ``checkpointFirst``, default false: a hung job usually cannot save) nor the
    divergence rule's (never: its weights are no checkpoint to resume from)."""
    assert QuotaReleaseRule().checkpoint_first and not StallRule().checkpoint_first
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    claim = readme[readme.index("A release checkpoints first") : readme.index("3) Cap the rate")]
    assert "The stall rule releases at once unless its own `checkpointFirst` is set (default false)" in claim
    assert "The divergence rule never checkpoints first" in claim
    rules = crd_manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"
    ]["rules"]["properties"]
    assert "checkpoint then" not in rules["divergence"]["properties"]["action"]["description"]
    careful = policy(
        {"divergence": {"for": "0s", "action": "Stop"}, "quotaRelease": {"checkpointFirst": True}}
    )
    d = decide(job(last_loss=math.nan), CV, careful, now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.STOP]  # no checkpoint asked, whatever quotaRelease says


def test_a_job_that_never_reported_progress_is_not_called_stalled() -> None:
    """Admitted an hour ago and never a report: a job without a progress source (the Trainer's
    TrainJobStatus gate off, no training callback) looks exactly like one hung at start-up; it is
    not released, and the reasons say why."""
    p = policy({"stall": {"for": "30m"}})
    silent = job(step=0, last_step_change=None, last_sample_time=None, started_at=T0 - HOUR)
    d = decide(silent, CV, p, now=T0)
    assert kinds(d) == [] and d.advice != "hung"
    assert any("no progress report seen yet: not judged" in r for r in d.reasons)


def test_a_run_that_hangs_before_min_progress_is_still_released() -> None:
    """Stuck at step 300 of 9000 (3%) for 40 minutes under minProgress 10%: the learning rules may
    not judge it yet, but a run stuck there never reaches 10%; the stall rule waits for minRuntime
    only."""
    p = policy({"stall": {"for": "30m"}, "plateau": {"for": "10m"}}, safety={"minProgress": 0.1})
    early = job(step=300, total_steps=9000, last_step_change=T0 - 40 * 60, last_sample_time=T0 - 10)
    d = decide(early, CV, p, now=T0)
    assert kinds(d) == [ActionKind.RELEASE_QUOTA] and d.advice == "hung"
    assert any("no judgement yet: progress 3.33% < minProgress 10%" in r for r in d.reasons)
    young = dataclasses.replace(early, started_at=T0 - 5 * 60)  # minRuntime (15m here) still holds
    assert kinds(decide(young, CV, p, now=T0)) == []


def test_stall_is_not_counted_while_a_resumed_job_was_suspended() -> None:
    """Released for a stall, reactivated by its user 5 minutes ago with its Workload's admission
    kept: its silence while suspended is not a stall; the window runs from the resume."""
    p = policy({"stall": {"for": "30m"}})
    resumed = job(
        last_step_change=T0 - 2 * HOUR,
        last_sample_time=T0 - 10,
        admitted_at=T0 - 3 * HOUR,
        phase_since=T0 - 300,
        actions=(record(ActionKind.RELEASE_QUOTA, T0 - HOUR, rule="stall", outcome="done"),),
    )
    d = decide(resumed, CV, p, now=T0)
    assert kinds(d) == []
    assert not any("stalled" in a.reason for a in d.actions)
    later = decide(resumed, CV, p, now=T0 + 30 * 60)  # still stuck 30 minutes after the resume
    assert kinds(later) == [ActionKind.RELEASE_QUOTA]
    # a job first seen (its running phase stamped now) that was never released: hung as it is
    seen = dataclasses.replace(resumed, actions=())
    assert kinds(decide(seen, CV, p, now=T0)) == [ActionKind.RELEASE_QUOTA]


def test_stall_is_not_counted_while_the_job_waited_in_the_queue() -> None:
    """Preempted two hours ago and admitted again five minutes ago, still restarting: not hung."""
    p = policy({"stall": {"for": "30m"}})
    j = job(last_step_change=T0 - 2 * HOUR, last_sample_time=T0 - 2 * HOUR)

    def cluster(admitted_at: float) -> ClusterView:
        w = WorkloadView("team-a", "ft-1-wl", "cq", 8, admitted=True, job=j.key, admitted_at=admitted_at)
        return ClusterView(workloads=(w,))

    d = decide(j, cluster(T0 - 300), p, now=T0)
    assert kinds(d) == [] and d.idle_recheck_at == T0 - 300 + 1800 and d.recheck_at is None
    d = decide(j, cluster(T0 - 40 * 60), p, now=T0)  # admitted 40 minutes ago, no step since
    assert kinds(d) == [ActionKind.RELEASE_QUOTA] and "for 40m" in d.actions[0].reason


def test_stall_reads_the_admission_time_from_the_job_when_its_adapter_gives_it() -> None:
    """The same two cases with the admission time on the job itself and no Workload in the
    snapshot: the rule needs no search of the cluster (an adapter knows the job's own Workload)."""
    p = policy({"stall": {"for": "30m"}})
    stuck = job(last_step_change=T0 - 2 * HOUR, last_sample_time=T0 - 2 * HOUR)
    empty = ClusterView(workloads=())
    d = decide(dataclasses.replace(stuck, admitted_at=T0 - 300), empty, p, now=T0)
    assert kinds(d) == [] and d.idle_recheck_at == T0 - 300 + 1800
    d = decide(dataclasses.replace(stuck, admitted_at=T0 - 40 * 60), empty, p, now=T0)
    assert kinds(d) == [ActionKind.RELEASE_QUOTA] and "for 40m" in d.actions[0].reason
    # the job's own word wins over a stale Workload in the snapshot
    w = WorkloadView("team-a", "ft-1-wl", "cq", 8, admitted=True, job=stuck.key, admitted_at=T0 - 3 * HOUR)
    d = decide(dataclasses.replace(stuck, admitted_at=T0 - 300), ClusterView(workloads=(w,)), p, now=T0)
    assert kinds(d) == []


def test_the_most_serious_rule_owns_the_release_and_only_one_happens() -> None:
    p = policy({"plateau": {"for": "10m"}, "divergence": {}, "stall": {"for": "30m"}, "checkpoint": {}})
    j = job(
        last_loss=math.nan,
        forecast=forecast(plateau=0.99),
        rule_state={"plateau.since": T0 - HOUR},
        last_step_change=T0 - 2 * HOUR,
        checkpoint=dataclasses.replace(job().checkpoint, last_time=T0 - 30),
    )
    d = decide(j, CV, p, now=T0)
    finals = [a for a in d.actions if a.kind in (ActionKind.RELEASE_QUOTA, ActionKind.STOP)]
    assert len(finals) == 1 and finals[0].rule == "divergence" and d.advice == "diverging"
    assert ActionKind.CHECKPOINT not in kinds(d)


def test_a_pending_window_or_acknowledgement_asks_to_be_rechecked_when_it_falls_due() -> None:
    """A ``for:`` window ends, or a checkpoint times out, with no new progress to trigger a look."""
    p = policy({"plateau": {"probability": 0.9, "for": "30m"}})
    d1 = decide(job(forecast=forecast(plateau=0.95)), CV, p, now=T0)
    assert d1.recheck_at == T0 + 30 * 60
    assert decide(job(forecast=forecast(plateau=0.2)), CV, p, now=T0).recheck_at is None
    both = policy({"plateau": {"probability": 0.9, "for": "30m"}, "stall": {"for": "20m"}})
    d = decide(job(forecast=forecast(plateau=0.95), last_step_change=T0 - 60), CV, both, now=T0)
    assert d.recheck_at == T0 + 30 * 60  # the plateau window's end: a timer
    # the stall rule's hold is a watchdog instead: due only if no step advances before it
    assert d.idle_recheck_at == T0 - 60 + 20 * 60
    asked = record(ActionKind.CHECKPOINT, T0 - 120, rule="plateau", rid="ck-1")
    waiting = job(forecast=forecast(plateau=0.97), rule_state={"plateau.since": T0 - HOUR}, actions=(asked,))
    d2 = decide(waiting, CV, p, now=T0)
    assert kinds(d2) == [] and d2.recheck_at == T0 - 120 + 600  # the default checkpointTimeout


def test_a_run_that_ends_within_the_window_is_let_finish_not_released() -> None:
    """Every run nearing its last step has "less than 1% left". One whose ETA is within the rule's
    own window ends (and frees its GPUs) before the rule could confirm again: the rule neither
    releases nor recommends it, and says why; with more time left it acts as before."""
    p = policy({"plateau": {"probability": 0.9, "for": "10m"}})
    opened = decide(job(forecast=forecast(plateau=0.99, eta=300.0)), CV, p, now=T0)
    ending = decide(
        with_state(job(forecast=forecast(plateau=0.99, eta=300.0)), opened.state), CV, p, now=T0 + 700
    )
    assert kinds(ending) == [] and ending.advice == "near-completion"
    assert any(
        "the run ends in about 5m, within the rule's 10m window: it is let finish" in r
        for r in ending.reasons
    )
    longer = decide(
        with_state(job(forecast=forecast(plateau=0.99, eta=3600.0)), opened.state), CV, p, now=T0 + 700
    )
    assert kinds(longer) == [ActionKind.CHECKPOINT]
    rec = policy({"plateau": {"probability": 0.9, "for": "10m", "action": "Recommend"}})
    quiet = decide(
        with_state(job(forecast=forecast(plateau=0.99, eta=300.0)), opened.state), CV, rec, now=T0 + 700
    )
    assert kinds(quiet) == []


def test_a_run_reported_done_that_still_holds_its_quota_is_pointed_out_never_acted_on() -> None:
    """100% reported, then silence; its TrainJob is not Complete and its Workload still admitted:
    a final save or teardown that hangs holds the GPUs with nothing saying so. A whole stall window
    later it is recommended for a look, in any mode, and nothing is done to it."""
    from advisor.model import LifecycleSignals, Phase

    signals = LifecycleSignals(has_workload=True, workload_active=True, workload_admitted=True)
    done = job(
        phase=Phase.FINISHED,
        phase_reason="the trainer reports 100% progress",
        phase_since=T0 - 40 * 60,
        signals=signals,
        gpus=8,
    )
    for mode in ("Recommend", "Apply"):
        d = decide(done, CV, policy({"stall": {"for": "30m"}}, mode=mode), now=T0)
        assert kinds(d) == [ActionKind.RECOMMEND] and d.advice == "done-holding", d
        assert "reported done 40m ago" in d.actions[0].reason and "8 GPU(s)" in d.actions[0].reason
    early = dataclasses.replace(done, phase_since=T0 - 10 * 60)
    d = decide(early, CV, policy({"stall": {"for": "30m"}}), now=T0)
    assert kinds(d) == [] and d.recheck_at == T0 + 20 * 60
    completed = dataclasses.replace(done, signals=dataclasses.replace(signals, complete=True))
    assert kinds(decide(completed, CV, policy({"stall": {"for": "30m"}}), now=T0)) == []
    assert kinds(decide(done, CV, policy({"plateau": {"for": "10m"}}), now=T0)) == []  # no stall rule
    # deleted, not done: a finalizer holds it, and the recommendation says that
    going = dataclasses.replace(done, signals=dataclasses.replace(signals, deleting=True))
    d = decide(going, CV, policy({"stall": {"for": "30m"}}, mode="Apply"), now=T0)
    assert kinds(d) == [ActionKind.RECOMMEND] and "being deleted for 40m" in d.actions[0].reason
    assert "finalizer" in d.actions[0].reason and "reported done" not in d.actions[0].reason


def test_a_plateau_sequence_in_flight_keeps_its_window_asks_once_and_releases_at_the_timeout() -> None:
    """A forecast that turns (here: one predicting a rise, which closes an open window) after the
    checkpoint request neither abandons the sequence nor opens a new one: the window keeps its
    start, no second checkpoint is asked for, and the release follows the first request's timeout
    (releaseOnTimeout), as it does on a controller that took over from the one that asked."""
    p = policy(
        {
            "plateau": {"probability": 0.6, "for": "20s"},
            "quotaRelease": {"checkpointFirst": True, "checkpointTimeout": "1m", "releaseOnTimeout": True},
        },
        safety={"minRuntime": "0s", "cooldown": "1m"},
    )
    flat = forecast(plateau=0.98, loss=1.5, final=1.505, points=60)
    first = decide(job(forecast=flat), CV, p, now=T0)
    assert first.state["plateau.since"] == T0
    due = decide(with_state(job(forecast=flat), first.state), CV, p, now=T0 + 21)
    assert kinds(due) == [ActionKind.CHECKPOINT]
    asked = dataclasses.replace(
        record(ActionKind.CHECKPOINT, T0 + 21, rule="plateau", rid="ck-1"), timeout_s=60.0
    )
    pending = dataclasses.replace(job().checkpoint, pending_request="ck-1", pending_since=T0 + 21)
    state = due.state
    for i, fc in enumerate(
        (
            forecast(plateau=1.0, loss=1.5, final=1.523, points=61),  # a rise: not a plateau
            forecast(plateau=0.3, loss=1.5, final=1.49, points=62),
            forecast(plateau=0.2, loss=1.5, final=1.49, points=63),
            flat,
            flat,
        )
    ):
        now = T0 + 22 + 10 * i
        d = decide(with_state(job(forecast=fc, actions=(asked,), checkpoint=pending), state), CV, p, now=now)
        assert kinds(d) == [], (now, d.reasons)
        assert d.state.get("plateau.since") == T0, (now, d.reasons)
        assert d.advice == "plateau:release", (now, d.advice)
        state = d.state
    # the request timed out (the loop records it): the release follows, once
    timed_out = dataclasses.replace(asked, outcome="timed-out")
    done = job(forecast=forecast(plateau=0.2, loss=1.5, final=1.49, points=64), actions=(timed_out,))
    d = decide(with_state(done, state), CV, p, now=T0 + 81)
    assert kinds(d) == [ActionKind.RELEASE_QUOTA], d.reasons
    assert "releaseOnTimeout" in d.actions[0].reason


def test_a_window_opened_again_goes_on_from_the_request_still_pending_on_the_same_pods() -> None:
    """A window started over while the rule's checkpoint request still waits for its answer (the
    rule state lost, say) does not ask the same pods a second time: the window goes on from that
    request, waits for it, and releases at its timeout."""
    p = policy(
        {
            "plateau": {"probability": 0.6, "for": "20s"},
            "quotaRelease": {"checkpointFirst": True, "checkpointTimeout": "1m", "releaseOnTimeout": True},
        },
        safety={"minRuntime": "0s", "cooldown": "1s"},
    )
    flat = forecast(plateau=0.98, loss=1.5, final=1.505)
    asked = dataclasses.replace(record(ActionKind.CHECKPOINT, T0, rule="plateau", rid="ck-1"), timeout_s=60.0)
    pending = dataclasses.replace(job().checkpoint, pending_request="ck-1", pending_since=T0)
    waiting = job(forecast=flat, actions=(asked,), checkpoint=pending, rule_state={"plateau.since": T0 + 30})
    d = decide(waiting, CV, p, now=T0 + 55)
    assert kinds(d) == [] and any("waiting for checkpoint" in r for r in d.reasons), d.reasons
    assert d.state["plateau.since"] == T0 and d.advice == "plateau:release"  # from the request
    timed_out = dataclasses.replace(asked, outcome="timed-out")
    late = job(forecast=flat, actions=(timed_out,), rule_state=d.state)
    d = decide(late, CV, p, now=T0 + 61)
    assert kinds(d) == [ActionKind.RELEASE_QUOTA] and "releaseOnTimeout" in d.actions[0].reason


def test_hold_at_peak_lr_keeps_a_flat_run_whose_lr_has_not_decayed_until_its_decay_begins() -> None:
    """A warmup-stable-decay run is flat in its stable phase, its LR at its peak, and drops only in
    its final decay: with ``holdAtPeakLR`` the plateau rule does not release it while its forecast
    warns that the LR has not begun to decay; the window stays open and the rule acts on the first
    forecast without the warning. Without the option, the rule releases as before."""
    from advisor.forecast.core import PEAK_LR_WARNING

    warned = forecast(
        plateau=0.99, final=1.0, warnings=(f"{PEAK_LR_WARNING} (40% of total_steps left): ...",)
    )
    held = policy({"plateau": {"probability": 0.9, "for": "10m", "holdAtPeakLR": True}})
    since = {"plateau.since": T0 - HOUR}
    d = decide(with_state(job(forecast=warned), since), CV, held, now=T0)
    # said as a held action (ADVICE plateau:held, an ActionHeld Event), as a cooldown's hold is
    assert kinds(d) == [ActionKind.RECOMMEND] and d.advice == "plateau:held"
    assert d.actions[0].params["would"] == ActionKind.RELEASE_QUOTA.value
    assert "holdAtPeakLR" in d.actions[0].params["held"] and "much of the run left" in d.actions[0].reason
    assert d.state["plateau.since"] == T0 - HOUR
    assert any("holdAtPeakLR" in r for r in d.reasons), d.reasons
    # a run that reports no total is not said to have much of it left
    no_total = dataclasses.replace(job(forecast=warned), total_steps=None)
    d_nt = decide(with_state(no_total, since), CV, held, now=T0)
    assert "total_steps unknown" in d_nt.actions[0].reason and d_nt.advice == "plateau:held"
    # the decay has begun (no warning): the window held open acts at once
    decayed = forecast(plateau=0.99, final=1.0)
    d2 = decide(with_state(job(forecast=decayed), d.state), CV, held, now=T0 + 300)
    assert kinds(d2) == [ActionKind.CHECKPOINT] and d2.advice == "plateau:release"
    # the option is off by default: the warned run is released as before
    plain = policy({"plateau": {"probability": 0.9, "for": "10m"}})
    d3 = decide(with_state(job(forecast=warned), since), CV, plain, now=T0)
    assert kinds(d3) == [ActionKind.CHECKPOINT]
    # Recommend only advises: nothing to hold
    rec = policy({"plateau": {"probability": 0.9, "for": "10m", "holdAtPeakLR": True, "action": "Recommend"}})
    d4 = decide(with_state(job(forecast=warned), since), CV, rec, now=T0)
    assert kinds(d4) == [ActionKind.RECOMMEND]


def test_a_sequence_a_policy_change_abandons_is_named_and_one_carried_on_is_not() -> None:
    """``release.abandoned``: what the controller records (once) as a cancelled release."""
    from advisor.model import ActionRecord, CheckpointState
    from policies.rules.release import CANCELLED, abandoned, in_flight

    p = policy({"plateau": {"probability": 0.9, "for": "30m"}})
    j = job(forecast=forecast(plateau=0.95))
    d1 = decide(j, CV, p, now=T0)
    d2 = decide(with_state(j, d1.state), CV, p, now=T0 + 31 * 60)
    assert kinds(d2) == [ActionKind.CHECKPOINT]
    asked = ActionRecord(
        kind=ActionKind.CHECKPOINT,
        time=T0 + 31 * 60,
        request_id="ck-1",
        policy="p",
        rule="plateau",
        outcome="requested",
        reason=d2.actions[0].reason,
    )
    pending = dataclasses.replace(
        with_state(j, d2.state),
        actions=(asked,),
        checkpoint=CheckpointState(pending_request="ck-1", pending_since=asked.time),
    )
    now = T0 + 32 * 60
    waiting = decide(pending, CV, p, now=now)
    assert kinds(waiting) == [] and abandoned(pending, waiting) is None  # the sequence goes on
    longer = decide(pending, CV, policy({"plateau": {"probability": 0.9, "for": "1h"}}), now=now)
    assert abandoned(pending, longer) is None  # put off to the longer window's end, not cancelled
    recommend = decide(
        pending, CV, policy({"plateau": {"probability": 0.9, "for": "30m"}}, mode="Recommend"), now=now
    )
    gone = abandoned(pending, recommend)
    assert gone is not None and gone.request.request_id == "ck-1" and gone.final is ActionKind.RELEASE_QUOTA
    assert gone.why == "policy p is in Recommend mode now"
    # once marked cancelled, the sequence is over: not in flight, not named again
    marked = dataclasses.replace(pending, actions=(dataclasses.replace(asked, detail=CANCELLED + gone.why),))
    assert in_flight(marked, "plateau", T0) is None and abandoned(marked, recommend) is None
