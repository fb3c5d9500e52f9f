"""A run log reached twice (by another path, or as a copy of its content) is one run."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.sources.runlogs import find_run_logs
from tests.backtest.test_backtest import PLATEAU, _learning, _write


def _runs(folder: Path, names: tuple[str, ...] = ("a", "b")) -> Path:
    folder.mkdir(parents=True)
    for k, name in enumerate(names, start=1):
        s, v = _learning(k, n=40)
        _write(folder / f"{name}.csv", s, v, total=400)
    return folder


def test_a_folder_given_again_through_a_link_is_read_once_with_a_note(tmp_path: Path) -> None:
    runs = _runs(tmp_path / "runs")
    (tmp_path / "link").symlink_to(runs)
    notes: list[str] = []
    logs = find_run_logs([runs, tmp_path / "link"], note=notes.append)
    assert [log.path for log in logs] == [runs / "a.csv", runs / "b.csv"]
    assert notes == [
        f"{tmp_path / 'link'}: 2 run logs are the same files as those read from {runs}; each read once"
    ]


def test_one_file_by_two_paths_or_named_twice_is_one_run(tmp_path: Path) -> None:
    runs = _runs(tmp_path / "runs")
    (tmp_path / "link").symlink_to(runs)
    notes: list[str] = []
    logs = find_run_logs([runs / "a.csv", tmp_path / "link" / "a.csv"], note=notes.append)
    assert [log.path for log in logs] == [runs / "a.csv"]
    assert notes == [f"{tmp_path / 'link' / 'a.csv'}: the same file as {runs / 'a.csv'}; read once"]
    notes.clear()
    assert len(find_run_logs([runs / "a.csv", runs / "a.csv"], note=notes.append)) == 1
    assert notes == [f"{runs / 'a.csv'}: named twice; read once"]


def test_a_gz_copy_or_a_renamed_copy_is_read_once_naming_both(tmp_path: Path) -> None:
    runs = _runs(tmp_path / "runs")
    (runs / "a.csv.gz").write_bytes(gzip.compress((runs / "a.csv").read_bytes()))
    shutil.copy(runs / "b.csv", runs / "b_copy.csv")
    notes: list[str] = []
    logs = find_run_logs([runs], note=notes.append)
    assert [log.name for log in logs] == ["a.csv", "b.csv"]
    assert notes == [
        f"{runs / 'a.csv.gz'}: the same log as {runs / 'a.csv'}; read once",
        f"{runs / 'b_copy.csv'}: the same log as {runs / 'b.csv'}; read once",
    ]


def test_empty_files_are_not_copies_of_one_another(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("")
    (tmp_path / "b.csv").write_text("")
    assert len(find_run_logs([tmp_path], note=lambda _line: None)) == 2


def test_backtest_counts_a_run_given_twice_once_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = _runs(tmp_path / "runs")
    (tmp_path / "link").symlink_to(runs)
    out = tmp_path / "bt.json"
    argv = ["backtest", str(runs), f"{tmp_path / 'link'}/", "--quiet", "--policy", str(PLATEAU)]
    assert main([*argv, "--baselines", "no-advisor", "--json-file", str(out)]) == 0
    captured = capsys.readouterr()
    assert "2 runs in" in captured.out
    assert "each read once" in captured.err
