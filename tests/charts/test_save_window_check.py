"""The save-window check as the chart renders it: its RBAC beside watchNamespaces."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.charts.render import helm_template, of_kind


def grants(objects: Sequence[dict[str, Any]], *, cluster_wide: bool) -> set[tuple[str, str, str]]:
    """``(group, resource, verb)`` granted in every namespace (the ClusterRoles bound by a
    ClusterRoleBinding) or only in some (those bound by RoleBindings)."""
    kind = "ClusterRoleBinding" if cluster_wide else "RoleBinding"
    bound = {b["roleRef"]["name"] for b in of_kind(list(objects), kind)}
    return {
        (g, r, v)
        for role in of_kind(list(objects), "ClusterRole")
        if role["metadata"]["name"] in bound
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def test_with_watch_namespaces_the_check_still_answers_workloads_in_every_namespace() -> None:
    """A ClusterQueue that lists the check may serve namespaces the release does not watch: the
    controller sets their workloads' check Ready (and posts an Event there), so those two writes
    stay cluster-wide, while its other writes stay in the watched namespaces."""
    objects = helm_template("watchNamespaces={team-a}", "kueue.saveWindowCheck=true")
    everywhere = grants(objects, cluster_wide=True)
    assert ("kueue.x-k8s.io", "workloads/status", "patch") in everywhere
    assert ("", "events", "create") in everywhere
    assert ("kueue.x-k8s.io", "workloads", "watch") in everywhere  # the unwatched namespaces' Workloads
    assert ("kueue.x-k8s.io", "workloads", "patch") not in everywhere  # spec.active: watched ones only
    assert ("", "pods", "patch") not in everywhere
    assert ("kueue.x-k8s.io", "workloads", "patch") in grants(objects, cluster_wide=False)
    # without the check, no status write and no Event outside the watched namespaces
    plain = helm_template("watchNamespaces={team-a}")
    assert not {("kueue.x-k8s.io", "workloads/status", "patch"), ("", "events", "create")} & grants(
        plain, cluster_wide=True
    )
