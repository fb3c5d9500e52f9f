"""Throughput and time-to-finish, robust to eval pauses, checkpoint stalls and restarts.

Wall time between progress reports is mostly steady training, interrupted by evaluations,
checkpoint saves and the odd restart. A plain ``steps / elapsed`` folds those pauses in unevenly
(they are rare and large), so the rate is estimated per report interval: intervals whose
seconds-per-step are far above the typical one are stalls and are left out of the rate, then
added back as the observed fraction of time lost to stalls. The interval of the ETA comes from
how much the rate varied between blocks of recent history.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from advisor.forecast.robust import fast_median, row_medians
from advisor.model import Interval

FloatArray = NDArray[np.float64]

_STALL_FACTOR = 3.0
#: stalls in the recent window from which their size is read as a pattern that recurs
_RECURRING = 3
_Z80 = 1.2816


def throughput(
    steps: FloatArray, times: FloatArray | None, segments: NDArray[np.intp] | None = None
) -> tuple[float | None, FloatArray]:
    """(robust steps per second over the recent history, per-interval seconds-per-step).

    ``segments``: the restart segment of each point; an interval across two (a resume joined to
    the attempt it resumed from) spans the restart's downtime and lost work, not training pace,
    and is left out rather than charged to the rest of the run as a stall."""
    if times is None:
        return None, np.zeros(0)
    ok = np.isfinite(times)
    s, t = steps[ok], times[ok]
    if s.size < 2:
        return None, np.zeros(0)
    ds, dt = s[1:] - s[:-1], t[1:] - t[:-1]
    good = (ds > 0) & (dt > 0)
    if segments is not None and segments.size == steps.size:
        seg = segments[ok]
        good &= seg[1:] == seg[:-1]
    ds, dt = ds[good], dt[good]
    if ds.size == 0:
        return None, np.zeros(0)
    # recent half of the history (at least 5 intervals): throughput changes after a resize
    k = max(5, ds.size // 2)
    ds, dt = ds[-k:], dt[-k:]
    sps = dt / ds
    typical = fast_median(sps)
    steady = sps <= _STALL_FACTOR * typical
    rate = float(ds[steady].sum() / dt[steady].sum())
    # time lost to stalls, as a fraction of steady time, is charged to the rest of the run; a stall
    # far longer than the typical one (a restart, a one-off checkpoint) is not expected to recur at
    # that size, so each stall is capped at a few times the median stall
    excess = dt[~steady] - ds[~steady] / rate
    if excess.size >= _RECURRING:
        excess = np.minimum(excess, _STALL_FACTOR * fast_median(excess))
    elif excess.size:
        # one or two stalls say nothing of a pattern (the median of one stall is itself): a wait in
        # the queue after a suspension, an eviction or a one-off save at the same step is not
        # expected to recur, so each counts for at most a few typical report intervals
        excess = np.minimum(excess, _STALL_FACTOR * fast_median(dt[steady]))
    stall_frac = float(excess.sum()) / float(dt[steady].sum())
    effective = rate / (1.0 + max(0.0, stall_frac))
    return effective, sps


#: a last report interval this many times the typical one, and at least a minute, is said
_LAST_STALL_FACTOR = 10.0


def last_stall_note(
    steps: FloatArray, times: FloatArray | None, segments: NDArray[np.intp] | None = None
) -> str | None:
    """A warning when the latest step came after a stall (its interval ``_LAST_STALL_FACTOR``
    times the typical one): the ETA leaves a one-off stall out of the pace it expects (``throughput``),
    which is right for a save or a wait in the queue, but the user should see that the run just
    stood still, which may be the start of a hang the next reports confirm.

    ``segments``: the restart segment of each point. Only intervals between consecutive reports
    of one segment are read: the join of a resume to the attempt it resumed from spans the
    restart (its downtime, and the reports of the lost work left out between them), not a time
    the run stood still, so a latest report that starts a segment says nothing of a stall."""
    if times is None or steps.size < 4:
        return None
    k = min(times.size, 41)
    dt = np.diff(times[-k:])
    ds = np.diff(steps[-k:])
    if segments is not None and segments.size == steps.size:
        seg = segments[-k:]
        same = seg[1:] == seg[:-1]
        if not same[-1]:
            return None
        dt, ds = dt[same], ds[same]
    if dt.size < 3 or not np.all(np.isfinite(dt)) or dt[-1] < 60.0 or ds[-1] <= 0:
        return None
    typical = fast_median(dt[:-1] / np.maximum(ds[:-1], 1e-300)) * ds[-1]
    if not typical > 0 or dt[-1] < _LAST_STALL_FACTOR * typical:
        return None
    # said of the steps, not the reports: a reporter that kept reporting the stuck step (merged
    # into one point) read "the latest report came 1.0 h after the one before", which it had not
    return (
        f"the last {_steps(float(ds[-1]))} took {_duration(float(dt[-1]))}, where "
        f"{_duration(float(typical))} was usual: the run stood still (an ETA, where one is given, "
        "assumes the earlier pace)"
    )


def _steps(n: float) -> str:
    return f"{n:,.0f} step" + ("" if n == 1 else "s")


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def eta_interval(
    steps: FloatArray,
    times: FloatArray | None,
    total_steps: float | None,
    segments: NDArray[np.intp] | None = None,
) -> tuple[Interval | None, float | None]:
    """(ETA interval in seconds or None, steps per second or None)."""
    rate, sps = throughput(steps, times, segments)
    if rate is None or rate <= 0 or not np.isfinite(rate):
        return None, None
    if total_steps is None or not np.isfinite(total_steps):
        return None, rate
    remaining = max(0.0, float(total_steps) - float(steps[-1]))
    mean = remaining / rate
    if sps.size >= 4:
        # up to 5 equal blocks of the recent intervals (the oldest few that do not fill a block
        # are left out), their medians in one partition
        nb = min(5, sps.size // 2)
        size = sps.size // nb
        med = row_medians(sps[sps.size - nb * size :].reshape(nb, size))
        m = med.tolist()  # a handful of numbers: plain floats beat numpy's per-call overhead
        mu = sum(m) / len(m)
        sd = math.sqrt(sum((v - mu) ** 2 for v in m) / len(m))
        rel = sd / max(fast_median(med), 1e-300)
    else:
        rel = 0.25
    # a floor for what was not seen: the rest of the run may be paced differently
    rel = math.hypot(rel, 0.03)
    half = _Z80 * rel * mean
    return Interval(mean=mean, p10=max(0.0, mean - half), p90=mean + half), rate
