"""Two writers on one TrainJob's progress (two ranks, a duplicated reporter): the core loop keeps
the upper writer's reports, says what it left out, and forecasts the run as one segment."""

from __future__ import annotations

from advisor.core import AdvisorCore
from advisor.model import ClusterView, JobView, ProgressSample


def test_the_job_view_says_two_writers_interleave_and_the_forecast_reads_one_run() -> None:
    core = AdvisorCore(forecast_interval_s=0)
    job = JobView(namespace="ns", name="zz", admitted=True, active=True, started_at=0.0)
    for k in range(120):
        step = 10 * (k // 2) + (1000 if k % 2 == 0 else 10)
        loss = 3.0 * (1.0 + step / 500.0) ** -0.5
        core.observe(
            "ns/zz", ProgressSample(step=step, loss=loss, total_steps=20_000, time=float(k)), now=float(k)
        )
        core.evaluate(job, ClusterView(), now=float(k))
    view = core.view(job, now=120.0)
    assert view.step == 1590
    assert any("two writers seem to interleave" in w for w in view.progress_warnings)
    fc = view.forecast
    assert fc is not None and fc.n_points == 60
    assert not any("restart" in w for w in fc.warnings)
