"""What the engine keeps of each job it follows, what a watch event of the job changes in it, and
when the job is due its full evaluation.

A job's watch events arrive far more often than its forecast may be redone, so the engine keeps,
per job, what tells it whether the next step owes the job the full evaluation (forecast, policies,
actions) or only the cheap render of its latest sample with the last decision: the flags set by
what changed (new progress, a policy, a Workload, a restart), the times of the last evaluation
and of the last update, and the last decision with its ``recheck_at``; a watch event sets them
(``observe_job_event``). Kept apart from the engine so that the rule (``evaluation_due``) reads on
its own and the engine's collaborators (``PolicyEvents``) share the one job type.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from advisor.controller.actuator import Actuator
from advisor.controller.jobevents import JobEvents
from advisor.controller.jobs import TRAINJOB, base_view
from advisor.controller.metrics import Metrics
from advisor.core import AdvisorCore
from advisor.model import Decision, LifecycleSignals
from advisor.sources.lifecycle import job_signals

__all__ = ["TrackedJob", "evaluation_due", "observe_job_event", "other_kind_of_name"]

log = logging.getLogger(__name__)


@dataclass
class TrackedJob:
    body: Mapping[str, Any]
    dirty: bool = True
    unwritten_since: float | None = None  # when the oldest data not yet in a written status was observed
    last_eval: float | None = None
    last_decision: Decision | None = None
    restored: bool = False
    needs_eval: bool = True  # something besides progress changed (policy, Workload, restart)
    last_update: float | None = None  # when new progress last arrived
    applied_wall: float | None = None  # wall clock when the oldest unwritten data was applied
    signals: LifecycleSignals | None = None  # the job's own lifecycle signals as last seen
    written: float = -math.inf  # when its status was last submitted for writing (the heartbeat's)
    #: the status last handed to the writer or persisted before an action (None: none yet): what a
    #: re-evaluation that says nothing new is compared with, so that it is not written again
    written_status: Mapping[str, Any] | None = None
    #: the policies that select it (``policies.selection.selecting``) at its last evaluation; None
    #: before the first: what each policy's ``jobsSelected`` counts
    selected: tuple[str, ...] | None = None
    #: when a progress report's warnings were last logged, and how many reports with new ones
    #: were not logged since (``WARNING_LOG_INTERVAL_S``)
    warned_at: float | None = None
    warnings_unlogged: int = 0


def evaluation_due(
    key: str,
    job: TrackedJob,
    now: float,
    *,
    interval_s: float,
    core: AdvisorCore,
    actuator: Actuator,
) -> bool:
    """Whether ``key`` needs the full evaluation (forecast + policies) now. New progress alone
    does not: the forecast is rate-limited per job, and the decision only changes with it, with
    time (``recheck_at``, ``interval_s``: the engine's ``evaluate_interval_s``) or with the cluster
    and policies."""
    if job.needs_eval or job.last_eval is None:
        return True
    # every interval: an idle job at once (stalls, timeouts), one that reports with its next
    # update, so that the evaluation goes out in the write that update needs anyway
    if now - job.last_eval >= interval_s and (
        job.dirty or now - (job.last_update or -math.inf) >= interval_s
    ):
        return True
    decision = job.last_decision
    if decision is not None and any(
        t is not None and now >= t for t in (decision.recheck_at, decision.idle_recheck_at)
    ):
        return True
    if not job.dirty:
        return False
    rec = core.record(key)
    if rec is None:
        return True
    if rec.fresh_data and (rec.forecast_at is None or now - rec.forecast_at >= core.forecast_interval_s):
        return True  # a new forecast is due
    last = rec.history.last
    if last is not None and not math.isfinite(last.loss):
        # the divergence rule counts non-finite reports in a row: each is evidence, judged as it
        # comes (on the cheap path a third NaN report 2 s after the first went unjudged, and the
        # streak was over by the next forecast)
        return True
    # a checkpoint or an action in progress: its acknowledgement may be in this sample
    return rec.checkpoint.pending_request is not None or bool(actuator.pending_for(key))


def observe_job_event(
    key: str,
    job: TrackedJob,
    body: Mapping[str, Any],
    now: float,
    *,
    core: AdvisorCore,
    metrics: Metrics,
    received: float,
) -> None:
    """What a watch event of job ``key`` (received at ``received``, wall clock) brings to it: its
    object, its lifecycle signals (a change re-judges the job) and its progress sample, observed
    by the core. New progress makes the job ``dirty`` (shown at this step) and starts the clocks of
    its data not yet written; a report that could not be read, or only in part, is logged once per
    new reason and re-judges the job, so that its status says why."""
    from advisor.sources import sample_from_object

    job.body = body
    signals = job_signals(body)
    if signals != job.signals:  # completed, failed, suspended: the decision changes with it
        job.signals = signals
        job.needs_eval = True
    sample = sample_from_object(body, now=now)
    if sample is None:
        return
    nodes = base_view(body).nodes
    rec = core.record(key)
    warned_before = rec.last_warnings if rec is not None else ()
    if core.observe(key, sample, now=now, nodes=nodes):
        metrics.samples.labels("new").inc()
        job.dirty = True
        job.last_update = now
        job.unwritten_since = now if job.unwritten_since is None else job.unwritten_since
        if job.applied_wall is None:
            job.applied_wall = time.time()
        if sample.time is not None and 0.0 <= received - sample.time < 86400.0:
            metrics.pipeline.labels("watch").observe(max(0.0, received - sample.time))
        used = True
    else:
        metrics.samples.labels("ignored").inc()
        used = False
    if sample.warnings and tuple(sample.warnings) != warned_before:
        # part of the report (a loss written as "tensor(1.2)") or all of it could not be read,
        # and not for the reason given last time: the status says why at once, the log once per
        # ``WARNING_LOG_INTERVAL_S`` (a reporter alternating two kinds of garbage wrote a line
        # per report, 296 in five minutes) with a count of those not logged
        job.dirty = job.needs_eval = True
        if job.warned_at is not None and now - job.warned_at < WARNING_LOG_INTERVAL_S:
            job.warnings_unlogged += 1
        else:
            what = "partly unusable" if used else "not usable"
            more = (
                f" ({job.warnings_unlogged} more report(s) with new warnings since the last line)"
                if job.warnings_unlogged
                else ""
            )
            log.warning("%s: progress report %s: %s%s", key, what, "; ".join(sample.warnings), more)
            job.warned_at, job.warnings_unlogged = now, 0
    if sample.warnings:
        metrics.samples.labels("with-warnings").inc()


#: at most one log line of a job's progress warnings in this long (its status says each at once)
WARNING_LOG_INTERVAL_S = 600.0


def other_kind_of_name(
    key: str,
    tracked: TrackedJob | None,
    body: Mapping[str, Any],
    shadowed: set[tuple[str, str]],
    events: JobEvents,
) -> bool:
    """Whether ``body`` is a job of another kind than the one tracked under its name (a TrainJob
    and a PyTorchJob named alike in one namespace, as in a migration from Training Operator v1 to
    Trainer v2). One TrainJobForecast and one history per name: the kind seen first keeps them,
    and the other is not advised, said once (``shadowed``) in the log and in an Event on it. The
    two were merged: one history interleaving both runs' reports, read as a dozen restarts, and
    the deletion of either forgot both."""
    if tracked is None:
        return False
    kind = str(body.get("kind") or TRAINJOB.kind)
    mine = str(tracked.body.get("kind") or TRAINJOB.kind)
    if kind == mine:
        return False
    if (key, kind) not in shadowed:
        shadowed.add((key, kind))
        why = (
            f"a {mine} named {key} is advised already: this {kind} of the same name is not "
            "(one TrainJobForecast per name); rename one of them to have both advised"
        )
        log.warning("%s: %s", key, why)
        events.post(base_view(body), body, "NotAdvised", why, warning=True)
    return True
