"""A recommend-only controller that may still write says so at start (``advisor.controller.grants``)."""

from __future__ import annotations

from advisor.controller.grants import APPLY_WRITES, leftover_warning, leftover_writes


class Reviewer:
    def __init__(self, allowed: set[tuple[str, str]], unknown: bool = False) -> None:
        self.allowed = allowed
        self.unknown = unknown
        self.asked: list[tuple[str, str, str, str]] = []

    def may(self, verb: str, group: str, resource: str, subresource: str = "") -> bool | None:
        self.asked.append((verb, group, resource, subresource))
        if self.unknown:
            return None
        return (resource, subresource) in self.allowed


def test_each_apply_write_still_granted_is_named_with_the_way_to_remove_it() -> None:
    r = Reviewer({("pods", ""), ("pytorchjobs", "scale")})
    found = leftover_writes(r)
    assert found == ["patch pods", "patch pytorchjobs/scale (kubeflow.org)"]
    assert r.asked == list(APPLY_WRITES)
    warning = leftover_warning(found)
    assert warning is not None and warning.startswith(
        "--recommend-only, yet this identity may still patch pods,"
    )
    assert "kubectl delete -k manifests/components/act" in warning and "recommendOnly=true" in warning


def test_a_recommend_only_identity_or_an_unanswered_review_says_nothing() -> None:
    assert leftover_writes(Reviewer(set())) == [] and leftover_warning([]) is None
    assert leftover_writes(Reviewer({("pods", "")}, unknown=True)) == []
