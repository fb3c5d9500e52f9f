"""A controller that could not list the AdvisorPolicies at start-up acts on no job until it can.

kopf's watch delivers the policies one event each, and says neither when it has delivered them all
nor that there are none: until a whole listing succeeds, a job's governing policy may be missing
(its release sequence would be recorded cancelled, its resumed action would fail its cap's record)
or a broader one may stand in for it."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from advisor.controller.policysync import resync_policies
from advisor.controller.render import iso
from advisor.model import ClusterView, Decision, JobView
from tests.controller.fakes import FakeApi, make_engine, release_sequence, trainjob, workload

T0 = 1_800_000_000.0
KEY = "team-a/llm"
WL = "team-a/trainjob-llm-abcde"
POLICY = {"metadata": {"name": "p"}, "spec": {"mode": "Apply"}}


def _queued(engine: Any) -> list[tuple[str, Any]]:
    out = []
    while not engine.events.empty():
        kind, _, body, _ = engine.events.get_nowait()
        out.append((kind, body))
    return out


def test_the_listing_is_tried_again_until_it_succeeds_then_every_period(
    caplog: pytest.LogCaptureFixture,
) -> None:
    e = make_engine(FakeApi(), lambda *a, **k: Decision(job=KEY))
    answers: list[Any] = [RuntimeError("503 etcdserver: leader changed")] * 25
    stop = threading.Event()
    listings = []

    def fetch() -> dict[str, Any]:
        if answers:
            raise answers.pop(0)
        listings.append(1)
        if len(listings) == 2:
            stop.set()  # two listings: the first ends the wait, the second is a resync
        return {"items": [POLICY]}

    caplog.set_level(logging.WARNING, logger="advisor.controller.operator")
    resync_policies(e, fetch, stop, listed=False, pauses=(0.0, 0.0), period_s=0.0)
    queued = _queued(e)
    assert [kind for kind, _ in queued] == ["policyresync", "policyresync"]
    assert queued[0][1]["items"] == [POLICY] and isinstance(queued[0][1]["listedAt"], float)
    # said at each of the first tries, then at every 20th (a missing CRD stays missing)
    said = [r.getMessage() for r in caplog.records if "failed again" in r.getMessage()]
    assert [m.split("(try ")[1].split(")")[0] for m in said] == ["1", "2", "20"]


def test_a_stopped_resync_lists_nothing_more() -> None:
    e = make_engine(FakeApi(), lambda *a, **k: Decision(job=KEY))
    stop = threading.Event()
    stop.set()
    resync_policies(e, lambda: pytest.fail("listed after the stop"), stop, listed=True, period_s=0.0)
    assert _queued(e) == []


def _actionable(api: FakeApi) -> tuple[str, str]:
    """The job's Actionable condition as last written."""
    status = api.forecasts[KEY]["status"]
    (cond,) = [c for c in status["conditions"] if c["type"] == "Actionable"]
    return cond["status"], cond["reason"]


def _sequence_decider(governed: list[bool]) -> Any:
    """Policy p asks for a checkpoint before a release, then waits for it; while ``governed[0]`` is
    False no policy governs the job (as before p's watch event arrives)."""

    def decide(job: JobView, cluster: ClusterView, policy: object, *, now: float) -> Decision:
        if not governed[0]:
            return Decision(job=job.key, reasons=("no AdvisorPolicy selects this job",))
        return release_sequence(job, T0)

    return decide


def test_a_release_under_way_is_not_taken_as_abandoned_while_the_policies_are_unknown() -> None:
    api = FakeApi()
    api.workloads[WL] = workload()
    api.pods["team-a/jobset.sigs.k8s.io/jobset-name=llm"] = ["llm-node-0-0"]
    governed = [True]
    first = make_engine(api, _sequence_decider(governed))
    first.enqueue("workload", "ADDED", api.workloads[WL])
    first.enqueue("job", "MODIFIED", trainjob(step=10, loss="1.0", updated=iso(T0)))
    first.step(T0)
    assert first.actuator.awaiting_ack(KEY)  # the checkpoint before the release is out

    # a restart whose policy listing failed: p has not arrived yet
    governed[0] = False
    second = make_engine(api, _sequence_decider(governed))
    second.load_saved(api.list_forecasts())
    second.enqueue("policylisting", "ADDED", {"listed": False})
    second.enqueue("workload", "ADDED", api.workloads[WL])
    second.enqueue("job", "MODIFIED", trainjob(step=20, loss="1.0", updated=iso(T0 + 50)))
    for t in (60, 70, 80):
        second.step(T0 + t)
    assert second.policies_unknown
    assert second.metrics.registry.get_sample_value("trainjob_advisor_policies_listed") == 0
    assert _actionable(api) == ("False", "PoliciesNotListed")
    # no policy has arrived yet, which does not mean that none selects the job
    reasons = api.forecasts[KEY]["status"]["recommendation"]["reasons"]
    assert len(reasons) == 1 and reasons[0].startswith("the AdvisorPolicies could not be listed")
    assert not [ev for ev in api.events if ev["reason"] == "ReleaseCancelled"]
    assert second.actuator.awaiting_ack(KEY)

    # the listing succeeds, p with it: the sequence goes on, nothing cancelled
    governed[0] = True
    second.enqueue("policyresync", "ADDED", {"items": [], "listedAt": time.time()})
    second.step(T0 + 90)
    assert not second.policies_unknown
    assert second.metrics.registry.get_sample_value("trainjob_advisor_policies_listed") == 1
    assert _actionable(api) == ("True", "Apply")
    reasons = api.forecasts[KEY]["status"]["recommendation"]["reasons"]
    assert not any("could not be listed" in r for r in reasons)
    assert not [ev for ev in api.events if ev["reason"] == "ReleaseCancelled"]
    assert second.actuator.awaiting_ack(KEY)


def test_no_action_is_carried_out_while_the_policies_are_unknown() -> None:
    api = FakeApi()
    api.workloads[WL] = workload()
    api.pods["team-a/jobset.sigs.k8s.io/jobset-name=llm"] = ["llm-node-0-0"]
    e = make_engine(api, _sequence_decider([True]))
    e.enqueue("policylisting", "ADDED", {"listed": False})
    e.enqueue("workload", "ADDED", api.workloads[WL])
    e.enqueue("job", "MODIFIED", trainjob(step=10, loss="1.0", updated=iso(T0)))
    e.step(T0)
    assert not e.actuator.awaiting_ack(KEY) and not api.pod_annotations
    # shown, but said not to be carried out
    reasons = api.forecasts[KEY]["status"]["recommendation"]["reasons"]
    assert reasons[-1].startswith("not carried out: the AdvisorPolicies could not be listed")
    e.enqueue("policyresync", "ADDED", {"items": [], "listedAt": time.time()})
    e.step(T0 + 10)
    assert e.actuator.awaiting_ack(KEY)  # asked for at the first evaluation after the listing


# ------------------------------------------------------------------ what a resync applies
def _policy(generation: int, mode: str = "Apply", uid: str = "u1") -> dict[str, Any]:
    return {
        "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
        "kind": "AdvisorPolicy",
        "metadata": {"name": "p", "uid": uid, "generation": generation},
        "spec": {"mode": mode, "rules": {"stall": {"for": "40s", "action": "Release"}}},
    }


def _resync(e: Any, *items: dict[str, Any], at: float | None = None) -> None:
    e.enqueue("policyresync", "ADDED", {"items": list(items), "listedAt": time.time() if at is None else at})
    e.step(T0)


def _mode(e: Any) -> str | None:
    policy = e.policies.get("p")
    return None if policy is None else policy.mode.value


def test_a_resync_applies_an_edit_the_watch_did_not_deliver_and_never_an_older_one() -> None:
    e = make_engine(FakeApi())
    e.enqueue("policy", "ADDED", _policy(1))
    e.step(T0)
    assert _mode(e) == "Apply"
    _resync(e, _policy(1, "Recommend"))  # the same generation: what the watch delivered stands
    assert _mode(e) == "Apply"
    _resync(e, _policy(2, "Recommend"))  # an edit the watch missed
    assert _mode(e) == "Recommend"
    _resync(e, _policy(1))  # older than what was applied
    assert _mode(e) == "Recommend"
    _resync(e, _policy(1, uid="u2"))  # deleted and made again under the same name
    assert _mode(e) == "Apply"


def test_a_listing_begun_before_the_last_policy_event_is_skipped() -> None:
    e = make_engine(FakeApi())
    begun = time.time()
    e.enqueue("policy", "ADDED", _policy(3, "Recommend"))
    e.step(T0)
    _resync(e, _policy(4), at=begun - 1.0)  # may predate the event just applied
    assert _mode(e) == "Recommend"


def test_a_policy_absent_from_two_listings_in_a_row_is_dropped() -> None:
    e = make_engine(FakeApi())
    e.enqueue("policy", "ADDED", _policy(1))
    e.step(T0)
    _resync(e)  # one listing may predate the policy's creation
    assert _mode(e) == "Apply"
    _resync(e, _policy(1))
    _resync(e)
    assert _mode(e) == "Apply"
    _resync(e)
    assert _mode(e) is None
