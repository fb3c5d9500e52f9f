"""The metrics endpoint shows job data only when the settings allow it."""

from __future__ import annotations

from prometheus_client import generate_latest

from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.render import iso
from tests.controller.fakes import FakeApi, trainjob

T0 = 1_800_000_000.0


def _exposition(job_metrics: bool) -> str:
    e = Engine(FakeApi(), config=EngineConfig(write_interval_s=0, writer_workers=0, job_metrics=job_metrics))
    for i, step in enumerate(range(10, 200, 10)):
        e.enqueue(
            "job",
            "MODIFIED",
            trainjob(name="secret-run", namespace="tenant-x", step=step, loss="1.0", updated=iso(T0 + 5 * i)),
        )
        e.step(T0 + 5 * i)
    return generate_latest(e.metrics.registry).decode()


def test_no_job_metrics_names_no_job_or_tenant() -> None:
    text = _exposition(job_metrics=False)
    assert "secret-run" not in text
    samples = [line for line in text.splitlines() if not line.startswith("#")]
    assert not any(line.startswith("trainjob_advisor_job_") for line in samples)


def test_per_job_series_by_default() -> None:
    assert '"secret-run"' in _exposition(job_metrics=True)
