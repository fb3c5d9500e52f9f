"""AdvisorPolicy status follows the spec's generation (it stayed 1 after spec changes)."""

from __future__ import annotations

from typing import Any

from advisor.controller.metrics import Metrics
from advisor.controller.policybook import PolicyBook
from tests.controller.fakes import FakeApi


def _policy(generation: int, status: dict[str, Any] | None = None, cooldown: str = "1h") -> dict[str, Any]:
    return {
        "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
        "kind": "AdvisorPolicy",
        "metadata": {"name": "p", "generation": generation},
        "spec": {"mode": "Recommend", "safety": {"cooldown": cooldown}, "rules": {}},
        **({"status": status} if status else {}),
    }


def test_observed_generation_follows_a_spec_change_that_keeps_the_verdict() -> None:
    api = FakeApi()
    book = PolicyBook(api, Metrics())
    book.on_event("ADDED", _policy(1))
    (first,) = [c[2] for c in api.log if c[0] == "policy_status"]
    assert first["observedGeneration"] == 1 and first["conditions"][0]["observedGeneration"] == 1
    # the admin edits the spec: still valid, a new generation; the status the server holds is the first
    book.on_event("MODIFIED", _policy(2, first, cooldown="2h"))
    second = [c[2] for c in api.log if c[0] == "policy_status"][-1]
    assert second["observedGeneration"] == 2 and second["conditions"][0]["observedGeneration"] == 2
    # the verdict did not change, so neither did its transition time
    assert second["conditions"][0]["lastTransitionTime"] == first["conditions"][0]["lastTransitionTime"]
    writes = len([c for c in api.log if c[0] == "policy_status"])
    book.on_event("MODIFIED", _policy(2, second, cooldown="2h"))  # a status-only event: no write
    assert len([c for c in api.log if c[0] == "policy_status"]) == writes


def test_map_keys_gone_from_the_figures_are_nulled_out_of_the_stored_status() -> None:
    """A merge patch keeps every key it leaves out: a tie no longer lost, an outcome count gone to
    zero, stayed in the status for good (even across a restart, read from the stored object)."""
    from advisor.controller.policystatus import JobFigures

    api = FakeApi()
    book = PolicyBook(api, Metrics())
    stale = {"lostTies": {"tie-a": 1}, "actionsByOutcome": {"requested": 1}, "jobsMatched": 1}
    book.on_event("ADDED", _policy(1, stale))
    book.write_figures([JobFigures(key="ns/j", policy="p", actions=())])
    last = [c[2] for c in api.log if c[0] == "policy_status"][-1]
    assert last["lostTies"] == {"tie-a": None} and last["actionsByOutcome"] == {"requested": None}
    assert last["jobsMatched"] == 1
    book.write_figures([JobFigures(key="ns/j", policy="p", actions=(), tied_with=("p",))])
    book.write_figures([JobFigures(key="ns/j", policy="p", actions=())])
    last = [c[2] for c in api.log if c[0] == "policy_status"][-1]
    assert last["lostTies"] == {"p": None}  # what this process wrote before, gone now


def _guard(generation: int, rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
        "kind": "AdvisorPolicy",
        "metadata": {"name": "guard", "generation": generation},
        "spec": {"mode": "Recommend", "selector": {"namespaces": ["team-a"]}, "rules": rules},
    }


def test_an_invalid_edit_keeps_the_last_valid_generation_in_force() -> None:
    """An edit the loader refuses (minInterval above maxInterval) must not hand the policy's jobs
    to a broader policy that acts on them at once: the last valid generation stays in force, and
    the condition says so."""
    api = FakeApi()
    book = PolicyBook(api, Metrics())
    book.on_event("ADDED", _guard(1, {"stall": {"for": "30s"}}))
    bad = {"stall": {"for": "30s"}, "checkpoint": {"minInterval": "5h", "maxInterval": "1h"}}
    book.on_event("MODIFIED", _guard(2, bad))
    (kept,) = book.governing()
    assert kept.name == "guard" and kept.spec.rules.stall is not None and kept.spec.rules.checkpoint is None
    cond = [c[2] for c in api.log if c[0] == "policy_status"][-1]["conditions"][0]
    assert cond["status"] == "False" and cond["observedGeneration"] == 2
    assert "generation 1, the last valid one, stays in force" in cond["message"]
    # fixed: the new generation governs, and the condition is valid again
    book.on_event("MODIFIED", _guard(3, {"stall": {"for": "45s"}}))
    (fixed,) = book.governing()
    assert fixed.spec.rules.stall is not None and fixed.spec.rules.stall.hold == 45.0
    assert "guard" not in book.errors and "guard" not in book.holding


def test_an_invalid_edit_is_told_by_one_warning_event_on_the_policy_per_generation() -> None:
    """``kubectl describe advisorpolicy`` shows Events: an admin who applied a typo sees there why
    the policy is refused and what governs its jobs meanwhile, once per generation (a status-only
    event or a restart reading the same generation posts no second Event)."""
    api = FakeApi()
    book = PolicyBook(api, Metrics())
    book.on_event("ADDED", _guard(1, {"stall": {"for": "30s"}}))
    assert api.events == []  # a valid policy: nothing to say
    bad = _guard(2, {"stall": {"for": "30s"}, "checkpoint": {"minInterval": "5h", "maxInterval": "1h"}})
    bad["metadata"]["uid"] = "u-1"
    book.on_event("MODIFIED", bad)
    (event,) = api.events
    assert event["reason"] == "InvalidPolicy" and event["warning"] is True
    assert event["involved"]["kind"] == "AdvisorPolicy" and event["involved"]["name"] == "guard"
    assert event["involved"]["uid"] == "u-1" and "namespace" not in event["involved"]
    assert "minInterval" in event["message"]
    assert "generation 1, the last valid one, stays in force" in event["message"]
    book.on_event("MODIFIED", bad)  # the same generation again (its status written): no second Event
    restarted = PolicyBook(api, Metrics())
    restarted.on_event("ADDED", bad)
    assert len(api.events) == 1
    worse = _guard(3, {"checkpoint": {"minInterval": "5h", "maxInterval": "1h"}, "stall": {"for": "x"}})
    book.on_event("MODIFIED", worse)  # a new generation with a new error: told again
    assert len(api.events) == 2 and api.events[-1]["reason"] == "InvalidPolicy"


def test_an_invalid_edit_that_asks_for_recommend_keeps_the_last_valid_generation_in_recommend() -> None:
    """An Apply policy edited to mode Recommend and, in the same edit, a selector key the
    controller refuses: the last valid generation stayed in force in Apply, and a job was released
    (a trial on a real API server). The safe direction of the mode is honoured on its own."""
    api = FakeApi()
    book = PolicyBook(api, Metrics())
    applying = _guard(1, {"stall": {"for": "30s"}})
    applying["spec"]["mode"] = "Apply"
    book.on_event("ADDED", applying)
    bad = _guard(2, {"stall": {"for": "30s"}})  # mode Recommend
    bad["spec"]["selector"] = {"jobSelector": {"matchLabels": {"bad key!": "x"}}}
    book.on_event("MODIFIED", bad)
    (kept,) = book.governing()
    assert kept.mode.value == "Recommend" and kept.spec.rules.stall is not None
    assert list(kept.spec.selector.namespaces) == ["team-a"]  # the last valid selector
    assert "stays in force in Recommend mode" in book.holding["guard"]
    # an invalid edit that leaves the mode Apply keeps Apply (nothing asked for the safe direction)
    worse = _guard(3, {"stall": {"for": "30s"}})
    worse["spec"].update(mode="Apply", selector={"jobSelector": {"matchLabels": {"bad key!": "x"}}})
    book.on_event("MODIFIED", worse)
    (kept,) = book.governing()
    assert kept.mode.value == "Apply"


def test_an_invalid_policy_first_seen_after_a_restart_holds_its_jobs() -> None:
    """No valid version known (the controller restarted after the bad edit): the policy keeps its
    selector and priority, in Recommend with no rule, so that it still claims its jobs; with a
    selector that is invalid too, it holds none."""
    from policies.spec_rules import Rules

    api = FakeApi()
    book = PolicyBook(api, Metrics())
    book.on_event("ADDED", _guard(2, {"checkpoint": {"minInterval": "5h", "maxInterval": "1h"}}))
    (held,) = book.governing()
    assert held.spec.rules == Rules() and held.mode.value == "Recommend"
    assert held.spec.selector.namespaces == ("team-a",) or list(held.spec.selector.namespaces) == ["team-a"]
    assert "its jobs are held" in book.holding["guard"]
    broken = _guard(2, {})
    broken["spec"]["selector"] = {"namespaces": "team-a"}  # not a list
    book.on_event("MODIFIED", broken)
    assert book.governing() == [] and "holds no job" in book.holding["guard"]


def test_an_invalid_safety_field_first_seen_after_a_restart_still_holds_its_jobs() -> None:
    """Only the selector and priority make the holding version: an invalid field elsewhere (here an
    exempt label no job can carry) said "its selector is invalid too" and handed the jobs on."""
    api = FakeApi()
    book = PolicyBook(api, Metrics())
    bad = _guard(2, {"stall": {"for": "30s"}})
    bad["spec"]["safety"] = {"exemptLabel": "bad key"}
    book.on_event("ADDED", bad)
    (held,) = book.governing()
    assert held.mode.value == "Recommend" and held.spec.rules.stall is None
    assert "its jobs are held" in book.holding["guard"]
    assert "exemptLabel" in book.errors["guard"]


def test_the_last_valid_generation_stays_in_force_across_a_restart() -> None:
    """Each valid generation is kept in ``status.lastValid``: a controller restarted after an
    invalid edit (a selector typo) reads it back, so the jobs stay with the last valid version
    rather than going to no policy (and from there to a broader one that would act on them)."""
    api = FakeApi()
    book = PolicyBook(api, Metrics())
    valid = _guard(1, {"stall": {"for": "30s"}})
    book.on_event("ADDED", valid)
    status = [c[2] for c in api.log if c[0] == "policy_status"][-1]
    assert status["lastValid"]["generation"] == 1 and '"stall"' in status["lastValid"]["spec"]
    # a status-only event of the same generation: lastValid is not written again
    writes = len([c for c in api.log if c[0] == "policy_status"])
    book.on_event("MODIFIED", {**valid, "status": status})
    assert len([c for c in api.log if c[0] == "policy_status"]) == writes

    bad = _guard(2, {"stall": {"for": "30s"}})
    bad["spec"]["selector"] = {"jobSelector": {"matchLabels": {"bad key!": "x"}}}
    bad["status"] = status
    restarted = PolicyBook(FakeApi(), Metrics())
    restarted.on_event("ADDED", bad)
    (kept,) = restarted.governing()
    assert kept.spec.rules.stall is not None and list(kept.spec.selector.namespaces) == ["team-a"]
    assert "generation 1, the last valid one, stays in force" in restarted.holding["guard"]
    # the invalid generation is not kept as the last valid one
    written = [c[2] for c in restarted.api.log if c[0] == "policy_status"]
    assert all("lastValid" not in w for w in written)
