"""The one preemption-hazard estimator both adapters use."""

from __future__ import annotations

import math

import pytest

from policies.hazard import Exposure, hazard_by_queue, hazard_evidence, workload_exposure


def test_only_preemptions_and_node_failures_count() -> None:
    e = workload_exposure(
        "q",
        {"Preempted": 2, "NodeFailures": 1, "Deactivated": 5, "PodsReadyTimeout": 3},
        past_admitted_seconds=100.0,
        admitted_since=None,
        now=1000.0,
    )
    assert (e.preemptions, e.failures, e.admitted_seconds) == (2, 1, 100.0)


def test_the_current_admission_counts_as_exposure() -> None:
    e = workload_exposure("q", {}, past_admitted_seconds=0.0, admitted_since=400.0, now=1000.0)
    assert e.admitted_seconds == 600.0 and e.interruptions == 0
    # an admission time in the future (clock skew) adds nothing rather than a negative exposure
    skew = workload_exposure("q", {}, past_admitted_seconds=5.0, admitted_since=2000.0, now=1000.0)
    assert skew.admitted_seconds == 5.0


def test_rates_are_events_over_exposure_per_queue() -> None:
    rates = hazard_by_queue(
        [
            Exposure("a", preemptions=1, admitted_seconds=1800.0),
            Exposure("a", failures=1, admitted_seconds=1800.0),
            Exposure("b", admitted_seconds=60.0),
            Exposure("c"),  # never admitted: no entry, the rules use their default
            Exposure("", preemptions=9, admitted_seconds=1.0),  # queue unknown: ignored
        ]
    )
    assert rates == {"a": pytest.approx(2 / 3600.0), "b": 0.0}


def test_non_finite_accumulated_time_is_ignored() -> None:
    e = workload_exposure("q", {"Preempted": 1}, past_admitted_seconds=math.nan, admitted_since=0.0, now=10.0)
    assert e.admitted_seconds == 10.0


def test_the_rules_plan_for_the_posterior_not_a_lucky_zero() -> None:
    from policies.hazard import hazard_evidence, queue_hazard

    default = 0.1 / 3600.0
    evidence = hazard_evidence(
        [Exposure("young", admitted_seconds=600.0), Exposure("old", admitted_seconds=1e7)]
    )
    young = queue_hazard("young", evidence=evidence, rates={}, default_per_s=default)
    old = queue_hazard("old", evidence=evidence, rates={}, default_per_s=default)
    # ten minutes without a preemption barely move the prior; months of it do
    assert young == pytest.approx(1 / (600.0 + 36000.0)) and young > 0.9 * default
    assert old < 0.01 * default
    busy = hazard_evidence([Exposure("spot", preemptions=50, admitted_seconds=50 * 3600.0)])
    # fifty in fifty hours: the evidence's most likely rate (49 / 50 h), above the mean that the
    # prior's ten hours still pull down (51 / 60 h)
    assert queue_hazard("spot", evidence=busy, rates={}, default_per_s=default) == pytest.approx(
        49 / (50 * 3600.0)
    )
    # an adapter that gives only a rate, and a queue nobody has seen
    assert queue_hazard("x", evidence={}, rates={"x": 0.5}, default_per_s=default) == 0.5
    assert queue_hazard("y", evidence={}, rates={}, default_per_s=default) == default


def test_a_workload_plans_for_its_own_record_with_the_queue_as_prior() -> None:
    from advisor.model import WorkloadView
    from policies.hazard import workload_hazard

    queue = 0.1 / 3600.0  # one interruption in ten hours of admission, across the queue
    fresh = WorkloadView("ns", "a", "q", 8, admitted=True, admitted_at=1000.0)
    assert workload_hazard(queue, fresh, now=1000.0) == pytest.approx(queue)
    assert workload_hazard(queue, None, now=1000.0) == queue  # no workload seen: the queue's
    # ten hours untouched halve it: among equals Kueue evicts the ones admitted later
    settled = WorkloadView("ns", "b", "q", 8, admitted=True, admitted_at=0.0)
    assert workload_hazard(queue, settled, now=36000.0) == pytest.approx(queue / 2)
    # evicted twice in its first hour, admitted again just now: first in line again
    evicted = WorkloadView(
        "ns", "c", "q", 8, admitted=True, admitted_at=5000.0, interruptions=2, past_admitted_seconds=3600.0
    )
    # (the prior's mean would say 3 / 11 h; twice in one hour, the evidence says one an hour)
    assert workload_hazard(queue, evicted, now=5000.0) == pytest.approx(1 / 3600.0)
    assert workload_hazard(queue, evicted, now=5000.0) > 9 * queue
    # a pending workload's exposure is its past admissions only; a queue without hazard stays 0
    pending = WorkloadView("ns", "d", "q", 8, admitted=False, admitted_at=None, past_admitted_seconds=36000.0)
    assert workload_hazard(queue, pending, now=1e9) == pytest.approx(queue / 2)
    assert workload_hazard(0.0, evicted, now=5000.0) == 0.0


def test_a_job_state_file_gives_a_workload_its_record() -> None:
    from policies.jobstate import cluster_from_dict

    wl = {"namespace": "ns", "name": "a", "clusterQueue": "q", "gpus": 8, "interruptions": 2}
    view = cluster_from_dict({"workloads": [{**wl, "pastAdmittedSeconds": 3600}]}).workloads[0]
    assert (view.interruptions, view.past_admitted_seconds) == (2, 3600.0)


def test_a_priority_plans_for_its_own_record_with_the_queue_as_prior() -> None:
    from policies.hazard import hazard_evidence_by_priority, priority_hazard

    queue = 1 / 3600.0  # the pooled queue: one interruption an hour of admission
    evidence = hazard_evidence_by_priority(
        [
            Exposure("q", admitted_seconds=20 * 3600.0, priority=100),  # never evicted, for a day
            Exposure("q", preemptions=6, admitted_seconds=3600.0, priority=0),  # evicted six times
            Exposure("q", preemptions=1, admitted_seconds=1800.0, priority=0),
            Exposure("", preemptions=9, admitted_seconds=60.0),  # no queue: nobody's evidence
        ]
    )
    assert evidence == {("q", 100): (0, 72000.0), ("q", 0): (7, 5400.0)}
    low = priority_hazard(queue, "q", 0, evidence)
    high = priority_hazard(queue, "q", 100, evidence)
    # seven in an hour and a half: the evidence's most likely rate, 6 / 1.5 h (the mean, pulled
    # toward the queue's one an hour, would say 8 / 2.5 h)
    assert low == pytest.approx(6 / 5400.0) and low > 3 * queue
    assert high == pytest.approx(1 / (72000.0 + 3600.0)) and high < queue / 10
    # a priority nobody has seen on the queue, or a queue without hazard: the queue's rate
    assert priority_hazard(queue, "q", 7, evidence) == queue
    assert priority_hazard(0.0, "q", 0, evidence) == 0.0


def test_a_workload_evicted_again_and_again_plans_for_what_its_record_says() -> None:
    """A platform trial: a low-priority job preempted six times in seven minutes of running (one
    every 70 s) planned, through three levels of priors at 0.1 an hour, for an MTBF of about 2.5
    minutes: an interval longer than its runs, so it never checkpointed and lost all its work at
    every eviction. From two interruptions on, the data's own most likely rate is a floor."""
    from advisor.model import WorkloadView
    from policies.hazard import hazard_evidence_by_priority, priority_hazard, queue_hazard, workload_hazard
    from policies.youngdaly import checkpoint_interval

    default = 0.1 / 3600.0
    lo = WorkloadView(
        "ns",
        "lo",
        "shared",
        8,
        10,
        admitted=True,
        admitted_at=1000.0,
        interruptions=6,
        past_admitted_seconds=400.0,
    )
    now = 1018.0  # 418 s admitted in all
    exposures = [
        Exposure("shared", admitted_seconds=797.0 - 418.0, priority=1000),
        Exposure("shared", preemptions=6, admitted_seconds=418.0, priority=10),
    ]
    queue = queue_hazard("shared", evidence=hazard_evidence(exposures), rates={}, default_per_s=default)
    level = priority_hazard(queue, "shared", 10, hazard_evidence_by_priority(exposures))
    hazard = workload_hazard(level, lo, now)
    assert hazard >= 5 / 418.0  # at least one every 84 s of running
    # a 30 s save: Young/Daly asks for one well within the 70 s it runs between evictions
    assert checkpoint_interval(30.0, hazard) < 60.0
    # a single eviction is still weighed against the prior (no floor from one event)
    once = WorkloadView("ns", "x", "shared", 8, admitted=True, admitted_at=0.0, interruptions=1)
    assert workload_hazard(default, once, 60.0) == pytest.approx(2 / (60.0 + 36000.0))
