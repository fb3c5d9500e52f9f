"""With a standby, the chart keeps one replica through voluntary disruptions: a drain takes one
pod at a time (a PodDisruptionBudget) and the replicas prefer different nodes, so that a node's
loss or drain does not take the leader and its standby together."""

from __future__ import annotations

from tests.charts.render import helm_template, of_kind


def _affinity(objects: list) -> dict:
    (deployment,) = of_kind(objects, "Deployment")
    return deployment["spec"]["template"]["spec"].get("affinity") or {}


def test_two_replicas_get_a_budget_of_one_and_prefer_different_nodes() -> None:
    objects = helm_template()
    (pdb,) = of_kind(objects, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "trainjob-advisor"
    (term,) = _affinity(objects)["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"


def test_one_replica_gets_neither_and_an_explicit_affinity_replaces_the_spread() -> None:
    single = helm_template("leaderElection.enabled=false")
    assert of_kind(single, "PodDisruptionBudget") == [] and _affinity(single) == {}
    assert of_kind(helm_template("podDisruptionBudget.enabled=false"), "PodDisruptionBudget") == []
    mine = helm_template("affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution=null")
    assert "podAntiAffinity" not in _affinity(mine)
