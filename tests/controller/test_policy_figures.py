"""An AdvisorPolicy's figures: attempts are told from effects, recommendations from actions."""

from __future__ import annotations

from advisor.controller.policystatus import JobFigures, policy_figures
from advisor.model import ActionKind, ActionRecord


def record(kind: ActionKind, outcome: str, policy: str = "release", t: float = 0.0) -> ActionRecord:
    return ActionRecord(
        kind=kind, time=t, request_id=f"{kind.value}-{outcome}-{t}", policy=policy, outcome=outcome
    )


def test_actions_are_counted_by_kind_and_by_outcome_and_recommendations_apart() -> None:
    jobs = [
        JobFigures(
            "team-a/one",
            "release",
            [
                record(ActionKind.CHECKPOINT, "acknowledged"),
                record(ActionKind.RELEASE_QUOTA, "done", t=1),
                record(ActionKind.RECOMMEND, "recommended", t=2),
            ],
        ),
        JobFigures(
            "team-a/two",
            "release",
            [record(ActionKind.RELEASE_QUOTA, "impossible"), record(ActionKind.RELEASE_QUOTA, "failed", t=5)],
        ),
        JobFigures("team-b/other", "other", [record(ActionKind.RELEASE_QUOTA, "done", policy="other")]),
    ]
    figures = policy_figures(["release", "other"], jobs, {}).get("release")
    assert figures is not None
    status = figures.status()
    assert status["jobsMatched"] == 2 and status["recommendations"] == 1
    assert status["actionsTaken"] == 4
    assert status["actionsByKind"] == {"checkpoint": 1, "release-quota": 3}
    assert status["actionsByOutcome"] == {"acknowledged": 1, "done": 1, "failed": 1, "impossible": 1}
    assert sum(status["actionsByOutcome"].values()) == status["actionsTaken"]
    # of them, attempts with no effect (printer column FAILED: a 403 read as ACTIONS alone)
    assert status["actionsFailed"] == 2


def test_a_policy_that_loses_a_tie_by_name_says_which_policy_governs_its_jobs() -> None:
    jobs = [
        JobFigures("team-a/one", "sample", [], tied_with=("mine",)),
        JobFigures("team-a/two", "sample", [], tied_with=("mine",)),
        JobFigures("team-b/other", "mine", []),
    ]
    figures = policy_figures(["sample", "mine"], jobs, {})
    assert figures["mine"].status()["lostTies"] == {"sample": 2}
    assert figures["mine"].status()["jobsMatched"] == 1
    assert figures["sample"].status()["lostTies"] == {} and figures["sample"].status()["jobsMatched"] == 2
