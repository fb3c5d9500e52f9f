"""The hazard the preemption guard reads to call a queue one "that evicts often" is the checkpoint
rule's estimate (``policies.rules.checkpoint.queue_rate``): the queue's evictions over its admitted
time shrunk toward the policy's ``defaultHazardPerHour``. Read bare, one eviction 78 s after an
admission made a queue evict "46.15/workload-hour" and every first-in-line workload on it
checkpoint every ``staleAfter`` for hours."""

from __future__ import annotations

import pytest
from policy_builders import HOUR, T0, cluster, job, policy

from advisor.model import CheckpointState, ClusterQueueView, ClusterView, JobView, WorkloadView
from policies import decide
from policies.hazard import rates_of
from policies.rules.checkpoint import queue_rate

GUARD = {"staleAfter": "10m", "likelyVictims": True, "likelyHazardPerHour": 0.05}


def _wl(name: str, at: float) -> WorkloadView:
    return WorkloadView(
        namespace="team-a",
        name=name,
        cluster_queue="spot",
        gpus=8,
        priority=0,
        admitted=True,
        admitted_at=at,
        job=f"team-a/{name}",
    )


def _spot(events: int, admitted_s: float) -> ClusterView:
    evidence = {"spot": (events, admitted_s)}
    q = ClusterQueueView(name="spot", nominal_gpus=16, usage_gpus=16, within_cluster_queue="LowerPriority")
    # ft-1 admitted last: first in Kueue's victim order among equals
    return cluster(
        [q],
        [_wl("ft-1", T0 - 20 * 60), _wl("peer", T0 - 2 * HOUR)],
        hazard_evidence=evidence,
        preemption_rate=rates_of(evidence),
    )


def _job() -> JobView:
    return job(cluster_queue="spot", checkpoint=CheckpointState(last_time=T0 - 2 * HOUR, cost_seconds=30.0))


def _guard_reasons(c: ClusterView, rules: dict[str, object]) -> list[str]:
    d = decide(_job(), c, policy(rules), now=T0)
    return [a.reason for a in d.actions if "victim order" in a.reason]


def test_one_early_eviction_does_not_make_a_queue_evict_often() -> None:
    one = _spot(1, 78.0)
    assert one.preemption_rate["spot"] * HOUR == pytest.approx(46.15, abs=0.01)  # the bare rate
    # the checkpoint rule's prior (the field's default 0.01/h without a checkpoint rule):
    # (1 + 1) / (78 s + 100 h) = 0.02/h, below likelyHazardPerHour
    assert _guard_reasons(one, {"preemptionGuard": GUARD}) == []
    disabled = {"checkpoint": {"enabled": False}, "preemptionGuard": GUARD}
    assert _guard_reasons(one, disabled) == []


def test_the_guard_reads_the_checkpoint_rules_estimate() -> None:
    one = _spot(1, 78.0)
    # the sample policy's prior, 0.1/h: (1 + 1) / (78 s + 10 h) = 0.20/h, above 0.05
    rules = {"checkpoint": {"enabled": False, "defaultHazardPerHour": 0.1}, "preemptionGuard": GUARD}
    (reason,) = _guard_reasons(one, rules)
    expected = queue_rate(one, "spot", policy(rules).rules.checkpoint) * HOUR
    assert expected == pytest.approx(2 / (78 / HOUR + 10))
    assert f"which evicts {expected:.2f}/workload-hour" in reason and "46" not in reason


def test_a_queue_that_keeps_evicting_is_still_one_that_evicts_often() -> None:
    busy = _spot(20, 10 * HOUR)
    (reason,) = _guard_reasons(busy, {"preemptionGuard": GUARD})
    # twenty in ten hours: the evidence's own most likely rate, 19 / 10 h, not the default
    # prior's pull toward its 100 hours (21 / 110 h: 0.19/h, ten times below what was seen)
    assert "which evicts 1.90/workload-hour" in reason


def test_a_queue_never_seen_evicting_is_not_one_that_evicts_often_whatever_the_prior() -> None:
    calm = _spot(0, 60.0)
    rules = {"checkpoint": {"enabled": False, "defaultHazardPerHour": 1.0}, "preemptionGuard": GUARD}
    assert _guard_reasons(calm, rules) == []
