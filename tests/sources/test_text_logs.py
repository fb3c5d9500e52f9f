"""Plain-text training logs (``advisor.sources.textlog``): lines that name their step and write
their fields as words and numbers, read through the same column names as every other format."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.sources import SourceError, load_curve
from advisor.sources.files import load_curves
from advisor.sources.textlog import is_text_log

TORCHTUNE = "\n".join(
    ["INFO: starting run"]
    + [
        f"Step {i} | loss:{3.0 - 0.1 * i:.4f} lr:{1e-6 * i:.1e} tokens_per_second_per_gpu:2210.5"
        for i in range(1, 9)
    ]
)

NANOGPT = """number of parameters: 10.65M
step 0: train loss 4.2874, val loss 4.2823
iter 0: loss 4.2654, time 12345.67ms, mfu -100.00%
iter 10: loss 3.2190, time 35.12ms, mfu 12.30%
iter 20: loss 2.9000, time 35.12ms, mfu 12.30%
iter 30: loss 2.7000, time 35.12ms, mfu 12.30%
step 40: train loss 2.6000, val loss 2.6500
iter 40: loss 2.6100, time 35.12ms, mfu 12.30%
step 80: train loss 2.4000, val loss 2.5100
"""

MEGATRON = "\n".join(
    f" iteration {100 * i:8d}/    1000 | consumed samples: {1600 * i:12d} | elapsed time per iteration (ms): "
    f"1234.5 | learning rate: 3.000E-04 | global batch size:    16 | lm loss: {8.0 - 0.5 * i:.6E} |"
    for i in range(1, 6)
)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text + "\n")
    return path


def test_a_torchtune_style_log_reads_its_steps_loss_and_learning_rate(tmp_path: Path) -> None:
    curve = load_curve(_write(tmp_path, "log_1717000000.txt", TORCHTUNE))
    assert curve.steps == tuple(float(i) for i in range(1, 9))
    assert curve.values[0] == pytest.approx(2.9) and curve.values[-1] == pytest.approx(2.2)
    assert curve.learning_rates is not None and curve.learning_rates[-1] == pytest.approx(8e-6)
    assert any("1 line of the text log" in w for w in curve.warnings)  # the banner, counted


def test_a_nanogpt_style_log_reads_the_iteration_loss_and_the_val_loss_apart(tmp_path: Path) -> None:
    path = _write(tmp_path, "train.log", NANOGPT)
    train = load_curve(path)
    assert train.steps == (0.0, 10.0, 20.0, 30.0, 40.0)
    assert train.values == pytest.approx((4.2654, 3.219, 2.9, 2.7, 2.61))
    val = load_curve(path, metric="eval_loss")
    assert val.steps == (0.0, 40.0, 80.0) and val.values == pytest.approx((4.2823, 2.65, 2.51))


def test_a_total_written_after_the_step_is_the_runs_planned_steps(tmp_path: Path) -> None:
    ((_, curve),) = load_curves(_write(tmp_path, "megatron.log", MEGATRON))
    assert curve.steps == (100.0, 200.0, 300.0, 400.0, 500.0)
    assert curve.total_steps == 1000
    # "lm loss" is its one loss: "loss scale" is mixed precision's scale factor
    assert curve.values[0] == pytest.approx(7.5) and "'lm_loss'" in curve.source
    assert curve.learning_rates is not None and curve.learning_rates[0] == pytest.approx(3e-4)


def test_text_that_names_no_steps_is_no_text_log() -> None:
    assert not is_text_log("hello\nworld\nstep 1 something\n")
    assert not is_text_log("step,loss\n10,2.3\n20,2.1\n30,2.0\n")  # a table: its rows name no step
    assert not is_text_log("step loss\n10 2.3\n20 2.1\n30 2.0\n")
    assert is_text_log(TORCHTUNE)


def test_prose_with_a_stray_step_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="not a recognised loss log"):
        load_curve(_write(tmp_path, "notes.txt", "hello\nworld\nstep 1 something"))


def _torchtune_console(steps_per_epoch: int, epochs: int) -> str:
    """What ``tune run ... > log`` writes: a banner, then per epoch one line of progress bar
    updates joined by carriage returns. Each step is drawn twice, as torchtune's recipe does:
    the bar moves on under the previous description, then gets the new one
    (``{epoch + 1}|{global step}|Loss: {loss}``)."""

    def bar(description: str, i: int) -> str:
        done = "█" * (10 * i // steps_per_epoch)
        left = steps_per_epoch - i
        times = f"[00:{i:02d}<00:{left:02d},  1.02it/s]"
        return f"\r{description}: {100 * i // steps_per_epoch:3d}%|{done:<10}| {i}/{steps_per_epoch} {times}"

    lines = ["INFO:torchtune.utils._logging:Running FullFinetuneRecipeSingleDevice with resolved config:"]
    step = 0
    for epoch in range(epochs):
        line = f"\r  0%|          | 0/{steps_per_epoch} [00:00<?, ?it/s]"
        description = ""
        for i in range(1, steps_per_epoch + 1):
            step += 1
            if description:
                line += bar(description, i)
            description = f"{epoch + 1}|{step}|Loss: {_tt_loss(step)}"
            line += bar(description, i)
        lines.append(line)
    return "\n".join(lines)


def _tt_loss(step: int) -> float:
    return round(0.9 + 1.5 * 0.97**step, 4)


def test_torchtunes_console_progress_bar_reads_its_global_step_loss_and_epoch(tmp_path: Path) -> None:
    """``1|12|Loss: 2.4475: 100%|...| 12/1600 [...]`` was refused as holding no step or loss
    field: the description's second field is the run's global step (the bar's own count restarts
    each epoch), its first the epoch from 1. A redirected bar writes its updates on one line,
    split by carriage returns, and draws each step twice: each step is read once."""
    path = _write(tmp_path, "torchtune.log", _torchtune_console(steps_per_epoch=30, epochs=2))
    curve = load_curve(path)
    assert curve.steps == tuple(float(s) for s in range(1, 61))
    assert curve.values == pytest.approx([_tt_loss(s) for s in range(1, 61)])
    assert curve.epochs == (0.0,) * 30 + (1.0,) * 30
    assert not any("duplicated" in w for w in curve.warnings)
    # one line per update, as a log that keeps each redraw on its own line
    plain = "\n".join(
        f"1|{s}|Loss: {_tt_loss(s)}: 100%|| {s}/1600 [00:01<00:00,  1.2it/s]" for s in range(1, 9)
    )
    assert load_curve(_write(tmp_path, "plain.log", plain)).steps == tuple(float(s) for s in range(1, 9))
