"""Which AdvisorPolicy governs a job, deterministically.

Every criterion a policy's selector gives must hold. Among the matching policies the most specific
wins: the one whose selector constrains more (one point per constrained dimension: namespaces,
local queues, cluster queues, kinds; one per label requirement of the namespace and job
selectors), then the higher ``priority``, then the less disruptive mode (a Recommend policy
before an Apply one: a new Apply policy that happens to select the same jobs as a Recommend one
as specifically must not take them over, and act on them within seconds, by its name alone), then
the name in lexical order. The input order of the policies never matters.

A tie broken by name is a configuration an admin rarely means (a sample policy's label selector
counts as much as one's own namespace list): ``tied_with`` names the policies that lost that way,
and ``tie_reason`` says it in the decision, so that ``explain``, the policy's status and
``policy explain`` show it instead of a policy that silently governs nothing.

Whom a policy reaches at all, whichever policy governs: ``selecting`` names the policies that
select a job, and ``missing_namespaces`` / ``namespace_selected`` say whether the namespaces a
selector names exist and whether any namespace passes it, so that a policy that selects no job
(a typo in ``namespaces``, a ``namespaceSelector`` no namespace carries) says why in its status
instead of showing JOBS 0 and nothing else.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from advisor.model import JobView, Mode
from advisor.protocol import KUEUE_QUEUE_LABEL
from policies.spec import Policy, Selector

__all__ = [
    "matches",
    "missing_namespaces",
    "namespace_selected",
    "select_policy",
    "selecting",
    "specificity",
    "tie_reason",
    "tied_with",
]


def specificity(selector: Selector) -> int:
    score = sum(
        1
        for dim in (selector.namespaces, selector.local_queues, selector.cluster_queues, selector.kinds)
        if dim
    )
    for ls in (selector.namespace_selector, selector.job_selector):
        if ls is not None:
            score += ls.size
    return score


def matches(selector: Selector, job: JobView) -> bool:
    if selector.namespaces and job.namespace not in selector.namespaces:
        return False
    if selector.kinds and job.kind not in selector.kinds:
        return False
    if selector.local_queues:
        queue = job.queue_name if job.queue_name is not None else job.labels.get(KUEUE_QUEUE_LABEL)
        if queue not in selector.local_queues:
            return False
    if selector.cluster_queues and job.cluster_queue not in selector.cluster_queues:
        return False
    if selector.namespace_selector is not None and not selector.namespace_selector.matches(
        job.namespace_labels
    ):
        return False
    return selector.job_selector is None or selector.job_selector.matches(job.labels)


def _rank(p: Policy) -> tuple[int, int, int, str]:
    return (-specificity(p.selector), -p.priority, 0 if p.mode is Mode.RECOMMEND else 1, p.name)


def select_policy(policies: Sequence[Policy], job: JobView) -> Policy | None:
    """The policy that governs ``job`` (``None`` when none matches)."""
    best: Policy | None = None
    best_key: tuple[int, int, int, str] | None = None
    for p in policies:
        if not matches(p.selector, job):
            continue
        key = _rank(p)
        if best_key is None or key < best_key:
            best, best_key = p, key
    return best


def tied_with(policies: Sequence[Policy], job: JobView, chosen: Policy) -> tuple[str, ...]:
    """The other policies that select ``job`` as specifically and with the same priority as
    ``chosen``, which won over them by its mode (Recommend before Apply) or its name alone
    (sorted)."""
    key = _rank(chosen)[:2]
    return tuple(
        sorted(
            p.name
            for p in policies
            if p.name != chosen.name and _rank(p)[:2] == key and matches(p.selector, job)
        )
    )


def tie_reason(chosen: Policy, tied: Sequence[str]) -> str:
    """The decision's reason for a tie broken by mode or name (empty ``tied``: none)."""
    return (
        f"policy: {chosen.name} governs over {', '.join(tied)} (same specificity "
        f"{specificity(chosen.selector)} and priority {chosen.priority}: a Recommend policy before an "
        "Apply one, then by name); set spec.priority on the one meant to govern"
    )


def selecting(policies: Iterable[Policy], job: JobView) -> tuple[str, ...]:
    """The names of the policies that select ``job`` (sorted), the one that governs it and those
    it wins over alike: a policy that selects jobs but governs none is outranked, not idle."""
    return tuple(sorted(p.name for p in policies if matches(p.selector, job)))


def missing_namespaces(selector: Selector, existing: Collection[str]) -> tuple[str, ...]:
    """The namespaces ``selector.namespaces`` names that are not among ``existing``, in its order:
    the API server accepts any well-formed name, and a typo selects nothing, silently."""
    return tuple(name for name in selector.namespaces if name not in existing)


def namespace_selected(selector: Selector, namespaces: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether any of ``namespaces`` (name -> labels, those that exist) passes the selector's
    namespace criteria (``namespaces`` and ``namespaceSelector``): without one, no job can."""
    return any(
        (not selector.namespaces or name in selector.namespaces)
        and (selector.namespace_selector is None or selector.namespace_selector.matches(labels))
        for name, labels in namespaces.items()
    )
