"""What the core loop remembers about one job (``JobRecord``), the readings it takes off it, and
its persisted form (``record_to_dict`` / ``record_from_dict``: the TrainJobForecast status the
controller writes and reads back after a restart, the report's job state).

Split from ``advisor.core.loop``: the loop decides when to observe, forecast and ask the policies;
this module is the state it does that on.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from advisor.core.codec import (
    action_from_dict,
    action_to_dict,
    checkpoint_from_dict,
    checkpoint_to_dict,
    finite_or_none,
    forecast_from_dict,
    forecast_to_dict,
    int_or_none,
)
from advisor.core.history import History
from advisor.core.lifecycle import derive_phase
from advisor.core.saves import ResumeCheck
from advisor.model import (
    ActionKind,
    ActionRecord,
    CheckpointState,
    Decision,
    Forecast,
    JobView,
    LearningState,
    LifecycleSignals,
    Phase,
)
from advisor.protocol import DEFAULT_CHECKPOINT_TIMEOUT_S

__all__ = [
    "MAX_ACTIONS_KEPT",
    "JobRecord",
    "arrival_bounded",
    "drop_orphaned_request",
    "drop_pending_request",
    "expire_checkpoint",
    "loss_at_checkpoint",
    "note_phase",
    "record_from_dict",
    "record_learning_state",
    "record_to_dict",
    "report_interval",
    "set_outcome",
    "trim_actions",
]

#: actions kept per job (older ones only matter for caps/cooldowns, which look back an hour or so)
MAX_ACTIONS_KEPT = 50


@dataclass
class JobRecord:
    """Everything the loop remembers about one job; persisted by the adapter (``dump``)."""

    history: History
    total_steps: int | None = None
    forecast: Forecast | None = None
    forecast_at: float | None = None
    #: the run's learning state as of the latest forecast (its eval series' forecasts included)
    learning: LearningState | None = None
    #: the state as last judged while the run was running (``hung`` read at that look's time): what
    #: a run that no longer runs keeps (one released as hung read "learning, hung 0" afterwards)
    judged_learning: LearningState | None = None
    fresh_data: bool = False
    checkpoint: CheckpointState = field(default_factory=CheckpointState)
    actions: list[ActionRecord] = field(default_factory=list)
    rule_state: dict[str, float] = field(default_factory=dict)
    #: the policy whose rules opened the windows in ``rule_state`` (None: unknown, as in records of
    #: older versions): another policy taking the job over opens its own
    rule_state_policy: str | None = None
    #: the eval series the run declares it is judged by (``ProgressSample.judged_by``; None: none
    #: declared): the run state judges it, and no task's score beside it
    declared_metric: str | None = None
    first_seen: float | None = None
    last_step_change: float | None = None
    last_sample_time: float | None = None
    #: the adapter's clock when new progress last arrived (the reporter's own time may be skewed)
    progress_seen_at: float | None = None
    #: when the latest report whose step could not be read arrived (None after a readable one)
    unreadable_report_at: float | None = None
    throughput: dict[int, float] = field(default_factory=dict)
    last_decision: Decision | None = None
    sample_warnings: int = 0
    #: the warnings of the latest report (empty when it was read cleanly): what to tell the user
    #: when reports arrive but none is usable
    last_warnings: tuple[str, ...] = ()
    #: the eviction whose save on SIGTERM is being verified (see ``advisor.core.saves``)
    resume: ResumeCheck = field(default_factory=ResumeCheck)
    runtime: str | None = None
    #: the job's size as the adapter last showed it (what its throughput and saves were measured at)
    gpus: int = 0
    nodes: int = 1
    #: the save window the runtime pool last took: ``(gpus, ceil(step + save))``, None without one
    pooled_window: tuple[int, int] | None = None
    #: the lifecycle phase last derived, and when it was entered (see ``advisor.core.lifecycle``)
    phase: Phase = Phase.RUNNING
    phase_since: float | None = None
    phase_reason: str = ""
    #: when the job last ran again after a phase that was not running (resumed, re-admitted):
    #: it has been idle since then at most
    running_again_at: float | None = None
    #: step distance between the last reports (a run logging every N steps ends up to N short)
    report_gap: int = 0
    #: the latest progress percentage any sample reported (the final one may carry no step)
    progress_percentage: float | None = None
    #: a step reported past the history's last point by reports with no usable loss (None when
    #: the history is current): the run advances while its loss cannot be read
    reported_step: int | None = None
    _rate_anchor: tuple[int, float, int] | None = None  # (step, time, nodes) of the last rate measurement
    _ack_seen: str | None = None  # the last checkpoint request id the job reported (counted once)
    _arrival_floor: float | None = None  # when progress arrived before the current arrival
    #: what the eval forecasts of ``learning`` were made from (``eval_fingerprint``)
    _evals_key: tuple[Any, ...] | None = None

    @property
    def step(self) -> int:
        last = self.history.last
        logged = last.step if last is not None else 0
        return max(logged, self.reported_step) if self.reported_step is not None else logged


#: reports around the checkpoint's step whose median is the loss it saved (one report is noisy)
_CHECKPOINT_REPORTS = 3


def loss_at_checkpoint(rec: JobRecord) -> float | None:
    """The median loss of the last reports at or before the last checkpoint's step, when that
    checkpoint is behind the latest report (the history's newest points come first, so a recent
    checkpoint is found within a few points)."""
    ckpt = rec.checkpoint.last_step
    if ckpt is None or ckpt >= rec.step:
        return None
    found: list[float] = []
    for point in reversed(rec.history.points):
        if point.step <= ckpt and math.isfinite(point.loss):
            found.append(point.loss)
            if len(found) == _CHECKPOINT_REPORTS:
                break
    if not found:
        return None
    found.sort()
    return found[len(found) // 2]


def arrival_bounded(reported: float, arrived_before: float | None, now: float) -> float:
    """When a new report was made, on the advisor's clock: the reporter's time, but no later than
    its arrival (``now``) and no earlier than the previous arrival of progress, after which it was
    made. The first reports of a job, with no earlier arrival, are taken at their word (but no
    later than ``now``); for a Kueue job the stall rule is bounded by the admission time anyway.

    Why: the stall rule and the lifecycle measure "no step advance for 30 minutes" against
    ``now``; a training pod whose clock runs ten minutes behind would otherwise look stuck for ten
    minutes at every report, and one ten minutes ahead could never look stuck. Throughput is still
    measured on the reporter's own timestamps (a constant skew cancels out of their differences).
    An adapter that delivers reports in batches (the simulator, the back-test) dates each at its
    own time: they were all made after the previous batch arrived."""
    at = min(reported, now)
    return at if arrived_before is None else max(at, min(arrived_before, now))


def report_interval(rec: JobRecord) -> float | None:
    """The run's usual time between reports: the median gap of its latest points."""
    return median_gap([p.time for p in rec.history.points[-21:]])


def median_gap(times: Sequence[float | None]) -> float | None:
    """The median of the positive gaps between consecutive known times (None without one): how
    often a run reports, read the same from a job's history and from a log file."""
    known = [t for t in times if t is not None]
    gaps = sorted(b - a for a, b in itertools.pairwise(known) if b > a)
    return gaps[len(gaps) // 2] if gaps else None


def eval_fingerprint(rec: JobRecord) -> tuple[Any, ...]:
    """What a run's eval forecasts depend on beyond the learning rates at past eval steps: each
    series' length, last point and direction, the planned steps and the directions in force."""
    evals = rec.history.evals
    parts: list[Any] = [rec.total_steps, tuple(sorted(evals.overrides.items())), rec.declared_metric]
    for name in evals.names:
        s = evals.current(name)
        if s is not None:
            parts.append(
                (
                    name,
                    len(s),
                    s.steps[-1] if s.steps else None,
                    s.values[-1] if s.values else None,
                    s.direction,
                )
            )
    return tuple(parts)


def record_learning_state(rec: JobRecord, now: float | None) -> LearningState:
    """The run's learning state from its forecast and eval series (``advisor.forecast.state``).

    The eval forecasts are made again only when an eval series changed (a new evaluation, new
    planned steps, a policy's direction): a new training-loss forecast alone reuses them, as a
    re-read for ``now`` (the time since the last step) does. A fine-tune evaluates every few
    hundred steps while its training loss is re-forecast at every look."""
    from advisor.forecast.state import at_last_step, learning_state

    evals = rec.history.evals
    series = {name: s for name in evals.names if (s := evals.current(name)) is not None}
    since = rec.last_step_change
    if since is not None and rec.phase is Phase.RUNNING and rec.running_again_at is not None:
        # idle since it runs again at the latest: a run resumed a second ago is starting, not
        # hung (suspended for an hour, it read "hung, p=1.00" with a Warning at its resume)
        since = max(since, rec.running_again_at)
    idle = None if now is None or since is None else max(0.0, now - since)
    if rec.unreadable_report_at is not None:
        idle = None  # reports arrive with no readable step: not known to be stuck (as the stall rule)
    key = eval_fingerprint(rec) if now is None else rec._evals_key
    reuse = rec.learning is not None and (now is not None or key == rec._evals_key)
    rec._evals_key = key
    points = rec.history.points
    # the eval series are forecast with the run's learning rate at their steps (see ``state``)
    schedule = None if reuse else ([p.step for p in points], [p.learning_rate for p in points])
    return learning_state(
        rec.forecast,
        series,
        total_steps=rec.total_steps,
        idle_s=idle,
        report_interval_s=report_interval(rec),
        forecast_all=True,
        series_forecasts=rec.learning.series if reuse and rec.learning is not None else None,
        schedule=schedule,
        metric_directions=evals.overrides,
        previous_label=rec.learning.label if rec.learning is not None else None,
        train_history=(
            _train_history(rec) if rec.forecast is not None and at_last_step(rec.forecast) else None
        ),
        declared=rec.declared_metric,
    )


def _train_history(rec: JobRecord) -> tuple[list[float], list[float]]:
    points = rec.history.points
    return [float(p.step) for p in points], [p.loss for p in points]


def record_to_dict(rec: JobRecord) -> dict[str, Any]:
    """JSON-safe state of one job (``AdvisorCore.dump``)."""
    return {
        "history": rec.history.to_dict(),
        "totalSteps": rec.total_steps,
        "forecast": forecast_to_dict(rec.forecast),
        "forecastAt": rec.forecast_at,
        "checkpoint": checkpoint_to_dict(rec.checkpoint),
        "actions": [action_to_dict(a) for a in rec.actions],
        "ruleState": {k: v for k, v in rec.rule_state.items() if math.isfinite(v)},
        "ruleStatePolicy": rec.rule_state_policy,
        "declaredMetric": rec.declared_metric,
        "firstSeen": rec.first_seen,
        "lastStepChange": rec.last_step_change,
        "lastSampleTime": rec.last_sample_time,
        "progressSeenAt": rec.progress_seen_at,
        "throughput": [{"nodes": n, "stepsPerSecond": r} for n, r in sorted(rec.throughput.items())],
        "sampleWarnings": rec.sample_warnings,
        "resume": rec.resume.to_dict(),
        "runtime": rec.runtime,
        "phase": rec.phase.value,
        "phaseSince": rec.phase_since,
        "runningAgainAt": rec.running_again_at,
        "reportGap": rec.report_gap,
        "progressPercentage": rec.progress_percentage,
    }


def record_from_dict(data: Mapping[str, Any], *, max_points: int) -> JobRecord:
    """A record from its persisted state; damaged parts are dropped, not fatal."""
    hist_data = data.get("history")
    history = (
        History.from_dict(hist_data, max_points=max_points)
        if isinstance(hist_data, Mapping)
        else History(max_points)
    )
    rec = JobRecord(history=history)
    rec.total_steps = int_or_none(data.get("totalSteps"))
    rec.forecast = forecast_from_dict(data.get("forecast"))
    rec.forecast_at = finite_or_none(data.get("forecastAt"))
    rec.checkpoint = checkpoint_from_dict(data.get("checkpoint"))
    rec.actions = [a for a in map(action_from_dict, data.get("actions") or []) if a is not None]
    state = data.get("ruleState")
    if isinstance(state, Mapping):
        rec.rule_state = {
            str(k): f for k, f in ((k, finite_or_none(v)) for k, v in state.items()) if f is not None
        }
    owner = data.get("ruleStatePolicy")
    rec.rule_state_policy = owner if isinstance(owner, str) and owner else None
    declared = data.get("declaredMetric")
    rec.declared_metric = declared if isinstance(declared, str) and declared else None
    rec.first_seen = finite_or_none(data.get("firstSeen"))
    rec.last_step_change = finite_or_none(data.get("lastStepChange"))
    rec.last_sample_time = finite_or_none(data.get("lastSampleTime"))
    rec.progress_seen_at = finite_or_none(data.get("progressSeenAt"))
    for item in data.get("throughput") or []:
        if isinstance(item, Mapping):
            nodes, rate = int_or_none(item.get("nodes")), finite_or_none(item.get("stepsPerSecond"))
            if nodes is not None and rate is not None and rate > 0:
                rec.throughput[nodes] = rate
    rec.sample_warnings = int_or_none(data.get("sampleWarnings")) or 0
    rec.resume = ResumeCheck.from_dict(data.get("resume"))
    runtime = data.get("runtime")
    rec.runtime = runtime if isinstance(runtime, str) and runtime else None
    try:
        rec.phase = Phase(str(data.get("phase") or Phase.RUNNING.value))
    except ValueError:
        rec.phase = Phase.RUNNING
    rec.phase_since = finite_or_none(data.get("phaseSince"))
    rec.running_again_at = finite_or_none(data.get("runningAgainAt"))
    rec.report_gap = max(int_or_none(data.get("reportGap")) or 0, 0)
    rec.progress_percentage = finite_or_none(data.get("progressPercentage"))
    last = history.last
    if last is not None and last.time is not None:
        rec._rate_anchor = (last.step, last.time, min(rec.throughput) if rec.throughput else 1)
    rec.fresh_data = rec.forecast is None and len(history) > 0
    if rec.forecast is not None:
        rec.learning = record_learning_state(rec, None)  # from the restored history: nothing is lost
    return rec


def note_phase(rec: JobRecord, job: JobView, total: int | None, now: float | None) -> None:
    """Derive the job's lifecycle phase; stamp a change with ``now`` (when the caller knows it).

    A job that starts running again (resumed, re-admitted) starts its rules' timers over: it is
    judged from its resume, not from what held before it stopped."""
    signals = job.signals
    if rec.progress_percentage is not None and (signals is None or signals.progress_percentage is None):
        base = signals if signals is not None else LifecycleSignals()
        signals = dataclasses.replace(base, progress_percentage=rec.progress_percentage)
    lc = derive_phase(
        signals,
        active=job.active,
        admitted=job.admitted,
        step=rec.step,
        total_steps=total,
        report_gap=rec.report_gap,
    )
    rec.phase_reason = lc.reason
    if lc.phase is not rec.phase or rec.phase_since is None:
        if now is None:
            return
        if lc.phase is Phase.RUNNING and rec.phase is not Phase.RUNNING:
            rec.rule_state.clear()
            rec.running_again_at = now
        rec.phase, rec.phase_since = lc.phase, now


def expire_checkpoint(rec: JobRecord, now: float) -> None:
    """Time out the job's pending checkpoint request after its timeout (the action's, else the
    protocol's default). An older request a newer one replaced as the pending one (the actuator
    still waits for its answer) times out at its own timeout too, rather than staying
    ``requested`` for good."""
    for action in rec.actions:
        if (
            action.kind is ActionKind.CHECKPOINT
            and action.outcome == "requested"
            and action.request_id != rec.checkpoint.pending_request
            and now - action.time
            >= (action.timeout_s if action.timeout_s is not None else DEFAULT_CHECKPOINT_TIMEOUT_S)
        ):
            set_outcome(rec, action.request_id, "timed-out")
    cp = rec.checkpoint
    if cp.pending_request is None or cp.pending_since is None:
        return
    timeout = DEFAULT_CHECKPOINT_TIMEOUT_S
    for action in reversed(rec.actions):
        if action.request_id == cp.pending_request:
            timeout = action.timeout_s if action.timeout_s is not None else timeout
            break
    if now - cp.pending_since >= timeout:
        set_outcome(rec, cp.pending_request, "timed-out")
        rec.checkpoint = dataclasses.replace(cp, pending_request=None, pending_since=None)


def drop_pending_request(rec: JobRecord, why: str) -> None:
    """Give up the job's pending checkpoint request, recorded ``dropped`` with ``why``: the pods it
    was written on are gone (the workload was evicted or lost its admission, or the run
    restarted), so no process will ever answer it, and while it stays pending no rule asks again
    (the preemption guard said "a checkpoint is already requested" until its timeout). An answer
    that comes anyway still counts as a checkpoint (``readings.note_checkpoint``)."""
    cp = rec.checkpoint
    if cp.pending_request is None:
        return
    set_outcome(rec, cp.pending_request, "dropped", detail=why)
    rec.checkpoint = dataclasses.replace(cp, pending_request=None, pending_since=None)


def set_outcome(
    rec: JobRecord, request_id: str, outcome: str, *, detail: str | None = None, at: float | None = None
) -> bool:
    """Set the outcome (and detail) of the job's latest action with ``request_id``; ``at``: when it
    was carried out, if later than it was decided (a restart finished it), from which its cooldown
    runs."""
    for i in range(len(rec.actions) - 1, -1, -1):
        if rec.actions[i].request_id == request_id:
            changed = dataclasses.replace(rec.actions[i], outcome=outcome)
            if detail is not None:
                changed = dataclasses.replace(changed, detail=detail)
            if at is not None and at > changed.time:
                changed = dataclasses.replace(changed, time=at)
            rec.actions[i] = changed
            return True
    return False


_BOOST_WRITES = frozenset({ActionKind.BOOST_PRIORITY, ActionKind.DROP_BOOST})


def trim_actions(actions: list[ActionRecord]) -> None:
    """Keep the newest ``MAX_ACTIONS_KEPT`` actions, and the latest boost write among the older:
    it is how the advisor knows a boost on the Workload is its own to remove
    (``policies.cleanup``), and a standing boost can outlive fifty checkpoints."""
    if len(actions) <= MAX_ACTIONS_KEPT:
        return
    boost = next(
        (
            a
            for a in reversed(actions)
            if a.kind in _BOOST_WRITES and a.outcome not in ("failed", "impossible")
        ),
        None,
    )
    del actions[:-MAX_ACTIONS_KEPT]
    if boost is not None and boost not in actions:
        actions[0] = boost  # oldest first: it replaces the oldest kept


def drop_orphaned_request(rec: JobRecord, admission: float | None, admitted_at: float | None) -> None:
    """Drop a pending checkpoint request whose pods are gone: the job no longer runs on its
    admission (evicted, deactivated, suspended, finished or failed), or it was admitted again
    since the request (``admission``: the admission the loop knew before this look, under which
    any pending request was made). The new pods never saw the request and cannot answer it."""
    if rec.checkpoint.pending_request is None:
        return
    if rec.phase is Phase.PENDING:
        drop_pending_request(rec, f"the workload was evicted or lost its admission ({rec.phase_reason})")
    elif rec.phase is Phase.SUSPENDED:
        # a suspended TrainJob keeps its Workload's admission for a while: its pods are what went
        drop_pending_request(rec, f"the job's pods were stopped ({rec.phase_reason})")
    elif rec.phase in (Phase.FINISHED, Phase.FAILED):
        # its pods are done: no one will answer (it timed out with a Warning on a finished job)
        drop_pending_request(rec, f"the job {rec.phase.value} ({rec.phase_reason})")
    elif admission is not None and admitted_at is not None and admitted_at > admission:
        drop_pending_request(rec, "the workload was admitted again since the request (new pods)")
