"""Kueue v1beta2 and v1beta1: the served version is discovered, and both read the same."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from advisor.controller.kueue import (
    KUEUE_VERSION,
    parse_cluster_queue,
    parse_workload,
)
from advisor.controller.kueue_client import choose_version, discover_version
from tests.controller.fakes import workload


@pytest.mark.parametrize(
    ("served", "chosen"),
    [
        (["v1beta2", "v1beta1"], "v1beta2"),
        (["v1beta1", "v1beta2"], "v1beta2"),
        (["v1beta1"], "v1beta1"),
        (["v1alpha1", "v1beta1"], "v1beta1"),
        (["v1alpha1"], None),
        ([], None),
    ],
)
def test_the_newest_served_version_this_client_reads_wins(served: list[str], chosen: str | None) -> None:
    assert choose_version(served) == chosen


class _Apis:
    """What ``kubernetes.client.ApisApi(...).get_api_versions()`` returns, for a list of groups."""

    def __init__(self, groups: dict[str, list[str]] | Exception) -> None:
        self.groups = groups

    def get_api_versions(self) -> Any:
        if isinstance(self.groups, Exception):
            raise self.groups
        return SimpleNamespace(
            groups=[
                SimpleNamespace(name=name, versions=[SimpleNamespace(version=v) for v in versions])
                for name, versions in self.groups.items()
            ]
        )


@pytest.mark.parametrize(
    ("groups", "version", "said"),
    [
        ({"kueue.x-k8s.io": ["v1beta2", "v1beta1"], "apps": ["v1"]}, "v1beta2", "using v1beta2"),
        ({"kueue.x-k8s.io": ["v1beta1"]}, "v1beta1", "using v1beta1"),
        ({"trainer.kubeflow.org": ["v1alpha1"]}, KUEUE_VERSION, "not served (no Kueue)"),
        ({"kueue.x-k8s.io": ["v1alpha9"]}, KUEUE_VERSION, "none of v1beta2, v1beta1"),
        (RuntimeError("connection refused"), KUEUE_VERSION, "discovery failed (connection refused)"),
    ],
)
def test_discovery_picks_a_served_version_or_says_why_not(
    monkeypatch: pytest.MonkeyPatch, groups: Any, version: str, said: str
) -> None:
    from kubernetes import client

    monkeypatch.setattr(client, "ApisApi", lambda api_client: _Apis(groups))
    chosen, why = discover_version(object())
    assert chosen == version and said in why


def _as_v1beta1(obj: dict[str, Any]) -> dict[str, Any]:
    """The same Workload as Kueue's v1beta1 writes it (its misspelt execution-time field)."""
    status = dict(obj.get("status") or {})
    status["accumulatedPastExexcutionTimeSeconds"] = status.pop("accumulatedPastExecutionTimeSeconds")
    return {**obj, "apiVersion": "kueue.x-k8s.io/v1beta1", "status": status}


def test_a_v1beta1_workload_reads_like_its_v1beta2_twin() -> None:
    v2 = workload(gpus=16, priority=7)
    v2["status"]["accumulatedPastExecutionTimeSeconds"] = 1234
    assert parse_workload(v2).past_execution_seconds == 1234.0
    assert parse_workload(_as_v1beta1(v2)) == parse_workload(v2)


def test_a_v1beta1_cluster_queue_names_its_cohort_cohort() -> None:
    spec = {
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "16"}]}
                ],
            }
        ]
    }
    v2 = parse_cluster_queue({"metadata": {"name": "cq"}, "spec": {**spec, "cohortName": "org"}})
    v1 = parse_cluster_queue({"metadata": {"name": "cq"}, "spec": {**spec, "cohort": "org"}})
    assert v1 == v2 and v1.cohort == "org" and v1.nominal_gpus == 16


def test_the_operator_watches_and_lists_the_version_it_was_given() -> None:
    from advisor.controller.engine import Engine, EngineConfig
    from advisor.controller.operator import build_registry
    from advisor.controller.operator_options import OperatorOptions
    from tests.controller.fakes import FakeApi

    engine = Engine(FakeApi(), config=EngineConfig(writer_workers=0))
    options = OperatorOptions(kueue_version="v1beta1")
    registry = build_registry(engine, SimpleNamespace(api_client=None), options)  # type: ignore[arg-type]
    kueue = {
        (h.selector.any_name, h.selector.version)  # type: ignore[union-attr]
        for h in registry._watching.get_all_handlers()  # the public API has no listing
        if h.selector.group == "kueue.x-k8s.io"  # type: ignore[union-attr]
    }
    assert kueue == {("workloads", "v1beta1"), ("clusterqueues", "v1beta1"), ("localqueues", "v1beta1")}


def test_the_api_says_whether_a_kind_is_served(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the controller reads before warning that PyTorchJobs are not served."""
    from kubernetes import client

    from advisor.controller.api import ClusterApi

    api = ClusterApi.__new__(ClusterApi)
    api.api_client = object()
    monkeypatch.setattr(client, "ApisApi", lambda api_client: _Apis({"kubeflow.org": ["v1"]}))
    assert api.serves("kubeflow.org", "v1") is True and api.serves("kubeflow.org", "v2") is False
    monkeypatch.setattr(client, "ApisApi", lambda api_client: _Apis({"trainer.kubeflow.org": ["v1alpha1"]}))
    assert api.serves("kubeflow.org", "v1") is False
    monkeypatch.setattr(client, "ApisApi", lambda api_client: _Apis(RuntimeError("refused")))
    assert api.serves("kubeflow.org", "v1") is None
