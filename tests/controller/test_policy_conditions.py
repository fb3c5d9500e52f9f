"""An AdvisorPolicy's ``Valid`` and ``RecommendOnly`` conditions, and the patch that writes them:
what each says of a valid, an invalid and a stood-in policy, with and without
``--recommend-only``, and that an unchanged verdict writes nothing and keeps its transition time."""

from __future__ import annotations

import json
from typing import Any

from advisor.controller.policyconditions import conditions_patch, validity_conditions
from policies.loader import policies_from_text

T0 = "2026-12-06T10:00:00Z"
T1 = "2026-12-06T11:00:00Z"


def _policy(mode: str = "Apply") -> Any:
    return policies_from_text(
        json.dumps(
            {
                "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
                "kind": "AdvisorPolicy",
                "metadata": {"name": "p"},
                "spec": {"mode": mode, "rules": {"plateau": {"probability": 0.8, "for": "10m"}}},
            }
        )
    )[0]


def _by_type(conditions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in conditions}


def test_a_valid_policy_in_its_spec_mode() -> None:
    c = _by_type(validity_conditions(error=None, holding=None, policy=_policy(), recommend_only=False))
    assert (c["Valid"]["status"], c["Valid"]["reason"]) == ("True", "Valid")
    assert c["Valid"]["message"].startswith("the policy is valid")
    assert (c["RecommendOnly"]["status"], c["RecommendOnly"]["reason"]) == ("False", "SpecMode")


def test_an_invalid_policy_says_its_error_and_what_holds_its_jobs() -> None:
    c = _by_type(
        validity_conditions(
            error="spec.rules.plateau.probability: must be at most 1",
            holding="its jobs are held: no rule acts on them and no other policy takes them",
            policy=None,
            recommend_only=False,
        )
    )
    assert (c["Valid"]["status"], c["Valid"]["reason"]) == ("False", "Invalid")
    assert c["Valid"]["message"] == (
        "spec.rules.plateau.probability: must be at most 1; "
        "its jobs are held: no rule acts on them and no other policy takes them"
    )


def test_recommend_only_says_what_is_held_back_and_what_is_evaluated() -> None:
    apply = _by_type(validity_conditions(error=None, holding=None, policy=_policy(), recommend_only=True))
    assert apply["RecommendOnly"]["status"] == "True"
    assert "the policy is evaluated as Recommend" in apply["RecommendOnly"]["message"]
    assert "its spec.mode Apply takes effect" in apply["RecommendOnly"]["message"]
    recommend = _by_type(
        validity_conditions(error=None, holding=None, policy=_policy("Recommend"), recommend_only=True)
    )
    assert "takes effect" not in recommend["RecommendOnly"]["message"]
    stood_in = _by_type(validity_conditions(error="bad", holding=None, policy=_policy(), recommend_only=True))
    assert "what stands in for the invalid policy" in stood_in["RecommendOnly"]["message"]
    nothing = _by_type(validity_conditions(error="bad", holding=None, policy=None, recommend_only=True))
    assert "nothing of the invalid policy is evaluated" in nothing["RecommendOnly"]["message"]


def test_recommend_only_held_for_older_crds_says_so_and_what_lifts_it() -> None:
    why = ("the installed CRDs are older than the controller", "once they are upgraded")
    held = _by_type(
        validity_conditions(error=None, holding=None, policy=_policy(), recommend_only=True, why=why)
    )["RecommendOnly"]["message"]
    assert held == (
        "the installed CRDs are older than the controller: the policy is evaluated as Recommend and "
        "changes no job; its spec.mode Apply takes effect once they are upgraded"
    )
    assert "--recommend-only" not in held


def test_an_unchanged_verdict_writes_nothing_and_a_changed_one_only_moves_its_own_time() -> None:
    valid = validity_conditions(error=None, holding=None, policy=_policy(), recommend_only=False)
    reach = {"type": "JobsSelected", "status": "True", "reason": "JobsSelected", "message": "2 jobs"}
    first = conditions_patch(valid, reach=reach, stored={}, observed=3, mode="Apply", now=T0)
    assert first is not None
    assert first["effectiveMode"] == "Apply" and first["observedGeneration"] == 3
    assert [c["type"] for c in first["conditions"]] == ["Valid", "RecommendOnly", "JobsSelected"]
    assert all(c["lastTransitionTime"] == T0 for c in first["conditions"])
    assert conditions_patch(valid, reach=reach, stored=first, observed=3, mode="Apply", now=T1) is None

    recommend_only = validity_conditions(error=None, holding=None, policy=_policy(), recommend_only=True)
    second = conditions_patch(recommend_only, reach=reach, stored=first, observed=3, mode="Recommend", now=T1)
    assert second is not None
    times = {c["type"]: c["lastTransitionTime"] for c in second["conditions"]}
    assert times == {"Valid": T0, "RecommendOnly": T1, "JobsSelected": T0}


def test_a_new_generation_alone_is_written() -> None:
    valid = validity_conditions(error=None, holding=None, policy=_policy(), recommend_only=False)
    first = conditions_patch(valid, reach=None, stored={}, observed=1, mode="Apply", now=T0)
    assert first is not None
    again = conditions_patch(valid, reach=None, stored=first, observed=2, mode="Apply", now=T1)
    assert again is not None and again["observedGeneration"] == 2
    assert all(c["observedGeneration"] == 2 and c["lastTransitionTime"] == T0 for c in again["conditions"])
