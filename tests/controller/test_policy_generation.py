"""AdvisorPolicy status follows the spec's generation (it stayed 1 after spec changes)."""

from __future__ import annotations

from typing import Any

from advisor.controller.metrics import Metrics
from advisor.controller.policystatus import PolicyBook
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
