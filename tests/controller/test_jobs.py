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
