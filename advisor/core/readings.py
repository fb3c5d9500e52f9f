"""What one progress sample says besides its loss: a checkpoint saved, and how fast the run goes.

Pure functions on a ``JobRecord``, called by the core loop for every sample it observes.
"""

from __future__ import annotations

import dataclasses
import math
from enum import Enum

from advisor.core.record import JobRecord
from advisor.model import ProgressSample
from advisor.protocol import SAVE_SECONDS_METRIC

__all__ = ["THROUGHPUT_EWMA", "Ack", "acked_at", "note_checkpoint", "note_throughput", "rate"]

#: weight of the newest throughput measurement in the per-node-count moving average
THROUGHPUT_EWMA = 0.3


class Ack(Enum):
    """What a sample's checkpoint fields were."""

    NONE = "none"  # nothing new
    SAVED = "saved"  # a new checkpoint, of the job's own
    ANSWERED = "answered"  # a new checkpoint answering the pending request


def note_checkpoint(rec: JobRecord, sample: ProgressSample, now: float) -> tuple[Ack, bool]:
    """Take a sample's checkpoint acknowledgement into ``rec.checkpoint``. Returns what it was,
    and whether it named a request this job never had (forged, or another job's; counted once per
    request id, as the helper repeats its last ack in every report)."""
    step = sample.last_checkpoint_step
    request = sample.last_checkpoint_request
    cp = rec.checkpoint
    if step is None and request is None:
        return Ack.NONE, False
    answers_pending = cp.pending_request is not None and request == cp.pending_request
    forged = False
    if request is not None and request != rec._ack_seen:
        rec._ack_seen = request
        forged = not answers_pending and all(a.request_id != request for a in rec.actions)
    new_step = step is not None and step != cp.last_step
    if not (answers_pending or new_step):
        return Ack.NONE, forged
    when = acked_at(rec, step, sample, now)
    cost = cp.cost_seconds
    if answers_pending and cp.pending_since is not None:
        latency = max(0.0, when - cp.pending_since)
        cost = latency if cost is None else 0.5 * cost + 0.5 * latency
    save = sample.metrics.get(SAVE_SECONDS_METRIC)
    save_s = cp.save_seconds
    if isinstance(save, int | float) and math.isfinite(save) and save >= 0:
        # the longest recent save (halving the excess on each shorter one): the save window
        # must cover a slow save, not the average one
        save_s = float(save) if save_s is None or save >= save_s else 0.5 * (save_s + float(save))
    rec.checkpoint = dataclasses.replace(
        cp,
        save_seconds=save_s,
        last_step=step if step is not None else cp.last_step,
        last_time=when,
        cost_seconds=cost,
        pending_request=None if answers_pending else cp.pending_request,
        pending_since=None if answers_pending else cp.pending_since,
    )
    return (Ack.ANSWERED if answers_pending and request is not None else Ack.SAVED), forged


def acked_at(rec: JobRecord, step: int | None, sample: ProgressSample, now: float) -> float:
    """When the save a report acknowledges was made: the report's time, unless the job has gone
    on well past the saved ``step`` since the last report seen (a controller down, reports not
    seen): then the time the job reached the step after it by one report gap (the report that
    would have carried the acknowledgement), read between the last report seen and this one.

    Dated at the report that first carries it, a checkpoint saved before a controller's outage
    read as seconds old after it, and a release judged it fresh and gave up all the work since
    (and the outage was counted as the save's cost, which sizes grace periods)."""
    when = sample.time if sample.time is not None else now
    last = rec.history.last
    if (
        step is None
        or sample.step is None
        or last is None
        or last.time is None
        or rec.report_gap <= 0
        or not last.step <= step < sample.step
        or not last.time < when
    ):
        return when
    reached = step + rec.report_gap
    if reached >= sample.step:
        return when  # the ack came in the report after the save, as usual
    return last.time + (when - last.time) * (reached - last.step) / (sample.step - last.step)


def note_throughput(rec: JobRecord, step: int, when: float, nodes: int, *, restart: bool) -> None:
    """Steps per second at ``nodes``, a moving average over the intervals between samples (a
    restart or a resize starts a new interval)."""
    anchor = rec._rate_anchor
    rec._rate_anchor = (step, when, nodes)
    if anchor is None or restart or anchor[2] != nodes:
        return
    dt = when - anchor[1]
    ds = step - anchor[0]
    if dt <= 0 or ds <= 0:
        return
    measured = ds / dt
    old = rec.throughput.get(nodes)
    rec.throughput[nodes] = (
        measured if old is None else (1 - THROUGHPUT_EWMA) * old + THROUGHPUT_EWMA * measured
    )


def after_step_back(rec: JobRecord) -> bool:
    """Whether the newest point is the first report after a step back (its segment's second): it
    may yet be taken back with that step as a second writer's, so neither the rate nor the report
    gap is measured from the step back. Measured from the lower writer's step (10 after 1000, then
    1010), the rate read 1000 steps in one report's time, and its moving average stayed far off
    for a quarter of an hour. After a real restart only the first interval goes unmeasured."""
    start = rec.history.segments[-1]
    return start > 0 and len(rec.history) - start <= 2


def take_back_rates(rec: JobRecord, nodes: int) -> None:
    """The history took back reports below the run's step as garbled or a second writer's: the
    newest report is measured from the one before it, its rate and its report gap."""
    points = rec.history.points
    before = points[-2] if len(points) >= 2 else None
    if before is None or before.time is None:
        rec._rate_anchor = None
        return
    rec._rate_anchor = (before.step, before.time, nodes)
    rec.report_gap = points[-1].step - before.step


def rate(rec: JobRecord) -> float | None:
    """Steps per second at the node count of the latest measurement."""
    if not rec.throughput:
        return None
    anchor = rec._rate_anchor
    found = rec.throughput.get(anchor[2]) if anchor is not None else None
    return found if found is not None else max(rec.throughput.values())
