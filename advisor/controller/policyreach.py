"""The ``JobsSelected`` condition of an AdvisorPolicy: whether it selects any job, and if not why.

A policy whose selector names a namespace that does not exist (``namespaces: [team-typo]``) or
matches no job is valid, so ``Valid`` says True and JOBS says 0, and an admin had nothing else to
go on. This condition says it the Kubernetes way (``kubectl describe``, ``kubectl wait
--for=condition=JobsSelected``), beside ``Valid``, which it leaves alone: the policy is valid,
it only reaches nothing.

* True ``JobsSelected``: it selects that many jobs, governs that many (a more specific or
  higher-priority policy governs the others), and names the namespaces it lists that do not exist;
* False ``NamespacesNotFound``: it selects no job and ``spec.selector.namespaces`` names
  namespaces that do not exist (named);
* False ``NoNamespaceSelected``: no namespace (of those it names) carries the labels its
  ``namespaceSelector`` asks for;
* False ``NamespacesNotWatched``: it selects no job and none of the namespaces
  ``spec.selector.namespaces`` names is watched by a controller release (each release watching
  a list of namespaces, ``--namespace``; named);
* False ``NoJobSelected``: no job the controller follows matches ``spec.selector``.

The counts are the totals over the controller releases' entries (``jobsSelected``,
``jobsMatched``): a namespace shard sees its own namespaces' jobs only, and a policy another
release's jobs reach selects jobs. Whether a namespace exists is known only once the controller
listed the namespaces (``namespaces`` None: not said). Pure; ``PolicyBook`` writes the condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.selection import missing_namespaces, namespace_selected

__all__ = ["JOBS_SELECTED", "reach_condition"]

#: the condition's type
JOBS_SELECTED = "JobsSelected"


def reach_condition(
    selector: Any,
    *,
    selected: int,
    governed: int,
    namespaces: Mapping[str, Mapping[str, str]] | None,
    lost_ties: Mapping[str, Any] | None = None,
    watched: frozenset[str] | None = None,
) -> tuple[str, str, str]:
    """(status, reason, message) of ``JobsSelected`` for a policy with ``selector``
    (``policies.spec.Selector``) that selects ``selected`` jobs and governs ``governed`` of them;
    ``namespaces``: the namespaces that exist (name -> labels), None when not known;
    ``lost_ties``: policy -> jobs it governs by a tie with this one (``status.lostTies``);
    ``watched``: the namespaces the controller releases watch between them, None when one of
    them watches every namespace (``policystatus.watched_namespaces``)."""
    selected = max(selected, governed)  # a job governed is selected (a release before jobsSelected)
    missing = missing_namespaces(selector, namespaces) if namespaces is not None else ()
    named = (
        f"spec.selector.namespaces names {_plural(len(missing), 'namespace')} that "
        f"{'does' if len(missing) == 1 else 'do'} not exist: {', '.join(missing)}"
    )
    unwatched = (
        [n for n in selector.namespaces if n not in watched and n not in missing]
        if watched is not None
        else []
    )
    unwatched_named = (
        f"spec.selector.namespaces names {_plural(len(unwatched), 'namespace')} no controller release "
        f"watches: {', '.join(unwatched)} (they watch {', '.join(sorted(watched or ())) or 'none'})"
    )
    if selected:
        message = f"selects {_plural(selected, 'job')}"
        if governed < selected:
            ties = {str(k): int(v) for k, v in (lost_ties or {}).items() if isinstance(v, int) and v > 0}
            tied = sum(ties.values())
            message += f"; governs {governed}: "
            if tied < selected - governed:
                message += (
                    f"a more specific or higher-priority policy governs "
                    f"{'it' if selected - governed == 1 else 'the others'}" + ("; " if ties else "")
                )
            if ties:
                # a tie lost is no more specific policy (a platform trial read it so): said apart
                message += (
                    ", ".join(f"{name} {_plural(n, 'job')}" for name, n in sorted(ties.items()))
                    + " by a tie (same specificity and priority: a Recommend policy before an Apply "
                    "one, then by name)"
                )
        notes = ([named] if missing else []) + ([unwatched_named] if unwatched else [])
        return "True", "JobsSelected", "; ".join([message, *notes])
    if missing:
        return "False", "NamespacesNotFound", f"selects no job: {named}"
    if unwatched and len(unwatched) == len(selector.namespaces):
        return "False", "NamespacesNotWatched", f"selects no job: {unwatched_named}"
    if namespaces is not None and not namespace_selected(selector, namespaces):
        among = " among those spec.selector.namespaces names" if selector.namespaces else ""
        return (
            "False",
            "NoNamespaceSelected",
            f"selects no job: no namespace{among} carries the labels "
            "spec.selector.namespaceSelector asks for",
        )
    also = f"; {unwatched_named}" if unwatched else ""
    return (
        "False",
        "NoJobSelected",
        f"selects no job: no job the controller follows matches spec.selector{also}",
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
