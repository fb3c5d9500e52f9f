"""Least privilege, proven on the real API server: for every resource it serves (subresources
included) and every verb, ask the server (SubjectAccessReview) whether the controller's
ServiceAccount, bound by manifests/rbac and manifests/components/act (what the apply overlay
grants), may do it, in a tenant's namespace, in the controller's own namespace and cluster-wide.
Allowed must be exactly what the controller's code uses (in mode Apply: the recommend-only install
has no pod, Workload or PyTorchJob-scale write, tests/charts/test_rbac_modes.py)."""

from __future__ import annotations

from typing import Any

import controlplane
from kubernetes import client

SA = "system:serviceaccount:trainjob-advisor-system:trainjob-advisor"
GROUPS = ["system:serviceaccounts", "system:serviceaccounts:trainjob-advisor-system", "system:authenticated"]
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
ADV = "advisor.trainjob-advisor.io"

#: what the controller's code calls (advisor/controller/api.py, kueue.py, leader.py, kopf's watches)
USED_EVERYWHERE = {
    # get: a release reads the job afresh (advisor/controller/mutations.py, ``_job_ended``)
    ("trainer.kubeflow.org", "trainjobs"): {"get", "list", "watch"},
    ("kubeflow.org", "pytorchjobs"): {"get", "list", "watch"},
    ("kubeflow.org", "pytorchjobs/scale"): {"patch"},
    ("kueue.x-k8s.io", "workloads"): {"get", "list", "watch", "patch"},
    ("kueue.x-k8s.io", "clusterqueues"): {"list", "watch"},
    ("kueue.x-k8s.io", "localqueues"): {"list", "watch"},
    ("", "pods"): {"list", "patch"},
    ("", "namespaces"): {"list", "watch"},
    ("", "events"): {"create"},
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
    (ADV, "trainjobforecasts"): {"list", "create"},
    (ADV, "trainjobforecasts/status"): {"patch"},
    (ADV, "advisorpolicies"): {"get", "list", "watch"},
    (ADV, "advisorpolicies/status"): {"patch"},
    # the API server's defaults for every authenticated user (system:basic-user): "what may I do?"
    ("authorization.k8s.io", "selfsubjectaccessreviews"): {"create"},
    ("authorization.k8s.io", "selfsubjectrulesreviews"): {"create"},
    ("authentication.k8s.io", "selfsubjectreviews"): {"create"},
}
#: only in its own namespace: the leader Lease and the runtime-evidence ConfigMap (create, which
#: names no object; every other verb on those two names only: ``NAMED_IN_OWN_NAMESPACE``)
USED_IN_OWN_NAMESPACE = {
    ("coordination.k8s.io", "leases"): {"create"},
    ("", "configmaps"): {"create"},
}
NAMED_IN_OWN_NAMESPACE = {
    ("coordination.k8s.io", "leases", "trainjob-advisor"): {"get", "update"},
    ("", "configmaps", "trainjob-advisor-runtime-evidence"): {"get", "patch"},
}


def _served(plane: controlplane.ControlPlane) -> list[tuple[str, str, bool]]:
    """(group, resource or resource/subresource, namespaced) for every version the server serves."""
    dyn = plane.dynamic()
    paths = [("", "/api/v1")]
    for group in dyn.request("get", "/apis").to_dict()["groups"]:
        paths += [(group["name"], f"/apis/{v['groupVersion']}") for v in group["versions"]]
    out: set[tuple[str, str, bool]] = set()
    for group, path in paths:
        for r in dyn.request("get", path).to_dict().get("resources") or []:
            out.add((group, r["name"], bool(r.get("namespaced"))))
    return sorted(out)


def _allowed(
    authz: Any, group: str, resource: str, verb: str, namespace: str, name: str | None = None
) -> bool:
    kind, _, sub = resource.partition("/")
    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=SA,
            groups=GROUPS,
            resource_attributes=client.V1ResourceAttributes(
                group=group,
                resource=kind,
                subresource=sub or None,
                verb=verb,
                namespace=namespace or None,
                name=name,
            ),
        )
    )
    return bool(authz.create_subject_access_review(review).status.allowed)


def test_the_controller_may_do_exactly_what_its_code_uses(
    plane: controlplane.ControlPlane, admin: Any
) -> None:
    """Must hold: over every served resource x every verb, the set the server allows equals
    USED_EVERYWHERE (in any tenant namespace and cluster-wide) plus USED_IN_OWN_NAMESPACE (in
    trainjob-advisor-system only); in particular no Secret, no delete, no update of a user object."""
    authz = client.AuthorizationV1Api(admin)
    served = _served(plane)
    allowed: dict[str, set[tuple[str, str, str]]] = {"tenant": set(), "own": set(), "cluster": set()}
    asked = 0
    for group, resource, namespaced in served:
        for verb in VERBS:
            scopes = (
                {"tenant": "tenant-a", "own": "trainjob-advisor-system"} if namespaced else {"cluster": ""}
            )
            for scope, ns in scopes.items():
                asked += 1
                if _allowed(authz, group, resource, verb, ns):
                    allowed[scope].add((group, resource, verb))

    def flat(table: dict[tuple[str, str], set[str]], namespaced: bool) -> set[tuple[str, str, str]]:
        kinds = {(g, r) for g, r, n in served if n is namespaced}
        return {(g, r, v) for (g, r), verbs in table.items() if (g, r) in kinds for v in verbs}

    print(f"\n[reliability] RBAC: {len(served)} resources x {len(VERBS)} verbs, {asked} reviews")
    assert allowed["tenant"] == flat(USED_EVERYWHERE, True)
    assert allowed["own"] == flat(USED_EVERYWHERE, True) | flat(USED_IN_OWN_NAMESPACE, True)
    assert allowed["cluster"] == flat(USED_EVERYWHERE, False)
    # the Lease and the evidence ConfigMap by name: their own verbs, and no other object's
    for (group, resource, name), verbs in NAMED_IN_OWN_NAMESPACE.items():
        for verb in VERBS:
            own = _allowed(authz, group, resource, verb, "trainjob-advisor-system", name)
            assert own is (verb in verbs or verb == "create"), (resource, name, verb)
            other = _allowed(authz, group, resource, verb, "trainjob-advisor-system", "another")
            assert other is (verb == "create"), (resource, "another", verb)
    everything = set().union(*allowed.values())
    assert not any(r == "secrets" or v in ("delete", "deletecollection") for _, r, v in everything)
    assert not any(v == "update" and g != "coordination.k8s.io" for g, _, v in everything)
