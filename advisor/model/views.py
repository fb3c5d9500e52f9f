"""What policies see of a job and the cluster (``JobView``, ``ClusterView`` and the views in them):
the snapshot the core loop builds for every decision, the same in the controller, the simulator
and the back-test. What policies return, and the action log a ``JobView`` carries, is
``advisor.model.actions``.

Plain data, like all of ``advisor.model``: no I/O, no clock, no numpy.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from advisor.model.actions import ActionRecord, CheckpointState
from advisor.model.progress import Forecast, LearningState

__all__ = [
    "ClusterQueueView",
    "ClusterView",
    "JobView",
    "LifecycleSignals",
    "Phase",
    "ReportSight",
    "WorkloadView",
    "holds_quota",
    "job_key",
    "latest_report",
    "save_window_seconds",
    "seconds_per_step",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def job_key(namespace: str, name: str) -> str:
    """The one spelling of a job's identity across layers: ``namespace/name``."""
    return f"{namespace}/{name}"


def seconds_per_step(throughput: Mapping[int, float], nodes: int, forecast: Forecast | None) -> float | None:
    """Seconds one step takes at ``nodes``: the throughput measured at that size, else the
    forecast's (None when neither is a positive finite rate)."""
    rate = throughput.get(nodes)
    if rate is None and forecast is not None:
        rate = forecast.steps_per_second
    if rate is None or not math.isfinite(rate) or rate <= 0:
        return None
    return 1.0 / rate


def save_window_seconds(step: float, save: float) -> int:
    """The grace period a save on SIGTERM needs, in whole seconds: the step under way plus a save."""
    return math.ceil(step + save)


class Phase(enum.StrEnum):
    """Where a job is in its life, as the cluster says (``advisor.core.lifecycle`` derives it).

    Only a ``RUNNING`` job is judged: the others keep their forecast and history and get no action.
    """

    PENDING = "pending"
    """Waiting for quota: queued, or evicted and requeued (no admitted Workload)."""
    RUNNING = "running"
    SUSPENDED = "suspended"
    """Held on purpose: TrainJob suspended, or its Workload deactivated (``spec.active=false``)."""
    FINISHED = "finished"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class LifecycleSignals:
    """What the cluster says about a job's life, each ``None`` when nobody said.

    The controller reads them from the TrainJob (or PyTorchJob) conditions, its Kueue Workload and
    the RHOAI progress annotation; the simulator sets them from its model. Progress at or past the
    total is not here: the core loop knows it from the job's history.
    """

    complete: bool | None = None
    """TrainJob ``Complete`` (PyTorchJob ``Succeeded``) condition."""
    failed: bool | None = None
    """TrainJob / PyTorchJob ``Failed`` condition."""
    suspended: bool | None = None
    """TrainJob ``Suspended`` condition, or ``spec.suspend`` (``runPolicy.suspend``)."""
    has_workload: bool = False
    """Whether a Kueue Workload was found for the job (the rest of the workload fields need one)."""
    workload_active: bool | None = None
    quota_reserved: bool | None = None
    workload_admitted: bool | None = None
    evicted: bool | None = None
    eviction: str = ""
    """Why Kueue evicted the Workload, as its ``Evicted`` condition says (``Preempted: ...``;
    empty while it is not evicted)."""
    evicted_at: float | None = None
    """When the ``Evicted`` condition became true: each eviction is told once."""
    workload_finished: bool | None = None
    workload_finished_reason: str = ""
    remaining_summary: str | None = None
    """RHOAI ``estimatedRemainingTimeSummary`` (``"complete"`` once the run ended)."""
    progress_percentage: float | None = None
    """The latest reported progress percentage (the last upstream update may carry no step)."""
    deleting: bool | None = None
    """The job object carries ``metadata.deletionTimestamp``: it is being deleted (a finalizer, or
    a foreground deletion, keeps it visible meanwhile)."""


def holds_quota(phase: Phase, signals: LifecycleSignals | None, *, active: bool, admitted: bool) -> bool:
    """Whether a job holds its GPUs now: Kueue admitted its active Workload and nothing says the
    run is over. A run the trainer reports done (100%, its last step) is ``finished`` for the
    advisor, which judges it no more, but until its Complete condition or its Workload's Finished
    one, Kueue still counts its quota (a final save or upload runs on it)."""
    if not (active and admitted):
        return False
    if phase is Phase.RUNNING:
        return True
    s = signals or LifecycleSignals()
    return phase is Phase.FINISHED and not s.complete and not s.workload_finished and s.has_workload


@dataclass(frozen=True, slots=True)
class JobView:
    """A frozen snapshot of one training job, as every policy sees it."""

    namespace: str
    name: str
    kind: str = "TrainJob"
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    queue_name: str | None = None
    cluster_queue: str | None = None
    priority: int = 0
    gpus: int = 0
    nodes: int = 1
    min_nodes: int | None = None
    max_nodes: int | None = None
    fixed_nodes: int = 0
    """Nodes of ``nodes`` a resize leaves alone (a PyTorchJob's Master): a resize to N nodes
    writes N minus these workers."""
    active: bool = True
    admitted: bool = True
    started_at: float | None = None
    """When the job started, for ``minRuntime``: its creation (time queued or preempted included),
    as the controller reads ``creationTimestamp``; a simulated scenario may take its admission."""
    step: int = 0
    total_steps: int | None = None
    last_step_change: float | None = None
    last_sample_time: float | None = None
    progress_seen_at: float | None = None
    """When the adapter received the job's newest progress, on the adapter's own clock (a reporter's
    clock may be skewed): how old the evidence under the forecast is. None: the adapter did not say,
    and no rule is held back for staleness."""
    report_interval_s: float | None = None
    """The run's usual time between reports (median gap of its latest points), None when unknown."""
    unreadable_report_at: float | None = None
    """When the adapter last received a progress report it could not read a step from (a reporter
    writing garbage), on its own clock; None: none since the last readable one. Reports still
    arrive then, so the job is not known to be silent or stuck: the stall rule does not judge it."""
    backwards_reports: int = 0
    """How many of the latest reports each put the step back with no progress in between
    (``advisor.model.backwards_run``; ``MALFORMED_BACKS`` or more: malformed progress, not
    restarts). Reports still arrive and the step keeps changing: the stall rule does not judge it."""
    forecast: Forecast | None = None
    checkpoint: CheckpointState = field(default_factory=CheckpointState)
    throughput: tuple[tuple[int, float], ...] = ()
    actions: tuple[ActionRecord, ...] = ()
    rule_state: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    namespace_labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    last_loss: float | None = None
    """The latest raw loss reported (may be NaN/inf: the forecaster drops those, policies must not)."""
    non_finite_reports: int | None = None
    """How many of the latest reports in a row carry a non-finite loss (0: the latest is finite;
    None: unknown, as in a pasted job state that does not say, where the latest loss alone counts)."""
    last_finite_step: int | None = None
    """The step of the latest report with a finite loss (where a run that diverged can resume)."""
    last_finite_loss: float | None = None
    """The loss of that report."""
    lowest_loss: tuple[int, float] | None = None
    """(step, loss) of the lowest finite loss in the history: a run that blew up gradually was last
    at its best there, and a checkpoint after it may hold the blow-up's weights."""
    checkpoint_loss: float | None = None
    """The loss the run reported at its last checkpoint's step, when that checkpoint is behind the
    latest report: what a release keeps (None when unknown, or when the checkpoint is current)."""
    progress_warnings: tuple[str, ...] = ()
    """What the reader of the latest progress report could not use (filled in by the core loop):
    a job that reports but whose reports carry nothing usable says why; and what the history left
    out of the reports (``History.interleaving_note``)."""
    learning_state: LearningState | None = None
    """The run's learning state from all its series (None before its first forecast)."""
    admitted_at: float | None = None
    """When Kueue admitted the job's Workload this time (None when unknown or not admitted): a rule
    that measures time since admission reads it here instead of searching the cluster snapshot."""
    grace_period_s: float | None = None
    """The pods' ``terminationGracePeriodSeconds`` (the time between SIGTERM and SIGKILL on an
    eviction), None when the adapter does not know it."""
    runtime: str | None = None
    """The training runtime the job runs on (a TrainJob's ``spec.runtimeRef.name``), if known."""
    runtime_sigterm: tuple[int, int] = (0, 0)
    """``(saves, misses)`` on SIGTERM seen on the *other* jobs of the same runtime (filled in by the
    core loop): the prior for a job that has not been evicted yet."""
    runtime_save_windows: tuple[tuple[int, float, float], ...] = ()
    """``(gpus, seconds per step, seconds per save)`` measured on the jobs of the same runtime, live
    ones first, then the deleted ones latest first (filled in by the core loop, bounded): what a
    save on SIGTERM needs on jobs like
    this one, before it has measured its own (a job's own measure is among them once it has one)."""
    signals: LifecycleSignals | None = None
    """What the adapter read of the job's life (None: only ``active`` / ``admitted`` are known)."""
    phase: Phase = Phase.RUNNING
    """The lifecycle phase the core loop derived (``advisor.core.lifecycle``); policies judge only
    a ``RUNNING`` job that is active and admitted."""
    phase_reason: str = ""
    phase_since: float | None = None
    """When the job entered ``phase`` as the core loop saw it (a resumed job is judged from here)."""

    workload_boost: int | None = None
    """The ``priority-boost`` annotation on the job's Workload, finished ones included (None: no
    Workload known); the cluster snapshot leaves finished Workloads out."""

    version: str = ""
    """The identity and generation of the job and of its Workload, as the adapter read them: an
    action found impossible on one version is tried again only on another (a Workload appeared,
    the spec changed)."""

    @property
    def key(self) -> str:
        return job_key(self.namespace, self.name)

    @property
    def holds_quota(self) -> bool:
        """Whether the job holds its GPUs now (``holds_quota``)."""
        return holds_quota(self.phase, self.signals, active=self.active, admitted=self.admitted)


@dataclass(frozen=True, slots=True)
class ClusterQueueView:
    """One Kueue ClusterQueue reduced to GPUs (ResourceFlavors folded into one count)."""

    name: str
    cohort: str | None = None
    nominal_gpus: int = 0
    borrowing_limit: int | None = None
    lending_limit: int | None = None
    usage_gpus: int = 0
    within_cluster_queue: str = "Never"  # Never | LowerPriority | LowerOrNewerEqualPriority
    reclaim_within_cohort: str = "Never"  # Never | LowerPriority | Any
    borrow_within_cohort: str = "Never"  # Never | LowerPriority
    borrow_max_priority_threshold: int | None = None
    queueing_strategy: str = "BestEffortFIFO"


@dataclass(frozen=True, slots=True)
class WorkloadView:
    """One Kueue Workload (admitted or pending)."""

    namespace: str
    name: str
    cluster_queue: str
    gpus: int
    priority: int = 0
    admitted: bool = False
    active: bool = True
    job: str | None = None  # job_key of the owning job, when known
    admitted_at: float | None = None
    created_at: float | None = None
    priority_boost: int = 0
    interruptions: int = 0
    """Its evictions that cost unsaved work (``Preempted`` and ``NodeFailures``, as the queue's
    hazard counts them: ``policies.hazard``)."""
    past_admitted_seconds: float = 0.0
    """Seconds it held an admission before the current one (Kueue's
    ``accumulatedPastExecutionTimeSeconds``): with ``admitted_at``, its own exposure."""
    uid: str = ""
    """Its ``metadata.uid``: Kueue orders preemption candidates tied on priority and admission
    time by it (``CandidatesOrdering``), and a batch admitted in the same second (a sweep) ties."""


def latest_report(sample_time: float | None, unreadable_at: float | None) -> float | None:
    """When a job last reported progress of any kind, readable (``sample_time``) or not
    (``unreadable_at``); None: never. What the stall rule measures a silence from, for the job it
    judges and for every other one (``ReportSight``)."""
    times = [t for t in (sample_time, unreadable_at) if t is not None]
    return max(times) if times else None


class ReportSight(Protocol):
    """Where every running job an adapter tracks stands with its progress reports: what one job's
    view cannot see, when many jobs fall silent at once (``policies.shared_silence``)."""

    def latest_reports(self) -> Iterable[tuple[str, float]]:
        """``(job key, time of its latest progress report, readable or not)`` of every running job
        that has reported, read at the moment of the call."""
        ...


@dataclass(frozen=True, slots=True)
class ClusterView:
    """A frozen snapshot of the quota side of the cluster."""

    cluster_queues: Mapping[str, ClusterQueueView] = field(default_factory=lambda: _EMPTY)
    workloads: tuple[WorkloadView, ...] = ()
    preemption_rate: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    """Observed evictions (preemptions + failures) per workload-second, per ClusterQueue."""
    hazard_evidence: Mapping[str, tuple[int, float]] = field(default_factory=lambda: _EMPTY)
    """``(preemptions + node failures, admitted seconds)`` per ClusterQueue (``policies.hazard``)."""
    priority_hazard_evidence: Mapping[tuple[str, int], tuple[int, float]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    """The same per ClusterQueue and workload priority (``policies.hazard.priority_hazard``)."""
    priority_boost_enabled: bool = False
    policy_action_times: Mapping[str, tuple[float, ...]] = field(default_factory=lambda: _EMPTY)
    """Times of the disruptive actions (release-quota, stop, scale) each policy (by name) took
    recently, on any job: for the per-policy cap of actions per hour, which a one-job view cannot
    see. Checkpoints and priority boosts are not counted (they have their own pacing)."""
    api_unreachable_since: float | None = None
    """Since when the adapter has failed to reach the API server (writes refused or timed out, no
    answer since); None: it reaches it. While it does not, a job's silence is the adapter's own
    blindness, not the job's: the stall rule does not judge it."""
    api_sight_since: float | None = None
    """When the adapter last reached the API server again after failing to (None: no break seen):
    a job's silence is not counted from before it, since reports could not arrive meanwhile."""
    report_sight: ReportSight | None = None
    """Every running job's latest progress report (the core loop's records; None: not known): a
    silence most running jobs share is the progress path's, not each job's (the stall rule)."""
