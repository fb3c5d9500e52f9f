"""The controller's last line says that it stopped and why: a signal, the leader Lease lost, an
error, or a stop asked by the embedding code. A trial found none: a pod's log ended with kopf's
lines about its tasks, and a leader that lost its Lease said so only before its shutdown.

``run_operator`` runs here with its API, its start-up listing and kopf's run replaced by fakes
(the e2e tier runs the real ones)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

from advisor.controller import operator
from advisor.controller.leader import LeaseConfig
from advisor.controller.operator_options import OperatorOptions
from tests.controller.fakes import FakeApi, FakeLeases


class _Api(FakeApi):
    api_client = None
    instance = ""

    def __init__(self, *_: Any) -> None:
        super().__init__()

    def serves(self, group: str, version: str) -> bool:
        return True


def _run(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    kopf_run: Callable[..., Any],
    stop_flag: threading.Event | None = None,
    **options: Any,
) -> tuple[BaseException | None, list[str]]:
    """``run_operator`` with ``kopf_run`` as kopf's run; returns what it raised, and its lines."""
    monkeypatch.setattr("advisor.controller.api.load_api_client", lambda *a, **k: None)
    monkeypatch.setattr(operator, "ClusterApi", _Api)
    monkeypatch.setattr(operator, "list_saved", lambda *a: [])
    monkeypatch.setattr(operator, "prime", lambda *a: True)
    monkeypatch.setattr(operator, "installed_crd", lambda api_client: lambda name: None)
    monkeypatch.setattr(operator, "resync_policies", lambda *a, **k: None)
    monkeypatch.setattr(operator.kopf, "operator", kopf_run)
    opts = OperatorOptions(metrics_port=None, watch_kueue=False, watch_pytorchjobs=False, **options)
    caplog.set_level(logging.INFO, logger="advisor.controller.operator")
    error: BaseException | None = None
    try:
        asyncio.run(operator.run_operator(opts, stop_flag=stop_flag))
    except BaseException as exc:
        error = exc
    lines = [r.getMessage() for r in caplog.records if r.name == "advisor.controller.operator"]
    return error, lines


def test_a_signal_that_stops_kopf_is_said_in_the_last_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def stopped_by_a_signal(**_: Any) -> None:
        return None  # kopf returns on SIGTERM with its own stop flag unset

    error, lines = _run(monkeypatch, caplog, stopped_by_a_signal)
    assert error is None
    assert lines[-1] == "controller stopped: a signal (SIGTERM or SIGINT)"


def test_an_error_that_ends_kopf_is_said_in_the_last_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(**_: Any) -> None:
        raise RuntimeError("watch refused")

    error, lines = _run(monkeypatch, caplog, broken)
    assert isinstance(error, RuntimeError)
    assert lines[-1] == "controller stopped: an error: RuntimeError: watch refused"


def test_a_stop_asked_by_the_embedding_code_is_said_in_the_last_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stop = threading.Event()

    async def until_stopped(*, stop_flag: asyncio.Event, **_: Any) -> None:
        stop.set()
        await stop_flag.wait()

    error, lines = _run(monkeypatch, caplog, until_stopped, stop_flag=stop)
    assert error is None
    assert lines[-1] == "controller stopped: asked to stop"


def test_a_lost_lease_is_said_in_the_last_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    leases = FakeLeases()
    monkeypatch.setattr("kubernetes.client.CoordinationV1Api", lambda *_: leases)
    lease = LeaseConfig(
        namespace="sys", name="lease", lease_duration_s=0.6, renew_deadline_s=0.4, retry_period_s=0.05
    )

    async def cut_off(*, stop_flag: asyncio.Event, **_: Any) -> None:
        leases.down = True  # the API server stops answering the renewals
        await stop_flag.wait()

    error, lines = _run(monkeypatch, caplog, cut_off, leader_election=lease, identity="me")
    assert isinstance(error, operator.LeadershipLost)
    assert lines[-1] == "controller stopped: lost the leader Lease (not renewed within the renew deadline)"
