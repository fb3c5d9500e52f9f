"""What every adapter records before it acts: one ``ActionRecord.requested`` for the controller,
the simulator and the back-test (three copies disagreed on the boost's default and on which
actions carry a timeout)."""

from __future__ import annotations

from advisor.model import DEFAULT_BOOST, Action, ActionKind, ActionRecord, boost_of


def test_a_checkpoint_request_carries_its_timeout_and_other_actions_none() -> None:
    ck = Action(ActionKind.CHECKPOINT, "release", "before release", {"timeout_s": 120})
    rec = ActionRecord.requested(ck, policy="p", request_id="7", now=100.0, stamp="v3")
    assert (rec.kind, rec.time, rec.request_id, rec.policy, rec.rule, rec.outcome, rec.stamp) == (
        ActionKind.CHECKPOINT,
        100.0,
        "7",
        "p",
        "release",
        "requested",
        "v3",
    )
    assert rec.timeout_s == 120.0 and rec.boost is None
    # no timeout given: None, which the core reads as the protocol's default
    assert (
        ActionRecord.requested(
            Action(ActionKind.CHECKPOINT, "c", "r"), policy="p", request_id="1", now=0
        ).timeout_s
        is None
    )
    release = Action(ActionKind.RELEASE_QUOTA, "plateau", "r", {"timeout_s": 60})
    assert ActionRecord.requested(release, policy="p", request_id="2", now=0).timeout_s is None


def test_a_boost_records_the_value_it_writes() -> None:
    named = Action(ActionKind.BOOST_PRIORITY, "guard", "r", {"boost": 500})
    assert ActionRecord.requested(named, policy="p", request_id="1", now=0).boost == 500
    bare = Action(ActionKind.BOOST_PRIORITY, "guard", "r")
    assert ActionRecord.requested(bare, policy="p", request_id="1", now=0).boost == DEFAULT_BOOST
    assert ActionRecord.requested(bare, policy="p", request_id="1", now=0, default_boost=7).boost == 7
    assert boost_of({"boost": True}, 3) == 3  # a bool is no value
    assert boost_of({"boost": 2.0}) == 2
