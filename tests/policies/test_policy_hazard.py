"""The one preemption-hazard estimator both adapters use."""

from __future__ import annotations

import math

import pytest

from policies.hazard import Exposure, hazard_by_queue, workload_exposure


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
    assert queue_hazard("spot", evidence=busy, rates={}, default_per_s=default) == pytest.approx(
        51 / (50 * 3600.0 + 36000.0)
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
    assert workload_hazard(queue, evicted, now=5000.0) == pytest.approx(3 / (3600.0 + 36000.0))
    assert workload_hazard(queue, evicted, now=5000.0) > 2.5 * queue
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
    assert low == pytest.approx(8 / (5400.0 + 3600.0)) and low > 3 * queue
    assert high == pytest.approx(1 / (72000.0 + 3600.0)) and high < queue / 10
    # a priority nobody has seen on the queue, or a queue without hazard: the queue's rate
    assert priority_hazard(queue, "q", 7, evidence) == queue
    assert priority_hazard(0.0, "q", 0, evidence) == 0.0
