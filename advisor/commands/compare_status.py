"""What a run's status says of the series a sweep is ranked by, for ``compare``.

A run is a TrainJobForecast's status or a log file's status made the same shape
(:mod:`advisor.commands.compare_files`); these readers take either, so ``compare`` ranks the
cluster's runs and a folder of logs by one code path. Which series to rank by is chosen here too:
the eval metric the runs are judged by when every run reports it, else the training loss.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from advisor.cli import CommandError
from advisor.commands.compare_files import BESTS
from advisor.series import Direction, direction_of, eval_series_name
from advisor.sources.normalize import canonical_name

__all__ = [
    "best_of",
    "chosen_metric",
    "final_of",
    "higher_is_better",
    "interval_of",
    "judged_metric",
    "kept_draw",
    "kept_noise",
    "kept_trend",
    "kept_value",
    "points_of",
    "reports",
    "series_entry",
    "series_of",
]


def judged_metric(statuses: Sequence[Mapping[str, Any]]) -> tuple[str, str | None]:
    """The series to rank by when ``--metric`` names none, and why when it is not the one eval
    metric the runs are judged by (None otherwise). The eval metric the runs are judged by, when
    those judged by one agree and every run reports it (a run with too few evaluations to be
    judged yet still shows its forecast of it); when they are judged by different ones (a trainer
    that kept its best model by accuracy beside runs judged by their eval loss), the first of
    those, else of the eval metrics, that every run reports; else the training loss (``loss``):
    ranked by a metric some runs lack, those runs get no place, and the one run that has it is
    best at 100%. The training loss is the last resort: a fine-tune that overfits ends with the
    lowest of it and a poor model (ranked by it, two overfitting runs came first of five that all
    reported their eval loss)."""
    names = list(dict.fromkeys(m for st in statuses if (m := (st.get("learningState") or {}).get("metric"))))
    if len(names) > 1:
        judged = ", ".join(names)
        candidates = [m for m in dict.fromkeys([*names, *series_of(statuses)]) if m != "loss"]
        shared = next((m for m in candidates if all(reports(st, m) for st in statuses)), None)
        if shared is not None:
            return shared, (
                f"the runs are judged by different eval metrics ({judged}); {shared} is the first every run "
                "reports (--metric NAME ranks by another)"
            )
        return "loss", f"the runs are judged by different eval metrics ({judged}; --metric NAME ranks by one)"
    if not names:
        return "loss", None
    reporting = sum(reports(st, names[0]) for st in statuses)
    if reporting < len(statuses):
        return "loss", (
            f"{names[0]} is reported by {reporting} of {len(statuses)} runs only "
            f"(--metric {names[0]} ranks those by it)"
        )
    return names[0], None


def reports(status: Mapping[str, Any], metric: str) -> bool:
    """Whether a run reports ``metric``: the training loss always; an eval metric when its state
    forecasts it (a log's: or has its best checkpoint)."""
    if metric == "loss":
        return True
    series = (status.get("learningState") or {}).get("series") or {}
    return metric in series or metric in (status.get(BESTS) or {})


def series_of(statuses: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every series some run reports: the training loss, then each eval metric as first seen."""
    names: dict[str, None] = {"loss": None}
    for st in statuses:
        names.update(dict.fromkeys((st.get("learningState") or {}).get("series") or {}))
        names.update(dict.fromkeys(st.get(BESTS) or {}))
    return list(names)


def chosen_metric(statuses: Sequence[Mapping[str, Any]], asked: str | None) -> tuple[str, str | None]:
    """The series to rank by and, when the default fell back to the training loss, why. A metric
    asked for that no run reports is an error, as ``forecast --metric`` makes it: ranked by it,
    every run would show ``-`` under a heading that says the runs were ranked."""
    if asked is None:
        return judged_metric(statuses)
    if asked not in ("loss", "eval_loss") and not any(reports(st, asked) for st in statuses):
        # as the file names it (eval_rewards/accuracies): the series keeps one spelling
        # (eval_rewards_accuracies), which ``forecast --metric`` takes either way
        asked = eval_series_name(canonical_name(asked))
    if not any(reports(st, asked) for st in statuses):
        raise CommandError(
            f"--metric {asked}: no run reports it (the runs' series: {', '.join(series_of(statuses))})"
        )
    return asked, None


def series_entry(status: Mapping[str, Any], metric: str) -> Mapping[str, Any]:
    """What the run's status says of ``metric``: its forecast (the training loss), else the
    learning state's entry of that eval series (empty: none)."""
    if metric == "loss":
        return status.get("forecast") or {}
    return ((status.get("learningState") or {}).get("series") or {}).get(metric) or {}


def final_of(status: Mapping[str, Any], metric: str) -> Mapping[str, Any]:
    return series_entry(status, metric).get("finalLoss" if metric == "loss" else "final") or {}


def points_of(status: Mapping[str, Any], metric: str) -> int | None:
    """How many points the run's forecast of ``metric`` was made on (None: not said)."""
    points = series_entry(status, metric).get("points")
    return points if isinstance(points, int) and not isinstance(points, bool) else None


def higher_is_better(statuses: Sequence[Mapping[str, Any]], metric: str) -> bool:
    """Whether ``metric`` improves upwards: as the runs' states say, else as its name says."""
    for st in statuses:
        series = series_entry(st, metric) if metric != "loss" else {}
        if series.get("direction"):
            return bool(series["direction"] == Direction.HIGHER)
    return direction_of(metric) is Direction.HIGHER


def interval_of(status: Mapping[str, Any], metric: str = "loss") -> tuple[float, float, float] | None:
    final = final_of(status, metric)
    try:
        values = (float(final["mean"]), float(final["p10"]), float(final["p90"]))
    except (KeyError, TypeError, ValueError):
        return None
    return values


def best_of(status: Mapping[str, Any], metric: str) -> tuple[int | None, float | None]:
    """(step, value) of the run's best checkpoint of ``metric``, the metric it is ranked by: none
    for the training loss (see the module's docstring); a log's from its own eval series; a
    TrainJobForecast's when its state is judged by that metric (its status names no other's)."""
    if metric == "loss":
        return None, None
    if BESTS in status:
        best = status[BESTS].get(metric)
        return (None, None) if best is None else (int(best["step"]), float(best["value"]))
    state = status.get("learningState") or {}
    if state.get("metric") != metric:
        return None, None
    step, value = state.get("bestStep"), state.get("bestValue")
    return step, float(value) if isinstance(value, int | float) else None


def best_made_after(status: Mapping[str, Any], metric: str) -> int | None:
    """The step after which the best evaluation ``best_of`` names was made, when the job reports no
    eval step (``learningState.bestMadeAfter``; None: at its own step, or unknown)."""
    state = status.get("learningState") or {}
    after = state.get("bestMadeAfter") if BESTS not in status and state.get("metric") == metric else None
    return after if isinstance(after, int) and not isinstance(after, bool) else None


def kept_value(status: Mapping[str, Any], metric: str) -> float | None:
    """The value of the run's best checkpoint of ``metric`` (a checkpoint it can keep)."""
    return best_of(status, metric)[1]


def kept_noise(status: Mapping[str, Any], metric: str) -> float:
    """How far one evaluation of ``metric`` scatters (``advisor.series.evaluation_noise``): its best
    checkpoint's value is one evaluation. A log's from its eval series, a TrainJobForecast's from
    its learning state (``bestNoise``, of the series it judges); 0 when unknown (a status written
    before it was kept: its best value is then taken as measured)."""
    if BESTS in status:
        noise = ((status.get(BESTS) or {}).get(metric) or {}).get("noise")
    else:
        state = status.get("learningState") or {}
        noise = state.get("bestNoise") if state.get("metric") == metric else None
    return float(noise) if isinstance(noise, int | float) and noise > 0 else 0.0


def kept_draw(status: Mapping[str, Any], metric: str, higher: bool = False) -> tuple[float, float] | None:
    """(centre, sd) of what the run's best checkpoint of ``metric`` is expected to score on fresh
    data, as ``compare`` draws and ranks it (None: no best checkpoint). The centre is the series'
    trend at the best step (``advisor.series.trend_at``, a log's from its eval series, a
    TrainJobForecast's ``bestTrend``), not its measured value: that checkpoint was kept because its
    evaluation was the best, the luckiest of the series, and the noisier the series the luckier,
    so ranked as measured, of two runs on one curve the noisier won (P(BEST) 88% on average). The
    sd is one evaluation's scatter and the trend's own sd together: whether the checkpoint's own
    step off the trend holds on fresh data is unknown. The centre is never better than the
    measured value (in the metric's direction, ``higher``): that is the luckiest of the
    evaluations, and a trend that reads better still is a line carried past a curve's bend (a
    still-improving run's last evaluation, where the line through the ones before overshot a
    noise-free series' value). A status without a trend (too few evaluations, or written before
    it was kept) gives the measured value with its scatter."""
    value = kept_value(status, metric)
    if value is None:
        return None
    noise = kept_noise(status, metric)
    trend = kept_trend(status, metric)
    if trend is None:
        return value, noise
    centre = min(trend[0], value) if higher else max(trend[0], value)
    return centre, math.hypot(noise, trend[1])


def kept_trend(status: Mapping[str, Any], metric: str) -> tuple[float, float] | None:
    """(value, sd) of the trend of ``metric`` at the run's best checkpoint (``kept_draw``): a log's
    from its eval series, a TrainJobForecast's from its learning state (``bestTrend``,
    ``bestTrendSd``, of the series it judges); None when not known."""
    if BESTS in status:
        best = (status.get(BESTS) or {}).get(metric) or {}
        trend, trend_sd = best.get("trend"), best.get("trendSd")
    else:
        state = status.get("learningState") or {}
        judged = state.get("metric") == metric
        trend, trend_sd = (state.get("bestTrend"), state.get("bestTrendSd")) if judged else (None, None)
    if not isinstance(trend, int | float) or isinstance(trend, bool) or not math.isfinite(trend):
        return None
    sd = float(trend_sd) if isinstance(trend_sd, int | float) and math.isfinite(trend_sd) else 0.0
    return float(trend), max(sd, 0.0)
