"""The ``Valid`` and ``RecommendOnly`` conditions of an AdvisorPolicy, and the status patch that
writes them with ``effectiveMode`` and ``observedGeneration``.

* ``Valid``: whether the loader accepts the policy; if not, its error and what governs its jobs
  meanwhile (what stands in for it, or that its jobs are held); if so, what ``policy validate``
  would warn of.
* ``RecommendOnly``: whether the controller holds every policy to Recommend
  (``--recommend-only``), and what of this policy that then evaluates.

The conditions are one list, which a merge patch replaces whole, so the patch carries every
condition, ``JobsSelected`` (``advisor.controller.policyreach``) among them; a condition keeps its
``lastTransitionTime`` while its status stays. Pure; ``PolicyBook`` writes the patch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advisor.controller.policyobject import validation_warnings
from advisor.model import Mode

__all__ = ["conditions_patch", "validity_conditions"]


def validity_conditions(
    *,
    error: str | None,
    holding: str | None,
    policy: Any,
    recommend_only: bool,
    why: tuple[str, str] | None = None,
) -> list[dict[str, Any]]:
    """``Valid`` and ``RecommendOnly`` of a policy whose loader ``error`` (None: valid) leaves
    its jobs ``holding`` (what governs them meanwhile), ``policy`` what is evaluated for it (the
    policy, what stands in for an invalid one, or None: nothing)."""
    valid = {
        "type": "Valid",
        "status": "False" if error else "True",
        "reason": "Invalid" if error else "Valid",
        "message": (f"{error}; {holding}" if holding else error)
        if error
        else "the policy is valid" + validation_warnings(policy),
    }
    if not recommend_only:
        return [
            valid,
            {
                "type": "RecommendOnly",
                "status": "False",
                "reason": "SpecMode",
                "message": "the controller evaluates the policy in its spec.mode",
            },
        ]
    said, lifted = why or ("the controller runs with --recommend-only", "once the controller runs without it")
    held = (
        f"; its spec.mode {policy.mode.value} takes effect {lifted}"
        if policy is not None and policy.mode is not Mode.RECOMMEND
        else ""
    )
    # an invalid policy is not evaluated itself: what stands in for it is, or (nothing standing
    # in) nothing is ("the policy is evaluated as Recommend" beside an empty EFFECTIVE column read
    # as a contradiction)
    what = (
        "the policy is"
        if not error
        else "what stands in for the invalid policy (see Valid) is"
        if policy is not None
        else None
    )
    return [
        valid,
        {
            "type": "RecommendOnly",
            "status": "True",
            "reason": "ControllerRecommendOnly",
            "message": f"{said}: {what} evaluated as Recommend and changes no job{held}"
            if what is not None
            else f"{said}; nothing of the invalid policy is evaluated (see Valid)",
        },
    ]


def conditions_patch(
    conditions: list[dict[str, Any]],
    *,
    reach: Mapping[str, Any] | None,
    stored: Mapping[str, Any],
    observed: int | None,
    mode: str | None,
    now: str,
) -> dict[str, Any] | None:
    """The merge patch that writes ``conditions`` (with ``reach``, the ``JobsSelected`` one,
    when given), ``effectiveMode`` ``mode`` and ``observedGeneration`` ``observed`` over the
    status ``stored``; None when it says all that already. A condition whose status is unchanged
    keeps its ``lastTransitionTime``; a changed one takes ``now``."""
    conditions = [dict(c) for c in conditions]
    if observed is not None:
        for cond in conditions:
            cond["observedGeneration"] = observed
    old = {c.get("type"): c for c in stored.get("conditions") or [] if isinstance(c, Mapping)}
    if reach is not None:
        conditions.append({k: v for k, v in reach.items() if k != "lastTransitionTime"})
    if (
        all(c["type"] in old and all(old[c["type"]].get(k) == v for k, v in c.items()) for c in conditions)
        and len(conditions) == len(old)
        and stored.get("observedGeneration") == observed
        and stored.get("effectiveMode") == mode
    ):
        return None
    for cond in conditions:
        before = old.get(cond["type"]) or {}
        same_verdict = before.get("status") == cond["status"] and before.get("lastTransitionTime")
        cond["lastTransitionTime"] = before["lastTransitionTime"] if same_verdict else now
    return {
        "conditions": conditions,
        "effectiveMode": mode,  # None nulls it out: nothing of the policy governs
        **({"observedGeneration": observed} if observed is not None else {}),
    }
