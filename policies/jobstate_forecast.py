"""A job state's forecast and learning-state entries, in the shape a TrainJobForecast's status has.

Apart from :mod:`policies.jobstate` because these entries have their own keys and invariants (an
interval's three quantiles, a learning state whose ``metric`` must have a series entry); a live
job's status pastes in as it is, so a rule that names an eval metric can be explained.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from advisor.core.codec import forecast_from_dict
from advisor.model import LEARNING_LABELS, EvalJudgement, Forecast, Interval, LearningState
from policies.jobstate_fields import (
    JobStateError,
    check_interval,
    check_probability,
    integer,
    items,
    number,
    number_map,
    obj,
    text,
)

__all__ = ["forecast_entry", "interval_entry", "learning_state"]


#: the keys of a forecast entry and their checks (the shape ``advisor.core.codec`` writes)
_FORECAST: dict[str, Callable[[Any, str], Any]] = {
    "finalLoss": check_interval,
    "plateauProbability": check_probability,
    "divergenceProbability": check_probability,
    "etaSeconds": check_interval,
    "stepsPerSecond": number,
    "model": number_map,
    "warnings": lambda v, p: [text(w, f"{p}[{i}]") for i, w in enumerate(items(v, p))],
    "currentLoss": number,
    "lastStep": number,
    "totalSteps": integer,
    "points": integer,
    "dropped": integer,
}


def forecast_entry(v: Any, path: str) -> Any:
    """A forecast entry, every key checked (the codec itself reads leniently: what the controller
    stored is trusted, a hand-written state is not)."""
    data = obj(v, path)
    for key, value in data.items():
        if key not in _FORECAST:
            raise JobStateError(f"{path}.{key}: unknown key (known: {', '.join(sorted(_FORECAST))})")
        if value is not None:
            _FORECAST[key](value, f"{path}.{key}")
    if "finalLoss" not in data:
        raise JobStateError(f"{path}.finalLoss: is required")
    return forecast_from_dict(data)


def interval_entry(v: Any, path: str) -> Interval:
    check_interval(v, path)
    return Interval(number(v["mean"], path), number(v["p10"], path), number(v["p90"], path))


#: the keys of one eval series in a learning state (``TrainJobForecast.status.learningState``)
_SERIES_KEYS = (
    "bestMadeAfter",
    "bestStep",
    "bestValue",
    "current",
    "direction",
    "evalsSinceBest",
    "final",
    "lastStep",
    "overfittingProbability",
    "plateauProbability",
    "points",
)


def _made_after(data: Mapping[str, Any], path: str) -> int | None:
    """``bestMadeAfter``: absent (written before it was kept, or the best evaluation is at its own
    step) or an integer."""
    v = data.get("bestMadeAfter")
    return None if v is None else integer(v, f"{path}.bestMadeAfter")


def _series_judgement(v: Any, path: str) -> EvalJudgement | None:
    """The series judged on its own, when the status carries it (``overfittingProbability``)."""
    data = obj(v, path)
    p = data.get("overfittingProbability")
    if p is None:
        return None
    check_probability(p, f"{path}.overfittingProbability")
    best, best_value = data.get("bestStep"), data.get("bestValue")
    return EvalJudgement(
        best_step=None if best is None else integer(best, f"{path}.bestStep"),
        best_value=None if best_value is None else number(best_value, f"{path}.bestValue"),
        evals_since_best=integer(data.get("evalsSinceBest", 0), f"{path}.evalsSinceBest"),
        overfitting=number(p, f"{path}.overfittingProbability"),
        best_made_after=_made_after(data, path),
    )


def _series_forecast(v: Any, path: str) -> tuple[Forecast, str | None]:
    """One eval series of a learning state, as the status writes it: its forecast and direction."""
    data = obj(v, path)
    for key in data:
        if key not in _SERIES_KEYS:
            raise JobStateError(f"{path}.{key}: unknown key (known: {', '.join(_SERIES_KEYS)})")
    if "final" not in data:
        raise JobStateError(f"{path}.final: is required")
    direction = None if data.get("direction") is None else text(data["direction"], f"{path}.direction")
    if direction not in (None, "lower", "higher"):
        raise JobStateError(f"{path}.direction: must be lower or higher, got {direction!r}")
    p = data.get("plateauProbability")
    if p is not None:
        check_probability(p, f"{path}.plateauProbability")
    fc = Forecast(
        final_loss=interval_entry(data["final"], f"{path}.final"),
        plateau_probability=0.5 if p is None else number(p, path),
        divergence_probability=0.0,
        current_loss=None if data.get("current") is None else number(data["current"], f"{path}.current"),
        n_points=0 if data.get("points") is None else integer(data["points"], f"{path}.points"),
        last_step=None if data.get("lastStep") is None else number(data["lastStep"], f"{path}.lastStep"),
    )
    return fc, direction


_LEARNING_KEYS = (
    "bestMadeAfter",
    "bestNoise",
    "bestStep",
    "bestTrend",
    "bestTrendSd",
    "bestValue",
    "evalsSinceBest",
    "label",
    "metric",
    "probabilities",
    "series",
    "taskMetric",
    "warnings",
)


def learning_state(v: Any, path: str) -> LearningState:
    """The run's learning state in the shape ``TrainJobForecast.status.learningState`` has it (a
    live job's can be pasted in), so that an overfitting rule, or a rule naming an eval metric,
    can be explained: without it they judge nothing."""
    data = obj(v, path)
    for key in data:
        if key not in _LEARNING_KEYS:
            raise JobStateError(f"{path}.{key}: unknown key (known: {', '.join(_LEARNING_KEYS)})")
    label = text(data.get("label"), f"{path}.label") if "label" in data else None
    if label not in LEARNING_LABELS:
        raise JobStateError(f"{path}.label: must be one of {', '.join(LEARNING_LABELS)}, got {label!r}")
    probs = number_map(data.get("probabilities") or {}, f"{path}.probabilities")
    for name, p in probs.items():
        if name not in LEARNING_LABELS:
            raise JobStateError(
                f"{path}.probabilities.{name}: unknown label (known: {', '.join(LEARNING_LABELS)})"
            )
        check_probability(p, f"{path}.probabilities.{name}")
    probabilities = {
        name: probs.get(name, 1.0 if name == label and not probs else 0.0) for name in LEARNING_LABELS
    }
    series: dict[str, Forecast] = {}
    directions: dict[str, str] = {}
    judgements: dict[str, EvalJudgement] = {}
    for name, entry in obj(data.get("series") or {}, f"{path}.series").items():
        series[str(name)], direction = _series_forecast(entry, f"{path}.series.{name}")
        if direction is not None:
            directions[str(name)] = direction
        if (judgement := _series_judgement(entry, f"{path}.series.{name}")) is not None:
            judgements[str(name)] = judgement
    metric = None if data.get("metric") is None else text(data["metric"], f"{path}.metric")
    if metric is not None and metric not in series:
        raise JobStateError(f"{path}.metric: {metric!r} has no entry in {path}.series")
    task = None if data.get("taskMetric") is None else text(data["taskMetric"], f"{path}.taskMetric")
    if task is not None and task not in series:
        raise JobStateError(f"{path}.taskMetric: {task!r} has no entry in {path}.series")
    best = data.get("bestStep")
    best_value = data.get("bestValue")
    return LearningState(
        label=label,
        probabilities=probabilities,
        metric=metric,
        best_step=None if best is None else integer(best, f"{path}.bestStep"),
        best_value=None if best_value is None else number(best_value, f"{path}.bestValue"),
        evals_since_best=integer(data.get("evalsSinceBest", 0), f"{path}.evalsSinceBest"),
        best_made_after=_made_after(data, path),
        series=series,
        best_noise=0.0 if data.get("bestNoise") is None else number(data["bestNoise"], f"{path}.bestNoise"),
        best_trend=None if data.get("bestTrend") is None else number(data["bestTrend"], f"{path}.bestTrend"),
        best_trend_sd=0.0
        if data.get("bestTrendSd") is None
        else number(data["bestTrendSd"], f"{path}.bestTrendSd"),
        warnings=tuple(
            text(w, f"{path}.warnings[{i}]")
            for i, w in enumerate(items(data.get("warnings") or [], f"{path}.warnings"))
        ),
        directions=directions,
        judgements=judgements,
        task_metric=task,
    )
