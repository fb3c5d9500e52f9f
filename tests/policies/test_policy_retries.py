"""Failed actions are actions: backoff per job and kind, impossible ones held until the job changes
or an hour passes, and failed attempts counted by the cooldown."""

from __future__ import annotations

import dataclasses
import datetime as dt

from policy_builders import HOUR, T0, cluster, forecast, job, policy, record, with_state

from advisor.model import ActionKind, ActionRecord, JobView
from policies import decide
from policies.retries import BACKOFF_BASE_S, BACKOFF_MAX_S, backoff_s, hold_for

STALL = {"stall": {"for": "10m", "action": "Release"}, "quotaRelease": {"checkpointFirst": False}}


def _hung(**kw: object) -> JobView:
    return job(last_step_change=T0 - HOUR, last_sample_time=T0 - HOUR, **kw)


def _failed(t: float, *, outcome: str = "failed", stamp: str = "", rid: str = "r") -> ActionRecord:
    return dataclasses.replace(
        record(ActionKind.RELEASE_QUOTA, t, rule="stall", outcome=outcome, rid=rid),
        stamp=stamp,
        detail="boom",
    )


def test_the_backoff_doubles_per_failure_and_is_capped() -> None:
    assert backoff_s(0) == 0.0
    assert [backoff_s(n) for n in (1, 2, 3)] == [BACKOFF_BASE_S, 2 * BACKOFF_BASE_S, 4 * BACKOFF_BASE_S]
    assert backoff_s(50) == BACKOFF_MAX_S


def test_a_failed_release_is_not_tried_again_within_its_backoff_window() -> None:
    p = policy(STALL, safety={"cooldown": "0s"})
    one = _hung(actions=(_failed(T0 - 30),))
    d = decide(one, cluster(), p, now=T0)
    assert d.actions == ()
    assert any("backing off: 1 failed release-quota" in r for r in d.reasons)
    assert d.recheck_at == T0 - 30 + BACKOFF_BASE_S
    assert [a.kind for a in decide(one, cluster(), p, now=T0 + 31).actions] == [ActionKind.RELEASE_QUOTA]
    two = _hung(actions=(_failed(T0 - 200, rid="a"), _failed(T0 - 30, rid="b")))
    assert decide(two, cluster(), p, now=T0 + 31).actions == ()  # the second failure doubled it
    assert decide(two, cluster(), p, now=T0 + 91).actions != ()


def test_an_impossible_release_waits_for_the_job_to_change_or_an_hour() -> None:
    p = policy(STALL, safety={"cooldown": "0s"})
    stuck = _hung(version="v1", actions=(_failed(T0 - 600, outcome="impossible", stamp="v1"),))
    d = decide(stuck, cluster(), p, now=T0)
    assert d.actions == () and any("impossible on this job" in r for r in d.reasons)
    assert any("not retried until it changes, or in 50m" in r for r in d.reasons), d.reasons
    changed = dataclasses.replace(stuck, version="v2")  # e.g. Kueue created its Workload
    assert [a.kind for a in decide(changed, cluster(), p, now=T0).actions] == [ActionKind.RELEASE_QUOTA]
    assert hold_for(changed, ActionKind.CHECKPOINT, T0) is None  # per kind


def test_an_impossible_release_is_tried_again_after_an_hour_as_the_job_stands() -> None:
    """A release refused with a 403 (the act role unbound) on a job that then does not change:
    held until the job changed, it was never tried again after the binding came back, through a
    failover and a restart. Once an hour, what made it impossible is looked at again."""
    p = policy(STALL, safety={"cooldown": "0s"})
    stuck = _hung(version="v1", actions=(_failed(T0 - 600, outcome="impossible", stamp="v1"),))
    assert decide(stuck, cluster(), p, now=T0 - 600 + BACKOFF_MAX_S - 1).actions == ()
    again = decide(stuck, cluster(), p, now=T0 - 600 + BACKOFF_MAX_S)
    assert [a.kind for a in again.actions] == [ActionKind.RELEASE_QUOTA]


def test_advice_says_a_refused_release_failed_not_that_it_acts() -> None:
    """A platform trial: with the act role unbound, the release came back 403 and ADVICE went on
    reading the rule's verdict as if the release were under way. Held back as impossible (or in
    its backoff), the rule's ADVICE says ``:failed``; once the job changes it acts again."""
    p = policy(STALL, safety={"cooldown": "0s"})
    stuck = _hung(version="v1", actions=(_failed(T0 - 600, outcome="impossible", stamp="v1"),))
    assert decide(stuck, cluster(), p, now=T0).advice == "hung:failed"
    backing_off = _hung(actions=(_failed(T0 - 30),))
    assert decide(backing_off, cluster(), p, now=T0).advice == "hung:failed"
    changed = dataclasses.replace(stuck, version="v2")
    assert decide(changed, cluster(), p, now=T0).advice == "hung"


def test_a_failed_attempt_counts_toward_the_cooldown() -> None:
    p = policy(STALL, safety={"cooldown": "1h"})
    d = decide(_hung(actions=(_failed(T0 - 20 * 60),)), cluster(), p, now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.RECOMMEND]  # held back, said so
    assert "cooldown 1h (last action 20m ago)" in d.actions[0].params["held"]


def test_checkpoint_requests_that_go_unanswered_back_off() -> None:
    """A job that never answers (no checkpoint hook, or stuck) was asked again at every timeout,
    every two minutes for ever, with a Warning Event each time (a platform engineer's trial)."""

    def unanswered(t: float, rid: str) -> ActionRecord:
        return record(ActionKind.CHECKPOINT, t, rule="preemption-guard", outcome="timed-out", rid=rid)

    one = job(actions=(unanswered(T0 - 30, "a"),))
    hold = hold_for(one, ActionKind.CHECKPOINT, T0)
    assert hold is not None and hold.until == T0 - 30 + BACKOFF_BASE_S
    assert "1 checkpoint request(s) in a row went unanswered (timed out)" in hold.reason
    three = job(actions=(unanswered(T0 - 900, "a"), unanswered(T0 - 600, "b"), unanswered(T0 - 30, "c")))
    assert hold_for(three, ActionKind.CHECKPOINT, T0 + 200) is not None  # 4 minutes after the third
    assert hold_for(three, ActionKind.CHECKPOINT, T0 + 211) is None
    # an acknowledged one ends the run of unanswered ones
    answered = job(
        actions=(
            unanswered(T0 - 900, "a"),
            record(ActionKind.CHECKPOINT, T0 - 600, outcome="acknowledged", rid="b"),
        )
    )
    assert hold_for(answered, ActionKind.CHECKPOINT, T0) is None


def test_a_releases_own_checkpoint_is_not_held_by_unanswered_requests_before_it() -> None:
    """A release's checkpoint is asked once per sequence and its timeout leads to the release: held
    back by the guard's unanswered requests, the release of a job that never answers waited out
    the backoff (up to an hour) instead."""
    p = policy({"plateau": {"probability": 0.9, "for": "30m"}}, safety={"cooldown": "0s"})
    unanswered = record(ActionKind.CHECKPOINT, T0 - 30, rule="preemption-guard", outcome="timed-out", rid="g")
    j = job(forecast=forecast(plateau=0.95), actions=(unanswered,))
    opened = decide(j, cluster(), p, now=T0 - 31 * 60)
    d = decide(with_state(j, opened.state), cluster(), p, now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.CHECKPOINT] and d.actions[0].params[
        "before"
    ] == "release-quota"
    assert hold_for(j, ActionKind.CHECKPOINT, T0) is not None  # the guard's own next request waits


def test_a_running_job_that_is_not_admitted_gets_no_action() -> None:
    """The one lifecycle gate's last clause (``policies.engine.not_running``): a view the core
    calls running, but whose Workload holds no admission, is not judged."""
    from policies.engine import not_running

    p = policy(STALL, safety={"cooldown": "0s"})
    waiting = _hung(admitted=False)
    assert not_running(waiting) == "pending: not admitted"
    d = decide(waiting, cluster(), p, now=T0)
    assert d.actions == () and any("pending: not admitted" in r for r in d.reasons)
    assert [a.kind for a in decide(_hung(), cluster(), p, now=T0).actions] == [ActionKind.RELEASE_QUOTA]


def test_a_job_resumed_by_its_user_gets_a_full_cooldown_from_the_resume() -> None:
    """``trainjob-advisor resume`` records the time on the job; the policies' cooldown runs from
    it, not from the release long before."""
    p = policy(STALL, safety={"cooldown": "1h"})
    released = record(ActionKind.RELEASE_QUOTA, T0 - 3 * HOUR, rule="stall", outcome="done")
    resumed = dt.datetime.fromtimestamp(T0 - 600, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    j = _hung(
        actions=(released,),
        annotations={"advisor.trainjob-advisor.io/resumed-at": resumed},
        phase_since=T0 - 590,  # running again since the resume
    )
    d = decide(j, cluster(), p, now=T0 + 600)  # its stall window (10m) over, 20 minutes after the resume
    assert [a.kind for a in d.actions] == [ActionKind.RECOMMEND]  # held, and said why
    assert d.actions[0].params["held"] == "cooldown 1h (resumed by trainjob-advisor resume 20m ago)"
    assert [a.kind for a in decide(j, cluster(), p, now=T0 + 3100).actions] == [ActionKind.RELEASE_QUOTA]
    unrecorded = _hung(actions=(released,), phase_since=T0 - 590)  # resumed by hand: the release's cooldown
    assert [a.kind for a in decide(unrecorded, cluster(), p, now=T0 + 600).actions] == [
        ActionKind.RELEASE_QUOTA
    ]
