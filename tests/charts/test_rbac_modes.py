"""The controller's ClusterRoles grant what the rendered flags use, no more: the recommend-only
install (the chart's default, ``manifests/``) changes no job, Workload or pod, so it may write only
its own records (TrainJobForecasts, AdvisorPolicy status) and Events; ``recommendOnly=false`` and
``manifests/overlays/apply`` add the writes mode Apply makes (manifests/components/act);
``--no-kueue`` and ``--no-pytorchjobs`` leave no rule on the API groups the controller then never
touches. Both install paths grant the same in each mode."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.charts.render import MANIFESTS, helm_template, kustomize, of_kind

WRITES = {"create", "update", "patch", "delete", "deletecollection", "*"}
#: what the controller writes in every mode: its forecasts, its policies' status, its Events
RECORDS = {
    ("", "events", "create"),
    ("advisor.trainjob-advisor.io", "trainjobforecasts", "create"),
    ("advisor.trainjob-advisor.io", "trainjobforecasts/status", "patch"),
    ("advisor.trainjob-advisor.io", "advisorpolicies/status", "patch"),
}
#: what mode Apply adds: checkpoint requests, quota release (the job and its Workload read afresh)
#: and boosts, PyTorchJob resizes
ACT = {
    ("", "pods", "list"),
    ("", "pods", "patch"),
    ("kueue.x-k8s.io", "workloads", "get"),
    ("kueue.x-k8s.io", "workloads", "patch"),
    ("trainer.kubeflow.org", "trainjobs", "get"),
    ("kubeflow.org", "pytorchjobs/scale", "patch"),
    ("kubeflow.org", "pytorchjobs", "get"),
}


def _controller_grants(objects: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(group, resource, verb) of every ClusterRole bound to the controller's ServiceAccount, by a
    ClusterRoleBinding or a RoleBinding (not the aggregated forecast viewer)."""
    bound = {
        b["roleRef"]["name"]
        for b in of_kind(objects, "ClusterRoleBinding") + of_kind(objects, "RoleBinding")
        if b["roleRef"]["kind"] == "ClusterRole"
    }
    return {
        (g, r, v)
        for role in of_kind(objects, "ClusterRole")
        if role["metadata"]["name"] in bound
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def _args(objects: list[dict[str, Any]]) -> list[str]:
    (deployment,) = of_kind(objects, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


def _writes(grants: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    return {g for g in grants if g[2] in WRITES}


def _rules(path: str) -> set[tuple[str, str, str]]:
    role = next(yaml.safe_load_all((MANIFESTS / path).read_text()))
    return {
        (g, r, v)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


@pytest.mark.parametrize("sets", [(), ("watchNamespaces={team-a,team-b}",)])
def test_recommend_only_writes_nothing_but_its_own_records(sets: tuple[str, ...]) -> None:
    """The default install runs ``--recommend-only``: no pod, Workload or job write verb anywhere
    (the finding: it could patch pods in kube-system)."""
    objects = helm_template(*sets)
    assert "--recommend-only" in _args(objects)
    grants = _controller_grants(objects)
    assert _writes(grants) == RECORDS
    assert not {g for g in grants if g[1] in ("pods", "pytorchjobs/scale")}
    assert ("kueue.x-k8s.io", "workloads", "get") not in grants


def test_apply_adds_exactly_the_act_components_writes() -> None:
    plain = _controller_grants(helm_template())
    applying = helm_template("recommendOnly=false")
    assert "--recommend-only" not in _args(applying)
    assert _rules("components/act/act.yaml") == ACT
    assert _controller_grants(applying) == plain | ACT
    assert _writes(_controller_grants(applying)) == RECORDS | {a for a in ACT if a[2] in WRITES}


@pytest.mark.parametrize("recommend_only", ["true", "false"])
def test_no_kueue_and_no_pytorchjobs_leave_no_rule_on_their_groups(recommend_only: str) -> None:
    objects = helm_template(
        "pytorchJobs=false",
        "kueue.enabled=false",
        "kueue.priorityBoost=true",
        "kueue.saveWindowCheck=true",
        f"recommendOnly={recommend_only}",
    )
    assert {"--no-kueue", "--no-pytorchjobs"} <= set(_args(objects))
    groups = {g for g, _r, _v in _controller_grants(objects)}
    assert groups.isdisjoint({"kueue.x-k8s.io", "kubeflow.org"}), groups
    assert ("trainer.kubeflow.org", "trainjobs", "watch") in _controller_grants(objects)
    for role in of_kind(objects, "ClusterRole"):
        assert all(rule["apiGroups"] and rule["resources"] for rule in role["rules"]), role


def test_the_flags_off_one_at_a_time_drop_only_their_group() -> None:
    full = _controller_grants(helm_template("recommendOnly=false"))
    no_pt = _controller_grants(helm_template("recommendOnly=false", "pytorchJobs=false"))
    no_kueue = _controller_grants(helm_template("recommendOnly=false", "kueue.enabled=false"))
    assert no_pt == {g for g in full if g[0] != "kubeflow.org"}
    assert no_kueue == {g for g in full if g[0] != "kueue.x-k8s.io"}


def test_recommend_only_with_priority_boost_may_still_drop_its_own_boosts() -> None:
    """A boost the controller set in Apply is removed under ``--recommend-only`` too
    (policies/cleanup.py): that patch of a Workload, and nothing else of Apply's, stays."""
    plain = _controller_grants(helm_template())
    boosting = _controller_grants(helm_template("kueue.priorityBoost=true"))
    assert boosting - plain == {("kueue.x-k8s.io", "workloads", "patch")}


@pytest.mark.parametrize("opt_in", ["rbac.trainJobGracePeriod", "rbac.trainJobResize"])
def test_the_trainjob_opt_ins_grant_only_with_apply(opt_in: str) -> None:
    assert _controller_grants(helm_template(f"{opt_in}=true")) == _controller_grants(helm_template())
    applying = _controller_grants(helm_template("recommendOnly=false"))
    granted = _controller_grants(helm_template("recommendOnly=false", f"{opt_in}=true"))
    assert ("trainer.kubeflow.org", "trainjobs", "patch") in granted - applying


@pytest.mark.parametrize(
    ("overlay", "sets"),
    [
        (MANIFESTS, ()),
        (MANIFESTS / "overlays" / "recommend-only", ()),
        (MANIFESTS / "overlays" / "apply", ("recommendOnly=false",)),
    ],
)
def test_each_overlay_grants_what_the_chart_grants_in_its_mode(overlay: Any, sets: tuple[str, ...]) -> None:
    kustomized, charted = kustomize(overlay), helm_template(*sets)
    recommend_only = "--recommend-only" in _args(kustomized)
    assert recommend_only is ("--recommend-only" in _args(charted))
    assert _controller_grants(kustomized) == _controller_grants(charted)
    acting = {a for a in ACT if a[2] in WRITES}
    assert (acting & _controller_grants(kustomized)) == (set() if recommend_only else acting)


@pytest.mark.parametrize(
    ("watched", "in_default"), [("{team-a,team-b}", True), ("{team-a,default}", False), (None, False)]
)
def test_watch_namespaces_still_let_a_cluster_scoped_policy_be_told_of_in_default(
    watched: str | None, in_default: bool
) -> None:
    """An invalid AdvisorPolicy's Warning Event goes to ``default`` (a cluster-scoped object's
    Events live there): with ``watchNamespaces`` that leave it out, a Role there grants exactly
    that create; watched or cluster-wide, the namespace's own grants cover it."""
    objects = helm_template(*([f"watchNamespaces={watched}"] if watched else []))
    roles = [r for r in of_kind(objects, "Role") if r["metadata"]["namespace"] == "default"]
    bindings = [
        b
        for b in of_kind(objects, "RoleBinding")
        if b["metadata"]["namespace"] == "default" and b["roleRef"]["kind"] == "Role"
    ]
    if not in_default:
        assert roles == [] and bindings == []
        return
    (role,) = roles
    assert role["rules"] == [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]
    (binding,) = bindings
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    (deployment,) = of_kind(objects, "Deployment")
    assert binding["subjects"][0]["name"] == deployment["spec"]["template"]["spec"]["serviceAccountName"]
