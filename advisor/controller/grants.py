"""What a recommend-only controller may still write: write grants left over from an Apply install.

``--recommend-only`` holds every policy to Recommend, and the recommend-only install's RBAC has no
write verb on jobs, pods or Workloads: two rails. Going back from the ``apply`` overlay with
``kubectl apply -k manifests/`` keeps the act component's ClusterRole, binding and admission
policies (kustomize does not prune), so one rail is gone while the install reads as
recommend-only (a platform trial: ``kubectl auth can-i patch pytorchjobs --subresource=scale``
said yes under ``--recommend-only``). The controller asks the API server at start and says so.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["APPLY_WRITES", "leftover_warning", "leftover_writes"]

#: (verb, group, resource, subresource) of each write mode Apply makes
APPLY_WRITES: tuple[tuple[str, str, str, str], ...] = (
    ("patch", "", "pods", ""),
    ("patch", "kueue.x-k8s.io", "workloads", ""),
    ("patch", "kubeflow.org", "pytorchjobs", "scale"),
    ("patch", "trainer.kubeflow.org", "trainjobs", ""),
)


class AccessReviewer(Protocol):
    def may(self, verb: str, group: str, resource: str, subresource: str = "") -> bool | None: ...


def leftover_writes(api: AccessReviewer) -> list[str]:
    """The Apply writes this identity may make in every namespace (``patch pods``,
    ``patch pytorchjobs/scale``, ...); a review the server does not answer counts as none."""
    found = []
    for verb, group, resource, sub in APPLY_WRITES:
        if api.may(verb, group, resource, sub):
            name = f"{resource}/{sub}" if sub else resource
            found.append(f"{verb} {name}" + (f" ({group})" if group else ""))
    return found


def leftover_warning(writes: list[str]) -> str | None:
    """The start-up warning of a recommend-only controller that may still write (None: it may
    not)."""
    if not writes:
        return None
    return (
        "--recommend-only, yet this identity may still " + ", ".join(writes) + ": RBAC left from an "
        "Apply install (kustomize does not remove the act component when the recommend-only overlay is "
        "applied again: kubectl delete -k manifests/components/act; helm upgrade --set "
        "recommendOnly=true removes it itself). Every policy is still held to Recommend."
    )
