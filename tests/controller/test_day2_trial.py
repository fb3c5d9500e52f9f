"""Findings of a platform engineer's day-2 trial on a real API server, each reproduced with the
fakes: a job deleted during an outage, a cold start's first policy figures, a pending checkpoint
whose job stopped during an outage, a release a policy change cancelled, the tie warning."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.render import iso
from advisor.core import AdvisorCore
from advisor.model import ClusterView, Decision, JobView, Mode
from tests.controller.fakes import FakeApi, trainjob

T0 = 1_800_000_000.0
KEY = "team-a/llm"


def engine(api: FakeApi, decide: Any = None, **cfg: Any) -> Engine:
    core = None
    if decide is not None:
        core = AdvisorCore(
            policies=[object()], forecast_interval_s=0, selector=lambda ps, job: ps[0], decider=decide
        )
    config = EngineConfig(write_interval_s=0, writer_workers=0, forecast_interval_s=0, **cfg)
    return Engine(api, config=config, core=core)


# ------------------------------------------------------------------------------------ LOW-8
def test_the_tie_warning_is_logged_once_per_change_of_winner_or_losers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """It was logged with every change of the job's state or advice (13 times in 90 s for two jobs)."""
    winner = ["pol-c1"]

    def decide(job: JobView, cluster: ClusterView, policy: object, *, now: float) -> Decision:
        advice = "plateau?" if job.step % 20 else "keep going"  # the advice flips at each report
        return Decision(
            job=job.key, policy=winner[0], mode=Mode.RECOMMEND, advice=advice, tied_with=("pol-c2",)
        )

    e = engine(FakeApi(), decide)
    caplog.set_level(logging.WARNING, logger="advisor.controller.statusboard")

    def ties() -> int:
        return sum("governs over" in r.getMessage() for r in caplog.records)

    for i, step in enumerate(range(10, 200, 10)):
        e.enqueue("job", "MODIFIED", trainjob(step=step, loss=f"{1 + 1 / step:.4f}", updated=iso(T0 + 5 * i)))
        e.step(T0 + 5 * i)
    assert ties() == 1
    winner[0] = "pol-c0"  # another winner: said again, once
    for i, step in enumerate(range(200, 260, 10), start=40):
        e.enqueue("job", "MODIFIED", trainjob(step=step, loss=f"{1 + 1 / step:.4f}", updated=iso(T0 + 5 * i)))
        e.step(T0 + 5 * i)
    assert ties() == 2
