"""What one progress report changes in a job's record (``AdvisorCore.observe``).

A report is read whole, even when its loss is a duplicate: its warnings, its total steps, its
checkpoint acknowledgement (the training process may report the ack on its own), a restart (the
step went back: the abandoned attempt's forecast and pending request are dropped), malformed
progress (the step went back report after report: the forecast that read those steps back as
restarts is dropped, and the next one says the step keeps going backwards), its time
(bounded by when it arrived), the step's last change, and the throughput at the job's size. A
report without a loss still proves the job alive and says where it is. The save window the job
measured is pooled again when it changed (``note_window``), for the grace periods the pool gives.
"""

from __future__ import annotations

import math

from advisor.core.readings import (
    Ack,
    after_step_back,
    note_checkpoint,
    note_throughput,
    take_back_rates,
)
from advisor.core.record import JobRecord, arrival_bounded, drop_pending_request, set_outcome
from advisor.core.runtime_pool import RuntimeSigtermPool, save_window
from advisor.model import ProgressSample, save_window_seconds
from advisor.sources.normalize import CLOCK_SKEW_S, UNKNOWN_STEP

__all__ = ["note_window", "observe_sample"]

#: what ``History.append`` keeps: the report is the job's latest progress
_KEPT = ("appended", "restart", "malformed", "backwards")


def observe_sample(
    rec: JobRecord, sample: ProgressSample, *, now: float, nodes: int, runtime: RuntimeSigtermPool
) -> tuple[bool, bool]:
    """Take one progress ``sample`` of the job into its record ``rec``, arrived at ``now`` from a job
    on ``nodes`` nodes; ``runtime``: the pool its save window is pooled in. Returns whether the
    sample carried anything new, and whether its acknowledgement named a request the job never
    had (forged, or another job's: ``note_checkpoint``)."""
    rec.last_warnings = tuple(sample.warnings)
    # a report with no readable step (garbage from a broken reporter) proves the reporter is
    # alive but says nothing of the run's progress: remembered, so that no rule reads the
    # reports it dropped as silence
    rec.unreadable_report_at = now if sample.step == UNKNOWN_STEP else None
    if sample.warnings:
        rec.sample_warnings += len(sample.warnings)
    pct = sample.progress_percentage
    if pct is not None and math.isfinite(pct):
        rec.progress_percentage = float(pct)
    if sample.total_steps is not None and sample.total_steps > 0:
        rec.total_steps = int(sample.total_steps)
    if sample.judged_by is not None and sample.judged_by != rec.declared_metric:
        rec.declared_metric = sample.judged_by
        rec.fresh_data = True  # the run state judges another series now
    ack, forged = note_checkpoint(rec, sample, now)
    if ack is Ack.ANSWERED and sample.last_checkpoint_request is not None:
        set_outcome(rec, sample.last_checkpoint_request, "acknowledged")
    acked = ack is not Ack.NONE
    if acked:
        note_window(rec, runtime)
    prev_step = rec.step if len(rec.history) else None
    outcome = rec.history.append(sample, times_trusted_until=now + CLOCK_SKEW_S)
    if outcome in _KEPT:
        rec.reported_step = None
    if outcome == "restart" and prev_step is not None:
        # a request not answered in this report was written on the pods of the run before
        why = f"the run restarted (its step went back from {prev_step} to {sample.step})"
        drop_pending_request(rec, why)
    when = sample.time if sample.time is not None else now
    if rec.progress_seen_at is not None and rec.progress_seen_at < now:
        rec._arrival_floor = rec.progress_seen_at  # the last arrival before this one
    at = arrival_bounded(when, rec._arrival_floor, now)
    if rec.history.last_evals_added:
        rec.fresh_data = True  # a new evaluation changes the run's learning state
    if outcome in _KEPT:
        rec.fresh_data = True
        if outcome in ("restart", "malformed"):
            # the run rolled back to a checkpoint: the forecast of the abandoned attempt says
            # nothing the policies may act on; the next look re-forecasts the new segment. Or
            # its step went back once too often for restarts: the forecast that read them so
            # goes, and the next one says the reported step keeps going backwards
            rec.forecast, rec.forecast_at, rec.learning = None, None, None
        rec.last_sample_time = at
        rec.progress_seen_at = now
        if prev_step is None or sample.step != prev_step:
            rec.last_step_change = at
        fresh = outcome == "appended" and after_step_back(rec)
        if rec.history.last_taken_back:
            take_back_rates(rec, nodes)
        elif prev_step is not None and outcome == "appended" and sample.step > prev_step and not fresh:
            rec.report_gap = sample.step - prev_step
        note_throughput(rec, sample.step, when, nodes, restart=outcome != "appended" or fresh)
        note_window(rec, runtime)
        return True, forged
    if prev_step is None and rec.reported_step is not None:
        prev_step = rec.step  # a job that reports no training loss at all: where it last was
    if (
        outcome == "invalid"
        and sample.loss is None
        and sample.step is not None
        and sample.step > (prev_step if prev_step is not None else 0)
    ):
        # progress without a loss value still proves the job is not hung, says where it is and
        # how fast it goes (a job that reports eval metrics alone is judged by them); before any
        # loss, only a step past 0 is progress (a job loading its data reports step 0 for long)
        rec.reported_step = sample.step
        rec.last_step_change = at
        rec.last_sample_time = at
        rec.progress_seen_at = now
        note_throughput(rec, sample.step, when, nodes, restart=False)
        return True, forged
    if prev_step is not None and sample.step == prev_step and (rec.last_sample_time or -math.inf) < at:
        # a newer report at the same step: the reporter is alive and the step stuck (what the
        # stall rule's reason tells from a reporter gone silent); no new progress otherwise
        rec.last_sample_time = at
    return (acked or rec.history.last_evals_added > 0), forged


def note_window(rec: JobRecord, runtime: RuntimeSigtermPool) -> None:
    """Pool the job's save window again when what a grace period is made of changed: its
    size or its step plus save in whole seconds (the EWMA of its throughput moves with every
    report; a fraction of a second of it changes no grace period)."""
    w = save_window(rec)
    key = None if w is None else (w[0], save_window_seconds(w[1], w[2]))
    if key != rec.pooled_window:
        rec.pooled_window = key
        runtime.invalidate()
