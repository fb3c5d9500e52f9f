"""The reliability tier: faults injected into a real kube-apiserver + etcd (+ Kueue) and into the
controller, which runs as a separate process exactly as ``trainjob-advisor run`` does in its pod.

It has its own control plane (restarting etcd or pausing the API server would disturb the e2e
tier's), built and started like the e2e tier's (tests/e2e/controlplane.py); where Go is absent
every test here is skipped with one line saying why. Every test is marked ``e2e`` and
``reliability`` and states, in its docstring, what must hold.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

E2E = Path(__file__).resolve().parents[1] / "e2e"
sys.path.insert(0, str(E2E))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import controlplane  # noqa: E402

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.reliability)


@pytest.fixture(scope="session")
def plane() -> Iterator[controlplane.ControlPlane]:
    if os.environ.get("TRAINJOB_ADVISOR_SKIP_E2E"):
        pytest.skip("reliability tier skipped: TRAINJOB_ADVISOR_SKIP_E2E is set")
    try:
        go = controlplane.find_go()
    except controlplane.Unavailable as exc:
        pytest.skip(f"reliability tier skipped: {exc}")
    binaries = controlplane.ensure_binaries(go, kueue=True)
    crds = controlplane.upstream_crds(go)
    with controlplane.session_plane("reliability", binaries, crds) as cp:
        yield cp


@pytest.fixture(scope="session")
def admin(plane: controlplane.ControlPlane) -> Iterator[Any]:
    api = plane.api_client(plane.admin_kubeconfig)
    yield api
    api.close()


@pytest.fixture
def namespace(plane: controlplane.ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"rel-{request.node.name[5:25].replace('_', '-').strip('-')}-{uuid.uuid4().hex[:5]}".lower()
    plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    plane.delete_namespace(name)
