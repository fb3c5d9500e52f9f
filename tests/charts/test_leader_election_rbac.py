"""The leader-election Role grants a replica its own Lease and evidence ConfigMap only: every verb
but ``create`` (which cannot name its object) is limited to the names the controller is started
with, so that a release cannot take over, or overwrite the evidence of, another release's Lease in
the same namespace."""

from __future__ import annotations

from typing import Any

import pytest

from advisor.controller.evidence import CONFIGMAP, evidence_name
from tests.charts.render import helm_template, of_kind


def _lease_arg(objects: list[dict[str, Any]]) -> str:
    (deployment,) = of_kind(objects, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (arg,) = [a for a in container["args"] if a.startswith("--leader-election-id=")]
    return arg.split("=", 1)[1]


def _named(role: dict[str, Any], resource: str) -> tuple[set[str], set[str]]:
    """(names, verbs) of the role's rules on ``resource`` that name their objects; asserts that the
    rules without names allow ``create`` only."""
    names: set[str] = set()
    verbs: set[str] = set()
    for rule in role["rules"]:
        if resource not in rule["resources"]:
            continue
        if "resourceNames" in rule:
            names |= set(rule["resourceNames"])
            verbs |= set(rule["verbs"])
        else:
            assert rule["verbs"] == ["create"], rule
    return names, verbs


@pytest.mark.parametrize(
    ("sets", "release"),
    [((), "trainjob-advisor"), ((), "shard-a"), (("leaderElection.id=my-lease",), "trainjob-advisor")],
)
def test_the_role_names_exactly_the_lease_the_controller_is_started_with(
    sets: tuple[str, ...], release: str
) -> None:
    objects = helm_template(*sets, release=release)
    lease = _lease_arg(objects)
    (role,) = [r for r in of_kind(objects, "Role") if r["metadata"]["name"].endswith("-leader-election")]
    assert _named(role, "leases") == ({lease}, {"get", "update"})
    assert _named(role, "configmaps") == ({evidence_name(lease), CONFIGMAP}, {"get", "patch"})
    # its own evidence it reads and writes; the shared name an earlier version wrote it reads only
    # (an upgrade's first read): a patch there let one release write another's evidence
    by_name = {
        name: set(r["verbs"])
        for r in role["rules"]
        if r["resources"] == ["configmaps"] and "resourceNames" in r
        for name in r["resourceNames"]
    }
    assert by_name[evidence_name(lease)] == {"get", "patch"}
    assert by_name[CONFIGMAP] == ({"get", "patch"} if evidence_name(lease) == CONFIGMAP else {"get"})
    named = [n for r in role["rules"] if r["resources"] == ["configmaps"] for n in r.get("resourceNames", [])]
    assert len(named) == len(set(named))  # each name once (as manifests/)


def test_a_release_without_leader_election_gets_no_role() -> None:
    objects = helm_template("leaderElection.enabled=false")
    assert [r for r in of_kind(objects, "Role") if r["metadata"]["name"].endswith("-leader-election")] == []


def test_the_kustomize_role_names_the_lease_its_deployment_is_started_with() -> None:
    import yaml

    from tests.charts.render import MANIFESTS, kustomize_deploy

    lease = _lease_arg(kustomize_deploy())
    role = next(yaml.safe_load_all((MANIFESTS / "rbac" / "leader-election.yaml").read_text()))
    assert _named(role, "leases") == ({lease}, {"get", "update"})
    assert _named(role, "configmaps")[0] == {evidence_name(lease), CONFIGMAP}
