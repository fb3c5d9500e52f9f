"""An action in flight as the status keeps it: one typed entry with one codec (it was a dict read
back by string keys, where a misspelt key read as None)."""

from __future__ import annotations

import logging

import pytest

from advisor.controller.actuator import Actuator
from advisor.controller.pending import AWAITING_ACK, RECORDED, PendingAction
from advisor.core import AdvisorCore
from advisor.model import Action, ActionKind, ActionRecord
from advisor.protocol import DEFAULT_CHECKPOINT_TIMEOUT_S
from tests.controller.fakes import FakeApi


def test_an_entry_reads_back_as_it_was_written() -> None:
    rec = ActionRecord.requested(
        Action(ActionKind.RELEASE_QUOTA, "plateau", "no longer learns"), policy="p", request_id="9", now=50.0
    )
    entry = PendingAction.of(rec, {"checkpoint_first": True}, 120.0)
    assert entry.stage == RECORDED and entry.awaiting().stage == AWAITING_ACK
    assert PendingAction.from_status(entry.to_status()) == entry


def test_an_older_or_partial_entry_takes_defaults_and_an_unknown_kind_is_left_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    old = PendingAction.from_status({"kind": "checkpoint", "stage": "awaiting-ack", "time": 5})
    assert old is not None and (old.timeout_s, old.policy, old.params) == (
        DEFAULT_CHECKPOINT_TIMEOUT_S,
        "",
        {},
    )
    assert PendingAction.from_status({"kind": "teleport"}) is None
    assert PendingAction.from_status({"kind": "checkpoint", "time": "soon"}).time is None  # type: ignore[union-attr]
    act = Actuator(FakeApi(), AdvisorCore(), lambda key: None)
    with caplog.at_level(logging.WARNING):
        act.restore_pending(
            "ns/j", {"1": {"kind": "teleport"}, "2": {"kind": "checkpoint", "stage": "recorded"}}
        )
    assert act.recorded("ns/j") == ["2"] and "not understood" in caplog.text
    assert act.pending_for("ns/j")["2"]["kind"] == "checkpoint"
