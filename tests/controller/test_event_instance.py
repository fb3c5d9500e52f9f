"""Events name the controller that posted them (``reportingInstance``): two releases side by side
(namespace shards) both post as the component trainjob-advisor, and a user reading an Event must
be able to tell which one acted."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from advisor.controller.api import COMPONENT, ClusterApi


class _Core:
    def __init__(self) -> None:
        self.posted: list[Any] = []

    def create_namespaced_event(self, namespace: str, body: Any) -> None:
        self.posted.append(body)


def test_an_event_carries_the_instance_the_controller_was_given() -> None:
    api = ClusterApi(client.ApiClient())
    api.core = _Core()  # type: ignore[assignment]
    involved = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "name": "j",
        "namespace": "a",
    }
    api.create_event(involved, reason="Released", message="m")
    api.instance = "shard-b-trainjob-advisor/shard-b-trainjob-advisor-5d9f-x2"
    api.create_event(involved, reason="Released", message="m")
    first, second = api.core.posted  # type: ignore[attr-defined]
    assert first.reporting_instance == COMPONENT and first.reporting_component == COMPONENT
    assert second.reporting_instance == "shard-b-trainjob-advisor/shard-b-trainjob-advisor-5d9f-x2"
