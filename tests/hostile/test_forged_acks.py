"""Forged checkpoint acknowledgements (an id never requested, another job's id) are ignored: the
pending request stays pending, no action changes outcome, and each one is counted once."""

from __future__ import annotations

from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.render import iso
from advisor.core import AdvisorCore
from advisor.model import ActionKind, ActionRecord, ProgressSample
from tests.controller.fakes import FakeApi, trainjob

T0 = 1_800_000_000.0
KEY = "team-a/llm"


def _ack(step: int, request: str, at: float) -> dict:
    return trainjob(
        step=step,
        loss="1.0",
        updated=iso(at),
        extra_metrics=[
            {"name": "last_checkpoint_step", "value": str(step)},
            {"name": "last_checkpoint_request", "value": request},
        ],
    )


def test_core_ignores_and_counts_acks_for_requests_it_never_made() -> None:
    core = AdvisorCore()
    core.observe(KEY, ProgressSample(step=10, loss=1.0, time=T0), now=T0)
    core.record_action(
        KEY,
        ActionRecord(
            kind=ActionKind.CHECKPOINT, time=T0, request_id="111", policy="p", rule="r", outcome="requested"
        ),
    )
    core.observe("team-b/other", ProgressSample(step=5, loss=1.0, time=T0), now=T0)
    for i, forged in enumerate(["999", "999", "222", "111"]):  # the last one is the real ack
        core.observe(
            "team-b/other" if forged == "222" else KEY,
            ProgressSample(
                step=20 + i,
                loss=1.0,
                time=T0 + 1 + i,
                last_checkpoint_step=20 + i,
                last_checkpoint_request=forged,
            ),
            now=T0 + 1 + i,
        )
        rec = core.record(KEY)
        assert rec is not None
        expected = "acknowledged" if forged == "111" else "requested"
        assert rec.actions[-1].outcome == expected
    assert core.forged_acks == 2  # "999" once (repeated in the next report), "222" on team-b/other


def test_the_engine_exports_the_count() -> None:
    api = FakeApi()
    e = Engine(api, config=EngineConfig(write_interval_s=0, writer_workers=0))
    e.enqueue("job", "ADDED", _ack(10, "424242", T0))
    e.step(T0)
    e.enqueue("job", "MODIFIED", _ack(20, "424242", T0 + 5))
    e.step(T0 + 5)
    assert e.metrics.registry.get_sample_value("trainjob_advisor_forged_acknowledgements_total") == 1
