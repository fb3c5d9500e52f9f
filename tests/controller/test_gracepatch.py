"""The advisor's runtime patch of a TrainJob's grace period: read, planned and guarded."""

from __future__ import annotations

from typing import Any

from advisor.controller.gracepatch import MANAGER, grace_entry, patched_grace, set_grace_ops
from advisor.controller.jobs import base_view as job_view

KUEUE_PATCH = {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"spec": {}}}}
GUARD = {"op": "test", "path": "/spec/suspend", "value": True}


def _spec(*patches: dict[str, Any], suspend: bool = True) -> dict[str, Any]:
    return {"suspend": suspend, "runtimePatches": list(patches)}


def test_the_entry_sets_the_trainer_pods_grace_period_and_reads_back() -> None:
    entry = grace_entry(43)
    assert entry["manager"] == MANAGER
    assert patched_grace(_spec(KUEUE_PATCH, entry)) == 43
    assert patched_grace(_spec(KUEUE_PATCH)) is None
    assert patched_grace({}) is None
    # the last patch that sets one wins, as Trainer merges them in order
    other = {**grace_entry(90), "manager": "someone-else"}
    assert patched_grace(_spec(entry, other)) == 90


def test_malformed_patches_are_read_as_none_never_an_error() -> None:
    for bad in (
        {"runtimePatches": "x"},
        {"runtimePatches": [None, 3, {"trainingRuntimeSpec": "x"}]},
        {
            "runtimePatches": [
                {
                    "trainingRuntimeSpec": {
                        "template": {"spec": {"replicatedJobs": [{"name": "node", "template": 1}]}}
                    }
                }
            ]
        },
        _spec({**grace_entry(43), "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": "node"}}}}),
    ):
        assert patched_grace(bad) is None


def test_the_writes_are_an_add_none_or_a_removal_and_always_test_suspend() -> None:
    assert set_grace_ops({"suspend": True}, 43) == [
        GUARD,
        {"op": "add", "path": "/spec/runtimePatches", "value": [grace_entry(43)]},
    ]
    assert set_grace_ops(_spec(KUEUE_PATCH), 43) == [
        GUARD,
        {"op": "add", "path": "/spec/runtimePatches/-", "value": grace_entry(43)},
    ]
    assert set_grace_ops(_spec(KUEUE_PATCH, grace_entry(43)), 43) is None
    # Trainer makes the value immutable: another value removes the advisor's entry first
    assert set_grace_ops(_spec(KUEUE_PATCH, grace_entry(43)), 60) == [
        GUARD,
        {"op": "test", "path": "/spec/runtimePatches/1/manager", "value": MANAGER},
        {"op": "remove", "path": "/spec/runtimePatches/1"},
    ]


def test_the_job_view_reads_the_grace_period_the_next_start_gets() -> None:
    body = {
        "metadata": {"namespace": "ns", "name": "j", "uid": "u", "generation": 2},
        "spec": _spec(KUEUE_PATCH, grace_entry(43)),
    }
    assert job_view(body).grace_period_s == 43.0
    assert job_view({**body, "spec": _spec(KUEUE_PATCH)}).grace_period_s is None
