"""``compare`` on run logs (a sweep's ``trainer_state.json`` files, or their folder): ranked by the
eval metric they are judged by, each run's state and best step as ``forecast FILE`` gives them."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from advisor import cli


def _sweep_run(
    path: Path, *, overfit: bool, steps: int = 3000, seed: int = 0, eval_noise: float = 0.01
) -> None:
    rng = random.Random(seed)
    history: list[dict[str, float]] = []
    for s in range(10, steps + 1, 10):
        history.append(
            {"step": s, "loss": 0.3 + 2 * math.exp(-s / 600) + rng.gauss(0, 0.02), "epoch": s / 1000}
        )
        if s % 100 == 0:
            if overfit:
                ev = (
                    1.2 + 1.5 * (math.exp(-s / 300) - math.exp(-1000 / 300))
                    if s <= 1000
                    else 1.2 + (s - 1000) / 800
                )
            else:
                ev = 1.0 + 1.2 * math.exp(-s / 700)
            history.append({"step": s, "eval_loss": ev + rng.gauss(0, eval_noise), "epoch": s / 1000})
    path.write_text(json.dumps({"log_history": history, "max_steps": 3000, "global_step": steps}))


def test_a_sweep_folder_ranks_by_the_eval_loss_and_names_the_overfitting_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    _sweep_run(sweep / "overfit.json", overfit=True)
    _sweep_run(sweep / "steady.json", overfit=False, seed=1)
    _sweep_run(sweep / "steady-halfway.json", overfit=False, steps=1500, seed=2)
    (sweep / "notes.md").write_text("not a run")
    assert cli.main(["compare", str(sweep), "-o", "json"]) == 0
    rows = {Path(r["run"]).name: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"overfit.json", "steady.json", "steady-halfway.json"}
    assert {r["metric"] for r in rows.values()} == {"eval_loss"}
    assert rows["overfit.json"]["state"] == "overfitting" and rows["overfit.json"]["probabilityBest"] < 0.01
    assert rows["overfit.json"]["bestStep"] == 1000
    assert rows["steady.json"]["state"] == "plateaued"  # finished, and its eval ended at its best
    assert rows["steady-halfway.json"]["state"] == "learning"
    assert rows["steady-halfway.json"]["progress"] == "1,500/3,000"
    assert rows["steady.json"]["ended"] and not rows["steady-halfway.json"]["ended"]
    assert cli.main(["compare", str(sweep / "overfit.json"), str(sweep / "steady.json")]) == 0
    out = capsys.readouterr().out
    assert "FINAL EVAL_LOSS" in out and "ranked by eval_loss (lower is better)" in out


def test_ranked_by_the_training_loss_an_overfitting_run_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--metric loss`` put an overfitting run first at 100% without a word: the note names it."""
    _sweep_run(tmp_path / "overfit.json", overfit=True)
    _sweep_run(tmp_path / "steady.json", overfit=False, seed=1)
    assert (
        cli.main(
            ["compare", str(tmp_path / "overfit.json"), str(tmp_path / "steady.json"), "--metric", "loss"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert (
        "overfitting: " in out
        and "overfit.json: ranked by the training loss, an overfitting run ends low" in out
    )
    assert cli.main(["compare", str(tmp_path / "overfit.json"), str(tmp_path / "steady.json")]) == 0
    assert "ranked by the training loss, an overfitting" not in capsys.readouterr().out


def test_ranked_by_the_training_loss_an_overfitting_run_is_not_named_best(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ranked by the training loss (a run without eval_loss forces it), an overfitting run ends
    with the lowest training loss and the worst model, and came first at P(BEST) 100%: it is left
    unranked, as a diverging run with no checkpoint is, listed after the ranked runs and said why."""
    _sweep_run(tmp_path / "overfit.json", overfit=True)
    _sweep_run(tmp_path / "steady.json", overfit=False, seed=1)
    # a custom log with a training loss alone: no eval_loss, so the sweep is ranked by the loss
    (tmp_path / "plain.csv").write_text(
        "step,loss\n" + "".join(f"{s},{0.5 + 2 * math.exp(-s / 600):.5f}\n" for s in range(10, 1501, 10))
    )
    runs = [str(tmp_path / n) for n in ("overfit.json", "steady.json", "plain.csv")]
    assert cli.main(["compare", *runs, "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["metric"] for r in rows} == {"loss"}
    by_name = {Path(r["run"]).name: r for r in rows}
    assert by_name["overfit.json"]["state"] == "overfitting"
    assert by_name["overfit.json"]["probabilityBest"] is None
    assert by_name["overfit.json"]["notRanked"] == "overfitting"
    assert Path(rows[-1]["run"]).name == "overfit.json"
    ranked = [r for r in rows if r["probabilityBest"] is not None]
    assert {Path(r["run"]).name for r in ranked} == {"steady.json", "plain.csv"}
    assert all(r["notRanked"] is None for r in ranked)
    assert sum(r["probabilityBest"] for r in ranked) == pytest.approx(1.0)
    assert cli.main(["compare", *runs]) == 0
    out = capsys.readouterr().out
    overfit_row = next(line for line in out.splitlines() if line.startswith(str(tmp_path / "overfit.json")))
    assert "%" not in overfit_row and "overfitting" in overfit_row
    assert "not ranked, overfitting: " in out and "an overfitting run ends low with a poor model" in out


def test_a_diverged_run_with_a_good_checkpoint_is_ranked_by_that_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose loss blew up after step 2,000 had kept a checkpoint better than a slower run's
    final value, and was listed "not ranked". Judged by an eval metric, its best checkpoint is a
    model to keep: it is ranked by that value alone (its final value is none)."""
    history: list[dict[str, float]] = []
    for s in range(10, 3001, 10):
        loss = 0.3 + 2 * math.exp(-s / 300) if s <= 2000 else float("nan")
        history.append({"step": s, "loss": loss})
        if s % 100 == 0 and s <= 2000:
            history.append({"step": s, "eval_loss": 0.5 + 0.8 * math.exp(-s / 400)})
    (tmp_path / "blew.json").write_text(
        json.dumps({"log_history": history, "max_steps": 3000, "global_step": 3000})
    )
    _sweep_run(tmp_path / "slow.json", overfit=False, seed=1)  # eval ends near 1.17
    assert cli.main(["compare", str(tmp_path / "blew.json"), str(tmp_path / "slow.json"), "-o", "json"]) == 0
    rows = {Path(r["run"]).name: r for r in json.loads(capsys.readouterr().out)}
    assert rows["blew.json"]["state"] == "diverging"
    assert rows["blew.json"]["probabilityBest"] is not None and rows["blew.json"]["probabilityBest"] > 0.9
    # what it gives is that checkpoint, not the value it would end at if it recovered (GIVES read
    # a final value below the checkpoint it said it was ranked by)
    assert rows["blew.json"]["gives"] == rows["blew.json"]["bestValue"]
    assert cli.main(["compare", str(tmp_path / "blew.json"), str(tmp_path / "slow.json")]) == 0
    out = capsys.readouterr().out
    assert "diverging, ranked by the best checkpoint kept before it diverged" in out
    assert "not ranked, diverging" not in out


def test_the_state_of_a_finished_run_says_how_it_ended(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sweep's under-trained run, its eval loss at its best at its last evaluation, read
    ``plateaued`` (every P(plateau) is 1 at the end) as if it had converged."""
    _sweep_run(tmp_path / "overfit.json", overfit=True)
    _sweep_run(tmp_path / "improving.json", overfit=False, eval_noise=0.0)
    _sweep_run(tmp_path / "halfway.json", overfit=False, steps=1500, seed=2)
    assert cli.main(["compare", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    state = {
        Path(line.split()[0]).name: line.split("   ")[-1].strip()
        for line in out.splitlines()
        if line.startswith(str(tmp_path))  # the table rows, not the footer naming a run
    }
    assert state == {
        "overfit.json": "overfitting",
        "improving.json": "finished, improving",
        "halfway.json": "learning",
    }
    assert "finished, improving: a run at its best at its last evaluation" in out
    # the LR caveat is of a FINAL still to come: not of the runs at their end (it named all three)
    (caveat,) = [line for line in out.splitlines() if line.startswith("learning rates unknown for ")]
    assert "halfway.json" in caveat and "improving.json" not in caveat and "every run" not in caveat
    assert cli.main(["compare", str(tmp_path), "-o", "json"]) == 0
    rows = {Path(r["run"]).name: r for r in json.loads(capsys.readouterr().out)}
    assert rows["improving.json"]["state"] == "plateaued" and rows["improving.json"]["ended"]  # the run state
    assert any("still improving" in n for n in rows["improving.json"]["notes"])


def test_a_run_that_overfit_after_the_sweeps_best_eval_gives_that_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its eval loss ended high, but its best checkpoint (kept with ``load_best_model_at_end``)
    beats every other run's end: it is the run to take, and the table says which step."""
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    _sweep_run(sweep / "overfit.json", overfit=True)  # best 1.2 at step 1000, ends near 3.7
    for i, floor in enumerate((1.35, 1.5)):
        rng = random.Random(i)
        history: list[dict[str, float]] = []
        for s in range(10, 3001, 10):
            history.append({"step": s, "loss": 0.3 + 2 * math.exp(-s / 600), "epoch": s / 1000})
            if s % 100 == 0:
                ev = floor + 1.2 * math.exp(-s / 700) + rng.gauss(0, 0.01)
                history.append({"step": s, "eval_loss": ev, "epoch": s / 1000})
        (sweep / f"steady{i}.json").write_text(
            json.dumps({"log_history": history, "max_steps": 3000, "global_step": 3000})
        )
    assert cli.main(["compare", str(sweep), "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [Path(r["run"]).name for r in rows] == ["overfit.json", "steady0.json", "steady1.json"]
    assert rows[0]["bestStep"] == 1000 and abs(rows[0]["bestValue"] - 1.2) < 0.05
    assert rows[0]["probabilityBest"] > 0.99 and rows[0]["final"]["mean"] > 2.0
    assert cli.main(["compare", str(sweep)]) == 0
    out = capsys.readouterr().out
    assert "step 1000: 1.19" in out or "step 1000: 1.2" in out, out
    assert "keep that checkpoint" in out
    # judged by the training loss, no best checkpoint is kept: the final value ranks
    assert cli.main(["compare", str(sweep), "--metric", "loss", "-o", "json"]) == 0
    assert all(r["bestValue"] is None for r in json.loads(capsys.readouterr().out))


def test_two_best_runs_within_one_percent_are_said_to_be_a_close_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Best checkpoints of 1.200 and 1.205 read 98% / 2% with nothing beside it: a gap that one
    evaluation's noise could make. Within 1% the table says so; 10% apart it says nothing."""

    def run(path: Path, best: float, seed: int) -> None:
        rng = random.Random(seed)
        history: list[dict[str, float]] = []
        for s in range(10, 3001, 10):
            history.append({"step": s, "loss": 0.3 + 2 * math.exp(-s / 600), "epoch": s / 1000})
            if s % 100 == 0:  # falls to its best at step 1000, then rises: the checkpoint gives it
                ev = (
                    best + 1.5 * (math.exp(-s / 300) - math.exp(-1000 / 300))
                    if s <= 1000
                    else best + (s - 1000) / 800
                )
                history.append({"step": s, "eval_loss": ev + rng.gauss(0, 0.002), "epoch": s / 1000})
        path.write_text(json.dumps({"log_history": history, "max_steps": 3000, "global_step": 3000}))

    run(tmp_path / "a.json", 1.200, 0)
    run(tmp_path / "b.json", 1.205, 1)
    run(tmp_path / "c.json", 1.35, 2)
    assert (
        cli.main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), str(tmp_path / "c.json")])
        == 0
    )
    out = capsys.readouterr().out
    (close,) = [line for line in out.splitlines() if line.startswith("close: ")]
    assert "a.json" in close and "b.json" in close and "c.json" not in close and "within 1%" in close
    assert cli.main(["compare", str(tmp_path / "a.json"), str(tmp_path / "c.json")]) == 0
    assert "close: " not in capsys.readouterr().out
    # every run within 1% of the first is named, not the second alone
    run(tmp_path / "d.json", 1.203, 3)
    files = [str(tmp_path / n) for n in ("a.json", "b.json", "c.json", "d.json")]
    assert cli.main(["compare", *files]) == 0
    (close,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("close: ")]
    assert all(n in close for n in ("a.json", "b.json", "d.json")) and "c.json" not in close, close
    given = [
        float(v) for v in close.split(" give ")[1].split(", within")[0].replace(" and ", ", ").split(", ")
    ]
    assert given == sorted(given), close  # best first


def test_best_checkpoints_closer_than_their_evaluations_scatter_share_the_odds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two runs whose best evaluations were 0.4% apart, each one noisy evaluation, read P(BEST)
    100% / 0% (an LLM fine-tuner's trial): a best checkpoint's value is drawn with the scatter
    its eval series shows, so such runs share the odds; a run 10% worse still gets none."""

    def run(path: Path, best: float, seed: int) -> None:
        rng = random.Random(seed)
        history: list[dict[str, float]] = []
        for s in range(10, 3001, 10):
            history.append({"step": s, "loss": 0.3 + 2 * math.exp(-s / 600), "epoch": s / 1000})
            if s % 100 == 0:
                ev = best + 0.6 * math.exp(-s / 500) - 0.6 * math.exp(-6)
                history.append({"step": s, "eval_loss": ev + rng.gauss(0, 0.01), "epoch": s / 1000})
        path.write_text(json.dumps({"log_history": history, "max_steps": 3000, "global_step": 3000}))

    run(tmp_path / "a.json", 1.200, 3)
    run(tmp_path / "b.json", 1.205, 4)
    run(tmp_path / "c.json", 1.35, 5)
    files = [str(tmp_path / n) for n in ("a.json", "b.json", "c.json")]
    assert cli.main(["compare", *files, "-o", "json"]) == 0
    rows = {Path(r["run"]).name: r for r in json.loads(capsys.readouterr().out)}
    assert all(rows[n]["bestValue"] is not None for n in rows)
    # best evaluations 1.180 and 1.189 (a's forecast end 1.18 too): taken as measured, a won every
    # draw; with each best drawn about its trend (1.19 and 1.21: each best is its series' luckiest
    # evaluation, b's of 0.01 off its line) with the scatter of its evaluations, b wins some
    assert rows["a.json"]["gives"] < rows["b.json"]["gives"]
    assert all(rows[n]["gives"] == rows[n]["bestTrend"] >= rows[n]["bestValue"] for n in ("a.json", "b.json"))
    assert 0.03 < rows["b.json"]["probabilityBest"] < rows["a.json"]["probabilityBest"] < 0.97, rows
    assert rows["c.json"]["probabilityBest"] < 0.01


def test_prob_best_draws_a_kept_value_with_its_noise() -> None:
    from advisor.commands.compare import prob_best

    tight = [(1.30, 1.29, 1.31), (1.30, 1.29, 1.31)]
    # kept 1.200 and 1.205 bound both outcomes: as measured, the first wins every draw
    assert prob_best(tight, kept=[1.200, 1.205]) == [1.0, 0.0]
    p = prob_best(tight, kept=[1.200, 1.205], kept_noise=[0.01, 0.01])
    assert 0.55 < p[0] < 0.75 and abs(sum(p) - 1.0) < 1e-9  # Phi(0.005 / (0.01 * sqrt 2)) = 0.64
    assert prob_best(tight, kept=[1.200, 1.205], kept_noise=[0.0, 0.0]) == [1.0, 0.0]


def test_a_forecasts_best_noise_is_read_from_its_learning_state() -> None:
    """A TrainJobForecast keeps no eval series: the scatter of the series its state judges is in
    ``learningState.bestNoise`` (0, taken as measured, when it is another metric or absent)."""
    from advisor.commands.compare_status import kept_noise

    status = {"learningState": {"metric": "eval_loss", "bestValue": 1.2, "bestNoise": 0.01}}
    assert kept_noise(status, "eval_loss") == 0.01
    assert kept_noise(status, "eval_accuracy") == 0.0
    assert kept_noise({"learningState": {"metric": "eval_loss"}}, "eval_loss") == 0.0


def test_a_metric_is_taken_as_the_file_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``forecast --metric eval_rewards/accuracies`` took the file's own key; ``compare`` refused it
    ("no run reports it") for the series' one spelling, eval_rewards_accuracies."""
    for name, top in (("a.json", 0.80), ("b.json", 0.70)):
        log: list[dict[str, float]] = []
        for step in range(10, 1001, 10):
            log.append({"step": step, "loss": 0.3 + 0.4 * 0.997**step})
            if step % 100 == 0:
                log.append(
                    {"step": step, "eval_loss": 0.4, "eval_rewards/accuracies": top - 0.2 * 0.997**step}
                )
        (tmp_path / name).write_text(json.dumps({"global_step": 1000, "max_steps": 1000, "log_history": log}))
    files = [str(tmp_path / "a.json"), str(tmp_path / "b.json")]
    assert cli.main(["compare", *files, "--metric", "eval_rewards/accuracies", "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["metric"] for r in rows} == {"eval_rewards_accuracies"}
    assert Path(rows[0]["run"]).name == "a.json" and rows[0]["higherIsBetter"] is True


def test_run_logs_and_forecast_names_do_not_mix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _sweep_run(tmp_path / "a.json", overfit=False)
    assert cli.main(["compare", str(tmp_path / "a.json"), "lr-1e-4"]) == 2
    err = capsys.readouterr().err
    assert "lr-1e-4: no such file; give run logs only, or TrainJobForecast names only" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["compare", str(empty), str(tmp_path / "a.json")]) == 2
    assert "empty: folder: no runs in it" in capsys.readouterr().err


def _csv_run(path: Path, *, floor: float, nan_from: int | None = None, seed: int = 0) -> None:
    rng = random.Random(seed)
    rows = ["step,loss"]
    for s in range(10, 5001, 10):
        loss = floor + 2.0 * (s / 100) ** -0.5 + rng.gauss(0, 0.002)
        rows.append(f"{s},{'nan' if nan_from is not None and s >= nan_from else f'{loss:.5f}'}")
    path.write_text("\n".join(rows) + "\n")


def test_runs_as_likely_to_end_best_are_ordered_by_their_predicted_value_and_a_diverged_one_comes_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Five runs whose intervals do not overlap: the best has P(best) 100% and the other four 0%
    each; those four follow in the order of their predicted final value, not of their names. A run
    whose loss went NaN (the lowest loss before it did) is not ranked at all: it comes last, named."""
    for name, floor in (("a_worst", 1.7), ("b_bad", 1.5), ("c_ok", 1.3), ("d_good", 1.1), ("e_best", 0.9)):
        _csv_run(tmp_path / f"{name}.csv", floor=floor)
    _csv_run(tmp_path / "f_nan.csv", floor=0.5, nan_from=3010)
    assert cli.main(["compare", str(tmp_path), "--total-steps", "5000", "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [Path(r["run"]).stem for r in rows] == ["e_best", "d_good", "c_ok", "b_bad", "a_worst", "f_nan"]
    assert rows[-1]["state"] == "diverging" and rows[-1]["probabilityBest"] is None
    assert cli.main(["compare", str(tmp_path), "--total-steps", "5000"]) == 0
    out = capsys.readouterr().out
    table = [line.split()[0] for line in out.splitlines()[1:7]]
    assert [Path(t).stem for t in table] == ["e_best", "d_good", "c_ok", "b_bad", "a_worst", "f_nan"]
    assert "not ranked, diverging:" in out and "f_nan.csv" in out


def test_a_sweep_folder_with_an_index_beside_its_runs_names_what_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder of runs with its index.csv (no loss in it): the runs are compared, the index is
    no run (as for ``backtest``), and a folder's file that is no run is named as skipped on stderr;
    a file named explicitly that is no run is still an error."""
    _csv_run(tmp_path / "a.csv", floor=1.0)
    _csv_run(tmp_path / "b.csv", floor=1.2)
    (tmp_path / "index.csv").write_text("file,repo\na.csv,x/y\nb.csv,x/z\n")
    (tmp_path / "summary.csv").write_text("file,repo\na.csv,x/y\nb.csv,x/z\n")
    assert cli.main(["compare", str(tmp_path), "--total-steps", "5000", "-o", "json"]) == 0
    captured = capsys.readouterr()
    assert [Path(r["run"]).name for r in json.loads(captured.out)] == ["a.csv", "b.csv"]
    assert "skipped summary.csv" in captured.err and "index.csv" not in captured.err
    assert cli.main(["compare", str(tmp_path / "a.csv"), str(tmp_path / "index.csv")]) == 2
    assert "index.csv" in capsys.readouterr().err


def test_a_sweep_folder_in_the_hf_layout_is_compared_as_backtest_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """<sweep>/<run>/trainer_state.json: the folder stands for the run logs in its subfolders, as
    for ``backtest``; hidden folders (a notebook's checkpoints) are left out."""
    sweep = tmp_path / "sweep"
    for name, overfit in (("lr1e-4", True), ("lr5e-5", False)):
        (sweep / name).mkdir(parents=True)
        _sweep_run(sweep / name / "trainer_state.json", overfit=overfit)
    (sweep / ".ipynb_checkpoints").mkdir()
    (sweep / ".ipynb_checkpoints" / "notes.txt").write_text("not a run")
    assert cli.main(["compare", str(sweep), "-o", "json"]) == 0
    captured = capsys.readouterr()
    rows = {Path(r["run"]).parent.name: r for r in json.loads(captured.out)}
    assert set(rows) == {"lr1e-4", "lr5e-5"} and "skipped" not in captured.err
    assert rows["lr1e-4"]["state"] == "overfitting"


def test_logs_of_an_eval_metric_alone_are_ranked_by_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sweep whose logs hold only eval_accuracy (no training loss): each run is judged by it, as
    ``forecast`` judges such a log, and ranked by the checkpoint it gives (higher is better)."""
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    for name, best_at, top in (("a", 1500, 0.80), ("b", 2500, 0.90), ("c", 3000, 0.70)):
        rows = ["step,eval_accuracy"] + [
            f"{s},{top - 0.2 * ((s - best_at) / 2000) ** 2:.4f}" for s in range(250, 4001, 250)
        ]
        (sweep / f"{name}.csv").write_text("\n".join(rows) + "\n")
    assert cli.main(["compare", str(sweep), "--total-steps", "4000", "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [Path(r["run"]).name for r in rows] == ["b.csv", "a.csv", "c.csv"]
    assert {r["metric"] for r in rows} == {"eval_accuracy"} and rows[0]["higherIsBetter"]
    assert rows[0]["bestStep"] == 2500


def test_total_steps_fills_in_for_a_log_without_one_and_leaves_a_stated_total_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--total-steps`` is the planned total of the runs whose log does not say it: a finished
    trainer state (``max_steps`` 3000, at step 3000) stays finished, not 3,000 of 10,000 steps
    with a lower final loss to come; the CSV log, which states no total, takes it."""
    _sweep_run(tmp_path / "finished.json", overfit=False)
    _csv_run(tmp_path / "open.csv", floor=1.0)
    args = ["compare", str(tmp_path / "finished.json"), str(tmp_path / "open.csv"), "--metric", "loss"]
    assert cli.main([*args, "-o", "json"]) == 0
    alone = {Path(r["run"]).name: r for r in json.loads(capsys.readouterr().out)}
    assert cli.main([*args, "--total-steps", "10000", "-o", "json"]) == 0
    rows = {Path(r["run"]).name: r for r in json.loads(capsys.readouterr().out)}
    assert rows["finished.json"]["progress"] == "3,000/3,000"
    assert rows["finished.json"]["final"] == alone["finished.json"]["final"]
    assert rows["finished.json"]["state"] == alone["finished.json"]["state"]
    assert rows["open.csv"]["progress"] == "5,000/10,000"


def _two_metric_run(path: Path, *, loss_best: int, acc_best: int, top: float) -> None:
    """A finished run whose eval_loss is best at ``loss_best`` and eval_accuracy at ``acc_best``."""
    history: list[dict[str, float]] = []
    for s in range(10, 3001, 10):
        history.append({"step": s, "loss": 0.3 + 2 * math.exp(-s / 600), "epoch": s / 1000})
        if s % 100 == 0:
            ev = 1.0 + ((s - loss_best) / 1000) ** 2
            acc = top - 0.1 * ((s - acc_best) / 1000) ** 2
            history.append({"step": s, "eval_loss": ev, "eval_accuracy": acc, "epoch": s / 1000})
    path.write_text(json.dumps({"log_history": history, "max_steps": 3000, "global_step": 3000}))


def test_the_best_checkpoint_shown_is_that_of_the_metric_ranked_by(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ranked by eval_accuracy, a run's best checkpoint is where its eval_accuracy was best, with
    that value (as ``forecast --metric eval_accuracy`` says), not its best eval_loss's step with no
    value; ranked by the training loss, none is shown (it keeps no checkpoint)."""
    _two_metric_run(tmp_path / "a.json", loss_best=700, acc_best=1500, top=0.8)
    _two_metric_run(tmp_path / "b.json", loss_best=1000, acc_best=2000, top=0.7)
    argv = ["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]
    assert cli.main([*argv, "--metric", "eval_accuracy", "-o", "json"]) == 0
    rows = {Path(r["run"]).name: r for r in json.loads(capsys.readouterr().out)}
    assert (rows["a.json"]["bestStep"], rows["a.json"]["bestValue"]) == (1500, pytest.approx(0.8))
    assert (rows["b.json"]["bestStep"], rows["b.json"]["bestValue"]) == (2000, pytest.approx(0.7))
    assert cli.main([*argv, "--metric", "eval_accuracy"]) == 0
    out = capsys.readouterr().out
    assert "step 1500: 0.8" in out
    # the value each run is ranked by, the better of its final and its best checkpoint, is shown
    # (a P(BEST) of 100% sat beside the worst FINAL, its reason in no column)
    assert "GIVES" in out.splitlines()[0]
    assert cli.main([*argv, "--metric", "eval_accuracy", "-o", "json"]) == 0
    for r in json.loads(capsys.readouterr().out):
        assert r["gives"] == pytest.approx(max(r["final"]["mean"], r["bestValue"]))
    assert cli.main([*argv, "-o", "json"]) == 0  # judged (and ranked) by eval_loss
    assert {Path(r["run"]).name: r["bestStep"] for r in json.loads(capsys.readouterr().out)} == {
        "a.json": 700,
        "b.json": 1000,
    }
    assert cli.main([*argv, "--metric", "loss", "-o", "json"]) == 0
    assert all(r["bestStep"] is None and r["bestValue"] is None for r in json.loads(capsys.readouterr().out))
    assert cli.main([*argv, "--metric", "loss"]) == 0
    out = capsys.readouterr().out
    assert "BEST CHECKPOINT" not in out and "step 700" not in out and "no best checkpoint" in out


def test_a_score_logged_as_a_fraction_by_one_run_and_a_percentage_by_another_is_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """75% ranked as logged beats 0.8 with P(BEST) 100%: the ranking is kept as logged, and a
    line says the runs' scales differ, naming which is which. Runs on one scale get no line."""
    _two_metric_run(tmp_path / "a.json", loss_best=700, acc_best=1500, top=0.8)
    _two_metric_run(tmp_path / "b.json", loss_best=1000, acc_best=2000, top=75.0)
    _two_metric_run(tmp_path / "c.json", loss_best=1000, acc_best=2000, top=0.7)
    argv = ["compare", "--metric", "eval_accuracy"]
    assert cli.main([*argv, str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("scales differ")]
    assert (
        f"percentage (0-100) in {tmp_path / 'b.json'} and a fraction (0-1) in {tmp_path / 'a.json'}" in line
    )
    assert cli.main([*argv, str(tmp_path / "a.json"), str(tmp_path / "c.json")]) == 0
    assert "scales differ" not in capsys.readouterr().out


def _loss_only_run(path: Path, *, scale: float, steps: int = 3000) -> None:
    rows = ["step,loss"] + [f"{s},{0.3 + scale * math.exp(-s / 600):.5f}" for s in range(10, steps + 1, 10)]
    path.write_text("\n".join(rows) + "\n")


def test_an_eval_metric_only_some_runs_report_is_not_the_default_ranking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One fine-tune with an eval_loss among runs that log only a training loss: ranked by the eval
    loss, the others had no place and the one run was best at 100%. The default ranks by an eval
    metric only when every run reports it, else by the training loss, and says why."""
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    _sweep_run(sweep / "with-eval.json", overfit=False)
    _loss_only_run(sweep / "a.csv", scale=2.0)
    _loss_only_run(sweep / "b.csv", scale=2.5)
    assert cli.main(["compare", str(sweep), "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["metric"] for r in rows} == {"loss"}
    # every run has a place; one judged overfitting has it outside the draw, said so
    assert all((r["probabilityBest"] is None) == (r["notRanked"] is not None) for r in rows)
    assert all(r["probabilityBest"] is not None for r in rows if r["run"].endswith(".csv"))
    assert cli.main(["compare", str(sweep)]) == 0
    out = capsys.readouterr().out
    assert "FINAL LOSS" in out
    assert (
        "ranked by loss (lower is better): eval_loss is reported by 1 of 3 runs only "
        "(--metric eval_loss ranks those by it)"
    ) in out
    # asked for, it is what the runs are ranked by, those without it listed without a forecast
    assert cli.main(["compare", str(sweep), "--metric", "eval_loss", "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["metric"] for r in rows} == {"eval_loss"}
    assert sum(r["final"] is None for r in rows) == 2


def test_a_metric_no_run_reports_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _loss_only_run(tmp_path / "a.csv", scale=2.0)
    _loss_only_run(tmp_path / "b.csv", scale=2.5)
    assert (
        cli.main(["compare", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--metric", "eval_bogus"]) == 2
    )
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [
        "trainjob-advisor compare: error: --metric eval_bogus: no run reports it (the runs' series: loss)"
    ]


def test_compare_ranks_the_runs_of_a_w_and_b_panel_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = ("good-run-1", "bad-run-2")
    lines = ['"Step",' + ",".join(f'"{r} - train/loss"' for r in runs)]
    for s in range(0, 3001, 20):
        good, bad = 2 + 1.5 * (1 + s / 200) ** -0.7, 3.0 + 0.5 * math.exp(-s / 300)
        lines.append(f"{s},{good:.4f},{bad:.4f}")
    (tmp_path / "panel.csv").write_text("\n".join(lines) + "\n")
    assert cli.main(["compare", str(tmp_path / "panel.csv"), "--total-steps", "3000", "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["run"].rsplit("#", 1)[1] for r in rows] == ["good-run-1", "bad-run-2"]


def test_the_same_log_twice_is_said_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _csv_run(tmp_path / "a.csv", floor=1.0)
    assert cli.main(["compare", str(tmp_path / "a.csv"), str(tmp_path / "a.csv")]) == 2
    assert f"the same run given twice: {tmp_path / 'a.csv'}" in capsys.readouterr().err


def test_final_is_said_to_be_the_asymptote_once_for_the_runs_without_a_total(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _sweep_run(tmp_path / "finished.json", overfit=False)  # max_steps 3000
    _csv_run(tmp_path / "open.csv", floor=1.0)
    _csv_run(tmp_path / "open2.csv", floor=1.1)
    runs = [str(tmp_path / n) for n in ("open.csv", "open2.csv")]
    assert cli.main(["compare", *runs, "--metric", "loss"]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if "asymptote" in line]
    assert notes == [
        "FINAL is the asymptote for each run: no total steps in the log "
        "(pass --total-steps N, the planned total)"
    ]
    assert cli.main(["compare", str(tmp_path / "finished.json"), runs[0], "--metric", "loss"]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if "asymptote" in line]
    assert len(notes) == 1 and notes[0].startswith(f"FINAL is the asymptote for {runs[0]}: no total steps")
    assert cli.main(["compare", *runs, "--metric", "loss", "--total-steps", "10000"]) == 0
    assert "asymptote" not in capsys.readouterr().out


def _unknown_lr_run(path: Path, final: float, seed: int, *, with_lr: bool = False) -> None:
    """A run at 40% of 2000 steps whose log has no learning rates (unless ``with_lr``)."""
    rng = random.Random(seed)
    head = "step,time,loss,eval_loss,total_steps" + (",learning_rate" if with_lr else "")
    rows = [head]
    for s in range(10, 801, 10):
        loss = final + 1.5 * (s / 100 + 1) ** -0.7
        ev = f"{loss + 0.1 + rng.gauss(0, 0.002):.5f}" if s % 100 == 0 else ""
        row = f"{s},{s * 10},{loss * (1 + rng.gauss(0, 0.004)):.5f},{ev},2000"
        rows.append(row + (",0.0003" if with_lr else ""))
    path.write_text("\n".join(rows) + "\n")


def test_compare_passes_on_the_forecasts_warning_that_learning_rates_are_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    for i, (name, final) in enumerate((("lr1e-4", 1.9), ("lr3e-4", 1.7))):
        _unknown_lr_run(sweep / f"{name}.csv", final, i)
    assert cli.main(["compare", str(sweep), "--metric", "loss"]) == 0
    out = capsys.readouterr().out
    assert "learning rates unknown for every run" in out
    _unknown_lr_run(sweep / "lr1e-3.csv", 1.8, 2, with_lr=True)
    assert cli.main(["compare", str(sweep), "--metric", "loss"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("learning rates unknown"))
    assert "lr1e-4.csv" in line and "lr3e-4.csv" in line and "lr1e-3.csv" not in line
    # the JSON says it of each run as the table's footer does
    assert cli.main(["compare", str(sweep), "--metric", "loss", "-o", "json"]) == 0
    notes = {Path(r["run"]).stem: r["notes"] for r in json.loads(capsys.readouterr().out)}
    assert any("learning rates unknown" in n for n in notes["lr1e-4"])
    assert any("learning rates unknown" in n for n in notes["lr3e-4"])
    assert not any("learning rates unknown" in n for n in notes["lr1e-3"])


def test_the_json_notes_a_log_without_total_steps_as_an_asymptote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _sweep_run(tmp_path / "finished.json", overfit=False)
    _csv_run(tmp_path / "open.csv", floor=1.0)
    args = ["compare", str(tmp_path / "finished.json"), str(tmp_path / "open.csv"), "--metric", "loss"]
    assert cli.main([*args, "-o", "json"]) == 0
    notes = {Path(r["run"]).name: r["notes"] for r in json.loads(capsys.readouterr().out)}
    assert any("asymptote" in n for n in notes["open.csv"])
    assert not any("asymptote" in n for n in notes["finished.json"])
    assert cli.main([*args, "--total-steps", "10000", "-o", "json"]) == 0
    assert not any("asymptote" in n for r in json.loads(capsys.readouterr().out) for n in r["notes"])


def test_a_run_whose_loss_went_nan_shows_its_progress_as_forecast_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its progress was its last finite point's step ("2,030/3,000"), forecast's its last report's."""
    _sweep_run(tmp_path / "steady.json", overfit=False)
    history = [
        {"step": s, "loss": 2.0 - s / 3000 if s <= 2000 else float("nan")} for s in range(10, 3001, 10)
    ]
    (tmp_path / "gone.json").write_text(json.dumps({"log_history": history, "max_steps": 3000}))
    assert cli.main(["compare", str(tmp_path), "-o", "json"]) == 0
    rows = {Path(r["run"]).name: r for r in json.loads(capsys.readouterr().out)}
    assert rows["gone.json"]["progress"] == "3,000/3,000" and rows["gone.json"]["state"] == "diverging"


def test_mistyped_file_names_say_they_are_no_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Names that are no file are read as TrainJobs; without a cluster the error said only
    "cannot connect to the cluster", nothing of the files the user meant."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["compare", "run-a.json", "run-b.json"]) == 2
    err = capsys.readouterr().err
    assert "run-a.json, run-b.json: no such file; as TrainJobs: cannot connect to the cluster" in err


def test_final_is_said_to_be_where_the_learning_rate_decay_ends_when_forecast_reads_it_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs without a total whose learning rate decays linearly are forecast to where the decay
    ends (as ``forecast FILE`` says); the table's note says the same, not "asymptote" (an ML
    engineer read three descriptions of one forecast)."""
    for name, floor in (("a.csv", 1.0), ("b.csv", 1.1)):
        rows = ["step,loss,learning_rate"]
        for s in range(10, 3001, 10):
            rows.append(f"{s},{floor + 2.0 * math.exp(-s / 800):.5f},{3e-4 * (1 - s / 6000):.3e}")
        (tmp_path / name).write_text("\n".join(rows) + "\n")
    assert cli.main(["compare", str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]) == 0
    out = capsys.readouterr().out
    assert "FINAL is where the learning rate's decay ends for each run: no total steps in the log" in out
    assert "asymptote" not in out


def test_a_finished_run_whose_eval_converged_through_noise_is_not_read_overfitting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At its last step a run's eval is judged off its record: its last evaluations against its
    best. Against the single lowest of many noisy evaluations, a healthy run's eval loss, still
    falling at 1% noise, ended 2% "above its best" and the finished run read overfitting 1.00 (and
    was left out of a training-loss ranking). Median against median, beyond the noise, it reads
    plateaued; an eval loss that rose for real still reads overfitting."""
    for seed in range(3):
        _sweep_run(tmp_path / f"steady{seed}.json", overfit=False, seed=seed)
        assert cli.main(["forecast", str(tmp_path / f"steady{seed}.json"), "--json"]) == 0
        state = json.loads(capsys.readouterr().out)["state"]
        assert state["label"] == "plateaued" and state["probabilities"]["overfitting"] < 0.5, state
    _sweep_run(tmp_path / "overfit.json", overfit=True)
    assert cli.main(["forecast", str(tmp_path / "overfit.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"]["label"] == "overfitting"


def test_a_run_that_stopped_evaluating_is_ranked_by_its_best_checkpoint_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A platform trial's run stopped evaluating at step 4,100 of 24,000 and came first of its
    sweep on a final eval loss forecast from those 4,100 steps, beside the same curve evaluated to
    the end. Its state now says the series stopped and judges it by the training loss; compare
    ranks it by the checkpoint it is known to give, and says why."""
    history: list[dict[str, float]] = []
    for s in range(10, 6001, 10):
        history.append({"step": s, "loss": 0.3 + 2 * math.exp(-s / 600), "learning_rate": 1e-4})
        if s % 200 == 0 and s <= 1400:
            history.append({"step": s, "eval_loss": 0.5 + 0.3 * math.exp(-s / 300)})
    (tmp_path / "stopped.json").write_text(json.dumps({"log_history": history, "max_steps": 8000}))
    _sweep_run(tmp_path / "other.json", overfit=False, seed=1)
    assert cli.main(["forecast", str(tmp_path / "stopped.json")]) == 0
    out = capsys.readouterr().out
    assert "eval_loss has not been evaluated since step 1,400, 4,600 steps ago" in out
    assert "judged by the training loss" in out
    args = ["compare", str(tmp_path / "stopped.json"), str(tmp_path / "other.json")]
    assert cli.main([*args, "-o", "json"]) == 0
    rows = {Path(r["run"]).name: r for r in json.loads(capsys.readouterr().out)}
    stopped = rows["stopped.json"]
    kept = stopped["bestTrend"] if stopped["bestTrend"] is not None else stopped["bestValue"]
    assert stopped["gives"] == kept
    assert any("ranked by its best checkpoint alone" in n for n in stopped["notes"])
    assert cli.main(args) == 0
    assert "stopped evaluating eval_loss long before its last step" in capsys.readouterr().out
