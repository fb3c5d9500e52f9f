"""The Kueue-like quota model: admission, borrowing/lending, queueing and victim choice."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.quota import ClusterQueueSpec, QuotaError, QuotaModel, Workload
from simulator.scenario import most_admitted

_uid = iter(range(10**9))


def wl(cq: str, gpus: int, prio: int = 0, t: float = 0.0) -> Workload:
    u = next(_uid)
    return Workload(uid=u, job=f"ns/j{u}", cluster_queue=cq, gpus=gpus, priority=prio, created_at=t)


def cohort(**kw: object) -> QuotaModel:
    a = ClusterQueueSpec("a", 8, cohort="c", **kw)  # type: ignore[arg-type]
    b = ClusterQueueSpec("b", 8, cohort="c", **kw)  # type: ignore[arg-type]
    return QuotaModel([a, b])


def test_admits_within_nominal_and_queues_the_rest() -> None:
    q = QuotaModel([ClusterQueueSpec("a", 8)])
    w1, w2, w3 = wl("a", 4), wl("a", 4), wl("a", 4)
    for w in (w1, w2, w3):
        q.submit(w)
    admitted, preempted = q.schedule(0.0)
    assert [w.uid for w in admitted] == [w1.uid, w2.uid] and preempted == []
    assert q.usage("a") == 8 and not w3.admitted
    q.release(w1)
    admitted, _ = q.schedule(1.0)
    assert admitted == [w3]


def test_borrowing_from_an_idle_cohort_member_and_its_limit() -> None:
    q = cohort(borrowing_limit=4)
    big = wl("a", 12)
    q.submit(big)
    assert q.schedule(0.0)[0] == [big] and q.borrowing("a") == 4
    too_big = wl("a", 2)
    q.submit(too_big)
    assert q.schedule(0.0)[0] == []  # borrowing limit reached


def test_lending_limit_keeps_part_of_the_nominal_quota_exclusive() -> None:
    a = ClusterQueueSpec("a", 8, cohort="c")
    b = ClusterQueueSpec("b", 8, cohort="c", lending_limit=2)
    q = QuotaModel([a, b])
    w = wl("a", 11)
    q.submit(w)
    assert q.schedule(0.0)[0] == []
    w2 = wl("a", 10)
    q.submit(w2)
    assert q.schedule(0.0)[0] == [w2]


def test_strict_fifo_blocks_behind_the_head_best_effort_does_not() -> None:
    for strategy, expect_small in (("StrictFIFO", False), ("BestEffortFIFO", True)):
        q = QuotaModel([ClusterQueueSpec("a", 8, queueing_strategy=strategy)])
        running = wl("a", 6)
        q.submit(running)
        q.schedule(0.0)
        head, small = wl("a", 4, t=1.0), wl("a", 2, t=2.0)
        q.submit(head)
        q.submit(small)
        q.schedule(3.0)
        assert small.admitted is expect_small


def test_within_cluster_queue_preempts_lowest_priority_most_recent_first() -> None:
    q = QuotaModel([ClusterQueueSpec("a", 8, within_cluster_queue="LowerPriority")])
    old_low, new_low, mid = wl("a", 2, prio=0, t=0), wl("a", 2, prio=0, t=1), wl("a", 4, prio=5, t=2)
    for i, w in enumerate((old_low, new_low, mid)):
        q.submit(w)
        q.schedule(float(i))
    high = wl("a", 2, prio=10, t=5)
    q.submit(high)
    admitted, preempted = q.schedule(10.0)
    assert [p.victim.uid for p in preempted] == [new_low.uid]  # most recently admitted of the lowest
    assert preempted[0].reason == "InClusterQueue" and admitted == [high]


def test_equal_priority_is_never_preempted_under_lower_priority() -> None:
    q = QuotaModel([ClusterQueueSpec("a", 4, within_cluster_queue="LowerPriority")])
    first = wl("a", 4, prio=5)
    q.submit(first)
    q.schedule(0.0)
    q.submit(wl("a", 4, prio=5, t=1))
    assert q.schedule(1.0) == ([], [])


def test_reclaim_takes_borrowers_of_other_queues_before_own_queue() -> None:
    q = cohort(within_cluster_queue="LowerPriority", reclaim_within_cohort="Any")
    own_low = wl("a", 4, prio=0, t=0)
    q.submit(own_low)
    q.schedule(0.0)
    borrower = wl("b", 12, prio=100, t=1)  # b borrows 4 of a's GPUs (8 + 4)
    q.submit(borrower)
    q.schedule(1.0)
    assert borrower.admitted and q.borrowing("b") == 4
    need = wl("a", 4, prio=1, t=2)  # within a's nominal: a reclaim
    q.submit(need)
    admitted, preempted = q.schedule(2.0)
    victims = [p.victim.uid for p in preempted]
    # other queues' borrowers come first in Kueue's ordering, even at a higher priority
    assert victims == [borrower.uid] and preempted[0].reason == "InCohortReclamation"
    assert need in admitted


def test_minimal_victim_set_after_reverse_pruning() -> None:
    q = QuotaModel([ClusterQueueSpec("a", 8, within_cluster_queue="LowerPriority")])
    small, big = wl("a", 2, prio=0, t=0), wl("a", 6, prio=1, t=1)
    for w in (small, big):
        q.submit(w)
        q.schedule(0.0)
    targets = q.preemption_targets(wl("a", 6, prio=10, t=5))
    assert targets is not None and [p.victim.uid for p in targets] == [big.uid]


def test_priority_boost_protects_a_victim_only_when_the_gate_is_on() -> None:
    for gate, protected in ((True, True), (False, False)):
        q = QuotaModel(
            [ClusterQueueSpec("a", 4, within_cluster_queue="LowerPriority")], priority_boost_enabled=gate
        )
        victim = wl("a", 4, prio=0)
        q.submit(victim)
        q.schedule(0.0)
        q.set_boost(victim, 1000)
        q.submit(wl("a", 4, prio=10, t=1))
        _admitted, preempted = q.schedule(1.0)
        assert (preempted == []) is protected


def test_bad_specs_are_rejected_with_the_queue_and_field() -> None:
    with pytest.raises(QuotaError, match="a: within_cluster_queue"):
        ClusterQueueSpec("a", 4, within_cluster_queue="Sometimes")
    with pytest.raises(QuotaError, match="borrowing_limit needs a cohort"):
        ClusterQueueSpec("a", 4, borrowing_limit=2)
    with pytest.raises(QuotaError, match="unknown ClusterQueue"):
        QuotaModel([ClusterQueueSpec("a", 4)]).submit(wl("zz", 1))


def test_a_cluster_file_that_is_not_yaml_is_one_line_naming_where(tmp_path: Path) -> None:
    """PyYAML's message quoted its own ``in "<unicode string>"`` twice, over several lines."""
    from simulator.scenario import load_cluster

    bad = tmp_path / "cluster.yaml"
    bad.write_text("clusterQueues: [oops\n")
    with pytest.raises(QuotaError) as caught:
        load_cluster(bad)
    message = str(caught.value)
    assert message.startswith(f"{bad}: cannot read cluster: not valid YAML: line 2, column 1: ")
    assert "unicode string" not in message and "\n" not in message


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("ab"), st.integers(1, 8), st.integers(0, 3), st.booleans()),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from([None, 0, 4]),
    st.sampled_from([None, 2, 8]),
)
def test_quota_is_never_exceeded(
    ops: list[tuple[str, int, int, bool]], borrow: int | None, lend: int | None
) -> None:
    specs = [
        ClusterQueueSpec(
            n,
            8,
            cohort="c",
            borrowing_limit=borrow,
            lending_limit=lend,
            within_cluster_queue="LowerPriority",
            reclaim_within_cohort="Any",
            borrow_within_cohort="LowerPriority",
        )
        for n in "ab"
    ]
    q = QuotaModel(specs)
    live: list[Workload] = []
    for i, (cq, gpus, prio, finish_one) in enumerate(ops):
        w = wl(cq, gpus, prio, t=float(i))
        q.submit(w)
        live.append(w)
        _admitted, preempted = q.schedule(float(i))
        for p in preempted:
            q.submit(p.victim)  # requeued like Kueue does
        q.schedule(float(i))
        if finish_one:
            done = next((x for x in live if x.admitted), None)
            if done is not None:
                q.release(done)
                live.remove(done)
        for name in "ab":
            used = sum(x.gpus for x in q.queues[name].admitted.values())
            assert used == q.usage(name)
            if borrow is not None:
                assert used <= 8 + borrow
        guaranteed = 0 if lend is None else 8 - lend
        assert q.usage() <= 16
        # what the cohort lends is never exceeded: each queue keeps its exclusive part
        assert sum(max(0, q.usage(n) - guaranteed) for n in "ab") <= 2 * (8 - guaranteed)


def test_a_preemptor_under_nominal_that_would_borrow_reclaims_and_preempts_in_its_own_queue() -> None:
    # Kueue's classicalPreemptions: borrowWithinCohort is Never, the queue is under its nominal
    # quota, so the attempt without borrowing comes first; the cohort member's borrowed workload
    # and the queue's own lower-priority one both go, and the preemptor ends within nominal
    a = ClusterQueueSpec(
        "a", 4, cohort="c", within_cluster_queue="LowerPriority", reclaim_within_cohort="LowerPriority"
    )
    q = QuotaModel([a, ClusterQueueSpec("b", 4, cohort="c")])
    own, b1, b2 = wl("a", 2, t=0), wl("b", 4, t=1), wl("b", 2, t=2)
    for i, w in enumerate((own, b1, b2)):
        q.submit(w)
        q.schedule(float(i))
    high = wl("a", 4, prio=10, t=3)
    q.submit(high)
    admitted, preempted = q.schedule(3.0)
    assert admitted == [high]
    assert {(p.victim.uid, p.reason) for p in preempted} == {
        (own.uid, "InClusterQueue"),
        (b2.uid, "InCohortReclamation"),
    }


def test_a_queue_within_its_nominal_quota_gets_the_cohort_s_free_gpus_before_a_borrowing_one() -> None:
    # Kueue tries a cycle's heads that fit without borrowing first, whatever the queues' names
    q = QuotaModel([ClusterQueueSpec("a", 8, cohort="c"), ClusterQueueSpec("b", 8, cohort="c")])
    a1, b1 = wl("a", 8, t=0), wl("b", 4, t=1)
    for w in (a1, b1):
        q.submit(w)
    q.schedule(1.0)
    borrower, own = wl("a", 4, t=2), wl("b", 4, t=3)  # 4 GPUs left: a would borrow them, b not
    q.submit(borrower)
    q.submit(own)
    admitted, _ = q.schedule(3.0)
    assert admitted == [own] and not borrower.admitted


@pytest.mark.parametrize(
    "specs",
    [
        [ClusterQueueSpec("a", 8)],
        [ClusterQueueSpec("a", 16, cohort="c"), ClusterQueueSpec("b", 8, cohort="c")],
        [ClusterQueueSpec("a", 16, cohort="c", borrowing_limit=2), ClusterQueueSpec("b", 8, cohort="c")],
        [ClusterQueueSpec("a", 16, cohort="c"), ClusterQueueSpec("b", 8, cohort="c", lending_limit=3)],
        [ClusterQueueSpec("a", 16, cohort="c", lending_limit=4), ClusterQueueSpec("b", 0, cohort="c")],
    ],
)
def test_most_admitted_is_the_largest_size_the_fit_test_admits_into_an_empty_cluster(
    specs: list[ClusterQueueSpec],
) -> None:
    """``simulate`` warns of trace jobs above it: they would never be admitted."""
    most = most_admitted(specs)
    q = QuotaModel(specs)
    for spec in specs:
        assert q._fits(spec.name, most[spec.name], {}), spec.name
        assert not q._fits(spec.name, most[spec.name] + 1, {}), spec.name
