"""The preemption hazard of a ClusterQueue: interruptions per second a workload is admitted there.

One definition for every adapter, so the checkpoint rules see the same number in the controller
and in the simulator:

    hazard(queue) = (evictions with reason ``Preempted`` + evictions with reason ``NodeFailures``)
                    / (seconds the queue's workloads held an admission)

Only interruptions that cost unsaved work count. ``Deactivated`` evictions are releases (the
advisor's own, or a user's): the job is told and is not requeued, so counting them would make the
advisor's releases look like a hostile queue. ``PodsReadyTimeout``, ``AdmissionCheck`` and stopped
queues happen before a job makes progress or by an operator's choice; they are not a hazard a
checkpoint interval should be tuned for.

The exposure is the admitted time, not the time since creation: Kueue's
``status.accumulatedPastExecutionTimeSeconds`` only grows when a workload *loses* its admission,
so a workload admitted now also contributes ``now - admitted_at`` (the Admitted condition's
transition time). Dividing by the accumulated field alone leaves every running, never-evicted
workload out of the denominator and inflates the rate by orders of magnitude.

``hazard_evidence`` gives both counts per ClusterQueue (``ClusterView.hazard_evidence``);
``hazard_by_queue`` their ratio, the maximum-likelihood rate of a Poisson process
(``ClusterView.preemption_rate``, for display and for adapters that give only a rate). The rules
read ``queue_hazard``: the posterior mean under a Gamma prior worth one interruption at the
policy's default rate, ``(events + 1) / (seconds + 1 / default)``, and from two interruptions on
never below ``(events - 1) / seconds``, what the evidence alone makes most likely (``_shrunk``).
A queue admitted for a few minutes without a preemption is not taken for one that never
preempts (the maximum-likelihood rate would say 0, and every job on it would wait
``maxInterval`` for its first checkpoint); over a long exposure, or many interruptions, the data
win. The checkpoint rule goes two levels down: to the workloads of the
job's priority on that queue, with the queue's posterior as their prior (``priority_hazard``,
from ``hazard_evidence_by_priority``), and to the workload's own interruptions and admitted time,
with that as its prior (``workload_hazard``). Kueue evicts the lowest priority first: a queue
whose high-priority jobs run for days untouched dilutes the pooled rate that its low-priority
jobs, evicted again and again, should plan for.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from advisor.model import WorkloadView

__all__ = [
    "HAZARD_REASONS",
    "Exposure",
    "admitted_seconds",
    "hazard_by_queue",
    "hazard_evidence",
    "hazard_evidence_by_priority",
    "interruptions",
    "priority_hazard",
    "queue_hazard",
    "workload_exposure",
    "workload_hazard",
]

#: Workload eviction reasons (``status.schedulingStats.evictions[].reason``) that count as hazard
HAZARD_REASONS: frozenset[str] = frozenset({"Preempted", "NodeFailures"})


@dataclass(frozen=True, slots=True)
class Exposure:
    """One workload's (or one tally's) contribution to its queue's hazard."""

    cluster_queue: str
    preemptions: int = 0
    failures: int = 0
    admitted_seconds: float = 0.0
    priority: int = 0
    """The workload's priority (``spec.priority``): Kueue picks victims by it."""

    @property
    def interruptions(self) -> int:
        return self.preemptions + self.failures


def interruptions(evictions: Mapping[str, int]) -> int:
    """A workload's evictions that count as hazard (``HAZARD_REASONS``), from its eviction counts
    by reason (``schedulingStats.evictions``)."""
    return sum(max(0, int(n)) for reason, n in evictions.items() if reason in HAZARD_REASONS)


def workload_exposure(
    cluster_queue: str,
    evictions: Mapping[str, int],
    *,
    past_admitted_seconds: float,
    admitted_since: float | None,
    now: float,
    priority: int = 0,
) -> Exposure:
    """A Workload's exposure from its status: ``evictions`` maps eviction reason to count
    (``schedulingStats.evictions``, summed over underlying causes), ``past_admitted_seconds`` is
    ``accumulatedPastExecutionTimeSeconds`` and ``admitted_since`` the time the current admission
    began (None when not admitted now)."""
    past = past_admitted_seconds if math.isfinite(past_admitted_seconds) else 0.0
    current = max(0.0, now - admitted_since) if admitted_since is not None else 0.0
    return Exposure(
        cluster_queue=cluster_queue,
        preemptions=max(0, int(evictions.get("Preempted", 0))),
        failures=max(0, int(evictions.get("NodeFailures", 0))),
        admitted_seconds=max(0.0, past) + current,
        priority=priority,
    )


def hazard_evidence(exposures: Iterable[Exposure]) -> dict[str, tuple[int, float]]:
    """``(interruptions, admitted seconds)`` per ClusterQueue with any admitted time."""
    events: dict[str, int] = {}
    seconds: dict[str, float] = {}
    for e in exposures:
        if not e.cluster_queue:
            continue
        events[e.cluster_queue] = events.get(e.cluster_queue, 0) + e.interruptions
        seconds[e.cluster_queue] = seconds.get(e.cluster_queue, 0.0) + e.admitted_seconds
    return {cq: (events[cq], t) for cq, t in seconds.items() if t > 0.0}


def hazard_evidence_by_priority(exposures: Iterable[Exposure]) -> dict[tuple[str, int], tuple[int, float]]:
    """``(interruptions, admitted seconds)`` per ClusterQueue and priority with any admitted time."""
    events: dict[tuple[str, int], int] = {}
    seconds: dict[tuple[str, int], float] = {}
    for e in exposures:
        if not e.cluster_queue:
            continue
        key = (e.cluster_queue, e.priority)
        events[key] = events.get(key, 0) + e.interruptions
        seconds[key] = seconds.get(key, 0.0) + e.admitted_seconds
    return {key: (events[key], t) for key, t in seconds.items() if t > 0.0}


def hazard_by_queue(exposures: Iterable[Exposure]) -> dict[str, float]:
    """Interruptions per admitted second (maximum likelihood), per ClusterQueue with admitted time."""
    return rates_of(hazard_evidence(exposures))


def rates_of(evidence: Mapping[str, tuple[int, float]]) -> dict[str, float]:
    return {cq: k / t for cq, (k, t) in evidence.items() if t > 0.0}


def queue_hazard(
    cluster_queue: str | None,
    *,
    evidence: Mapping[str, tuple[int, float]],
    rates: Mapping[str, float],
    default_per_s: float,
) -> float:
    """The hazard a rule should plan for on ``cluster_queue``, per second of admission: the
    posterior mean ``(k + 1) / (T + 1 / default)`` from the queue's evidence; an adapter's bare
    rate where it gave no evidence; else the default."""
    found = evidence.get(cluster_queue or "")
    if found is not None:
        k, t = found
        if default_per_s > 0 and math.isfinite(default_per_s):
            return _shrunk(default_per_s, k, t)
        return k / t if t > 0 else 0.0
    rate = rates.get(cluster_queue or "")
    if rate is not None and math.isfinite(rate) and rate >= 0:
        return rate
    return default_per_s


def _shrunk(prior_rate: float, events: int, seconds: float) -> float:
    """The Gamma-Poisson posterior mean with a prior worth one interruption at ``prior_rate``,
    and never below the rate the evidence alone makes most likely, ``(k - 1) / T`` (the mode of
    the posterior under a flat prior; 0 for a single interruption, which the prior still weighs).

    Why the floor: a prior worth one interruption at a low rate is worth a long exposure (10
    hours at 0.1 an hour), and the mean takes about that long to follow the data whatever they
    say. A low-priority job preempted six times in seven minutes of running planned for an MTBF
    of 2.5 minutes through three levels of such priors, an interval longer than its runs between
    evictions: it never checkpointed, and lost all its work at every eviction."""
    k, t = max(0, events), max(0.0, seconds)
    mean = (k + 1.0) / (t + 1.0 / prior_rate)
    if k >= 2 and t > 0.0:
        return max(mean, (k - 1.0) / t)
    return mean


def priority_hazard(
    queue_rate: float,
    cluster_queue: str | None,
    priority: int,
    evidence: Mapping[tuple[str, int], tuple[int, float]],
) -> float:
    """The hazard of the workloads of ``priority`` on ``cluster_queue``: their interruptions over
    their admitted time, with the queue's rate as the prior worth one interruption (the same update
    as ``queue_hazard``, one level down). Why: Kueue evicts the lowest priority first, so a queue's
    pooled rate understates what its low-priority workloads meet when its high-priority ones hold
    most of the admitted time untouched (a platform trial: a fresh low-priority job planned for an
    MTBF of 24 minutes, diluted by such jobs, while its siblings were evicted every few minutes),
    and overstates it for the high-priority ones. With no evidence at that priority, the queue's."""
    if not (queue_rate > 0.0 and math.isfinite(queue_rate)):
        return queue_rate
    found = evidence.get((cluster_queue or "", priority))
    if found is None:
        return queue_rate
    return _shrunk(queue_rate, found[0], found[1])


def workload_hazard(queue_rate: float, workload: WorkloadView | None, now: float) -> float:
    """The hazard one workload plans for: its own interruptions over its own admitted time, with
    its queue's rate as the prior worth one interruption, ``(k + 1) / (T + 1 / queue_rate)``.

    Why not the queue's rate alone: Kueue does not pick victims at random. It evicts the lowest
    priority first and, among equals, the workload admitted last, and a preempted workload comes
    back as the newest one, first in line again; a workload that ran for hours with no eviction
    stands behind the ones admitted since. So the queue's average overstates the hazard of the
    settled workloads and understates that of the ones it keeps evicting. The same Gamma-Poisson
    update as ``queue_hazard``, one level down: with no admitted time it is the queue's rate, and a
    workload's own record takes over as it grows (a day at a queue rate of 0.1/h without an
    eviction halves it; two evictions in an hour nearly triple it)."""
    if workload is None or not (queue_rate > 0.0 and math.isfinite(queue_rate)):
        return queue_rate
    return _shrunk(queue_rate, workload.interruptions, admitted_seconds(workload, now))


def admitted_seconds(workload: WorkloadView, now: float) -> float:
    """The seconds ``workload`` has held an admission: its past admissions plus the current one."""
    exposure = max(0.0, workload.past_admitted_seconds)
    if workload.admitted and workload.admitted_at is not None:
        exposure += max(0.0, now - workload.admitted_at)
    return exposure
