"""The request listener: one stat per poll, re-read on change, tolerant of a missing file, and
never confused by the kubelet's atomic symlink swap."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

import advisor.training.requests as requests_module
from advisor.protocol import ACK_REQUEST_METRIC, ACK_STEP_METRIC, CHECKPOINT_REQUEST_ANNOTATION
from advisor.training.localpod import DownwardAPIVolume
from advisor.training.requests import CheckpointRequests

from .conftest import FakeClock, RecordingChannel


def _request(volume: DownwardAPIVolume, request_id: str, **other: str) -> None:
    volume.write({CHECKPOINT_REQUEST_ANNOTATION: request_id, "team": "a", **other})


def test_missing_file_disables_the_listener_with_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="advisor.training")
    requests = CheckpointRequests(tmp_path / "absent" / "annotations", channels=[])
    assert not requests.enabled
    assert [requests.pending() for _ in range(3)] == [None, None, None]
    assert len([r for r in caplog.records if "disabled" in r.getMessage()]) == 1


def test_no_request_annotation_means_nothing_pending(volume: DownwardAPIVolume) -> None:
    volume.write({"team": "a"})
    assert CheckpointRequests(volume.path, channels=[]).pending() is None


def test_request_pending_until_acknowledged_then_next_request(volume: DownwardAPIVolume) -> None:
    volume.write({"team": "a"})
    requests = CheckpointRequests(volume.path, channels=[], reporter=True)
    assert requests.pending() is None
    _request(volume, "101")
    assert requests.pending() == "101"
    assert requests.pending() == "101"  # still pending: nothing saved yet
    requests.acknowledge("101", 40)
    assert requests.pending() is None
    assert requests.last_acknowledged == "101" and requests.last_checkpoint_step == 40
    _request(volume, "101")  # same id re-published (controller restart): already answered
    assert requests.pending() is None
    _request(volume, "102")
    assert requests.pending() == "102"


def test_annotation_removed_clears_the_request(volume: DownwardAPIVolume) -> None:
    _request(volume, "7")
    requests = CheckpointRequests(volume.path, channels=[])
    assert requests.pending() == "7"
    volume.write({"team": "a"})
    assert requests.pending() is None


def test_file_is_reread_only_when_its_stat_changes(
    volume: DownwardAPIVolume, monkeypatch: pytest.MonkeyPatch
) -> None:
    _request(volume, "1")
    parses: list[str] = []
    real_parse = requests_module.parse_annotations

    def counting_parse(text: str) -> dict[str, str]:
        parses.append(text)
        return real_parse(text)

    monkeypatch.setattr(requests_module, "parse_annotations", counting_parse)
    requests = CheckpointRequests(volume.path, channels=[])
    for _ in range(50):
        requests.pending()
    assert len(parses) == 1
    _request(volume, "2")
    for _ in range(50):
        requests.pending()
    assert len(parses) == 2
    assert requests.pending() == "2"


def test_symlink_swap_replaces_the_inode_and_removes_the_old_directory(volume: DownwardAPIVolume) -> None:
    _request(volume, "1")
    first = volume.path.resolve()
    _request(volume, "2")
    second = volume.path.resolve()
    assert first != second and not first.exists()
    assert volume.path.is_symlink() and (volume.root / "..data").is_symlink()


def test_polling_during_rapid_swaps_never_sees_a_torn_or_unknown_value(volume: DownwardAPIVolume) -> None:
    _request(volume, "0")
    requests = CheckpointRequests(volume.path, channels=[])
    written = {str(i) for i in range(200)}
    seen: set[str] = set()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(1, 200):
                _request(volume, str(i))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    while thread.is_alive():
        value = requests.pending()
        if value is not None:
            seen.add(value)
    thread.join()
    assert not errors
    assert seen <= written and seen
    assert requests.pending() == "199"


def test_unreadable_content_keeps_the_last_request(
    volume: DownwardAPIVolume, caplog: pytest.LogCaptureFixture
) -> None:
    _request(volume, "5")
    requests = CheckpointRequests(volume.path, channels=[])
    assert requests.pending() == "5"
    target = volume.path.resolve()
    target.write_text("garbage without quotes\n")
    assert requests.pending() == "5"
    assert any("cannot read checkpoint requests" in r.getMessage() for r in caplog.records)


def test_acknowledge_reports_progress_and_ack_metrics_on_rank_zero(
    volume: DownwardAPIVolume, channel: RecordingChannel
) -> None:
    _request(volume, "9")
    requests = CheckpointRequests(volume.path, channels=[channel], reporter=True, wall_clock=lambda: 1.7e9)
    requests.update_progress(120, total_steps=1000, epoch=0.5, metrics={"loss": 2.5})
    assert requests.acknowledge(requests.pending(), 120)
    (report,) = channel.reports
    assert (report.step, report.total_steps, report.epoch, report.time) == (120, 1000, 0.5, 1.7e9)
    assert report.metrics == {"loss": 2.5}
    assert report.ack() == {ACK_STEP_METRIC: 120, ACK_REQUEST_METRIC: "9"}


def test_other_ranks_record_but_do_not_report(volume: DownwardAPIVolume, channel: RecordingChannel) -> None:
    _request(volume, "9")
    requests = CheckpointRequests(volume.path, channels=[channel], reporter=False)
    assert requests.acknowledge("9", 3)
    assert channel.attempts == 0 and requests.pending() is None


def test_reporter_defaults_to_rank_zero_from_the_environment(
    volume: DownwardAPIVolume, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANK", "3")
    assert not CheckpointRequests(volume.path, channels=[]).reporter
    monkeypatch.setenv("RANK", "0")
    assert CheckpointRequests(volume.path, channels=[]).reporter


def test_periodic_checkpoint_updates_the_step_without_a_request(
    channel: RecordingChannel, tmp_path: Path
) -> None:
    requests = CheckpointRequests(tmp_path / "none", channels=[channel], reporter=True)
    requests.acknowledge(None, 500)
    assert channel.reports[-1].ack() == {ACK_STEP_METRIC: 500}


def test_undelivered_report_is_retried_after_the_interval_not_in_a_tight_loop(
    volume: DownwardAPIVolume, channel: RecordingChannel, clock: FakeClock
) -> None:
    _request(volume, "3")
    requests = CheckpointRequests(
        volume.path, channels=[channel], reporter=True, retry_interval_s=5.0, clock=clock
    )
    channel.fail_next = 2
    assert not requests.acknowledge("3", 10)
    for _ in range(100):
        requests.pending()
    assert channel.attempts == 1  # no retry before the interval
    clock.advance(5.0)
    requests.pending()
    assert channel.attempts == 2 and not requests.delivered  # second failure
    clock.advance(5.0)
    requests.pending()
    assert requests.delivered and channel.reports[-1].last_checkpoint_request == "3"


def test_a_failing_channel_does_not_stop_the_others(
    volume: DownwardAPIVolume, channel: RecordingChannel
) -> None:
    class Exploding:
        name = "exploding"

        def publish(self, report: object) -> bool:
            raise RuntimeError("boom")

        def close(self) -> None:
            return None

    requests = CheckpointRequests(volume.path, channels=[Exploding(), channel], reporter=True)
    assert not requests.acknowledge("1", 1)
    assert len(channel.reports) == 1


def test_acknowledge_rejects_a_bad_step(tmp_path: Path) -> None:
    requests = CheckpointRequests(tmp_path / "none", channels=[])
    for bad in (-1, 1.5, True, "10"):
        with pytest.raises(ValueError, match="step must be"):
            requests.acknowledge("1", bad)  # type: ignore[arg-type]


def test_ack_metrics_numeric_form_for_number_only_channels(tmp_path: Path) -> None:
    requests = CheckpointRequests(tmp_path / "none", channels=[], reporter=True)
    requests.acknowledge("1732960000123", 8)
    assert requests.ack_metrics(numeric=True) == {ACK_STEP_METRIC: 8, ACK_REQUEST_METRIC: 1732960000123}
    requests.acknowledge("ckpt-a1", 9)
    assert requests.ack_metrics(numeric=True)[ACK_REQUEST_METRIC] == "ckpt-a1"


def test_environment_overrides_the_default_path(
    volume: DownwardAPIVolume, monkeypatch: pytest.MonkeyPatch
) -> None:
    _request(volume, "44")
    monkeypatch.setenv("ADVISOR_ANNOTATIONS_PATH", str(volume.path))
    assert CheckpointRequests(channels=[]).pending() == "44"


def test_close_closes_the_channels(tmp_path: Path, channel: RecordingChannel) -> None:
    with CheckpointRequests(tmp_path / "none", channels=[channel]):
        pass
    assert channel.closed


def test_publish_sends_progress_without_an_acknowledgement(tmp_path: Path, channel: RecordingChannel) -> None:
    requests = CheckpointRequests(tmp_path / "none", channels=[channel], reporter=True)
    requests.update_progress(10, total_steps=100, metrics={"loss": 1.5})
    assert requests.publish()
    assert channel.reports[-1].step == 10 and channel.reports[-1].ack() == {}
    assert CheckpointRequests(tmp_path / "none", channels=[channel], reporter=False).publish()
    assert len(channel.reports) == 1


def test_only_rank_zero_starts_channels_from_the_environment(
    volume: DownwardAPIVolume, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ADVISOR_PROGRESS_CHANNELS", "file")
    monkeypatch.setenv("ADVISOR_ACK_FILE", str(tmp_path / "acks.jsonl"))
    volume.write({CHECKPOINT_REQUEST_ANNOTATION: "1"})
    CheckpointRequests(volume.path, reporter=False).acknowledge("1", 5)
    assert not (tmp_path / "acks.jsonl").exists()
    CheckpointRequests(volume.path, reporter=True).acknowledge("1", 5)
    assert (tmp_path / "acks.jsonl").read_text().count('"last_checkpoint_request": "1"') == 1
