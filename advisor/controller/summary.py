"""The GPU-as-a-service view: per ClusterQueue (or namespace) summaries of every advised run.

Computed from rendered ``TrainJobForecast`` statuses only, so that ``trainjob-advisor status
--by queue`` (reading the objects) and the controller's per-queue metrics (reading its own
renders) give the same figures. GPUs expected to free up within a horizon are the sum over
runs of ``gpus x P(ETA <= horizon)``, with the ETA's 80% interval read as a split normal.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from advisor.controller.render import STATES, shows_eta

__all__ = [
    "HEARTBEAT_S",
    "HORIZONS",
    "STALE_AFTER_S",
    "QueueSummary",
    "eta_cdf",
    "holds_quota",
    "shown_state",
    "summarize",
]

#: a controller writes a job's status at least this often, changed or not (``observedAt``)
HEARTBEAT_S = 600.0
#: a status of a job that may still run, written longer ago than this, is stale: no controller
#: judges the job any more (its namespace no longer watched, the controller gone). Three heartbeats
STALE_AFTER_S = 3 * HEARTBEAT_S
#: the states of a job that runs no more: their last status stands however old
_OVER = frozenset({"finished", "failed", "suspended"})

#: capacity-planning horizons, in seconds, with their labels
HORIZONS: tuple[tuple[str, float], ...] = (("1h", 3600.0), ("6h", 6 * 3600.0), ("24h", 24 * 3600.0))
_Z90 = 1.2815515655446004  # the standard normal's 90th percentile
NOT_LEARNING = ("plateaued", "overfitting", "hung", "diverging")


def eta_cdf(eta: Mapping[str, Any] | None, horizon: float) -> float:
    """P(ETA <= horizon) from an interval dict ``{mean, p10, p90}`` (split normal); 0 when unknown."""
    if not eta:
        return 0.0
    try:
        mean, p10, p90 = float(eta["mean"]), float(eta["p10"]), float(eta["p90"])
    except (KeyError, TypeError, ValueError):
        return 0.0
    if not all(math.isfinite(v) for v in (mean, p10, p90)):
        return 0.0
    sigma = (mean - p10) / _Z90 if horizon < mean else (p90 - mean) / _Z90
    if sigma <= 0:
        return 1.0 if horizon >= mean else 0.0
    return 0.5 * (1.0 + math.erf((horizon - mean) / (sigma * math.sqrt(2.0))))


@dataclass
class QueueSummary:
    queue: str
    jobs: int = 0
    gpus: int = 0
    states: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATES, 0))
    gpus_not_learning: int = 0
    gpus_freeing: dict[str, float] = field(default_factory=lambda: {label: 0.0 for label, _ in HORIZONS})

    def as_row(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "jobs": self.jobs,
            "gpus": self.gpus,
            **self.states,
            "gpus_not_learning": self.gpus_not_learning,
            **{f"free_{k}": round(v, 1) for k, v in self.gpus_freeing.items()},
        }


def holds_quota(job: Mapping[str, Any]) -> bool:
    """Whether the job holds its GPUs now (``status.job.holdsQuota``, see ``lifecycle.holds_quota``:
    a run its trainer reports done still holds them until it completes). A status from before that
    field: active, admitted and not finished (a pending Workload requests GPUs it does not have, a
    finished one gave them back; counting either put 64 GPUs in a 48-GPU queue), and a status from
    before the lifecycle phase was rendered counts when admitted."""
    held = job.get("holdsQuota")
    if isinstance(held, bool):
        return held
    phase = job.get("phase")
    running = phase in (None, "running")
    return bool(job.get("active", True)) and bool(job.get("admitted", True)) and running


def shown_state(status: Mapping[str, Any], now: float | None) -> str:
    """The state a reader is shown: the status's, or ``stale`` when its ``observedAt`` is older
    than ``STALE_AFTER_S`` at ``now`` and the job may still run (forecasts in namespaces a
    controller stopped watching read ``learning`` with an ETA for ever, and the queue summary
    counted them). ``now`` None: as written."""
    from advisor.controller.kueue import parse_time

    state = str(status.get("state") or "unknown")
    if now is None or state in _OVER:
        return state
    at = parse_time(status.get("observedAt"))
    return "stale" if at is not None and now - at > STALE_AFTER_S else state


def _queue_of(namespace: str, status: Mapping[str, Any], by: str) -> str:
    job = status.get("job") or {}
    if by == "namespace":
        return namespace
    return str(job.get("clusterQueue") or job.get("queueName") or f"(no queue) {namespace}")


def summarize(
    items: Iterable[tuple[str, Mapping[str, Any]]], *, by: str = "queue", now: float | None = None
) -> list[QueueSummary]:
    """Summaries from ``(namespace, status)`` pairs, grouped by ClusterQueue (``by="queue"``) or
    namespace (``by="namespace"``), sorted by name. With ``now``, a stale status (``shown_state``)
    counts as ``unknown``: no GPUs not learning, none freeing."""
    if by not in ("queue", "namespace"):
        raise ValueError(f"by must be 'queue' or 'namespace', got {by!r}")
    out: dict[str, QueueSummary] = {}
    for namespace, status in items:
        if not isinstance(status, Mapping):
            continue
        key = _queue_of(namespace, status, by)
        summary = out.setdefault(key, QueueSummary(key))
        job = status.get("job") or {}
        state = shown_state(status, now)
        # a stale status says nothing of the GPUs the job holds now
        gpus = int(job.get("gpus") or 0) if holds_quota(job) and state != "stale" else 0
        summary.jobs += 1
        summary.gpus += gpus
        summary.states[state if state in summary.states else "unknown"] += 1
        if state in NOT_LEARNING or state == "finished":
            # a run its trainer reports done that still holds its GPUs (a final save, an upload, a
            # teardown that hangs) no longer learns on them either
            summary.gpus_not_learning += gpus
        # a hung run frees its GPUs when someone releases it, not at the ETA forecast before it hung
        eta = (status.get("forecast") or {}).get("etaSeconds") if shows_eta(state) else None
        for label, horizon in HORIZONS:
            summary.gpus_freeing[label] += gpus * eta_cdf(eta, horizon)
    return [out[k] for k in sorted(out)]
