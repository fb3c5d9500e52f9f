"""Watch the HuggingFace Trainer honour a checkpoint request (tiny model, CPU, a few seconds).

Needs:  pip install torch transformers accelerate   (a CPU build of torch is enough)
Run:    python examples/hf_checkpoint_request.py

A 2-layer MLP learns a noisy linear function for 60 steps with ``transformers.Trainer`` and
``advisor.training.hf.AdvisorCallback``. At step 20 the "platform" (a few lines of this script,
standing in for the trainjob-advisor controller) annotates the pod by rewriting a local
downward-API directory the way the kubelet does (new timestamped directory, atomic ``..data``
symlink swap). On its next step the callback sets ``control.should_save``; the Trainer writes
``checkpoint-<step>``; ``on_save`` acknowledges with the metrics ``last_checkpoint_step`` and
``last_checkpoint_request``, which the script then finds in the progress file and in
``trainer_state.json``'s log history. Periodic saves would be reported the same way.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from advisor.protocol import ACK_REQUEST_METRIC, ACK_STEP_METRIC, CHECKPOINT_REQUEST_ANNOTATION
from advisor.training import CheckpointRequests, JsonlFileChannel
from advisor.training.localpod import DownwardAPIVolume

REQUEST_ID = "1764496200000"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--request-at", type=int, default=20, help="step at which the platform asks")
    parser.add_argument("--workdir", type=Path, default=None, help="where to write files")
    opts = parser.parse_args()
    try:
        import torch
        from transformers import Trainer, TrainerCallback, TrainingArguments
    except ImportError as exc:
        print(f"this example needs torch, transformers and accelerate: {exc}", file=sys.stderr)
        return 2
    from advisor.training.hf import AdvisorCallback

    workdir = opts.workdir or Path(tempfile.mkdtemp(prefix="advisor-hf-example-"))
    volume = DownwardAPIVolume(workdir / "podinfo")
    volume.write({"team": "example"})  # the kubelet writes the file before the container starts
    progress = workdir / "progress.jsonl"

    class TinyRegressor(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

        def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
            out = self.net(x).squeeze(-1)
            result = {"logits": out}
            if labels is not None:
                result["loss"] = torch.nn.functional.mse_loss(out, labels)
            return result

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 8, generator=generator)
    y = x @ torch.randn(8, generator=generator) + 0.1 * torch.randn(1024, generator=generator)
    dataset = [{"x": x[i], "labels": y[i]} for i in range(len(x))]

    class Platform(TrainerCallback):
        """The controller's side, simulated: annotate the pod at one step."""

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step == opts.request_at:
                print(f"[platform] step {opts.request_at}: annotating the pod, request {REQUEST_ID}")
                volume.write({"team": "example", CHECKPOINT_REQUEST_ANNOTATION: REQUEST_ID})

    training_args = TrainingArguments(
        output_dir=str(workdir / "out"),
        max_steps=opts.steps,
        per_device_train_batch_size=32,
        learning_rate=1e-2,
        logging_steps=10,
        save_strategy="no",  # only the requested checkpoint is written
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        enable_jit_checkpoint=True,  # on SIGTERM HF saves by itself; the callback coexists with it
    )
    requests = CheckpointRequests(volume.path, channels=[JsonlFileChannel(progress)], reporter=True)
    trainer = Trainer(
        model=TinyRegressor(), args=training_args, train_dataset=dataset, callbacks=[Platform()]
    )
    AdvisorCallback(requests).attach(trainer)  # first in the list; acks also go through trainer.log
    trainer.train()

    rows = [json.loads(line) for line in progress.read_text().splitlines()]
    acked = [row for row in rows if row.get(ACK_REQUEST_METRIC) == REQUEST_ID]
    checkpoints = sorted(p.name for p in (workdir / "out").glob("checkpoint-*"))
    logged = [h for h in trainer.state.log_history if ACK_STEP_METRIC in h]
    if not acked or not checkpoints:
        print(f"[platform] request {REQUEST_ID} was not acknowledged (checkpoints: {checkpoints})")
        return 1
    step = acked[0][ACK_STEP_METRIC]
    print(f"[platform] request {REQUEST_ID} acknowledged: {checkpoints} at step {step}")
    print(f"[platform] the ack in trainer_state.json's log history: {logged}")
    print(f"files under {workdir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
