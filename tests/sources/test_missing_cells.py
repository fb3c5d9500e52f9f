"""A cell its row does not fill is no value, whatever the writer put in it: nothing, ``NA``,
``null``, or the ``NaN`` that W&B's and polars' exports write into the other kind of row's
columns. A NaN a run really logged (it blew up) still counts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.sources import load_curve
from advisor.sources.large_table import LARGE_ROWS


def _curve(step: float) -> float:
    return 2 + 1.5 * (1 + step / 200) ** -0.7


def _separate_rows(path: Path, filler: str, *, rows: int = 300, lr: bool = False) -> Path:
    """A W&B-style history: training rows and evaluation rows apart, the other's cells ``filler``."""
    lines = ["_step,_runtime,train/loss,eval/loss" + (",train/learning_rate" if lr else "")]
    k = 0
    for i in range(1, rows + 1):
        s = 10 * i
        lines.append(f"{k},{s * 0.5},{_curve(s):.4f},{filler}" + (",1e-4" if lr else ""))
        k += 1
        if i % 30 == 0:
            lines.append(f"{k},{s * 0.5 + 2},{filler},{_curve(s) + 0.1:.4f}" + (f",{filler}" if lr else ""))
            k += 1
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("filler", ["NaN", "nan", "", "NA", "null", "None", "<NA>"])
def test_a_filled_cell_of_the_other_kind_of_row_is_no_value(tmp_path: Path, filler: str) -> None:
    path = _separate_rows(tmp_path / "h.csv", filler, lr=True)
    train = load_curve(path)
    evals = load_curve(path, metric="eval_loss")
    assert len(train) == 300 and all(math.isfinite(v) for v in train.values)
    assert len(evals) == 10 and all(math.isfinite(v) for v in evals.values)
    assert not any("non-finite" in w for w in train.warnings + evals.warnings)


@pytest.mark.parametrize("last_row", ["eval", "train"])
def test_a_healthy_run_exported_with_nan_fillers_reads_learning_not_diverging(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], last_row: str
) -> None:
    path = _separate_rows(tmp_path / "h.csv", "NaN")
    if last_row == "train":
        path.write_text(path.read_text() + f"999,3000,{_curve(3010):.4f},NaN\n")
    assert main(["forecast", str(path), "--json"]) == 0
    state = json.loads(capsys.readouterr().out)["state"]
    assert state["label"] == "learning" and state["probabilities"]["diverging"] < 0.1


def test_a_long_table_drops_the_fillers_before_it_bins(tmp_path: Path) -> None:
    path = _separate_rows(tmp_path / "long.csv", "NaN", rows=LARGE_ROWS + 3_000)
    evals = load_curve(path, metric="eval_loss")
    assert len(evals) == (LARGE_ROWS + 3_000) // 30 and all(math.isfinite(v) for v in evals.values)
    assert all(math.isfinite(v) for v in load_curve(path).values)


def test_a_nan_the_run_logged_on_its_own_rows_still_counts(tmp_path: Path) -> None:
    # training rows with their learning rate: the NaN loss is the run's
    lines = ["step,loss,learning_rate,eval_loss"]
    lines += [f"{s},{_curve(s):.4f},1e-4," for s in range(10, 400, 10)]
    lines += [f"{s},NaN,1e-4," for s in range(400, 500, 10)]
    (tmp_path / "blew.csv").write_text("\n".join(lines) + "\n")
    curve = load_curve(tmp_path / "blew.csv")
    assert sum(1 for v in curve.values if math.isnan(v)) == 10
    # and a plain step,loss log that ends in NaN: no other kind of row to tell it from
    plain = ["step,loss"] + [f"{s},{_curve(s):.4f}" for s in range(10, 400, 10)] + ["400,nan", "410,nan"]
    (tmp_path / "plain.csv").write_text("\n".join(plain) + "\n")
    assert sum(1 for v in load_curve(tmp_path / "plain.csv").values if math.isnan(v)) == 2
    # an evaluation row whose eval loss is NaN beside its other eval fields: the evaluation's
    rows = ["step,loss,eval_loss,eval_runtime"] + [f"{s},{_curve(s):.4f},," for s in range(10, 400, 10)]
    rows += ["200,,2.4,3.0", "390,,NaN,3.1"]
    (tmp_path / "evals.csv").write_text("\n".join(rows) + "\n")
    evals = load_curve(tmp_path / "evals.csv", metric="eval_loss")
    assert len(evals) == 2 and math.isnan(evals.values[-1])
