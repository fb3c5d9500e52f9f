"""A training loss named otherwise than the role table knows (``lm_loss``, ``nll_loss``,
``loss_epoch``) is read as the run's loss when it is the file's only loss (or the total among
several), and can be named with ``--metric``; a file with several and no total is asked which."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.series import Direction, direction_of
from advisor.sources import SourceError, load_curve


def _log(path: Path, columns: list[str]) -> Path:
    rows = [",".join(["step", *columns])]
    rows += [
        ",".join([str(s), *(f"{3 - 0.1 * s + 0.01 * k:.3f}" for k in range(len(columns)))])
        for s in range(1, 9)
    ]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("name", ["lm_loss", "nll_loss", "loss_epoch", "train/lm_loss"])
def test_a_files_only_loss_of_another_name_is_its_training_loss(tmp_path: Path, name: str) -> None:
    curve = load_curve(_log(tmp_path / "a.csv", [name, "val_loss"]))
    assert curve.metric == "loss" and f"'{name}'" in curve.source


def test_among_several_losses_the_total_is_read_and_without_one_the_file_asks(tmp_path: Path) -> None:
    curve = load_curve(_log(tmp_path / "t.csv", ["lm_loss", "aux_loss", "total_loss"]))
    assert "'total_loss'" in curve.source
    with pytest.raises(SourceError, match="no loss field"):
        load_curve(_log(tmp_path / "n.csv", ["lm_loss", "aux_loss"]))
    named = load_curve(tmp_path / "n.csv", metric="aux_loss")
    assert named.metric == "loss" and "'aux_loss'" in named.source


def test_metric_names_another_loss_beside_the_usual_one(tmp_path: Path) -> None:
    path = _log(tmp_path / "b.csv", ["loss", "lm_loss"])
    assert "'loss'" in load_curve(path).source
    assert "'lm_loss'" in load_curve(path, metric="lm_loss").source
    with pytest.raises(SourceError, match="unknown metric 'lm_losss'"):
        load_curve(path, metric="lm_losss")


def test_trl_reward_accuracies_improve_upwards() -> None:
    assert direction_of("eval_rewards_accuracies") is Direction.HIGHER
    assert direction_of("eval_accuracy_top5") is Direction.HIGHER
