"""Every back-tested run has a name of its own, which everything is keyed by: in HF's layout
(``<sweep>/<run>/trainer_state.json``) every run's file has the same name, and the runs must not
be taken for one another (verdicts, decisions, timelines, index rows)."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest

from advisor.backtest.runs import RunError, load_runs
from advisor.cli import main
from tests.backtest.test_backtest import PLATEAU

#: eval curves of a small LR sweep: one overfits after step 1000, one plateaus early, two learn on
_EVALS = {
    "lr1e-4": lambda s: 0.78 + 0.9 * math.exp(-s / 300) + 0.4 * max(0.0, (s - 1000) / 2000) ** 1.2,
    "lr1e-3": lambda s: 1.30 + 0.4 * math.exp(-s / 200),
    "lr2e-5": lambda s: 0.90 + 0.8 * math.exp(-s / 1500),
    "lr5e-5": lambda s: 0.86 + 0.85 * math.exp(-s / 900),
}


def _trainer_state(path: Path, run: str) -> None:
    history: list[dict[str, float]] = []
    for s in range(10, 3001, 10):
        history.append({"step": s, "loss": 0.4 + 1.6 * math.exp(-s / 700), "epoch": s / 1000})
        if s % 200 == 0:
            history.append({"step": s, "eval_loss": _EVALS[run](s), "epoch": s / 1000})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"log_history": history, "max_steps": 3000, "global_step": 3000}))


def _hf_sweep(root: Path) -> Path:
    for run in _EVALS:
        _trainer_state(root / run / "trainer_state.json", run)
    return root


def test_runs_in_the_hf_layout_are_named_by_their_path_in_the_folder_given(tmp_path: Path) -> None:
    sweep = _hf_sweep(tmp_path / "sweep")
    runs, _ = load_runs([sweep])
    assert [r.name for r in runs] == [
        "lr1e-3/trainer_state.json",
        "lr1e-4/trainer_state.json",
        "lr2e-5/trainer_state.json",
        "lr5e-5/trainer_state.json",
    ]
    # files named alone keep their file name, with their folder's when every run's file has that
    # name ("trainer_state.json" alone names no run), as in the folder given
    (one,), _ = load_runs([sweep / "lr1e-3" / "trainer_state.json"])
    assert one.name == "lr1e-3/trainer_state.json"
    two, _ = load_runs([sweep / "lr1e-3" / "trainer_state.json", sweep / "lr1e-4" / "trainer_state.json"])
    assert [r.name for r in two] == ["lr1e-3/trainer_state.json", "lr1e-4/trainer_state.json"]
    # unless that would name two runs alike: then by their path as given
    _trainer_state(tmp_path / "other" / "lr1e-3" / "trainer_state.json", "lr1e-4")  # another run
    twins, _ = load_runs([sweep / "lr1e-3", tmp_path / "other" / "lr1e-3"])
    assert [r.name for r in twins] == [
        (sweep / "lr1e-3" / "trainer_state.json").as_posix(),
        (tmp_path / "other" / "lr1e-3" / "trainer_state.json").as_posix(),
    ]
    # a folder and a file in it name that file once
    both, _ = load_runs([sweep, sweep / "lr1e-3" / "trainer_state.json"])
    assert len(both) == 4


def test_a_run_folder_given_beside_a_sweep_is_named_by_its_folder_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``backtest sweep hf_f1``: the sweep's runs read ``lr1e-3/trainer_state.json``, and the run
    folder given itself read as just ``trainer_state.json``, its folder, its only name, dropped: in
    the JSON, the table's decisions and the report alike it is ``hf_f1/trainer_state.json``."""
    sweep = _hf_sweep(tmp_path / "sweep")
    state = tmp_path / "hf_f1" / "trainer_state.json"
    _trainer_state(state, "lr1e-4")
    state.write_text(json.dumps({**json.loads(state.read_text()), "trial_name": "f1"}))  # not a copy
    runs, _ = load_runs([sweep, tmp_path / "hf_f1"])
    expected = {*(f"{run}/trainer_state.json" for run in _EVALS), "hf_f1/trainer_state.json"}
    assert {r.name for r in runs} == expected
    report = tmp_path / "report"
    argv = ["backtest", str(sweep), str(state.parent), "--policy", str(PLATEAU), "--report", str(report)]
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    named = {d["run"] for row in rows for d in row["decisions"]}
    assert "hf_f1/trainer_state.json" in named and "trainer_state.json" not in named
    text = "\n".join(p.read_text() for p in report.rglob("*") if p.is_file() and p.suffix in (".md", ".csv"))
    assert "hf_f1/trainer_state.json" in text
    assert not re.search(r"^(\| |### )trainer_state\.json", text, re.MULTILINE)  # rows and timelines


def test_a_sweep_in_the_hf_layout_is_judged_as_the_same_files_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each stop judged against its own run's curve: the decisions are those of the same logs
    copied flat into one folder, each under its own name."""
    sweep = _hf_sweep(tmp_path / "sweep")
    flat = tmp_path / "flat"
    flat.mkdir()
    for run in _EVALS:
        shutil.copy(sweep / run / "trainer_state.json", flat / f"{run}.json")

    def decisions(folder: Path) -> dict[str, list[dict[str, object]]]:
        out = tmp_path / f"{folder.name}.json"
        argv = ["backtest", str(folder), "--quiet", "--policy", str(PLATEAU), "--json-file", str(out)]
        assert main([*argv, "--baselines", "no-advisor,patience,median-stopping"]) == 0
        rows = json.loads(out.read_text())
        assert rows[0]["backtest"]["groups"] == 1  # one sweep: median stopping compares its runs
        return {
            r["policy"]: [{k: v for k, v in d.items() if k not in ("run", "group")} for d in r["decisions"]]
            for r in rows
        }

    nested, side_by_side = decisions(sweep), decisions(flat)
    capsys.readouterr()
    assert nested == side_by_side
    assert sum(1 for d in nested["patience"] if d["action"]) >= 1  # something was stopped and judged


def test_the_report_draws_one_timeline_per_stopped_run(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    sweep = _hf_sweep(tmp_path / "sweep")
    rep, out = tmp_path / "rep", tmp_path / "bt.json"
    # the sample with a 5-minute window: these short runs then give the report several stops to draw
    eager = tmp_path / "eager.yaml"
    eager.write_text(PLATEAU.read_text().replace("for: 20m ", "for: 5m "))
    argv = ["backtest", str(sweep), "--quiet", "--policy", str(eager), "--baselines", "no-advisor,patience"]
    assert main([*argv, "--json-file", str(out), "--report", str(rep)]) == 0
    stopped = {d["run"] for row in json.loads(out.read_text()) for d in row["decisions"] if d["action"]}
    assert len(stopped) >= 2 and all(name.endswith("/trainer_state.json") for name in stopped)
    pngs = sorted(p.name for p in rep.glob("timeline-*.png"))
    assert len(pngs) == len(stopped)
    text = (rep / "report.md").read_text()
    assert all(f"### {name}" in text for name in stopped)


def test_an_index_beside_a_sweep_in_the_hf_layout_addresses_each_run(tmp_path: Path) -> None:
    sweep = _hf_sweep(tmp_path / "sweep")
    (sweep / "index.csv").write_text(
        "run,gpus,group\nlr1e-3/trainer_state.json,8,a\nlr1e-4,4,b\nlr2e-5/trainer_state,2,a\n"
    )
    runs, _ = load_runs([sweep])
    assert [(r.name, r.gpus, r.group) for r in runs] == [
        ("lr1e-3/trainer_state.json", 8, "a"),
        ("lr1e-4/trainer_state.json", 4, "b"),
        ("lr2e-5/trainer_state.json", 2, "a"),
        ("lr5e-5/trainer_state.json", 1, str(sweep)),
    ]
    # a file name that several runs' logs have addresses none of them: an error that says what to give
    (sweep / "index.csv").write_text("run,gpus\ntrainer_state.json,8\n")
    with pytest.raises(RunError, match=r"4 runs' logs have that file name.*'lr1e-3/trainer_state.json'"):
        load_runs([sweep])
    # a file name that only one run's log has still addresses it
    (sweep / "lr5e-5" / "trainer_state.json").rename(sweep / "lr5e-5" / "state.json")
    (sweep / "index.csv").write_text("run,gpus\nstate.json,8\n")
    runs, _ = load_runs([sweep])
    assert [r.gpus for r in runs] == [1, 1, 1, 8]


def test_an_index_elsewhere_names_a_run_folder_given_itself_by_its_name_or_a_path_out_of_its_folder(
    tmp_path: Path,
) -> None:
    """``backtest sweep/lr1e-4 --index notes/index.csv``: a row naming the run folder (``lr1e-4``),
    as a row beside the sweep would, or by its path from the index's folder (``../sweep/lr1e-4``),
    gives the run its GPUs and labels (an ML engineer's row ``r05_wsd_hf`` matched no run: the run's
    path relative to the folder given is only ``trainer_state.json``, and the label that kept the
    plateau policy off a pretraining run was lost)."""
    sweep = _hf_sweep(tmp_path / "sweep")
    notes = tmp_path / "notes"
    notes.mkdir()
    for cell in ("lr1e-4", "../sweep/lr1e-4", "../sweep/lr1e-4/trainer_state.json"):
        (notes / "index.csv").write_text(f"run,gpus,labels\n{cell},8,workload-type=pretraining\n")
        runs, _ = load_runs([sweep / "lr1e-4"], index=notes / "index.csv")
        assert [(r.gpus, dict(r.labels)) for r in runs] == [(8, {"workload-type": "pretraining"})], cell


def test_a_run_whose_path_holds_a_hash_keeps_its_eval_series(tmp_path: Path) -> None:
    _trainer_state(tmp_path / "sweep" / "run#1" / "trainer_state.json", "lr2e-5")
    (run,), _ = load_runs([tmp_path / "sweep"])
    assert run.name == "run#1/trainer_state.json" and run.curve_id is None
    assert run.eval_steps is not None and run.eval_steps.size == 15


def test_a_run_that_is_its_folder_is_grouped_with_the_runs_beside_it(tmp_path: Path) -> None:
    """HF's <sweep>/<run>/trainer_state.json (named alone too) and one log per run folder
    (lightning_logs/version_N/metrics.csv): the group is the folder holding the run folders; runs
    side by side in one folder are grouped by that folder, as before."""
    sweep = _hf_sweep(tmp_path / "sweep")
    runs, _ = load_runs([sweep])
    assert {r.group for r in runs} == {str(sweep)}
    given, _ = load_runs(sorted(sweep.glob("*/trainer_state.json")))
    assert {r.group for r in given} == {str(sweep)}
    logs = tmp_path / "lightning_logs"
    for k, run in enumerate(("lr1e-3", "lr2e-5")):
        (logs / f"version_{k}").mkdir(parents=True)
        rows = ["step,loss"] + [f"{s},{_EVALS[run](s):.5f}" for s in range(10, 1001, 10)]
        (logs / f"version_{k}" / "metrics.csv").write_text("\n".join(rows) + "\n")
    runs, _ = load_runs([logs])
    assert [(r.name, r.group) for r in runs] == [
        ("version_0/metrics.csv", str(logs)),
        ("version_1/metrics.csv", str(logs)),
    ]
    for k in range(2):
        shutil.copy(logs / f"version_{k}" / "metrics.csv", tmp_path / f"m{k}.csv")
    side_by_side, _ = load_runs([tmp_path / "m0.csv", tmp_path / "m1.csv"])
    assert {r.group for r in side_by_side} == {str(tmp_path)}
