"""``trainjob-advisor forecast`` on every file format, as JSON, with a plot, and on bad input."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from advisor.cli import main
from advisor.model import Forecast

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(["forecast", *argv])
    except SystemExit as exc:  # a usage error caught by argparse
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", ["run.csv", "run.tsv", "run.jsonl", "trainer_state.json"])
def test_each_format_gives_a_summary(capsys: pytest.CaptureFixture[str], name: str) -> None:
    code, out, err = run(capsys, str(FIXTURES / name))
    assert code == 0, err
    assert out.startswith("trainjob-advisor forecast: ")
    assert "step 1,200 of 2,000 (60%)" in out or (name == "run.tsv" and "step 1,200;" in out)
    assert "final loss" in out and "(80%: " in out
    assert "plateau         P = " in out and "divergence      P = " in out


def test_a_diverging_run_says_its_final_value_assumes_a_recovery(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rows = [f"{i},{2.0 / (1 + i / 20)}" for i in range(1, 150)] + [
        f"{i},{0.5 * 1.1 ** (i - 150)}" for i in range(150, 200)
    ]
    (tmp_path / "d.csv").write_text("step,loss\n" + "\n".join(rows) + "\n")
    code, out, _ = run(capsys, str(tmp_path / "d.csv"))
    assert code == 0 and "the run is diverging" in out and "if it recovered" in out
    # the JSON says it beside final_loss (a dashboard on --json showed the recovered end alone)
    code, out, _ = run(capsys, str(tmp_path / "d.csv"), "--json")
    caution = json.loads(out)["caution"]
    assert code == 0 and "final value (final_loss) is where it would end if it recovered" in caution
    code, out, _ = run(capsys, str(FIXTURES / "run.csv"))
    assert code == 0 and "the run is diverging" not in out
    code, out, _ = run(capsys, str(FIXTURES / "run.csv"), "--json")
    assert "caution" not in json.loads(out)


def test_summary_has_an_eta_when_times_and_total_are_known(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(FIXTURES / "run.csv"))
    assert code == 0
    eta = next(line for line in out.splitlines() if line.strip().startswith("ETA"))
    assert "steps/s" in eta and "n/a" not in eta


def test_summary_explains_a_missing_eta(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, str(FIXTURES / "trainer_state.json"))
    assert "ETA             n/a (a trainer_state.json logs no timestamps)" in out


def test_a_missing_eta_with_a_known_total_says_a_speed_is_missing_not_the_total(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "one.csv").write_text("step,loss,time\n0,5.8,0\n10,5.7,5\n")
    _, out, _ = run(capsys, str(tmp_path / "one.csv"), "--upto-step", "5", "--total-steps", "4000")
    eta = next(line for line in out.splitlines() if line.strip().startswith("ETA"))
    assert "no speed yet from 1 timed report(s)" in eta and "total steps unknown" not in eta


def test_a_run_without_a_total_says_when_its_learning_rate_decay_ends_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """No total reported, a cosine decay under way: the forecast reads the run to the decay's end,
    and so does the ETA line, said as the inference it is ("n/a (... the decay ends it in about
    12m)" read as a contradiction); the JSON carries it as ``input.implied_end``, its top-level
    ``eta_seconds`` the contract's (None without a total). The note says where the run ends
    instead of asking for a total the output had found."""
    rows = ["step,loss,learning_rate,time"]
    for s in range(20, 2001, 20):
        lr = 3e-4 * 0.5 * (1 + math.cos(math.pi * s / 4000))
        rows.append(f"{s},{2.0 + 2.0 * (s / 20) ** -0.5:.5f},{lr:.6e},{s / 2.5:.1f}")
    (tmp_path / "cosine.csv").write_text("\n".join(rows) + "\n")
    _, out, _ = run(capsys, str(tmp_path / "cosine.csv"))
    eta = next(line for line in out.splitlines() if line.strip().startswith("ETA"))
    assert eta.split()[1:3] == ["about", "13m"], eta
    said = re.search(
        r"to step ([\d,]+), where the learning rate's decay ends \(no total steps reported\)", eta
    )
    assert said is not None and int(said.group(1).replace(",", "")) == pytest.approx(4000, rel=0.02), eta
    note = next(line for line in out.splitlines() if line.strip().startswith("note"))
    assert f"decay ends the run at about step {said.group(1)}" in note and "pass --total-steps" not in note
    _, out, _ = run(capsys, str(tmp_path / "cosine.csv"), "--json")
    data = json.loads(out)
    assert data["eta_seconds"] is None and data["input"]["total_steps"] is None
    assert data["input"]["implied_end"]["step"] == int(said.group(1).replace(",", ""))
    assert data["input"]["implied_end"]["eta_seconds"] == pytest.approx(2000 / 2.5, rel=0.05)


def test_a_run_whose_learning_rate_reached_zero_at_its_last_report_is_said_to_have_ended(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A linear decay that reaches zero at the file's last step: the run is over, and the note says
    so instead of asking "if the run has ended, pass --total-steps"."""
    rows = ["step,loss,learning_rate"]
    for s in range(50, 5001, 50):
        rows.append(f"{s},{0.5 + 2.0 * (s / 50) ** -0.5:.5f},{1e-4 * (1 - s / 5000):.6e}")
    (tmp_path / "linear.csv").write_text("\n".join(rows) + "\n")
    _, out, _ = run(capsys, str(tmp_path / "linear.csv"))
    note = next(line for line in out.splitlines() if line.strip().startswith("note"))
    assert "reached zero at the file's last step (5,000), so the run ended there" in note, note
    assert "pass --total-steps" not in out


def test_a_run_state_read_off_even_odds_says_there_is_no_trend_yet(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """One point read "run state learning (learning 0.50, plateaued 0.50 ...)" as a verdict; it
    says there is no trend yet, as its P(plateau) line does. Three points hold one."""
    (tmp_path / "one.csv").write_text("step,loss\n10,2.3\n")
    _, out, _ = run(capsys, str(tmp_path / "one.csv"))
    state = next(line for line in out.splitlines() if line.strip().startswith("run state"))
    assert "(1 point, no trend yet: learning 0.50" in state, state
    # one point is counted in the singular wherever the text counts it (it read "1 points of 'loss'")
    assert "1 points" not in out and "point(s)" not in out.split("  warnings")[0], out
    assert "1 point of 'loss'" in out and "1 point used" in out, out
    (tmp_path / "three.csv").write_text("step,loss\n10,2.3\n20,2.1\n30,2.0\n")
    _, out, _ = run(capsys, str(tmp_path / "three.csv"))
    state = next(line for line in out.splitlines() if line.strip().startswith("run state"))
    assert "no trend yet" not in state, state


def test_a_log_of_an_eval_loss_alone_past_its_minimum_is_a_stopped_run_not_a_divergence(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """With no training loss beside it, a U-shaped eval loss is judged as the eval series it is:
    stopped, with its best checkpoint named, not "diverging" (which is a training loss's)."""
    rows = [f"{s},{0.9 + 0.5 * ((s - 1500) / 1500) ** 2:.4f}" for s in range(250, 4001, 250)]
    (tmp_path / "e.csv").write_text("step,eval_loss\n" + "\n".join(rows) + "\n")
    code, out, err = run(capsys, str(tmp_path / "e.csv"), "--total-steps", "6000")
    assert code == 0, err
    assert "the run is diverging" not in out and "divergence      P = 0.00" in out, out
    assert "run state       plateaued" in out or "run state       overfitting" in out, out
    assert "best evaluation step 1,500" in out
    assert sum(line.strip().startswith("eval_loss ") for line in out.splitlines()) == 0  # no repeat
    code, out, _ = run(capsys, str(tmp_path / "e.csv"), "--total-steps", "6000", "--json")
    data = json.loads(out)
    assert data["state"]["label"] in ("plateaued", "overfitting") and list(data["series"]) == ["eval_loss"]
    assert data["state"]["probabilities"]["diverging"] == 0.0


def test_json_mirrors_the_forecast_fields(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(FIXTURES / "run.csv"), "--json")
    assert code == 0, err
    document = json.loads(out)
    assert {f.name for f in dataclasses.fields(Forecast)} <= document.keys()
    final = document["final_loss"]
    assert final["p10"] <= final["mean"] <= final["p90"]
    assert 0.0 <= document["plateau_probability"] <= 1.0
    assert 0.0 <= document["divergence_probability"] <= 1.0
    assert set(document["eta_seconds"]) == {"mean", "p10", "p90"}
    assert document["total_steps"] == 2000 and document["n_points"] > 0
    assert document["input"]["metric"] == "loss" and document["input"]["has_times"] is True
    assert "observed_final_loss" not in document


def test_total_steps_option_overrides_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, str(FIXTURES / "run.csv"), "--json", "--total-steps", "5000")
    assert json.loads(out)["total_steps"] == 5000


def test_upto_step_replays_an_earlier_forecast_and_shows_the_outcome(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(
        capsys, str(FIXTURES / "run.csv"), "--upto-step", "400", "--total-steps", "1200", "--json"
    )
    assert code == 0
    document = json.loads(out)
    assert document["input"]["last_step"] == 400.0 and document["last_step"] == 400.0
    assert document["observed_final_loss"] == pytest.approx(1.9 + 2.6 * 1230**-0.45 * 4, rel=0.03)


def test_eval_loss_metric_from_a_trainer_state(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(FIXTURES / "trainer_state.json"), "--metric", "eval_loss", "--json")
    assert code == 0
    document = json.loads(out)
    assert document["input"]["metric"] == "eval_loss" and document["input"]["points"] == 6


def test_an_upto_step_past_the_files_end_says_every_point_is_used(capsys: pytest.CaptureFixture[str]) -> None:
    """It was accepted silently: the forecast read as made at the step asked for."""
    code, out, _ = run(capsys, str(FIXTURES / "run.csv"), "--upto-step", "10000000")
    assert code == 0 and "--upto-step 10,000,000 is past the file's last step" in out
    assert "every point used" in out
    code, out, _ = run(capsys, str(FIXTURES / "run.csv"), "--upto-step", "600")
    assert code == 0 and "past the file's last step" not in out


def test_a_cut_of_a_log_without_a_total_says_its_end_is_hindsight(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Forecast to the file's last step, which a live run that reports no total would not know."""
    rows = [f"{s},{1.0 + 2.0 / (1 + s / 100):.5f}" for s in range(10, 4001, 10)]
    (tmp_path / "run.csv").write_text("step,loss\n" + "\n".join(rows) + "\n")
    code, out, _ = run(capsys, str(tmp_path / "run.csv"), "--upto-step", "1000")
    assert code == 0 and "total steps taken from the file's last step (4,000): hindsight" in out


def test_a_cut_of_an_export_taken_mid_run_is_read_to_where_its_learning_rate_decay_ends(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A JSONL export stopped at step 6,000 of a cosine schedule to 20,000: the cut was read to
    6,000 as the run's total, and the file's last loss printed as the observed end of a run that
    had not ended. The decay says where it ends; the note says so, and no observed end is shown."""
    lines = []
    for s in range(20, 6001, 20):
        lr = 3e-4 * (s / 500 if s < 500 else 0.5 * (1 + math.cos(math.pi * (s - 500) / 19_500)))
        loss = 2.9 + 4.6 * (1 + s / 300) ** -0.5
        lines.append(json.dumps({"step": s, "loss": round(loss, 4), "lr": lr, "time": round(0.31 * s, 3)}))
    (tmp_path / "loop.jsonl").write_text("\n".join(lines) + "\n")
    code, out, _ = run(capsys, str(tmp_path / "loop.jsonl"), "--upto-step", "3000")
    assert code == 0
    assert "hindsight" not in out and "observed end    " not in out
    assert "decay in the file ends the run at about step 20,000" in out
    assert "step 3,000 of 20,000 (15%)" in out
    code, out, _ = run(capsys, str(tmp_path / "loop.jsonl"), "--upto-step", "3000", "--json")
    doc = json.loads(out)
    assert doc["total_steps"] == 20_000 and doc.get("observed_final_loss") is None


def test_plot_writes_a_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "forecast.png"
    code, out, err = run(capsys, str(FIXTURES / "run.csv"), "--upto-step", "600", "--plot", str(target))
    assert code == 0, err
    assert target.read_bytes()[:8] == PNG_MAGIC
    assert target.stat().st_size > 10_000
    assert f"plot            {target}" in out


def test_plot_without_total_steps_draws_the_asymptote(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "asymptote.png"
    code, _, err = run(capsys, str(FIXTURES / "run.tsv"), "--plot", str(target))
    assert code == 0, err
    assert target.read_bytes()[:8] == PNG_MAGIC


def test_demo_needs_no_file_and_compares_with_the_hidden_end(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--demo")
    assert code == 0, err
    assert "demo: synthetic cosine run" in out
    assert "observed end" in out
    assert "step 1,200 of 3,000 (40%)" in out


def test_the_demo_end_is_inside_its_interval_on_held_out_seeds() -> None:
    # through the console script, at the demo's own cut (40% of the run), on seeds no constant was
    # chosen on: the demo's hidden end falls inside the 80% interval about as often as promised
    # (measured over seeds 100-129: 24 of 30; 9 of 30 when the demo's annealing drop was a fixed
    # amount of loss, larger than anything a constant-LR run could still gain)
    script = Path(sys.executable).parent / "trainjob-advisor"
    inside = 0
    seeds = range(100, 110)
    for seed in seeds:
        done = subprocess.run(
            [str(script), "forecast", "--demo", "--seed", str(seed), "--json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        fl = out["final_loss"]
        inside += fl["p10"] <= out["observed_final_loss"] <= fl["p90"]
    assert inside >= 7, f"{inside} of {len(seeds)} inside"


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("trainjob-advisor forecast: error: ")
    return lines[0]


def test_a_bad_file_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("step,loss\n0,3.0\n10,oops\n")
    code, out, err = run(capsys, str(path))
    assert code == 2 and out == ""
    assert f"{path}:3: column 'loss': 'oops' is not a number" in _one_error_line(err)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "give a FILE or --demo"),
        (("x.csv", "--demo"), "give a FILE or --demo"),
        (("{missing}",), "no such file"),
        (("{fixture}", "--total-steps", "0"), "--total-steps: must be 1 or more"),
        (("{fixture}", "--total-steps", "10"), "--total-steps 10 is below the last step in the file (20)"),
        (("--demo", "--seed", "-1"), "--seed: must be 0 or more, got -1"),
        (("{fixture}", "--upto-step", "-5"), "--upto-step must be a non-negative number"),
        (("{fixture}", "--metric", "eval_loss"), "no evaluation-loss field"),
        (("{fixture}", "--plot", "/nonexistent-dir/out.png"), "cannot write plot"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: tuple[str, ...], message: str
) -> None:
    fixture = tmp_path / "t.tsv"
    fixture.write_text("step\tloss\n10\t3.0\n20\t2.9\n")
    filled = [a.format(missing=tmp_path / "missing.csv", fixture=fixture) for a in argv]
    code, _, err = run(capsys, *filled)
    assert code == 2
    assert message in _one_error_line(err)


def test_upto_step_before_the_first_point(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, str(FIXTURES / "trainer_state.json"), "--upto-step", "5")
    assert code == 2
    assert "no points at or before step 5 (first step 20)" in _one_error_line(err)


def test_the_console_script_runs_and_the_cli_imports_no_matplotlib() -> None:
    code = (
        "import sys\n"
        "from advisor.cli import build_parser\n"
        "build_parser()\n"
        "print(sorted(m for m in ('matplotlib', 'kopf', 'kubernetes') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
    done = subprocess.run(
        [sys.executable, "-m", "advisor", "forecast", str(FIXTURES / "run.jsonl"), "--json"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["input"]["metric"] == "loss"


def test_plot_draws_the_path_on_a_log_axis_when_the_loss_spans_decades(tmp_path: Path) -> None:
    from advisor.commands.forecast_plot import _wants_log

    assert _wants_log((3.0, 1.0, 0.05))
    assert not _wants_log((3.0, 2.0, 1.5))
    assert not _wants_log((1.0, -0.2))  # a loss that goes negative has no log axis
    assert _wants_log((2.0, 268.0, 0.0))  # a blow-up, with an interval cut at the loss's floor
    assert not _wants_log((2.0, 3.0, 0.0))


def test_an_interval_reaching_zero_does_not_pull_the_axis_down_to_it(tmp_path: Path) -> None:
    """A training loss's band cut near 0 put the plot on a log axis down to 1e-3, the data in its
    top third: the band's low edge is no value the axis must show."""
    import matplotlib.pyplot as plt

    from advisor.commands import forecast as command
    from advisor.commands.forecast_plot import build_figure

    rng = np.random.default_rng(0)
    loss = [0.12 + 2.48 * math.exp(-0.003 * s) + 0.02 * rng.standard_normal() for s in range(10, 801, 10)]
    rows = [f"{s},{v:.4f},{5e-5 * (1 - s / 1200):.6g}" for s, v in zip(range(10, 801, 10), loss, strict=True)]
    (tmp_path / "r.csv").write_text("step,loss,learning_rate\n" + "\n".join(rows) + "\n")
    outcome = command.compute(
        _parsed(str(tmp_path / "r.csv"), "--total-steps", "1200", "--plot", str(tmp_path / "r.png"))
    )
    assert outcome.forecast.final_loss.p10 < 0.05  # the band reaches (about) zero
    fig = build_figure(outcome)
    try:
        ax = fig.axes[0]
        lowest = min(v for v in outcome.curve.values if v > 0)
        assert ax.get_yscale() == "linear" or ax.get_ylim()[0] >= 0.4 * lowest, ax.get_ylim()
    finally:
        plt.close(fig)


def test_a_plot_marks_where_the_loss_went_non_finite(tmp_path: Path) -> None:
    """A run whose loss is NaN from step 150 on: its plot ticks each non-finite report on the step
    axis and draws where the NaN stretch began (it showed a normal forecast and nothing else)."""
    import matplotlib.pyplot as plt

    from advisor.commands import forecast as command
    from advisor.commands.forecast_plot import build_figure

    rows = [f"{i},{2.0 / (1 + i / 20)}" for i in range(1, 150)] + [f"{i},nan" for i in range(150, 180)]
    (tmp_path / "n.csv").write_text("step,loss\n" + "\n".join(rows) + "\n")
    fig = build_figure(command.compute(_parsed(str(tmp_path / "n.csv"), "--plot", str(tmp_path / "p.png"))))
    try:
        (ax,) = fig.axes
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "non-finite loss (30 reports)" in labels, labels
        assert "non-finite from step 150 to the end" in labels, labels
    finally:
        plt.close(fig)


def test_a_hung_runs_plot_marks_its_stuck_step_and_for_how_long(tmp_path: Path) -> None:
    """A run whose reports went on at one step for two hours: its plot marks that step and says how
    long (the axis is steps, so the stall drew as one point beside a normal forecast)."""
    import matplotlib.pyplot as plt

    from advisor.commands import forecast as command
    from advisor.commands.forecast_plot import build_figure

    rows = [f"{i},{2.0 / (1 + i / 20):.5f},{5.0 * i}" for i in range(1, 200)]
    rows += [f"199,{2.0 / (1 + 199 / 20):.5f},{5.0 * 199 + 60.0 * k}" for k in range(1, 121)]
    (tmp_path / "h.csv").write_text("step,loss,time\n" + "\n".join(rows) + "\n")
    outcome = command.compute(_parsed(str(tmp_path / "h.csv"), "--plot", str(tmp_path / "p.png")))
    assert outcome.state is not None and outcome.state.label == "hung"
    fig = build_figure(outcome)
    try:
        (ax,) = fig.axes
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "stuck at step 199: no advance for 2h 00m of reports" in labels, labels
    finally:
        plt.close(fig)


def test_a_diverging_runs_plot_says_its_forecast_assumes_a_recovery(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    from advisor.commands import forecast as command
    from advisor.commands.forecast_plot import build_figure

    rows = [f"{i},{2.0 / (1 + i / 20)}" for i in range(1, 150)] + [
        f"{i},{0.5 * 1.1 ** (i - 150)}" for i in range(150, 200)
    ]
    (tmp_path / "d.csv").write_text("step,loss\n" + "\n".join(rows) + "\n")
    fig = build_figure(command.compute(_parsed(str(tmp_path / "d.csv"), "--plot", str(tmp_path / "p.png"))))
    try:
        (ax,) = fig.axes
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "forecast mean if it recovered" in labels and ax.get_yscale() == "log", labels
    finally:
        plt.close(fig)
    path = tmp_path / "decay.csv"
    path.write_text(
        "step,loss\n" + "".join(f"{s},{3.0 * 0.5 ** (s / 150):.6g}\n" for s in range(10, 3001, 10))
    )
    out = tmp_path / "p.png"
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "trainjob-advisor"),
            "forecast",
            str(path),
            "--upto-step",
            "1200",
            "--plot",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert f"plot            {out.resolve()}" in done.stdout  # the path actually written
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_a_failed_forecast_still_writes_its_plot_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nan.csv"
    path.write_text("step,loss\n" + "".join(f"{i},nan\n" for i in range(1, 20)))
    out = tmp_path / "f.png"
    code, stdout, err = run(capsys, str(path), "--plot", str(out))
    assert code == 2 and stdout == ""
    assert "no forecast" in err and f"plot written to {out.resolve()}" in err
    assert out.read_bytes()[:8] == PNG_MAGIC


def _trainer_state(path: Path, *, evals: bool, save_steps: int | None = None) -> Path:
    """A fine-tune whose training loss falls while its eval loss turns up after step 600."""
    import math

    log: list[dict[str, float]] = []
    for step in range(10, 2001, 10):
        log.append(
            {
                "step": step,
                "epoch": step / 1000,
                "loss": 0.3 + 2.0 * math.exp(-step / 400),
                "learning_rate": 1e-4,
            }
        )
        if evals and step % 100 == 0:
            log.append(
                {"step": step, "epoch": step / 1000, "eval_loss": 0.5 + 0.25 * ((step - 600) / 600) ** 2}
            )
    saves = {"save_steps": save_steps} if save_steps is not None else {}
    path.write_text(json.dumps({"global_step": 2000, "max_steps": 2000, "log_history": log, **saves}))
    return path


def test_a_trainer_state_with_evals_forecasts_each_series_and_prints_the_run_state(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    f = str(_trainer_state(tmp_path / "trainer_state.json", evals=True))
    code, out, _ = run(capsys, f, "--upto-step", "1500")
    assert code == 0 and "run state       overfitting" in out and "best evaluation step 600" in out
    code, out, _ = run(capsys, f, "--upto-step", "1500", "--json")
    doc = json.loads(out)
    assert doc["state"]["label"] == "overfitting" and doc["state"]["best_step"] == 600
    assert set(doc["state"]["probabilities"]) == {"learning", "plateaued", "overfitting", "diverging", "hung"}
    assert set(doc["series"]) == {"loss", "eval_loss"}
    assert (
        doc["series"]["loss"]["final_loss"] == doc["final_loss"]
    )  # today's top-level fields: the default series
    eval_fc = doc["series"]["eval_loss"]
    assert eval_fc["final_loss"]["mean"] >= eval_fc["current_loss"] and eval_fc["plateau_probability"] > 0.9


def test_every_eval_metric_with_a_direction_is_forecast_and_a_score_stays_on_its_scale(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A classifier's trainer_state: eval_loss, eval_accuracy (rising fast early), eval_runtime
    (no direction: not a series). Each judged series is forecast; an accuracy never ends above 1."""
    import math

    log: list[dict[str, float]] = []
    for step in range(10, 3001, 10):
        log.append({"step": step, "loss": 0.2 + 2.0 * math.exp(-step / 500), "learning_rate": 1e-4})
        if step % 100 == 0:
            acc = 0.95 - 0.5 * math.exp(-step / 300)
            log.append(
                {
                    "step": step,
                    "eval_loss": 0.3 + math.exp(-step / 400),
                    "eval_accuracy": acc,
                    "eval_runtime": 3.2,
                }
            )
    f = tmp_path / "trainer_state.json"
    f.write_text(json.dumps({"global_step": 3000, "max_steps": 3000, "log_history": log}))
    code, out, _ = run(capsys, str(f), "--upto-step", "400", "--json")
    doc = json.loads(out)
    assert code == 0 and set(doc["series"]) == {"loss", "eval_loss", "eval_accuracy"}
    acc_fc = doc["series"]["eval_accuracy"]["final_loss"]
    assert acc_fc["p90"] <= 1.0 and acc_fc["mean"] <= 1.0
    assert doc["state"]["metric"] == "eval_loss"  # the primary eval metric, as the controller's
    # each series says which way it improves
    assert {k: v["direction"] for k, v in doc["series"].items()} == {
        "loss": "lower",
        "eval_loss": "lower",
        "eval_accuracy": "higher",
    }
    code, _, err = run(capsys, str(f), "--metric", "eval_runtime")
    assert code == 2 and "eval_runtime" in err


def test_the_plot_shows_the_eval_series_its_forecast_and_the_best_checkpoint(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    from advisor.commands import forecast as command
    from advisor.commands.forecast_plot import build_figure
    from advisor.sources.files import load_curve

    f = _trainer_state(tmp_path / "trainer_state.json", evals=True)
    args = _parsed(str(f), "--upto-step", "1500", "--plot", str(tmp_path / "p.png"))
    outcome = command.compute(args)
    fig = build_figure(outcome)
    try:
        (ax,) = fig.axes
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "observed eval_loss" in labels
        assert "final eval_loss at step 2,000 (p10..p90)" in labels
        assert any(t.startswith("best eval_loss 0.5 at step 600") for t in labels), labels
        assert "run state: overfitting" in ax.get_title()
        drawn = next(line for line in ax.get_lines() if line.get_label() == "observed eval_loss")
        evals = load_curve(str(f), metric="eval_loss").upto(1500)
        assert list(drawn.get_xdata()) == list(evals.steps)  # the points the forecast saw, no more
        # ... and the later ones apart, as the training loss's are
        later = next(
            line for line in ax.get_lines() if line.get_label() == "eval_loss after the cut (not seen)"
        )
        whole = load_curve(str(f), metric="eval_loss")
        assert list(later.get_xdata()) == [s for s in whole.steps if s > 1500]
        assert [round(x) for x in ax.lines[-1].get_xdata()] == [600]  # the star at the best step
    finally:
        plt.close(fig)
    code = main(["forecast", str(f), "--upto-step", "1500", "--plot", str(tmp_path / "p.png")])
    assert code == 0 and (tmp_path / "p.png").read_bytes()[:8] == PNG_MAGIC


def test_the_plot_marks_the_best_saved_checkpoint_as_the_one_to_keep_when_the_best_eval_was_not_saved(
    tmp_path: Path,
) -> None:
    """Saved every 500 steps, best evaluated at 600: the text named checkpoint 500, the plot's star
    said step 600 was "the checkpoint to keep" (no checkpoint-600 exists)."""
    import matplotlib.pyplot as plt

    from advisor.commands import forecast as command
    from advisor.commands.forecast_plot import build_figure

    f = _trainer_state(tmp_path / "trainer_state.json", evals=True, save_steps=500)
    outcome = command.compute(_parsed(str(f), "--upto-step", "1500", "--plot", str(tmp_path / "p.png")))
    fig = build_figure(outcome)
    try:
        (ax,) = fig.axes
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert any(t.startswith("best eval_loss 0.5 at step 600 (not saved)") for t in labels), labels
        keep = [t for t in labels if t.endswith("(the checkpoint to keep)")]
        assert len(keep) == 1 and keep[0].startswith("best saved eval_loss"), keep
        assert "at step 500 " in keep[0], keep
        assert [round(x) for x in ax.lines[-1].get_xdata()] == [500]  # the filled star, at the saved step
    finally:
        plt.close(fig)


def _parsed(*argv: str) -> Any:
    """The request ``forecast ARGV`` computes (as the command builds it from its arguments)."""
    import argparse

    from advisor.commands import forecast as command

    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    return command.ForecastRequest.from_args(parser.parse_args(["forecast", *argv]))


def test_a_trainer_state_without_evals_is_judged_by_the_training_loss(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    f = str(_trainer_state(tmp_path / "trainer_state.json", evals=False))
    code, out, _ = run(capsys, f, "--upto-step", "600", "--json")
    doc = json.loads(out)
    assert code == 0 and set(doc["series"]) == {"loss"} and doc["state"]["metric"] is None
    assert doc["state"]["label"] == "learning"


def _stuck_log(path: Path, *, last_step: int, total: int | None = None) -> None:
    """Reports every 10 s to ``last_step``, then 199 more a minute apart at that same step."""
    rows, t = [], 0.0
    for s in range(10, last_step + 1, 10):
        t += 10.0
        rows.append({"step": s, "loss": 2 + 3 * (s / 100) ** -0.5, "time": t})
    for _ in range(199):
        t += 60.0
        rows.append({"step": last_step, "loss": rows[-1]["loss"], "time": t})
    if total is not None:
        for row in rows:
            row["total_steps"] = total
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_a_log_whose_reports_go_on_at_a_stuck_step_reads_as_hung_with_no_eta(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The controller calls a run hung when its step stops while time passes; a log that shows the
    same (three hours of reports at one step) says so too, and promises no ETA."""
    _stuck_log(tmp_path / "hung.jsonl", last_step=3000)
    assert main(["forecast", str(tmp_path / "hung.jsonl"), "--total-steps", "10000"]) == 0
    out = capsys.readouterr().out
    assert "run state       hung" in out
    assert "ETA             n/a (no step advance for the last 3h 19m of reports)" in out
    assert main(["forecast", str(tmp_path / "hung.jsonl"), "--total-steps", "10000", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"]["label"] == "hung"


def test_a_log_that_ends_at_its_last_step_is_not_hung_however_long_it_reports_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stuck_log(tmp_path / "done.jsonl", last_step=3000)
    assert main(["forecast", str(tmp_path / "done.jsonl"), "--total-steps", "3000", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"]["label"] != "hung"


def test_the_text_names_a_smoothed_eval_level_and_carries_the_judged_series_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An eval loss past its best and rising: its level is a median of the last evaluations, so the
    text says "smoothed" and shows the last one beside it, and the rise the JSON's series carry is
    among the text's warnings too. A metric stuck at zero reads 0, never -0."""
    history: list[dict[str, float]] = []
    for s in range(10, 2001, 10):
        history.append({"step": s, "loss": 0.2 + 2.0 * (s / 10) ** -0.7, "learning_rate": 1e-4})
        if s % 100 == 0:
            ev = 0.6 + (0.0 if s <= 800 else 0.0004 * (s - 800)) + 0.4 * (100 / s)
            acc = 0.804 if s == 2000 else 0.8  # the last evaluation 0.5% off the level
            history.append({"step": s, "eval_loss": ev, "eval_f1": 0.0, "eval_accuracy": acc})
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": history, "max_steps": 3000}))
    assert main(["forecast", str(path)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.strip().startswith("eval_loss"))
    assert "smoothed (last 1.1)" in line, line
    assert "- eval_loss: the series is rising" in out
    f1 = next(x for x in out.splitlines() if x.strip().startswith("eval_f1"))
    assert "-0" not in f1 and "e-" not in f1, f1
    # a last evaluation that shows otherwise than the level is named, however close (it read "now")
    acc = next(x for x in out.splitlines() if x.strip().startswith("eval_accuracy"))
    assert "0.8 smoothed (last 0.804)" in acc, acc


def test_a_cut_before_a_divergence_neither_warns_of_it_nor_calls_the_last_finite_value_the_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The loss goes NaN at step 3,010 of 5,000. Cut at 2,500, the forecast saw no NaN: no warning
    counts the later ones, and the observed end is the divergence, not the last finite value."""
    rows = ["step,loss"] + [
        f"{s},{'nan' if s > 3000 else 2 + 3 * (s / 100) ** -0.5}" for s in range(10, 5001, 10)
    ]
    path = tmp_path / "nan.csv"
    path.write_text("\n".join(rows) + "\n")
    assert main(["forecast", str(path), "--upto-step", "2500", "--total-steps", "5000"]) == 0
    out = capsys.readouterr().out
    assert "non-finite loss values" not in out
    assert "observed end    non-finite from step 3,010 to the end of the file (the run diverged)" in out
    assert main(["forecast", str(path), "--upto-step", "3500", "--total-steps", "5000", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["observed_nonfinite_from_step"] == 3010 and "observed_final_loss" not in got
    assert "50 non-finite loss values" in got["input"]["warnings"]


def test_a_run_gone_nan_is_warned_of_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The file's reading counts the non-finite values and the forecast the points it dropped:
    one fact, printed once (the JSON keeps both lists as they are)."""
    rows = ["step,loss"] + [
        f"{s},{'nan' if s > 3000 else 2 + 3 * (s / 100) ** -0.5}" for s in range(10, 3501, 10)
    ]
    path = tmp_path / "nan.csv"
    path.write_text("\n".join(rows) + "\n")
    assert main(["forecast", str(path), "--total-steps", "5000"]) == 0
    out = capsys.readouterr().out
    assert "50 non-finite loss values" in out and "dropped 50 point(s)" not in out
    assert main(["forecast", str(path), "--total-steps", "5000", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert "50 non-finite loss values" in got["input"]["warnings"]
    assert any(w.startswith("dropped 50 point(s)") for w in got["warnings"])


def test_a_noisy_loss_says_how_much_its_reports_scatter_and_a_smooth_one_does_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A small-batch loss scattering by ~20% of its level: the "current" line says so (it is a
    median of a few reports, and the forecast moves with them); the demo's smooth run says nothing."""
    import random

    rng = random.Random(1)
    rows = ["step,loss"] + [
        f"{s},{2 + 3 * (s / 100) ** -0.5 + rng.gauss(0, 0.5):.4f}" for s in range(10, 2501, 10)
    ]
    (tmp_path / "noisy.csv").write_text("\n".join(rows) + "\n")
    assert main(["forecast", str(tmp_path / "noisy.csv"), "--total-steps", "5000"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "current loss" in x)
    assert "reports scatter by about" in line, line
    assert main(["forecast", "--demo"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "current loss" in x)
    assert line.endswith("(smoothed)"), line


def _classifier_state(path: Path, *, training_loss: bool = True) -> Path:
    """A classifier's trainer_state to step 2,500 of 5,000: a falling training loss (or none),
    eval_loss, eval_accuracy rising to 0.89, and eval_runtime (a timing: no direction)."""
    import math

    log: list[dict[str, float]] = []
    for step in range(10, 2501, 10):
        if training_loss:
            log.append({"step": step, "loss": 0.3 + 1.7 * math.exp(-step / 800), "learning_rate": 5e-5})
        if step % 250 == 0:
            acc = 0.89 - 0.19 * math.exp(-step / 700)
            entry = {"step": step, "eval_accuracy": acc, "eval_runtime": 12.3}
            if training_loss:
                entry["eval_loss"] = 0.4 + math.exp(-step / 600)
            log.append(entry)
    path.write_text(json.dumps({"global_step": 2500, "max_steps": 5000, "log_history": log}))
    return path


def test_metric_names_any_eval_series_of_the_file_and_a_score_is_forecast_upwards(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    f = _classifier_state(tmp_path / "trainer_state.json")
    code, out, err = run(capsys, str(f), "--metric", "eval_accuracy", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["input"]["metric"] == "eval_accuracy" and doc["input"]["direction"] == "higher"
    assert doc["input"]["points"] == 10 and doc["input"]["notes"] == []
    final, now = doc["final_loss"], doc["current_loss"]
    assert 0.85 < now <= final["mean"] <= 1.0 and final["p10"] <= final["mean"] <= final["p90"] <= 1.0
    code, out, _ = run(capsys, str(f), "--metric", "eval_accuracy")
    assert code == 0 and "  final eval_accuracy " in out and "  current eval_accuracy " in out


@pytest.mark.parametrize(
    ("metric", "message"),
    [
        ("eval_f1", "no eval_f1 field (found: step, loss, learning_rate, eval_accuracy, eval_runtime, "),
        ("eval_runtime", "unknown metric 'eval_runtime': its name says no direction"),
        ("throughput", "unknown metric 'throughput': the file has no such series"),
    ],
)
def test_a_metric_the_file_cannot_forecast_is_one_line_naming_its_series(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, metric: str, message: str
) -> None:
    f = _classifier_state(tmp_path / "trainer_state.json")
    code, out, err = run(capsys, str(f), "--metric", metric)
    assert code == 2 and out == ""
    line = _one_error_line(err)
    assert message in line and line.endswith("the file's series: loss, eval_loss, eval_accuracy"), line


def test_a_training_side_score_is_refused_as_such_and_its_evaluations_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """TRL logs scores on the training side (``rewards/accuracies``, ``mean_token_accuracy``):
    ``--metric`` on one read "its name says no direction", which it does say."""
    log: list[dict[str, float]] = []
    for step in range(10, 1001, 10):
        log.append(
            {"step": step, "loss": 0.3 + 0.4 * 0.997**step, "rewards/accuracies": 0.9 - 0.3 * 0.997**step}
        )
        if step % 100 == 0:
            log.append({"step": step, "eval_loss": 0.35 + 0.4 * 0.997**step, "eval_rewards/accuracies": 0.85})
    f = tmp_path / "trainer_state.json"
    f.write_text(json.dumps({"global_step": 1000, "max_steps": 2000, "log_history": log}))
    code, out, err = run(capsys, str(f), "--metric", "rewards/accuracies")
    assert code == 2 and out == ""
    line = _one_error_line(err)
    assert "unknown metric 'rewards/accuracies': a training-side metric" in line, line
    assert "(its evaluation's is eval_rewards_accuracies)" in line, line
    code, out, err = run(capsys, str(f), "--metric", "eval_rewards/accuracies")
    assert code == 0, err


def test_a_log_without_a_training_loss_is_forecast_by_its_primary_eval_metric(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Only eval_accuracy (and eval_runtime): the series the run would be judged by, said in a
    note, forecast upwards; from a file as from standard input."""
    f = _classifier_state(tmp_path / "trainer_state.json", training_loss=False)
    code, out, err = run(capsys, str(f))
    assert code == 0, err
    assert "primary eval metric eval_accuracy (higher is better" in out
    assert "  final eval_accuracy " in out
    code, out, err = run(capsys, str(f), "--json")
    doc = json.loads(out)
    assert doc["input"]["metric"] == "eval_accuracy" and doc["input"]["direction"] == "higher"
    assert doc["current_loss"] <= doc["final_loss"]["mean"] <= 1.0
    done = subprocess.run(
        [sys.executable, "-m", "advisor", "forecast", "-", "--json"],
        input=f.read_bytes(),
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["input"]["metric"] == "eval_accuracy"
    code, _, err = run(capsys, str(f), "--metric", "loss")
    assert code == 2 and "no training-loss field" in _one_error_line(err)
    assert _one_error_line(err).endswith("the file's series: eval_accuracy")


def test_total_steps_replaces_the_total_the_file_states(capsys: pytest.CaptureFixture[str]) -> None:
    """``forecast --total-steps`` is documented as replacing the file's total (a run replayed as if
    planned longer), unlike ``compare --total-steps``, which only fills in for a log without one."""
    code, out, err = run(capsys, str(FIXTURES / "trainer_state.json"), "--total-steps", "4000")
    assert code == 0, err
    assert "step 1,200 of 4,000 (30%)" in out


def test_an_eval_series_heading_for_a_worse_end_says_so_beside_its_p_plateau(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """P(plateau) counts a rise as "no improvement left"; an eval loss forecast to end far above
    where it stands reads "(worse by the end)" beside it, a falling one does not."""
    rows = ["step,loss,eval_loss"]
    for s in range(10, 2001, 10):
        ev = ""
        if s % 100 == 0:
            ev = f"{2.0 - s / 2000:.4f}" if s <= 1000 else f"{1.5 + (s - 1000) / 500:.4f}"
        rows.append(f"{s},{2.0 * (1 + s / 200) ** -0.3:.4f},{ev}")
    (tmp_path / "u.csv").write_text("\n".join(rows) + "\n")
    assert main(["forecast", str(tmp_path / "u.csv"), "--total-steps", "4000"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("eval_loss")]
    assert line.endswith("(worse by the end)"), line
    falling = ["step,loss,eval_loss"] + [
        f"{s},{2.0 * (1 + s / 200) ** -0.3:.4f},"
        + (f"{2.0 * (1 + s / 200) ** -0.3 + 0.1:.4f}" if s % 100 == 0 else "")
        for s in range(10, 2001, 10)
    ]
    (tmp_path / "f.csv").write_text("\n".join(falling) + "\n")
    assert main(["forecast", str(tmp_path / "f.csv"), "--total-steps", "4000"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("eval_loss")]
    assert "worse" not in line, line


def test_a_flat_run_without_a_total_is_called_plateaued_and_says_its_end_is_a_guess(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # flat for the last three fifths of its steps at a constant reported learning rate, no total:
    # the plateau reads the end as a scale-free prior does, and says so beside the number
    rng = np.random.default_rng(1)
    s = np.arange(10, 6001, 10)
    y = (2.0 + 3.0 * (np.minimum(s, 2500) / 100 + 1) ** -0.5) * (1 + 0.01 * rng.standard_normal(s.size))
    rows = "".join(f"{a},{b:.5f},0.0003\n" for a, b in zip(s, y, strict=True))
    (tmp_path / "flat.csv").write_text("step,loss,learning_rate\n" + rows)
    code, out, _ = run(capsys, str(tmp_path / "flat.csv"))
    assert code == 0
    line = next(x for x in out.splitlines() if x.strip().startswith("plateau"))
    assert float(line.split("P =")[1].split()[0]) >= 0.8
    assert "end unknown" in line
    assert "the learning rate has not begun to decay (total_steps unknown)" in out
    # with its total given, the line names the end as known
    code, out, _ = run(capsys, str(tmp_path / "flat.csv"), "--total-steps", "8000")
    line = next(x for x in out.splitlines() if x.strip().startswith("plateau"))
    assert code == 0 and "end unknown" not in line


def test_a_run_without_a_total_whose_lr_decays_says_its_end_is_read_off_the_decay(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    s = np.arange(50, 2001, 50)
    lr = 3e-4 * np.clip(1.0 - s / 5000.0, 0.0, None)
    y = 2.0 + np.exp(-s / 300.0)
    rows = "".join(f"{a},{b:.5f},{c:.6g}\n" for a, b, c in zip(s, y, lr, strict=True))
    (tmp_path / "dec.csv").write_text("step,loss,learning_rate\n" + rows)
    code, out, _ = run(capsys, str(tmp_path / "dec.csv"))
    assert code == 0
    assert "(where the learning rate's decay ends: total steps unknown)" in out
    assert "end read off the learning rate's decay" in out
    assert "decay ends the run at about step 5,000 (linear to zero)" in out


def test_the_readmes_demo_output_is_what_the_demo_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """The README shows ``forecast --demo``'s output to a new reader: each line it quotes is a
    line the command prints, its numbers within 2%, or 0.015 for a probability (the lowest allowed
    numpy/scipy may round a fit differently)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("$ trainjob-advisor forecast --demo\n", 1)[1].split("```", 1)[0]
    quoted = [line for line in block.splitlines() if line.strip()]
    code, out, err = run(capsys, "--demo")
    assert code == 0, err
    number = re.compile(r"\d[\d,]*(?:\.\d+)?")
    printed = {number.sub("#", line): number.findall(line) for line in out.splitlines()}
    assert len(quoted) >= 5
    for line in quoted:
        shape = number.sub("#", line)
        assert shape in printed, f"README quotes a line the demo does not print: {line!r}"
        for theirs, ours in zip(number.findall(line), printed[shape], strict=True):
            a, b = float(theirs.replace(",", "")), float(ours.replace(",", ""))
            assert abs(a - b) <= max(0.02 * max(abs(a), abs(b)), 0.015), (line, ours)


def test_a_trainers_best_model_metric_without_a_direction_says_what_the_run_is_judged_by(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A DPO run whose trainer kept its best model by ``eval_rewards/margins`` (a name that says
    no direction) is judged by its eval loss: the line naming the trainer's checkpoint says so,
    rather than standing unexplained beside a best checkpoint of another series."""
    history: list[dict[str, Any]] = []
    for step in range(10, 1210, 10):
        history.append({"step": step, "loss": 0.7 * math.exp(-step / 300) + 0.02, "learning_rate": 5e-7})
        if step % 100 == 0:
            history.append(
                {
                    "step": step,
                    "eval_loss": 0.14 + 3e-7 * (step - 500) ** 2,
                    "eval_rewards/margins": step / 400,
                }
            )
    state = {
        "log_history": history,
        "max_steps": 1200,
        "global_step": 1200,
        "save_steps": 100,
        "best_metric": 3.0,
        "best_model_checkpoint": "out/checkpoint-1200",
    }
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(state))
    code, out, err = run(capsys, str(path))
    assert code == 0, err
    kept = next(line for line in out.splitlines() if line.startswith("  trainer kept"))
    assert "checkpoint-1200" in kept
    assert "judged by eval_loss instead" in kept and "says no direction" in kept
