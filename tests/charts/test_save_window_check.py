"""The save-window check as the chart renders it: its RBAC beside watchNamespaces, and a check of
each release's own, so that namespace shards install side by side."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from advisor.controller.savecheck import CONTROLLER_NAME
from tests.charts.render import MANIFESTS, helm_notes, helm_template, of_kind


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
    objects = helm_template("watchNamespaces={team-a}", "kueue.saveWindowCheck=true", "recommendOnly=false")
    everywhere = grants(objects, cluster_wide=True)
    assert ("kueue.x-k8s.io", "workloads/status", "patch") in everywhere
    assert ("", "events", "create") in everywhere
    assert ("kueue.x-k8s.io", "workloads", "watch") in everywhere  # the unwatched namespaces' Workloads
    assert ("kueue.x-k8s.io", "workloads", "patch") not in everywhere  # spec.active: watched ones only
    assert ("", "pods", "patch") not in everywhere
    assert ("kueue.x-k8s.io", "workloads", "patch") in grants(objects, cluster_wide=False)
    # recommend-only: the check's writes, and no Workload patch anywhere
    held = helm_template("watchNamespaces={team-a}", "kueue.saveWindowCheck=true")
    assert ("kueue.x-k8s.io", "workloads/status", "patch") in grants(held, cluster_wide=True)
    every = grants(held, cluster_wide=True) | grants(held, cluster_wide=False)
    assert ("kueue.x-k8s.io", "workloads", "patch") not in every
    # without the check, no status write and no Event outside the watched namespaces
    plain = helm_template("watchNamespaces={team-a}")
    assert not {("kueue.x-k8s.io", "workloads/status", "patch"), ("", "events", "create")} & grants(
        plain, cluster_wide=True
    )


def _args(objects: list[dict[str, Any]]) -> list[str]:
    (deployment,) = of_kind(objects, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


def test_two_releases_with_their_own_namespaces_have_their_own_check_and_clash_nowhere() -> None:
    """The README's sharding: a second release beside the first, each with its own watchNamespaces
    and the check on. Each renders its own AdmissionCheck and controllerName, and its controller
    answers that one; no cluster-scoped object of one is the other's (helm refused to import the
    first's check into the second release)."""
    check = "kueue.saveWindowCheck=true"
    first = helm_template("watchNamespaces={team-a}", check)
    second = helm_template("watchNamespaces={team-b}", check, release="tjb")
    (a,) = of_kind(first, "AdmissionCheck")
    (b,) = of_kind(second, "AdmissionCheck")
    assert a["metadata"]["name"] == "trainjob-advisor-save-window"
    assert b["metadata"]["name"] == "tjb-trainjob-advisor-save-window"
    assert a["spec"]["controllerName"] != b["spec"]["controllerName"]
    for objects, ac in ((first, a), (second, b)):
        args = _args(objects)
        assert "--save-window-check" in args
        assert f"--save-window-controller-name={ac['spec']['controllerName']}" in args
    cluster_kinds = ("AdmissionCheck", "ClusterRole", "ClusterRoleBinding")

    def cluster_scoped(objects: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {(str(o["kind"]), str(o["metadata"]["name"])) for o in objects if o["kind"] in cluster_kinds}

    assert not cluster_scoped(first) & cluster_scoped(second)
    notes = " ".join(helm_notes("watchNamespaces={team-b}", check, release="tjb").split())
    assert "The save-window AdmissionCheck of this release is tjb-trainjob-advisor-save-window" in notes
    assert "created the AdmissionCheck tjb-trainjob-advisor-save-window" in notes


def test_the_default_release_keeps_the_check_existing_installs_and_the_kustomize_component_name() -> None:
    """Kueue refuses a change of an AdmissionCheck's controllerName, and ClusterQueues list the
    check by name: the release named trainjob-advisor keeps both, the component's."""
    component = MANIFESTS / "components" / "save-window-check" / "save-window-check.yaml"
    (kustomized,) = [d for d in yaml.safe_load_all(component.read_text()) if d["kind"] == "AdmissionCheck"]
    objects = helm_template("kueue.saveWindowCheck=true")
    (charted,) = of_kind(objects, "AdmissionCheck")
    assert charted["metadata"]["name"] == kustomized["metadata"]["name"] == "trainjob-advisor-save-window"
    assert charted["spec"] == kustomized["spec"] == {"controllerName": CONTROLLER_NAME}
    assert f"--save-window-controller-name={CONTROLLER_NAME}" in _args(objects)
    assert not of_kind(helm_template(), "AdmissionCheck")
    assert not of_kind(helm_template("kueue.saveWindowCheck=true", "kueue.enabled=false"), "AdmissionCheck")


def test_a_release_can_keep_the_check_name_it_had() -> None:
    """A release other than trainjob-advisor had the check trainjob-advisor-save-window before each
    release had its own: it can keep that name (and controllerName) across the upgrade, so that the
    ClusterQueues that list it keep admitting."""
    kept = helm_template(
        "kueue.saveWindowCheck=true", "kueue.saveWindowCheckName=trainjob-advisor-save-window", release="tjb"
    )
    (check,) = of_kind(kept, "AdmissionCheck")
    assert check["metadata"]["name"] == "trainjob-advisor-save-window"
    assert check["spec"]["controllerName"] == CONTROLLER_NAME
    named = helm_template(
        "kueue.saveWindowCheck=true", "kueue.saveWindowCheckName=gpu-a-check", release="tjb"
    )
    (check,) = of_kind(named, "AdmissionCheck")
    assert (check["metadata"]["name"], check["spec"]["controllerName"]) == (
        "gpu-a-check",
        "trainjob-advisor.io/gpu-a-check",
    )
    assert "--save-window-controller-name=trainjob-advisor.io/gpu-a-check" in _args(named)
