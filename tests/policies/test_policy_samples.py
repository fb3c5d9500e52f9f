"""The sample policies load, pass the CRD schema, and do what their comments promise."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jsonschema
import pytest
import yaml
from policy_builders import HOUR, T0, cluster, forecast, job

from advisor.model import ActionKind, CheckpointState, ClusterQueueView, Mode, WorkloadView
from policies import Policy, decide, load_policies
from policies.crd import json_schema

SAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "samples"
REQUIRED = ["plateau-release", "preemption-guard", "elastic-growth", "deadline"]


def shipped(name: str) -> Policy:
    """The policy named like its file (a sample file may hold companion policies after it)."""
    (p,) = [p for p in load_policies(str(SAMPLES / f"policy-{name}.yaml")) if p.name == name]
    return p


def applied(policy: Policy) -> Policy:
    """The sample as an admin runs it once its advice has been checked: in Apply mode."""
    return dataclasses.replace(policy, spec=dataclasses.replace(policy.spec, mode=Mode.APPLY))


def sample(name: str) -> Policy:
    """The sample in Apply mode: what its rules do once switched on."""
    return applied(shipped(name))


@pytest.mark.parametrize("name", REQUIRED)
def test_required_samples_exist_load_and_pass_the_schema(name: str) -> None:
    p = shipped(name)
    # the README's deploy step applies the samples as they are: nothing may change on the cluster
    # until an admin switches them to Apply
    assert p.name == name and p.mode is Mode.RECOMMEND
    text = (SAMPLES / f"policy-{name}.yaml").read_text()
    assert text.count("#") >= 5, "samples must be commented"
    for doc in yaml.safe_load_all(text):
        jsonschema.validate(doc, json_schema(), cls=jsonschema.Draft4Validator)


def test_plateau_release_releases_a_plateaued_fine_tune_but_not_pretraining() -> None:
    p = sample("plateau-release")
    j = job(
        forecast=forecast(plateau=0.96),
        rule_state={"plateau.since": T0 - HOUR},
        checkpoint=CheckpointState(last_time=T0 - 60),
    )
    assert [a.kind for a in decide(j, cluster(), p, now=T0).actions] == [ActionKind.RELEASE_QUOTA]
    assert [a.kind for a in decide(dataclasses.replace(j, rule_state={}), cluster(), p, now=T0).actions] == []
    from policies import select_policy

    assert select_policy([p], dataclasses.replace(j, labels={"workload-type": "pretraining"})) is None


def test_plateau_release_keeps_pretraining_to_divergence_and_stall() -> None:
    """A pre-training run's flat stable phase is not a plateau; its NaN loss still goes."""
    from policies import select_policy

    both = [applied(p) for p in load_policies(str(SAMPLES / "policy-plateau-release.yaml"))]
    flat = job(
        labels={"workload-type": "pretraining"},
        forecast=forecast(plateau=0.99),
        rule_state={"plateau.since": T0 - HOUR},
        checkpoint=CheckpointState(last_time=T0 - 60),
    )
    chosen = select_policy(both, flat)
    assert chosen is not None and chosen.name == "plateau-release-pretraining"
    assert chosen.rules.plateau is None
    assert decide(flat, cluster(), chosen, now=T0).actions == ()
    blown = dataclasses.replace(flat, last_loss=float("nan"), forecast=forecast(plateau=0.99, diverge=1.0))
    assert [a.kind for a in decide(blown, cluster(), chosen, now=T0).actions] == [ActionKind.RELEASE_QUOTA]
    fine_tune = dataclasses.replace(flat, labels={"workload-type": "fine-tuning"})
    assert select_policy(both, fine_tune).name == "plateau-release"  # type: ignore[union-attr]
    assert select_policy(both, dataclasses.replace(flat, labels={})).name == "plateau-release"  # type: ignore[union-attr]


def test_preemption_guard_checkpoints_the_next_victim() -> None:
    p = sample("preemption-guard")
    q = ClusterQueueView(name="cq", nominal_gpus=8, usage_gpus=8, within_cluster_queue="LowerPriority")
    c = cluster(
        [q],
        [
            WorkloadView(
                namespace="team-a", name="ft-1", cluster_queue="cq", gpus=8, admitted=True, job="team-a/ft-1"
            ),
            WorkloadView(namespace="x", name="hi", cluster_queue="cq", gpus=8, priority=9, admitted=False),
        ],
        priority_boost_enabled=True,
    )
    j = job(checkpoint=CheckpointState(last_time=T0 - 20 * 60, cost_seconds=30))
    kinds = [a.kind for a in decide(j, c, p, now=T0).actions]
    assert kinds == [ActionKind.BOOST_PRIORITY, ActionKind.CHECKPOINT]


def test_elastic_growth_grows_a_converging_job_into_idle_quota() -> None:
    p = sample("elastic-growth")
    c = cluster([ClusterQueueView(name="cq", nominal_gpus=64, usage_gpus=8)])
    j = job(nodes=1, gpus=8, max_nodes=8, throughput=((1, 1.0),))
    d = decide(j, c, p, now=T0)
    assert [(a.kind, a.params.get("nodes")) for a in d.actions] == [(ActionKind.SCALE, 3)]


def test_deadline_warns_and_scales_only_for_deadlines() -> None:
    p = sample("deadline")
    c = cluster([ClusterQueueView(name="cq", nominal_gpus=64, usage_gpus=8)])
    relaxed = job(nodes=1, gpus=8, max_nodes=8, throughput=((1, 1.0),), forecast=forecast(eta=HOUR))
    assert decide(relaxed, c, p, now=T0).actions == ()  # elastic disabled: no growth for its own sake
    late = dataclasses.replace(
        relaxed, annotations={"advisor.trainjob-advisor.io/deadline": str(T0 + 1.5 * HOUR)}
    )
    d = decide(late, c, p, now=T0)
    assert d.advice.startswith("scale-up:") and d.actions[0].kind is ActionKind.SCALE


def test_the_samples_applied_together_govern_without_a_tie_broken_by_name() -> None:
    """Every sample applied at once (what a new admin does): each job kind is governed by one of
    them for a reason that is not the name order, and the fine-tunes by plateau-release."""
    from policies import select_policy, tied_with
    from policies.loader import policies_from_text

    every = [p for f in sorted(SAMPLES.glob("policy-*.yaml")) for p in policies_from_text(f.read_text())]
    for labels in ({}, {"workload-type": "pretraining"}):
        for kind in ("TrainJob", "PyTorchJob"):
            j = dataclasses.replace(job(labels=labels), kind=kind)
            chosen = select_policy(every, j)
            assert chosen is not None and tied_with(every, j, chosen) == (), (labels, kind)
            assert chosen.name.startswith("plateau-release"), (labels, kind, chosen.name)
