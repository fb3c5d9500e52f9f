"""Runs whose log is spread over several files: TensorBoard's per-tag scalar exports of one run,
and a PyTorch Lightning run resumed into a later ``version_<n>`` folder, are each one run."""

from __future__ import annotations

from pathlib import Path

from advisor.sources import load_curve
from advisor.sources.files import parse_log
from advisor.sources.runlogs import find_run_logs


def _tb(folder: Path, name: str, steps: range, value: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["Wall time,Step,Value"] + [f"{1.7e9 + s / 2:.3f},{s},{value - s * 1e-4:.5g}" for s in steps]
    (folder / name).write_text("\n".join(lines) + "\n")


def _tb_run(folder: Path, run: str = "exp", prefix: str = "run-") -> None:
    _tb(folder, f"{prefix}{run}-tag-train_loss.csv", range(0, 4001, 10), 3.5)
    _tb(folder, f"{prefix}{run}-tag-eval_loss.csv", range(500, 4001, 500), 3.6)
    _tb(folder, f"{prefix}{run}-tag-learning_rate.csv", range(0, 4001, 10), 3e-4 + 0.4)


def test_a_runs_tensorboard_exports_are_one_run_whose_fields_are_the_tags(tmp_path: Path) -> None:
    _tb_run(tmp_path / "tb")
    (log,) = find_run_logs([tmp_path / "tb"])
    curve = load_curve(log.path)
    assert curve.metric == "loss" and len(curve) == 401
    assert curve.learning_rates is not None and len(curve.learning_rates) == 401
    assert "eval_loss" in curve.columns
    eval_curve = load_curve(log.path, metric="eval_loss")
    assert eval_curve.steps == tuple(float(s) for s in range(500, 4001, 500))
    assert any("3 TensorBoard exports" in w for w in curve.warnings)
    # the back-test reads it the same way
    (cid, parsed), *_ = parse_log(log.path).curves("eval_loss")
    assert cid is None and len(parsed) == 8 and any("TensorBoard" in w for w in parsed.warnings)


def test_exports_named_without_run_prefix_are_joined_too(tmp_path: Path) -> None:
    _tb_run(tmp_path / "tb", run="exp", prefix="")
    (log,) = find_run_logs([tmp_path / "tb"])
    assert log.name == "exp-tag-*.csv"
    assert "eval_loss" in load_curve(log.path).columns


def test_exports_of_different_runs_in_one_folder_stay_separate_runs(tmp_path: Path) -> None:
    _tb_run(tmp_path / "tb", run="a")
    _tb_run(tmp_path / "tb", run="b")
    _tb(tmp_path / "tb", "run-c-tag-train_loss.csv", range(0, 1001, 10), 3.5)
    (tmp_path / "tb" / "run-c-tag-eval_loss.csv").write_text(
        "step,eval_loss\n100,2.5\n200,2.4\n"
    )  # no export
    logs = find_run_logs([tmp_path / "tb"])
    assert sorted(log.name for log in logs) == [
        "run-a-tag-*.csv",
        "run-b-tag-*.csv",
        "run-c-tag-eval_loss.csv",
        "run-c-tag-train_loss.csv",
    ]


def _lightning(folder: Path, steps: range, loss: float, *, eval_every: int = 0) -> None:
    folder.mkdir(parents=True)
    lines = ["epoch,step,train_loss,val_loss,lr-AdamW"]
    for s in steps:
        lines.append(f"{s // 500},{s},{loss - s * 1e-4:.4f},,1.0e-04")
        if eval_every and (s + 1) % eval_every == 0:
            lines.append(f"{s // 500},{s},,{loss + 0.1 - s * 1e-4:.4f},")
    (folder / "metrics.csv").write_text("\n".join(lines) + "\n")


def test_a_resumed_lightning_run_is_one_run_the_later_version_winning_where_both_log(
    tmp_path: Path,
) -> None:
    name = tmp_path / "lightning_logs" / "my_model"
    _lightning(name / "version_0", range(49, 3000, 50), 2.0)
    _lightning(name / "version_1", range(2549, 6000, 50), 1.0)  # resumed at 2,500: 2,549.. again
    (log,) = find_run_logs([tmp_path / "lightning_logs"])
    assert log.name == "my_model/version_0+version_1/metrics.csv"
    curve = load_curve(log.path)
    assert curve.steps == tuple(float(s) for s in range(49, 6000, 50))  # no step twice
    assert curve.values[curve.steps.index(2549.0)] == 1.0 - 2549e-4  # version_1's
    assert curve.values[curve.steps.index(2499.0)] == round(2.0 - 2499e-4, 4)  # version_0's
    assert any("resuming" in w and "version_1 at step 2,549" in w for w in curve.warnings)


def test_lightning_versions_that_start_again_are_separate_experiments(tmp_path: Path) -> None:
    name = tmp_path / "lightning_logs" / "my_model"
    _lightning(name / "version_0", range(49, 3000, 50), 2.0)
    _lightning(name / "version_1", range(49, 2000, 50), 1.5)
    _lightning(name / "version_2", range(1549, 4000, 50), 1.2)  # resumes version_1
    logs = find_run_logs([tmp_path / "lightning_logs"])
    assert [log.name for log in logs] == [
        "my_model/version_0/metrics.csv",
        "my_model/version_1+version_2/metrics.csv",
    ]
