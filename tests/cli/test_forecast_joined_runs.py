"""``forecast FOLDER`` on a folder whose one run is spread over several files (TensorBoard's
per-tag exports, a resumed Lightning run's versions): the run, with every field of its files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor import cli


def _tb(folder: Path, tag: str, steps: range, value: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["Wall time,Step,Value"] + [
        f"{1.7e9 + s / 2:.3f},{s},{value * (1 + s / 200) ** -0.5:.5g}" for s in steps
    ]
    (folder / f"run-exp-tag-{tag}.csv").write_text("\n".join(lines) + "\n")


def test_forecast_reads_a_folder_of_one_runs_tensorboard_exports_as_that_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _tb(tmp_path, "train_loss", range(0, 4001, 10), 3.5)
    _tb(tmp_path, "eval_loss", range(500, 4001, 500), 3.6)
    _tb(tmp_path, "learning_rate", range(0, 4001, 10), 3e-4)
    assert cli.main(["forecast", str(tmp_path), "--total-steps", "10000"]) == 0
    out = capsys.readouterr().out
    assert "eval_loss" in out and "learning rates unknown" not in out
    assert "one run of 3 TensorBoard exports" in out


def test_forecast_reads_a_resumed_lightning_run_as_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for version, steps in (("version_0", range(49, 3000, 50)), ("version_1", range(2549, 6000, 50))):
        folder = tmp_path / "lightning_logs" / "my_model" / version
        folder.mkdir(parents=True)
        rows = [f"{s // 500},{s},{2 * (1 + s / 300) ** -0.5:.4f},1.0e-04" for s in steps]
        (folder / "metrics.csv").write_text("epoch,step,train_loss,lr-AdamW\n" + "\n".join(rows) + "\n")
    assert cli.main(["forecast", str(tmp_path / "lightning_logs"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["last_step"] == 5999 and out["n_points"] == 120  # no step read twice


def test_a_resumed_runs_state_reads_its_evaluations_without_the_abandoned_attempts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log of a run trained to step 2,000, then resumed from its checkpoint at 600: its best
    evaluation (step 800) had been counted "9 evaluations ago" with the lost attempt's 1,000 to
    2,000. Read as the run that went on made it, as the forecast joins it and the controller
    judges a run that went back: 2 evaluations ago (1,000 and 1,200)."""
    import math

    from advisor.sources import load_curve

    rows = ["step,loss,eval_loss"]
    for steps in (range(10, 2001, 10), range(610, 1201, 10)):
        for s in steps:
            ev = f"{0.5 + 0.3 * ((s - 800) / 800) ** 2:.4f}" if s % 200 == 0 else ""
            rows.append(f"{s},{2.0 * math.exp(-s / 500) + 0.3:.4f},{ev}")
    path = tmp_path / "resumed.csv"
    path.write_text("\n".join(rows) + "\n")
    assert cli.main(["forecast", str(path)]) == 0
    assert "best evaluation step 800 (eval_loss 0.5, 2 evaluations ago" in capsys.readouterr().out
    evals = load_curve(path, metric="eval_loss")
    kept = evals.resumed()
    assert list(kept.steps) == [200, 400, 600, 800, 1000, 1200] and len(evals) == 13
    sorted_once = load_curve(path, metric="loss").in_step_order()
    assert sorted_once.resumed().steps[-1] == 1200
