"""The Lightning adapter: the logic against a stand-in trainer (always), and the real
``lightning.pytorch.Callback`` subclass where lightning is installed."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from advisor.protocol import CHECKPOINT_REQUEST_ANNOTATION
from advisor.training import CheckpointRequests
from advisor.training.lightning import AdvisorCallbackLogic
from advisor.training.localpod import DownwardAPIVolume

from .conftest import RecordingChannel


class StandInTrainer:
    """The attributes and methods of ``lightning.pytorch.Trainer`` the callback uses."""

    def __init__(self, root: Path, *, rank: int = 0, rank_zero_value: str | None = None) -> None:
        self.default_root_dir = str(root)
        self.global_step = 0
        self.current_epoch = 0
        self.estimated_stepping_batches = 100
        self.callback_metrics = {"train_loss": 0.5, "not_a_number": "x"}
        self.checkpoint_callback = None
        self.is_global_zero = rank == 0
        self.events: list[str] = []
        trainer = self

        class Strategy:
            def broadcast(self, obj: Any, src: int = 0) -> Any:
                trainer.events.append("broadcast")
                return obj if trainer.is_global_zero else rank_zero_value

            def barrier(self, name: str | None = None) -> None:
                trainer.events.append(f"barrier:{name}")

        self.strategy = Strategy()

    def save_checkpoint(self, path: str) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Path(path).write_text("weights")
        self.events.append(f"save:{os.path.basename(path)}")


def _run(callback: AdvisorCallbackLogic, trainer: StandInTrainer, steps: int) -> None:
    callback.on_train_start(trainer, None)
    for batch_idx in range(steps):
        trainer.global_step += 1
        callback.on_train_batch_end(trainer, None, None, None, batch_idx)


def test_request_saves_on_every_rank_then_rank_zero_acknowledges(
    tmp_path: Path, volume: DownwardAPIVolume, channel: RecordingChannel
) -> None:
    volume.write({CHECKPOINT_REQUEST_ANNOTATION: "12"})
    callback = AdvisorCallbackLogic(CheckpointRequests(volume.path, channels=[channel], reporter=True))
    trainer = StandInTrainer(tmp_path)
    _run(callback, trainer, 3)
    assert trainer.events == [
        "broadcast",
        "save:advisor-step=1.ckpt",
        "barrier:advisor-checkpoint",
        "broadcast",
        "broadcast",
    ]
    assert callback.last_checkpoint_path == str(tmp_path / "checkpoints" / "advisor-step=1.ckpt")
    (report,) = channel.reports
    assert (report.last_checkpoint_step, report.last_checkpoint_request, report.total_steps) == (1, "12", 100)
    assert report.metrics == {"train_loss": 0.5}


def test_rank_one_follows_rank_zero_and_does_not_report(tmp_path: Path, channel: RecordingChannel) -> None:
    requests = CheckpointRequests(tmp_path / "absent", channels=[channel], reporter=True)
    trainer = StandInTrainer(tmp_path, rank=1, rank_zero_value="12")
    _run(AdvisorCallbackLogic(requests, dirpath=tmp_path / "ckpt"), trainer, 1)
    assert (
        "save:advisor-step=1.ckpt" in trainer.events and (tmp_path / "ckpt" / "advisor-step=1.ckpt").exists()
    )
    assert channel.attempts == 0


def test_uses_the_model_checkpoint_directory(tmp_path: Path) -> None:
    trainer = StandInTrainer(tmp_path)
    trainer.checkpoint_callback = SimpleNamespace(dirpath=str(tmp_path / "mc"))  # type: ignore[assignment]
    callback = AdvisorCallbackLogic(CheckpointRequests(tmp_path / "absent", channels=[]))
    assert callback.checkpoint_path(trainer, 7) == str(tmp_path / "mc" / "advisor-step=7.ckpt")


def test_polls_every_n_steps(tmp_path: Path, volume: DownwardAPIVolume) -> None:
    volume.write({CHECKPOINT_REQUEST_ANNOTATION: "1"})
    trainer = StandInTrainer(tmp_path)
    _run(
        AdvisorCallbackLogic(CheckpointRequests(volume.path, channels=[]), check_every_n_steps=3), trainer, 4
    )
    assert [e for e in trainer.events if e.startswith("save")] == ["save:advisor-step=3.ckpt"]
    with pytest.raises(ValueError, match="check_every_n_steps"):
        AdvisorCallbackLogic(CheckpointRequests(volume.path, channels=[]), check_every_n_steps=0)


def test_real_lightning_callback_subclass() -> None:
    try:
        from lightning.pytorch import Callback
    except ImportError:
        pl = pytest.importorskip(
            "pytorch_lightning", reason="neither lightning nor pytorch_lightning is installed"
        )
        Callback = pl.Callback
    from advisor.training.lightning import AdvisorCallback

    assert issubclass(AdvisorCallback, Callback) and issubclass(AdvisorCallback, AdvisorCallbackLogic)
    callback = AdvisorCallback(CheckpointRequests("/nonexistent/annotations", channels=[]))
    assert callback.state_key  # Lightning's Callback machinery works on our instance
