"""An evaluation reaches the replayed controller at the step it was taken at, also when no loss was
logged at that step (Lightning validates at an epoch's last step, between its every-50-steps loss
logs): the back-test names the same best step as ``forecast`` and the log, as the end of the span
a controller told no eval step names."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

import advisor.reported as reported_module
from advisor.backtest.replay import new_core, replay
from advisor.backtest.runs import load_runs
from advisor.cli import main
from policies import load_policies

ROOT = Path(__file__).resolve().parents[2]
PLATEAU = ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"
STEPS_PER_EPOCH = 390
EPOCHS = 25


def _lightning_metrics(path: Path) -> Path:
    """A Lightning ``CSVLogger`` metrics.csv of an overfitting run: the training loss every 50 steps
    (at ``global_step - 1``), and at each epoch's end a validation row at a step no loss was logged at
    (``val_loss`` U-shaped, lowest near step 4,000), then the epoch's mean training loss."""
    rng = np.random.default_rng(7)
    rows = ["epoch,lr-AdamW,step,train_loss_epoch,train_loss_step,val_acc,val_loss"]
    step = 0
    for epoch in range(EPOCHS):
        losses = []
        for _ in range(STEPS_PER_EPOCH):
            step += 1
            loss = max(0.01, (0.05 + 2.25 * math.exp(-step / 2500)) * (1 + rng.normal(0, 0.05)))
            losses.append(loss)
            if step % 50 == 0:
                lr = 1e-3 * 0.5 * (1 + math.cos(math.pi * step / (STEPS_PER_EPOCH * EPOCHS)))
                rows.append(f"{epoch},{lr:.8f},{step - 1},,{loss:.5f},,")
        x = step / 1000
        val = 0.55 + 1.8 * math.exp(-x / 0.9) + 0.012 * max(0.0, x - 3.5) ** 2 + rng.normal(0, 0.01)
        acc = 0.86 - 0.5 * math.exp(-x / 0.9) - 0.0025 * max(0.0, x - 3.5) ** 1.5
        rows.append(f"{epoch},,{step - 1},,,{acc:.4f},{val:.4f}")
        rows.append(f"{epoch},,{step - 1},{np.mean(losses):.5f},,,")
    path.write_text("\n".join(rows) + "\n")
    return path


def _val_rows(path: Path) -> dict[int, float]:
    """step -> val_loss of the file's validation rows."""
    out = {}
    for line in path.read_text().splitlines()[1:]:
        cells = line.split(",")
        if cells[6]:
            out[int(cells[2])] = float(cells[6])
    return out


def test_an_evaluation_between_two_loss_logs_is_reported_at_its_own_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _lightning_metrics(tmp_path / "metrics.csv")
    (run,), _ = load_runs([path])
    assert run.eval_steps is not None
    # most evaluations are at a step no loss was logged at (every 5th epoch ends on a multiple of 50)
    assert len(set(run.eval_steps.tolist()) - set(run.steps.tolist())) == 20
    reported: list[tuple[int, bool, bool]] = []
    real = reported_module.sample_from_object

    def spy(body, *, now=None):  # type: ignore[no-untyped-def]
        names = {m["name"]: m["value"] for m in body["status"]["trainerStatus"]["metrics"]}
        reported.append((int(float(names["current_step"])), run.eval_metric in names, "loss" in names))
        return real(body, now=now)

    monkeypatch.setattr(reported_module, "sample_from_object", spy)
    out = replay("p", new_core(load_policies(PLATEAU), 60.0), run, report_interval_s=60.0)
    with_eval = [step for step, has_eval, _ in reported if has_eval]
    assert out.stopped and out.step is not None  # released once it overfits: the evals up to there
    assert with_eval == [int(s) for s in run.eval_steps if s <= out.step]
    assert len(with_eval) >= 10
    # a report at an eval's own step carries a training loss only where the log has one
    logged = set(run.steps.tolist())
    assert all(has_loss == (step in logged) for step, has_eval, has_loss in reported if has_eval)
    steps = [step for step, _, _ in reported]
    assert steps == sorted(steps)


def test_the_backtest_names_the_best_evaluation_step_the_log_and_forecast_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _lightning_metrics(tmp_path / "metrics.csv")
    vals = _val_rows(path)
    best = min(vals, key=lambda s: vals[s])
    assert main(["backtest", str(path), "--policy", str(PLATEAU), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    reasons = [d["reason"] or "" for row in rows for d in row.get("decisions", [])]
    # the replayed controller is told no eval step: the best evaluation came with the report at its
    # step, and was made after the report before it (a loss log 50 steps back at most)
    spans = {
        (int(a.replace(",", "")), int(b.replace(",", "")))
        for r in reasons
        for a, b in re.findall(r"best \w+ \S+ between steps ([\d,]+) and ([\d,]+)", r)
    }
    assert len(spans) == 1
    ((after, by),) = spans
    assert by == best and best - 50 < after <= best
    assert main(["forecast", str(path)]) == 0
    assert f"best evaluation step {best:,}" in capsys.readouterr().out
