"""Failed actions are actions: backoff per job and kind, impossible ones held until the job changes,
and failed attempts counted by the cooldown."""

from __future__ import annotations

import dataclasses

from policy_builders import HOUR, T0, cluster, job, policy, record

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


def test_an_impossible_release_waits_for_the_job_to_change() -> None:
    p = policy(STALL, safety={"cooldown": "0s"})
    stuck = _hung(version="v1", actions=(_failed(T0 - 10 * HOUR, outcome="impossible", stamp="v1"),))
    d = decide(stuck, cluster(), p, now=T0)
    assert d.actions == () and any("impossible on this job" in r for r in d.reasons)
    assert d.recheck_at is None or d.recheck_at > T0  # no timer: it waits for a change
    changed = dataclasses.replace(stuck, version="v2")  # e.g. Kueue created its Workload
    assert [a.kind for a in decide(changed, cluster(), p, now=T0).actions] == [ActionKind.RELEASE_QUOTA]
    assert hold_for(changed, ActionKind.CHECKPOINT, T0) is None  # per kind


def test_a_failed_attempt_counts_toward_the_cooldown() -> None:
    p = policy(STALL, safety={"cooldown": "1h"})
    d = decide(_hung(actions=(_failed(T0 - 20 * 60),)), cluster(), p, now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.RECOMMEND]  # held back, said so
    assert "cooldown 1h (last action 20m ago)" in d.actions[0].params["held"]
