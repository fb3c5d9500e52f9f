"""The core loop's default collaborators: the forecaster, the policy selector, the decider, the
judgement gate and the one-word advice of a job no policy judged.

Apart from the loop so that its injection points (tests, the simulator's memoised forecaster)
and what they default to are read in one place; the policies are imported lazily, as the core
must not depend on them at import time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from advisor.model import Action, ClusterView, Curve, Decision, Forecast, JobView, Phase

__all__ = [
    "Decider",
    "Forecaster",
    "Judged",
    "PolicyLike",
    "Selector",
    "default_advice",
    "default_decider",
    "default_judged",
    "default_selector",
    "default_ties",
    "orphan_cleanup",
    "training_loss_forecast",
    "with_ties",
]


class PolicyLike(Protocol):
    """What the loop needs of a policy (``policies.Policy`` satisfies it)."""

    name: str


Forecaster = Callable[[Curve, "int | None"], Forecast]
Selector = Callable[[Sequence[Any], JobView], Any]
Decider = Callable[..., Decision]
Judged = Callable[[Any, JobView, float], bool]


def training_loss_forecast(curve: Curve, total_steps: int | None) -> Forecast:
    """The loop's default forecaster: a job's history is its training loss (its eval metrics are
    forecast by the learning state), the objective the optimiser minimises, which does not turn."""
    from advisor.forecast import forecast_curve

    return forecast_curve(curve, total_steps=total_steps, training_loss=True)


def default_selector(policies: Sequence[Any], job: JobView) -> Any:
    from policies import select_policy

    return select_policy(policies, job)


def default_ties(policies: Sequence[Any], job: JobView, chosen: Any) -> tuple[str, ...]:
    from policies import tied_with

    return tied_with(policies, job, chosen)


def with_ties(decision: Decision, chosen: Any, tied: tuple[str, ...]) -> Decision:
    """The decision saying that ``chosen`` governs over ``tied`` by its mode or name alone."""
    from policies import tie_reason

    if not tied:
        return decision
    return dataclasses.replace(
        decision, tied_with=tied, reasons=(*decision.reasons, tie_reason(chosen, tied))
    )


def default_decider(job: JobView, cluster: ClusterView, policy: Any, *, now: float) -> Decision:
    from policies import decide

    return decide(job, cluster, policy, now=now)


def orphan_cleanup(job: JobView, cluster: ClusterView, now: float) -> tuple[Action, ...]:
    """What the advisor undoes on a job no policy governs (``policies.cleanup``): its own boost,
    whose mandate ended with the policy (deleted, or no longer selecting the job)."""
    from policies.cleanup import boost_cleanup

    drop = boost_cleanup(job, cluster, now, why="no AdvisorPolicy governs the job")
    return (drop,) if drop is not None else ()


def default_judged(policy: Any, job: JobView, now: float) -> bool:
    """Whether ``policy`` judges ``job``'s learning now (its minimum runtime/steps/progress are
    met): only then do its rules read the forecast."""
    from policies.engine import judge

    return judge(job, policy, now)[0]


#: what the forecast's own hints carry when no policy governs the job: "plateau?" is a policy's
#: open window (README), and an admin who had just deleted the policy read a release still coming
NO_POLICY_HINT = " (no policy)"


def default_advice(view: JobView) -> str:
    """ADVICE of a job no AdvisorPolicy governs: its phase, or the forecast's own hint, said as
    no policy's (nothing is recommended or done)."""
    if view.phase is not Phase.RUNNING:
        return view.phase.value
    fc = view.forecast
    if fc is None:
        return "observing"
    if fc.divergence_probability >= 0.5:
        return "diverging?" + NO_POLICY_HINT
    label = view.learning_state.label if view.learning_state is not None else None
    if label in ("hung", "overfitting"):
        # the run state names what the training loss's forecast cannot see (a silent job, an eval
        # past its best): a hung job read "learning" beside STATE hung, in explain too
        return f"{label}?{NO_POLICY_HINT}"
    # above even odds only: a forecast of one or two points gives the uninformed 0.5, and a brand-new
    # (or just restored) job read "plateau?" at its first look
    if fc.plateau_probability > 0.5:
        return "plateau?" + NO_POLICY_HINT
    return "learning"
