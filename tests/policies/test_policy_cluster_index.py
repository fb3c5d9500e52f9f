"""The per-snapshot index answers what a scan of the snapshot would, part by part.

It is shared by every job's decision against one snapshot, and each part is built only when a rule
asks for it (a stall rule asks every tick for the job's workload alone).
"""

from __future__ import annotations

from advisor.model import ClusterQueueView, ClusterView, WorkloadView
from policies.index import cluster_index


def _snapshot() -> ClusterView:
    return ClusterView(
        cluster_queues={
            "a": ClusterQueueView(name="a", cohort="c", nominal_gpus=8),
            "b": ClusterQueueView(name="b", cohort="c", nominal_gpus=8),
            "solo": ClusterQueueView(name="solo", nominal_gpus=4),
        },
        workloads=(
            WorkloadView(namespace="n", name="w1", cluster_queue="a", gpus=4, admitted=True, job="n/j1"),
            WorkloadView(namespace="n", name="w1-old", cluster_queue="a", gpus=4, job="n/j1"),
            WorkloadView(namespace="n", name="low", cluster_queue="b", gpus=2, priority=1, created_at=5.0),
            WorkloadView(namespace="n", name="high", cluster_queue="b", gpus=2, priority=9, created_at=9.0),
            WorkloadView(namespace="n", name="early", cluster_queue="b", gpus=2, priority=1, created_at=1.0),
        ),
    )


def test_a_jobs_workload_is_the_first_one_listed_for_it() -> None:
    index = cluster_index(_snapshot())
    assert index.by_job["n/j1"].name == "w1"
    assert set(index.by_job) == {"n/j1"}  # workloads of no known job are not indexed


def test_pending_workloads_come_in_kueue_order() -> None:
    index = cluster_index(_snapshot())
    assert [w.name for w in index.pending] == ["high", "early", "low", "w1-old"]


def test_queues_share_quota_with_their_cohort_or_only_themselves() -> None:
    index = cluster_index(_snapshot())
    assert index.sharing["a"] == index.sharing["b"] == frozenset({"a", "b"})
    assert index.sharing["solo"] == frozenset({"solo"})


def test_one_snapshot_shares_one_index_and_parts_are_built_once() -> None:
    snap = _snapshot()
    index = cluster_index(snap)
    assert cluster_index(snap) is index
    assert index.by_job is index.by_job and index.pending is index.pending
    assert cluster_index(_snapshot()) is not index  # an equal but new snapshot gets its own
