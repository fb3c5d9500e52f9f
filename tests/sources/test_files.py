"""Every loss-log format loads into the same LoadedCurve, with sparse columns aligned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.sources import LoadedCurve, SourceError, load_curve

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_csv_with_train_and_sparse_val_loss_ms_time_and_total_steps() -> None:
    curve = load_curve(FIXTURES / "run.csv")
    assert curve.metric == "loss"
    assert len(curve) == 61
    assert curve.steps[:3] == (0.0, 20.0, 40.0)
    assert curve.values[:2] == (4.1508, 3.6996)
    assert curve.times is not None and curve.times[1] == pytest.approx(16.0)  # train_time_ms -> seconds
    assert curve.learning_rates is not None and curve.learning_rates[0] == pytest.approx(2e-4)
    assert curve.epochs is None
    assert curve.total_steps == 2000
    assert curve.warnings == ()
    assert "CSV run.csv" in curve.source and "'train_loss'" in curve.source


def test_csv_eval_loss_keeps_only_rows_that_have_it() -> None:
    curve = load_curve(FIXTURES / "run.csv", metric="eval_loss")
    assert curve.metric == "eval_loss"
    assert curve.steps == tuple(float(s) for s in range(0, 1201, 200))
    assert curve.times is not None and len(curve.times) == len(curve.steps)


def test_tsv_with_plain_seconds_learning_rate_and_epoch() -> None:
    curve = load_curve(FIXTURES / "run.tsv")
    reference = load_curve(FIXTURES / "run.csv")
    assert curve.steps == reference.steps and curve.values == reference.values
    assert curve.epochs is not None and curve.epochs[-1] == pytest.approx(1.5)
    assert curve.total_steps is None
    assert "TSV" in curve.source


def test_jsonl_with_logger_style_keys_and_hms_elapsed_time() -> None:
    curve = load_curve(FIXTURES / "run.jsonl")
    reference = load_curve(FIXTURES / "run.csv")
    assert curve.steps == reference.steps and curve.values == reference.values
    assert curve.total_steps == 2000
    assert curve.times is not None
    assert curve.times[-1] == pytest.approx(reference.times[-1] if reference.times else 0, abs=1.0)
    assert curve.learning_rates is not None and curve.epochs is not None


def test_trainer_state_train_loss_skips_eval_and_summary_entries() -> None:
    curve = load_curve(FIXTURES / "trainer_state.json")
    assert curve.metric == "loss"
    assert len(curve) == 60  # one train entry every 20 steps from 20 to 1200
    assert curve.total_steps == 2000  # max_steps
    assert curve.times is None  # log_history carries no wall time
    assert curve.learning_rates is not None and curve.epochs is not None
    assert "trainer_state.json" in curve.source


def test_trainer_state_eval_loss_gets_the_learning_rate_of_its_step() -> None:
    curve = load_curve(FIXTURES / "trainer_state.json", metric="eval_loss")
    train = load_curve(FIXTURES / "trainer_state.json")
    assert curve.steps == tuple(float(s) for s in range(200, 1201, 200))
    assert curve.learning_rates is not None and train.learning_rates is not None
    by_step = dict(zip(train.steps, train.learning_rates, strict=True))
    assert curve.learning_rates == tuple(by_step[s] for s in curve.steps)
    # logged on the training rows and on no eval row, as HF does: aligned, and nothing to warn of
    assert not any("learning_rate missing" in w for w in curve.warnings)


def test_a_rate_missing_on_some_points_of_a_series_is_warned_of(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    path.write_text("step,loss,lr\n10,2.0,0.1\n20,1.8,\n30,1.7,0.1\n40,1.6,0.1\n")
    assert any("learning_rate missing on 1 of 4 points" in w for w in load_curve(path).warnings)


def test_trainer_state_summary_train_loss_is_not_a_training_point(tmp_path: Path) -> None:
    state = {
        "max_steps": 10,
        "log_history": [
            {"step": 5, "loss": 2.0, "learning_rate": 1e-4, "epoch": 0.5},
            {"step": 10, "loss": 1.5, "learning_rate": 0.0, "epoch": 1.0},
            {"step": 10, "train_loss": 1.75, "train_runtime": 12.0, "epoch": 1.0},
        ],
    }
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(state))
    curve = load_curve(path)
    assert curve.values == (2.0, 1.5)


def test_headerless_csv_is_read_positionally_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "plain.csv"
    path.write_text("0,3.0,0.0\n10,2.5,5.0\n20,2.2,10.0\n")
    curve = load_curve(path)
    assert curve.values == (3.0, 2.5, 2.2) and curve.times == (0.0, 5.0, 10.0)
    assert any("no header" in w for w in curve.warnings)


def test_whitespace_separated_table_with_comments(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_text(
        "# produced by a training script\nstep  loss   lr\n0     3.0    1e-3\n\n10    2.5    1e-3\n"
    )
    curve = load_curve(path)
    assert curve.steps == (0.0, 10.0) and curve.learning_rates == (1e-3, 1e-3)


def test_json_array_of_records(tmp_path: Path) -> None:
    path = tmp_path / "log.json"
    path.write_text(
        json.dumps([{"global_step": 1, "train/loss": 2.0}, {"global_step": 2, "train/loss": 1.9}])
    )
    assert load_curve(path).values == (2.0, 1.9)


def test_single_line_jsonl_is_not_mistaken_for_a_trainer_state(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text('{"step": 3, "loss": 1.0}\n')
    assert load_curve(path).steps == (3.0,)


def test_nan_and_inf_losses_are_kept_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "diverged.csv"
    path.write_text("step,loss\n0,3.0\n10,nan\n20,inf\n")
    curve = load_curve(path)
    assert len(curve) == 3
    assert any("2 non-finite" in w for w in curve.warnings)


def test_restarts_are_kept_in_file_order_and_segmented(tmp_path: Path) -> None:
    path = tmp_path / "restart.csv"
    path.write_text("step,loss\n0,3.0\n10,2.8\n20,2.6\n10,2.7\n20,2.55\n30,2.5\n")
    curve = load_curve(path)
    assert curve.steps == (0.0, 10.0, 20.0, 10.0, 20.0, 30.0)
    assert curve.as_curve().segments == (0, 3)
    assert any("backwards 1 time" in w for w in curve.warnings)


def test_a_step_counted_within_each_epoch_is_read_as_the_runs_step(tmp_path: Path) -> None:
    # a training loop's "epoch, iteration, loss": the iteration starts again at each epoch
    path = tmp_path / "loop.csv"
    rows = [f"{e},{i},{3.0 - 0.1 * e - 0.01 * i}" for e in range(3) for i in (10, 20, 30)]
    path.write_text("epoch,iteration,loss\n" + "\n".join(rows) + "\n")
    curve = load_curve(path)
    assert curve.steps == (10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0)
    assert curve.as_curve().segments == (0,)
    assert not any("backwards" in w for w in curve.warnings)
    assert any("starts again at each epoch" in w for w in curve.warnings)


def test_a_step_counted_from_0_within_each_epoch_leaves_no_two_reports_at_one_step(tmp_path: Path) -> None:
    # iterations 0 .. 29 logged every 10: an epoch is 30 iterations, not the 20 of its largest count
    path = tmp_path / "loop0.csv"
    rows = [f"{e},{i},{3.0 - 0.1 * e - 0.01 * i}" for e in range(3) for i in (0, 10, 20)]
    path.write_text("epoch,iteration,loss\n" + "\n".join(rows) + "\n")
    curve = load_curve(path)
    assert curve.steps == (0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0)


def test_a_step_going_back_with_its_epoch_is_still_a_restart(tmp_path: Path) -> None:
    # resumed from the checkpoint at the end of epoch 1: the step and the epoch both go back
    path = tmp_path / "resumed.csv"
    path.write_text("epoch,step,loss\n0,10,3.0\n1,20,2.8\n2,30,2.6\n1,20,2.7\n2,30,2.55\n")
    curve = load_curve(path)
    assert curve.steps == (10.0, 20.0, 30.0, 20.0, 30.0)
    assert any("backwards 1 time" in w for w in curve.warnings)


def test_multi_curve_file_needs_a_choice(tmp_path: Path) -> None:
    path = tmp_path / "many.csv"
    path.write_text("curve_id,step,val_loss\n1,0,3.0\n1,10,2.0\n2,0,4.0\n2,10,3.5\n2,20,3.0\n")
    curve = load_curve(path, curve_id="2")
    assert curve.values == (4.0, 3.5, 3.0) and curve.metric == "eval_loss"


def test_upto_is_the_prefix_until_the_step_is_first_passed() -> None:
    curve = LoadedCurve(
        steps=(0, 10, 20, 10, 20, 30), values=(6, 5, 4, 4.5, 3.9, 3.5), times=(0, 1, 2, 3, 4, 5)
    )
    cut = curve.upto(15)
    assert cut.steps == (0, 10) and cut.times == (0, 1)
    assert curve.upto(1e9) == curve
    assert len(curve.upto(-1)) == 0


def test_missing_optional_values_are_filled_from_neighbours(tmp_path: Path) -> None:
    path = tmp_path / "gaps.csv"
    path.write_text("step,loss,lr\n0,3.0,\n10,2.8,1e-3\n20,2.6,\n30,2.5,5e-4\n")
    curve = load_curve(path)
    assert curve.learning_rates == (1e-3, 1e-3, 1e-3, 5e-4)
    assert any("missing on 2 of 4" in w for w in curve.warnings)


@pytest.mark.parametrize("name", ["elapsed_s", "elapsed_seconds"])
def test_an_elapsed_seconds_column_is_the_time(tmp_path: Path, name: str) -> None:
    path = tmp_path / "log.csv"
    path.write_text(f"step,loss,{name}\n10,2.0,20\n20,1.5,40\n30,1.2,60\n")
    curve = load_curve(path)
    assert curve.times == (20.0, 40.0, 60.0)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_an_epoch_milliseconds_time_column_is_read_as_ms_and_said(tmp_path: Path, suffix: str) -> None:
    # MLflow and many loggers write ``timestamp`` in epoch ms: read as seconds, 10 steps took 5,000 s
    rows = [(step, 2.5 - step / 100, 1_733_300_000_000 + 500 * step) for step in range(0, 60, 10)]
    path = tmp_path / f"log{suffix}"
    if suffix == ".csv":
        path.write_text("step,loss,timestamp\n" + "".join(f"{s},{v},{t}\n" for s, v, t in rows))
    else:
        lines = [json.dumps({"step": s, "loss": v, "timestamp": t}) for s, v, t in rows]
        path.write_text("\n".join(lines) + "\n")
    curve = load_curve(path)
    assert curve.times is not None
    assert curve.times[1] - curve.times[0] == pytest.approx(5.0)
    assert curve.times[0] == pytest.approx(1_733_300_000.0)
    assert "time 'timestamp' (ms)" in curve.source
    assert any("epoch milliseconds" in w for w in curve.warnings)


def test_epoch_seconds_and_elapsed_times_stay_seconds(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_text("step,loss,timestamp\n0,2.0,1733300000\n10,1.5,1733300005\n")
    curve = load_curve(path)
    assert curve.times == (1733300000.0, 1733300005.0)
    assert not any("milliseconds" in w for w in curve.warnings)


def test_a_json_file_that_is_one_number_says_so(tmp_path: Path) -> None:
    from advisor.sources import SourceError

    path = tmp_path / "run.json"
    path.write_text("42\n")
    with pytest.raises(SourceError, match="the file is a single JSON number"):
        load_curve(path)


def test_a_per_epoch_log_without_steps_counts_epochs_completed(tmp_path: Path) -> None:
    """Keras's CSVLogger writes one row per epoch, numbered from 0, and no step column."""
    path = tmp_path / "training.log"
    path.write_text(
        "epoch,accuracy,loss,val_accuracy,val_loss\n0,0.5,1.2,0.5,1.3\n1,0.6,0.9,0.6,1.0\n2,0.7,0.8,0.6,1.1\n"
    )
    curve = load_curve(path)
    assert curve.steps == (1.0, 2.0, 3.0) and curve.values == (1.2, 0.9, 0.8)
    assert curve.epochs is None  # every point would be an epoch boundary
    assert any("step axis is the epoch column, 'epoch' + 1" in w for w in curve.warnings)
    assert load_curve(path, metric="eval_loss").steps == (1.0, 2.0, 3.0)


def test_fractional_epochs_without_steps_are_the_step_axis_as_they_are(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"epoch": 0.5, "loss": 2.0}\n{"epoch": 1.0, "loss": 1.5}\n')
    curve = load_curve(path)
    assert curve.steps == (0.5, 1.0)
    assert any("the step axis is the epoch column, 'epoch' (epochs completed)" in w for w in curve.warnings)


@pytest.mark.parametrize("step_column", ["train/global_step", "trainer/global_step", "global_step"])
@pytest.mark.parametrize("with_row_counter", [True, False])
def test_a_wandb_export_takes_the_trainer_step_not_the_row_counter(
    tmp_path: Path, step_column: str, with_row_counter: bool
) -> None:
    """W&B's ``_step`` counts logged rows (a training row and an eval row each count one); the
    trainer's own step beside it (HF logs ``train/global_step``, Lightning ``trainer/global_step``)
    is the step. ``_runtime`` is the time, ``eval/loss`` the eval loss, ``eval/accuracy`` a score."""
    from advisor.series import Direction, direction_of
    from advisor.sources.metric_choice import eval_metrics

    header = [step_column, "train/loss", "eval/loss", "eval/accuracy", "train/learning_rate", "_runtime"]
    rows = []
    for step in range(10, 401, 10):
        rows.append([step, 2.0 - step / 1000, "", "", 1e-4, 0.7 * step])
        if step % 100 == 0:
            rows.append([step, "", 2.1 - step / 1000, 0.5 + step / 1000, "", 0.7 * step + 1])
    if with_row_counter:
        header = ["_step", *header]
        rows = [[i, *row] for i, row in enumerate(rows)]
    path = tmp_path / "wandb_export.csv"
    path.write_text("\n".join(",".join(str(c) for c in r) for r in [header, *rows]) + "\n")

    curve = load_curve(path)
    assert curve.metric == "loss" and f"step '{step_column}'" in curve.source
    assert curve.steps[:3] == (10.0, 20.0, 30.0) and curve.steps[-1] == 400.0
    assert curve.times is not None and curve.times[-1] == pytest.approx(280.0)  # _runtime, seconds
    evals = load_curve(path, metric="eval_loss")
    assert evals.metric == "eval_loss" and evals.steps == (100.0, 200.0, 300.0, 400.0)
    assert eval_metrics(curve.columns) == ["eval_loss", "eval_accuracy"]
    accuracy = load_curve(path, metric="eval_accuracy")
    assert accuracy.steps == evals.steps and direction_of(accuracy.metric) is Direction.HIGHER


@pytest.mark.parametrize(
    ("lr_columns", "read"),
    [
        (["lr-AdamW"], "lr-AdamW"),
        (["lr-SGD", "lr-SGD-momentum"], "lr-SGD"),
        (["lr-Adam/pg2", "lr-Adam/pg1"], "lr-Adam/pg1"),
        (["lr-Adam-1", "lr-Adam"], "lr-Adam"),
        (["trainer/lr-AdamW"], "trainer/lr-AdamW"),
    ],
)
def test_a_lightning_learning_rate_monitor_column_is_the_learning_rate(
    tmp_path: Path, lr_columns: list[str], read: str
) -> None:
    # LearningRateMonitor names its column after the optimizer: lr-<Optimizer>[-<n>][/pg<n>]; with
    # several, the first optimizer's first param group is the one read
    path = tmp_path / "metrics.csv"
    rates = {name: 1e-3 if name == read else 5e-2 for name in lr_columns}
    row = ",".join(str(rates[name]) for name in lr_columns)
    path.write_text(f"step,train_loss_step,{','.join(lr_columns)}\n10,2.0,{row}\n20,1.8,{row}\n")
    curve = load_curve(path)
    assert curve.learning_rates == (1e-3, 1e-3)
    assert f"learning_rate '{read}'" in curve.source


def test_a_learning_rate_column_comes_before_a_lightning_monitor_column(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,loss,lr-AdamW,learning_rate\n10,2.0,0.5,1e-3\n20,1.8,0.5,1e-3\n")
    assert load_curve(path).learning_rates == (1e-3, 1e-3)


def test_the_wandb_row_counter_is_the_step_of_a_file_with_no_other(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_text("_step,loss\n0,2.0\n1,1.9\n2,1.8\n")
    assert load_curve(path).steps == (0.0, 1.0, 2.0)


def test_a_table_with_only_an_eval_score_is_read_for_it_and_names_it_when_asked_for_a_loss(
    tmp_path: Path,
) -> None:
    from advisor.sources import SourceError

    path = tmp_path / "acc.csv"
    path.write_text("step,eval_accuracy,eval_runtime\n100,0.5,3\n200,0.6,3\n")
    curve = load_curve(path, metric="eval_accuracy")
    assert curve.metric == "eval_accuracy" and curve.values == (0.5, 0.6)
    with pytest.raises(SourceError) as caught:
        load_curve(path)
    assert caught.value.series == ("eval_accuracy",) and "no loss field" in caught.value.reason


def test_a_tensorboard_scalar_export_is_read_by_the_tag_in_its_name(tmp_path: Path) -> None:
    """TensorBoard's CSV export (``Wall time,Step,Value``) names its series only in the file name."""
    rows = "".join(f"{1.7e9 + 5 * s:.3f},{s},{2.0 / (1 + s / 100):.5f}\n" for s in range(10, 1001, 10))
    plain = tmp_path / "scalars.csv"
    plain.write_text("Wall time,Step,Value\n" + rows)
    curve = load_curve(plain)
    assert curve.metric == "loss" and len(curve) == 100 and curve.times is not None
    assert any("names no tag" in w for w in curve.warnings)  # read as the training loss, said so
    tagged = tmp_path / "run-lr1e-4-tag-eval_loss.csv"
    tagged.write_text("Wall time,Step,Value\n" + rows)
    assert load_curve(tagged).metric == "eval_loss"
    assert not any("names no tag" in w for w in load_curve(tagged).warnings)
    # PyTorch SummaryWriter's tags: Loss/train and Loss/val
    for tag, metric in (("Loss_train", "loss"), ("Loss_val", "eval_loss")):
        named = tmp_path / f"run-a-tag-{tag}.csv"
        named.write_text("Wall time,Step,Value\n" + rows)
        assert load_curve(named).metric == metric


def test_a_wandb_panel_export_of_one_run_is_read_and_of_several_is_one_clear_error(tmp_path: Path) -> None:
    head = '"Step","lr3e-5 - train/loss","lr3e-5 - train/loss__MIN","lr3e-5 - train/loss__MAX"\n'
    rows = "".join(f"{s},{2.0 / s:.5f},{2.0 / s:.5f},{2.0 / s:.5f}\n" for s in range(10, 1001, 10))
    panel = tmp_path / "panel.csv"
    panel.write_text(head + rows)
    curve = load_curve(panel)
    assert curve.metric == "loss" and curve.values[0] == pytest.approx(0.2)
    panel.write_text('"Step","a - train/loss","b - train/loss"\n10,1.0,2.0\n20,0.9,1.9\n')
    with pytest.raises(SourceError, match=r"a W&B panel export of 2 runs \(a, b\)"):
        load_curve(panel)


def test_a_tensorboard_json_download_is_read_as_its_csv_download(tmp_path: Path) -> None:
    """TensorBoard's JSON download of a tag: ``[[wall time, step, value], ...]``, the tag in the
    file's name, as its CSV download."""
    rows = [[1_700_000_000.0 + 5 * i, 10 * i, 3.0 - 0.01 * i] for i in range(50)]
    (tmp_path / "run-exp-tag-eval_loss.json").write_text(json.dumps(rows))
    (tmp_path / "run-exp-tag-eval_loss.csv").write_text(
        "Wall time,Step,Value\n" + "".join(f"{t},{s},{v}\n" for t, s, v in rows)
    )
    from_json = load_curve(tmp_path / "run-exp-tag-eval_loss.json")
    from_csv = load_curve(tmp_path / "run-exp-tag-eval_loss.csv")
    assert from_json.metric == from_csv.metric == "eval_loss"
    assert from_json.steps == from_csv.steps and from_json.values == from_csv.values
    assert from_json.times == from_csv.times


def test_a_trainers_console_lines_are_read_with_the_count_of_training_logs_as_the_step(
    tmp_path: Path,
) -> None:
    """Hugging Face's Trainer prints its logs as Python dicts (single quotes, ``nan``) without a
    step: the count of training logs at each epoch stands for it, and its closing summary (the
    run's mean ``train_loss``) is no point of the curve."""
    lines = [
        "{'loss': 2.4652, 'grad_norm': 1.3, 'learning_rate': 2e-05, 'epoch': 0.5}",
        "{'loss': 2.1, 'grad_norm': 1.3, 'learning_rate': 1.8e-05, 'epoch': 1.0}",
        "{'eval_loss': 2.2, 'eval_runtime': 5.1, 'epoch': 1.0}",
        "{'loss': 1.9, 'grad_norm': nan, 'learning_rate': 1.5e-05, 'epoch': 1.5}",
        "{'loss': 1.8, 'grad_norm': 1.1, 'learning_rate': 1.2e-05, 'epoch': 2.0}",
        "{'eval_loss': 2.0, 'eval_runtime': 5.1, 'epoch': 2.0}",
        "{'train_runtime': 100.0, 'train_samples_per_second': 10.0, 'train_loss': 2.1, 'epoch': 2.0}",
    ]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n")
    train = load_curve(tmp_path / "console.log")
    assert train.steps == (1.0, 2.0, 3.0, 4.0) and train.values == (2.4652, 2.1, 1.9, 1.8)
    assert any("Python dicts" in w for w in train.warnings)
    evals = load_curve(tmp_path / "console.log", metric="eval_loss")
    assert evals.steps == (2.0, 4.0) and evals.values == (2.2, 2.0)
    # the summary is printed once, when the run has ended: its last step is its total (read as a
    # run still going, it was forecast to its curves' asymptote and ranked best of a sweep)
    assert train.total_steps == 4 and any("closing summary says the run ended" in w for w in train.warnings)
    (tmp_path / "going.log").write_text("\n".join(lines[:-1]) + "\n")
    assert load_curve(tmp_path / "going.log").total_steps is None


def test_a_console_logs_other_output_is_skipped_and_counted(tmp_path: Path) -> None:
    """``python train.py > train.log`` holds more than the Trainer's dicts: progress bars (some
    with a dict printed after them on the same line), warnings and the script's prints. They are
    skipped and counted, and the dicts read as they would be alone; a JSONL log with a broken line
    in its middle is still an error."""
    dicts = [
        "{'loss': 2.4652, 'learning_rate': 2e-05, 'epoch': 0.5}",
        "{'loss': 2.1, 'learning_rate': 1.8e-05, 'epoch': 1.0}",
        "{'loss': 1.9, 'learning_rate': 1.5e-05, 'epoch': 1.5}",
        "{'loss': 1.8, 'learning_rate': 1.2e-05, 'epoch': 2.0}",
    ]
    noisy = [
        "[INFO|modeling_utils.py:4890] loading weights",
        dicts[0],
        "[WARNING|trainer.py:123] some warning",
        "  5%|5         | 50/900 [01:33<26:34, 0.06it/s]",
        dicts[1],
        " 10%|#         | 90/900 [02:40<25:00, 0.06it/s]" + dicts[2],
        "Saving model checkpoint to out/checkpoint-90",
        dicts[3],
    ]
    (tmp_path / "clean.log").write_text("\n".join(dicts) + "\n")
    (tmp_path / "train.log").write_text("\n".join(noisy) + "\n")
    clean, read = load_curve(tmp_path / "clean.log"), load_curve(tmp_path / "train.log")
    assert read.steps == clean.steps == (1.0, 2.0, 3.0, 4.0)
    assert read.values == clean.values == (2.4652, 2.1, 1.9, 1.8)
    assert any("4 lines of console output holding no log record" in w for w in read.warnings)
    assert not any("console output" in w for w in clean.warnings)
    (tmp_path / "broken.jsonl").write_text('{"step": 1, "loss": 2.0}\nnot json\n{"step": 2, "loss": 1.9}\n')
    with pytest.raises(SourceError, match=r"broken.jsonl:2: invalid JSON"):
        load_curve(tmp_path / "broken.jsonl")


def test_a_console_logs_best_checkpoint_is_named_in_its_units(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A console log's steps count its training logs: its best checkpoint is named as a training
    log, with how to find its checkpoint ("step 150" named checkpoint-150 where the run had saved
    checkpoint-1500)."""
    from advisor.cli import main

    lines = []
    for log in range(1, 101):
        epoch = log / 10
        lines.append(f"{{'loss': {2.0 * 0.98**log:.4f}, 'learning_rate': 2e-05, 'epoch': {epoch}}}")
        if log % 10 == 0:
            lines.append(f"{{'eval_loss': {0.5 + 0.02 * abs(log - 60) / 10:.4f}, 'epoch': {epoch}}}")
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n")
    assert main(["forecast", str(tmp_path / "console.log")]) == 0
    out = capsys.readouterr().out
    assert "best evaluation training log 60 (eval_loss 0.5" in out
    assert "in training logs, not steps: its step is 60 x logging_steps" in out


def test_a_batch_counter_within_each_epoch_is_the_runs_step_and_a_batch_size_is_not(tmp_path: Path) -> None:
    # a training loop's "epoch, batch, loss": the batch counts within the epoch
    loop = tmp_path / "loop.csv"
    rows = [f"{e},{b},{3.0 - 0.1 * e - 0.01 * b}" for e in range(3) for b in (50, 100, 150, 200)]
    loop.write_text("epoch,batch,loss\n" + "\n".join(rows) + "\n")
    curve = load_curve(loop)
    assert curve.steps == tuple(float(50 * i) for i in range(1, 13))
    # a constant "batch" is a batch size: the per-epoch log's epochs stay its axis
    sized = tmp_path / "sized.csv"
    sized.write_text("epoch,batch,loss\n1,32,2.9\n2,32,2.7\n3,32,2.6\n")
    assert load_curve(sized).steps == (1.0, 2.0, 3.0)
    # and without an epoch column a "batch" column says nothing of the step
    alone = tmp_path / "alone.csv"
    alone.write_text("batch,loss\n10,2.9\n20,2.7\n")
    with pytest.raises(SourceError, match="no step field"):
        load_curve(alone)
