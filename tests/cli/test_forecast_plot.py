"""``forecast --plot``: the data the figure draws (its lines, band and legend), not its pixels.
The path drawn must agree with the printed forecast; scores in [0, 1] get a linear panel of their
own; every series its own colour, every legend entry once, nothing outside the figure."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from advisor.commands import forecast as command
from advisor.commands.forecast_plot import build_figure


def _parsed(*argv: str) -> Any:
    import argparse

    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    return command.ForecastRequest.from_args(parser.parse_args(["forecast", *argv]))


def _labels(ax: Any) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def _overfitting_csv(path: Path) -> Path:
    """A Lightning-style log of an eval loss that turns up at epoch 6 and an accuracy that levels."""
    rows = ["step,train_loss,val_loss,val_acc"]
    for ep in range(20):
        for k in range(1, 10):
            rows.append(f"{50 * ep + 5 * k - 1},{1.5 * math.exp(-(50 * ep + 5 * k) / 300) + 0.05:.4f},,")
        vl = 0.6 + 0.5 * math.exp(-ep / 2) + (0.03 * (ep - 6) if ep > 6 else 0)
        rows.append(f"{50 * (ep + 1) - 1},,{vl:.4f},{0.9 - 0.1 * math.exp(-ep / 2):.4f}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_an_eval_loss_plot_draws_the_printed_forecast_from_the_current_level(tmp_path: Path) -> None:
    """The path of an eval loss past its minimum ends at the printed final value and interval,
    starts where the series stands, and its band never leaves them (it jumped from 0.93 to 1.40
    after the last point, with a band of 1.12..1.55 at the end beside a printed 0.93..1.375); the
    forecast series is not drawn a second time as an eval series (each legend entry once)."""
    import matplotlib.pyplot as plt

    f = _overfitting_csv(tmp_path / "metrics.csv")
    outcome = command.compute(
        _parsed(str(f), "--metric", "eval_loss", "--total-steps", "2000", "--plot", str(tmp_path / "p.png"))
    )
    fc = outcome.forecast
    assert fc.current_loss is not None and fc.final_loss.mean > fc.current_loss  # it turned up
    now, final = fc.current_loss, fc.final_loss
    fig = build_figure(outcome)
    try:
        ax = fig.axes[0]
        labels = _labels(ax)
        assert len(labels) == len(set(labels)), labels
        assert labels.count("final eval_loss at step 2,000 (p10..p90)") == 1
        (mean,) = [line for line in ax.get_lines() if line.get_label() == "forecast mean"]
        xs, ys = list(mean.get_xdata()), list(mean.get_ydata())
        assert (xs[0], ys[0]) == (fc.last_step, now) and (xs[-1], ys[-1]) == (2000, final.mean)
        assert all(now - 1e-12 <= y <= final.mean + 1e-12 for y in ys)
        (band,) = [c for c in ax.collections if c.get_label() == "forecast, 80% interval"]
        vertices = band.get_paths()[0].vertices
        assert min(vertices[:, 1]) >= min(now, final.p10) - 1e-12
        assert max(vertices[:, 1]) <= max(now, final.p90) + 1e-12
        at_end = sorted({round(float(y), 12) for x, y in vertices if x == 2000})
        assert at_end == [round(final.p10, 12), round(final.p90, 12)]
    finally:
        plt.close(fig)


def _many_evals(path: Path, last: int = 9000, total: int = 9000) -> Path:
    """A trainer_state.json with a training loss, an eval loss and five scores in [0, 1]."""
    log: list[dict[str, float]] = []
    for step in range(100, last + 1, 100):
        log.append({"step": step, "loss": 2.0 * math.exp(-step / 1500) + 0.01, "learning_rate": 1e-4})
        if step % 1000 == 0:
            e: dict[str, float] = {"step": step, "eval_loss": 0.5 + abs(step - 3000) / 8000}
            for i, name in enumerate(("accuracy", "f1", "precision", "recall", "t005_f1")):
                e[f"eval_{name}"] = min(1.0, 0.4 + 0.08 * i + 0.3 * (1 - math.exp(-step / 2000)))
            log.append(e)
    path.write_text(json.dumps({"global_step": last, "max_steps": total, "log_history": log}))
    return path


def test_scores_get_a_linear_panel_distinct_colours_and_nothing_is_clipped(tmp_path: Path) -> None:
    """Accuracy, F1, precision... are drawn on a linear panel of their own, not on the loss's log
    axis; no two series share a colour; the axis labels and legends lie inside the figure."""
    import matplotlib.pyplot as plt

    f = _many_evals(tmp_path / "trainer_state.json")
    outcome = command.compute(_parsed(str(f), "--plot", str(tmp_path / "p.png")))
    fig = build_figure(outcome)
    try:
        loss_ax, score_ax = fig.axes
        assert loss_ax.get_yscale() == "log" and score_ax.get_yscale() == "linear"
        scores = {f"observed eval_{n}" for n in ("accuracy", "f1", "precision", "recall", "t005_f1")}
        assert {line.get_label() for line in score_ax.get_lines()} >= scores
        assert not scores & {line.get_label() for line in loss_ax.get_lines()}
        observed = [
            line for a in fig.axes for line in a.get_lines() if str(line.get_label()).startswith("observed ")
        ]
        colours = [line.get_color() for line in observed if line.get_label() != "observed, rolling median"]
        assert len(colours) == len(set(colours)) == 7, colours
        for a in fig.axes:
            labels = _labels(a)
            assert len(labels) == len(set(labels)), labels
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        box = fig.bbox
        for artist in [a.yaxis.label for a in fig.axes] + [a.get_legend() for a in fig.axes]:
            extent = artist.get_window_extent(renderer)
            assert box.x0 - 1 <= extent.x0 and extent.x1 <= box.x1 + 1, artist
            assert box.y0 - 1 <= extent.y0 and extent.y1 <= box.y1 + 1, artist
    finally:
        plt.close(fig)


@pytest.mark.parametrize(("last", "shown"), [(8900, False), (6000, True)])
def test_a_forecast_path_too_short_to_see_is_not_in_the_legend(
    tmp_path: Path, last: int, shown: bool
) -> None:
    """A run 99% done has a path of a few pixels under its final value's marker: it is not drawn,
    nor named in the legend as a line nobody can find; a run with a stretch ahead shows it."""
    import matplotlib.pyplot as plt

    f = _many_evals(tmp_path / "trainer_state.json", last=last)
    fig = build_figure(command.compute(_parsed(str(f), "--plot", str(tmp_path / "p.png"))))
    try:
        labels = _labels(fig.axes[0])
        assert ("forecast mean" in labels) is shown, labels
        assert "final loss at step 9,000 (p10..p90)" in labels
    finally:
        plt.close(fig)


def test_a_training_loss_alone_has_its_run_state_in_the_title(tmp_path: Path) -> None:
    """A diverging run's plot says so in its title, as a fine-tune's says it overfits."""
    import matplotlib.pyplot as plt

    rows = [f"{i},{2.0 / (1 + i / 20)}" for i in range(1, 150)] + [
        f"{i},{0.5 * 1.1 ** (i - 150)}" for i in range(150, 200)
    ]
    f = tmp_path / "d.csv"
    f.write_text("step,loss\n" + "\n".join(rows) + "\n")
    fig = build_figure(command.compute(_parsed(str(f), "--plot", str(tmp_path / "p.png"))))
    try:
        assert "run state: diverging" in fig.axes[0].get_title()
    finally:
        plt.close(fig)
