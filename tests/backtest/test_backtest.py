"""``trainjob-advisor backtest``: real-run replays through the controller's path, the baselines,
the verdicts, and one clear error for bad input. Runs are written by the tests (no shared data)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import advisor.reported as reported_module
from advisor.backtest.baselines import BaselineSettings, fixed_budget, median_stopping, patience
from advisor.backtest.replay import new_core, replay
from advisor.backtest.runs import Run, RunError, load_runs
from advisor.backtest.verdict import judged, verdict
from advisor.cli import main
from policies import load_policies

ROOT = Path(__file__).resolve().parents[2]
PLATEAU = ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"
KEYS = {
    "policy",
    "runs",
    "gpu_hours",
    "gpu_hours_nonlearning",
    "gpu_hours_saved",
    "wrong_stops_by_threshold",
    "near_end_releases",
    "decisions",
}


def _write(
    path: Path, steps: np.ndarray, loss: np.ndarray, *, total: int, dt: float = 10.0, evals: int = 0
) -> Path:
    """A CSV log: step, loss, time (s), total_steps, and every ``evals`` rows an eval_loss."""
    rows = ["step,loss,time,total_steps,eval_loss"]
    for k, (s, v) in enumerate(zip(steps.tolist(), loss.tolist(), strict=True)):
        ev = f"{v * 1.02:.6f}" if evals and k % evals == 0 else ""
        rows.append(f"{int(s)},{v:.6f},{s * dt / 10:.1f},{total},{ev}")
    path.write_text("\n".join(rows) + "\n")
    return path


def _plateaued(seed: int, n: int = 600) -> tuple[np.ndarray, np.ndarray]:
    """Learns for the first quarter of its budget, then stays flat (logged every 10 steps)."""
    rng = np.random.default_rng(seed)
    steps = np.arange(10, 10 * n + 1, 10, dtype=float)
    x = np.minimum(steps / steps[-1], 0.25)
    clean = 2.0 + 3.0 * (1.0 + x / 0.02) ** -0.7
    return steps, clean * (1.0 + 0.002 * rng.standard_normal(n))


def _learning(seed: int, n: int = 600) -> tuple[np.ndarray, np.ndarray]:
    """Still learning steadily at its end."""
    rng = np.random.default_rng(seed)
    steps = np.arange(10, 10 * n + 1, 10, dtype=float)
    clean = 5.0 - 2.5 * steps / steps[-1]
    return steps, clean * (1.0 + 0.005 * rng.standard_normal(n))


def _run(steps: np.ndarray, values: np.ndarray, **fields: Any) -> Run:
    """A run as the loader builds one: timed at a step a second, its budget its last step, judged
    by its loss, unless ``fields`` say otherwise."""
    base: dict[str, Any] = {
        "name": "r",
        "group": "g",
        "gpus": 8,
        "steps": steps,
        "values": values,
        "times": steps.copy(),
        "learning_rates": None,
        "epochs": None,
        "total_steps": int(steps[-1]),
        "planned_steps": int(steps[-1]),
        "metric": "loss",
        "eval_steps": None,
        "eval_values": None,
        "timed": True,
        "source": "test",
    }
    return Run(**{**base, **fields})


def test_a_plateaued_run_is_released_and_a_learning_run_is_not(tmp_path: Path) -> None:
    """Both replayed as logged (10 s per 10 steps: 100 minutes) through the sample policy."""
    s, v = _plateaued(1)
    _write(tmp_path / "flat.csv", s, v, total=6000)
    s, v = _learning(2)
    _write(tmp_path / "learning.csv", s, v, total=6000)
    runs, skipped = load_runs([tmp_path], gpus=4)
    assert not skipped and {r.name for r in runs} == {"flat.csv", "learning.csv"}
    core = new_core(load_policies(PLATEAU), 60.0)
    by_name = {r.name: r for r in runs}
    flat = replay("p", core, by_name["flat.csv"], planned_steps=6000)
    assert flat.stopped and flat.kind == "release-quota" and flat.rule == "plateau"
    assert flat.checkpoints == 1  # the sample checkpoints first; the next report acknowledged it
    run = by_name["flat.csv"]
    assert run.time_at(0.25 * 6000) < flat.time_s < run.duration_s
    v_flat = verdict(run, judged(run), flat)
    assert v_flat["improvement_left"] < 0.005 and v_flat["gpu_hours_saved"] > 0
    learning = replay("p", core, by_name["learning.csv"], planned_steps=6000)
    assert not learning.stopped
    # why not, in the rules' own words at its last look
    assert learning.reason.startswith("ran to its end; at the last look: ") and "plateau" in learning.reason
    assert core.keys() == ()  # every run forgotten after its replay


def test_one_non_finite_loss_mid_run_releases_nothing_and_a_run_of_them_does(tmp_path: Path) -> None:
    """A mixed-precision run logs NaN for a step whose gradients overflowed, skips it and carries on:
    a healthy run released on the one NaN it logged at step 1,500 (its next report finite) was a
    wrong stop. A run that diverged reports nothing finite after: released by the third report."""
    s, v = _learning(3)
    blip = v.copy()
    blip[[149, 349]] = np.nan  # steps 1,500 and 3,500
    _write(tmp_path / "blip.csv", s, blip, total=6000)
    gone = v.copy()
    gone[349:] = np.nan  # from step 3,500 on
    _write(tmp_path / "gone.csv", s, gone, total=6000)
    runs, _ = load_runs([tmp_path], gpus=4)
    core = new_core(load_policies(PLATEAU), 60.0)
    by_name = {r.name: r for r in runs}
    assert not replay("p", core, by_name["blip.csv"], planned_steps=6000).stopped
    stopped = replay("p", core, by_name["gone.csv"], planned_steps=6000)
    assert stopped.stopped and stopped.rule == "divergence", stopped.reason
    assert 3500 < stopped.step <= 3530 and "latest loss is nan" in stopped.reason


def test_a_step_logged_several_times_is_replayed_at_the_mean_of_its_reports(tmp_path: Path) -> None:
    """Gradient accumulation logs each micro-batch under one optimizer step: ``forecast`` merges
    them into their mean, and so does the replay (the last report alone read a run's loss 8.7%
    off); the step's time is its last report's."""
    s, v = _learning(4, n=60)
    once = _write(tmp_path / "once.csv", s, v, total=600)
    rows = once.read_text().splitlines()
    # every step twice, its micro-batches' losses on either side of the step's
    repeated = [rows[0]]
    for row in rows[1:]:
        step, loss, rest = row.split(",", 2)
        repeated += [f"{step},{float(loss) - 0.1},{rest}", f"{step},{float(loss) + 0.1},{rest}"]
    (tmp_path / "twice.csv").write_text("\n".join(repeated) + "\n")
    (a,), _ = load_runs([once])
    (b,), _ = load_runs([tmp_path / "twice.csv"])
    assert np.array_equal(a.steps, b.steps) and np.allclose(a.values, b.values, rtol=1e-9)
    assert np.array_equal(a.times, b.times)


def test_the_replay_goes_through_trainer_status_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s, v = _learning(3, n=50)
    _write(tmp_path / "r.csv", s, v, total=500, evals=5)
    (run,), _ = load_runs([tmp_path / "r.csv"])
    seen: list[dict[str, object]] = []
    real = reported_module.sample_from_object

    def spy(body, *, now=None):  # type: ignore[no-untyped-def]
        seen.append(body)
        return real(body, now=now)

    monkeypatch.setattr(reported_module, "sample_from_object", spy)
    replay("p", new_core(load_policies(PLATEAU), 60.0), run, report_interval_s=0.0, planned_steps=500)
    assert len(seen) == len(run.steps)
    status = seen[-1]["status"]["trainerStatus"]  # type: ignore[index]
    names = {m["name"] for m in status["metrics"]}
    assert {"loss", "current_step", "total_steps"} <= names and status["progressPercentage"] == 100
    assert any("eval_loss" in {m["name"] for m in b["status"]["trainerStatus"]["metrics"]} for b in seen)  # type: ignore[index]


def test_planned_steps_are_reported_only_when_the_log_has_them(tmp_path: Path) -> None:
    s, v = _learning(4, n=20)
    path = tmp_path / "nototal.csv"
    path.write_text("step,loss\n" + "\n".join(f"{int(a)},{b}" for a, b in zip(s, v, strict=True)) + "\n")
    (run,), _ = load_runs([path], steps_per_second=2.0)
    assert run.planned_steps is None and run.total_steps == int(s[-1]) and not run.timed
    assert run.duration_s == pytest.approx((s[-1] - s[0]) / 2.0)


def test_baselines() -> None:
    from advisor.backtest.runs import Run

    steps = np.arange(100, 1001, 100, dtype=float)

    def mk(name: str, values: list[float], evals: list[float] | None = None) -> Run:
        return Run(
            name=name,
            group="g",
            gpus=1,
            steps=steps,
            values=np.array(values),
            times=steps.copy(),
            learning_rates=None,
            epochs=None,
            total_steps=1000,
            planned_steps=1000,
            metric="loss",
            eval_steps=None if evals is None else steps,
            eval_values=None if evals is None else np.array(evals),
            timed=True,
            source="test",
        )

    s = BaselineSettings(patience=3)
    flat_eval = mk("a", [5, 4, 3, 3, 3, 3, 3, 3, 3, 3], [5, 4, 3, 3.1, 3.2, 3.05, 3, 3, 3, 3])
    out = patience(flat_eval, s)
    assert out.stopped and out.step == 600  # three evaluations without a new best after 300
    assert not patience(mk("b", [5, 4, 3, 2, 1, 1, 1, 1, 1, 1]), s).stopped  # no eval series
    good = [mk(f"g{i}", [5 - 0.3 * k for k in range(10)]) for i in range(3)]
    bad = mk("bad", [6 - 0.1 * k for k in range(10)])
    stopped = median_stopping(bad, [*good, bad], s)
    assert stopped.stopped and stopped.rule == "median"
    assert not median_stopping(good[0], [good[0], bad], s).stopped  # one peer is too few
    # peers judged by another series are no peers: a training loss of 6 against runs judged by
    # an eval loss of 0.5 is no comparison
    judged_by_eval = [
        mk(f"e{i}", [5 - 0.3 * k for k in range(10)], [0.5 - 0.01 * k for k in range(10)]) for i in range(3)
    ]
    assert not median_stopping(bad, [*judged_by_eval, bad], s).stopped
    cut = fixed_budget(good[0], BaselineSettings(fixed_fraction=0.75))
    # at 75% of the budget by the clock, not at the next report (800)
    assert cut.stopped and cut.step == 750 and cut.time_s == pytest.approx(750.0)
    # a log that does not say its planned steps has no budget a rule could read as it runs: its
    # last step is its future (the budget was read off it)
    unplanned = dataclasses.replace(good[0], planned_steps=None)
    assert not fixed_budget(unplanned, BaselineSettings(fixed_fraction=0.75)).stopped
    # median stopping's warm-up is read off its finished peers' lengths then, as before off its own
    long_steps = np.arange(100, 10001, 100, dtype=float)
    long = [
        dataclasses.replace(g, steps=long_steps, times=long_steps, values=5 - 0.03 * np.arange(100.0))
        for g in good
    ]
    early = dataclasses.replace(bad, planned_steps=None)
    warm = BaselineSettings(patience=3, median_warmup=0.2)  # peers' median length 10,000: warm until 2,000
    assert not median_stopping(early, [*long, early], warm).stopped
    assert median_stopping(bad, [*long, bad], warm).stopped  # its planned 1,000: warm until 200


def test_json_rows_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(3):
        s, v = _plateaued(10 + i)
        (tmp_path / "runs").mkdir(exist_ok=True)
        _write(tmp_path / "runs" / f"flat{i}.csv", s, v, total=6000, evals=10)
    s, v = _learning(20)
    _write(tmp_path / "runs" / "learning.csv", s, v, total=6000, evals=10)
    out = tmp_path / "bt.json"
    rep = tmp_path / "rep"
    rep.mkdir()
    (rep / "timeline-a-run-of-an-earlier-report.csv.png").write_bytes(b"")  # a folder used again
    rc = main(
        [
            "backtest",
            str(tmp_path / "runs"),
            "--policy",
            str(PLATEAU),
            "--gpus",
            "8",
            "--quiet",
            "--json",
            str(out),
            "--report",
            str(rep),
        ]
    )
    assert rc == 0
    rows = json.loads(out.read_text())
    assert [r["policy"] for r in rows] == [
        "no-advisor",
        "patience",
        "median-stopping",
        "fixed-budget",
        "advisor-plateau-release",
    ]
    for r in rows:
        assert set(r) >= KEYS and r["runs"] == 4 and len(r["decisions"]) == 4
        assert set(r["wrong_stops_by_threshold"]) == {"0.005", "0.01", "0.02"}
        stops = [d for d in r["decisions"] if d["action"]]
        wrong_saved = sum(d["gpu_hours_saved"] for d in stops if (d["improvement_left"] or 0) > 0.01)
        assert r["gpu_hours_saved_on_wrong_stops"] == pytest.approx(wrong_saved)
        # what a stop spared is saved after its run stopped learning, cut learning before
        for d in stops:
            spared = d["baseline_gpu_hours"] - d["gpu_hours"]
            assert d["near_end"] or d["gpu_hours_saved"] + d["gpu_hours_cut_learning"] == pytest.approx(
                spared
            )
            assert d["gpu_hours_saved"] <= d["baseline_gpu_hours_nonlearning"] + 1e-9
        assert r["gpu_hours_cut_learning"] == pytest.approx(sum(d["gpu_hours_cut_learning"] for d in stops))
    base, advisor = rows[0], rows[-1]
    assert base["gpu_hours_saved"] == 0 and base["gpu_hours"] == pytest.approx(4 * 8 * 6000 / 3600, rel=0.02)
    assert advisor["gpu_hours_saved"] > 0 and advisor["wrong_stops_by_threshold"]["0.01"] == 0
    released = {d["run"] for d in advisor["decisions"] if d["action"]}
    assert "learning.csv" not in released and len(released) == 3
    # the fixed budget cuts the run still learning at 75%: what it spared is mostly cut learning,
    # saved only the tail past its learning end (the last points of a run are past it by definition)
    (cut,) = [d for d in rows[3]["decisions"] if d["run"] == "learning.csv"]
    assert cut["action"] and cut["improvement_left"] > 0.01
    assert cut["gpu_hours_cut_learning"] > 3 * cut["gpu_hours_saved"] > 0
    text = (rep / "report.md").read_text()
    assert "worst call first" in text and "flat0.csv" in text
    # saved and cut learning are GPU-hours either side of the run's learning end: both texts say so
    hours = (
        "*Saved* and *cut learning*: saved: GPU-hours a row's stops spared after their runs stopped learning"
    )
    assert hours in text and "share of saved" not in text
    footer_and_table = capsys.readouterr().out
    footer = footer_and_table.split("\n\n")[-1]
    assert "cut learning: those they spared before it" in " ".join(footer.split())
    assert "share" not in footer
    assert len(list(rep.glob("timeline-*.png"))) == len(
        {d["run"] for r in rows for d in r["decisions"] if d["action"]}
    )
    assert "advisor-plateau-release" in footer_and_table


@pytest.mark.parametrize(
    ("make", "extra", "message"),
    [
        (lambda d: d, [], "no runs in it"),
        (lambda d: (d / "x.csv").write_text("loss\n1\n2\n") and d / "x.csv", [], "no step field"),
        (lambda d: (d / "x.csv").write_text("step,loss\n1,2\n2,1\n") and d / "x.csv", [], "fewer than the 5"),
        (lambda d: d / "missing.csv", [], "no such file"),
        (
            # what `forecast` refuses ("no usable points") is no run to back-test either
            lambda d: (
                (d / "x.csv").write_text("step,loss\n" + "".join(f"{i},nan\n" for i in range(1, 9)))
                and d / "x.csv"
            ),
            [],
            "x.csv: loss: no usable points",
        ),
        (
            # a file sorted by anything but step: a replay needs the order the run logged
            lambda d: (
                (d / "x.csv").write_text(
                    "step,loss\n" + "".join(f"{(i * 37) % 100 + 1},{1 + 1 / (i + 1)}\n" for i in range(100))
                )
                and d / "x.csv"
            ),
            [],
            "x.csv: step: goes backwards",
        ),
        (
            lambda d: (
                (d / "x.csv").write_text("step,loss\n" + "".join(f"{i},1\n" for i in range(1, 9)))
                and d / "x.csv"
            ),
            ["--gpus", "0"],
            "--gpus",
        ),
        (
            lambda d: (
                (d / "x.csv").write_text("step,loss\n" + "".join(f"{i},1\n" for i in range(1, 9)))
                and d / "x.csv"
            ),
            ["--baselines", "oracle"],
            "unknown baseline",
        ),
        (
            lambda d: (
                (d / "x.csv").write_text("step,loss\n" + "".join(f"{i},1\n" for i in range(1, 9)))
                and (d / "empty.yaml").write_text("# nothing yet\n")
                and d / "x.csv"
            ),
            ["--policy", "EMPTY"],
            "no AdvisorPolicy found",
        ),
        (
            # `--policy samples/policy-*.yaml RUN`: the glob's second file lands among the runs
            lambda d: (
                (d / "x.csv").write_text("step,loss\n" + "".join(f"{i},1\n" for i in range(1, 9)))
                and (d / "policy-b.yaml").write_text(PLATEAU.read_text())
                and d / "policy-b.yaml"
            ),
            ["--policy", str(PLATEAU)],
            "give each policy file with its own --policy",
        ),
    ],
)
def test_bad_input_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make, extra, message
) -> None:  # type: ignore[no-untyped-def]
    target = make(tmp_path)
    extra = [str(tmp_path / "empty.yaml") if a == "EMPTY" else a for a in extra]
    assert main(["backtest", str(target), "--quiet", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_bad_runs_can_be_skipped_and_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s, v = _learning(5, n=40)
    _write(tmp_path / "good.csv", s, v, total=400)
    (tmp_path / "bad.csv").write_text("step,loss\n1,x\n")
    (tmp_path / "nan.csv").write_text("step,loss\n" + "".join(f"{i},nan\n" for i in range(1, 9)))
    assert main(["backtest", str(tmp_path), "--quiet", "--policy", str(PLATEAU)]) == 2
    assert "bad.csv" in capsys.readouterr().err
    assert main(["backtest", str(tmp_path), "--quiet", "--policy", str(PLATEAU), "--skip-bad-runs"]) == 0
    out, err = capsys.readouterr()
    assert "2 skipped as bad" in out
    # which files, and why, on the terminal too: one line each
    skipped = [line for line in err.splitlines() if line.startswith("skipped ")]
    assert len(skipped) == 2 and "bad.csv" in skipped[0]
    # by its path, as the file that cannot be parsed is (its run name alone read "nan.csv")
    nan = (tmp_path / "nan.csv").as_posix()
    assert skipped[1] == f"skipped {nan}: loss: no usable points (all 8 values are NaN or infinite)"
    with pytest.raises(RunError, match="no runs to back-test"):
        load_runs([tmp_path / "bad.csv"], skip_bad=True)


def test_a_json_file_beside_the_runs_that_is_no_log_is_passed_over_as_compare_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A results or notes file (one JSON object written with an indent) in the folder stopped the
    back-test with "line 1: invalid JSON", read as JSONL; ``compare`` named it and went on."""
    s, v = _learning(5, n=40)
    _write(tmp_path / "good.csv", s, v, total=400)
    (tmp_path / "truth.json").write_text(json.dumps({"good": {"kind": "learning"}}, indent=1))
    assert main(["backtest", str(tmp_path), "--quiet", "--policy", str(PLATEAU)]) == 0
    out, err = capsys.readouterr()
    assert "skipped as bad" not in out
    (line,) = [x for x in err.splitlines() if x.startswith("skipped ")]
    assert line.startswith("skipped truth.json (") and "one JSON object with no log_history" in line
    # named alone, it is the run asked for: an error naming why
    assert main(["backtest", str(tmp_path / "truth.json"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "one JSON object with no log_history" in err and "invalid JSON" not in err


def test_skipping_bad_runs_is_suggested_only_where_it_helps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty folder or an index CSV without a run column fails with --skip-bad-runs too: no
    hint to use it; a bad run (here a one-point log) gets the hint."""
    (tmp_path / "empty").mkdir()
    s, v = _learning(5, n=40)
    good = _write(tmp_path / "good.csv", s, v, total=400)
    (tmp_path / "idx.csv").write_text("who,gpus\ngood.csv,2\n")
    (tmp_path / "short").mkdir()
    (tmp_path / "short" / "x.csv").write_text("step,loss\n1,2\n")
    for argv, message in (
        ([str(tmp_path / "empty")], "no runs in it"),
        ([str(good), "--index", str(tmp_path / "idx.csv")], "no run column"),
    ):
        assert main(["backtest", *argv, "--quiet"]) == 2
        err = capsys.readouterr().err
        assert message in err and "--skip-bad-runs" not in err, err
    assert main(["backtest", str(tmp_path / "short"), "--quiet"]) == 2
    assert "(use --skip-bad-runs to skip such runs)" in capsys.readouterr().err


def test_a_policy_row_is_named_by_its_metadata_name_and_every_row_is_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s, v = _learning(5, n=40)
    _write(tmp_path / "good.csv", s, v, total=400)
    mine = PLATEAU.read_text().replace("name: plateau-release\n", "name: my-aggressive\n", 1)
    (tmp_path / "mypol.yaml").write_text(mine)
    (tmp_path / "other.yaml").write_text(mine)
    out = tmp_path / "bt.json"
    argv = [
        "backtest",
        str(tmp_path / "good.csv"),
        "--quiet",
        "--baselines",
        "no-advisor",
        "--json-file",
        str(out),
    ]
    for policy in ("mypol.yaml", "other.yaml", "mypol.yaml", str(PLATEAU)):
        argv += ["--policy", str(tmp_path / policy)]
    assert main(argv) == 0
    assert [r["policy"] for r in json.loads(out.read_text())] == [
        "no-advisor",
        "advisor-my-aggressive",
        "advisor-my-aggressive (other.yaml)",
        "advisor-my-aggressive (mypol.yaml)",
        "advisor-plateau-release",
    ]
    assert "advisor-my-aggressive" in capsys.readouterr().out


def test_a_folder_of_gzip_compressed_runs_is_read_as_each_file_alone_is(tmp_path: Path) -> None:
    import gzip

    for name, seed in (("a.csv", 1), ("b.json", 2)):
        s, v = _learning(seed, n=40)
        plain = _write(tmp_path / name, s, v, total=400)
        if name.endswith(".json"):  # a trainer_state.json
            plain.write_text(
                json.dumps(
                    {"log_history": [{"step": int(a), "loss": float(b)} for a, b in zip(s, v, strict=True)]}
                )
            )
        (tmp_path / "gz").mkdir(exist_ok=True)
        (tmp_path / "gz" / f"{name}.gz").write_bytes(gzip.compress(plain.read_bytes()))
    runs, skipped = load_runs([tmp_path / "gz"])
    assert not skipped and [r.name for r in runs] == ["a.csv.gz", "b.json.gz"]
    assert all(r.steps.size == 40 for r in runs)


def test_a_multi_run_dump_gives_one_run_per_curve_id_with_its_group_and_gpus(tmp_path: Path) -> None:
    from advisor.sources.files import load_curves

    rows = ["curve_id,step,val_loss,train_time_ms"]
    for cid in ("1", "2", "3"):
        rows += [f"{cid},{s},{5 - s / 100:.3f},{s * 1000}" for s in range(0, 800, 100)]
    (tmp_path / "val_curves.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "index.csv").write_text(
        "curve_id,path,gpus\n1,records/a/x.txt,8\n2,records/a/y.txt,8\n3,records/b/z.txt,2\n"
    )
    curves = load_curves(tmp_path / "val_curves.csv")
    assert [cid for cid, _c in curves] == ["1", "2", "3"] and all(len(c) == 8 for _i, c in curves)
    runs, _ = load_runs([tmp_path])
    assert [(r.name, r.group, r.gpus) for r in runs] == [
        ("val_curves.csv#1", "records/a", 8),
        ("val_curves.csv#2", "records/a", 8),
        ("val_curves.csv#3", "records/b", 2),
    ]
    assert runs[0].timed and runs[0].duration_s == pytest.approx(700.0) and runs[0].metric == "eval_loss"


def test_each_evaluation_reaches_the_core_at_its_own_step_between_throttled_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reports go out at most every 60 s (60 logged rows here), evals every 25 rows: each eval is
    still reported with the step it was taken at (a checkpoint exists there), and none is lost to
    a later one arriving before the next report."""
    s, v = _learning(5, n=300)
    _write(tmp_path / "r.csv", s, v, total=3000, dt=10.0, evals=25)
    (run,), _ = load_runs([tmp_path / "r.csv"])
    assert run.eval_steps is not None
    reported: list[tuple[int, bool]] = []
    real = reported_module.sample_from_object

    def spy(body, *, now=None):  # type: ignore[no-untyped-def]
        status = body["status"]["trainerStatus"]
        names = {m["name"] for m in status["metrics"]}
        step = next(int(float(m["value"])) for m in status["metrics"] if m["name"] == "current_step")
        reported.append((step, "eval_loss" in names))
        return real(body, now=now)

    monkeypatch.setattr(reported_module, "sample_from_object", spy)
    replay("p", new_core(load_policies(PLATEAU), 60.0), run, report_interval_s=60.0, planned_steps=3000)
    with_eval = [step for step, has in reported if has]
    assert with_eval == [int(x) for x in run.eval_steps]
    assert len(reported) < len(run.steps)  # still throttled


def test_a_stop_near_the_end_counts_as_saved_only_when_the_run_went_on_to_get_worse() -> None:
    """In the last 15% of the budget: a stop of a run that then blew up (NaN) spared hours that
    bought nothing and is saved; a stop of a run whose flat tail stayed flat is a near-end release,
    the user's budget, not saved."""
    from advisor.backtest.replay import Outcome

    steps = np.arange(10, 10001, 10, dtype=float)
    healthy = 2.0 + np.exp(-steps / 1500)
    blown = healthy.copy()
    blown[steps > 8800] = np.nan
    stop = Outcome(row="x", run="r", stopped=True, kind="release-quota", step=8700.0, time_s=8700.0)
    for values, near_end in ((blown, False), (healthy, True)):
        r = _run(steps, values)
        d = verdict(r, judged(r), stop)
        assert d["near_end"] is near_end
        assert d["gpu_hours_saved"] == (0.0 if near_end else pytest.approx(1300 * 8 / 3600))


def test_a_run_that_stood_still_at_the_end_of_its_steps_is_no_near_end_release() -> None:
    """A run that reached 99% of its steps and then stood still for hours (hung) was not about to
    finish: a stall release there spared those hours, after the run stopped learning, and they
    are saved; at 99% of its steps alone it read as a near-end release and saved 0 of them."""
    from advisor.backtest.replay import Outcome

    steps = np.arange(10, 3001, 10, dtype=float)
    values = 2.0 + np.exp(-steps / 300)
    times = 1.5 * steps
    times[-1] = 15285.0  # step 2,990 at 4,485 s, then nothing for three hours until 3,000
    hung = _run(steps, values, name="hung", gpus=16, times=times, planned_steps=None)
    stop = Outcome(row="x", run="hung", stopped=True, kind="release-quota", step=2990.0, time_s=6285.0)
    d = verdict(hung, judged(hung), stop)
    assert d["near_end"] is False
    assert d["near_end_gpu_hours"] == 0.0
    assert d["gpu_hours_saved"] == pytest.approx((15285.0 - 6285.0) * 16 / 3600)
    # the same stop of a run that kept its pace to the end is one
    paced = dataclasses.replace(hung, times=1.5 * steps)
    d = verdict(paced, judged(paced), dataclasses.replace(stop, time_s=4485.0))
    assert d["near_end"] is True and d["gpu_hours_saved"] == 0.0
    assert d["near_end_gpu_hours"] == pytest.approx(15.0 * 16 / 3600)


def test_a_stop_judged_by_a_default_eval_loss_reads_the_task_score_beside_it() -> None:
    """An eval loss judged for want of a metric of the run's own is read with the task's score it
    reports, as the controller reads it: a stop after the loss turned up, while the accuracy still
    rose from 0.870 to 0.886, left 1.9% and is a wrong stop (it read "0.00% left"). A run that names
    its metric (``metric_for_best_model``) is judged by that alone."""
    from advisor.backtest.replay import Outcome

    steps = np.arange(10, 3001, 10, dtype=float)
    evals = np.arange(150, 3001, 150, dtype=float)
    loss = 0.6 + 0.0002 * np.abs(evals - 1200)  # turned up at step 1,200
    accuracy = 0.9 - 0.1 * np.exp(-evals / 1500)  # 0.870 at 1,800, still rising to 0.886
    run = _run(
        steps,
        1.0 + np.exp(-steps / 500),
        name="ft",
        gpus=1,
        eval_steps=evals,
        eval_values=loss,
        other_evals=(("eval_accuracy", evals, accuracy),),
    )
    stop = Outcome(row="x", run="ft", stopped=True, kind="stop", step=1800.0, time_s=1800.0)
    d = verdict(run, judged(run), stop)
    assert d["judged_metric"] == "eval_loss" and d["task_metric"] == "eval_accuracy"
    at_stop, final = 0.9 - 0.1 * math.exp(-1.2), 0.9 - 0.1 * math.exp(-2)
    assert d["task_improvement_left"] == pytest.approx((final - at_stop) / at_stop)
    assert d["improvement_left"] == d["task_improvement_left"] > 0.01
    # still learning by its score: part of what the stop spared is cut learning, not saved
    assert d["gpu_hours_cut_learning"] > 0.1
    named = dataclasses.replace(run, declared_metric="eval_loss")
    d = verdict(named, judged(named), stop)
    assert "task_metric" not in d and d["improvement_left"] == 0.0
    assert d["gpu_hours_cut_learning"] == 0.0 and d["gpu_hours_saved"] == pytest.approx(1200 / 3600)


def test_index_labels_reach_the_policys_selector(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The plateau sample keeps runs labelled workload-type=pretraining off its plateau rule (a
    warmup-stable-decay run looks flat before its decay): with the label in the index, the
    back-test selects as the cluster would, and the flat run is no longer released; a malformed
    cell is one error naming it."""
    s, v = _plateaued(1)
    _write(tmp_path / "flat.csv", s, v, total=6000)
    argv = [
        "backtest",
        str(tmp_path),
        "--quiet",
        "--policy",
        str(PLATEAU),
        "--baselines",
        "no-advisor",
        "--json",
    ]
    assert main(argv) == 0
    rows = {r["policy"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["advisor-plateau-release"]["stopped"] == 1
    (tmp_path / "index.csv").write_text("file,gpus,labels\nflat.csv,4,workload-type=pretraining; team=a\n")
    runs, _ = load_runs([tmp_path])
    assert dict(runs[0].labels) == {"workload-type": "pretraining", "team": "a"} and runs[0].gpus == 4
    assert main(argv) == 0
    rows = {r["policy"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["advisor-plateau-release"]["stopped"] == 0
    (tmp_path / "index.csv").write_text("file,labels\nflat.csv,workload-type\n")
    assert main(argv) == 2
    assert "index.csv:2: labels: not key=value: 'workload-type'" in capsys.readouterr().err


def test_a_log_of_eval_metrics_alone_is_replayed_as_such_and_judged_by_them(tmp_path: Path) -> None:
    """A run that logged its evaluations alone reports them alone, as its trainer did (no training
    loss made of its eval loss, judged by the training loss's rules): the core judges it by its
    eval metric, as ``forecast`` does, and so do the verdict and the patience baseline."""
    s, v = _plateaued(5)
    path = tmp_path / "evals.csv"
    rows = ["step,eval_loss,time,total_steps"] + [
        f"{int(a)},{b:.6f},{a:.1f},6000" for a, b in zip(s.tolist(), v.tolist(), strict=True)
    ]
    path.write_text("\n".join(rows) + "\n")
    (run,), _ = load_runs([path])
    assert run.eval_metric == "eval_loss" and run.eval_values is not None
    assert judged(run).series == "eval"
    flat = replay("p", new_core(load_policies(PLATEAU), 60.0), run, planned_steps=6000)
    assert flat.stopped and flat.rule == "plateau" and "best eval_loss" in flat.reason
    assert patience(run, BaselineSettings()).stopped


def test_a_log_of_a_score_alone_is_back_tested_by_it(tmp_path: Path) -> None:
    """A log of eval_accuracy alone was refused ("no loss field") while forecast and compare read
    it: it is judged by that score, upwards."""
    path = tmp_path / "acc.csv"
    path.write_text(
        "step,eval_accuracy\n"
        + "".join(f"{s},{0.9 - 0.4 * np.exp(-s / 500):.5f}\n" for s in range(100, 3001, 100))
    )
    (run,), _ = load_runs([path])
    assert run.metric == "eval_accuracy" and run.eval_metric == "eval_accuracy" and run.eval_higher


def test_a_blown_up_run_is_drawn_on_a_symlog_axis_and_a_plain_one_on_a_linear_axis() -> None:
    from advisor.backtest.report import symlog_threshold

    assert symlog_threshold([2.0, 1.9, 1.8, 1.7, 1.8e8]) == pytest.approx(1.9)  # the median magnitude
    assert symlog_threshold([2.0, 1.9, 1.8, 1.7, 1.6, float("nan")]) is None


def test_a_timeline_shows_the_training_loss_and_its_non_finite_reports_beside_the_eval(
    tmp_path: Path,
) -> None:
    """A run released for a NaN training loss showed only its eval loss: nothing on the plot said
    why; and two rows stopping at the same step drew one line over the other."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from advisor.backtest.report import timeline_figure

    s, v = _learning(6)
    v[[100, 300]] = np.nan
    _write(tmp_path / "run.csv", s, v, total=6000, evals=10)
    (run,), _ = load_runs([tmp_path / "run.csv"], skip_bad=False)
    stops = [
        {"row": "a", "step": 4000.0, "improvement_left": 0.02},
        {"row": "b", "step": 4000.0, "improvement_left": 0.02},
    ]
    fig = timeline_figure(run, stops)
    try:
        ax = fig.axes[0]
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "non-finite training loss (2)" in labels and "training loss (right axis)" in labels
        styles = {line.get_label(): line.get_linestyle() for line in ax.get_lines()}
        assert styles["a (2.0% left)"] != styles["b (2.0% left)"]
    finally:
        plt.close(fig)


def test_a_last_evaluation_after_the_last_loss_log_is_kept_and_reported(tmp_path: Path) -> None:
    """A trainer logs its loss every 10 steps and evaluates at the end of each of 5 epochs; its
    last evaluation, at step 7,035, comes after its last loss log at 7,030. Cut at that log, the
    run kept 4 evaluations and went unjudged by them (5 needed); kept up to the step the state was
    written at, it is judged by its eval metric."""
    from advisor.backtest.runs import load_runs

    steps = list(range(10, 7031, 10))
    history: list[dict[str, float]] = [{"step": s, "loss": 2.0 * (1 + s / 500) ** -0.5} for s in steps]
    for k in range(1, 6):
        history.append({"step": 1407 * k, "eval_f1": 0.5 + 0.05 * k, "eval_loss": 1.0 - 0.05 * k})
    history.sort(key=lambda r: r["step"])
    state = {"log_history": history, "global_step": 7035, "max_steps": 7035}
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    (run,), skipped = load_runs([tmp_path / "trainer_state.json"])
    assert not skipped and run.eval_steps is not None
    assert run.eval_steps.tolist() == [1407.0, 2814.0, 4221.0, 5628.0, 7035.0]
    out = tmp_path / "bt.json"
    assert main(["backtest", str(tmp_path / "trainer_state.json"), "--quiet", "--json-file", str(out)]) == 0
    decisions = json.loads(out.read_text())[0]["decisions"]
    assert decisions[0]["judged_series"] == "eval"


def _u_shaped_state(declared: bool) -> dict[str, object]:
    """A fine-tune whose eval loss turns up at step 1,000 while its accuracy still rises; with
    ``declared``, its trainer kept its best model by the eval loss (``best_metric`` there)."""
    rng = np.random.default_rng(3)
    history: list[dict[str, float]] = []
    best = (0, 9.0)
    for s in range(10, 3001, 10):
        history.append({"step": s, "loss": 2 * math.exp(-s / 600) + 0.3 + rng.normal(0, 0.01)})
        if s % 100 == 0:
            ev = 0.5 + 0.3 * ((s - 1000) / 1000) ** 2 * (1.0 if s < 1000 else 0.5) + rng.normal(0, 0.004)
            history.append({"step": s, "eval_loss": ev, "eval_accuracy": 0.6 + 0.1 * s / 3000})
            best = min(best, (s, ev), key=lambda b: b[1])
    state: dict[str, object] = {"log_history": history, "max_steps": 3000, "global_step": 3000}
    if declared:
        state.update(best_metric=best[1], best_model_checkpoint=f"out/checkpoint-{best[0]}", save_steps=100)
    return state


def test_a_run_whose_trainer_names_its_metric_is_judged_by_it_in_the_replay(tmp_path: Path) -> None:
    """The trainer's choice (``metric_for_best_model``) reaches the core as the training helper
    reports it: a run kept by its eval loss is released as overfitting once that turns up; the
    same run naming no metric is not, while the accuracy beside its eval loss still rises."""
    policy = ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"
    released = {}
    for declared in (True, False):
        path = tmp_path / f"{declared}" / "trainer_state.json"
        path.parent.mkdir()
        path.write_text(json.dumps(_u_shaped_state(declared)))
        out = tmp_path / f"{declared}.json"
        argv = ["backtest", str(path), "--quiet", "--policy", str(policy), "--baselines", "no-advisor"]
        assert main([*argv, "--json-file", str(out)]) == 0
        (decision,) = json.loads(out.read_text())[1]["decisions"]
        released[declared] = decision
    assert released[True]["action"] == "release-quota" and "overfitting" in released[True]["reason"]
    assert released[False]["action"] is None and "eval_accuracy still improves" in released[False]["reason"]
