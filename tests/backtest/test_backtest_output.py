"""What ``backtest`` prints and writes around its table: the footer's counts, the report's
reasons, bad runs a folder holds, and the ``--sweep`` summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.cli import main
from tests.backtest.test_backtest import PLATEAU, _learning, _write

SHORT = "over before every policy's minRuntime (20m) as replayed, so judged by none"


def _footer(out: str) -> str:
    return next(line for line in out.splitlines() if " in " in line and "Wrong stop" in line)


def test_the_footer_counts_in_the_singular_and_leaves_out_what_is_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s, v = _learning(1, n=40)
    one = _write(tmp_path / "one.csv", s, v, total=400)  # timed, no eval series
    argv = ["backtest", "--quiet", "--policy", str(PLATEAU), "--baselines", "no-advisor"]
    assert main([*argv, str(one)]) == 0
    # a 400 s run is over before the sample's minRuntime (20m): said, since no policy judges it
    assert _footer(capsys.readouterr().out).startswith(f"1 run in 1 group (1 run {SHORT}). Wrong stop: ")
    untimed = tmp_path / "untimed"
    untimed.mkdir()
    for k in range(2):
        rows = ["step,loss"] + [f"{int(a)},{b:.5f}" for a, b in zip(s, v + 0.1 * k, strict=True)]
        (untimed / f"r{k}.csv").write_text("\n".join(rows) + "\n")
    assert main([*argv, str(untimed)]) == 0
    assert _footer(capsys.readouterr().out).startswith(
        f"2 runs in 1 group (2 without times, replayed at 1 step/s; 2 runs {SHORT}; 2 of them without times: "
        "--steps-per-second sets their pace). Wrong stop: "
    )
    assert main([*argv, str(untimed), str(one), "--steps-per-second", "2.5"]) == 0
    assert _footer(capsys.readouterr().out).startswith(
        f"3 runs in 2 groups (2 without times, replayed at 2.5 steps/s; 3 runs {SHORT}; 2 of them without "
        "times: --steps-per-second sets their pace). Wrong stop: "
    )


def test_a_sweep_summary_counts_in_the_singular(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s, v = _learning(1, n=40)
    one = _write(tmp_path / "one.csv", s, v, total=400)
    argv = ["backtest", str(one), "--quiet", "--policy", str(PLATEAU), "--workers", "1"]
    assert main([*argv, "--sweep", "plateau.probability=0.8"]) == 0
    out = capsys.readouterr().out
    assert "1 setting of " in out and " over 1 run: " in out


def test_runs_no_policy_judged_do_not_dilute_the_sweeps_wrong_stop_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Short runs, over before the sample's minRuntime, can be no wrong stop: counted in the rate's
    denominator, 300 smoke tests made any setting "shown within 1%" (an admin's trial). The rate
    and its bound are over the judged runs, and the runs never judged are said."""
    from tests.backtest.test_backtest import _plateaued

    s, v = _plateaued(1)
    _write(tmp_path / "flat.csv", s, v, total=6000)
    s, v = _learning(2)
    _write(tmp_path / "learning.csv", s, v, total=6000)
    short = tmp_path / "short"
    short.mkdir()
    s, v = _learning(1, n=40)
    for k in range(6):
        _write(short / f"smoke{k}.csv", s, v * (1.0 + 0.01 * k), total=400)
    argv = ["backtest", str(tmp_path), "--policy", str(PLATEAU), "--workers", "1", "--json"]
    assert main([*argv, "--sweep", "plateau.probability=0.8"]) == 0
    captured = capsys.readouterr()
    (point,) = json.loads(captured.out)["points"]
    assert (point["runs"], point["runs_total"]) == (2, 8)
    assert point["wrong_rate"] == point["wrong"] / 2
    assert "of 2 judged wrong (6 of 8 never judged)" in captured.err


def test_a_backtest_sweep_report_is_markdown_with_the_frontier_table_and_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--sweep --report DIR`` wrote only the plot; --report promises a Markdown report."""
    pytest.importorskip("matplotlib")
    s, v = _learning(1, n=40)
    one = _write(tmp_path / "one.csv", s, v, total=400)
    rep = tmp_path / "rep"
    argv = ["backtest", str(one), "--quiet", "--policy", str(PLATEAU), "--workers", "1", "--report", str(rep)]
    assert main([*argv, "--sweep", "plateau.probability=0.7,0.8"]) == 0
    assert f"report: {rep / 'report.md'}" in capsys.readouterr().out
    text = (rep / "report.md").read_text()
    assert "plateau.probability=0.7" in text and "plateau.probability=0.8" in text
    # one run, over before the sample's minRuntime, shows no wrong-stop rate within 1%: said, with
    # the bound, in the report as printed
    assert "no setting's wrong-stop rate is shown to be within 1.00% on 0 runs judged of 1 (" in text
    assert "![" in text and "(sweep_frontier.png)" in text
    assert (rep / "sweep_frontier.png").stat().st_size > 0


def test_a_backtest_sweep_table_has_no_column_of_dashes_for_a_spread_over_seeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Real runs are replayed once each: no seeds, so no min / median / max over them. The column
    is left out (simulate's sweep over several seeds keeps it)."""
    from advisor.sweep import sweep_table

    s, v = _learning(1, n=40)
    one = _write(tmp_path / "one.csv", s, v, total=400)
    argv = ["backtest", str(one), "--quiet", "--policy", str(PLATEAU), "--workers", "1"]
    assert main([*argv, "--sweep", "plateau.probability=0.7,0.8"]) == 0
    out = capsys.readouterr().out
    header, _rule, *rows = out.splitlines()[:4]
    assert header.split() == [
        "setting",
        "non-learn",
        "saved",
        "wrong",
        ".5/1/2%",
        "wrong",
        "rate",
        "upper",
        "95%",
        "near-end",
    ]
    assert " - " not in " ".join(rows) + " "
    assert "no seeds, so no min / median / max" in out
    point = {"label": "x=1", "saved": 0.5, "wrong_by_threshold": {}, "wrong_rate": 0.0, "near_end": 0}
    assert "min / median / max" in sweep_table([{**point, "spread": [0.4, 0.5, 0.6]}], [0], 0)
    assert "min / median / max" not in sweep_table([{**point, "spread": None}], [0], 0)


def test_the_report_gives_each_stop_its_whole_reason(tmp_path: Path) -> None:
    """The plateau sample's reasons (some 180 characters) were cut mid-word at 140 ("keep the
    checkpoi"); they are given whole, and one longer than the report's limit is cut at a word."""
    pytest.importorskip("matplotlib")
    from advisor.backtest.report import REASON_CHARS, _cell
    from tests.backtest.test_run_names import _hf_sweep

    sweep = _hf_sweep(tmp_path / "sweep")
    rep, out = tmp_path / "rep", tmp_path / "bt.json"
    argv = ["backtest", str(sweep), "--quiet", "--policy", str(PLATEAU), "--baselines", "no-advisor"]
    assert main([*argv, "--json-file", str(out), "--report", str(rep)]) == 0
    reasons = [d["reason"] for row in json.loads(out.read_text()) for d in row["decisions"] if d["action"]]
    assert reasons and max(len(r) for r in reasons) > 140
    text = (rep / "report.md").read_text()
    assert all(f" | {r.replace('|', '/')} |" in text for r in reasons)
    words = " ".join(f"word{k:03d}" for k in range(100))  # 799 characters
    cut = _cell(words, REASON_CHARS)
    assert len(cut) <= REASON_CHARS and cut.endswith("…") and words.startswith(cut[:-1] + " ")
    assert _cell("a | b\nc", REASON_CHARS) == "a / b c"


def test_a_broken_link_among_the_runs_is_a_bad_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not passed over: an error that names it, or with --skip-bad-runs one line and a count."""
    runs = tmp_path / "runs"
    runs.mkdir()
    s, v = _learning(1, n=40)
    _write(runs / "good.csv", s, v, total=400)
    (runs / "gone.json").symlink_to(tmp_path / "deleted.json")
    argv = ["backtest", str(runs), "--quiet", "--policy", str(PLATEAU), "--baselines", "no-advisor"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"gone.json: a broken symbolic link: {tmp_path / 'deleted.json'} does not exist" in err
    assert "--skip-bad-runs" in err
    assert main([*argv, "--skip-bad-runs"]) == 0
    out, err = capsys.readouterr()
    assert [line for line in err.splitlines() if line.startswith("skipped ")] == [
        f"skipped {runs / 'gone.json'}: a broken symbolic link: {tmp_path / 'deleted.json'} does not exist"
    ]
    assert _footer(out).startswith("1 run in 1 group (1 skipped as bad; ")
    assert main(["compare", str(runs / "good.csv"), str(runs / "gone.json")]) == 2  # named: an error
    assert "gone.json: a broken symbolic link" in capsys.readouterr().err


def test_index_rows_that_match_no_run_and_runs_without_a_row_are_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An index row naming no run read, and a run no row names, each leave a run with the wrong
    GPUs and no labels: one warning line each on stderr (at most ten of a kind, then a count), the
    counts in the footer and the JSON's meta data. Not an error: the back-test still runs."""
    runs = tmp_path / "runs"
    runs.mkdir()
    for seed, name in enumerate(("a", "b"), start=1):  # two runs: not the same log twice
        s, v = _learning(seed, n=40)
        _write(runs / f"{name}.csv", s, v, total=400)
    index = tmp_path / "idx.csv"
    bogus = [f"gone{k},8" for k in range(12)]
    index.write_text("run,gpus\n" + "\n".join(["runs/a.csv,4", *bogus]) + "\n")
    out_json = tmp_path / "bt.json"
    argv = ["backtest", str(runs), "--quiet", "--policy", str(PLATEAU), "--baselines", "no-advisor"]
    assert main([*argv, "--index", str(index), "--json-file", str(out_json)]) == 0
    out, err = capsys.readouterr()
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert (
        f"warning: {index}: row 'gone0' matches no run read: its gpus, group and labels go unused" in warnings
    )
    assert sum("matches no run read" in w for w in warnings) == 10
    assert "warning: ... and 2 more index rows that match no run" in warnings
    assert [w for w in warnings if "no row in" in w] == [
        f"warning: b.csv: no row in {index} (a row 'runs/b.csv' would name it): --gpus or 1 GPU, "
        "the group of its folder, no labels"
    ]
    assert _footer(out).startswith(
        "2 runs in 1 group (12 index rows matching no run; 1 run without an index row"
    )
    row = json.loads(out_json.read_text())[0]  # no-advisor, then the policy
    assert {d["run"]: d["gpus"] for d in row["decisions"]} == {"a.csv": 4, "b.csv": 1}
    meta = row["backtest"]
    assert (meta["index_rows_unmatched"], meta["runs_without_index_row"]) == (12, 1)
    assert meta["runs_without_index_row_names"] == ["b.csv"]
    # every row matched and every run named: nothing said
    index.write_text("run,gpus\nruns/a.csv,4\nruns/b.csv,2\n")
    assert main([*argv, "--index", str(index)]) == 0
    assert "warning: " not in capsys.readouterr().err
    # a few runs of an indexed folder, each with its row: the other rows are the runs not given,
    # one line counts them (a platform trial got ten lines and a hint for one run of 126)
    index.write_text("run,gpus\nruns/a.csv,4\nruns/b.csv,2\n" + "\n".join(bogus) + "\n")
    assert main([*argv, "--index", str(index)]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        f"warning: {index}: 12 rows name runs not read (every run read has its row): their gpus, group "
        "and labels go unused"
    ]


def test_an_index_found_beside_the_runs_is_named_on_stderr_and_in_the_meta_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An index.csv in the runs' folder gives them their GPUs unasked: a sweep's every run counted
    on 8 GPUs with nothing in the output saying why. Each index used is one line on stderr (which
    file, found or given, how many runs it gave a row) and a list in the JSON's meta data."""
    runs = tmp_path / "runs"
    runs.mkdir()
    for seed, name in enumerate(("a", "b"), start=1):  # two runs: not the same log twice
        s, v = _learning(seed, n=40)
        _write(runs / f"{name}.csv", s, v, total=400)
    (runs / "index.csv").write_text("run,gpus\na,8\n")
    out_json = tmp_path / "bt.json"
    argv = ["backtest", str(runs), "--quiet", "--policy", str(PLATEAU), "--baselines", "no-advisor"]
    assert main([*argv, "--json-file", str(out_json)]) == 0
    err = capsys.readouterr().err.splitlines()
    found = "found beside the runs, read automatically"
    line = f"index {runs / 'index.csv'} ({found}): gpus for 1 of 2 runs (a.csv)"
    assert line in err
    meta = json.loads(out_json.read_text())[0]["backtest"]
    assert meta["index_files"] == [line]
    # given with --index, it is named as such
    index = tmp_path / "idx.csv"
    index.write_text("run,gpus\nruns/a.csv,4\nruns/b.csv,4\n")
    (runs / "index.csv").unlink()
    assert main([*argv, "--index", str(index)]) == 0
    assert f"index {index} (--index): gpus for 2 of 2 runs" in capsys.readouterr().err
    # no index: nothing said
    assert main(argv) == 0
    assert "index" not in capsys.readouterr().err


def test_the_reports_header_is_in_words_and_its_stopped_runs_heading_counts_runs_and_stops(
    tmp_path: Path,
) -> None:
    """The header printed the JSON's meta data as it is (a nested one as a Python dict:
    ``{'runs': 0, 'untimed': 0, ...}``), and "Stopped runs, worst call first (3)" headed a table
    of one line per stop (six): the count said runs, the table listed stops. Both said now."""
    pytest.importorskip("matplotlib")
    from tests.backtest.test_run_names import _hf_sweep

    sweep = _hf_sweep(tmp_path / "sweep")
    rep, out = tmp_path / "rep", tmp_path / "bt.json"
    argv = ["backtest", str(sweep), "--quiet", "--policy", str(PLATEAU), "--json-file", str(out)]
    assert main([*argv, "--report", str(rep)]) == 0
    text = (rep / "report.md").read_text()
    header = text.split("## Every policy")[0]
    assert "{'" not in header and "_" not in header, header  # no dict, no identifier
    assert "**runs over before every policy's minRuntime**: " in header
    rows = json.loads(out.read_text())
    stops = [d for row in rows for d in row["decisions"] if d["action"]]
    runs = {d["run"] for d in stops}
    assert len(stops) > len(runs)  # a run stopped by several rows: the case the heading got wrong
    heading = next(line for line in text.splitlines() if line.startswith("## Stopped runs"))
    assert heading == f"## Stopped runs, worst call first ({len(runs)} runs, {len(stops)} stops)"
    table = text.split(heading)[1].split("## Timelines")[0]
    assert (
        sum(1 for line in table.splitlines() if line.startswith("| ") and "---" not in line) == len(stops) + 1
    )


def test_a_sweep_of_an_unknown_field_names_it_and_the_valid_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s, v = _learning(1, n=40)
    one = _write(tmp_path / "one.csv", s, v, total=400)
    argv = ["backtest", str(one), "--quiet", "--policy", str(PLATEAU), "--workers", "1"]
    assert main([*argv, "--sweep", "bogus=1,2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown policy field 'bogus'" in err[0] and "plateau.probability" in err[0]
    assert "expected FIELD=" not in err[0]


def test_a_policy_that_never_judged_a_run_says_so_beside_its_zero_stops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row's 0 stops read as a policy that looked and let its runs be: 8 of 11 short fine-tunes
    were over before the sample's minRuntime (20m), and the footer, counting against the shortest
    minRuntime of any policy given, said none was. Each row now counts the runs its policy never
    judged, in the table's notes, the JSON and the report."""
    s, v = _learning(1, n=40)
    short = _write(tmp_path / "short.csv", s, v, total=400)  # 400 s: over before 20m
    argv = ["backtest", "--quiet", "--policy", str(PLATEAU), "--baselines", "no-advisor"]
    assert main([*argv, str(short), "--json-file", str(tmp_path / "a.json")]) == 0
    out = capsys.readouterr().out
    assert "not judged: advisor-plateau-release never judged 1 of 1 run (over before" in out
    rows = {r["policy"]: r for r in json.loads((tmp_path / "a.json").read_text())}
    assert rows["advisor-plateau-release"]["never_judged"] == 1
    assert rows["advisor-plateau-release"]["decisions"][0]["judged"] is False
    assert rows["no-advisor"]["never_judged"] == 0
    slow = _write(tmp_path / "slow.csv", s * 10, v, total=4000)  # 4,000 s at 1 step/s: judged
    assert (
        main([*argv, str(slow), "--json-file", str(tmp_path / "b.json"), "--report", str(tmp_path / "r")])
        == 0
    )
    assert "not judged" not in capsys.readouterr().out
    rows = {r["policy"]: r for r in json.loads((tmp_path / "b.json").read_text())}
    assert rows["advisor-plateau-release"]["never_judged"] == 0
    assert "not judged" not in (tmp_path / "r" / "report.md").read_text()
    assert main([*argv, str(short), "--report", str(tmp_path / "r2")]) == 0
    assert "advisor-plateau-release never judged 1 of 1 run" in (tmp_path / "r2" / "report.md").read_text()


def test_runs_no_policy_selects_are_said_as_such_not_as_over_before_min_runtime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A policy whose selector leaves every run out never judged them: the line under the table
    blamed its minRuntime (an admin's trial); it says none of its policies selected them."""
    from tests.backtest.test_backtest import _plateaued

    s, v = _plateaued(1)
    (tmp_path / "runs").mkdir()
    _write(tmp_path / "runs" / "flat.csv", s, v, total=6000)
    nobody = _selecting_nobody(tmp_path)
    argv = [
        "backtest",
        str(tmp_path / "runs"),
        "--quiet",
        "--baselines",
        "no-advisor",
        "--policy",
        str(nobody),
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "never judged 1 of 1 run (selected by none of its policies): no verdict on them" in out
    assert main([*argv, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[-1]
    assert (row["never_judged"], row["never_selected"]) == (1, 1)


def test_a_run_left_alone_names_the_policy_that_governed_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run no rule acted on still had a policy over it: a labelled pre-training run is the
    pre-training policy's, which has no plateau rule, an unlabelled one the fine-tuning policy's.
    Its decision names that policy; null is left to runs no policy selected, and to baselines."""
    from tests.backtest.test_backtest import _plateaued

    runs = tmp_path / "runs"
    runs.mkdir()
    _write(runs / "pretrain.csv", *_plateaued(1), total=6000)
    _write(runs / "finetune.csv", *_learning(2), total=6000)
    (runs / "index.csv").write_text(
        "run,gpus,labels\npretrain.csv,1,workload-type=pretraining\nfinetune.csv,1,\n"
    )
    argv = ["backtest", str(runs), "--quiet", "--baselines", "no-advisor", "--json"]
    assert main([*argv, "--policy", str(PLATEAU)]) == 0
    baseline, row = json.loads(capsys.readouterr().out)
    left = {d["run"]: d for d in row["decisions"]}
    assert [d["action"] for d in left.values()] == [None, None]
    assert left["pretrain.csv"]["policy"] == "plateau-release-pretraining"
    assert left["finetune.csv"]["policy"] == "plateau-release"
    assert all(d["selected"] for d in left.values())
    assert [d["policy"] for d in baseline["decisions"]] == [None, None]
    nobody = _selecting_nobody(tmp_path)
    assert main([*argv, "--policy", str(nobody)]) == 0
    decisions = json.loads(capsys.readouterr().out)[-1]["decisions"]
    assert [(d["policy"], d["selected"]) for d in decisions] == [(None, False), (None, False)]


def test_a_rule_judging_a_metric_no_run_reports_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rule with ``metric: eval_bleu`` over runs that log none judges nothing: its row's 0 stops
    is no verdict, and the line under the table says so."""
    s, v = _learning(1, n=40)
    _write(tmp_path / "one.csv", s, v, total=400)
    bleu = tmp_path / "bleu.yaml"
    bleu.write_text(
        "apiVersion: advisor.trainjob-advisor.io/v1alpha1\nkind: AdvisorPolicy\nmetadata: {name: bleu}\n"
        "spec:\n  rules: {plateau: {metric: eval_bleu, for: 10m}}\n"
    )
    argv = [
        "backtest",
        str(tmp_path / "one.csv"),
        "--quiet",
        "--baselines",
        "no-advisor",
        "--policy",
        str(bleu),
    ]
    assert main(argv) == 0
    assert "advisor-bleu: its rules judge eval_bleu, which no run reports: they judge nothing here" in (
        capsys.readouterr().out
    )
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["backtest"]["unreported_metrics"] == {
        "advisor-bleu": ["eval_bleu"]
    }


def test_a_sweep_setting_judging_a_metric_no_run_reports_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt ``plateau.metric`` in a sweep was scored beside the right one with no word, though
    its plateau rule judged nothing: the setting is said as a plain back-test says it of a row."""
    s, v = _learning(1, n=40)
    _write(tmp_path / "one.csv", s, v, total=400, evals=5)  # reports loss and eval_loss
    argv = ["backtest", str(tmp_path / "one.csv"), "--quiet", "--policy", str(PLATEAU), "--workers", "1"]
    argv += ["--sweep", "plateau.metric=eval_acuracy,eval_loss", "--report", str(tmp_path / "rep")]
    assert main(argv) == 0
    said = (
        "plateau.metric=eval_acuracy: its rules judge eval_acuracy, which no run reports: "
        "they judge nothing here"
    )
    out = capsys.readouterr().out
    assert said in out and "plateau.metric=eval_loss: its rules judge" not in out
    assert said in (tmp_path / "rep" / "report.md").read_text()
    assert main([*argv, "--json"]) == 0
    points = json.loads(capsys.readouterr().out)["points"]
    assert [(p["label"], p["unreported_metrics"]) for p in points] == [
        ("plateau.metric=eval_acuracy", ["eval_acuracy"]),
        ("plateau.metric=eval_loss", []),
    ]


def test_a_small_saving_is_not_shown_as_zero_and_every_hours_column_rounds_alike() -> None:
    """0.013 GPU-h saved read ``+0.0`` beside ``non-learn saved 1.0%``: below 0.1 an hours cell
    keeps two significant digits, in every hours column; a real zero stays 0.0."""
    from advisor.backtest.report import format_table

    row = {
        "policy": "plateau",
        "runs": 8,
        "stopped": 1,
        "gpu_hours": 1.25,
        "gpu_hours_nonlearning": 0.013,
        "gpu_hours_saved": 0.013,
        "gpu_hours_cut_learning": 0.0,
        "nonlearning_saved_fraction": 0.0104,
        "wrong_stops_by_threshold": {"0.005": 0, "0.01": 0, "0.02": 0},
        "near_end_releases": 1,
        "near_end_gpu_hours": 0.0004,
    }
    line = format_table([row]).splitlines()[-1].split()
    assert line[:8] == ["plateau", "8", "1", "1.2", "0.013", "+0.013", "0.0", "1.0%"], line
    assert line[-2:] == ["1", "(<0.001h)"], line


def _selecting_nobody(tmp_path: Path) -> Path:
    """The plateau-release samples with selectors that match no run (a team label none carries)."""
    nobody = tmp_path / "nobody.yaml"
    nobody.write_text(
        PLATEAU.read_text()
        .replace(
            "{key: workload-type, operator: NotIn, values: [pretraining]}",
            "{key: team, operator: In, values: [x]}",
        )
        .replace(
            "{key: workload-type, operator: In, values: [pretraining]}",
            "{key: team, operator: In, values: [y]}",
        )
    )
    return nobody
