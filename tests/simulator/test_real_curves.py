"""``simulate --curves DIR``: each job's curve is one real run's log, time-scaled to the job, judged
on the run's own later record; the output says which curves were used."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from advisor.cli import main
from simulator.real_curves import RealCurveLibrary

ROOT = Path(__file__).resolve().parents[2]
PLATEAU = ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"


def _runs(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    steps = np.arange(10, 2001, 10)
    flat = 2.0 + 3.0 * (1.0 + np.minimum(steps / 2000, 0.3) / 0.02) ** -0.7
    learning = 5.0 - 2.0 * steps / 2000
    for name, loss in (("flat.csv", flat), ("learning.csv", learning)):
        rows = ["step,loss,learning_rate"] + [f"{s},{v:.5f},0.0003" for s, v in zip(steps, loss, strict=True)]
        (folder / name).write_text("\n".join(rows) + "\n")
    (folder / "short.csv").write_text("step,loss\n1,2\n2,1\n")
    return folder


def test_a_real_run_is_laid_over_the_jobs_steps_and_judged_on_its_own_record(tmp_path: Path) -> None:
    lib = RealCurveLibrary(_runs(tmp_path / "runs"))
    assert len(lib.curves) == 2 and lib.skipped == 1 and "2 real runs" in lib.description
    rng = np.random.default_rng(0)
    drawn = {c.source: c for c in (lib.draw(rng, 10_000, 0) for _ in range(20))}
    flat, learning = drawn["flat.csv"], drawn["learning.csv"]
    # time-scaled: the log's last point is the job's last step
    assert flat.observed(10_000) == pytest.approx(
        float((tmp_path / "runs" / "flat.csv").read_text().split()[-1].split(",")[1])
    )
    assert flat.learning_end_step() < 0.5 * 10_000 and flat.remaining_improvement(8_000) < 0.01
    assert learning.learning_end_step() > 0.9 * 10_000 and learning.remaining_improvement(5_000) > 0.1
    losses, lrs = learning.reports(np.array([1_000, 5_000]))
    assert losses[0] > losses[1] and np.allclose(lrs, 1.0)
    assert learning.non_finite_from() is None and learning.hang_step is None


def test_simulate_with_real_curves_says_which_curves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = _runs(tmp_path / "runs")
    out = tmp_path / "rows.json"
    rc = main(
        [
            "simulate",
            "--jobs",
            "6",
            "--quiet",
            "--curves",
            str(runs),
            "--policy",
            str(PLATEAU),
            "--baselines",
            "no-advisor",
            "--json-file",
            str(out),
        ]
    )
    assert rc == 0
    rows = json.loads(out.read_text())
    assert "2 real runs from" in rows[0]["scenario"]["curves"]
    assert "curves: 2 real runs" in capsys.readouterr().out
    assert main(["simulate", "--jobs", "6", "--quiet", "--curves", str(tmp_path / "none")]) == 2
    assert "--curves: no such folder: " in capsys.readouterr().err


def test_a_real_run_with_an_eval_loss_is_replayed_with_it_and_judged_by_it(tmp_path: Path) -> None:
    """A fine-tune whose training loss falls to the end while its eval loss turns up at 40%: the
    job reports the latest evaluation, and the run stopped learning where the eval loss did."""
    folder = tmp_path / "runs"
    folder.mkdir()
    history: list[dict[str, float]] = []
    for step in range(10, 2001, 10):
        history.append({"step": step, "loss": 3.0 - step / 1000})
        if step % 200 == 0:
            x = step / 2000
            history.append({"step": step, "eval_loss": 2.0 - x + 3.0 * max(0.0, x - 0.4) ** 2 * 4})
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": history, "max_steps": 2000}))
    lib = RealCurveLibrary(folder)
    assert "1 with an eval loss" in lib.description
    run = lib.draw(np.random.default_rng(0), 10_000, 0)
    assert run.has_evals
    assert run.eval_observed(500) is None  # before the first evaluation (at 10% of the run)
    assert run.eval_observed(1_000) == pytest.approx(1.9)
    assert run.eval_observed(1_999) == pytest.approx(1.9)  # held until the next one
    assert run.eval_observed(2_000) == pytest.approx(1.8)
    # the training loss still falls, but the eval loss is at its best near 40-50%: no more learning
    assert 4_000 <= run.learning_end_step() <= 5_500
    assert run.remaining_improvement(7_000) == 0.0 and run.remaining_improvement(1_000) > 0.1
    # a run without evaluations is judged by its training loss, as before
    plain = RealCurveLibrary(_runs(tmp_path / "plain")).draw(np.random.default_rng(0), 10_000, 0)
    assert not plain.has_evals and plain.eval_observed(5_000) is None


def test_real_curves_are_found_and_named_as_backtest_finds_and_names_runs(tmp_path: Path) -> None:
    """Every run log under the folder, each named by its path in it: the runs of HF's
    <sweep>/<run>/trainer_state.json layout are four curves, not four called trainer_state.json."""
    from advisor.backtest.runs import load_runs

    sweep = tmp_path / "sweep"
    steps = np.arange(10, 1001, 10)
    for k, run in enumerate(("lr1e-3", "lr1e-4", "lr2e-5")):
        (sweep / run).mkdir(parents=True)
        history = [{"step": int(s), "loss": float(2.0 + k - s / 1000)} for s in steps]
        (sweep / run / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    (sweep / "lr5e-5").mkdir()
    rows = ["step,loss"] + [f"{s},{3.0 - s / 2000:.5f}" for s in steps]
    (sweep / "lr5e-5" / "train.log").write_text("\n".join(rows) + "\n")
    lib = RealCurveLibrary(sweep)
    runs, _ = load_runs([sweep])
    names = ["lr1e-3/trainer_state.json", "lr1e-4/trainer_state.json", "lr2e-5/trainer_state.json"]
    assert [c.name for c in lib.curves] == [r.name for r in runs] == [*names, "lr5e-5/train.log"]


def test_curves_that_do_not_exist_or_are_no_folder_are_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope_dir"
    assert main(["simulate", "--curves", str(missing)]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"trainjob-advisor simulate: error: --curves: no such folder: {missing}"
    )
    one = _runs(tmp_path / "runs") / "flat.csv"
    assert main(["simulate", "--curves", str(one)]) == 2
    assert capsys.readouterr().err.strip().endswith(f"{one}: --curves needs a folder of runs")


def test_the_legend_says_real_curves_are_judged_on_their_own_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ``--curves`` no run has a hidden clean curve: the legend under the table and in the
    reports said it did. It names the run's own later record, as the verdicts read it."""
    pytest.importorskip("matplotlib")
    runs = _runs(tmp_path / "runs")
    base = ["simulate", "--jobs", "4", "--quiet", "--baselines", "no-advisor", "--policy", str(PLATEAU)]
    real = "on the real run's own later record, smoothed and judged as the back-test judges it"
    assert main([*base, "--curves", str(runs), "--report", str(tmp_path / "r1")]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert real in said and "hidden clean curve" not in said
    assert real in (tmp_path / "r1" / "report.md").read_text()
    seeds = ["--seeds", "0-1", "--workers", "1", "--report", str(tmp_path / "r2")]
    assert main([*base, "--curves", str(runs), *seeds]) == 0
    assert real in (tmp_path / "r2" / "report.md").read_text()
    capsys.readouterr()
    assert main([*base, "--report", str(tmp_path / "r3")]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "on its hidden clean curve" in said and real not in said
    assert "on its hidden clean curve" in (tmp_path / "r3" / "report.md").read_text()


def test_simulate_over_seeds_says_which_curves_in_its_footer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = _runs(tmp_path / "runs")
    args = ["simulate", "--jobs", "4", "--seeds", "0-1", "--workers", "1", "--quiet", "--curves", str(runs)]
    assert main([*args, "--baselines", "no-advisor"]) == 0
    footer = capsys.readouterr().out.strip().splitlines()[-1]
    assert "seeds 0-1" in footer and "curves: 2 real runs from" in footer and "1 unreadable" in footer


def test_a_stop_is_judged_as_the_back_test_judges_it_inside_a_stretch_of_nan_reports(tmp_path: Path) -> None:
    """``simulate --curves`` and ``backtest`` read a stop with one definition
    (``advisor.judging.left_after``): a linear loss from 2 to 1 with NaN reports at 80-99% of its
    first half, stopped inside them, still had what it stood at before them to lose (about 37%,
    by hand: it last stood near 1.65 and ends at 1.0); the simulator's own copy read 0% there."""
    from advisor.backtest.runs import load_runs
    from advisor.backtest.verdict import judged

    steps = np.arange(1, 201)
    loss = 2.0 - steps / 200
    rows = ["step,loss"] + [
        f"{s},{'nan' if 80 <= i < 100 else f'{v:.5f}'}"
        for i, (s, v) in enumerate(zip(steps, loss, strict=True))
    ]
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "nan.csv").write_text("\n".join(rows) + "\n")
    (run,), _ = load_runs([tmp_path / "runs" / "nan.csv"])
    left_backtest = judged(run).left_after(90.0)[0]
    curve = RealCurveLibrary(tmp_path / "runs").draw(np.random.default_rng(0), 200, 0)
    left_simulator = curve.remaining_improvement(90.0)
    assert left_backtest == pytest.approx(0.37, abs=0.03)
    assert left_simulator == pytest.approx(left_backtest, abs=0.02)


def test_a_run_with_fewer_evaluations_than_the_back_test_judges_by_is_judged_by_its_loss(
    tmp_path: Path,
) -> None:
    """Four evaluations are replayed (the job reports them) but, as in the back-test, a run is
    judged by its eval series only from ``MIN_JUDGED_EVALS`` on: the same run must get the same
    verdict in ``simulate --curves`` and in ``backtest``."""
    from advisor.judging import MIN_JUDGED_EVALS

    folder = tmp_path / "runs"
    folder.mkdir()
    history: list[dict[str, float]] = []
    for step in range(10, 2001, 10):
        history.append({"step": step, "loss": 3.0 - step / 1000})  # learning to the end
        if step % 500 == 0:  # four evaluations, flat from the second
            history.append({"step": step, "eval_loss": 2.0 if step == 500 else 1.5})
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": history, "max_steps": 2000}))
    run = RealCurveLibrary(folder).draw(np.random.default_rng(0), 10_000, 0)
    assert run.has_evals and run.eval_xs is not None and run.eval_xs.size == 4 < MIN_JUDGED_EVALS
    # judged by the training loss, which falls to the end: a stop at 60% left more than 1%
    assert run.remaining_improvement(6_000) > 0.1


def test_an_index_beside_the_runs_gives_each_curve_the_kind_of_run_its_user_knows_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An index CSV's ``workload-type`` label (matched to runs as the back-test matches them) is the
    kind of run a job following the curve is (what ``--label-rate`` labels it with); a run no row
    labels is a fine-tune, as before. An admin's pretraining run was judged as a fine-tune, with
    labels or without, because the index was never read. A kind the simulator does not know is
    one error line."""
    folder = _runs(tmp_path / "runs")
    (folder / "index.csv").write_text("run,gpus,labels\nflat.csv,8,workload-type=pretraining;team=a\n")
    lib = RealCurveLibrary(folder)
    assert "workload-type from an index: 1 pretraining" in lib.description
    rng = np.random.default_rng(0)
    drawn = {c.source: c for c in (lib.draw(rng, 10_000, 0) for _ in range(20))}
    assert drawn["flat.csv"].workload_type == "pretraining"
    assert drawn["learning.csv"].workload_type == "fine-tuning"
    (folder / "index.csv").write_text("run,labels\nflat.csv,workload-type=pretrain\n")
    with pytest.raises(
        ValueError, match=r"index.csv: run 'flat.csv': workload-type='pretrain': expected one of"
    ):
        RealCurveLibrary(folder)
    args = ["simulate", "--jobs", "6", "--quiet", "--curves", str(folder), "--baselines", "no-advisor"]
    assert main(args) == 2
    assert "workload-type='pretrain'" in capsys.readouterr().err
