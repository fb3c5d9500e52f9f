"""``compare`` ranks a best checkpoint by what its series' trend says at its step, not by the value
it measured: that evaluation was kept for being the best, the luckiest of its series, and the
noisier the series the luckier (the winner's curse). Two runs on one eval curve, one evaluating
with a scatter of 0.005 and one of 0.03, read P(BEST) about 90% for the noisier, in every replica."""

from __future__ import annotations

import contextlib
import io
import json
import math
import random
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from advisor import cli
from advisor.commands import compare as compare_cmd
from advisor.commands.compare_files import BESTS, ENDED, IMPROVING, TOTAL, file_bests
from advisor.forecast.best_trend import trend_at
from advisor.series import Direction

STEPS = list(range(100, 3001, 100))
QUIET, NOISY = 0.005, 0.03


def u_curve(s: float) -> float:
    """An eval loss that falls to about 1.0 near step 1,500 and rises after (an overfitting run)."""
    return 1.0 + 0.6 * math.exp(-s / 400) - 0.6 * math.exp(-1500 / 400) + 0.04 * ((s - 1500) / 1500) ** 2


def l_curve(s: float) -> float:
    """An eval loss that falls and flattens, lowest at the last evaluation."""
    return 1.0 + 0.6 * math.exp(-s / 500)


def _write(path: Path, curve: Callable[[float], float], noise: float, seed: int, shift: float = 0.0) -> None:
    rng = random.Random(seed)
    history: list[dict[str, float]] = []
    for s in range(10, 3001, 10):
        history.append({"step": s, "loss": 0.3 + 2 * math.exp(-s / 600), "epoch": s / 1000})
        if s % 100 == 0:
            history.append(
                {"step": s, "eval_loss": curve(s) + shift + rng.gauss(0, noise), "epoch": s / 1000}
            )
    path.write_text(json.dumps({"log_history": history, "max_steps": 3000, "global_step": 3000}))


def _quick_status(path: Path, total_steps: int | None) -> dict[str, Any]:
    """A finished log's status as ``file_status`` makes it, its best checkpoint by the real
    ``file_bests``, without fitting a forecast (hundreds of replicas): FINAL is the series' last
    evaluation, which a run at its end does not rank by."""
    evals = [
        (h["step"], h["eval_loss"]) for h in json.loads(path.read_text())["log_history"] if "eval_loss" in h
    ]
    steps, values = [s for s, _ in evals], [v for _, v in evals]
    curve = SimpleNamespace(steps=steps, values=values)
    outcome = SimpleNamespace(
        evals={}, curve=curve, full=SimpleNamespace(metric="eval_loss", trainer=None, steps=steps)
    )
    last = values[-1]
    series = {"final": {"mean": last, "p10": last - 0.01, "p90": last + 0.01}, "points": len(values)}
    return {
        "forecast": {},
        "learningState": {"metric": "eval_loss", "series": {"eval_loss": {**series, "direction": "lower"}}},
        "summary": {"progress": "3,000/3,000"},
        "state": "plateaued",
        TOTAL: 3000,
        ENDED: True,
        IMPROVING: False,
        BESTS: file_bests(outcome),
    }


def _compare(paths: list[Path], *extra: str) -> dict[str, dict[str, Any]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["compare", *map(str, paths), "-o", "json", *extra]) == 0
    return {Path(r["run"]).stem: r for r in json.loads(out.getvalue())}


def _sweep(
    tmp_path: Path,
    curve: Callable[[float], float],
    replicas: int,
    *,
    quiet_shift: float = 0.0,
    noisy_shift: float = 0.0,
) -> list[dict[str, dict[str, Any]]]:
    quiet, noisy = tmp_path / "quiet.json", tmp_path / "noisy.json"
    out = []
    for r in range(replicas):
        _write(quiet, curve, QUIET, 1000 + r, quiet_shift)
        _write(noisy, curve, NOISY, 5000 + r, noisy_shift)
        out.append(_compare([quiet, noisy], "--draws", "2000"))
    return out


@pytest.mark.parametrize("curve", [u_curve, l_curve], ids=["U", "L"])
def test_two_runs_on_one_curve_share_the_odds_whatever_their_noise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, curve: Callable[[float], float]
) -> None:
    """300 replicas of a sweep of two runs on one eval curve, evaluating with a scatter of 0.005
    and 0.03. Drawn about its measured best, the noisier won in nearly every replica (mean P(BEST)
    about 0.88, above 0.5 in 998 of 1,000); drawn about its trend, its mean P(BEST) lies within
    0.15 of even odds (measured 0.45 for either curve). Why not exactly 0.5: the noisier run's best
    checkpoint is really better in about 28% of replicas only (chosen off the curve's bottom, or
    short of its end, by the noise), so a fair read lies between that and even odds; 0.15 is more
    than five standard errors of the mean over 300 replicas (about 0.02)."""
    monkeypatch.setattr(compare_cmd, "file_status", _quick_status)
    rows = _sweep(tmp_path, curve, 300)
    p_noisy = [r["noisy"]["probabilityBest"] for r in rows]
    mean = sum(p_noisy) / len(p_noisy)
    assert 0.35 < mean < 0.65, mean
    assert sum(p > 0.5 for p in p_noisy) < 0.5 * len(p_noisy)
    # the table shows what each run measured: the noisier's best is the lower in most replicas
    assert sum(r["noisy"]["bestValue"] < r["quiet"]["bestValue"] for r in rows) > 0.9 * len(rows)
    # ... and as measured (the draw before), the noisier wins nearly every replica
    z, sides = 1.2815515655446004, (("quiet", QUIET), ("noisy", NOISY))
    biased = [
        compare_cmd.prob_best(
            [(r[n]["bestValue"], r[n]["bestValue"] - z * sd, r[n]["bestValue"] + z * sd) for n, sd in sides],
            draws=2000,
        )[1]
        for r in rows[:100]
    ]
    assert sum(biased) / len(biased) > 0.8


@pytest.mark.parametrize(("quiet_shift", "noisy_shift"), [(0.0, -0.06), (-0.05, 0.0)], ids=["noisy", "quiet"])
def test_a_run_whose_trend_is_better_still_wins_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quiet_shift: float, noisy_shift: float
) -> None:
    """A run whose eval curve lies lower wins, noisy or not: the noisier 0.06 lower, or the quieter
    0.05 lower (as measured, that one lost many replicas: the noisier's best evaluation lies about
    0.054 below its curve)."""
    monkeypatch.setattr(compare_cmd, "file_status", _quick_status)
    better = "noisy" if noisy_shift < quiet_shift else "quiet"
    rows = _sweep(tmp_path, u_curve, 100, quiet_shift=quiet_shift, noisy_shift=noisy_shift)
    p = [r[better]["probabilityBest"] for r in rows]
    assert sum(p) / len(p) > 0.85
    assert sum(x > 0.5 for x in p) > 0.9 * len(p)


def test_the_runs_forecast_from_their_logs_share_the_odds(tmp_path: Path) -> None:
    """The same, each log forecast as ``forecast FILE`` does (8 replicas: a forecast a log): the
    noisier run read P(BEST) above 0.5 in every replica (mean 0.91 over 20), and now in about half."""
    rows = _sweep(tmp_path, u_curve, 8)
    p_noisy = [r["noisy"]["probabilityBest"] for r in rows]
    assert sum(p_noisy) / len(p_noisy) < 0.75 and sum(p > 0.5 for p in p_noisy) <= 6, p_noisy
    for r in rows:  # BEST CHECKPOINT shows what was measured; GIVES what it is ranked by
        for run in r.values():
            assert run["gives"] == run["bestTrend"] >= run["bestValue"]


def test_trend_at_reads_a_best_from_the_evaluations_around_it() -> None:
    steps = [100.0 * i for i in range(1, 11)]
    parabola = [0.8 - 0.1 * ((s - 500) / 1000) ** 2 for s in steps]
    # a peak between other evaluations: a parabola through three each side, the peak left out
    value, sd = trend_at(steps, [*parabola[:4], 0.9, *parabola[5:]], 500.0) or (0.0, 0.0)
    assert value == pytest.approx(0.8) and sd >= 0.0
    # a spike beside the best is left out of the fit
    spiked = [1.0 + 0.001 * ((s - 500) / 100) ** 2 + 0.002 * (-1) ** i for i, s in enumerate(steps)]
    clean = trend_at(steps, spiked, 500.0)
    spiked[5] += 0.5
    assert clean is not None and trend_at(steps, spiked, 500.0) == pytest.approx(clean, abs=0.003)
    # the last evaluation: a line through the four before it
    line = [2.0 - 0.001 * s for s in steps]
    assert trend_at(steps, line, 1000.0) == pytest.approx((1.0, 0.0))
    assert trend_at(steps[:3], line[:3], 300.0) is None and trend_at(steps, line, 150.0) is None


def test_a_forecasts_best_is_drawn_about_its_trend_from_its_learning_state() -> None:
    """A TrainJobForecast keeps no eval series: its learning state keeps the trend at the best step
    (``bestTrend``, ``bestTrendSd``); without them (a status written before) the measured value is
    drawn with the scatter of one evaluation."""
    from advisor.commands.compare_status import kept_draw

    state = {"metric": "eval_loss", "bestValue": 1.20, "bestNoise": 0.03, "bestStep": 900}
    assert kept_draw({"learningState": state}, "eval_loss") == (1.20, 0.03)
    with_trend = {"learningState": {**state, "bestTrend": 1.24, "bestTrendSd": 0.04}}
    assert kept_draw(with_trend, "eval_loss") == pytest.approx((1.24, 0.05))
    assert kept_draw(with_trend, "eval_accuracy") is None
    # never better than measured: a trend below a loss's best is a line carried past a bend
    below = {"learningState": {**state, "bestTrend": 1.10, "bestTrendSd": 0.0}}
    assert kept_draw(below, "eval_loss") == (1.20, 0.03)


def test_the_learning_state_keeps_the_trend_at_its_best_step() -> None:
    """What the controller writes (``bestTrend``) and ``policy explain`` reads back."""
    from advisor.controller.render import learning_state_dict
    from advisor.forecast.state import learning_state
    from policies.jobstate_forecast import learning_state as read_learning_state

    rng = random.Random(0)
    steps = [float(s) for s in STEPS]
    values = [u_curve(s) + rng.gauss(0, NOISY) for s in steps]
    series = SimpleNamespace(steps=steps, values=values, direction=Direction.LOWER)
    state = learning_state(None, {"eval_loss": series})
    assert state.best_trend is not None and state.best_trend > (state.best_value or 0.0)
    written = learning_state_dict(state)
    assert written is not None and written["bestTrend"] == pytest.approx(state.best_trend, abs=1e-6)
    read = read_learning_state(written, "job.learningState")
    assert read.best_trend == pytest.approx(state.best_trend, abs=1e-6)
    assert read.best_trend_sd == pytest.approx(state.best_trend_sd, abs=1e-6)
