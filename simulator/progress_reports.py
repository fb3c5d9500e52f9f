"""The progress reports a simulated job logs between two looks of the advisor, as the controller
reads them.

Progress reports are not events of the engine: the samples a job would have logged since the
previous tick are generated, in order, when the tick comes (the controller, too, only sees what was
reported by the time it looks), which keeps big traces cheap. Steps are interpolated between the
points of the job's trajectory (phase changes), one report every ``report_interval`` seconds, a
report only when the step advanced; checkpoint acknowledgements are merged in time order, and each
report carries the last checkpoint as it stood when it was made (``SimJob.checkpoint_as_of``), not
as it stands at the look.

Each report is what the job's trainer sends (``SimJob.progress_report``: its step, loss and
checkpoint acknowledgement, its planned steps and learning rate only when its reporter includes
them), rendered as the ``status.trainerStatus`` the TrainJob would carry and parsed back by
``advisor.sources`` (``advisor.reported.read_back``, the back-test's path too): the core sees the
sample the controller would, text-formatted values and whole-second update times included. A
report parsed before (by another row of the scenario) is not parsed again
(``simulator.replay_memo``).
"""

from __future__ import annotations

import numpy as np

from advisor.model import ProgressSample
from advisor.training.report import Report
from simulator import replay_memo
from simulator.jobs import PEAK_LR, Phase, SimJob

__all__ = ["PEAK_LR", "collect_samples"]


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
    reports: list[Report] = []
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
                # the checkpoint as it stood when the report was made, not at this look
                reports.append(job.progress_report(step, t, loss, lr, checkpoint=job.checkpoint_as_of(t)))
            job.last_reported_step = int(ks[-1])
        job.last_report = float(times[-1])
    job.ckpt_seen, job.ckpt_changes = job.current_checkpoint(), []
    if job.forced_samples:
        reports.extend(job.progress_report(st, t, checkpoint=(c, r)) for st, t, c, r in job.forced_samples)
        job.forced_samples = []
        reports.sort(key=lambda r: r.time)
    name, namespace = job.trace.name, job.namespace
    out: list[ProgressSample] = []
    for report in reports:
        sample = replay_memo.sample(report, name=name, namespace=namespace, now=now)
        if sample is not None:
            out.append(sample)
    return out
