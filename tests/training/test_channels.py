"""Progress channels: the upstream status-server protocol, the RHOAI /metrics document, a JSONL
file, and the choice among them from the environment."""

from __future__ import annotations

import json
import math
import socket
import urllib.request
from pathlib import Path

import pytest

from advisor.protocol import ACK_REQUEST_METRIC, ACK_STEP_METRIC, PYTORCHJOB_PROGRESS_ANNOTATION
from advisor.sources import parse_progress_annotation
from advisor.training.channels import (
    JsonlFileChannel,
    KubeflowStatusChannel,
    MetricsEndpointChannel,
    PyTorchJobAnnotationChannel,
    channels_from_environment,
)
from advisor.training.report import Report

from .conftest import FakeClock, RecordedServer

REPORT = Report(
    time=1_764_496_245.0,  # 2025-11-30T09:50:45Z
    step=450,
    total_steps=1000,
    epoch=1.35,
    metrics={"loss": 0.2347, "eval_loss": 0.2451, "bad": float("nan")},
    last_checkpoint_step=440,
    last_checkpoint_request="1764496200000",
)


def _channel(server: RecordedServer, tmp_path: Path, clock: FakeClock | None = None) -> KubeflowStatusChannel:
    token = tmp_path / "token"
    token.write_text("jwt-1\n")
    return KubeflowStatusChannel(server.url, token_file=str(token), use_sdk=False, clock=clock or FakeClock())


class TestKubeflowStatusChannel:
    def test_posts_the_update_trainjob_status_request(
        self, status_server: RecordedServer, tmp_path: Path
    ) -> None:
        assert _channel(status_server, tmp_path).publish(REPORT)
        (body,) = status_server.posts
        status = body["trainerStatus"]
        assert status["lastUpdatedTime"] == "2025-11-30T09:50:45Z"
        assert status["progressPercentage"] == 45
        assert all(isinstance(m["value"], str) and len(m["value"]) <= 64 for m in status["metrics"])
        assert status_server.metrics() == {
            ACK_STEP_METRIC: "440",
            ACK_REQUEST_METRIC: "1764496200000",
            "loss": "0.2347",
            "eval_loss": "0.2451",
            "bad": "nan",
            "current_step": "450",
            "total_steps": "1000",
            "current_epoch": "1.35",
        }
        assert status_server.headers[0]["Authorization"] == "Bearer jwt-1"

    def test_token_is_reread_because_it_rotates(self, status_server: RecordedServer, tmp_path: Path) -> None:
        clock = FakeClock()
        channel = _channel(status_server, tmp_path, clock)
        channel.publish(REPORT)
        (tmp_path / "token").write_text("jwt-2")
        clock.advance(6)
        channel.publish(REPORT)
        assert [h["Authorization"] for h in status_server.headers] == ["Bearer jwt-1", "Bearer jwt-2"]

    def test_throttled_to_one_post_per_interval(self, status_server: RecordedServer, tmp_path: Path) -> None:
        clock = FakeClock()
        channel = _channel(status_server, tmp_path, clock)
        assert channel.publish(REPORT)
        assert not channel.publish(REPORT)
        clock.advance(5.0)
        assert channel.publish(REPORT)
        assert len(status_server.posts) == 2

    def test_rejection_and_unreachable_server_return_false(
        self, status_server: RecordedServer, tmp_path: Path
    ) -> None:
        status_server.status = 422
        assert not _channel(status_server, tmp_path).publish(REPORT)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            dead_port = s.getsockname()[1]
        dead = KubeflowStatusChannel(f"http://127.0.0.1:{dead_port}/status", use_sdk=False, timeout_s=1.0)
        assert not dead.publish(REPORT)

    def test_ack_metrics_survive_the_256_metric_limit(self) -> None:
        many = Report(
            time=0.0,
            metrics={f"m{i}": float(i) for i in range(400)},
            last_checkpoint_step=1,
            last_checkpoint_request="r",
        )
        metrics = KubeflowStatusChannel("http://x", use_sdk=False).metrics(many)
        assert len(metrics) == 256
        assert metrics[ACK_STEP_METRIC] == 1 and metrics[ACK_REQUEST_METRIC] == "r"

    def test_a_non_finite_loss_goes_out_and_reads_back_as_divergence(self) -> None:
        # the values are text: the report that proves a divergence is not dropped
        from advisor.reported import read_back

        report = Report(time=100.0, step=7, metrics={"loss": float("nan"), "grad_norm": float("inf")})
        metrics = KubeflowStatusChannel("http://x", use_sdk=False).metrics(report)
        assert metrics["loss"] != metrics["loss"] and metrics["grad_norm"] == float("inf")
        sample = read_back(report, name="j", namespace="ns", now=100.0)
        assert sample is not None and sample.step == 7
        assert sample.loss is not None and math.isnan(sample.loss)
        assert any("non-finite" in w for w in sample.warnings)

    def test_the_metric_the_trainer_keeps_its_best_model_by_goes_out_and_reads_back(self) -> None:
        # HF's metric_for_best_model, as the Trainer takes it ("cer" for eval_cer): the advisor
        # judges the run by it, not by its own default (the eval loss beside the task's score)
        from advisor.reported import read_back

        report = Report(time=100.0, step=7, metrics={"loss": 0.5}, judged_by="cer")
        metrics = KubeflowStatusChannel("http://x", use_sdk=False).metrics(report)
        assert metrics["metric_for_best_model"] == "cer"
        sample = read_back(report, name="j", namespace="ns", now=100.0)
        assert sample is not None and sample.judged_by == "eval_cer" and not sample.warnings

    def test_requires_a_url(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("KUBEFLOW_TRAINER_SERVER_URL", raising=False)
        with pytest.raises(ValueError, match="KUBEFLOW_TRAINER_SERVER_URL"):
            KubeflowStatusChannel()

    def test_uses_the_kubeflow_sdk_when_installed(self, monkeypatch: pytest.MonkeyPatch) -> None:
        calls: list[dict[str, object]] = []

        def fake_sdk(progress_percent: int | None = None, metrics: dict[str, object] | None = None) -> bool:
            calls.append({"progress_percent": progress_percent, "metrics": metrics})
            return False  # throttled

        monkeypatch.setattr("advisor.training.channels._load_sdk_reporter", lambda: fake_sdk)
        channel = KubeflowStatusChannel("http://x")
        assert channel.publish(REPORT) is False
        assert calls[0]["progress_percent"] == 45
        metrics = calls[0]["metrics"]
        assert isinstance(metrics, dict) and metrics[ACK_STEP_METRIC] == 440


class TestMetricsEndpointChannel:
    def test_serves_the_rhoai_document(self) -> None:
        channel = MetricsEndpointChannel(port=0, host="127.0.0.1")
        try:
            channel.publish(REPORT)
            with urllib.request.urlopen(f"http://127.0.0.1:{channel.port}/metrics", timeout=5) as response:
                doc = json.loads(response.read())
        finally:
            channel.close()
        assert doc == {
            "progressPercentage": 45,
            "currentStep": 450,
            "totalSteps": 1000,
            "currentEpoch": 1.35,
            "trainMetrics": {"loss": 0.2347, ACK_STEP_METRIC: 440, ACK_REQUEST_METRIC: 1764496200000},
            "evalMetrics": {"eval_loss": 0.2451},
        }

    def test_a_non_numeric_request_id_is_left_out_not_sent_as_a_string(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        report = Report(
            time=0.0, step=5, last_checkpoint_step=5, last_checkpoint_request="checkpoint-3fa2b1c9d0"
        )
        channel = MetricsEndpointChannel(port=0, host="127.0.0.1")
        try:
            channel.publish(report)
            channel.publish(report)
        finally:
            channel.close()
        assert MetricsEndpointChannel.document(report)["trainMetrics"] == {ACK_STEP_METRIC: 5}
        assert len([r for r in caplog.records if "not a number" in r.getMessage()]) == 1

    def test_other_paths_are_404(self) -> None:
        channel = MetricsEndpointChannel(port=0, host="127.0.0.1")
        try:
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(f"http://127.0.0.1:{channel.port}/other", timeout=5)
            assert info.value.code == 404
        finally:
            channel.close()

    def test_port_in_use_raises(self) -> None:
        first = MetricsEndpointChannel(port=0, host="127.0.0.1")
        try:
            with pytest.raises(OSError):
                MetricsEndpointChannel(port=first.port, host="127.0.0.1")
        finally:
            first.close()


def test_jsonl_file_channel_appends_rows(tmp_path: Path) -> None:
    channel = JsonlFileChannel(tmp_path / "out" / "progress.jsonl")
    assert channel.publish(REPORT) and channel.publish(Report(time=1.0, step=451))
    rows = [json.loads(line) for line in (tmp_path / "out" / "progress.jsonl").read_text().splitlines()]
    assert rows[0]["step"] == 450 and rows[0][ACK_REQUEST_METRIC] == "1764496200000" and "bad" not in rows[0]
    assert rows[1] == {"time": 1.0, "step": 451}


class TestChannelsFromEnvironment:
    def test_nothing_configured_means_no_channel(self) -> None:
        assert channels_from_environment({}) == []

    def test_kubeflow_detected_from_the_injected_url(self) -> None:
        (channel,) = channels_from_environment({"KUBEFLOW_TRAINER_SERVER_URL": "https://s/status"})
        assert isinstance(channel, KubeflowStatusChannel) and channel.url == "https://s/status"

    def test_explicit_list(self, tmp_path: Path) -> None:
        env = {
            "ADVISOR_PROGRESS_CHANNELS": "rhoai, file",
            "ADVISOR_METRICS_PORT": "0",
            "ADVISOR_ACK_FILE": str(tmp_path / "a.jsonl"),
        }
        channels = channels_from_environment(env)
        try:
            assert [type(c) for c in channels] == [MetricsEndpointChannel, JsonlFileChannel]
        finally:
            for c in channels:
                c.close()

    def test_unknown_channel_is_a_clear_error(self) -> None:
        with pytest.raises(ValueError, match="unknown channel"):
            channels_from_environment({"ADVISOR_PROGRESS_CHANNELS": "kafka"})

    def test_a_channel_that_cannot_start_is_skipped(self, caplog: pytest.LogCaptureFixture) -> None:
        assert channels_from_environment({"ADVISOR_PROGRESS_CHANNELS": "file"}) == []
        assert any("disabled" in r.getMessage() for r in caplog.records)


class TestPyTorchJobAnnotationChannel:
    def _channel(
        self, server: RecordedServer, tmp_path: Path, clock: FakeClock | None = None
    ) -> PyTorchJobAnnotationChannel:
        token = tmp_path / "sa-token"
        token.write_text("sa-jwt")
        return PyTorchJobAnnotationChannel(
            "bert-ft", "team-a", api_url=server.base, token_file=str(token), clock=clock or FakeClock()
        )

    def test_merge_patches_the_progress_annotation_the_controller_parses(
        self, status_server: RecordedServer, tmp_path: Path
    ) -> None:
        assert self._channel(status_server, tmp_path).publish(REPORT)
        assert status_server.methods == ["PATCH"]
        assert status_server.paths == ["/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/bert-ft"]
        assert status_server.headers[0]["Content-Type"] == "application/merge-patch+json"
        assert status_server.headers[0]["Authorization"] == "Bearer sa-jwt"
        raw = status_server.posts[0]["metadata"]["annotations"][PYTORCHJOB_PROGRESS_ANNOTATION]
        sample = parse_progress_annotation(raw)  # the controller side's own parser
        assert (sample.step, sample.total_steps, sample.loss, sample.eval_loss) == (450, 1000, 0.2347, 0.2451)
        assert (sample.last_checkpoint_step, sample.last_checkpoint_request) == (440, "1764496200000")
        assert sample.warnings == ()

    def test_throttled_and_refused(self, status_server: RecordedServer, tmp_path: Path) -> None:
        clock = FakeClock()
        channel = self._channel(status_server, tmp_path, clock)
        assert channel.publish(REPORT) and not channel.publish(REPORT)
        status_server.status = 403
        clock.advance(5)
        assert not channel.publish(REPORT)

    def test_needs_a_job_name_and_an_api_server(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("ADVISOR_JOB_NAME", raising=False)
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        with pytest.raises(ValueError, match="ADVISOR_JOB_NAME"):
            PyTorchJobAnnotationChannel()
        with pytest.raises(ValueError, match="KUBERNETES_SERVICE_HOST"):
            PyTorchJobAnnotationChannel("job", "ns")
