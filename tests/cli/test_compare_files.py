"""``compare`` on run logs (a sweep's ``trainer_state.json`` files, or their folder): ranked by the
eval metric they are judged by, each run's state and best step as ``forecast FILE`` gives them."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from advisor import cli


def _sweep_run(path: Path, *, overfit: bool, steps: int = 3000, seed: int = 0) -> None:
    rng = random.Random(seed)
    history: list[dict[str, float]] = []
    for s in range(10, steps + 1, 10):
        history.append(
            {"step": s, "loss": 0.3 + 2 * math.exp(-s / 600) + rng.gauss(0, 0.02), "epoch": s / 1000}
        )
        if s % 100 == 0:
            if overfit:
                ev = (
                    1.2 + 1.5 * (math.exp(-s / 300) - math.exp(-1000 / 300))
                    if s <= 1000
                    else 1.2 + (s - 1000) / 800
                )
            else:
                ev = 1.0 + 1.2 * math.exp(-s / 700)
            history.append({"step": s, "eval_loss": ev + rng.gauss(0, 0.01), "epoch": s / 1000})
    path.write_text(json.dumps({"log_history": history, "max_steps": 3000, "global_step": steps}))


def test_a_sweep_folder_ranks_by_the_eval_loss_and_names_the_overfitting_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    _sweep_run(sweep / "overfit.json", overfit=True)
    _sweep_run(sweep / "steady.json", overfit=False, seed=1)
    _sweep_run(sweep / "steady-halfway.json", overfit=False, steps=1500, seed=2)
    (sweep / "notes.md").write_text("not a run")
    assert cli.main(["compare", str(sweep), "-o", "json"]) == 0
    rows = {Path(r["run"]).name: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"overfit.json", "steady.json", "steady-halfway.json"}
    assert {r["metric"] for r in rows.values()} == {"eval_loss"}
    assert rows["overfit.json"]["state"] == "overfitting" and rows["overfit.json"]["probabilityBest"] < 0.01
    assert rows["overfit.json"]["bestStep"] == 1000
    assert rows["steady.json"]["state"] == "plateaued"  # finished, and its eval ended at its best
    assert rows["steady-halfway.json"]["state"] == "learning"
    assert rows["steady-halfway.json"]["progress"] == "1,500/3,000"
    assert cli.main(["compare", str(sweep / "overfit.json"), str(sweep / "steady.json")]) == 0
    out = capsys.readouterr().out
    assert "FINAL EVAL_LOSS" in out and "ranked by eval_loss (lower is better)" in out


def test_run_logs_and_forecast_names_do_not_mix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _sweep_run(tmp_path / "a.json", overfit=False)
    assert cli.main(["compare", str(tmp_path / "a.json"), "lr-1e-4"]) == 2
    err = capsys.readouterr().err
    assert "lr-1e-4: no such file; give run logs only, or TrainJobForecast names only" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["compare", str(empty), str(tmp_path / "a.json")]) == 2
    assert "no run logs in it" in capsys.readouterr().err
