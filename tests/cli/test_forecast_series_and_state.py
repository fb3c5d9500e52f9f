"""``forecast`` on a fine-tune's log: the run state is the run's whichever series is shown, a
finished eval series ends where its trend stands, its warnings agree with one another, and a
folder is the run it holds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from advisor.cli import main


def _u(step: int) -> float:
    return 1.0 + 0.8 * math.exp(-step / 300) + 0.25 * max(0.0, (step - 800) / 1000) ** 1.5


_U_MINIMUM = min(range(100, 3001, 100), key=_u)


def _overfitting_log(path: Path, *, accuracy: bool = False) -> Path:
    """Training loss falls to the end; eval_loss is U-shaped (lowest at ``_U_MINIMUM``)."""
    rows = ["step,loss,eval_loss" + (",eval_accuracy" if accuracy else "")]
    for s in range(10, 3001, 10):
        loss = 0.2 + 2.0 * math.exp(-s / 600)
        cells = [str(s), f"{loss:.5f}", "", ""][: 4 if accuracy else 3]
        if s % 100 == 0:
            cells[2] = f"{_u(s):.5f}"
            if accuracy:
                cells[3] = f"{0.9 - 0.3 * math.exp(-s / 400):.5f}"
        rows.append(",".join(cells))
    path.write_text("\n".join(rows) + "\n")
    return path


def _forecast(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["forecast", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_run_state_is_the_same_whichever_series_is_shown(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = str(_overfitting_log(tmp_path / "run.csv", accuracy=True))
    states = [
        _forecast(capsys, log, "--total-steps", "10000", *metric)["state"]
        for metric in ((), ("--metric", "eval_loss"), ("--metric", "eval_accuracy"))
    ]
    assert states[0]["label"] == "overfitting"
    assert all(s["label"] == states[0]["label"] and s["best_step"] == _U_MINIMUM for s in states)
    for s in states[1:]:
        assert s["probabilities"] == pytest.approx(states[0]["probabilities"], abs=0.02)
    # the series shown names its own best beside the judged one's
    assert main(["forecast", log, "--total-steps", "10000", "--metric", "eval_accuracy"]) == 0
    out = capsys.readouterr().out
    assert f"best evaluation step {_U_MINIMUM:,} (eval_loss" in out
    assert "best by eval_accuracy step 3,000 (eval_accuracy 0.8998)" in out


def _cosine_log(path: Path) -> Path:
    """A W&B-style export cut at step 1,800 of a cosine schedule to 3,000 that it does not state:
    the training rows every 10 steps carry the learning rate and the time; eval rows, every 200
    steps, carry an eval loss and an accuracy (and the learning rate there, sparsely)."""
    rows = ["Step,train/loss,train/learning_rate,eval/loss,eval/accuracy,_runtime"]
    for s in range(10, 1801, 10):
        lr = 2e-5 * 0.5 * (1 + math.cos(math.pi * s / 3000))
        loss = 1.5 + 1.2 * (s / 10) ** -0.5
        rows.append(f"{s},{loss:.5f},{lr:.4e},,,{s / 1.6:.2f}")
        if s % 200 == 0:
            ev = 1.7 + 1.0 * (s / 10) ** -0.45
            acc = 0.72 - 0.35 * (s / 10) ** -0.4
            rows.append(f"{s},,{lr:.4e},{ev:.5f},{acc:.5f},{s / 1.6 + 0.5:.2f}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_an_eval_metric_shown_by_itself_is_the_number_the_default_view_gives_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # read from its own sparse rows, an eval metric's learning rates put the cosine's end earlier
    # (2,819 of 3,000) and its speed and final value differed from the default view's
    log = str(_cosine_log(tmp_path / "export.csv"))
    default = _forecast(capsys, log)
    assert default["input"]["implied_end"]["step"] == pytest.approx(3000, rel=0.02)
    for name, column in (("eval_accuracy", "eval/accuracy"), ("eval_loss", "eval/loss")):
        shown = _forecast(capsys, log, "--metric", column)
        assert shown["final_loss"] == pytest.approx(default["series"][name]["final_loss"], rel=1e-9)
        assert shown["plateau_probability"] == pytest.approx(default["series"][name]["plateau_probability"])
        assert shown["input"]["implied_end"] == default["input"]["implied_end"]
        assert shown["steps_per_second"] == pytest.approx(default["steps_per_second"])
        assert shown["state"]["label"] == default["state"]["label"]


def test_a_log_of_eval_metrics_alone_is_never_called_overfitting(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Overfitting is read against the training loss: without one, a U-shaped eval loss has
    stopped improving (plateaued), with its best checkpoint named."""
    rows = ["step,eval_loss"] + [f"{s},{_u(s):.5f}" for s in range(100, 3001, 100)]
    (tmp_path / "evals.csv").write_text("\n".join(rows) + "\n")
    state = _forecast(capsys, str(tmp_path / "evals.csv"), "--total-steps", "10000")["state"]
    assert state["label"] == "plateaued" and state["probabilities"]["overfitting"] == 0.0
    assert state["best_step"] == _U_MINIMUM


def test_a_finished_eval_series_ends_where_its_trend_stands(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An eval loss still falling at the run's last step: its final value is where the last
    evaluations' trend stands at that step, not their median two evaluations back."""
    rows = ["step,loss,eval_loss"]
    for s in range(10, 1501, 10):
        ev = f"{0.9 + 1.0 * math.exp(-s / 700) + 0.004 * math.sin(s / 100):.5f}" if s % 100 == 0 else ""
        rows.append(f"{s},{0.5 + 1.5 * math.exp(-s / 400):.5f},{ev}")
    (tmp_path / "run.csv").write_text("\n".join(rows) + "\n")
    out = _forecast(capsys, str(tmp_path / "run.csv"), "--total-steps", "1500")
    final = out["series"]["eval_loss"]["final_loss"]
    last = 0.9 + 1.0 * math.exp(-1500 / 700)
    assert abs(final["mean"] - last) < 0.01 * last  # the median of the last five read 2.5% above
    # the interval is what one evaluation at the end reads (the scatter of the points read about
    # their line, not the steps between evaluations): it holds the last evaluation and the curve
    # without its wiggle, and is narrower than 1%
    observed = float(rows[-1].split(",")[2])
    assert final["p10"] <= observed <= final["p90"]
    assert final["p10"] <= last <= final["p90"]
    assert final["p90"] - final["p10"] < 0.01 * last


def test_a_rising_eval_series_carries_no_warning_of_a_falling_fit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = str(_overfitting_log(tmp_path / "run.csv"))
    warnings = _forecast(capsys, log, "--total-steps", "10000")["series"]["eval_loss"]["warnings"]
    assert any(w.startswith("the series is rising") for w in warnings)
    assert not any("falls faster" in w or "LR anneals" in w for w in warnings)


def test_the_text_carries_every_eval_series_warning_the_json_has(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rows = ["step,loss,eval_loss,eval_accuracy"]
    for s in range(10, 3001, 10):
        cells = ["", ""]
        if s % 100 == 0:  # eval_loss rises and the accuracy falls from step 800 on
            turn = max(0.0, (s - 800) / 1000) ** 1.5
            cells = [f"{1.0 + 0.8 * math.exp(-s / 300) + 0.25 * turn:.5f}", f"{0.8 - 0.2 * turn:.5f}"]
        rows.append(f"{s},{0.2 + 2.0 * math.exp(-s / 600):.5f},{cells[0]},{cells[1]}")
    (tmp_path / "run.csv").write_text("\n".join(rows) + "\n")
    assert main(["forecast", str(tmp_path / "run.csv"), "--total-steps", "10000"]) == 0
    text = capsys.readouterr().out
    assert "eval_loss: the series is rising" in text
    assert "eval_accuracy: the series is falling (worsening)" in text


def test_a_folder_is_the_one_run_it_holds_and_several_are_told_apart(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    _overfitting_log(out_dir / "metrics.csv")
    assert _forecast(capsys, str(out_dir), "--total-steps", "10000")["state"]["label"] == "overfitting"
    _overfitting_log(out_dir / "other.csv", accuracy=True)  # another run (the same log is one)
    assert main(["forecast", str(out_dir)]) == 2
    err = capsys.readouterr().err
    assert "runs in it" in err and "compare" in err and len(err.strip().splitlines()) == 1


def test_progress_is_the_last_report_even_when_its_loss_went_nan(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rows = [f"{s},{2.0 / (1 + s / 100):.5f}" for s in range(10, 2901, 10)]
    rows += [f"{s},nan" for s in range(2910, 3001, 10)]
    (tmp_path / "run.csv").write_text("step,loss\n" + "\n".join(rows) + "\n")
    assert main(["forecast", str(tmp_path / "run.csv")]) == 0
    out = capsys.readouterr().out
    assert "progress        step 3,000; 290 points used, 10 dropped" in out
    # and since when the loss was lost: the forecast's last step (2,900) and the progress line's
    # (3,000) did not say it
    assert (
        "non-finite      loss non-finite in every report from step 2,910 to the last; its last finite" in out
    )
    assert _forecast(capsys, str(tmp_path / "run.csv"))["observed_nonfinite_from_step"] == 2910


def test_an_eval_series_whose_latest_evaluation_went_nan_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A run whose loss and then its eval went NaN read "eval_loss 1.611 now; final 1.57": the
    last finite evaluation as current, and an end the run is not heading for."""
    log: list[dict[str, float]] = []
    for s in range(10, 2001, 10):
        bad = s > 1400
        log.append({"step": s, "loss": math.nan if bad else 1.0 + 2.0 * math.exp(-s / 300)})
        if s % 100 == 0:
            log.append({"step": s, "eval_loss": math.nan if bad else 1.5 + 0.5 * math.exp(-s / 300)})
    f = tmp_path / "trainer_state.json"
    f.write_text(json.dumps({"global_step": 2000, "max_steps": 2000, "log_history": log}))
    assert main(["forecast", str(f)]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("  eval_loss ")]
    assert "NaN now (last finite 1.505)" in line and "final if it recovered " in line, line
    assert "run state       diverging" in out


def test_a_finished_run_says_what_its_plateau_means_and_how_its_end_went(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rows = [f"{s},{0.5 + 2.0 * math.exp(-s / 1500):.5f}" for s in range(10, 3001, 10)]
    (tmp_path / "run.csv").write_text("step,loss\n" + "\n".join(rows) + "\n")
    assert main(["forecast", str(tmp_path / "run.csv"), "--total-steps", "3000"]) == 0
    out = capsys.readouterr().out
    assert "at its end: nothing is left to improve; over its last tenth it improved by" in out
    assert main(["forecast", str(tmp_path / "run.csv"), "--total-steps", "6000"]) == 0
    assert "at its last step" not in capsys.readouterr().out


def test_a_finished_run_whose_eval_was_still_improving_is_not_read_as_stalled(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A finished run reads ``plateaued`` (nothing is left within its budget); an accuracy at its
    best at the last evaluation says the run had not stopped learning, which the label alone hid.
    An overfitting run's end (its best long before) gets no such line."""
    rows = ["step,loss,eval_accuracy"]
    for s in range(10, 3001, 10):
        acc = f"{0.9 - 0.3 * math.exp(-s / 1500):.5f}" if s % 100 == 0 else ""
        rows.append(f"{s},{0.5 + 2.0 * math.exp(-s / 1500):.5f},{acc}")
    (tmp_path / "run.csv").write_text("\n".join(rows) + "\n")
    assert main(["forecast", str(tmp_path / "run.csv"), "--total-steps", "3000"]) == 0
    out = capsys.readouterr().out
    assert "run state       finished, improving (label plateaued: nothing is left within its budget)" in out
    assert "at its end, not stalled: eval_accuracy was at its best at the last evaluation" in out
    # the JSON says it too (a dashboard reading "plateaued" alone reads "more steps would not help")
    assert main(["forecast", str(tmp_path / "run.csv"), "--total-steps", "3000", "--json"]) == 0
    state = json.loads(capsys.readouterr().out)["state"]
    assert state["label"] == "plateaued"
    assert state["ended"] and state["improving_at_end"]
    assert state["reading"] == "finished, improving"
    assert any("not stalled" in w for w in state["warnings"])
    log = _overfitting_log(tmp_path / "u.csv")
    assert main(["forecast", str(log), "--total-steps", "3000"]) == 0
    assert "not stalled" not in capsys.readouterr().out
    assert main(["forecast", str(log), "--total-steps", "3000", "--json"]) == 0
    state = json.loads(capsys.readouterr().out)["state"]
    assert state["ended"] and not state["improving_at_end"]
    assert state["reading"] == state["label"] == "overfitting"


def test_a_score_heading_past_the_top_of_its_scale_gets_a_band_not_a_point(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rows = [f"{s},{0.5 + 0.00015 * s:.4f}" for s in range(100, 3001, 100)]  # 0.515 .. 0.95, straight
    (tmp_path / "acc.csv").write_text("step,eval_accuracy\n" + "\n".join(rows) + "\n")
    final = _forecast(capsys, str(tmp_path / "acc.csv"))["final_loss"]
    assert final["p90"] <= 1.0 and final["p10"] < 0.96  # it was "1 (80%: 1 .. 1)"


def test_a_finished_flat_but_noisy_run_is_said_level_not_worse(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import numpy as np

    rng = np.random.default_rng(3)
    rows = [f"{s},{0.1 * (1 + 0.16 * rng.standard_normal()):.5f}" for s in range(10, 1501, 10)]
    (tmp_path / "run.csv").write_text("step,loss\n" + "\n".join(rows) + "\n")
    assert main(["forecast", str(tmp_path / "run.csv"), "--total-steps", "1500"]) == 0
    assert "over its last tenth it stayed level (within the noise of its reports)" in capsys.readouterr().out


def test_an_eval_metric_is_not_forecast_to_drop_at_epoch_boundaries(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Epoch boundaries drop a training loss, not an eval metric: a log of eval_accuracy alone,
    flat at 0.92 with an epoch column, is forecast flat (it was "learning" to 0.934)."""
    rows = ["step,epoch,eval_accuracy"] + [
        f"{s},{s / 1000:.3f},{0.92 - 0.3 * math.exp(-s / 300):.5f}" for s in range(100, 3001, 100)
    ]
    (tmp_path / "acc.csv").write_text("\n".join(rows) + "\n")
    out = _forecast(capsys, str(tmp_path / "acc.csv"), "--total-steps", "6000")
    assert not any("epoch boundary" in w for w in out["warnings"])
    assert out["final_loss"]["mean"] == pytest.approx(0.92, abs=0.004)
    assert out["state"]["label"] == "plateaued"


def test_a_log_of_many_eval_metrics_shows_its_summaries_and_names_the_rest(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A token classifier logs precision, recall and F1 per label and its overall scores last: the
    first eight eval metrics were shown and the rest, eval_overall_f1 among them, dropped unsaid.
    The primary metric and the summaries come first, and a note names those not shown."""
    labels = [f"eval_t{k:03d}_{m}" for k in range(4) for m in ("f1", "precision", "recall")]
    names = ["eval_loss", *labels, "eval_overall_f1", "eval_overall_accuracy"]
    history: list[dict[str, float]] = []
    for s in range(10, 2001, 10):
        history.append({"step": s, "loss": 0.3 + 2 * math.exp(-s / 500)})
        if s % 200 == 0:
            score = 0.9 - 0.4 * math.exp(-s / 600)
            history.append({"step": s, **{n: (1.5 - score) if n == "eval_loss" else score for n in names}})
    log = tmp_path / "trainer_state.json"
    log.write_text(json.dumps({"log_history": history, "max_steps": 2000, "global_step": 2000}))
    data = _forecast(capsys, str(log))
    shown = [n for n in data["series"] if n != "loss"]
    assert shown[:3] == ["eval_loss", "eval_overall_f1", "eval_overall_accuracy"]
    assert len(shown) == 8
    left = labels[5:]
    assert data["input"]["eval_metrics_not_shown"] == left
    note = f"7 more eval metrics not shown ({', '.join(left[:4])}, ...); --metric NAME forecasts one"
    assert note in data["input"]["notes"]
    assert main(["forecast", str(log)]) == 0
    out = capsys.readouterr().out
    assert f"  note            {note}" in out
    assert "  eval_overall_f1 " in out


def test_an_eval_metrics_forecast_names_the_runs_last_step_not_its_last_evaluation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--metric eval_accuracy`` on a log that states no total: the note's hint is the run's last
    step (its training loss's, 3,000), not its last evaluation's (2,500; an ML engineer was told to
    pass --total-steps 2500 for a run at step 3,300), and it speaks of the metric's final value, not
    of a final loss; --total-steps below the run's last step is refused as it is for the loss."""
    path = _overfitting_log(tmp_path / "run.csv", accuracy=True)
    rows = path.read_text().splitlines()
    # evaluations stop at step 2,500; the training loss is logged to 3,000
    kept = [r if int(r.split(",")[0]) <= 2500 else ",".join([*r.split(",")[:2], "", ""]) for r in rows[1:]]
    path.write_text("\n".join([rows[0], *kept]) + "\n")
    assert main(["forecast", str(path), "--metric", "eval_accuracy"]) == 0
    out = capsys.readouterr().out
    assert "the final eval_accuracy is the asymptote" in out
    assert "--total-steps 3000 (its last step)" in out and "--total-steps 2500" not in out
    assert main(["forecast", str(path), "--metric", "eval_accuracy", "--total-steps", "2800"]) == 2
    assert "below the last step in the file (3,000)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "columns", [("eval_mmlu_accuracy", "eval_squad_loss"), ("eval_squad_loss", "eval_mmlu_accuracy")]
)
def test_a_table_is_judged_by_its_first_logged_eval_metric_whatever_its_column_order(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, columns: tuple[str, str]
) -> None:
    """Two eval sets, no eval_loss: squad's loss from step 200, mmlu's accuracy only from 1,400.
    The run is judged by the one logged first, as its history (and its trainer_state.json) keeps
    them; an alphabetical header had judged it by mmlu's."""
    rows = [f"step,loss,{','.join(columns)}"]
    for s in range(20, 2001, 20):
        cells = {"eval_squad_loss": "", "eval_mmlu_accuracy": ""}
        if s % 200 == 0:
            cells["eval_squad_loss"] = f"{0.9 + 0.6 * math.exp(-s / 500):.5f}"
            if s >= 1400:
                cells["eval_mmlu_accuracy"] = f"{0.56 - 0.00002 * s:.5f}"
        rows.append(f"{s},{0.3 + math.exp(-s / 400):.5f},{cells[columns[0]]},{cells[columns[1]]}")
    log = tmp_path / "multi.csv"
    log.write_text("\n".join(rows) + "\n")
    out = _forecast(capsys, str(log), "--total-steps", "4000")
    assert out["state"]["metric"] == "eval_squad_loss"
    assert [n for n in out["series"] if n != "loss"] == ["eval_squad_loss", "eval_mmlu_accuracy"]


def test_a_lightning_logs_val_columns_are_said_to_be_read_as_eval_series(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Lightning's ``val_loss`` and ``val_acc`` are shown as ``eval_loss`` and ``eval_acc`` (the
    JSON's series keys): one warning line says so, in the text and in JSON ``input.warnings``; a log
    whose columns are named ``eval_*`` already gets none."""
    rows = ["epoch,step,train_loss_step,val_acc,val_loss"]
    for s in range(49, 3000, 50):
        rows.append(f"{s // 390},{s},{0.2 + 2.0 * math.exp(-s / 600):.5f},,")
        if (s + 1) % 390 == 0 or s == 2999:
            rows.append(f"{s // 390},{s},,{0.9 - 0.3 * math.exp(-s / 400):.4f},{_u(s):.4f}")
    path = tmp_path / "metrics.csv"
    path.write_text("\n".join(rows) + "\n")
    line = "the file's val_acc, val_loss read as eval_acc, eval_loss"
    assert main(["forecast", str(path)]) == 0
    out = capsys.readouterr().out
    said = [text for text in out.splitlines() if line in text]
    assert len(said) == 1 and said[0].startswith(f"    - {line}")  # one line, among the warnings
    doc = _forecast(capsys, str(path))
    assert set(doc["series"]) == {"loss", "eval_loss", "eval_acc"}
    assert sum(line in w for w in doc["input"]["warnings"]) == 1
    doc = _forecast(capsys, str(_overfitting_log(tmp_path / "hf.csv", accuracy=True)))
    assert not any("read as" in w for w in doc["input"]["warnings"])


def test_an_eval_column_whose_name_says_no_direction_is_named_as_ignored(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A misspelt eval_acuracy column was dropped without a word: the forecast read as if it had
    weighed the run's accuracy. A note names the column and the spelling it likely meant, the
    JSON lists it among the eval metrics not shown; the evaluation's own timings stay unsaid."""
    rows = ["step,loss,eval_acuracy,eval_runtime"] + [
        f"{s},{0.3 + 2 * math.exp(-s / 300):.5f},{0.9 - 0.4 * math.exp(-s / 300):.5f},12.5"
        for s in range(0, 1000, 10)
    ]
    (tmp_path / "run.csv").write_text("\n".join(rows) + "\n")
    data = _forecast(capsys, str(tmp_path / "run.csv"))
    note = "column eval_acuracy ignored: its name gives no direction (did you mean eval_accuracy?)"
    assert note in data["input"]["notes"]
    assert data["input"]["eval_metrics_not_shown"] == ["eval_acuracy"]
    assert list(data["series"]) == ["loss"]
    assert not any("runtime" in n for n in data["input"]["notes"])
    assert main(["forecast", str(tmp_path / "run.csv")]) == 0
    assert f"  note            {note}" in capsys.readouterr().out
