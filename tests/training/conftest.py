"""Shared fixtures for the training-side helpers: a kubelet-style annotations volume, a channel
that records what it is given, a controllable clock and a local HTTP server that records POSTs."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from advisor.training.localpod import DownwardAPIVolume
from advisor.training.report import Report


class RecordingChannel:
    """A progress channel that keeps every report; ``fail_next`` makes the next publishes fail."""

    name = "recording"

    def __init__(self) -> None:
        self.reports: list[Report] = []
        self.attempts = 0
        self.fail_next = 0
        self.closed = False

    def publish(self, report: Report) -> bool:
        self.attempts += 1
        if self.fail_next > 0:
            self.fail_next -= 1
            return False
        self.reports.append(report)
        return True

    def close(self) -> None:
        self.closed = True


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class RecordedServer:
    url: str
    posts: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    status: int = 200
    base: str = ""

    def metrics(self, index: int = -1) -> dict[str, str]:
        status = self.posts[index]["trainerStatus"]
        return {m["name"]: m["value"] for m in status.get("metrics", [])}


@pytest.fixture
def volume(tmp_path: Path) -> DownwardAPIVolume:
    return DownwardAPIVolume(tmp_path / "podinfo")


@pytest.fixture
def channel() -> RecordingChannel:
    return RecordingChannel()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def status_server() -> Iterator[RecordedServer]:
    """A plain-HTTP stand-in for the Trainer status server: records each POST body and headers."""
    recorded = RecordedServer(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            recorded.posts.append(json.loads(self.rfile.read(length)))
            recorded.headers.append(dict(self.headers.items()))
            recorded.paths.append(self.path)
            recorded.methods.append(self.command)
            body = b"{}"
            self.send_response(recorded.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_PATCH = do_POST

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    recorded.base = f"http://127.0.0.1:{port}"
    recorded.url = (
        f"http://127.0.0.1:{port}/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/tj/status"
    )
    try:
        yield recorded
    finally:
        server.shutdown()
        server.server_close()
