"""A file that cannot be read as a loss history raises SourceError naming the file, the line
(or log_history entry) and the reason, in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.sources import SourceError, load_curve


def _error(tmp_path: Path, name: str, content: str | bytes, **kwargs: str) -> SourceError:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(SourceError) as info:
        load_curve(path, **kwargs)
    message = str(info.value)
    assert message.startswith(str(path))
    assert "\n" not in message
    return info.value


@pytest.mark.parametrize(
    ("name", "content", "line", "reason"),
    [
        ("garbage.csv", "step,loss\n0,3.0\n10,abc\n", 3, "'abc' is not a number"),
        ("ragged.csv", "step,loss\n0,3.0\n10,2.5,7\n", 3, "expected 2 fields, found 3"),
        ("negative.csv", "step,loss\n0,3.0\n-10,2.5\n", 3, "step -10.0 is not a non-negative number"),
        ("nostep.csv", "step,loss\n0,3.0\n,2.5\n", 3, "missing step"),
        ("badtime.tsv", "step\tloss\ttime\n0\t3.0\t0\n10\t2.5\tlater\n", 3, "'later' is not a number"),
        (
            "bad.jsonl",
            '{"step": 0, "loss": 3.0}\n{"step": 10, "loss": \n{"step": 20, "loss": 2.0}\n',
            2,
            "invalid JSON",
        ),
        ("cut.jsonl", '{"step": 10, "loss": \n', 1, "invalid JSON"),  # a last line, but the only one
        ("list.jsonl", '{"step": 0, "loss": 3.0}\n[1, 2]\n', 2, "expected a JSON object"),
        (
            "strloss.jsonl",
            '{"step": 0, "loss": 3.0}\n\n{"step": 1, "loss": "high"}\n',
            3,
            "'high' is not a number",
        ),
        ("binary.csv", b"step,loss\n0,3.0\n\xff\xfe\x00\n", 3, "not UTF-8"),
        ("header.csv", "step,loss,loss\n0,1,2\n", 1, "duplicate column names"),
    ],
)
def test_bad_rows_name_their_line(
    tmp_path: Path, name: str, content: str | bytes, line: int, reason: str
) -> None:
    error = _error(tmp_path, name, content)
    assert error.line == line
    assert f":{line}: " in str(error)
    assert reason in error.reason


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("empty.csv", "", "empty file"),
        ("blank.csv", "\n  \n", "empty file"),
        ("comments.csv", "# nothing here\n", "no data lines"),
        ("headeronly.csv", "step,loss\n", "no data rows"),
        ("noloss.csv", "step,accuracy\n0,0.5\n", "no loss field (found: step, accuracy)"),
        ("nostep.csv", "epoch_time,loss\n0,3.0\n", "no step field"),
        ("allempty.csv", "step,loss\n0,\n1,\n", "no row has a value for 'loss'"),
        ("wide.csv", "1,2,3,4,5,6\n", "no header and 6 columns"),
        (
            "many.csv",
            "run_id,step,loss\na,0,1\nb,0,2\n",
            "holds 2 curves (column 'run_id': a, b); choose one",
        ),
    ],
)
def test_bad_files_say_why(tmp_path: Path, name: str, content: str, reason: str) -> None:
    assert reason in _error(tmp_path, name, content).reason


def test_trainer_state_errors_point_at_the_entry(tmp_path: Path) -> None:
    state = {"max_steps": 10, "log_history": [{"step": 1, "loss": 2.0}, {"step": 2, "loss": [1]}]}
    error = _error(tmp_path, "trainer_state.json", json.dumps(state))
    assert "(log_history[1])" in str(error)
    assert "is not a number" in error.reason


def test_trainer_state_with_a_non_object_entry(tmp_path: Path) -> None:
    error = _error(tmp_path, "trainer_state.json", json.dumps({"log_history": [{"step": 1, "loss": 2.0}, 7]}))
    assert "(log_history[1])" in str(error)


def test_trainer_state_without_eval_loss_suggests_the_training_loss(tmp_path: Path) -> None:
    state = {"log_history": [{"step": 1, "loss": 2.0}]}
    error = _error(tmp_path, "trainer_state.json", json.dumps(state), metric="eval_loss")
    assert "no evaluation-loss field" in error.reason and "use metric loss" in error.reason


def test_trainer_state_with_non_list_history(tmp_path: Path) -> None:
    assert "'log_history' is not a list" in _error(tmp_path, "t.json", '{"log_history": {}}').reason


def test_a_missing_file_and_a_directory(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file"):
        load_curve(tmp_path / "absent.csv")
    with pytest.raises(SourceError, match="is a directory"):
        load_curve(tmp_path)


def test_an_unknown_metric_or_curve_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("curve_id,step,loss\n1,0,3.0\n")
    with pytest.raises(SourceError, match="unknown metric 'accuracy'"):
        load_curve(path, metric="accuracy")
    with pytest.raises(SourceError, match=r"no curve '9' in column 'curve_id' \(found: 1\)"):
        load_curve(path, curve_id="9")
    single = tmp_path / "b.csv"
    single.write_text("step,loss\n0,3.0\n")
    with pytest.raises(SourceError, match="a curve was chosen"):
        load_curve(single, curve_id="1")


def test_a_gzip_compressed_log_reads_as_its_text_and_a_truncated_one_says_so(tmp_path: Path) -> None:
    import gzip

    text = "step,loss\n" + "".join(f"{i * 10},{2.0 / (1 + i)}\n" for i in range(1, 60))
    (tmp_path / "run.csv").write_text(text)
    packed = gzip.compress(text.encode())
    (tmp_path / "run.csv.gz").write_bytes(packed)
    plain, zipped = load_curve(tmp_path / "run.csv"), load_curve(tmp_path / "run.csv.gz")
    assert list(zipped.steps) == list(plain.steps) and list(zipped.values) == list(plain.values)
    (tmp_path / "cut.gz").write_bytes(packed[: len(packed) // 2])
    with pytest.raises(SourceError, match="truncated"):
        load_curve(tmp_path / "cut.gz")


@pytest.mark.parametrize("end", ["", "\n", "\n\n"])
def test_a_jsonl_log_cut_short_in_its_last_line_is_read_without_it(tmp_path: Path, end: str) -> None:
    """A log read while its writer is mid-line: the last line alone is skipped, with a warning
    naming it; the same line anywhere else is an error (``test_bad_rows_name_their_line``)."""
    from advisor.sources.files import load_curves

    path = tmp_path / "live.jsonl"
    path.write_text('{"step": 0, "loss": 3.0}\n\n{"step": 10, "loss": 2.5}\n{"step": 20, "lo' + end)
    for curve in (load_curve(path), load_curves(path)[0][1]):
        assert curve.steps == (0.0, 10.0) and curve.values == (3.0, 2.5)
        assert any(w.startswith("line 4: invalid JSON") and "skipped" in w for w in curve.warnings)


@pytest.mark.parametrize("cut", ["20", "20,", "20,2.4", "20,2.4,0.", "20,2.4,1e-", "20,2.4,1.72"])
def test_a_table_cut_short_in_its_unended_last_line_is_read_without_it(tmp_path: Path, cut: str) -> None:
    """A CSV read while its writer is mid-row: a last line that is not ended and lacks fields, or
    ends in a number cut short (``0.`` was read as a loss of 0), is skipped with a warning naming
    it (a row with a field missing but its line ended is an error). So is one whose fields look
    whole: ``1.72`` was a learning rate of ``1.72e-04`` cut mid-number, read silently."""
    from advisor.sources.files import load_curves

    path = tmp_path / "live.csv"
    path.write_text("step,loss,eval_loss\n0,3.0,\n10,2.5,2.7\n" + cut)
    for curve in (load_curve(path), load_curves(path)[0][1]):
        assert curve.steps == (0.0, 10.0) and curve.values == (3.0, 2.5)
        assert any(w.startswith("line 4: ") and "skipped" in w for w in curve.warnings)
    if cut.count(",") < 2:
        path.write_text("step,loss,eval_loss\n0,3.0,\n10,2.5,2.7\n" + cut + "\n")
        with pytest.raises(SourceError, match="expected 3 fields"):
            load_curve(path)


def test_a_pretty_printed_json_object_that_is_no_log_says_so(tmp_path: Path) -> None:
    """A model's config.json or HF's all_results.json named as a log: it was "line 1: invalid
    JSON", of a valid file."""
    path = tmp_path / "all_results.json"
    path.write_text('{\n  "epoch": 3.0,\n  "eval_loss": 0.9\n}\n')
    with pytest.raises(SourceError, match=r"one JSON object with no log_history \(keys: epoch, eval_loss\)"):
        load_curve(path)


def test_a_trainer_state_cut_short_says_it_ends_early_at_its_real_end(tmp_path: Path) -> None:
    """A trainer_state.json read while the Trainer rewrites it (it does so in place at each save):
    it was "line 1 column 2: expecting property name" (read as JSONL), a wrong place and no hint."""
    whole = json.dumps(
        {"global_step": 30, "log_history": [{"step": s, "loss": 2.0} for s in (10, 20, 30)]}, indent=2
    )
    cut = whole[: whole.rindex('"loss"')]
    error = _error(tmp_path, "trainer_state.json", cut)
    assert error.line == cut.count("\n") + 1
    assert "ends early" in error.reason and "still being written" in error.reason
    assert "line 1 column 2" not in str(error)
    # another JSON error inside the document is told where it is
    broken = whole.replace('"loss": 2.0', '"loss": oops', 1)
    error = _error(tmp_path, "trainer_state.json", broken)
    assert error.line == broken[: broken.index("oops")].count("\n") + 1
    assert "invalid JSON" in error.reason and "ends early" not in error.reason


def test_a_jsonl_log_named_json_is_still_read_line_by_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    path.write_text('{"step": 1, "loss": 3.0}\n{"step": 2, "loss": 2.5}\n{"step": 3, "loss": 2.4}\n')
    assert load_curve(path).values == (3.0, 2.5, 2.4)


def test_a_cut_recounts_the_files_warnings_under_the_columns_own_name(tmp_path: Path) -> None:
    """``upto`` keeps only what the forecast at the cut could know: the non-finite values of a
    W&B export's ``train/loss`` (read as ``loss``) after the cut were counted in its warnings,
    and a restart after the cut was said too."""
    rows = [f"{s},{2.0 - s / 1000}" for s in range(10, 310, 10)] + [f"{s},NaN" for s in range(310, 340, 10)]
    rows += [f"{s},{1.8 - s / 1000}" for s in range(200, 300, 10)]  # a resume from step 200
    path = tmp_path / "export.csv"
    path.write_text("Step,train/loss\n" + "\n".join(rows) + "\n")
    curve = load_curve(path)
    assert "3 non-finite train/loss values" in curve.warnings
    assert "step goes backwards 1 time(s) in the file" in curve.warnings
    assert not any("non-finite" in w or "backwards" in w for w in curve.upto(250).warnings)
    assert curve.upto(320).warnings == ("2 non-finite train/loss values",)
    assert curve.upto(330).warnings == curve.warnings


@pytest.mark.parametrize(("raw", "said"), [("lots", "is not a number"), (2.5, "not a positive whole number")])
def test_an_unusable_total_is_warned_of_once(tmp_path: Path, raw: object, said: str) -> None:
    """``"max_steps": "lots"`` was warned of twice (not a number; not a positive whole number),
    which read as two problems."""
    path = tmp_path / "trainer_state.json"
    history = [{"step": s, "loss": 2.0 / s} for s in (1, 2, 3)]
    path.write_text(json.dumps({"max_steps": raw, "log_history": history}))
    curve = load_curve(path)
    about = [w for w in curve.warnings if "max_steps" in w]
    assert len(about) == 1 and said in about[0], about
    assert curve.total_steps is None
