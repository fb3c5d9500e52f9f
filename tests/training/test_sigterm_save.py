"""Saves on SIGTERM: the handler only notes the signal; the loop saves at the end of the step
under way, reports the checkpoint and its save time, and exits 143 (a real signal, a real process)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from advisor.protocol import ACK_STEP_METRIC, CHECKPOINT_REQUEST_ANNOTATION, SAVE_SECONDS_METRIC
from advisor.training import CheckpointRequests, checkpoint_if_requested
from advisor.training.distributed import SingleProcess
from advisor.training.localpod import DownwardAPIVolume
from advisor.training.loop import SIGTERM_EXIT_STATUS, SIGTERM_REQUEST, agreed_request

from .conftest import RecordingChannel

TRAINER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from advisor.training import CheckpointRequests, JsonlFileChannel, checkpoint_if_requested
    from advisor.training.localpod import DownwardAPIVolume

    work = Path(sys.argv[1])
    volume = DownwardAPIVolume(work / "podinfo")
    volume.write({})
    channel = JsonlFileChannel(work / "progress.jsonl")
    requests = CheckpointRequests(volume.path, channels=[channel], reporter=True)
    assert requests.watch_sigterm()
    (work / "ready").write_text("1")
    for step in range(1, 100000):
        time.sleep(0.05)  # one training step
        requests.update_progress(step)
        def save(step=step):
            time.sleep(0.1)
            (work / f"ckpt-{step}").write_text("state")
        checkpoint_if_requested(requests, step, save)
    """
)


def test_a_real_sigterm_saves_at_the_next_step_reports_and_exits_143(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", TRAINER, str(tmp_path)], env=env)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "ready").exists():
            assert time.monotonic() < deadline and proc.poll() is None, "trainer did not start"
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == SIGTERM_EXIT_STATUS
    finally:
        if proc.poll() is None:
            proc.kill()
    saved = [p.name for p in tmp_path.glob("ckpt-*")]
    assert len(saved) == 1  # exactly one save, on the step after the signal
    rows = [json.loads(line) for line in (tmp_path / "progress.jsonl").read_text().splitlines()]
    assert rows and rows[-1][ACK_STEP_METRIC] == int(saved[0].split("-")[1])
    assert 0.1 <= rows[-1][SAVE_SECONDS_METRIC] < 5.0


def test_an_open_request_is_answered_by_the_sigterm_save(
    volume: DownwardAPIVolume, channel: RecordingChannel
) -> None:
    volume.write({CHECKPOINT_REQUEST_ANNOTATION: "123456789012345"})
    requests = CheckpointRequests(volume.path, channels=[channel], reporter=True)
    requests._sigterm_at = 1.0  # as the handler leaves it
    assert agreed_request(requests, SingleProcess()) == SIGTERM_REQUEST
    saved: list[int] = []
    try:
        checkpoint_if_requested(requests, 7, lambda: saved.append(7), collective=SingleProcess())
    except SystemExit as exc:
        assert exc.code == SIGTERM_EXIT_STATUS
    else:
        raise AssertionError("no exit after the SIGTERM save")
    assert saved == [7]
    last = channel.reports[-1]
    assert (last.last_checkpoint_step, last.last_checkpoint_request) == (7, "123456789012345")
