"""A thin, typed Kueue client over the kubernetes client's ``CustomObjectsApi``: which version
the server serves (``discover_version``), the reads, and the only two writes the advisor makes on
a Workload, ``spec.active`` and the ``kueue.x-k8s.io/priority-boost`` annotation (merge patches
on the main resource, never ``/status``). The objects it returns are ``kueue``'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from advisor.controller.kueue import (
    JOB_UID_LABEL,
    KUEUE_GROUP,
    KUEUE_VERSION,
    KUEUE_VERSIONS,
    ClusterQueue,
    LocalQueue,
    Workload,
    parse_cluster_queue,
    parse_local_queue,
    parse_workload,
)
from advisor.protocol import KUEUE_PRIORITY_BOOST_ANNOTATION

__all__ = ["KueueClient", "choose_version", "discover_version", "served_versions"]


# --------------------------------------------------------------------------------------------
# Which version the server serves
# --------------------------------------------------------------------------------------------


def choose_version(served: Iterable[str]) -> str | None:
    """The first of ``KUEUE_VERSIONS`` the server serves, or None (no Kueue, or only unknown versions)."""
    offered = set(served)
    return next((v for v in KUEUE_VERSIONS if v in offered), None)


def served_versions(api_client: Any, group: str) -> list[str]:
    """The versions of ``group`` the API server serves, from its discovery (empty: not served);
    raises what discovery raises."""
    from kubernetes import client

    groups = client.ApisApi(api_client).get_api_versions().groups or []
    found = next((g for g in groups if g.name == group), None)
    return [v.version for v in found.versions or []] if found is not None else []


def discover_version(api_client: Any) -> tuple[str, str]:
    """(version to use, why) from the server's API discovery.

    Without Kueue (or when discovery fails) the answer is ``KUEUE_VERSION``: the watches on it then
    wait, as kopf does for any resource not yet served, and start if Kueue is installed later.
    """
    try:
        served = served_versions(api_client, KUEUE_GROUP)
    except Exception as exc:  # discovery is open to every authenticated identity; say why if not
        why = getattr(exc, "reason", None) or exc
        return KUEUE_VERSION, f"API discovery failed ({why}); assuming {KUEUE_VERSION}"
    if not served:
        return KUEUE_VERSION, f"{KUEUE_GROUP} is not served (no Kueue); watching {KUEUE_VERSION} for it"
    chosen = choose_version(served)
    if chosen is None:
        known = ", ".join(KUEUE_VERSIONS)
        listed = ", ".join(served)
        return KUEUE_VERSION, f"{KUEUE_GROUP} serves {listed}, none of {known}; trying {KUEUE_VERSION}"
    return chosen, f"{KUEUE_GROUP} serves {', '.join(served)}; using {chosen}"


# --------------------------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------------------------


@dataclass
class KueueClient:
    """Reads Kueue objects and makes the advisor's two Workload writes.

    ``api`` is a ``kubernetes.client.CustomObjectsApi`` (or anything with the same methods, for
    unit tests). Writes are JSON merge patches of exactly the field they change, so they never
    race with Kueue's server-side-apply ownership of other fields.
    """

    api: Any
    version: str = KUEUE_VERSION

    # ------------------------------------------------------------------------------ reads
    def list_workloads(self, namespace: str | None = None, label_selector: str = "") -> list[Workload]:
        if namespace:
            resp = self.api.list_namespaced_custom_object(
                KUEUE_GROUP, self.version, namespace, "workloads", label_selector=label_selector
            )
        else:
            resp = self.api.list_cluster_custom_object(
                KUEUE_GROUP, self.version, "workloads", label_selector=label_selector
            )
        return [parse_workload(item) for item in resp.get("items") or []]

    def get_workload(self, namespace: str, name: str) -> Workload:
        return parse_workload(
            self.api.get_namespaced_custom_object(KUEUE_GROUP, self.version, namespace, "workloads", name)
        )

    def workload_for_job(self, namespace: str, job_uid: str) -> Workload | None:
        """The live (unfinished) Workload owned by the job with this uid, if any."""
        found = self.list_workloads(namespace, label_selector=f"{JOB_UID_LABEL}={job_uid}")
        if not found:  # the label is Kueue's convention; fall back to ownerReferences
            found = [w for w in self.list_workloads(namespace) if w.owner_uid == job_uid]
        live = [w for w in found if not w.finished]
        return sorted(live or found, key=lambda w: w.created_at or 0.0)[-1] if (live or found) else None

    def list_cluster_queues(self) -> list[ClusterQueue]:
        resp = self.api.list_cluster_custom_object(KUEUE_GROUP, self.version, "clusterqueues")
        return [parse_cluster_queue(item) for item in resp.get("items") or []]

    def list_local_queues(self, namespace: str | None = None) -> list[LocalQueue]:
        if namespace:
            resp = self.api.list_namespaced_custom_object(KUEUE_GROUP, self.version, namespace, "localqueues")
        else:
            resp = self.api.list_cluster_custom_object(KUEUE_GROUP, self.version, "localqueues")
        return [parse_local_queue(item) for item in resp.get("items") or []]

    # ------------------------------------------------------------------------------ writes
    def set_active(
        self, namespace: str, name: str, active: bool, *, resource_version: str | None = None
    ) -> Workload:
        """Deactivate (release quota; Kueue evicts and holds it) or reactivate a Workload. With
        ``resource_version`` the patch applies only to that version of the object (else 409)."""
        body: dict[str, Any] = {"spec": {"active": bool(active)}}
        if resource_version:
            body["metadata"] = {"resourceVersion": str(resource_version)}
        return parse_workload(
            self.api.patch_namespaced_custom_object(
                KUEUE_GROUP, self.version, namespace, "workloads", name, body
            )
        )

    def set_priority_boost(self, namespace: str, name: str, boost: int | None) -> Workload:
        """Set (``boost`` int) or remove (``None``) the ``kueue.x-k8s.io/priority-boost`` annotation."""
        value = None if boost is None else str(int(boost))
        body = {"metadata": {"annotations": {KUEUE_PRIORITY_BOOST_ANNOTATION: value}}}
        return parse_workload(
            self.api.patch_namespaced_custom_object(
                KUEUE_GROUP, self.version, namespace, "workloads", name, body
            )
        )
