"""Fixtures for the e2e tier: a real kube-apiserver + etcd (+ Kueue) per test session.

Why: the e2e tier must exercise the real API semantics (conflicts, status subresource, schema,
RBAC, watches). Where Go is absent every e2e test is skipped with one line saying why; where Go
is present the control plane is built (once, cached outside the checkout) and started. A build
or start failure on such a machine is an error, never a silent skip.

Fixtures: ``control_plane`` (session), ``e2e_binaries`` (session: the binaries, for a module that
starts its own plane), ``admin_api``, ``controller_api`` (session ApiClients),
``e2e_namespace`` (a fresh namespace per test, emptied and deleted after), ``requires_kueue``.
Markers: every test here gets ``e2e``; ``kueue`` / ``requires_kueue`` skip when Kueue is not running.
Set TRAINJOB_ADVISOR_SKIP_E2E=1 to skip the tier on purpose (the reason says so).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import controlplane

E2E_DIR = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requires_kueue: needs real Kueue controllers (minimalkueue)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if E2E_DIR in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.e2e)
            wants_kueue = item.get_closest_marker("kueue") or item.get_closest_marker("requires_kueue")
            if (
                wants_kueue
                and isinstance(item, pytest.Function)
                and "requires_kueue" not in item.fixturenames
            ):
                item.fixturenames.append("requires_kueue")


class _Prepared:
    """What pytest_collection_finish found out: binaries and CRDs, or why the tier cannot run."""

    go: controlplane.Go | None = None
    binaries: controlplane.Binaries | None = None
    crds: ClassVar[list[dict[str, Any]]] = []
    skip_reason: str | None = None
    error: BaseException | None = None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build before any test starts, so a cold build never counts against a test's timeout."""
    if not any(E2E_DIR in Path(str(item.path)).resolve().parents for item in session.items):
        return
    if os.environ.get("TRAINJOB_ADVISOR_SKIP_E2E"):
        _Prepared.skip_reason = "e2e tier skipped: TRAINJOB_ADVISOR_SKIP_E2E is set"
        return
    try:
        _Prepared.go = controlplane.find_go()
    except controlplane.Unavailable as exc:
        _Prepared.skip_reason = f"e2e tier skipped: {exc}"
        return
    capture = session.config.pluginmanager.getplugin("capturemanager")
    live = capture.global_and_fixture_disabled() if capture else contextlib.nullcontext()
    with live:  # a cold build takes many minutes: let its progress lines through
        try:
            _Prepared.binaries = controlplane.ensure_binaries(
                _Prepared.go,
                kueue=True,
                kubectl=True,
                helm=True,
                # minutes to build cold: on request only; used whenever it is cached
                trainer=bool(os.environ.get("TRAINJOB_ADVISOR_BUILD_TRAINER")),
            )
            _Prepared.crds = controlplane.upstream_crds(_Prepared.go)
        except controlplane.HarnessError as exc:
            _Prepared.error = exc


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Fold the tier-wide skip into ONE summary line (pytest would print one per test location)."""
    report = yield
    reason = _Prepared.skip_reason
    if reason and report.skipped and isinstance(report.longrepr, tuple) and reason in str(report.longrepr[2]):
        report.longrepr = (__file__, _SKIP_LINE, f"Skipped: {reason}")
    return report


@pytest.fixture(scope="session")
def control_plane() -> Iterator[controlplane.ControlPlane]:
    if _Prepared.skip_reason:
        pytest.skip(_Prepared.skip_reason)  # reported as this line, once, by pytest_runtest_makereport
    if _Prepared.error is not None:
        raise _Prepared.error
    if _Prepared.binaries is None:
        raise controlplane.HarnessError("the control plane binaries were not prepared at collection")
    with controlplane.session_plane("e2e", _Prepared.binaries, _Prepared.crds) as plane:
        yield plane


@pytest.fixture(scope="session")
def e2e_binaries() -> controlplane.Binaries:
    """The built binaries alone, for a module that starts a control plane of its own."""
    if _Prepared.skip_reason:
        pytest.skip(_Prepared.skip_reason)
    if _Prepared.error is not None:
        raise _Prepared.error
    if _Prepared.binaries is None:
        raise controlplane.HarnessError("the control plane binaries were not prepared at collection")
    return _Prepared.binaries


@pytest.fixture(scope="session")
def admin_api(control_plane: controlplane.ControlPlane) -> Iterator[Any]:
    client = control_plane.api_client(control_plane.admin_kubeconfig)
    yield client
    client.close()


@pytest.fixture(scope="session")
def controller_api(control_plane: controlplane.ControlPlane) -> Iterator[Any]:
    client = control_plane.api_client(control_plane.controller_kubeconfig)
    yield client
    client.close()


@pytest.fixture
def e2e_namespace(control_plane: controlplane.ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    stem = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"e2e-{stem}-{uuid.uuid4().hex[:6]}"
    control_plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    control_plane.delete_namespace(name)


@pytest.fixture
def requires_kueue(control_plane: controlplane.ControlPlane) -> None:
    if not control_plane.kueue:
        pytest.skip(f"needs real Kueue: {control_plane.kueue_reason}")


_SKIP_LINE = next(
    number
    for number, line in enumerate(Path(__file__).read_text().splitlines(), start=1)
    if "reported as this line" in line and "pytest.skip" in line
)
