"""An AdvisorPolicy that selects no job says so: a ``JobsSelected`` condition beside ``Valid``
(which stays True: the policy is valid), naming the namespaces it lists that do not exist, and one
warning in the log, not one per refresh. A platform engineer's ``namespaces: [team-typo]`` read
VALID True, JOBS 0 and nothing else, in the status or in the log."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.metrics import Metrics
from advisor.controller.policybook import PolicyBook
from advisor.controller.policyreach import JOBS_SELECTED, reach_condition
from advisor.controller.render import iso
from advisor.model import JobView
from policies import load_policy
from policies.selection import missing_namespaces, namespace_selected, selecting
from tests.controller.fakes import Clock, FakeApi, trainjob

T0 = 1_800_000_000.0
NAMESPACES = {"team-a": {"tier": "gold"}, "team-b": {}}


def policy(name: str, selector: dict[str, Any] | None = None, *, generation: int = 1) -> dict[str, Any]:
    spec: dict[str, Any] = {"mode": "Recommend"}
    if selector is not None:
        spec["selector"] = selector
    return {
        "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
        "kind": "AdvisorPolicy",
        "metadata": {"name": name, "generation": generation},
        "spec": spec,
    }


def selector_of(selector: dict[str, Any]) -> Any:
    return load_policy(policy("p", selector)).selector


def condition(api: FakeApi, name: str, kind: str = JOBS_SELECTED) -> dict[str, Any] | None:
    conditions = (api.policies[name].get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def cluster(*policies: dict[str, Any], listed: bool = True, **config: Any) -> tuple[FakeApi, Engine]:
    """An engine that has seen ``policies`` (held by the fake API server) and the namespaces
    ``NAMESPACES`` (listed, unless not ``listed``); ``config``: more ``EngineConfig`` settings."""
    api = FakeApi()
    e = Engine(
        api, config=EngineConfig(write_interval_s=0, writer_workers=0, forecast_interval_s=0, **config)
    )
    for name, labels in NAMESPACES.items():
        e.enqueue("namespace", "ADDED", {"metadata": {"name": name, "labels": labels}})
    if listed:
        e.enqueue("namespacelisting", "ADDED", {})
    for body in policies:
        api.add_policy(body)
        e.enqueue("policy", "ADDED", api.get_policy(body["metadata"]["name"]))
    return api, e


def run(e: Engine, steps: int = 4, *, t0: float = T0, jobs: tuple[tuple[str, str], ...] = ()) -> float:
    """``steps`` reports of each job (namespace, name), a step each."""
    now = t0
    for i in range(steps):
        now = t0 + 30.0 * i
        for namespace, name in jobs:
            body = trainjob(name, namespace, step=10 * (i + 1), loss=1.0 / (i + 1), updated=iso(now))
            body["metadata"]["uid"] = f"uid-{namespace}-{name}"
            e.enqueue("job", "MODIFIED", body)
        e.step(now)
    return now


# ------------------------------------------------------------------------------- the pure parts


def test_the_namespaces_a_selector_names_that_do_not_exist_are_named_in_its_order() -> None:
    sel = selector_of({"namespaces": ["team-typo", "team-a", "team-b2"]})
    assert missing_namespaces(sel, NAMESPACES) == ("team-typo", "team-b2")
    assert missing_namespaces(selector_of({}), NAMESPACES) == ()


def test_a_namespace_selector_no_namespace_passes_selects_no_namespace() -> None:
    assert namespace_selected(
        selector_of({"namespaceSelector": {"matchLabels": {"tier": "gold"}}}), NAMESPACES
    )
    assert not namespace_selected(
        selector_of({"namespaceSelector": {"matchLabels": {"tier": "silver"}}}), NAMESPACES
    )
    # team-b exists, but lacks the label: the two criteria hold together or not at all
    both = {"namespaces": ["team-b"], "namespaceSelector": {"matchLabels": {"tier": "gold"}}}
    assert not namespace_selected(selector_of(both), NAMESPACES)


def test_every_policy_that_selects_a_job_is_named_not_only_the_one_that_governs() -> None:
    broad = load_policy(policy("broad"))
    narrow = load_policy(policy("narrow", {"namespaces": ["team-a"]}))
    other = load_policy(policy("other", {"namespaces": ["team-b"]}))
    job = JobView(namespace="team-a", name="llm")
    assert selecting([other, narrow, broad], job) == ("broad", "narrow")


@pytest.mark.parametrize(
    ("selector", "selected", "governed", "namespaces", "expected"),
    [
        (
            {"namespaces": ["team-typo"]},
            0,
            0,
            NAMESPACES,
            (
                "False",
                "NamespacesNotFound",
                "spec.selector.namespaces names 1 namespace that does not exist: team-typo",
            ),
        ),
        (
            {"namespaces": ["team-a", "team-typo", "teamb"]},
            0,
            0,
            NAMESPACES,
            ("False", "NamespacesNotFound", "names 2 namespaces that do not exist: team-typo, teamb"),
        ),
        (
            {"namespaceSelector": {"matchLabels": {"tier": "silver"}}},
            0,
            0,
            NAMESPACES,
            (
                "False",
                "NoNamespaceSelected",
                "no namespace carries the labels spec.selector.namespaceSelector",
            ),
        ),
        ({"kinds": ["PyTorchJob"]}, 0, 0, NAMESPACES, ("False", "NoJobSelected", "no job the controller")),
        # the namespaces not listed (yet): nothing is said of them
        ({"namespaces": ["team-typo"]}, 0, 0, None, ("False", "NoJobSelected", "no job the controller")),
        ({"namespaces": ["team-a"]}, 3, 3, NAMESPACES, ("True", "JobsSelected", "selects 3 jobs")),
        (
            {"namespaces": ["team-a"]},
            3,
            1,
            NAMESPACES,
            (
                "True",
                "JobsSelected",
                "governs 1: a more specific or higher-priority policy governs the others",
            ),
        ),
        (
            {"namespaces": ["team-a", "team-typo"]},
            1,
            1,
            NAMESPACES,
            (
                "True",
                "JobsSelected",
                "selects 1 job; spec.selector.namespaces names 1 namespace that does not exist: team-typo",
            ),
        ),
        # a release from before jobsSelected wrote 0 beside the jobs it governs
        ({}, 0, 2, NAMESPACES, ("True", "JobsSelected", "selects 2 jobs")),
    ],
)
def test_the_condition_says_whether_and_why_not(
    selector: dict[str, Any],
    selected: int,
    governed: int,
    namespaces: Any,
    expected: tuple[str, str, str],
) -> None:
    status, reason, message = reach_condition(
        selector_of(selector), selected=selected, governed=governed, namespaces=namespaces
    )
    assert (status, reason) == expected[:2]
    assert expected[2] in message, message
    assert ("team-typo" in message) == ("team-typo" in expected[2])


def test_a_tie_lost_is_said_as_a_tie_not_as_a_more_specific_policy() -> None:
    """A Recommend policy as specific as an Apply one, at the same priority, governs the jobs both
    select: the Apply one's condition said "a more specific or higher-priority policy governs"
    them (a platform trial); it names the policy and the tie."""
    sel = selector_of({"namespaces": ["team-a"]})
    _, _, message = reach_condition(sel, selected=2, governed=0, namespaces=None, lost_ties={"observe": 2})
    assert message == (
        "selects 2 jobs; governs 0: observe 2 jobs by a tie (same specificity and priority: a Recommend "
        "policy before an Apply one, then by name)"
    )
    _, _, message = reach_condition(sel, selected=3, governed=0, namespaces=None, lost_ties={"observe": 2})
    assert "a more specific or higher-priority policy governs the others; observe 2 jobs by a tie" in message
    _, _, message = reach_condition(sel, selected=2, governed=1, namespaces=None)
    assert message.endswith("governs 1: a more specific or higher-priority policy governs it")


def test_namespaces_no_controller_release_watches_are_named() -> None:
    """A release run with ``-n team-a`` (its entry ``lease[team-a]``) does not follow team-b's
    jobs: a policy for team-b read only "no job the controller follows matches" (a platform
    trial). When the releases' entries name what they watch, the namespaces none of them watches
    are named; an entry of a release watching every namespace says nothing of it."""
    from advisor.controller.policystatus import watched_namespaces

    watched = watched_namespaces(["sys/advisor[team-a]", "sys/other[team-c]"])
    assert watched == frozenset({"team-a", "team-c"})
    assert watched_namespaces(["sys/advisor[team-a]", "sys/advisor"]) is None
    only_b = selector_of({"namespaces": ["team-b"]})
    status, reason, message = reach_condition(
        only_b, selected=0, governed=0, namespaces=NAMESPACES, watched=watched
    )
    assert (status, reason) == ("False", "NamespacesNotWatched")
    assert message == (
        "selects no job: spec.selector.namespaces names 1 namespace no controller release watches: "
        "team-b (they watch team-a, team-c)"
    )
    both = selector_of({"namespaces": ["team-a", "team-b"]})
    status, reason, message = reach_condition(
        both, selected=0, governed=0, namespaces=NAMESPACES, watched=watched
    )
    assert reason == "NoJobSelected" and message.endswith("watches: team-b (they watch team-a, team-c)")
    status, reason, message = reach_condition(
        both, selected=2, governed=2, namespaces=NAMESPACES, watched=watched
    )
    assert status == "True" and message.startswith("selects 2 jobs; ") and "team-b" in message
    # a namespace that does not exist is said so, not said unwatched
    typo = selector_of({"namespaces": ["team-typo"]})
    _, reason, _ = reach_condition(typo, selected=0, governed=0, namespaces=NAMESPACES, watched=watched)
    assert reason == "NamespacesNotFound"
    _, reason, _ = reach_condition(only_b, selected=0, governed=0, namespaces=NAMESPACES, watched=None)
    assert reason == "NoJobSelected"


# ------------------------------------------------------------------------------ the controller


def test_a_release_watching_some_namespaces_says_a_policy_for_another_reaches_none() -> None:
    """Run with ``-n team-a`` and no leader election (its entry ``lease[team-a]``), the controller
    says a policy for team-b, which exists, selects no job because no release watches team-b."""
    api, e = cluster(policy("b-only", {"namespaces": ["team-b"]}), status_shard="sys/advisor[team-a]")
    run(e, jobs=(("team-a", "llm"),))
    reach = condition(api, "b-only")
    assert reach is not None and (reach["status"], reach["reason"]) == ("False", "NamespacesNotWatched")
    assert "team-b (they watch team-a)" in reach["message"]


def test_a_policy_naming_a_namespace_that_does_not_exist_says_so_and_stays_valid(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, e = cluster(policy("typo", {"namespaces": ["team-typo"]}, generation=4))
    with caplog.at_level(logging.WARNING, logger="advisor.controller.policybook"):
        now = run(e, jobs=(("team-a", "llm"),))
        for t in range(1, 6):  # refresh after refresh: one warning, not one each
            e.step(now + t * e.config.policy_status_interval_s)
    status = api.policies["typo"]["status"]
    assert status["jobsMatched"] == 0 and status["jobsSelected"] == 0
    valid = condition(api, "typo", "Valid")
    assert valid is not None and valid["status"] == "True"  # the policy is valid: it reaches nothing
    reach = condition(api, "typo")
    assert reach is not None
    assert (reach["status"], reach["reason"], reach["observedGeneration"]) == (
        "False",
        "NamespacesNotFound",
        4,
    )
    assert "team-typo" in reach["message"] and reach["lastTransitionTime"]
    warned = [r.getMessage() for r in caplog.records if "selects no job" in r.getMessage()]
    assert warned == [
        "AdvisorPolicy typo selects no job: spec.selector.namespaces names 1 namespace that does not "
        "exist: team-typo"
    ]


def test_once_the_namespace_exists_and_holds_a_job_the_policy_selects_it() -> None:
    api, e = cluster(policy("later", {"namespaces": ["team-c"]}))
    now = run(e, jobs=(("team-a", "llm"),))
    before = condition(api, "later")
    assert before is not None and before["reason"] == "NamespacesNotFound"
    e.enqueue("namespace", "ADDED", {"metadata": {"name": "team-c", "labels": {}}})
    now = run(e, t0=now + 60, jobs=(("team-c", "run"),))
    after = condition(api, "later")
    assert after is not None and (after["status"], after["reason"]) == ("True", "JobsSelected")
    assert after["message"] == "selects 1 job" and api.policies["later"]["status"]["jobsSelected"] == 1


def test_without_the_namespace_listing_no_namespace_is_called_missing() -> None:
    """A namespace not seen yet may exist (the start-up listing failed, the watch is catching up)."""
    api, e = cluster(policy("typo", {"namespaces": ["team-typo"]}), listed=False)
    run(e, jobs=(("team-a", "llm"),))
    reach = condition(api, "typo")
    assert reach is not None and (reach["status"], reach["reason"]) == ("False", "NoJobSelected")
    assert "team-typo" not in reach["message"]


def test_a_policy_whose_jobs_a_more_specific_one_governs_selects_them_all_the_same() -> None:
    """JOBS 0 for a policy outranked on every job it selects is not a policy that reaches nothing."""
    api, e = cluster(policy("broad"), policy("narrow", {"namespaces": ["team-a"]}))
    run(e, jobs=(("team-a", "llm"), ("team-b", "other")))
    broad, narrow = api.policies["broad"]["status"], api.policies["narrow"]["status"]
    assert (broad["jobsMatched"], broad["jobsSelected"]) == (1, 2)
    assert (narrow["jobsMatched"], narrow["jobsSelected"]) == (1, 1)
    reach = condition(api, "broad")
    assert reach is not None and reach["status"] == "True"
    assert reach["message"] == (
        "selects 2 jobs; governs 1: a more specific or higher-priority policy governs it"
    )


def test_jobs_another_shard_follows_count_for_a_policy_this_one_sees_none_of() -> None:
    """Namespace shards: each release sees its own namespaces' jobs; the condition reads the
    totals over the releases' entries."""
    api, clock = FakeApi(), Clock(T0)
    api.add_policy(policy("team-c", {"namespaces": ["team-c"]}))
    from advisor.controller.policystatus import JobFigures

    other = PolicyBook(api, Metrics(), shard="advisor/tjb", clock=clock)
    other.on_event("ADDED", api.get_policy("team-c"))
    other.write_figures([JobFigures("team-c/run", "team-c", (), selected=("team-c",))])
    clock.t += 60
    mine = PolicyBook(api, Metrics(), shard="advisor/tja", clock=clock)
    mine.namespaces = lambda: {**NAMESPACES, "team-c": {}}
    mine.on_event("ADDED", api.get_policy("team-c"))
    mine.write_figures([JobFigures("team-a/llm", None, ())])  # a job of its own that it does not select
    reach = condition(api, "team-c")
    assert reach is not None and (reach["status"], reach["message"]) == ("True", "selects 1 job")
    assert api.policies["team-c"]["status"]["shards"]["advisor/tja"]["jobsSelected"] == 0


def test_a_spec_edit_keeps_the_condition_until_the_figures_say_it_anew() -> None:
    """The conditions are one list, replaced whole by each write: the verdict written at a policy
    event carries the JobsSelected condition found in the status (a restarted controller has not
    computed its own yet) instead of dropping it."""
    api, e = cluster(policy("typo", {"namespaces": ["team-typo"]}))
    run(e, jobs=(("team-a", "llm"),))
    stored = api.policies["typo"]
    restarted = Engine(api, config=EngineConfig(write_interval_s=0, writer_workers=0))
    restarted.expect_job_listing()  # as at a start: the figures wait for the jobs, the verdict does not
    edited = {
        **stored,
        "metadata": {**stored["metadata"], "generation": 2},
        "spec": {"mode": "Apply", **{k: v for k, v in stored["spec"].items() if k != "mode"}},
    }
    api.policies["typo"] = edited
    restarted.enqueue("policy", "MODIFIED", api.get_policy("typo"))
    restarted.step(T0 + 600)
    verdicts = [
        c[2] for c in api.log if c[0] == "policy_status" and "shards" not in c[2] and "conditions" in c[2]
    ]
    kept = {c["type"]: c for c in verdicts[-1]["conditions"]}
    assert kept["Valid"]["observedGeneration"] == 2
    assert kept[JOBS_SELECTED]["reason"] == "NamespacesNotFound"
    assert kept[JOBS_SELECTED]["observedGeneration"] == 1  # computed for the generation before
