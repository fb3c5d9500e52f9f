"""Several series of one log file read from one reading of it: the same curves, warnings and
errors as reading each series alone, and the file read once however many series are wanted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.sources.files import SourceError, load_curves, parse_log

EVALS = ["eval_loss", "eval_accuracy", "eval_f1", "eval_wer"]


def _trainer_state(path: Path) -> Path:
    history: list[dict[str, object]] = []
    for step in range(1, 61):
        history.append({"step": step, "loss": 2.0 / step, "learning_rate": 1e-4, "epoch": step / 20})
        if step % 10 == 0:
            history.append(
                {"step": step, "epoch": step / 20, **{m: 0.1 * k + step / 100 for k, m in enumerate(EVALS)}}
            )
    path.write_text(json.dumps({"log_history": history, "max_steps": 50}))  # logged past its max_steps
    return path


def _multi_run_csv(path: Path) -> Path:
    rows = ["curve_id,step,loss,lr,eval_loss,eval_accuracy,eval_f1"]
    for cid in ("a", "b"):
        for step in range(1, 31):
            evals = f"{1 / step},{step / 30}," + ("oops" if (cid, step) == ("b", 20) else f"{step / 31}")
            rows.append(
                f"{cid},{step},{2 / step},{'' if step % 7 else 1e-4},{evals if step % 5 == 0 else ',,'}"
            )
    path.write_text("\n".join(rows) + "\n")
    return path


def _step_missing_on_one_eval_row(path: Path) -> Path:
    """Step 0 to 19; the row that only carries ``eval_f1`` has no step (that series fails there)."""
    rows = ["step,loss,eval_loss,eval_f1"]
    rows += [f"{s},{1 / (s + 1)},{'' if s % 4 else 1 / (s + 2)},{'' if s % 6 else s / 20}" for s in range(20)]
    rows.insert(9, ",,,0.5")
    path.write_text("\n".join(rows) + "\n")
    return path


def _alone(path: Path, metric: str | None) -> list[tuple[str | None, object]] | str:
    try:
        return list(load_curves(path, metric=metric))
    except SourceError as exc:
        return str(exc)


@pytest.mark.parametrize("make", [_trainer_state, _multi_run_csv, _step_missing_on_one_eval_row])
def test_every_series_read_in_one_pass_is_what_reading_it_alone_gives(tmp_path: Path, make) -> None:
    path = make(tmp_path / "run.log")
    metrics: list[str | None] = [None, "loss", *EVALS, "eval_bleu", "not_a_metric"]
    together = parse_log(path).curves_each(metrics)
    for metric, got in zip(metrics, together, strict=True):
        assert (str(got) if isinstance(got, SourceError) else got) == _alone(path, metric), metric
    # the cases above are all there: a curve past its max_steps, a bad value in one run of one
    # metric, a metric the file lacks, a name that is no metric
    said = [str(got) for got in together if isinstance(got, SourceError)]
    assert any("eval_bleu" in s for s in said) and any("not_a_metric" in s for s in said)


def test_a_bad_shared_field_fails_each_metric_where_reading_it_alone_fails(tmp_path: Path) -> None:
    """A bad learning rate on line 6 is every metric's error, unless the metric's own value fails
    on an earlier line."""
    path = tmp_path / "log.csv"
    lines = ["step,loss,learning_rate,eval_loss,eval_accuracy"]
    for step in range(1, 9):
        lr = "bad" if step == 5 else "0.001"
        acc = "x" if step == 2 else "0.5"
        lines.append(f"{step},{1 / step},{lr},{1 / step},{acc}")
    path.write_text("\n".join(lines) + "\n")
    metrics: list[str | None] = [None, "eval_loss", "eval_accuracy"]
    together = [str(e) for e in parse_log(path).curves_each(metrics)]
    assert together == [_alone(path, m) for m in metrics]
    assert together[0].endswith(":6: column 'learning_rate': 'bad' is not a number")
    assert ":3: " in together[2]


def test_the_back_test_reads_a_run_file_once_for_all_its_eval_series(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import advisor.sources.files as files
    from advisor.backtest.runs import load_runs

    reads: list[Path] = []
    read_text = files._read_text

    def counted(path: Path) -> str:
        reads.append(path)
        return read_text(path)

    monkeypatch.setattr(files, "_read_text", counted)
    path = _trainer_state(tmp_path / "trainer_state.json")
    (run,), _skipped = load_runs([path])
    assert run.eval_metric == "eval_loss" and [name for name, _s, _v in run.other_evals] == EVALS[1:]
    assert reads == [path]
