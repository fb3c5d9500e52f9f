"""Every write the API server refuses is counted in ``trainjob_advisor_api_write_errors_total`` by
kind: the counter was declared, drawn on the dashboard and documented, and never incremented."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from advisor.controller.jobevents import JobEvents
from advisor.controller.metrics import Metrics
from advisor.controller.policybook import PolicyBook
from advisor.model import JobView
from tests.controller.fakes import ApiError, FakeApi, trainjob


def _errors(registry: CollectorRegistry, kind: str) -> float | None:
    return registry.get_sample_value("trainjob_advisor_api_write_errors_total", {"kind": kind})


def test_an_event_the_api_server_refuses_is_a_failed_write() -> None:
    api = FakeApi()

    def refuse(*_: Any, **__: Any) -> Any:
        raise ApiError(403, "Forbidden")

    api.create_event = refuse  # type: ignore[method-assign]
    registry = CollectorRegistry()
    events = JobEvents(api, Metrics(registry))
    events.post(JobView(namespace="team-a", name="llm"), trainjob(), "Recommendation", "a message")
    assert _errors(registry, "event") == 1


def test_a_policy_status_the_api_server_refuses_is_a_failed_write() -> None:
    api = FakeApi()

    def refuse(*_: Any, **__: Any) -> Any:
        raise ApiError(500, "Internal")

    api.patch_policy_status = refuse  # type: ignore[method-assign]
    registry = CollectorRegistry()
    book = PolicyBook(api, Metrics(registry))
    assert book._patch("p", {"jobsMatched": 1}) is False
    with pytest.raises(ApiError):
        book.persist_actions("p", [("r1", 1.0)])
    assert _errors(registry, "advisorpolicy-status") == 2


def test_a_forecast_status_the_api_server_refuses_is_a_failed_write() -> None:
    from tests.controller.fakes import make_engine
    from tests.controller.test_engine import feed

    api = FakeApi()

    def refuse(*_: Any, **__: Any) -> Any:
        raise ApiError(500, "Internal")

    api.patch_forecast_status = refuse  # type: ignore[method-assign]
    api.json_patch_forecast_status = refuse  # type: ignore[method-assign]
    e = make_engine(api)
    feed(e, range(10, 100, 10))
    assert (_errors(e.metrics.registry, "trainjobforecast-status") or 0) >= 1
