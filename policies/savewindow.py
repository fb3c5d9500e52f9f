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

from advisor.model import JobView, save_window_seconds, seconds_per_step

__all__ = [
    "MIN_PEERS",
    "PEER_QUANTILE",
    "miss_probability",
    "needed_grace",
    "peer_grace",
    "save_seconds",
    "step_seconds",
    "window_covered",
]

#: jobs of a runtime with a measured save window needed before their windows set a new job's
#: grace period
MIN_PEERS = 3
#: the quantile of the peers' save windows a new job's grace period is set to
PEER_QUANTILE = 1.0


def step_seconds(job: JobView) -> float | None:
    """Seconds per step at the job's current size (measured throughput, else the forecast's)."""
    return seconds_per_step(dict(job.throughput), job.nodes, job.forecast)


def save_seconds(job: JobView) -> float | None:
    """Seconds one save takes: the helper's own measure, else the request-to-ack latency."""
    return job.checkpoint.save_duration


def _window(step: float, save: float) -> float:
    return float(save_window_seconds(step, save))


def needed_grace(job: JobView) -> float | None:
    """The grace period (whole seconds) a save on SIGTERM needs: the step under way plus a save."""
    step, save = step_seconds(job), save_seconds(job)
    if step is None or save is None:
        return None
    return _window(step, save)


def peer_grace(job: JobView) -> tuple[float, int] | None:
    """The grace period a job that has not measured its own save window starts with, from the
    jobs of its runtime that have: ``(seconds, peers)``, None with fewer than ``MIN_PEERS``.

    A save writes the model and its optimiser state, whose size grows with the job's share of the
    cluster, so the peers are those of the job's size (its GPU count) when there are enough of
    them, else those within a factor of two, else all of the runtime's. The value is the
    ``PEER_QUANTILE`` of their windows: a grace period too short loses the work since the last
    checkpoint, one too long only delays the preemptor by what the save really takes (a helper
    exits once it has saved)."""
    peers = job.runtime_save_windows
    if len(peers) < MIN_PEERS:
        return None
    gpus = max(job.gpus, 1)
    for near in (
        [w for w in peers if w[0] == gpus],
        [w for w in peers if gpus / 2 <= w[0] <= gpus * 2],
        list(peers),
    ):
        if len(near) >= MIN_PEERS:
            windows = sorted(_window(step, save) for _g, step, save in near)
            at = min(len(windows) - 1, math.ceil(PEER_QUANTILE * len(windows)) - 1)
            return windows[max(at, 0)], len(near)
    return None


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
