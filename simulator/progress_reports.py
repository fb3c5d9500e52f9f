"""The progress reports a simulated job logs between two looks of the advisor.

Progress reports are not events of the engine: the samples a job would have logged since the
previous tick are generated, in order, when the tick comes (the controller, too, only sees what was
reported by the time it looks), which keeps big traces cheap. Steps are interpolated between the
points of the job's trajectory (phase changes), one report every ``report_interval`` seconds, a
report only when the step advanced; checkpoint acknowledgements are merged in time order.
"""

from __future__ import annotations

import numpy as np

from advisor.model import ProgressSample
from simulator.jobs import Phase, SimJob

__all__ = ["PEAK_LR", "collect_samples"]

#: the peak learning rate reported by simulated jobs (the curve library's schedules are relative)
PEAK_LR = 3e-4


def collect_samples(job: SimJob, now: float) -> list[ProgressSample]:
    """The progress reports logged since the previous tick, in time order."""
    points = list(job.trajectory)
    if job.hang_step is not None and job.phase is Phase.RUNNING and points:
        # the steps are interpolated between these points: a run that hung since the last one
        # stopped advancing at its hang, not at this tick
        hung_at = job.phase_start + (job.cap_step - job.phase_step) / job.rate()
        if points[-1][0] < hung_at < now:
            points.append((hung_at, job.cap_step))
    points.append((now, job.step_at(now)))
    job.trajectory = [points[-1]]
    start = job.last_report + job.report_interval
    out: list[ProgressSample] = []
    if start <= now:
        times = np.arange(start, now + 1e-9, job.report_interval)
        ts = np.array([p[0] for p in points])
        ss = np.array([p[1] for p in points])
        steps = np.interp(times, ts, ss, left=ss[0]).astype(np.int64)
        keep = np.ones(steps.size, dtype=bool)
        keep[1:] = steps[1:] != steps[:-1]
        keep[0] = steps[0] != job.last_reported_step
        keep &= steps > 0
        if keep.any():
            ks, kt = steps[keep], times[keep]
            loss_arr, lr_arr = job.curve.reports(ks)
            losses, lrs = loss_arr.tolist(), (lr_arr * PEAK_LR).tolist()
            for step, t, loss, lr in zip(ks.tolist(), kt.tolist(), losses, lrs, strict=True):
                out.append(job.progress_sample(step, t, loss, lr))
            job.last_reported_step = int(ks[-1])
        job.last_report = float(times[-1])
    if job.forced_samples:
        out.extend(job.progress_sample(st, t, checkpoint=(c, r)) for st, t, c, r in job.forced_samples)
        job.forced_samples = []
        out.sort(key=lambda s: s.time or 0.0)
    return out
