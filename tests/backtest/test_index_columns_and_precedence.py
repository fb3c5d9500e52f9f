"""Which columns an index gives runs, said as read; ``--index`` wins over an index found beside the
runs for the runs it lists, and the found one fills in the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.backtest.runs import read_runs
from advisor.cli import main
from tests.backtest.test_backtest import PLATEAU, _learning, _write

_FOUND = "found beside the runs, read automatically"


def _runs(folder: Path, names: tuple[str, ...] = ("a", "b", "c")) -> Path:
    folder.mkdir(parents=True)
    for seed, name in enumerate(names, start=1):
        s, v = _learning(seed, n=40)
        _write(folder / f"{name}.csv", s, v, total=400)
    return folder


def _notes(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(["backtest", *argv, "--quiet", "--policy", str(PLATEAU), "--baselines", "no-advisor"]) == 0
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("index ")]


def test_the_note_names_only_the_columns_the_index_has(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = _runs(tmp_path / "runs")
    index = runs / "index.csv"
    index.write_text("file,repo,path\na.csv,org/a,x/a.csv\nb.csv,org/b,x/b.csv\nc.csv,org/c,x/c.csv\n")
    assert _notes([str(runs)], capsys) == [
        f"index {index} ({_FOUND}): group (its repo column, else the folder of its path column) for 3 of 3 "
        "runs; no gpus column: 1 GPU each"
    ]
    index.write_text("run,notes\na.csv,first\n")
    assert _notes([str(runs)], capsys) == [
        f"index {index} ({_FOUND}): no gpus, group or labels column: 1 GPU each, grouped by folder; "
        "a row for 1 of 3 runs (a.csv)"
    ]
    assert _notes([str(runs), "--gpus", "4"], capsys)[0].startswith(
        f"index {index} ({_FOUND}): no gpus, group or labels column: 4 GPUs each (--gpus), grouped by folder"
    )
    index.write_text("run,gpus,group,labels\na.csv,2,g,team=a\n")
    assert _notes([str(runs)], capsys) == [
        f"index {index} ({_FOUND}): gpus, group and labels for 1 of 3 runs (a.csv)"
    ]


def test_an_index_given_wins_for_the_runs_it_lists_and_the_found_one_gives_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = _runs(tmp_path / "runs")
    (runs / "index.csv").write_text("run,gpus\nb.csv,8\nbb.csv,4\n")
    given = tmp_path / "ext.csv"
    given.write_text("run,gpus\na.csv,2\nb.csv,3\n")
    loaded = read_runs([runs], index=given)
    assert {r.name: r.gpus for r in loaded.runs} == {"a.csv": 2, "b.csv": 3, "c.csv": 1}
    # only the row naming no run read is unmatched; the found index's b.csv row named a run
    assert [(u.index, u.key) for u in loaded.unmatched_rows] == [(runs / "index.csv", "bb.csv")]
    assert [(w.run, w.index, w.others) for w in loaded.without_row] == [
        ("c.csv", given, (runs / "index.csv",))
    ]
    err = _notes([str(runs), "--index", str(given)], capsys)
    assert err == [
        f"index {given} (--index): gpus for 2 of 3 runs (a.csv, b.csv)",
        f"index {runs / 'index.csv'} ({_FOUND}): gpus for 0 of 3 runs; "
        "the row of 1 run overridden by --index",
    ]


def test_the_found_index_fills_in_the_runs_the_given_one_does_not_list(tmp_path: Path) -> None:
    runs = _runs(tmp_path / "runs")
    (runs / "index.csv").write_text("run,gpus\nc.csv,8\n")
    given = tmp_path / "ext.csv"
    given.write_text("run,gpus\na.csv,2\n")
    loaded = read_runs([runs], index=given)
    assert {r.name: r.gpus for r in loaded.runs} == {"a.csv": 2, "b.csv": 1, "c.csv": 8}
    assert loaded.unmatched_rows == []
    assert {u.index: (u.matched, u.runs) for u in loaded.indexes} == {
        given: (1, ("a.csv",)),
        runs / "index.csv": (1, ("c.csv",)),
    }


def test_an_empty_group_cell_puts_the_run_in_no_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An index with a group column whose cell is empty for a run: that run belongs to no group,
    so median stopping finds no peers for it (its folder as its group had put 32-GPU pre-training
    runs among 1-GPU fine-tunes as one group's peers); the footer says how many are in none."""
    runs = _runs(tmp_path / "runs", ("a", "b", "c", "d"))
    (runs / "index.csv").write_text("run,gpus,group\na.csv,1,sweep\nb.csv,1,sweep\nc.csv,32,\nd.csv,1,\n")
    loaded = read_runs([runs])
    groups = {r.name: r.group for r in loaded.runs}
    assert groups["a.csv"] == groups["b.csv"] == "sweep"
    assert len({groups["c.csv"], groups["d.csv"], "sweep"}) == 3
    argv = ["backtest", str(runs), "--quiet", "--policy", str(PLATEAU), "--baselines", "no-advisor"]
    assert main(argv) == 0
    assert "4 runs: 2 in 1 group, 2 in none (an empty group cell in the index)" in capsys.readouterr().out
    # without a group column, the folder is the group, as before
    (runs / "index.csv").write_text("run,gpus\na.csv,1\nb.csv,1\nc.csv,32\nd.csv,1\n")
    assert len({r.group for r in read_runs([runs]).runs}) == 1


def test_the_reports_header_leaves_out_a_map_with_nothing_in_it() -> None:
    """A bullet whose map is empty said nothing ("metrics a row's rules judge that no run reports: ");
    one that names a metric stays."""
    from advisor.backtest.report_meta import meta_lines

    assert not any("no run reports" in line for line in meta_lines({"runs": 3, "unreported_metrics": {}}))
    lines = meta_lines({"runs": 3, "unreported_metrics": {"mine": "eval_f1"}})
    assert "- **metrics a row's rules judge that no run reports**: mine eval_f1" in lines


def test_a_run_listed_twice_with_other_values_is_an_error_naming_both_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two rows for one run used to be read silently, the later winning: the run was replayed on
    the second row's GPUs and nothing said which row was read."""
    runs = _runs(tmp_path / "runs")
    index = runs / "index.csv"
    index.write_text("run,gpus\na.csv,8\nb.csv,2\na.csv,4\n")
    argv = ["backtest", str(runs), "--quiet", "--policy", str(PLATEAU), "--baselines", "no-advisor"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"trainjob-advisor backtest: error: {index}:4: run: 'a.csv' is also line 2's, with other values: "
        "a run has one row"
    ]
    # the same row twice says nothing new and is read as one
    index.write_text("run,gpus\na.csv,8\nb.csv,2\na.csv,8\n")
    assert main(argv) == 0


def test_an_index_saved_with_a_byte_order_mark_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A spreadsheet's "CSV UTF-8" export starts with a byte-order mark, which hid the run column
    ('no run column'), though the header named it."""
    runs = _runs(tmp_path / "runs")
    index = runs / "index.csv"
    index.write_bytes(b"\xef\xbb\xbfrun,gpus\r\na.csv,8\r\nb.csv,2\r\nc.csv,2\r\n")
    assert _notes([str(runs)], capsys) == [f"index {index} ({_FOUND}): gpus for 3 of 3 runs"]


def test_the_help_says_the_given_index_wins_as_it_does(capsys: pytest.CaptureFixture[str]) -> None:
    """``--index``'s help said an index found beside the runs 'is used before this one', the
    opposite of what the back-test does and the README says."""
    with pytest.raises(SystemExit):
        main(["backtest", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "is used before this one" not in text
    assert "this one wins for the runs it lists, and the one found gives the rest theirs" in text
