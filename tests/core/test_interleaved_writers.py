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


def _zigzag(k: int) -> tuple[int, float]:
    """Report ``k`` of two writers 990 steps apart, the upper one 5 steps/s (10 steps every 2 s)."""
    step = 10 * (k // 2) + (1000 if k % 2 == 0 else 10)
    return step, 3.0 * (1.0 + step / 500.0) ** -0.5


def _lagging(k: int) -> tuple[int, float]:
    """Report ``k`` of two ranks, one a report behind the other (110, 100, 120, 110, ...)."""
    step = 100 + 10 * (k // 2) + (10 if k % 2 == 0 else 0)
    return step, 3.0 * (1.0 + step / 500.0) ** -0.5


def test_the_throughput_is_the_upper_writers_also_after_a_restore() -> None:
    """A platform trial read 17 steps/s per node where the run made 0.5, 37 and 51 after two
    controller restarts, for a quarter of an hour: each rate was measured from the lower writer's
    step to the upper one's. The rates and the report gap now stand as before the reports the
    history took back."""
    for reports in (_zigzag, _lagging):
        core = AdvisorCore(forecast_interval_s=0)
        job = JobView(namespace="ns", name="zz", admitted=True, active=True, started_at=0.0)
        seen: list[float] = []
        for k in range(160):
            if k == 80:  # the controller restarts: the interleaving mode is not persisted
                state = core.dump("ns/zz")
                core = AdvisorCore(forecast_interval_s=0)
                core.restore("ns/zz", state)
            step, loss = reports(k)
            sample = ProgressSample(step=step, loss=loss, total_steps=20_000, time=float(k))
            core.observe("ns/zz", sample, now=float(k))
            core.evaluate(job, ClusterView(), now=float(k))
            rate = dict(core.view(job, now=float(k)).throughput).get(1)
            if k >= 8 and rate is not None:
                seen.append(rate)
        assert seen and all(4.5 <= r <= 5.5 for r in seen), (reports.__name__, min(seen), max(seen))
        assert core.record("ns/zz").report_gap == 10


def test_the_count_of_reports_left_out_goes_on_through_a_restore() -> None:
    """A platform trial saw the count restart from 2 after each controller restart (12 -> 2): the
    mode is found again from the reports, the count is kept with the history."""
    core = AdvisorCore(forecast_interval_s=0)
    job = JobView(namespace="ns", name="zz", admitted=True, active=True, started_at=0.0)
    for k in range(40):
        step, loss = _zigzag(k)
        core.observe(
            "ns/zz", ProgressSample(step=step, loss=loss, total_steps=20_000, time=float(k)), now=float(k)
        )
    before = core.record("ns/zz").history.interleaved  # type: ignore[union-attr]
    assert before >= 10
    restored = AdvisorCore(forecast_interval_s=0)
    restored.restore("ns/zz", core.dump("ns/zz"))
    for k in range(40, 46):
        step, loss = _zigzag(k)
        restored.observe(
            "ns/zz", ProgressSample(step=step, loss=loss, total_steps=20_000, time=float(k)), now=float(k)
        )
    after = restored.record("ns/zz").history.interleaved  # type: ignore[union-attr]
    assert after > before
    note = restored.view(job, now=46.0).progress_warnings[-1]
    assert note.startswith(f"{after} progress reports below the run's step left out")
