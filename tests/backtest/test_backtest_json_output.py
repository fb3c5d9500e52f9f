"""``backtest``'s JSON outputs follow simulate's convention, through the real console script:
``--json`` on stdout (the table on stderr), ``--json-file FILE``, ``--json FILE`` deprecated but
still writing, and the sweep's JSON and summary the same way."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backtest.test_backtest import PLATEAU, _learning, _plateaued, _write

SCRIPT = Path(sys.executable).parent / "trainjob-advisor"

pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="console script not installed")


def _runs(root: Path) -> Path:
    runs = root / "runs"
    runs.mkdir()
    for i in range(2):
        s, v = _plateaued(10 + i)
        _write(runs / f"flat{i}.csv", s, v, total=6000, evals=10)
    s, v = _learning(20)
    _write(runs / "learning.csv", s, v, total=6000, evals=10)
    return runs


def _backtest(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), "backtest", *argv, "--quiet"], capture_output=True, text=True, timeout=300
    )


def test_json_on_stdout_json_file_and_the_deprecated_form(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    done = _backtest(str(runs), "--policy", str(PLATEAU), "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert rows[0]["policy"] == "no-advisor" and rows[-1]["policy"] == "advisor-plateau-release"
    assert "wrong stop" in done.stderr.lower()  # the table and its legend went to stderr
    to_file = _backtest(str(runs), "--policy", str(PLATEAU), "--json-file", str(tmp_path / "a" / "bt.json"))
    assert to_file.returncode == 0 and "deprecated" not in to_file.stderr
    assert json.loads((tmp_path / "a" / "bt.json").read_text()) == rows
    old = _backtest(str(runs), "--policy", str(PLATEAU), "--json", str(tmp_path / "old.json"))
    assert old.returncode == 0
    assert "backtest: --json FILE is deprecated; use --json-file" in old.stderr
    assert json.loads((tmp_path / "old.json").read_text()) == rows


def test_bad_json_outputs_are_one_line_errors_before_the_run(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    both = _backtest(str(runs), "--json", "--json-file", str(tmp_path / "x.json"))
    assert both.returncode == 2 and "give --json or --json-file, not both" in both.stderr
    a_dir = _backtest(str(runs), "--json-file", str(tmp_path))
    assert a_dir.returncode == 2 and "is a directory" in a_dir.stderr
    assert "Traceback" not in both.stderr + a_dir.stderr


def test_json_before_the_runs_never_overwrites_a_run(tmp_path: Path) -> None:
    """``--json`` typed before the run files takes the first as its FILE (the deprecated form):
    it must refuse rather than write the table over the user's run."""
    runs = _runs(tmp_path)
    victim = runs / "flat0.csv"
    before = victim.read_bytes()
    done = _backtest("--json", str(victim), str(runs / "learning.csv"))
    assert done.returncode == 2 and "never writes over anything" in done.stderr
    assert "--json-file" in done.stderr and "Traceback" not in done.stderr
    assert victim.read_bytes() == before
    into_input = _backtest(str(victim), "--json-file", str(victim))
    assert into_input.returncode == 2 and "is one of the inputs" in into_input.stderr
    assert victim.read_bytes() == before


def test_sweep_json_on_stdout_and_the_shared_summary(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    done = _backtest(
        str(runs),
        "--policy",
        str(PLATEAU),
        "--sweep",
        "plateau.probability=0.7,0.9",
        "--workers",
        "1",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert [p["label"] for p in doc["points"]]
    assert set(doc) == {"points", "frontier", "best", "max_wrong", "unnamed", "passed_over"}
    assert doc["unnamed"] == [] and doc["passed_over"] is None  # every setting judges what runs report
    assert len(doc["points"]) == 2
    # a row's keys too: one script reads rows and sweep points alike
    for p in doc["points"]:
        assert (
            p["wrong_stops_by_threshold"] == p["wrong_by_threshold"]
            and p["near_end_releases"] == p["near_end"]
        )
    assert "settings of" in done.stderr and "over 3 runs" in done.stderr
    # 3 runs bound no wrong-stop rate within 1%: said plainly, the best by point rate as information
    assert all(p["runs"] == 3 and p["wrong_upper"] >= 0.63 for p in doc["points"]), doc["points"]
    assert doc["best"] is None
    assert "no setting's wrong-stop rate is shown to be within 1.00% on 3 runs" in done.stderr
    assert "up to " in done.stderr and "at 95%" in done.stderr
    assert "in-sample: chosen and scored on the same 3 runs" in done.stderr


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_outputs_the_file_system_refuses_are_found_before_the_run(tmp_path: Path) -> None:
    """``/proc`` is a directory whose permission bits let root write, and whose file system makes
    no file: found by creating the outputs (and removing them) before the run, not after it with
    an internal error. A good output's missing directories are made and removed again."""
    runs = _runs(tmp_path)
    json_out = _backtest(str(runs), "--json-file", "/proc/trainjob-advisor-test.json")
    assert json_out.returncode == 2, json_out.stderr
    # (as root the permission bits let it through and creating it fails; as a user they refuse)
    assert "--json-file /proc/trainjob-advisor-test.json: cannot write" in json_out.stderr
    report = _backtest(str(runs), "--report", "/proc/trainjob-advisor-test/report")
    assert report.returncode == 2 and "--report /proc/trainjob-advisor-test/report: cannot " in report.stderr
    assert "internal error" not in json_out.stderr + report.stderr


def test_an_output_that_fails_after_the_run_keeps_the_json_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that fills during the run: one clear line, and the result kept in a file of its own."""
    from advisor.cli import CommandError
    from advisor.commands.json_output import emit_json

    def full(self: Path, text: str) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(
        CommandError, match=r"cannot write it \(No space left on device\); the JSON is in "
    ) as err:
        emit_json({"policy": "p", "runs": 3}, tmp_path / "out.json")
    kept = Path(str(err.value).rsplit("the JSON is in ", 1)[1])
    try:
        assert json.loads(kept.read_text()) == {"policy": "p", "runs": 3}
    finally:
        kept.unlink()
