"""The examples run and show a request being honoured end to end (platform asks, loop saves,
acknowledgement found in the progress channel)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.protocol import ACK_REQUEST_METRIC, ACK_STEP_METRIC

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), "--workdir", str(tmp_path), *extra],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_plain_loop_example(tmp_path: Path) -> None:
    out = _run("plain_loop_checkpoint_request.py", tmp_path, "--steps", "120", "--request-at", "40")
    assert out.returncode == 0, out.stderr
    assert "request 1764496200000 acknowledged: checkpoint at step 40" in out.stdout
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-40.npz"]
    rows = [json.loads(line) for line in (tmp_path / "progress.jsonl").read_text().splitlines()]
    assert [(r[ACK_STEP_METRIC], r[ACK_REQUEST_METRIC]) for r in rows] == [(40, "1764496200000")]
    assert rows[0]["step"] == 40 and rows[0]["total_steps"] == 120 and rows[0]["loss"] > 0


@pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("torch", "transformers", "accelerate")),
    reason="the HF example needs torch, transformers and accelerate (extra: training-test)",
)
def test_hf_example(tmp_path: Path) -> None:
    out = _run("hf_checkpoint_request.py", tmp_path, "--steps", "40", "--request-at", "10")
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [json.loads(line) for line in (tmp_path / "progress.jsonl").read_text().splitlines()]
    acked = [r for r in rows if r.get(ACK_REQUEST_METRIC) == "1764496200000"]
    assert acked and (tmp_path / "out" / f"checkpoint-{acked[0][ACK_STEP_METRIC]}").is_dir()
