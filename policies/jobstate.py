"""Job and cluster views from JSON, for ``trainjob-advisor policy explain`` and for tests.

The format is the camelCase spelling of ``JobView`` / ``ClusterView`` (forecast, checkpoint and
action entries in the same shape the core loop persists in ``TrainJobForecast.status``), so a
snapshot taken from a live cluster or a simulator report can be replayed through a policy:

    {"now": 1764590400,
     "job": {"namespace": "team-a", "name": "ft-7", "startedAt": ..., "step": 1200,
             "forecast": {"finalLoss": {"mean": 1.1, "p10": 1.0, "p90": 1.2}, "plateauProbability": 0.93,
                          "divergenceProbability": 0.0, "points": 80}, ...},
     "cluster": {"clusterQueues": [{"name": "spot", "nominalGPUs": 16, "usageGPUs": 16}],
                 "workloads": [...], "preemptionRate": {"spot": 0.0002}}}

Unknown keys and wrong types are errors that name the key: a typo must not silently become a
default in an explanation meant to be trusted. GPU counts are spelt ``nominalGPUs``/``usageGPUs``
as in the simulator's cluster YAML (``nominalGpus``/``usageGpus`` are still read). The format is
documented in ``docs/job-state.md`` and ``examples/job-state.json`` is a complete example.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from advisor.core.codec import action_from_dict, checkpoint_from_dict, forecast_from_dict
from advisor.model import (
    LEARNING_LABELS,
    ClusterQueueView,
    ClusterView,
    EvalJudgement,
    Forecast,
    Interval,
    JobView,
    LearningState,
    WorkloadView,
)
from advisor.sources.coerce import parse_timestamp

__all__ = ["JobStateError", "cluster_from_dict", "job_from_dict", "state_from_dict"]


class JobStateError(ValueError):
    """A malformed job-state document (the message names the key)."""


def _str(v: Any, path: str) -> str:
    if not isinstance(v, str):
        raise JobStateError(f"{path}: must be a string, got {v!r}")
    return v


def _int(v: Any, path: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int | float) or not float(v).is_integer():
        raise JobStateError(f"{path}: must be an integer, got {v!r}")
    return int(v)


def _count(v: Any, path: str) -> int:
    n = _int(v, path)
    if n < 0:
        raise JobStateError(f"{path}: must not be negative, got {v!r}")
    return n


#: Unix seconds of the year 2200: a ``now`` beyond is no time in seconds (milliseconds, most likely)
LATEST_SECONDS = 7_258_118_400.0


def _num(v: Any, path: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise JobStateError(f"{path}: must be a number, got {v!r}")
    try:
        return float(v)  # strings allow "NaN" / "Infinity" for a diverged loss
    except ValueError:
        raise JobStateError(f"{path}: must be a number, got {v!r}") from None


def _bool(v: Any, path: str) -> bool:
    if not isinstance(v, bool):
        raise JobStateError(f"{path}: must be true or false, got {v!r}")
    return v


def _strmap(v: Any, path: str) -> dict[str, str]:
    if not isinstance(v, Mapping) or not all(isinstance(x, str) for x in v.values()):
        raise JobStateError(f"{path}: must be a map of strings")
    return {str(k): x for k, x in v.items()}


def _nummap(v: Any, path: str) -> dict[str, float]:
    if not isinstance(v, Mapping):
        raise JobStateError(f"{path}: must be a map of numbers")
    return {str(k): _num(x, f"{path}.{k}") for k, x in v.items()}


def _rule_state(v: Any, path: str) -> dict[str, float]:
    """The rules' memory as the core loop keeps it: finite JSON numbers (a string, or a NaN, is no
    time or step a rule could have written)."""
    if not isinstance(v, Mapping):
        raise JobStateError(f"{path}: must be a map of numbers")
    out: dict[str, float] = {}
    for k, x in v.items():
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
            raise JobStateError(f"{path}.{k}: must be a finite number, got {x!r}")
        out[str(k)] = float(x)
    return out


def _check_rule_state(job: JobView, now: float | None) -> None:
    """A rule state the job's own figures contradict: a window opened after ``now``, or on an
    evaluation later than the latest one any eval series reports. Replayed, it would explain a
    decision the controller could not have made (a window that never passes, or passes at once)."""
    for key, value in job.rule_state.items():
        if key.endswith(".since") and now is not None and value > now:
            raise JobStateError(f"job.ruleState.{key}: {value:.0f} is after now ({now:.0f})")
        if key.endswith(".openedOn"):
            state = job.learning_state
            steps = [fc.last_step for fc in state.series.values()] if state is not None else []
            known = [s for s in steps if s is not None]
            if known and value > max(known):
                raise JobStateError(
                    f"job.ruleState.{key}: step {value:.0f} is after the latest evaluation any eval series "
                    f"reports (lastStep {max(known):.0f})"
                )


def _obj(v: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise JobStateError(f"{path}: must be an object")
    return v


def _list(v: Any, path: str) -> list[Any]:
    if not isinstance(v, list):
        raise JobStateError(f"{path}: must be a list")
    return v


def _throughput(v: Any, path: str) -> tuple[tuple[int, float], ...]:
    out = []
    for i, pair in enumerate(_list(v, path)):
        if not isinstance(pair, list) or len(pair) != 2:
            raise JobStateError(f"{path}[{i}]: must be [nodes, stepsPerSecond]")
        out.append((_int(pair[0], f"{path}[{i}][0]"), _num(pair[1], f"{path}[{i}][1]")))
    return tuple(out)


def _epoch(v: Any, path: str) -> float:
    """A time as epoch seconds, or as the RFC 3339 text a TrainJobForecast's status shows
    (``2026-12-05T10:41:13Z``), so that its ``actions`` and ``checkpoint`` paste as they are; read
    as the progress parsers read a timestamp (``advisor.sources.coerce.parse_timestamp``), but an
    unreadable one is an error, not a warning."""
    when = parse_timestamp(v, path, [])
    if when is None or not math.isfinite(when):
        raise JobStateError(f"{path}: must be epoch seconds or an RFC 3339 time, got {v!r}")
    return when


def _with_epochs(v: Any, path: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
    data = _obj(v, path)
    return {**data, **{k: _epoch(data[k], f"{path}.{k}") for k in keys if data.get(k) is not None}}


def _actions(v: Any, path: str) -> tuple[Any, ...]:
    out = []
    for i, item in enumerate(_list(v, path)):
        where = f"{path}[{i}]"
        data = _with_epochs(item, where, ("time",))
        for key in ("kind", "time", "requestId"):
            if not data.get(key):
                raise JobStateError(f"{where}.{key}: is required")
        rec = action_from_dict(data)
        if rec is None:
            raise JobStateError(f"{where}.kind: unknown action kind {data['kind']!r}")
        out.append(rec)
    return tuple(out)


def _interval(v: Any, path: str) -> None:
    data = _obj(v, path)
    for key, x in data.items():
        if key not in ("mean", "p10", "p90"):
            raise JobStateError(f"{path}.{key}: unknown key (known: mean, p10, p90)")
        _num(x, f"{path}.{key}")
    for key in ("mean", "p10", "p90"):
        if key not in data:
            raise JobStateError(f"{path}.{key}: is required")


def _probability(v: Any, path: str) -> None:
    p = _num(v, path)
    if not 0.0 <= p <= 1.0:
        raise JobStateError(f"{path}: must be a probability in [0, 1], got {v!r}")


#: the keys of a forecast entry and their checks (the shape ``advisor.core.codec`` writes)
_FORECAST: dict[str, Callable[[Any, str], Any]] = {
    "finalLoss": _interval,
    "plateauProbability": _probability,
    "divergenceProbability": _probability,
    "etaSeconds": _interval,
    "stepsPerSecond": _num,
    "model": _nummap,
    "warnings": lambda v, p: [_str(w, f"{p}[{i}]") for i, w in enumerate(_list(v, p))],
    "currentLoss": _num,
    "lastStep": _num,
    "totalSteps": _int,
    "points": _int,
    "dropped": _int,
}


def _forecast(v: Any, path: str) -> Any:
    """A forecast entry, every key checked (the codec itself reads leniently: what the controller
    stored is trusted, a hand-written state is not)."""
    data = _obj(v, path)
    for key, value in data.items():
        if key not in _FORECAST:
            raise JobStateError(f"{path}.{key}: unknown key (known: {', '.join(sorted(_FORECAST))})")
        if value is not None:
            _FORECAST[key](value, f"{path}.{key}")
    if "finalLoss" not in data:
        raise JobStateError(f"{path}.finalLoss: is required")
    return forecast_from_dict(data)


def _interval_of(v: Any, path: str) -> Interval:
    _interval(v, path)
    return Interval(_num(v["mean"], path), _num(v["p10"], path), _num(v["p90"], path))


#: the keys of one eval series in a learning state (``TrainJobForecast.status.learningState``)
_SERIES_KEYS = (
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


def _series_judgement(v: Any, path: str) -> EvalJudgement | None:
    """The series judged on its own, when the status carries it (``overfittingProbability``)."""
    data = _obj(v, path)
    p = data.get("overfittingProbability")
    if p is None:
        return None
    _probability(p, f"{path}.overfittingProbability")
    best, best_value = data.get("bestStep"), data.get("bestValue")
    return EvalJudgement(
        best_step=None if best is None else _int(best, f"{path}.bestStep"),
        best_value=None if best_value is None else _num(best_value, f"{path}.bestValue"),
        evals_since_best=_int(data.get("evalsSinceBest", 0), f"{path}.evalsSinceBest"),
        overfitting=_num(p, f"{path}.overfittingProbability"),
    )


def _series_forecast(v: Any, path: str) -> tuple[Forecast, str | None]:
    """One eval series of a learning state, as the status writes it: its forecast and direction."""
    data = _obj(v, path)
    for key in data:
        if key not in _SERIES_KEYS:
            raise JobStateError(f"{path}.{key}: unknown key (known: {', '.join(_SERIES_KEYS)})")
    if "final" not in data:
        raise JobStateError(f"{path}.final: is required")
    direction = None if data.get("direction") is None else _str(data["direction"], f"{path}.direction")
    if direction not in (None, "lower", "higher"):
        raise JobStateError(f"{path}.direction: must be lower or higher, got {direction!r}")
    p = data.get("plateauProbability")
    if p is not None:
        _probability(p, f"{path}.plateauProbability")
    fc = Forecast(
        final_loss=_interval_of(data["final"], f"{path}.final"),
        plateau_probability=0.5 if p is None else _num(p, path),
        divergence_probability=0.0,
        current_loss=None if data.get("current") is None else _num(data["current"], f"{path}.current"),
        n_points=0 if data.get("points") is None else _int(data["points"], f"{path}.points"),
        last_step=None if data.get("lastStep") is None else _num(data["lastStep"], f"{path}.lastStep"),
    )
    return fc, direction


_LEARNING_KEYS = (
    "bestStep",
    "bestValue",
    "evalsSinceBest",
    "label",
    "metric",
    "probabilities",
    "series",
    "taskMetric",
    "warnings",
)


def _learning_state(v: Any, path: str) -> LearningState:
    """The run's learning state in the shape ``TrainJobForecast.status.learningState`` has it (a
    live job's can be pasted in), so that an overfitting rule, or a rule naming an eval metric,
    can be explained: without it they judge nothing."""
    data = _obj(v, path)
    for key in data:
        if key not in _LEARNING_KEYS:
            raise JobStateError(f"{path}.{key}: unknown key (known: {', '.join(_LEARNING_KEYS)})")
    label = _str(data.get("label"), f"{path}.label") if "label" in data else None
    if label not in LEARNING_LABELS:
        raise JobStateError(f"{path}.label: must be one of {', '.join(LEARNING_LABELS)}, got {label!r}")
    probs = _nummap(data.get("probabilities") or {}, f"{path}.probabilities")
    for name, p in probs.items():
        if name not in LEARNING_LABELS:
            raise JobStateError(
                f"{path}.probabilities.{name}: unknown label (known: {', '.join(LEARNING_LABELS)})"
            )
        _probability(p, f"{path}.probabilities.{name}")
    probabilities = {
        name: probs.get(name, 1.0 if name == label and not probs else 0.0) for name in LEARNING_LABELS
    }
    series: dict[str, Forecast] = {}
    directions: dict[str, str] = {}
    judgements: dict[str, EvalJudgement] = {}
    for name, entry in _obj(data.get("series") or {}, f"{path}.series").items():
        series[str(name)], direction = _series_forecast(entry, f"{path}.series.{name}")
        if direction is not None:
            directions[str(name)] = direction
        if (judgement := _series_judgement(entry, f"{path}.series.{name}")) is not None:
            judgements[str(name)] = judgement
    metric = None if data.get("metric") is None else _str(data["metric"], f"{path}.metric")
    if metric is not None and metric not in series:
        raise JobStateError(f"{path}.metric: {metric!r} has no entry in {path}.series")
    task = None if data.get("taskMetric") is None else _str(data["taskMetric"], f"{path}.taskMetric")
    if task is not None and task not in series:
        raise JobStateError(f"{path}.taskMetric: {task!r} has no entry in {path}.series")
    best = data.get("bestStep")
    best_value = data.get("bestValue")
    return LearningState(
        label=label,
        probabilities=probabilities,
        metric=metric,
        best_step=None if best is None else _int(best, f"{path}.bestStep"),
        best_value=None if best_value is None else _num(best_value, f"{path}.bestValue"),
        evals_since_best=_int(data.get("evalsSinceBest", 0), f"{path}.evalsSinceBest"),
        series=series,
        warnings=tuple(
            _str(w, f"{path}.warnings[{i}]")
            for i, w in enumerate(_list(data.get("warnings") or [], f"{path}.warnings"))
        ),
        directions=directions,
        judgements=judgements,
        task_metric=task,
    )


Conv = Callable[[Any, str], Any]
_JOB: dict[str, tuple[str, Conv]] = {
    "namespace": ("namespace", _str),
    "name": ("name", _str),
    "kind": ("kind", _str),
    "labels": ("labels", _strmap),
    "annotations": ("annotations", _strmap),
    "namespaceLabels": ("namespace_labels", _strmap),
    "queueName": ("queue_name", _str),
    "clusterQueue": ("cluster_queue", _str),
    "priority": ("priority", _int),
    "gpus": ("gpus", _int),
    "nodes": ("nodes", _int),
    "minNodes": ("min_nodes", _int),
    "maxNodes": ("max_nodes", _int),
    "active": ("active", _bool),
    "admitted": ("admitted", _bool),
    "admittedAt": ("admitted_at", _num),
    "startedAt": ("started_at", _num),
    "step": ("step", _int),
    "totalSteps": ("total_steps", _int),
    "lastStepChange": ("last_step_change", _num),
    "lastSampleTime": ("last_sample_time", _num),
    "progressSeenAt": ("progress_seen_at", _num),
    "reportIntervalSeconds": ("report_interval_s", _num),
    "lastLoss": ("last_loss", _num),
    "nonFiniteReports": ("non_finite_reports", _count),
    "forecast": ("forecast", _forecast),
    "learningState": ("learning_state", _learning_state),
    "checkpoint": (
        "checkpoint",
        lambda v, p: checkpoint_from_dict(_with_epochs(v, p, ("lastTime", "pendingSince"))),
    ),
    "throughput": ("throughput", _throughput),
    "actions": ("actions", _actions),
    "ruleState": ("rule_state", lambda v, p: _rule_state(v, p)),
}
_CQ: dict[str, tuple[str, Conv]] = {
    "name": ("name", _str),
    "cohort": ("cohort", _str),
    "nominalGPUs": ("nominal_gpus", _int),
    "nominalGpus": ("nominal_gpus", _int),  # the earlier spelling, still read
    "borrowingLimit": ("borrowing_limit", _int),
    "lendingLimit": ("lending_limit", _int),
    "usageGPUs": ("usage_gpus", _int),
    "usageGpus": ("usage_gpus", _int),  # the earlier spelling, still read
    "withinClusterQueue": ("within_cluster_queue", _str),
    "reclaimWithinCohort": ("reclaim_within_cohort", _str),
    "borrowWithinCohort": ("borrow_within_cohort", _str),
    "borrowMaxPriorityThreshold": ("borrow_max_priority_threshold", _int),
    "queueingStrategy": ("queueing_strategy", _str),
}
_WL: dict[str, tuple[str, Conv]] = {
    "namespace": ("namespace", _str),
    "name": ("name", _str),
    "clusterQueue": ("cluster_queue", _str),
    "gpus": ("gpus", _int),
    "priority": ("priority", _int),
    "admitted": ("admitted", _bool),
    "active": ("active", _bool),
    "job": ("job", _str),
    "admittedAt": ("admitted_at", _num),
    "createdAt": ("created_at", _num),
    "priorityBoost": ("priority_boost", _int),
    "interruptions": ("interruptions", _int),
    "pastAdmittedSeconds": ("past_admitted_seconds", _num),
}


def _fields(
    data: Any, table: dict[str, tuple[str, Conv]], path: str, required: tuple[str, ...]
) -> dict[str, Any]:
    data = _obj(data, path)
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key not in table:
            raise JobStateError(f"{path}.{key}: unknown key (known: {', '.join(sorted(table))})")
        if value is None:
            continue
        attr, conv = table[key]
        out[attr] = conv(value, f"{path}.{key}")
    for key in required:
        if table[key][0] not in out:
            raise JobStateError(f"{path}.{key}: is required")
    return out


def job_from_dict(data: Any, path: str = "job") -> JobView:
    return JobView(**_fields(data, _JOB, path, ("namespace", "name")))


def cluster_from_dict(data: Any, path: str = "cluster") -> ClusterView:
    if data is None:
        return ClusterView()
    data = _obj(data, path)
    known = {"clusterQueues", "workloads", "preemptionRate", "priorityBoostEnabled", "policyActionTimes"}
    for key in data:
        if key not in known:
            raise JobStateError(f"{path}.{key}: unknown key (known: {', '.join(sorted(known))})")
    cqs = [
        ClusterQueueView(**_fields(q, _CQ, f"{path}.clusterQueues[{i}]", ("name",)))
        for i, q in enumerate(_list(data.get("clusterQueues", []), f"{path}.clusterQueues"))
    ]
    wls = tuple(
        WorkloadView(
            **_fields(w, _WL, f"{path}.workloads[{i}]", ("namespace", "name", "clusterQueue", "gpus"))
        )
        for i, w in enumerate(_list(data.get("workloads", []), f"{path}.workloads"))
    )
    times_raw = _obj(data.get("policyActionTimes", {}), f"{path}.policyActionTimes")
    times = {
        str(k): tuple(
            _num(t, f"{path}.policyActionTimes.{k}") for t in _list(v, f"{path}.policyActionTimes.{k}")
        )
        for k, v in times_raw.items()
    }
    return ClusterView(
        cluster_queues={q.name: q for q in cqs},
        workloads=wls,
        preemption_rate=_nummap(data.get("preemptionRate", {}), f"{path}.preemptionRate"),
        priority_boost_enabled=_bool(data.get("priorityBoostEnabled", False), f"{path}.priorityBoostEnabled"),
        policy_action_times=times,
    )


def state_from_dict(data: Any) -> tuple[JobView, ClusterView, float | None]:
    """``(job, cluster, now)`` from a job-state document; ``now`` is None when absent."""
    data = _obj(data, "state")
    if data.get("kind") == "TrainJobForecast" or "apiVersion" in data:
        # the whole object, piped from kubectl: say what to take from it rather than its first key
        raise JobStateError(
            f"a {data.get('kind') or 'Kubernetes'} object, not a job state: --job-state takes "
            "{job, cluster, now}; copy what a TrainJobForecast's status says (forecast, learningState, "
            "checkpoint, actions; ruleState from the rule memory `explain` prints) into job "
            "(docs/job-state.md, examples/job-state.json)"
        )
    for key in data:
        if key not in ("now", "job", "cluster"):
            raise JobStateError(f"{key}: unknown key (known: cluster, job, now)")
    if "job" not in data:
        raise JobStateError("job: is required")
    now = None if data.get("now") is None else _num(data["now"], "now")
    if now is not None and not math.isfinite(now):
        raise JobStateError(f"now: must be finite, got {now}")
    if now is not None and now > LATEST_SECONDS:
        # milliseconds (JavaScript's Date.now(), a Prometheus timestamp) read as seconds put "now"
        # 50,000 years ahead, and every job read as silent for 2e7 days
        year = 1970 + int(now / (365.25 * 86400))
        raise JobStateError(
            f"now: {now:.0f} is in the year {year:,}: times here are Unix seconds; "
            f"milliseconds? ({now / 1000:.0f})"
        )
    job = job_from_dict(data["job"])
    _check_rule_state(job, now)
    return job, cluster_from_dict(data.get("cluster")), now
