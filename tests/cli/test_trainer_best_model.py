"""A ``trainer_state.json`` that names its best model: the metric it was kept by is the one the run
is judged by (``forecast``, ``compare``, ``backtest``, ``simulate --curves``), and the best
checkpoint named to the user is one the trainer saved, with the trainer's own choice beside it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from advisor.backtest.runs import load_runs
from advisor.cli import main
from advisor.series import Direction, primary_eval
from advisor.sources.files import load_curve, parse_log
from advisor.sources.trainer_choice import trainer_choice
from simulator.real_curves import RealCurveLibrary


def _u(step: int) -> float:
    """An eval loss that bottoms out at step 1000 and rises after (the run overfits it)."""
    return 1.0 + 0.8 * math.exp(-step / 300) + 0.25 * max(0.0, (step - 800) / 1000) ** 1.5


def _f1(step: int) -> float:
    """An F1 that rises to the end."""
    return round(0.9 - 0.3 * math.exp(-step / 400), 6)


def _state(history: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"log_history": history, "max_steps": 3000, "global_step": 3000, **fields}


def _f1_run(path: Path, *, names_best: bool = True) -> Path:
    """A fine-tune whose eval loss turns up while its eval F1 still rises; its trainer kept the
    model by F1 (``best_metric`` is the F1 at ``checkpoint-3000``)."""
    history: list[dict[str, Any]] = []
    for s in range(10, 3001, 10):
        history.append({"step": s, "loss": 0.2 + 2.0 * math.exp(-s / 600), "learning_rate": 1e-4})
        if s % 100 == 0:
            history.append({"step": s, "eval_loss": _u(s), "eval_f1": _f1(s), "eval_runtime": 1.5})
    best = {"best_metric": _f1(3000), "best_model_checkpoint": "out/checkpoint-3000"} if names_best else {}
    # named after its file: two runs written alike are two runs, not the same log twice
    path.write_text(json.dumps({**_state(history, save_steps=500, **best), "trial_name": path.stem}))
    return path


def _early_best_run(path: Path) -> Path:
    """An eval loss logged every 10 steps, best at step 40 and worse ever after; a checkpoint every
    500 steps, the trainer's best the one at 500."""
    history: list[dict[str, Any]] = []
    for s in range(10, 3001, 10):
        history.append({"step": s, "loss": 0.2 + 2.0 * math.exp(-s / 600)})
        history.append({"step": s, "eval_loss": round(0.6 + abs(s - 40) / 1000, 6)})
    best = {"best_metric": 0.6 + 460 / 1000, "best_model_checkpoint": "./results/checkpoint-500"}
    # named after its file: two runs written alike are two runs, not the same log twice
    path.write_text(json.dumps({**_state(history, save_steps=500, **best), "trial_name": path.stem}))
    return path


def _forecast_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["forecast", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# --------------------------------------------------------------------------------------------
# Reading the trainer's choice back from its state
# --------------------------------------------------------------------------------------------


def test_the_metric_is_the_eval_field_logged_at_the_best_checkpoint_with_the_best_value(
    tmp_path: Path,
) -> None:
    curve = load_curve(_f1_run(tmp_path / "trainer_state.json"))
    choice = curve.trainer
    assert choice is not None
    assert (choice.metric, choice.direction) == ("eval_f1", Direction.HIGHER)
    assert (choice.checkpoint, choice.step, choice.save_steps) == ("checkpoint-3000", 3000, 500)
    assert parse_log(tmp_path / "trainer_state.json").trainer == choice


def test_a_metric_whose_name_says_no_direction_takes_it_from_the_best_value() -> None:
    history = [{"step": s, "eval_sari": v} for s, v in ((100, 30.0), (200, 41.5), (300, 38.0))]
    up = trainer_choice({"best_metric": 41.5, "best_model_checkpoint": "o/checkpoint-200"}, history)
    assert up is not None and (up.metric, up.direction) == ("eval_sari", Direction.HIGHER)
    down = trainer_choice({"best_metric": 30.0, "best_model_checkpoint": "o/checkpoint-100"}, history)
    assert down is not None and down.direction is Direction.LOWER


def test_no_metric_is_named_when_none_or_several_match() -> None:
    history = [{"step": 200, "eval_accuracy": 0.9, "eval_f1": 0.9}, {"step": 300, "eval_accuracy": 0.8}]
    tied = trainer_choice({"best_metric": 0.9, "best_model_checkpoint": "o/checkpoint-200"}, history)
    assert tied is not None and tied.metric is None and tied.checkpoint == "checkpoint-200"
    off = trainer_choice({"best_metric": 0.5, "best_model_checkpoint": "o/checkpoint-200"}, history)
    assert off is not None and off.metric is None
    assert trainer_choice({}, history) is None


def test_the_pace_is_read_from_the_trainers_closing_summary() -> None:
    history: list[dict[str, Any]] = [{"step": s, "loss": 1.0 / s} for s in range(10, 101, 10)]
    assert trainer_choice({}, history) is None  # mid-run (a checkpoint's state): no summary
    summary = {"step": 100, "train_runtime": 400.0, "train_loss": 0.2}
    choice = trainer_choice({}, [*history, {**summary, "train_steps_per_second": 0.3}])
    assert choice is not None and choice.steps_per_second == 0.3
    choice = trainer_choice({}, [*history, summary])  # an older Trainer: step over runtime
    assert choice is not None and choice.steps_per_second == 0.25
    bad = trainer_choice({}, [*history, {"step": 100, "train_runtime": 0.0}])
    assert bad is None


def test_a_backtest_replays_a_finished_trainer_state_at_its_stated_pace(tmp_path: Path) -> None:
    """Without per-report times a back-test assumed 1 step/s, and its verdicts turned on that
    assumption (0.2 / 1 / 5 steps/s stopped 14 / 7 / 0 of 25 runs), while each finished run's
    summary said its own pace."""
    history: list[dict[str, Any]] = []
    for s in range(10, 3001, 10):
        history.append({"step": s, "loss": 0.2 + 2.0 * math.exp(-s / 600)})
    path = tmp_path / "trainer_state.json"
    closing = {"step": 3000, "train_runtime": 6000.0, "train_steps_per_second": 0.5, "train_loss": 0.4}
    path.write_text(json.dumps(_state([*history, closing])))
    for assumed in (0.2, 5.0):
        (run,), _ = load_runs([path], steps_per_second=assumed)
        assert run.timed and run.stated_pace and run.duration_s == pytest.approx((3000 - 10) / 0.5)
    path.write_text(json.dumps(_state(history)))  # no summary: the assumed pace, said so
    (run,), _ = load_runs([path], steps_per_second=5.0)
    assert not run.timed and not run.stated_pace and run.duration_s == pytest.approx((3000 - 10) / 5.0)


def test_save_steps_is_not_the_interval_of_a_run_that_saved_by_epoch() -> None:
    """``save_steps`` is stored (500, the default) under ``save_strategy="epoch"`` too: evaluations
    and the best checkpoint off its multiples say the run saved at its epochs."""
    history = [{"step": s, "eval_loss": 1.0 / s} for s in (1407, 2814, 4221)]
    state = {"save_steps": 500, "best_metric": 1.0 / 4221, "best_model_checkpoint": "m/checkpoint-4221"}
    by_epoch = trainer_choice({**state, "global_step": 5000}, history)
    assert by_epoch is not None and by_epoch.save_steps is None and by_epoch.metric == "eval_loss"
    by_steps = trainer_choice({"save_steps": 500}, [{"step": s, "eval_loss": 1.0} for s in (500, 1000, 1100)])
    assert by_steps is not None and by_steps.save_steps == 500


def test_a_best_evaluation_between_saves_names_the_metric_and_keeps_the_interval() -> None:
    """HF records the step of the best evaluation (``best_global_step``) and, when no checkpoint
    was written there, keeps an earlier save as ``best_model_checkpoint``."""
    history = [{"step": s, "eval_loss": abs(s - 1250) / 1000 + 0.5} for s in range(50, 1501, 50)]
    state = {"save_steps": 200, "global_step": 1500, "best_metric": 0.5, "best_global_step": 1250}
    choice = trainer_choice({**state, "best_model_checkpoint": "c/checkpoint-1200"}, history)
    assert choice is not None
    assert (choice.metric, choice.save_steps, choice.checkpoint, choice.step) == (
        "eval_loss",
        200,
        "checkpoint-1200",
        1200,
    )
    # the value is the evaluation's at step 1250, not checkpoint-1200's: said apart
    assert choice.evaluated_step == 1250
    kept_there = trainer_choice(
        {**state, "best_global_step": 1200, "best_model_checkpoint": "c/checkpoint-1200"}, history
    )
    assert kept_there is not None and kept_there.evaluated_step is None


def test_forecast_says_when_the_kept_checkpoints_value_is_another_steps(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """ "trainer kept checkpoint-1200 (by eval_loss 0.5)" paired a checkpoint with a value it never
    had (its own was 0.55, printed a line above as the best saved checkpoint's)."""
    history = [{"step": s, "loss": 2.0 / s**0.3} for s in range(10, 1501, 10)]
    history += [{"step": s, "eval_loss": abs(s - 1250) / 1000 + 0.5} for s in range(50, 1501, 50)]
    history.sort(key=lambda h: h["step"])
    state = {"save_steps": 200, "global_step": 1500, "max_steps": 1500, "best_metric": 0.5}
    path = tmp_path / "trainer_state.json"
    path.write_text(
        json.dumps(
            {
                **state,
                "best_global_step": 1250,
                "best_model_checkpoint": "c/checkpoint-1200",
                "log_history": history,
            }
        )
    )
    assert main(["forecast", str(path)]) == 0
    out = capsys.readouterr().out
    assert "trainer kept    checkpoint-1200 (by eval_loss 0.5, evaluated at step 1,250, between saves" in out
    got = _forecast_json(capsys, str(path))["state"]
    assert (got["trainer_best_step"], got["trainer_best_evaluated_step"]) == (1200, 1250)


def test_the_declared_metric_comes_before_the_eval_loss() -> None:
    names = ("eval_loss", "eval_f1", "eval_sari")
    assert primary_eval(names) == "eval_loss"
    assert primary_eval(names, declared="eval_f1") == "eval_f1"
    # one the run does not report, or that has no direction, is not judged
    assert primary_eval(names, declared="eval_wer") == "eval_loss"
    assert primary_eval(names, declared="eval_sari") == "eval_loss"
    assert primary_eval(names, {"eval_sari": "higher"}, declared="eval_sari") == "eval_sari"


# --------------------------------------------------------------------------------------------
# forecast
# --------------------------------------------------------------------------------------------


def test_forecast_judges_the_run_by_the_metric_its_trainer_kept_the_model_by(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    undeclared = _forecast_json(capsys, str(_f1_run(tmp_path / "a.json", names_best=False)))["state"]
    # undeclared, it is judged by its eval loss with the F1 read beside it: the F1 rose to the end
    # after the loss turned, so the run is not called overfitting, and the F1's best is named
    assert undeclared["metric"] == "eval_loss" and undeclared["task_metric"] == "eval_f1"
    assert undeclared["label"] != "overfitting" and undeclared["task_best_step"] == 3000
    log = str(_f1_run(tmp_path / "b.json"))
    state = _forecast_json(capsys, log)["state"]
    assert state["metric"] == "eval_f1" and state["label"] != "overfitting"
    assert (state["best_step"], state["trainer_best_checkpoint"], state["trainer_best_metric"]) == (
        3000,
        "checkpoint-3000",
        "eval_f1",
    )
    # --metric still picks the series forecast
    assert _forecast_json(capsys, log, "--metric", "eval_loss")["input"]["metric"] == "eval_loss"
    assert main(["forecast", log]) == 0
    out = capsys.readouterr().out
    assert "best checkpoint step 3,000 (eval_f1 0.8998" in out
    assert "trainer kept    checkpoint-3000 (by eval_f1 0.8998)" in out


def test_a_log_of_eval_metrics_alone_is_forecast_by_the_declared_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    history = [{"step": s, "eval_loss": _u(s), "eval_f1": _f1(s)} for s in range(100, 3001, 100)]
    state = _state(history, save_steps=100, best_metric=_f1(3000), best_model_checkpoint="o/checkpoint-3000")
    (tmp_path / "evals.json").write_text(json.dumps(state))
    out = _forecast_json(capsys, str(tmp_path / "evals.json"))
    assert out["input"]["metric"] == "eval_f1" and out["state"]["metric"] == "eval_f1"
    (run,) = load_runs([tmp_path / "evals.json"])[0]
    assert (run.metric, run.eval_metric) == ("eval_f1", "eval_f1")


def test_the_best_checkpoint_named_is_one_that_was_saved(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = str(_early_best_run(tmp_path / "trainer_state.json"))
    state = _forecast_json(capsys, log)["state"]
    assert (state["best_step"], state["best_value"]) == (40, pytest.approx(0.6))
    assert (state["best_saved_step"], state["best_saved_value"]) == (500, pytest.approx(1.06))
    assert (state["save_steps"], state["trainer_best_checkpoint"], state["trainer_best_step"]) == (
        500,
        "checkpoint-500",
        500,
    )
    assert main(["forecast", log]) == 0
    out = capsys.readouterr().out
    assert "best saved checkpoint step 500 (eval_loss 1.06); best evaluation at step 40 (eval_loss 0.6" in out
    assert "trainer kept    checkpoint-500 (by eval_loss 1.06)" in out
    assert "best checkpoint step 40" not in out


def test_a_log_without_a_save_interval_keeps_its_best_evaluation(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _early_best_run(tmp_path / "trainer_state.json")
    document = json.loads(path.read_text())
    for key in ("save_steps", "best_metric", "best_model_checkpoint"):
        del document[key]
    path.write_text(json.dumps(document))
    state = _forecast_json(capsys, str(path))["state"]
    assert state["best_step"] == 40 and state["best_saved_step"] is None
    assert state["trainer_best_checkpoint"] is None


# --------------------------------------------------------------------------------------------
# compare, backtest, simulate --curves
# --------------------------------------------------------------------------------------------


def test_compare_ranks_by_the_declared_metric_and_shows_saved_checkpoints(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, b = _f1_run(tmp_path / "a.json"), _early_best_run(tmp_path / "b.json")
    assert main(["compare", str(a), str(_f1_run(tmp_path / "c.json")), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {(r["metric"], r["bestStep"], r["higherIsBetter"]) for r in rows} == {("eval_f1", 3000, True)}
    assert main(["compare", str(b), str(_early_best_run(tmp_path / "d.json")), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {(r["metric"], r["bestStep"]) for r in rows} == {("eval_loss", 500)}


def test_compare_of_runs_judged_by_different_metrics_ranks_by_the_eval_metric_all_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """One run kept by its F1, one by its eval loss, both reporting their eval loss: ranked by the
    training loss they were, where a fine-tune that overfits comes first."""
    a, b = _f1_run(tmp_path / "a.json"), _early_best_run(tmp_path / "b.json")
    assert main(["compare", str(a), str(b), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["metric"] for r in rows} == {"eval_loss"}
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "ranked by eval_loss (lower is better): the runs are judged by different eval metrics" in out
    assert "eval_loss is the first every run reports" in out


def test_backtest_measures_by_the_declared_metric(tmp_path: Path) -> None:
    """The verdict and patience read the metric the trainer kept its best model by (HF's
    EarlyStopping watches it); every eval series is replayed as logged."""
    runs, _ = load_runs([_f1_run(tmp_path / "trainer_state.json")])
    (run,) = runs
    assert (run.eval_metric, run.eval_higher) == ("eval_f1", True)
    assert [name for name, _s, _v in run.other_evals] == ["eval_loss"]
    (tmp_path / "plain").mkdir()
    runs, _ = load_runs([_f1_run(tmp_path / "plain" / "trainer_state.json", names_best=False)])
    assert runs[0].eval_metric == "eval_loss"


def test_simulate_curves_replays_the_declared_metric_by_its_name(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    _f1_run(folder / "trainer_state.json")
    run = RealCurveLibrary(folder).draw(np.random.default_rng(0), 6000, 0)
    assert (run.eval_metric, run.eval_higher) == ("eval_f1", True)
    assert run.eval_observed(6000) == pytest.approx(_f1(3000))
    # the truth reads a score the right way up: rising, it still had improvement left
    assert run.remaining_improvement(1000) > 0.05 and run.remaining_improvement(5500) < 0.001


def test_a_save_interval_recorded_beside_evaluations_off_its_eval_steps_is_no_claim() -> None:
    """The state records ``save_steps`` and ``eval_steps`` (500 by default) whatever the strategies.
    Evaluations every 2,800 steps (per epoch) are off the recorded eval_steps, so the saves
    followed the epochs too: no evaluation is called "not saved", although 14,000 happens to be a
    multiple of 500. Evaluations on their recorded interval keep the save interval."""
    per_epoch = [{"step": s, "eval_loss": 1.0 - s / 1e5} for s in range(2800, 28001, 2800)]
    chosen = trainer_choice({"save_steps": 500, "eval_steps": 500, "global_step": 28000}, per_epoch)
    assert chosen is not None and chosen.save_steps is None
    by_steps = [{"step": s, "eval_loss": 1.0 - s / 1e5} for s in range(300, 3001, 300)]
    kept = trainer_choice({"save_steps": 500, "eval_steps": 300, "global_step": 3000}, by_steps)
    assert kept is not None and kept.save_steps == 500


def _overfit_run(path: Path, *, exact: bool = True) -> Path:
    """An eval loss every 100 steps, best at 1000 and rising after; a save every 200 steps; the
    state, written at the end, names checkpoint-1000. ``exact=False``: its ``best_metric`` is not
    a value the log holds (the metric it keeps by cannot be named)."""
    history: list[dict[str, Any]] = []
    for s in range(10, 1501, 10):
        history.append({"step": s, "loss": 0.5 + 1.5 * math.exp(-s / 300), "learning_rate": 1e-4})
        if s % 100 == 0:
            history.append({"step": s, "eval_loss": _u(s) + (0.01 if s == 900 else 0.0)})
    best = _u(1000) if exact else _u(1000) + 1e-4
    state = {**_state(history, save_steps=200, eval_steps=100), "max_steps": 1500, "global_step": 1500}
    state.update(best_metric=best, best_global_step=1000, best_model_checkpoint="out/checkpoint-1000")
    path.write_text(json.dumps(state))
    return path


def test_a_cut_shows_the_trainers_best_as_it_stood_at_the_cut(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``--upto-step 900`` replays what was known at step 900: the trainer's best then was the best
    of its saves up to 900 (checkpoint-800), not the checkpoint-1000 its state names at the end."""
    f = str(_overfit_run(tmp_path / "trainer_state.json"))
    doc = _forecast_json(capsys, f, "--upto-step", "900")
    state = doc["state"]
    assert state["trainer_best_checkpoint"] == "checkpoint-800" and state["trainer_best_step"] == 800
    assert state["trainer_best_value"] == pytest.approx(_u(800))
    assert any("as of step 900" in n for n in doc["input"]["notes"])
    assert main(["forecast", f, "--upto-step", "900"]) == 0
    out = capsys.readouterr().out
    assert "trainer kept    checkpoint-800" in out and "checkpoint-1000" not in out
    # past the trainer's best, or without a cut, the state's own word stands
    for argv in (("--upto-step", "1200"), ()):
        doc = _forecast_json(capsys, f, *argv)
        assert doc["state"]["trainer_best_checkpoint"] == "checkpoint-1000"


def test_a_cut_before_the_trainers_best_of_an_unnamed_metric_leaves_it_out(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    f = str(_overfit_run(tmp_path / "trainer_state.json", exact=False))
    doc = _forecast_json(capsys, f, "--upto-step", "900")
    assert doc["state"]["trainer_best_checkpoint"] is None and doc["state"]["trainer_best_step"] is None
    assert any("chosen after step 900: left out" in n for n in doc["input"]["notes"])
    assert main(["forecast", f, "--upto-step", "900"]) == 0
    assert "checkpoint-1000" not in capsys.readouterr().out
