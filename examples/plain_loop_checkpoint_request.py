"""Watch a checkpoint request being honoured by a hand-written training loop (numpy only).

Run:  python examples/plain_loop_checkpoint_request.py

What happens: a tiny linear regression trains for 300 steps. At step 100 the "platform" (played
here by a few lines of this script, standing in for the trainjob-advisor controller) annotates the
pod: it rewrites a local downward-API directory exactly as the kubelet does (new timestamped
directory, atomic ``..data`` symlink swap). The loop hears the request on its next step, saves a
checkpoint, and acknowledges it; the acknowledgement travels as the metrics
``last_checkpoint_step`` / ``last_checkpoint_request`` in the progress file, where the "platform"
finds it. In a real pod the only differences are the file path (/etc/podinfo/annotations) and the
channel (Kubeflow's status server, the RHOAI /metrics endpoint or the PyTorchJob annotation).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from advisor.protocol import ACK_REQUEST_METRIC, ACK_STEP_METRIC, CHECKPOINT_REQUEST_ANNOTATION
from advisor.training import CheckpointRequests, JsonlFileChannel, checkpoint_if_requested
from advisor.training.localpod import DownwardAPIVolume


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--request-at", type=int, default=100, help="step at which the platform asks")
    parser.add_argument("--workdir", type=Path, default=None, help="where to write files")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="advisor-example-"))

    volume = DownwardAPIVolume(workdir / "podinfo")
    volume.write({"team": "example"})  # the kubelet writes the file before the container starts
    progress = workdir / "progress.jsonl"
    requests = CheckpointRequests(volume.path, channels=[JsonlFileChannel(progress)], reporter=True)

    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 8))
    w_true = rng.normal(size=8)
    y = x @ w_true + 0.1 * rng.normal(size=512)
    w = np.zeros(8)
    request_id = "1764496200000"

    for step in range(1, args.steps + 1):
        batch = rng.integers(0, len(x), size=32)
        grad = 2 * x[batch].T @ (x[batch] @ w - y[batch]) / len(batch)
        w -= 0.05 * grad
        loss = float(np.mean((x @ w - y) ** 2))
        requests.update_progress(step, total_steps=args.steps, metrics={"loss": loss})

        if step == args.request_at:  # --- the platform's side: annotate the pod ---
            print(f"[platform] step {step}: annotating the pod {CHECKPOINT_REQUEST_ANNOTATION}={request_id}")
            volume.write({"team": "example", CHECKPOINT_REQUEST_ANNOTATION: request_id})

        def save(step: int = step, w: np.ndarray = w, loss: float = loss) -> None:
            path = workdir / "checkpoints" / f"step-{step}.npz"
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(path, w=w, step=step)
            print(f"[trainer]  step {step}: saved {path.name} (loss {loss:.4f})")

        honoured = checkpoint_if_requested(requests, step, save)
        if honoured:
            print(f"[trainer]  step {step}: acknowledged request {honoured}")

    # --- the platform's side again: read the progress channel for the acknowledgement ---
    acks = [json.loads(line) for line in progress.read_text().splitlines()]
    seen = [(row[ACK_REQUEST_METRIC], row[ACK_STEP_METRIC]) for row in acks if ACK_REQUEST_METRIC in row]
    if (request_id, args.request_at) not in seen:
        print(f"[platform] no acknowledgement of {request_id} found in {progress}")
        return 1
    print(f"[platform] request {request_id} acknowledged: checkpoint at step {args.request_at} ({progress})")
    print(f"final loss {loss:.4f}; files under {workdir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
