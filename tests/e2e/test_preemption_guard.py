"""Preemption on a real kube-apiserver with real Kueue (minimalkueue): the hazard the controller
reads from Workload objects, the guard's boost around a checkpoint, the grace-period advice.

The tests play the Trainer and the pods as ``test_controller_scenarios`` does (its ``Cluster``
helper is reused) and Kueue's TrainJob integration where minimalkueue has none: once Kueue evicts
a workload, the test releases its reservation as the job framework would (QuotaReserved=False,
admission cleared), and Kueue's own workload controller does the rest.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import controlplane as cp
import pytest
import yaml
from controller_harness import FAST, KUEUE, TRAINER, Controller, queue_objects, release_reservation, wait_for
from kubernetes.client.exceptions import ApiException
from test_controller_scenarios import Cluster, learning_curve

from advisor.controller.api import JSON_PATCH
from advisor.controller.gracepatch import MANAGER as GRACE_MANAGER
from advisor.controller.gracepatch import grace_entry, patched_grace, set_grace_ops
from advisor.controller.kueue import parse_time, parse_workload
from policies.hazard import hazard_by_queue, workload_exposure

ROOT = Path(__file__).resolve().parents[2]
BOOST = "kueue.x-k8s.io/priority-boost"
REQUEST = "advisor.trainjob-advisor.io/checkpoint-request"

pytestmark = pytest.mark.kueue


@pytest.fixture
def cluster(admin_api: Any, e2e_namespace: str) -> Cluster:
    return Cluster(admin_api, e2e_namespace)


@pytest.fixture
def queue(control_plane: cp.ControlPlane, cluster: Cluster) -> Iterator[str]:
    """A 16-GPU ClusterQueue that preempts lower priorities, and the namespace's LocalQueue on it."""
    cq = f"pre-{cluster.ns[-6:]}"
    control_plane.apply(queue_objects(cq, cluster.ns, preemption={"withinClusterQueue": "LowerPriority"}))
    yield cq
    control_plane.delete_namespace(cluster.ns)
    control_plane.delete("kueue.x-k8s.io/v1beta2", "ClusterQueue", cq, wait_s=30)
    control_plane.delete("kueue.x-k8s.io/v1beta2", "ResourceFlavor", cq, wait_s=30)


@pytest.fixture
def policy_cleanup(control_plane: cp.ControlPlane) -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        control_plane.delete("advisor.trainjob-advisor.io/v1alpha1", "AdvisorPolicy", name)


def _workload(cluster: Cluster, job: dict, *, priority: int = 0) -> str:
    name = cluster.create_workload(job)
    if priority:
        cluster.custom.patch_namespaced_custom_object(
            *KUEUE, cluster.ns, "workloads", name, {"spec": {"priority": priority}}
        )
    return name


def _cond(wl: dict, kind: str) -> dict | None:
    return next((c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def _true(cluster: Cluster, name: str, kind: str) -> bool:
    c = _cond(cluster.workload(name), kind)
    return c is not None and c["status"] == "True"


def _admitted_saver(cluster: Cluster) -> str:
    """The TrainJob ``saver``, admitted (its pod template sets no grace period: Kubernetes' 30 s),
    reporting 10 steps per 5 s (0.5 s a step) and a helper's 42 s saves: a save on SIGTERM needs
    43 s. Returns its Workload's name."""
    job = cluster.create_trainjob("saver", queue="queue")
    wl = _workload(cluster, job)
    wait_for(lambda: _true(cluster, wl, "Admitted"), "Kueue to admit the job")
    spec = learning_curve()
    t0 = time.time() - 300
    for i, step in enumerate(range(10, 300, 10)):
        ack = [
            {"name": "last_checkpoint_step", "value": "10"},
            {"name": "last_checkpoint_seconds", "value": "42"},
        ]
        cluster.report_step("saver", spec, step, t0 + 5 * i, ack)
        time.sleep(0.05)
    return wl


def test_the_hazard_read_from_real_workloads_matches_a_hand_count(cluster: Cluster, queue: str) -> None:
    low = cluster.create_trainjob("low", queue="queue")
    wl_low = _workload(cluster, low)
    wait_for(lambda: _true(cluster, wl_low, "Admitted"), "Kueue to admit the low-priority job")
    time.sleep(3)
    high = cluster.create_trainjob("high", queue="queue")
    wl_high = _workload(cluster, high, priority=100)
    wait_for(lambda: _true(cluster, wl_low, "Evicted"), "Kueue to preempt the low-priority job")
    assert _cond(cluster.workload(wl_low), "Evicted")["reason"] == "Preempted"
    released = time.time()
    spent = release_reservation(cluster.custom, cluster.ns, wl_low, reason="Preempted")
    wait_for(lambda: _true(cluster, wl_high, "Admitted"), "Kueue to admit the preemptor")
    time.sleep(2)
    objs = {n: cluster.workload(n) for n in (wl_low, wl_high)}
    now = time.time()
    # by hand: the one preemption Kueue recorded; the low job was admitted from Kueue's Admitted
    # transition until the release (the test's clock), the high one since Kueue admitted it
    stats = objs[wl_low]["status"].get("schedulingStats", {}).get("evictions", [])
    assert [(e["reason"], e["count"]) for e in stats] == [("Preempted", 1)]
    assert _cond(objs[wl_high], "Admitted")["status"] == "True"
    high_admitted = parse_time(_cond(objs[wl_high], "Admitted")["lastTransitionTime"])
    assert high_admitted is not None
    by_hand = 1 / (spent + (now - high_admitted))
    parsed = [parse_workload(o) for o in objs.values()]
    rates = hazard_by_queue(
        workload_exposure(
            queue,
            dict(w.evictions_by_reason),
            past_admitted_seconds=w.past_execution_seconds,
            admitted_since=w.admitted_at if w.admitted else None,
            now=now,
        )
        for w in parsed
    )
    # whole-second timestamps on both sides: within 2 s of the ~8 s of exposure
    assert rates[queue] == pytest.approx(by_hand, abs=by_hand * 2.0 / (spent + now - high_admitted))
    assert released - high_admitted < 5.0  # the preemptor went in on the freed quota at once


def test_a_likely_victim_is_boosted_acknowledges_a_checkpoint_and_loses_the_boost(
    control_plane: cp.ControlPlane, cluster: Cluster, queue: str, policy_cleanup: list[str]
) -> None:
    name = f"guard-{cluster.ns[-6:]}"
    cluster.apply_policy(
        control_plane,
        name,
        "Apply",
        checkpoint={"defaultCost": "5s", "defaultHazardPerHour": 100, "minInterval": "10s"},
        preemptionGuard={"staleAfter": "1m", "boost": 500, "dropAfter": "10m", "standingBoost": 5},
    )
    policy_cleanup.append(name)
    ctl = Controller(control_plane, cluster.ns, dataclasses.replace(FAST, priority_boost_enabled=True))
    try:
        job = cluster.create_trainjob("victim", queue="queue")
        wl = _workload(cluster, job)
        wait_for(lambda: _true(cluster, wl, "Admitted"), "Kueue to admit the job")
        pods = cluster.create_pods("victim")
        spec = learning_curve()
        t0 = time.time() - 300
        for i, step in enumerate(range(10, 200, 10)):
            cluster.report_step("victim", spec, step, t0 + 5 * i)
            time.sleep(0.05)
        # stale (no checkpoint yet) on a queue that preempts: the standing boost goes on
        boosted = wait_for(
            lambda: (cluster.workload(wl)["metadata"].get("annotations") or {}).get(BOOST), "the boost"
        )
        assert int(boosted) == 5
        # the periodic rule asks for one: Young/Daly for 5 s saves at the prior's 100 per hour, ~20 s
        rid = wait_for(lambda: cluster.pod_annotation(pods[0]), "a checkpoint request", timeout=90)
        cluster.report_step(
            "victim",
            spec,
            200,
            time.time(),
            [
                {"name": "last_checkpoint_step", "value": "200"},
                {"name": "last_checkpoint_request", "value": rid},
            ],
        )
        wait_for(
            lambda: BOOST not in (cluster.workload(wl)["metadata"].get("annotations") or {}),
            "the boost to be dropped after the acknowledgement",
        )
        reasons = wait_for(
            lambda: (r := cluster.reasons("victim")) and "PriorityBoostDropped" in r and r, "the Events"
        )
        assert {
            "PriorityBoosted",
            "CheckpointRequested",
            "CheckpointAcknowledged",
            "PriorityBoostDropped",
        } <= set(reasons)
    finally:
        ctl.close()


def test_a_trainjob_on_a_preemptible_queue_gets_the_grace_period_advice(
    control_plane: cp.ControlPlane, cluster: Cluster, queue: str, policy_cleanup: list[str]
) -> None:
    name = f"grace-{cluster.ns[-6:]}"
    cluster.apply_policy(control_plane, name, "Recommend", checkpoint={"minInterval": "1h"})
    policy_cleanup.append(name)
    ctl = Controller(control_plane, cluster.ns)
    try:
        _admitted_saver(cluster)
        event = wait_for(
            lambda: next(
                (
                    e
                    for e in cluster.events("saver")
                    if e.reason == "Recommendation" and "terminationGracePeriodSeconds" in (e.message or "")
                ),
                None,
            ),
            "the grace-period recommendation",
        )
        assert "terminationGracePeriodSeconds >= 43 (now 30)" in event.message
    finally:
        ctl.close()


GRACE_COMPONENT = ROOT / "manifests" / "components" / "trainjob-grace-period" / "trainjob-grace-period.yaml"


def _runtime_patches(cluster: Cluster, name: str) -> list[dict]:
    body = cluster.custom.get_namespaced_custom_object(*TRAINER[:2], cluster.ns, TRAINER[2], name)
    return list((body.get("spec") or {}).get("runtimePatches") or [])


def test_an_evicted_trainjob_gets_its_grace_period_for_the_next_start(
    control_plane: cp.ControlPlane, cluster: Cluster, queue: str, policy_cleanup: list[str]
) -> None:
    """Apply mode with ``setGracePeriod``: the job runs (0.5 s steps, 42 s saves: 43 s needed),
    Kueue preempts it and (as its TrainJob integration does) suspends the TrainJob; the controller
    writes its own runtimePatches entry, which the real API server validates against Trainer
    v2.3's CRD. A later larger value replaces it in two writes (the value is immutable there), and
    a TrainJob that is not suspended is refused by the patch's own test."""
    name = f"gapply-{cluster.ns[-6:]}"
    cluster.apply_policy(
        control_plane, name, "Apply", checkpoint={"minInterval": "1h", "setGracePeriod": True}
    )
    policy_cleanup.append(name)
    rbac = list(yaml.safe_load_all(GRACE_COMPONENT.read_text()))
    control_plane.apply(rbac)
    ctl = Controller(control_plane, cluster.ns)
    try:
        wl = _admitted_saver(cluster)
        time.sleep(2)
        assert _runtime_patches(cluster, "saver") == []  # running: nothing is written
        high = cluster.create_trainjob("high", queue="queue")
        _workload(cluster, high, priority=100)
        wait_for(lambda: _true(cluster, wl, "Evicted"), "Kueue to preempt the job")
        cluster.custom.patch_namespaced_custom_object(
            *TRAINER[:2], cluster.ns, TRAINER[2], "saver", {"spec": {"suspend": True}}
        )
        release_reservation(cluster.custom, cluster.ns, wl, reason="Preempted")
        patches = wait_for(lambda: _runtime_patches(cluster, "saver"), "the grace period to be written")
        assert [p["manager"] for p in patches] == [GRACE_MANAGER]
        assert patched_grace({"runtimePatches": patches}) == 43
        wait_for(lambda: "GracePeriodSet" in (cluster.reasons("saver") or []), "the GracePeriodSet Event")
        # the eviction is told on the job too (Kueue tells it on the Workload only), once
        wait_for(lambda: "Evicted" in (cluster.reasons("saver") or []), "the Evicted Event on the job")
        time.sleep(3)
        assert (cluster.reasons("saver") or []).count("Evicted") == 1
    finally:
        ctl.close()
        for doc in rbac:
            control_plane.delete(doc["apiVersion"], doc["kind"], doc["metadata"]["name"])
    # the value inside a runtime patch is immutable (Trainer's CEL rule): replaced in place it is
    # refused, so a larger one takes the two writes set_grace_ops plans
    custom = cluster.custom
    in_place = [{"op": "replace", "path": "/spec/runtimePatches/0", "value": grace_entry(60)}]
    with pytest.raises(ApiException) as refused:
        custom.patch_namespaced_custom_object(
            *TRAINER[:2], cluster.ns, TRAINER[2], "saver", in_place, _content_type=JSON_PATCH
        )
    assert refused.value.status == 422
    for _ in range(2):
        body = custom.get_namespaced_custom_object(*TRAINER[:2], cluster.ns, TRAINER[2], "saver")
        ops = set_grace_ops(body["spec"], 60)
        assert ops is not None
        custom.patch_namespaced_custom_object(
            *TRAINER[:2], cluster.ns, TRAINER[2], "saver", ops, _content_type=JSON_PATCH
        )
    body = custom.get_namespaced_custom_object(*TRAINER[:2], cluster.ns, TRAINER[2], "saver")
    assert patched_grace(body["spec"]) == 60 and set_grace_ops(body["spec"], 60) is None
    # a TrainJob that runs (not suspended) is never patched: the guard's test op fails
    running = cluster.create_trainjob("running", queue="queue")
    ops = set_grace_ops(running["spec"], 60)
    assert ops is not None
    with pytest.raises(ApiException) as not_suspended:
        custom.patch_namespaced_custom_object(
            *TRAINER[:2], cluster.ns, TRAINER[2], "running", ops, _content_type=JSON_PATCH
        )
    assert not_suspended.value.status == 422
    assert _runtime_patches(cluster, "running") == []
