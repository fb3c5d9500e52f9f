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
from collections.abc import Mapping
from typing import Any

from advisor.core.codec import action_from_dict, checkpoint_from_dict
from advisor.model import (
    ClusterQueueView,
    ClusterView,
    JobView,
    WorkloadView,
)
from policies.jobstate_fields import (
    Conv,
    JobStateError,
    boolean,
    count,
    epoch_seconds,
    fields,
    integer,
    items,
    number,
    number_map,
    obj,
    text,
    text_map,
)
from policies.jobstate_forecast import forecast_entry, learning_state

__all__ = ["JobStateError", "cluster_from_dict", "job_from_dict", "state_from_dict"]


#: Unix seconds of the year 2200: a ``now`` beyond is no time in seconds (milliseconds, most likely)
LATEST_SECONDS = 7_258_118_400.0


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


def _throughput(v: Any, path: str) -> tuple[tuple[int, float], ...]:
    out = []
    for i, pair in enumerate(items(v, path)):
        if not isinstance(pair, list) or len(pair) != 2:
            raise JobStateError(f"{path}[{i}]: must be [nodes, stepsPerSecond]")
        out.append((integer(pair[0], f"{path}[{i}][0]"), number(pair[1], f"{path}[{i}][1]")))
    return tuple(out)


def _with_epochs(v: Any, path: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
    data = obj(v, path)
    return {**data, **{k: epoch_seconds(data[k], f"{path}.{k}") for k in keys if data.get(k) is not None}}


def _actions(v: Any, path: str) -> tuple[Any, ...]:
    out = []
    for i, item in enumerate(items(v, path)):
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


_JOB: dict[str, tuple[str, Conv]] = {
    "namespace": ("namespace", text),
    "name": ("name", text),
    "kind": ("kind", text),
    "labels": ("labels", text_map),
    "annotations": ("annotations", text_map),
    "namespaceLabels": ("namespace_labels", text_map),
    "queueName": ("queue_name", text),
    "clusterQueue": ("cluster_queue", text),
    "priority": ("priority", integer),
    "gpus": ("gpus", integer),
    "nodes": ("nodes", integer),
    "minNodes": ("min_nodes", integer),
    "maxNodes": ("max_nodes", integer),
    "active": ("active", boolean),
    "admitted": ("admitted", boolean),
    "admittedAt": ("admitted_at", number),
    "startedAt": ("started_at", number),
    "step": ("step", integer),
    "totalSteps": ("total_steps", integer),
    "lastStepChange": ("last_step_change", number),
    "lastSampleTime": ("last_sample_time", number),
    "progressSeenAt": ("progress_seen_at", number),
    "reportIntervalSeconds": ("report_interval_s", number),
    "lastLoss": ("last_loss", number),
    "nonFiniteReports": ("non_finite_reports", count),
    "forecast": ("forecast", forecast_entry),
    "learningState": ("learning_state", learning_state),
    "checkpoint": (
        "checkpoint",
        lambda v, p: checkpoint_from_dict(_with_epochs(v, p, ("lastTime", "pendingSince"))),
    ),
    "throughput": ("throughput", _throughput),
    "actions": ("actions", _actions),
    "ruleState": ("rule_state", lambda v, p: _rule_state(v, p)),
}
_CQ: dict[str, tuple[str, Conv]] = {
    "name": ("name", text),
    "cohort": ("cohort", text),
    "nominalGPUs": ("nominal_gpus", integer),
    "nominalGpus": ("nominal_gpus", integer),  # the earlier spelling, still read
    "borrowingLimit": ("borrowing_limit", integer),
    "lendingLimit": ("lending_limit", integer),
    "usageGPUs": ("usage_gpus", integer),
    "usageGpus": ("usage_gpus", integer),  # the earlier spelling, still read
    "withinClusterQueue": ("within_cluster_queue", text),
    "reclaimWithinCohort": ("reclaim_within_cohort", text),
    "borrowWithinCohort": ("borrow_within_cohort", text),
    "borrowMaxPriorityThreshold": ("borrow_max_priority_threshold", integer),
    "queueingStrategy": ("queueing_strategy", text),
}
_WL: dict[str, tuple[str, Conv]] = {
    "namespace": ("namespace", text),
    "name": ("name", text),
    "clusterQueue": ("cluster_queue", text),
    "gpus": ("gpus", integer),
    "priority": ("priority", integer),
    "admitted": ("admitted", boolean),
    "active": ("active", boolean),
    "job": ("job", text),
    "admittedAt": ("admitted_at", number),
    "createdAt": ("created_at", number),
    "priorityBoost": ("priority_boost", integer),
    "interruptions": ("interruptions", integer),
    "pastAdmittedSeconds": ("past_admitted_seconds", number),
}


def job_from_dict(data: Any, path: str = "job") -> JobView:
    return JobView(**fields(data, _JOB, path, ("namespace", "name")))


def cluster_from_dict(data: Any, path: str = "cluster") -> ClusterView:
    if data is None:
        return ClusterView()
    data = obj(data, path)
    known = {"clusterQueues", "workloads", "preemptionRate", "priorityBoostEnabled", "policyActionTimes"}
    for key in data:
        if key not in known:
            raise JobStateError(f"{path}.{key}: unknown key (known: {', '.join(sorted(known))})")
    cqs = [
        ClusterQueueView(**fields(q, _CQ, f"{path}.clusterQueues[{i}]", ("name",)))
        for i, q in enumerate(items(data.get("clusterQueues", []), f"{path}.clusterQueues"))
    ]
    wls = tuple(
        WorkloadView(
            **fields(w, _WL, f"{path}.workloads[{i}]", ("namespace", "name", "clusterQueue", "gpus"))
        )
        for i, w in enumerate(items(data.get("workloads", []), f"{path}.workloads"))
    )
    times_raw = obj(data.get("policyActionTimes", {}), f"{path}.policyActionTimes")
    times = {
        str(k): tuple(
            number(t, f"{path}.policyActionTimes.{k}") for t in items(v, f"{path}.policyActionTimes.{k}")
        )
        for k, v in times_raw.items()
    }
    return ClusterView(
        cluster_queues={q.name: q for q in cqs},
        workloads=wls,
        preemption_rate=number_map(data.get("preemptionRate", {}), f"{path}.preemptionRate"),
        priority_boost_enabled=boolean(
            data.get("priorityBoostEnabled", False), f"{path}.priorityBoostEnabled"
        ),
        policy_action_times=times,
    )


def state_from_dict(data: Any) -> tuple[JobView, ClusterView, float | None]:
    """``(job, cluster, now)`` from a job-state document; ``now`` is None when absent."""
    data = obj(data, "state")
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
    now = None if data.get("now") is None else number(data["now"], "now")
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
