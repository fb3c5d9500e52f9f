"""``trainjob-advisor simulate``: rows, JSON, report, and one clear error for bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from advisor.cli import main

ROOT = Path(__file__).resolve().parents[2]
PLATEAU = ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"
KEYS = {
    "policy",
    "gpu_hours",
    "gpu_hours_nonlearning",
    "gpu_hours_saved",
    "wrong_stops",
    "wrong_stop_fraction",
    "lost_work_gpu_hours",
    "checkpoint_overhead_gpu_hours",
    "jct_mean_s",
    "jct_p95_s",
    "queue_wait_mean_s",
    "utilization",
    "victim_precision",
    "victim_recall",
}


def test_json_rows_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.json"
    rc = main(
        [
            "simulate",
            "--jobs",
            "24",
            "--seed",
            "2",
            "--quiet",
            "--policy",
            str(PLATEAU),
            "--json",
            str(out),
            "--report",
            str(tmp_path / "rep"),
        ]
    )
    assert rc == 0
    rows = json.loads(out.read_text())
    names = [r["policy"] for r in rows]
    assert names == ["no-advisor", "fixed-interval", "patience", "median-stopping", "advisor-plateau-release"]
    for r in rows:
        assert set(r) >= KEYS
        assert r["gpu_hours"] > 0 and 0 <= r["utilization"] <= 1
    assert rows[0]["gpu_hours_saved"] == 0.0
    assert rows[0]["victim_precision"] is None and rows[0]["victim_recall"] is None
    # the jobs a policy judged (a sweep's wrong-rate denominator; None for a baseline)
    assert [r["jobs_judged"] for r in rows[:4]] == [None] * 4
    assert 0 < rows[4]["jobs_judged"] <= rows[4]["jobs"]
    for r in rows[1:]:  # what a near-end release of a healthy run spared is no saving
        spared = rows[0]["gpu_hours"] - r["gpu_hours"]
        assert r["gpu_hours_freed"] == pytest.approx(spared - r["near_end_gpu_hours"], abs=1e-3)
        # nor is cut learning: saved is what was waste, the rest of what was freed is apart
        parts = r["gpu_hours_saved_nonlearning"] + r["gpu_hours_saved_overheads"]
        assert r["gpu_hours_saved"] == pytest.approx(parts, abs=1e-3)
        assert r["gpu_hours_saved"] + r["gpu_hours_saved_learning"] == pytest.approx(
            r["gpu_hours_freed"], abs=1e-3
        )
        assert (r["near_end_releases"] == 0) == (r["near_end_gpu_hours"] == 0)
        assert set(r["wrong_stops_by_threshold"]) == {"0.005", "0.01", "0.02"}
        assert r["wrong_stops_by_threshold"]["0.01"] == r["wrong_stops"]
        # each run a row released or stopped, to look its wrong stops up by: they count as the row does
        assert len(r["stops"]) == r["released_or_stopped"]
        for t, n in r["wrong_stops_by_threshold"].items():
            assert sum(1 for x in r["stops"] if x["improvement_left"] > float(t)) == n
        assert sum(1 for x in r["stops"] if x["near_end"]) == r["near_end_releases"]
    table = capsys.readouterr().out
    assert "advisor-plateau-release" in table and "simulated job-hours per wall-second" in table
    assert re.search(
        r"seed \d+: 5 rows of up to \d+ simulated hours each \(\d+ in all\)", table
    )  # not a sum read as a span
    rep = tmp_path / "rep"
    for name in ("report.md", "gpu_hours_waterfall.png", "jct_cdf.png", "utilization.png", "results.json"):
        assert (rep / name).stat().st_size > 0
    assert "advisor-plateau-release" in (rep / "report.md").read_text()


def test_each_stop_names_the_rule_and_policy_that_ended_it(capsys: pytest.CaptureFixture[str]) -> None:
    """A row's stops are looked up one by one to tell a wrong plateau call from a wrong stall or
    overfitting call: each names its rule and the policy whose decision it carried out (a baseline's
    rule belongs to no policy), beside the keys it had before."""
    argv = ["simulate", "--jobs", "24", "--seed", "2", "--quiet", "--baselines", "no-advisor,patience"]
    assert main([*argv, "--policy", str(PLATEAU), "--json"]) == 0
    rows = {r["policy"]: r for r in json.loads(capsys.readouterr().out)}
    patience, advisor = rows["patience"]["stops"], rows["advisor-plateau-release"]["stops"]
    assert patience and advisor
    assert {(s["rule"], s["policy"]) for s in patience} == {("patience", None)}
    assert {s["policy"] for s in advisor} <= {"plateau-release", "plateau-release-pretraining"}
    assert {s["rule"] for s in advisor} <= {"plateau", "overfitting", "divergence", "stall"}
    assert "plateau" in {s["rule"] for s in advisor}
    for stop in [*patience, *advisor]:
        assert {"job", "curve", "phase", "step", "improvement_left", "near_end"} <= set(stop)


def test_a_policy_that_selects_no_job_judged_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A job no policy selects cannot be stopped wrongly: it is no judged job (``jobs_judged``),
    so that a sweep's wrong-stop rate is not diluted by jobs the policy never looks at."""
    policy = tmp_path / "nobody.yaml"
    policy.write_text(
        PLATEAU.read_text().replace(
            "{key: workload-type, operator: NotIn, values: [pretraining]}",
            "{key: team, operator: In, values: [nobody]}",
            1,
        )
    )
    argv = ["simulate", "--jobs", "12", "--seed", "2", "--quiet", "--baselines", "no-advisor"]
    assert main([*argv, "--policy", str(policy), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[-1]["jobs_judged"] == 0 and rows[-1]["jobs"] == 12


def test_a_row_whose_rules_judge_a_metric_no_job_reports_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt ``metric: eval_acuracy`` judges nothing, so its row's "0 wrong stops" reads as a
    verdict unless said: plain ``simulate`` says it under the table as ``backtest`` does, over one
    seed and over several, and the JSON carries it (``unreported_metrics``)."""
    typo = tmp_path / "typo.yaml"
    text = PLATEAU.read_text().replace("name: plateau-release\n", "name: typo\n", 1)
    typo.write_text(
        text.replace(
            "\n      probability: 0.7\n", "\n      metric: eval_acuracy\n      probability: 0.7\n", 1
        )
    )
    assert "metric: eval_acuracy" in typo.read_text()
    said = "advisor-typo: its rules judge eval_acuracy, which no run reports: they judge nothing here"
    argv = ["simulate", "--jobs", "4", "--quiet", "--baselines", "no-advisor", "--policy", str(typo)]
    for extra in ([], ["--seeds", "0-1", "--workers", "1"]):
        assert main([*argv, "--policy", str(PLATEAU), *extra, "--json"]) == 0
        captured = capsys.readouterr()
        assert said in captured.err and "advisor-plateau-release: its rules judge" not in captured.err
        rows = json.loads(captured.out)
        assert rows[0]["scenario"]["unreported_metrics"] == {"advisor-typo": ["eval_acuracy"]}
    # the sample alone judges what the jobs report: nothing said
    assert main([*argv[:-2], "--policy", str(PLATEAU)]) == 0
    assert "which no run reports" not in capsys.readouterr().out


def test_malformed_trace_row_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("name,submit_s,gpus,duration_s\na,0,1,600\nb,0,zero,600\n")
    assert main(["simulate", "--trace", str(trace), "--baselines-only", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{trace}:3:" in err[0] and "'gpus'" in err[0] and "--skip-bad-rows" in err[0]
    out = tmp_path / "o.json"
    assert (
        main(
            [
                "simulate",
                "--trace",
                str(trace),
                "--baselines-only",
                "--quiet",
                "--skip-bad-rows",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    assert json.loads(out.read_text())[0]["scenario"]["skipped_rows"] == 1


def test_a_queue_sized_to_one_huge_job_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = "".join(f"j{i},{i * 600},2,3600,q\n" for i in range(20))
    trace = tmp_path / "t.csv"
    trace.write_text("name,submit_s,gpus,duration_s,queue\n" + rows + "huge,0,100000,600,q\n")
    assert main(["simulate", "--trace", str(trace), "--baselines-only", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "cq-q is sized to its largest job (100000 GPUs)" in err and "--cluster" in err
    trace.write_text("name,submit_s,gpus,duration_s,queue\n" + rows)
    assert main(["simulate", "--trace", str(trace), "--baselines-only", "--quiet"]) == 0
    assert "sized to its largest job" not in capsys.readouterr().err


_TWO_QUEUES = (
    "clusterQueues:\n  - {name: cq-a, nominalGPUs: 16, cohort: c}\n"
    "  - {name: cq-b, nominalGPUs: 8, cohort: c}\n"
    "localQueues: {a: cq-a, b: cq-b}\n"
)


def test_a_job_larger_than_its_queue_can_ever_hold_is_warned_about_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Such a job waits for ever: it ended in no row's figures, and only JSON ``unfinished`` said
    so. Borrowing counts: a job the cohort can lend enough for is no such job."""
    trace = tmp_path / "t.csv"
    trace.write_text(
        "name,submit_s,gpus,duration_s,queue\nhuge,0,1000,3600,a\nok,10,20,3600,a\nsmall,20,4,3600,b\n"
    )
    cluster = tmp_path / "c.yaml"
    cluster.write_text(_TWO_QUEUES)
    argv = ["simulate", "--trace", str(trace), "--cluster", str(cluster), "--baselines-only", "--quiet"]
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    warned = [line for line in captured.err.splitlines() if "never admitted" in line]
    assert warned == [
        "simulate: warning: 1 of 3 jobs ask more GPUs than their ClusterQueue can ever hold, borrowing "
        "included (huge asks 1000, cq-a holds at most 24): they are never admitted and count in no row's "
        "GPU-hours, JCT or stops (JSON unfinished)"
    ]
    assert json.loads(captured.out)[0]["unfinished"] == 1
    # said once, not again by each seed's worker
    assert main([*argv, "--seeds", "0-1", "--workers", "1"]) == 0
    assert capsys.readouterr().err.count("never admitted") == 1
    # a borrowing limit bounds what the cohort lends it
    cluster.write_text(
        "clusterQueues:\n  - {name: cq-a, nominalGPUs: 16, cohort: c, borrowingLimit: 2}\n"
        "  - {name: cq-b, nominalGPUs: 8, cohort: c}\nlocalQueues: {a: cq-a, b: cq-b}\n"
    )
    assert main(argv) == 0
    assert "2 of 3 jobs" in capsys.readouterr().err
    trace.write_text("name,submit_s,gpus,duration_s,queue\nok,10,20,3600,a\nsmall,20,4,3600,b\n")
    cluster.write_text(_TWO_QUEUES)
    assert main(argv) == 0
    assert "never admitted" not in capsys.readouterr().err


def test_unknown_trace_header_names_the_columns_and_offers_no_row_skipping(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("name,submit,gpus,duration\na,0,1,600\n")
    assert main(["simulate", "--trace", str(trace), "--baselines-only", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{trace}:1:" in err[0] and "unrecognised header" in err[0]
    assert "csv: name, submit_s, gpus, duration_s" in err[0] and "--skip-bad-rows" not in err[0]


def test_malformed_policy_file_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "policy-bad.yaml"
    bad.write_text(
        "apiVersion: advisor.trainjob-advisor.io/v1alpha1\nkind: AdvisorPolicy\n"
        "metadata: {name: bad}\nspec:\n  mode: Sometimes\n"
    )
    assert main(["simulate", "--jobs", "5", "--quiet", "--policy", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "mode" in err
    assert main(["simulate", "--jobs", "5", "--quiet", "--policy", str(tmp_path / "missing.yaml")]) == 2


def test_bad_cluster_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = tmp_path / "c.yaml"
    cluster.write_text("clusterQueues:\n  - {name: cq, nominalGPUs: -3}\n")
    assert main(["simulate", "--jobs", "5", "--quiet", "--baselines-only", "--cluster", str(cluster)]) == 2
    assert "nominalGPUs must be a non-negative integer" in capsys.readouterr().err
    cluster.write_text("clusterQueues:\n  - {name: cq, nominalGPUs: 16}\nlocalQueues: {team-a: cq}\n")
    assert main(["simulate", "--jobs", "5", "--quiet", "--baselines-only", "--cluster", str(cluster)]) == 2
    assert "no entry for trace queue" in capsys.readouterr().err
    # a typo is an error at its path, not a setting silently dropped (borrowing read as unlimited)
    cluster.write_text("clusterQueues:\n  - {name: cq, nominalGPUs: 16, borowingLimit: 8}\n")
    assert main(["simulate", "--jobs", "5", "--quiet", "--baselines-only", "--cluster", str(cluster)]) == 2
    assert f"{cluster}: clusterQueues[0].borowingLimit: unknown key (known: name, " in capsys.readouterr().err
    cluster.write_text(
        "clusterQueues:\n  - {name: cq, nominalGPUs: 16, preemption: {withinClusterQueue: Sometimes}}\n"
    )
    assert main(["simulate", "--jobs", "5", "--quiet", "--baselines-only", "--cluster", str(cluster)]) == 2
    assert (
        f"{cluster}: clusterQueues[0].preemption.withinClusterQueue: 'Sometimes' not one of"
        in capsys.readouterr().err
    )


def test_the_example_cluster_file_runs_the_command_its_header_shows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``examples/cluster.yaml`` says it is for ``simulate --cluster examples/cluster.yaml``: every
    queue of the embedded default trace has its entry (team-c had none: exit 2)."""
    example = ROOT / "examples" / "cluster.yaml"
    assert "simulate --cluster examples/cluster.yaml" in example.read_text()
    assert main(["simulate", "--jobs", "12", "--quiet", "--baselines-only", "--cluster", str(example)]) == 0
    assert "72 GPUs" in capsys.readouterr().out


def test_unknown_baseline_is_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--jobs", "5", "--quiet", "--baselines-only", "--baselines", "oracle"]) == 2
    assert "unknown baseline(s) oracle" in capsys.readouterr().err


def test_cadence_options_reach_the_advisor_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    import simulator.runner as runner

    seen: list[object] = []

    class Replayed(Exception):
        """Raised in place of the replay: the rows' settings are all this test reads."""

    def run_rows(scenario: object, strategies: list[object], *, progress: bool = True) -> list[object]:
        seen.extend(strategies)
        raise Replayed

    monkeypatch.setattr(runner, "run_rows", run_rows)
    args = ["simulate", "--jobs", "3", "--quiet", "--policy", str(PLATEAU), "--baselines", "no-advisor"]
    with pytest.raises(Replayed):
        main(
            [
                *args,
                *("--forecast-interval", "1h", "--looks-per-run", "24", "--close-interval", "40m"),
                *("--reference-gpus", "8"),
            ]
        )
    advisor = seen[-1]
    assert getattr(advisor, "name", "") == "advisor-plateau-release"
    assert getattr(getattr(advisor, "looks", None), "close_interval_s", None) == 2400.0
    assert getattr(getattr(advisor, "looks", None), "looks_per_run", None) == 24.0
    assert getattr(getattr(advisor, "looks", None), "reference_gpus", None) == 8.0


def test_a_non_positive_reference_gpus_is_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--jobs", "3", "--quiet", "--policy", str(PLATEAU), "--looks-per-run", "24"]
    assert main([*args, "--reference-gpus", "0"]) == 2
    assert "--reference-gpus must be positive" in capsys.readouterr().err
    assert main([*args[:-2], "--reference-gpus", "8"]) == 2
    assert "give both" in capsys.readouterr().err


def test_a_zero_close_interval_is_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--jobs", "3", "--quiet", "--policy", str(PLATEAU), "--close-interval", "0s"]
    assert main(args) == 2
    assert "--close-interval must be a positive duration" in capsys.readouterr().err


class _RecordingBar:
    """tqdm's part ``run_rows`` uses, keeping every update (``disable`` ignored: as on a terminal)."""

    last: _RecordingBar | None = None

    def __init__(self, *_args: object, total: float, **_kwargs: object) -> None:
        self.total, self.n = total, 0.0
        self.updates: list[float] = []
        _RecordingBar.last = self

    def update(self, n: float = 1) -> None:
        self.updates.append(n)
        self.n += n

    def set_description(self, _desc: str) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.parametrize(("jobs", "seed"), [(3, 3), (5, 1), (7, 0)])
def test_the_progress_bar_ends_at_its_total_and_never_passes_it(
    monkeypatch: pytest.MonkeyPatch, jobs: int, seed: int
) -> None:
    """Past its total tqdm warns "clamping frac to range [0, 1]" and shows a negative time left
    (these scenarios' rows, added up in float hours, overshot by an ulp)."""
    import tqdm

    from simulator.baselines import baseline_strategies
    from simulator.runner import run_rows
    from simulator.scenario import default_scenario

    monkeypatch.setattr(tqdm, "tqdm", _RecordingBar)
    rows = [s for s in baseline_strategies() if s.name != "fixed-interval"]
    run_rows(default_scenario(seed=seed, n_jobs=jobs), rows, progress=True)
    bar = _RecordingBar.last
    assert bar is not None and all(u >= 0 for u in bar.updates)
    assert bar.n == bar.total  # exactly: at the end, and (updates never negative) never past it


def test_a_row_whose_scaling_rules_had_no_elastic_job_says_so() -> None:
    """Without ``--elastic`` no job declares bounds: the deadline and elastic-growth samples then
    read exactly as each other, and the footer says why; the plateau sample scales nothing."""
    from advisor.commands.simulate import idle_scaling_notes
    from simulator.runner import policy_strategies

    samples = Path(__file__).resolve().parents[2] / "manifests" / "samples"
    names = ("policy-deadline.yaml", "policy-elastic-growth.yaml", "policy-plateau-release.yaml")
    strategies = policy_strategies([samples / n for n in names])
    notes = idle_scaling_notes(strategies, elastic=False)
    assert [n.split(":")[0] for n in notes] == ["advisor-deadline", "advisor-elastic-growth"]
    assert all("no job declares elastic bounds" in n and "--elastic" in n for n in notes)
    assert idle_scaling_notes(strategies, elastic=True) == []


def test_a_policy_row_is_named_by_its_metadata_name_as_backtest_names_it(tmp_path: Path) -> None:
    """The row is called what the user called the policy, not after the file it sits in; a name
    already in the table gets its file's name, then a number (as ``backtest`` does)."""
    mine = PLATEAU.read_text().replace("name: plateau-release\n", "name: my-aggressive\n", 1)
    (tmp_path / "policy-mypol.yaml").write_text(mine)
    (tmp_path / "other.yaml").write_text(mine)
    out = tmp_path / "rows.json"
    argv = ["simulate", "--jobs", "5", "--quiet", "--baselines", "no-advisor", "--json", str(out)]
    for policy in ("policy-mypol.yaml", "other.yaml", "policy-mypol.yaml"):
        argv += ["--policy", str(tmp_path / policy)]
    assert main([*argv, "--policy", str(PLATEAU)]) == 0
    assert [r["policy"] for r in json.loads(out.read_text())] == [
        "no-advisor",
        "advisor-my-aggressive",
        "advisor-my-aggressive (other.yaml)",
        "advisor-my-aggressive (policy-mypol.yaml)",
        "advisor-plateau-release",
    ]


def test_help_names_every_duration_and_how_one_is_written(capsys: pytest.CaptureFixture[str]) -> None:
    """``--forecast-interval 5`` is 5 seconds, as in a policy: ``--help`` says so under the options,
    and names each duration's value DURATION (``simulate`` and ``backtest`` read them alike)."""
    for command in ("simulate", "backtest"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = capsys.readouterr().out
        assert "--forecast-interval DURATION" in out
        assert "DURATION: 90s, 30m, 2h or 1d; a bare number is seconds, as in a policy." in out


def test_an_interrupted_command_says_so_and_exits_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C in a long simulation exits 130 with one line that says it was interrupted (it left
    nothing on the terminal, beside a progress bar that might have been the end)."""
    import advisor.commands.simulate as simulate

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(simulate, "run", interrupted)
    assert main(["simulate", "--quiet"]) == 130
    assert capsys.readouterr().err.strip() == "trainjob-advisor simulate: interrupted"
