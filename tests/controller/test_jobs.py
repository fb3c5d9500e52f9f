"""Reading a TrainJob's shape: through the upstream Kubeflow Trainer models, parsed once per spec."""

from __future__ import annotations

import pytest

from advisor.controller.jobs import base_view, trainer_shape
from tests.controller.fakes import trainjob


def test_the_trainer_spec_is_read_with_the_upstream_model_once_per_distinct_spec() -> None:
    pytest.importorskip("kubeflow_trainer_api")
    trainer_shape.cache_clear()
    for _ in range(5):  # a job reports often; its spec stays the same
        view = base_view(trainjob(nodes=3, gpus_per_node=4))
        assert (view.nodes, view.gpus) == (3, 12)
    info = trainer_shape.cache_info()
    assert (info.misses, info.hits) == (1, 4)
    assert trainer_shape('{"numNodes":2,"resourcesPerNode":{"requests":{"nvidia.com/gpu":"8"}}}') == (2, 8)
    assert trainer_shape('{"numNodes":"two"}') is None  # rejected by the model (numNodes is an int)


def test_a_spec_the_model_rejects_is_still_read_defensively() -> None:
    body = trainjob(nodes=2, gpus_per_node=8)
    body["spec"]["trainer"]["numNodes"] = "banana"
    view = base_view(body)
    assert (view.nodes, view.gpus) == (1, 8)
    body["spec"]["trainer"] = "not-an-object"
    assert base_view(body).nodes == 1


def _pytorchjob(*, master: bool, workers: int, lo: int, hi: int) -> dict:
    pod = {"template": {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}}
    specs: dict = {"Worker": {"replicas": workers, **pod}}
    if master:
        specs["Master"] = {"replicas": 1, **pod}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"namespace": "ml", "name": "e"},
        "spec": {"elasticPolicy": {"minReplicas": lo, "maxReplicas": hi}, "pytorchReplicaSpecs": specs},
    }


def test_an_elastic_pytorchjobs_bounds_are_its_workers_and_a_master_is_a_node_no_resize_touches() -> None:
    """``elasticPolicy.minReplicas`` / ``maxReplicas`` bound ``Worker.replicas`` (the scale
    subresource the HPA resizes); in nodes they are the workers' plus the Master, if any. A
    worker-only job, the usual elastic layout, had been read as if it had a Master."""
    alone = base_view(_pytorchjob(master=False, workers=2, lo=1, hi=4))
    assert (alone.nodes, alone.gpus, alone.min_nodes, alone.max_nodes, alone.fixed_nodes) == (2, 4, 1, 4, 0)
    led = base_view(_pytorchjob(master=True, workers=2, lo=1, hi=4))
    assert (led.nodes, led.gpus, led.min_nodes, led.max_nodes, led.fixed_nodes) == (3, 6, 2, 5, 1)
