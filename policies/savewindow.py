"""The save window: does a job's grace period fit a save on SIGTERM, and has that save worked?

On an eviction (preemption, a release, a node drain) the kubelet sends SIGTERM and kills the pods
``terminationGracePeriodSeconds`` later (30 s unless set). A training helper that saves on SIGTERM
does so at its next safe point, the end of the step under way, so the grace period must cover a
step plus a save: ``needed = step + save``. The save time is the helper's own measure
(``CheckpointState.save_seconds``) or, without one, the request-to-acknowledgement latency of the
advisor's checkpoint requests (``cost_seconds``: it includes the wait for the safe point and the
report, so it errs long).

Verify, then trust. Whether saves on SIGTERM work is learnt per job from its past evictions
(``CheckpointState.sigterm_saves`` / ``sigterm_misses``, counted by the core loop from the
checkpoint the run resumed from). The probability that the next eviction loses the unsaved work
is estimated as ``(misses + 1) / (evictions + 1)``: 1 until an eviction was seen (no trust without
evidence), 1/(n+1) after n verified saves, and 1 whenever the grace period is known not to cover
the save window. The evictions of the other jobs on the same runtime (the same helper, image and
storage) set the prior (``miss_probability``). The checkpoint rules scale the queue's hazard by
it: a job whose saves on SIGTERM are verified checkpoints rarely, one whose saves failed keeps the
Young/Daly interval.
"""

from __future__ import annotations

import math

from advisor.model import JobView

__all__ = ["miss_probability", "needed_grace", "save_seconds", "step_seconds", "window_covered"]


def step_seconds(job: JobView) -> float | None:
    """Seconds per step at the job's current size (measured throughput, else the forecast's)."""
    rates = dict(job.throughput)
    rate = rates.get(job.nodes)
    if rate is None and job.forecast is not None:
        rate = job.forecast.steps_per_second
    if rate is None or not math.isfinite(rate) or rate <= 0:
        return None
    return 1.0 / rate


def save_seconds(job: JobView) -> float | None:
    """Seconds one save takes: the helper's own measure, else the request-to-ack latency."""
    cp = job.checkpoint
    for value in (cp.save_seconds, cp.cost_seconds):
        if value is not None and math.isfinite(value) and value >= 0:
            return value
    return None


def needed_grace(job: JobView) -> float | None:
    """The grace period (whole seconds) a save on SIGTERM needs: the step under way plus a save."""
    step, save = step_seconds(job), save_seconds(job)
    if step is None or save is None:
        return None
    return float(math.ceil(step + save))


def window_covered(job: JobView) -> bool | None:
    """Whether the job's grace period covers its save window (None when either is unknown)."""
    need = needed_grace(job)
    if need is None or job.grace_period_s is None:
        return None
    return job.grace_period_s >= need


def miss_probability(job: JobView) -> float:
    """The chance that the next eviction loses the work since the last periodic checkpoint.

    The runtime's other jobs give the prior, ``(M + 1) / (N + 1)`` over their N evictions (1 with
    none); the job's own n evictions, m of them misses, update it as a one-observation prior:
    ``(m + prior) / (n + 1)``. A job of a runtime whose saves work starts trusted; its own misses
    take the trust away within one or two evictions."""
    if window_covered(job) is False:
        return 1.0
    rt_saves, rt_misses = job.runtime_sigterm
    prior = (rt_misses + 1) / (rt_saves + rt_misses + 1)
    cp = job.checkpoint
    n = cp.sigterm_saves + cp.sigterm_misses
    return (cp.sigterm_misses + prior) / (n + 1)
