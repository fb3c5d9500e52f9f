"""The ``Forecasting`` and ``Actionable`` conditions of a TrainJobForecast.

Kubernetes users read an object's state from its conditions (``kubectl wait
--for=condition=Actionable``, dashboards, alerts), not from free-form fields. Pure: the engine
passes the previous conditions so that ``lastTransitionTime`` moves only when a status does.

* ``Forecasting``: True once a forecast exists (``Forecast``); False with ``NoProgress`` (no
  sample yet), ``UnreadableProgress`` (reports arrive, none usable: the reader's warnings say
  why, e.g. a loss that is not a number, no step) or ``NotEnoughData`` (samples, no forecast yet).
* ``Actionable``: whether the advisor may act on the job now: True ``Apply``; False with
  ``NoPolicy``, ``RecommendOnly``, ``Exempt``, ``PoliciesNotListed`` (the controller could not list
  the AdvisorPolicies since it started, so it acts on no job), or the lifecycle phase of a job that
  is not running (``Finished``, ``Failed``, ``Suspended``, ``Pending``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from advisor.controller.render import iso
from advisor.model import Decision, JobView, Mode, Phase

__all__ = ["POLICIES_NOT_LISTED", "forecast_conditions"]

#: why nothing is acted on while the start-up listing of the AdvisorPolicies has not succeeded: the
#: Actionable condition's message, the recommendation's reason and ``/readyz``'s body say it alike
POLICIES_NOT_LISTED = (
    "the AdvisorPolicies could not be listed since the controller started: it acts on no job "
    "until they are (tried again in the background)"
)


def _forecasting(view: JobView) -> tuple[str, str, str]:
    if view.forecast is not None:
        fc = view.forecast
        return "True", "Forecast", f"forecast on {fc.n_points} point(s)"
    if view.last_sample_time is None and view.step == 0:
        if view.progress_warnings:
            return (
                "False",
                "UnreadableProgress",
                "progress reported, nothing usable in it: " + "; ".join(view.progress_warnings),
            )
        return "False", "NoProgress", "no progress report seen yet"
    # a reporter that sends steps and never a loss: "not enough data" read as if more would come
    none = "; no report has carried a loss" if view.last_loss is None and view.learning_state is None else ""
    return "False", "NotEnoughData", f"step {view.step}: not enough data for a forecast yet{none}"


def _actionable(
    view: JobView, decision: Decision | None, policies_listed: bool, invalid: str | None
) -> tuple[str, str, str]:
    status, reason, message = _actionable_verdict(view, decision, policies_listed)
    if invalid is not None and decision is not None and decision.policy is not None:
        message += f" (its current spec is invalid: {invalid})"
    return status, reason, message


def _actionable_verdict(
    view: JobView, decision: Decision | None, policies_listed: bool
) -> tuple[str, str, str]:
    if view.phase is not Phase.RUNNING:
        return "False", view.phase.value.capitalize(), view.phase_reason or f"the job is {view.phase.value}"
    if not policies_listed:
        return "False", "PoliciesNotListed", POLICIES_NOT_LISTED
    if decision is None or decision.policy is None:
        return "False", "NoPolicy", "no AdvisorPolicy selects this job"
    if decision.advice == "exempt":
        return "False", "Exempt", f"exempt from policy {decision.policy}"
    if decision.mode is not Mode.APPLY:
        return "False", "RecommendOnly", f"policy {decision.policy} only recommends"
    return "True", "Apply", f"policy {decision.policy} may act on this job"


def forecast_conditions(
    view: JobView,
    decision: Decision | None,
    *,
    now: float,
    previous: Sequence[Mapping[str, Any]] = (),
    policies_listed: bool = True,
    invalid_policy: str | None = None,
) -> list[dict[str, Any]]:
    """``invalid_policy``: when the governing policy's current spec is invalid, what stands in
    for it (``PolicyBook.holding``), which the Actionable message says: an admin whose edit was
    meant to narrow the policy must see why it still acts."""
    before = {str(c.get("type")): c for c in previous if isinstance(c, Mapping)}
    out: list[dict[str, Any]] = []
    for kind, (status, reason, message) in (
        ("Forecasting", _forecasting(view)),
        ("Actionable", _actionable(view, decision, policies_listed, invalid_policy)),
    ):
        old = before.get(kind)
        since = old.get("lastTransitionTime") if old is not None and old.get("status") == status else None
        out.append(
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": message[:300],
                "lastTransitionTime": since or iso(now),
            }
        )
    return out
