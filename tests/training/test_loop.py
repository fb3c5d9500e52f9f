"""The plain-loop helper: every rank agrees, saves, waits; only rank 0 acknowledges."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import pytest

from advisor.protocol import CHECKPOINT_REQUEST_ANNOTATION
from advisor.training import CheckpointRequests, checkpoint_if_requested
from advisor.training.distributed import SingleProcess, default_collective, env_rank
from advisor.training.localpod import DownwardAPIVolume

from .conftest import RecordingChannel

T = TypeVar("T")


class ScriptedRank:
    """One rank of a fake process group: broadcast returns rank 0's value, events are logged."""

    def __init__(self, rank: int, rank_zero_value: str | None, events: list[str]) -> None:
        self.rank = rank
        self.rank_zero_value = rank_zero_value
        self.events = events

    @property
    def is_rank_zero(self) -> bool:
        return self.rank == 0

    def broadcast_from_zero(self, value: T) -> T:
        self.events.append(f"broadcast:{self.rank}")
        return value if self.rank == 0 else self.rank_zero_value  # type: ignore[return-value]

    def barrier(self) -> None:
        self.events.append(f"barrier:{self.rank}")


def test_single_process_save_then_acknowledge(volume: DownwardAPIVolume, channel: RecordingChannel) -> None:
    volume.write({CHECKPOINT_REQUEST_ANNOTATION: "r1"})
    requests = CheckpointRequests(volume.path, channels=[channel], reporter=True)
    saved: list[int] = []
    for step in range(1, 6):
        requests.update_progress(step, total_steps=5)
        checkpoint_if_requested(requests, step, lambda s=step: saved.append(s), collective=SingleProcess())
    assert saved == [1]  # honoured once, on the first step that saw it
    assert [(r.last_checkpoint_step, r.last_checkpoint_request) for r in channel.reports] == [(1, "r1")]


def test_rank_zero_decides_for_all_ranks(volume: DownwardAPIVolume, channel: RecordingChannel) -> None:
    volume.write({CHECKPOINT_REQUEST_ANNOTATION: "r2"})
    events: list[str] = []
    rank0 = CheckpointRequests(volume.path, channels=[channel], reporter=True)
    # rank 1 runs in a pod whose annotation has not been updated yet: no file at all
    rank1 = CheckpointRequests(volume.root / "not-yet", channels=[channel], reporter=False)
    saves: list[str] = []
    got1 = checkpoint_if_requested(
        rank1, 7, lambda: saves.append("rank1"), collective=ScriptedRank(1, "r2", events)
    )
    got0 = checkpoint_if_requested(
        rank0, 7, lambda: saves.append("rank0"), collective=ScriptedRank(0, None, events)
    )
    assert got0 == got1 == "r2"
    assert saves == ["rank1", "rank0"]
    assert len(channel.reports) == 1 and channel.reports[0].last_checkpoint_request == "r2"


def test_acknowledgement_comes_after_save_and_barrier(volume: DownwardAPIVolume) -> None:
    volume.write({CHECKPOINT_REQUEST_ANNOTATION: "r3"})
    events: list[str] = []

    class OrderedChannel(RecordingChannel):
        def publish(self, report: object) -> bool:
            events.append("ack")
            return True

    requests = CheckpointRequests(volume.path, channels=[OrderedChannel()], reporter=True)
    checkpoint_if_requested(
        requests, 3, lambda: events.append("save"), collective=ScriptedRank(0, None, events)
    )
    assert events == ["broadcast:0", "save", "barrier:0", "ack"]


def test_a_failed_save_is_not_acknowledged(volume: DownwardAPIVolume, channel: RecordingChannel) -> None:
    volume.write({CHECKPOINT_REQUEST_ANNOTATION: "r4"})
    requests = CheckpointRequests(volume.path, channels=[channel], reporter=True)

    def broken_save() -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        checkpoint_if_requested(requests, 3, broken_save, collective=SingleProcess())
    assert channel.reports == [] and requests.pending() == "r4"


def test_no_request_no_save(tmp_path: Path) -> None:
    requests = CheckpointRequests(tmp_path / "absent", channels=[])
    assert (
        checkpoint_if_requested(requests, 1, lambda: pytest.fail("saved"), collective=SingleProcess()) is None
    )


def test_default_collective_without_torch_uses_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "2")
    group = default_collective()
    assert isinstance(group, SingleProcess) and not group.is_rank_zero
    assert env_rank({"OMPI_COMM_WORLD_RANK": "0"}) == 0 and env_rank({"RANK": "x"}) == 0


def test_torch_distributed_is_used_when_a_process_group_is_up(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    calls: list[str] = []
    dist = types.ModuleType("torch.distributed")

    def broadcast_object_list(box: list[object], src: int = 0) -> None:
        calls.append(f"broadcast:{src}")
        box[0] = "from-rank-0"

    dist.is_available = lambda: True  # type: ignore[attr-defined]
    dist.is_initialized = lambda: True  # type: ignore[attr-defined]
    dist.get_world_size = lambda: 4  # type: ignore[attr-defined]
    dist.get_rank = lambda: 2  # type: ignore[attr-defined]
    dist.broadcast_object_list = broadcast_object_list  # type: ignore[attr-defined]
    dist.barrier = lambda: calls.append("barrier")  # type: ignore[attr-defined]
    torch = types.ModuleType("torch")
    torch.distributed = dist  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)

    group = default_collective()
    assert not group.is_rank_zero
    assert group.broadcast_from_zero(None) == "from-rank-0"
    group.barrier()
    assert calls == ["broadcast:0", "barrier"]
