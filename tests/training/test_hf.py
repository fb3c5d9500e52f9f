"""The HuggingFace adapter, driven by transformers' real TrainerState, TrainerControl,
CallbackHandler, KubeflowCallback and JIT checkpoint callback (no torch needed: the loop below
replays the order of ``Trainer._inner_training_loop`` / ``_maybe_log_save_evaluate``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (extra: training-test)"
)

from transformers import TrainingArguments  # noqa: E402
from transformers.trainer_callback import (  # noqa: E402
    CallbackHandler,
    DefaultFlowCallback,
    TrainerCallback,
    TrainerControl,
    TrainerState,
)

from advisor.protocol import ACK_REQUEST_METRIC, ACK_STEP_METRIC, CHECKPOINT_REQUEST_ANNOTATION  # noqa: E402
from advisor.training import CheckpointRequests, KubeflowStatusChannel  # noqa: E402
from advisor.training.hf import AdvisorCallback  # noqa: E402
from advisor.training.localpod import DownwardAPIVolume  # noqa: E402

from .conftest import RecordedServer, RecordingChannel  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


class Loop:
    """The callback-visible part of the Trainer's loop, with a checkpoint being a directory."""

    def __init__(self, handler: CallbackHandler, args: TrainingArguments, max_steps: int) -> None:
        self.handler, self.args = handler, args
        self.callback_handler = handler  # the name Trainer uses
        self.state = TrainerState(
            max_steps=max_steps, logging_steps=args.logging_steps, save_steps=args.save_steps
        )
        self.control = TrainerControl()
        self.saved: list[int] = []

    def begin(self) -> None:
        self.control = self.handler.on_train_begin(self.args, self.state, self.control)

    def step(self) -> None:
        h, args, state = self.handler, self.args, self.state
        self.control = h.on_step_begin(args, state, self.control)
        state.global_step += 1
        state.epoch = state.global_step / state.max_steps
        self.control = h.on_step_end(args, state, self.control)
        if self.control.should_log:
            logs = {"loss": 1.0 / state.global_step, "learning_rate": 1e-3, "epoch": state.epoch}
            state.log_history.append({**logs, "step": state.global_step})
            self.control = h.on_log(args, state, self.control, logs)
        if self.control.should_save:
            self.save_checkpoint()
            self.control = h.on_save(args, state, self.control)

    def save_checkpoint(self) -> None:
        Path(self.args.output_dir, f"checkpoint-{self.state.global_step}").mkdir(parents=True, exist_ok=True)
        self.saved.append(self.state.global_step)

    def log(self, logs: dict[str, float]) -> None:
        """``Trainer.log``: stamp the epoch, keep the history, call every callback's on_log."""
        logs = {**logs, "epoch": self.state.epoch}
        self.state.log_history.append({**logs, "step": self.state.global_step})
        self.control = self.handler.on_log(self.args, self.state, self.control, logs)

    def end(self) -> None:
        self.control = self.handler.on_train_end(self.args, self.state, self.control)


def _args(tmp_path: Path, **kw: Any) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(tmp_path / "out"),
        report_to="none",
        logging_steps=100,
        save_strategy=kw.pop("save_strategy", "no"),
        **kw,
    )


def _listener(volume: DownwardAPIVolume, *channels: Any) -> CheckpointRequests:
    return CheckpointRequests(volume.path, channels=list(channels), reporter=True)


def test_public_class_is_a_real_trainer_callback() -> None:
    assert issubclass(AdvisorCallback, TrainerCallback)
    assert AdvisorCallback.__module__ == "advisor.training.hf"


def test_a_pending_request_makes_the_trainer_save_then_acknowledges(
    tmp_path: Path, volume: DownwardAPIVolume, channel: RecordingChannel
) -> None:
    volume.write({"team": "a"})
    callback = AdvisorCallback(_listener(volume, channel))
    loop = Loop(
        CallbackHandler([DefaultFlowCallback(), callback], None, None, None, None), _args(tmp_path), 20
    )
    loop.begin()
    for _ in range(5):
        loop.step()
    assert loop.saved == []
    volume.write({CHECKPOINT_REQUEST_ANNOTATION: "1764496200000"})
    for _ in range(5):
        loop.step()
    assert loop.saved == [6]
    (report,) = channel.reports
    assert (report.last_checkpoint_step, report.last_checkpoint_request, report.step) == (
        6,
        "1764496200000",
        6,
    )
    assert report.total_steps == 20


def test_the_metric_the_trainer_keeps_its_best_model_by_is_in_every_report(
    tmp_path: Path, volume: DownwardAPIVolume, channel: RecordingChannel
) -> None:
    volume.write({CHECKPOINT_REQUEST_ANNOTATION: "1764496200001"})
    callback = AdvisorCallback(_listener(volume, channel))
    args = _args(tmp_path, metric_for_best_model="cer")
    loop = Loop(CallbackHandler([DefaultFlowCallback(), callback], None, None, None, None), args, 20)
    loop.begin()
    for _ in range(3):
        loop.step()
    assert channel.reports and all(r.judged_by == "cer" for r in channel.reports)


def test_periodic_saves_are_reported_with_their_step(
    tmp_path: Path, volume: DownwardAPIVolume, channel: RecordingChannel
) -> None:
    volume.write({"team": "a"})
    args = _args(tmp_path, save_strategy="steps", save_steps=4)
    loop = Loop(
        CallbackHandler(
            [DefaultFlowCallback(), AdvisorCallback(_listener(volume, channel))], None, None, None, None
        ),
        args,
        10,
    )
    loop.begin()
    for _ in range(9):
        loop.step()
    assert loop.saved == [4, 8]
    assert [(r.last_checkpoint_step, r.last_checkpoint_request) for r in channel.reports] == [
        (4, None),
        (8, None),
    ]


def test_polls_only_every_n_steps(tmp_path: Path, volume: DownwardAPIVolume) -> None:
    volume.write({CHECKPOINT_REQUEST_ANNOTATION: "5"})
    callback = AdvisorCallback(_listener(volume), check_every_n_steps=4)
    loop = Loop(
        CallbackHandler([DefaultFlowCallback(), callback], None, None, None, None), _args(tmp_path), 20
    )
    loop.begin()
    for _ in range(6):
        loop.step()
    assert loop.saved == [4]
    with pytest.raises(ValueError, match="check_every_n_steps"):
        AdvisorCallback(_listener(volume), check_every_n_steps=0)


def test_other_ranks_save_on_rank_zeros_word_and_never_report(
    tmp_path: Path, volume: DownwardAPIVolume, channel: RecordingChannel
) -> None:
    events: list[str] = []

    class Rank1:
        is_rank_zero = False

        def broadcast_from_zero(self, value: object) -> object:
            return "77"  # rank 0 saw request 77

        def barrier(self) -> None:
            events.append("barrier")

    requests = CheckpointRequests(volume.root / "absent", channels=[channel], reporter=False)
    callback = AdvisorCallback(requests, collective=Rank1())
    loop = Loop(
        CallbackHandler([DefaultFlowCallback(), callback], None, None, None, None), _args(tmp_path), 10
    )
    loop.state.is_world_process_zero = False
    loop.begin()
    loop.step()
    assert loop.saved == [1] and events == ["barrier"] and channel.attempts == 0


def _kubeflow_env(monkeypatch: pytest.MonkeyPatch, server: RecordedServer, tmp_path: Path) -> None:
    token = tmp_path / "sa-token"
    token.write_text("jwt")
    monkeypatch.setenv("KUBEFLOW_TRAINER_SERVER_URL", server.url)
    monkeypatch.setenv("KUBEFLOW_TRAINER_SERVER_TOKEN", str(token))


@pytest.mark.parametrize("attached", [True, False])
def test_coexists_with_kubeflow_callback(
    tmp_path: Path,
    volume: DownwardAPIVolume,
    status_server: RecordedServer,
    monkeypatch: pytest.MonkeyPatch,
    attached: bool,
) -> None:
    from transformers.integrations.integration_utils import KubeflowCallback

    _kubeflow_env(monkeypatch, status_server, tmp_path)
    kubeflow = KubeflowCallback()
    kubeflow._MIN_UPDATE_INTERVAL = 0.0  # report every step instead of every 5 s of wall time
    volume.write({"team": "a"})
    ours = AdvisorCallback(_listener(volume, KubeflowStatusChannel(status_server.url, use_sdk=False)))
    handler = CallbackHandler([DefaultFlowCallback(), kubeflow, ours], None, None, None, None)
    volume.write({CHECKPOINT_REQUEST_ANNOTATION: "31"})
    loop = Loop(handler, _args(tmp_path), 10)
    if attached:
        ours.attach(loop)
        assert handler.callbacks[0] is ours
    loop.begin()
    for _ in range(4):
        loop.step()
    loop.end()
    assert loop.saved == [1]
    posted = [status_server.metrics(i) for i in range(len(status_server.posts))]
    # our own report goes out at once and keeps Kubeflow's progress fields
    ours_posted = [m for m in posted if m.get(ACK_REQUEST_METRIC) == "31" and m.get("current_step") == "1"]
    assert ours_posted and ours_posted[0][ACK_STEP_METRIC] == "1"
    later = posted[posted.index(ours_posted[0]) + 1 :]
    final = posted[-1]
    if attached:
        # the ack rides on every later Kubeflow report, the final one (progress 100) included
        assert later and all(
            m.get(ACK_STEP_METRIC) == "1" and m.get(ACK_REQUEST_METRIC) == "31" for m in later
        )
        assert status_server.posts[-1]["trainerStatus"]["progressPercentage"] == 100
        assert {"last_checkpoint_step": 1, "last_checkpoint_request": 31} in [
            {k: h[k] for k in (ACK_STEP_METRIC, ACK_REQUEST_METRIC) if k in h} for h in loop.state.log_history
        ]
    else:
        # ordered after KubeflowCallback the ack still went out once, but later reports replace it
        assert ACK_STEP_METRIC not in final


class FakeTrainer:
    """What transformers' JIT CheckpointManager touches on a Trainer."""

    def __init__(self, args: TrainingArguments, state: TrainerState) -> None:
        self.args, self.state, self.model = args, state, None
        self.saves = 0

    def _get_output_dir(self, trial: object) -> str:
        return str(self.args.output_dir)

    def _save_checkpoint(self, model: object, trial: object) -> None:
        Path(self.args.output_dir, f"checkpoint-{self.state.global_step}").mkdir(parents=True, exist_ok=True)
        self.saves += 1


class SigtermDuringStep(TrainerCallback):
    """Makes the JIT manager's SIGTERM timer fire inside ``on_step_end`` of a given step."""

    def __init__(self, jit: Any, step: int) -> None:
        self.jit, self.step = jit, step

    def on_step_end(self, args: Any, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if state.global_step == self.step:
            self.jit.jit_manager.is_checkpoint_requested = True


@pytest.mark.parametrize("ours_first", [True, False])
@pytest.mark.parametrize(("sigterm_seen_at", "checkpoint_step"), [("step_begin", 3), ("step_end", 4)])
def test_coexists_with_enable_jit_checkpoint(
    tmp_path: Path,
    volume: DownwardAPIVolume,
    channel: RecordingChannel,
    ours_first: bool,
    sigterm_seen_at: str,
    checkpoint_step: int,
) -> None:
    from transformers.trainer_jit_checkpoint import JITCheckpointCallback

    args = _args(tmp_path, enable_jit_checkpoint=True)
    volume.write({"team": "a"})
    ours = AdvisorCallback(_listener(volume, channel))
    jit = JITCheckpointCallback()
    trigger = SigtermDuringStep(jit, 4 if sigterm_seen_at == "step_end" else -1)
    ordered = [ours, jit] if ours_first else [jit, ours]
    handler = CallbackHandler([DefaultFlowCallback(), trigger, *ordered], None, None, None, None)
    loop = Loop(handler, args, 50)
    trainer = FakeTrainer(args, loop.state)
    previous = signal.getsignal(signal.SIGTERM)
    jit.set_trainer(trainer)
    try:
        loop.begin()
        for _ in range(3):
            loop.step()
        # the platform asks for a checkpoint while Kueue evicts the job (SIGTERM)
        volume.write({CHECKPOINT_REQUEST_ANNOTATION: "88"})
        if sigterm_seen_at == "step_begin":
            jit.jit_manager.is_checkpoint_requested = True
        loop.step()
        assert loop.control.should_training_stop
        loop.end()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert trainer.saves == 1 and loop.saved == []  # one checkpoint, written by the JIT path
    assert [(r.last_checkpoint_step, r.last_checkpoint_request) for r in channel.reports] == [
        (checkpoint_step, "88")
    ]


def test_training_ending_before_the_save_does_not_acknowledge(
    tmp_path: Path, volume: DownwardAPIVolume, channel: RecordingChannel
) -> None:
    volume.write({CHECKPOINT_REQUEST_ANNOTATION: "9"})
    ours = AdvisorCallback(_listener(volume, channel))
    args, state, control = _args(tmp_path), TrainerState(max_steps=5), TrainerControl()
    state.global_step = 2
    ours.on_step_end(args, state, control)
    assert control.should_save
    ours.on_train_end(args, state, control)  # crashed/stopped before _save_checkpoint ran
    assert channel.reports == []


def test_importing_the_adapters_loads_no_framework() -> None:
    code = (
        "import sys, advisor.training, advisor.training.hf, advisor.training.lightning\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'transformers', 'lightning',"
        " 'pytorch_lightning'}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.stdout.strip() == "[]"


def test_a_request_whose_save_was_skipped_is_asked_for_again(
    tmp_path: Path, volume: DownwardAPIVolume, channel: RecordingChannel
) -> None:
    volume.write({CHECKPOINT_REQUEST_ANNOTATION: "4"})
    ours = AdvisorCallback(_listener(volume, channel))
    args, state = _args(tmp_path), TrainerState(max_steps=9)
    state.global_step = 1
    first = TrainerControl()
    ours.on_step_end(args, state, first)
    assert first.should_save
    state.global_step = 2  # the Trainer did not save on step 1
    second = TrainerControl()
    ours.on_step_end(args, state, second)
    assert second.should_save
    ours.on_save(args, state, second)
    assert [(r.last_checkpoint_step, r.last_checkpoint_request) for r in channel.reports] == [(2, "4")]


def test_a_non_numeric_request_id_rides_only_on_the_direct_report(
    tmp_path: Path, volume: DownwardAPIVolume, status_server: RecordedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers.integrations.integration_utils import KubeflowCallback

    _kubeflow_env(monkeypatch, status_server, tmp_path)
    kubeflow = KubeflowCallback()
    kubeflow._MIN_UPDATE_INTERVAL = 0.0
    volume.write({CHECKPOINT_REQUEST_ANNOTATION: "checkpoint-3fa2b1c9d0"})
    ours = AdvisorCallback(_listener(volume, KubeflowStatusChannel(status_server.url, use_sdk=False)))
    loop = Loop(
        CallbackHandler([DefaultFlowCallback(), kubeflow, ours], None, None, None, None), _args(tmp_path), 10
    )
    ours.attach(loop)
    loop.begin()
    for _ in range(3):
        loop.step()
    posted = [status_server.metrics(i) for i in range(len(status_server.posts))]
    direct = [m for m in posted if m.get(ACK_REQUEST_METRIC) == "checkpoint-3fa2b1c9d0"]
    assert len(direct) == 1 and direct[0][ACK_STEP_METRIC] == "1"
    # KubeflowCallback keeps numbers only: later reports still say which step was saved
    later = posted[posted.index(direct[0]) + 1 :]
    assert later and all(m.get(ACK_STEP_METRIC) == "1" and ACK_REQUEST_METRIC not in m for m in later)
