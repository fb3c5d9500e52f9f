"""``--sweep``: the grid of policy settings, the Pareto frontier, the best within a budget, the
process pool and Ray giving the rows of one process, and one clear error for a bad expression."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.sweep import (
    SweepError,
    best_within,
    edge_fields,
    grid,
    pareto,
    parse_max_wrong,
    parse_sweeps,
    policies_with,
    run_tasks,
    wrong_upper,
)

ROOT = Path(__file__).resolve().parents[2]
PLATEAU = ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"


def test_sweeps_parse_into_a_grid_applied_where_the_policy_has_the_rule() -> None:
    sweeps = parse_sweeps(["plateau.probability=0.6,0.7", "plateau.for=5m,20m", "safety.minRuntime=10m"])
    assert sweeps == [
        ("plateau.probability", [0.6, 0.7]),
        ("plateau.for", ["5m", "20m"]),
        ("safety.minRuntime", ["10m"]),
    ]
    settings = grid(sweeps)
    assert (
        len(settings) == 4
        and settings[0].label == "plateau.probability=0.6 plateau.for=5m safety.minRuntime=10m"
    )
    fine_tune, pretraining = policies_with(PLATEAU, settings[-1])
    assert fine_tune.rules.plateau.probability == 0.7 and fine_tune.rules.plateau.hold == 1200.0
    assert fine_tune.safety.min_runtime == 600.0 and pretraining.safety.min_runtime == 600.0
    assert (
        pretraining.rules.plateau is None or not pretraining.rules.plateau.enabled
    )  # it has no plateau rule


@pytest.mark.parametrize(
    ("exprs", "message"),
    [
        (["plateau.probability"], "expected FIELD=V1,V2"),
        (["plateau.probability=0.7,"], "empty value"),
        (["plateau.probability=0.7", "plateau.probability=0.8"], "swept twice"),
    ],
)
def test_malformed_sweep_expressions_say_why(exprs: list[str], message: str) -> None:
    with pytest.raises(SweepError, match=message):
        parse_sweeps(exprs)


def test_a_boolean_field_is_swept_over_true_and_false() -> None:
    """``plateau.holdAtPeakLR=true,false`` tries both settings (the values were passed on as the
    text 'true', which the policy refused as no boolean); ``yes`` is still refused by name."""
    sweeps = parse_sweeps(["plateau.holdAtPeakLR=true,False", "quotaRelease.checkpointFirst=false"])
    assert sweeps == [("plateau.holdAtPeakLR", [True, False]), ("quotaRelease.checkpointFirst", [False])]
    held, _pretraining = policies_with(PLATEAU, grid(sweeps)[0])
    free, _pretraining = policies_with(PLATEAU, grid(sweeps)[1])
    assert held.rules.plateau.hold_at_peak_lr is True and free.rules.plateau.hold_at_peak_lr is False
    assert held.rules.quota_release.checkpoint_first is False
    assert grid(sweeps)[0].label == "plateau.holdAtPeakLR=true quotaRelease.checkpointFirst=false"
    points = [{"setting": dict(setting.values)} for setting in grid(sweeps)]
    assert edge_fields(points, 0) == []  # a boolean has nothing beyond the two values tried
    with pytest.raises(SweepError, match="must be a boolean, got 'yes'"):
        policies_with(PLATEAU, grid(parse_sweeps(["plateau.holdAtPeakLR=yes"]))[0])


def test_only_ordered_values_have_an_edge_of_the_grid() -> None:
    """A number or a duration has values beyond those tried; a name (a metric, an action) has not:
    "widen the sweep" was said of plateau.metric=eval_loss."""
    named = [{"setting": {"plateau.metric": m}} for m in ("eval_loss", "eval_accuracy")]
    assert edge_fields(named, 0) == []
    windows = [{"setting": {"plateau.for": w}} for w in ("5m", "10m", "20m")]
    assert edge_fields(windows, 0) == ["plateau.for=5m"] and edge_fields(windows, 1) == []


def test_settings_the_policies_reject_are_errors() -> None:
    with pytest.raises(SweepError, match="must be in"):
        policies_with(PLATEAU, grid(parse_sweeps(["plateau.probability=2"]))[0])
    with pytest.raises(SweepError, match="no policy"):
        policies_with(PLATEAU, grid(parse_sweeps(["deadline.margin=10m"]))[0])


@pytest.mark.parametrize(
    ("expr", "valid"),
    [
        ("bogus=1,2", "such as plateau.probability, plateau.for, safety.minRuntime; rules and sections: "),
        ("plateau.bogus=1", "valid: plateau.enabled, plateau.probability, plateau.for, plateau.action"),
        ("deadline.probability=0.5", "valid: deadline.enabled, deadline.maxRuntime"),
    ],
)
def test_an_unknown_field_is_named_with_the_fields_there_are(expr: str, valid: str) -> None:
    with pytest.raises(SweepError) as caught:
        parse_sweeps([expr])
    assert f"unknown policy field {expr.split('=')[0]!r}" in str(caught.value) and valid in str(caught.value)


def test_the_frontier_and_the_best_within_a_budget() -> None:
    points = [
        {"saved": 0.5, "wrong": 0, "wrong_rate": 0.0},
        {"saved": 0.6, "wrong": 2, "wrong_rate": 0.02},
        {"saved": 0.4, "wrong": 1, "wrong_rate": 0.01},  # dominated by the first
        {"saved": 0.7, "wrong": 5, "wrong_rate": 0.05},
    ]
    assert pareto(points) == [0, 1, 3]
    assert best_within(points, 0.02) == 1 and best_within(points, 0.0) == 0
    assert best_within(points, -1.0) is None
    assert parse_max_wrong("1%") == 0.01 and parse_max_wrong("0.02") == 0.02
    with pytest.raises(SweepError):
        parse_max_wrong("lots")


def test_a_bare_max_wrong_above_one_asks_for_the_percent_sign() -> None:
    assert parse_max_wrong("0.5%") == 0.005 and parse_max_wrong(".05") == 0.05
    with pytest.raises(SweepError, match=r"write the % sign \(--max-wrong 2%\)"):
        parse_max_wrong("2")
    # 1 read as 100% picked a "best" setting at any rate, where an admin meant 1%
    with pytest.raises(SweepError, match=r"write the % sign \(--max-wrong 1%\)"):
        parse_max_wrong("1")


@pytest.mark.parametrize("command", ["simulate", "backtest"])
def test_a_sweep_without_its_policy_file_names_the_sample_to_tune(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sweep's fields are one policy's, so there is no default to fall back on: the one error
    line names the sample file to start from, and it exists."""
    run = tmp_path / "run.csv"
    run.write_text("step,loss\n" + "".join(f"{10 * i},{2.0 / (1 + i)}\n" for i in range(20)))
    argv = [command, *(["--seeds", "0-1"] if command == "simulate" else [str(run)])]
    assert main([*argv, "--sweep", "plateau.probability=0.7,0.9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give exactly one --policy FILE (the sample: --policy " in err[0]
    assert Path(err[0].split("--policy ")[-1].rstrip(")")).is_file()


def test_ray_without_a_cluster_or_without_a_sweep_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys
    import types

    from advisor.sweep import run_tasks

    fake = types.ModuleType("ray")

    def init(**_: object) -> None:  # what ray.init(address="auto") raises with no cluster running
        raise ConnectionError("Could not find any running Ray instance.")

    fake.init = init  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray", fake)
    with pytest.raises(SweepError, match=r"--ray auto: no Ray cluster to connect to .*--ray local"):
        run_tasks(abs, [1, -2], ray_address="auto")
    assert main(["simulate", "--jobs", "4", "--quiet", "--ray", "auto"]) == 2
    assert "--ray runs a --sweep's grid on a Ray cluster: give --sweep too" in capsys.readouterr().err
    with pytest.raises(SweepError, match="between 0 and 100%"):
        parse_max_wrong("150%")


def test_the_wrong_stop_bound_is_exact_binomial() -> None:
    assert wrong_upper(0, 30) == pytest.approx(1 - 0.05 ** (1 / 30))  # ~9.5%
    assert 0.094 < wrong_upper(0, 30) < 0.096
    assert wrong_upper(0, 3000) < 0.001 < wrong_upper(1, 3000) < 0.002
    assert wrong_upper(3, 3) == 1.0 and wrong_upper(0, 0) == 1.0


def _point(label: str, prob: float, saved: float, wrong: int, runs: int) -> dict[str, object]:
    return {
        "label": label,
        "setting": {"plateau.probability": prob},
        "saved": saved,
        "spread": None,
        "wrong_by_threshold": {"0.005": wrong, "0.01": wrong, "0.02": wrong},
        "wrong": wrong,
        "wrong_rate": wrong / runs,
        "runs": runs,
        "near_end": 0,
    }


def test_the_pick_is_made_on_the_bound_and_said_when_none_qualifies(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from advisor.commands.sweep_run import report_sweep

    few = [_point(f"p={p}", p, s, 0, 30) for p, s in ((0.6, 0.76), (0.7, 0.74), (0.8, 0.71))]
    assert report_sweep(few, 0.01, summary="S", json_out=None, report=None, plot_title="t") == 0
    out = capsys.readouterr().out
    assert "no setting's wrong-stop rate is shown to be within 1.00% on 30 runs" in out
    assert "(0 of 30 judged wrong: up to 9.50% at 95%)" in out
    assert "best by point rate, information only" in out and "p=0.6 (76.0% saved" in out
    assert "in-sample: chosen and scored on the same 30 runs" in out
    assert "on the edge of the grid: plateau.probability=0.6 is an end" in out
    assert [round(p["wrong_upper"], 3) for p in few] == [0.095] * 3
    # the pick is made on the bound: p=0.8 saves most with no wrong stop, but 0 of 60 bounds its
    # rate only below ~4.9%; p=0.6's 1 of 2000 is shown within 1% (below ~0.24%)
    many = [
        _point("p=0.6", 0.6, 0.76, 1, 2000),
        _point("p=0.7", 0.7, 0.74, 0, 2000),
        _point("p=0.8", 0.8, 0.80, 0, 60),
    ]
    assert report_sweep(many, 0.01, summary="S", json_out=None, report=None, plot_title="t") == 0
    out = capsys.readouterr().out
    assert "best within 1.00% wrong stops (the rate's 95% upper bound within it): p=0.6" in out
    assert "1 of 2000 judged wrong: up to 0.24% at 95%" in out and "on the edge" in out
    assert edge_fields(many, 1) == [] and edge_fields(many, 2) == ["plateau.probability=0.8"]


def _blind(point: dict[str, object], metric: str = "eval_acuracy") -> dict[str, object]:
    """``point`` as a setting whose rules judge ``metric``, which no run reports."""
    return {**point, "unreported_metrics": [metric]}


def test_a_setting_judging_a_metric_no_run_reports_is_never_named_the_best(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt ``plateau.metric`` judges nothing, so it stops nothing wrongly and may save most
    through its other rules: it was named the setting to write into the policy, which would switch
    its plateau rule off. It stays in the table and on the frontier; the next best is named, and
    one line says why the first was not."""
    from advisor.commands.sweep_run import report_sweep

    points = [
        _blind(_point("m=eval_acuracy", 0.6, 0.80, 0, 2000)),
        _point("m=eval_loss", 0.7, 0.74, 1, 2000),
        _point("m=loss", 0.8, 0.70, 0, 2000),
    ]
    out_json = tmp_path / "sweep.json"
    report_sweep(points, 0.01, summary="S", json_out=out_json, report=tmp_path / "rep", plot_title="t")
    out = capsys.readouterr().out
    assert "best within 1.00% wrong stops (the rate's 95% upper bound within it): m=eval_loss" in out
    assert (
        "not named, though it saves most (80.0%): m=eval_acuracy, whose rules judge eval_acuracy, "
        "which no run reports" in out
    )
    assert ">*  m=eval_acuracy" not in out and " *  m=eval_acuracy" in out  # on the frontier, unmarked
    assert "not named, though it saves most" in (tmp_path / "rep" / "report.md").read_text()
    doc = json.loads(out_json.read_text())
    assert doc["best"] == 1 and doc["frontier"] == [0]
    assert doc["unnamed"] == [0] and doc["passed_over"] == 0
    assert {"points", "frontier", "best", "max_wrong"} <= set(doc)
    # a setting left out that would not have been named anyway is not mentioned
    points = [_point("m=eval_loss", 0.7, 0.74, 1, 2000), _blind(_point("m=x", 0.6, 0.10, 0, 2000))]
    report_sweep(points, 0.01, summary="S", json_out=out_json, report=None, plot_title="t")
    assert "not named" not in capsys.readouterr().out
    assert json.loads(out_json.read_text())["passed_over"] is None


def test_nor_the_best_by_point_rate_and_none_when_every_setting_judges_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from advisor.commands.sweep_run import report_sweep

    few = [_blind(_point("p=0.6", 0.6, 0.76, 0, 30)), _point("p=0.7", 0.7, 0.74, 0, 30)]
    report_sweep(few, 0.01, summary="S", json_out=None, report=None, plot_title="t")
    out = capsys.readouterr().out
    assert "not named, though it saves most (76.0%): p=0.6, whose rules judge eval_acuracy" in out
    assert "no other setting's wrong-stop rate is shown to be within 1.00% on 30 runs" in out
    assert "best by point rate, information only" in out and "p=0.7 (74.0% saved" in out
    blind = [_blind(_point(f"p={p}", p, 0.7, 0, 2000)) for p in (0.6, 0.7)]
    report_sweep(blind, 0.01, summary="S", json_out=None, report=None, plot_title="t")
    out = capsys.readouterr().out
    assert "no setting is named: every setting's rules judge a metric no run reports" in out
    assert "best within" not in out and "best by point rate" not in out


def _square(x: int) -> int:
    return x * x


def test_the_pool_keeps_the_order_of_the_tasks() -> None:
    assert (
        run_tasks(_square, range(6), workers=2)
        == run_tasks(_square, range(6), workers=1)
        == [0, 1, 4, 9, 16, 25]
    )


def _runs(folder: Path) -> Path:
    import numpy as np

    folder.mkdir()
    for i in range(2):
        steps = np.arange(10, 6001, 10)
        loss = 2.0 + 3.0 * (1.0 + np.minimum(steps / 6000, 0.25 + 0.1 * i) / 0.02) ** -0.7
        rows = ["step,loss,time,total_steps"] + [
            f"{s},{v:.5f},{s},6000" for s, v in zip(steps, loss, strict=True)
        ]
        (folder / f"r{i}.csv").write_text("\n".join(rows) + "\n")
    return folder


def test_a_backtest_sweep_on_a_local_ray_gives_the_rows_of_one_process(tmp_path: Path) -> None:
    """Ray started here, on one CPU; the tasks are the command's own (``sweep_task``)."""
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'trainjob-advisor[ray]')")
    runs = _runs(tmp_path / "runs")
    args = [
        "backtest",
        str(runs),
        "--quiet",
        "--policy",
        str(PLATEAU),
        "--sweep",
        "plateau.probability=0.7,0.9",
    ]
    assert main([*args, "--workers", "1", "--json", str(tmp_path / "one.json")]) == 0
    info = ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        address = info.address_info["address"]
        assert main([*args, "--ray", address, "--json", str(tmp_path / "ray.json")]) == 0
    finally:
        ray.shutdown()
    one, on_ray = (json.loads((tmp_path / f).read_text()) for f in ("one.json", "ray.json"))
    assert one == on_ray and len(one["points"]) == 2


def test_simulate_sweep_names_the_best_setting_and_the_pool_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["simulate", "--jobs", "8", "--seeds", "0-1", "--quiet", "--policy", str(PLATEAU)]
    args += ["--sweep", "plateau.probability=0.7,0.9", "--max-wrong", "100%"]
    docs = []
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}.json"
        assert main([*args, "--workers", workers, "--json", str(out), "--report", str(tmp_path / "rep")]) == 0
        docs.append(json.loads(out.read_text()))
    assert docs[0] == docs[1]
    points = docs[0]["points"]
    assert [p["label"] for p in points] == ["plateau.probability=0.7", "plateau.probability=0.9"]
    assert all(
        len(p["spread"]) == 3 and set(p["wrong_by_threshold"]) == {"0.005", "0.01", "0.02"} for p in points
    )
    assert docs[0]["best"] == max(range(2), key=lambda i: points[i]["saved"])
    assert (tmp_path / "rep" / "sweep_frontier.png").stat().st_size > 0
    report = (tmp_path / "rep" / "report.md").read_text()  # the Markdown report --report promises
    assert "plateau.probability=0.9" in report and "![" in report and "(sweep_frontier.png)" in report
    out = capsys.readouterr().out
    assert "best within 100.00% wrong stops" in out
    # what to write in the policy file to use it
    value = points[docs[0]["best"]]["setting"]["plateau.probability"]
    assert f"in the policy: spec.rules.plateau.probability: {value}" in out
    # saved as the main table counts it: non-learning GPU-hours and overheads, no cut learning
    assert all(isinstance(p["gpu_hours_saved"], float) for p in points)


def test_a_simulate_sweep_setting_judging_a_metric_no_job_reports_is_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every job reports its training loss; none reports ``eval_acuracy`` (misspelt): the setting
    that judges it is scored on a plateau rule that judged nothing, and the sweep says so."""
    args = ["simulate", "--jobs", "4", "--quiet", "--policy", str(PLATEAU), "--workers", "1"]
    assert main([*args, "--sweep", "plateau.metric=eval_acuracy,loss", "--json"]) == 0
    captured = capsys.readouterr()
    assert (
        "plateau.metric=eval_acuracy: its rules judge eval_acuracy, which no run reports: they judge "
        "nothing here" in captured.err
    )
    assert "plateau.metric=loss: its rules judge" not in captured.err
    doc = json.loads(captured.out)
    assert [p["unreported_metrics"] for p in doc["points"]] == [["eval_acuracy"], []]
    # scored and tabled, never named: neither the best nor the best by point rate
    assert doc["unnamed"] == [0] and doc["best"] != 0
    assert "(not shown to be within 1.00%): plateau.metric=eval_acuracy" not in captured.err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--sweep", "plateau.probability"], "expected FIELD=V1,V2"),
        (["--sweep", "plateau.nope=1"], "unknown policy field 'plateau.nope'"),
        (["--sweep", "plateau.probability=0.8", "--max-wrong", "x"], "--max-wrong"),
        (["--max-wrong", "150%"], "between 0 and 100%"),  # checked without --sweep too
        (["--max-wrong", "2"], "write the % sign (--max-wrong 2%)"),
        # a valid budget without --sweep, which alone reads it, was ignored without a word
        (["--max-wrong", "2%"], "--max-wrong is the wrong-stop budget of a --sweep: give --sweep too"),
    ],
)
def test_bad_sweeps_are_one_clear_error(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in (["simulate", "--jobs", "4"], ["backtest", str(ROOT / "tests")]):
        assert main([*command, "--quiet", "--policy", str(PLATEAU), *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--seed", "7", "--seeds", "1-2"], "give --seed or --seeds, not both"),
        (["--baselines-only", "--policy", str(PLATEAU)], "--baselines-only runs no policy"),
    ],
)
def test_flags_that_contradict_each_other_are_one_clear_error(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--seed 7 --seeds 1-2`` ran seeds 1-2 and ``--baselines-only --policy P`` ran no policy,
    each without a word: one of the two flags was ignored."""
    assert main(["simulate", "--jobs", "4", "--quiet", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_the_frontier_plot_prints_no_setting_over_another_nor_outside_the_axes() -> None:
    """Settings whose points lie close (three at one wrong-stop rate, 1.2 points of saving apart)
    are each labelled where no other label lies and inside the axes: labels placed by their order
    on the grid printed 0.7/20m and 0.9/10m over each other, read as a third setting."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from advisor.sweep_plot import _place_labels

    grid = [(0.7, "10m", 0.331, 0.0062), (0.8, "10m", 0.311, 0.0042), (0.7, "20m", 0.305, 0.0042)]
    grid += [(0.9, "10m", 0.292, 0.0042), (0.8, "20m", 0.277, 0.0021), (0.9, "20m", 0.271, 0.0021)]
    points = [
        {"label": f"plateau.probability={p} plateau.for={f}", "saved": s, "wrong_rate": w}
        for p, f, s, w in grid
    ]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.scatter([100 * p["wrong_rate"] for p in points], [100 * p["saved"] for p in points])
    ax.set_xlim(0.0, 2.1)
    fig.tight_layout()
    _place_labels(fig, ax, points)
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    frame = ax.get_window_extent(renderer)
    plt.close(fig)
    assert len(boxes) == len(points)
    for i, a in enumerate(boxes):
        assert frame.x0 <= a.x0 and a.x1 <= frame.x1 and frame.y0 <= a.y0 and a.y1 <= frame.y1
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b)
