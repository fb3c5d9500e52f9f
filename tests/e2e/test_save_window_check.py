"""The save-window AdmissionCheck on a real kube-apiserver with real Kueue (minimalkueue): Kueue
starts a workload on a ClusterQueue that lists the advisor's check only once the controller set the
check Ready, after it evaluated the job; a new TrainJob whose runtime's jobs measured their save
windows gets its grace period written before its first start.

The tests play the Trainer and its pods as ``test_preemption_guard`` does (its helpers are reused);
Kueue's own scheduler and workload controller reserve quota, list the check on each workload and
admit once it is Ready.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import controlplane as cp
import pytest
import yaml
from controller_harness import KUEUE, TRAINER, Controller, queue_objects, wait_for
from test_controller_scenarios import Cluster, learning_curve
from test_preemption_guard import GRACE_COMPONENT, _runtime_patches, _true, _workload

from advisor.controller.gracepatch import MANAGER as GRACE_MANAGER
from advisor.controller.gracepatch import patched_grace
from advisor.controller.savecheck import CONTROLLER_NAME

ROOT = Path(__file__).resolve().parents[2]
CHECK_COMPONENT = ROOT / "manifests" / "components" / "save-window-check" / "save-window-check.yaml"

pytestmark = pytest.mark.kueue


@pytest.fixture
def cluster(admin_api: Any, e2e_namespace: str) -> Cluster:
    return Cluster(admin_api, e2e_namespace)


@pytest.fixture
def checked_queue(control_plane: cp.ControlPlane, cluster: Cluster) -> Iterator[str]:
    """A 64-GPU ClusterQueue that lists an AdmissionCheck of the advisor's, the namespace's
    LocalQueue on it, and the RBAC of the check's and the grace period's components. Yields the
    check's name."""
    suffix = cluster.ns[-6:]
    check, cq = f"sw-{suffix}", f"swq-{suffix}"
    rbac = [
        *list(yaml.safe_load_all(GRACE_COMPONENT.read_text())),
        *[d for d in yaml.safe_load_all(CHECK_COMPONENT.read_text()) if d["kind"] != "AdmissionCheck"],
    ]
    control_plane.apply(
        [
            *rbac,
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "AdmissionCheck",
                "metadata": {"name": check},
                "spec": {"controllerName": CONTROLLER_NAME},
            },
            *queue_objects(
                cq, cluster.ns, gpus=64, admissionChecksStrategy={"admissionChecks": [{"name": check}]}
            ),
        ]
    )
    yield check
    control_plane.delete_namespace(cluster.ns)
    control_plane.delete("kueue.x-k8s.io/v1beta2", "ClusterQueue", cq, wait_s=30)
    control_plane.delete("kueue.x-k8s.io/v1beta2", "ResourceFlavor", cq, wait_s=30)
    control_plane.delete("kueue.x-k8s.io/v1beta2", "AdmissionCheck", check, wait_s=30)
    for doc in rbac:
        control_plane.delete(doc["apiVersion"], doc["kind"], doc["metadata"]["name"])


def _check_state(cluster: Cluster, wl: str, check: str) -> dict[str, Any] | None:
    body = cluster.custom.get_namespaced_custom_object(*KUEUE, cluster.ns, "workloads", wl)
    return next(
        (c for c in (body.get("status") or {}).get("admissionChecks") or [] if c["name"] == check), None
    )


def _active(cluster: Cluster, check: str) -> bool:
    body = cluster.custom.get_cluster_custom_object(KUEUE[0], KUEUE[1], "admissionchecks", check)
    conds = (body.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Active" and c["status"] == "True" for c in conds)


def _suspended_trainjob(cluster: Cluster, name: str) -> dict[str, Any]:
    """A TrainJob as Kueue's webhook leaves it: suspended until its Workload is admitted."""
    job = cluster.create_trainjob(name, queue="queue")
    cluster.custom.patch_namespaced_custom_object(
        *TRAINER[:2], cluster.ns, TRAINER[2], name, {"spec": {"suspend": True}}
    )
    return job


def test_a_new_trainjob_starts_only_after_the_advisor_gave_it_its_runtimes_grace_period(
    control_plane: cp.ControlPlane, cluster: Cluster, checked_queue: str
) -> None:
    check = checked_queue
    name = f"swc-{cluster.ns[-6:]}"
    cluster.apply_policy(
        control_plane, name, "Apply", checkpoint={"minInterval": "1h", "setGracePeriod": True}
    )
    ctl = Controller(control_plane, cluster.ns, save_window_check=True)
    try:
        wait_for(lambda: _active(cluster, check), "the controller to mark its AdmissionCheck Active")
        # three jobs of the runtime run and report 0.5 s steps and a helper's 42 s saves
        spec = learning_curve()
        for saver in ("saver-1", "saver-2", "saver-3"):
            wl = _workload(cluster, _suspended_trainjob(cluster, saver))
            wait_for(lambda wl=wl: _true(cluster, wl, "Admitted"), f"Kueue to admit {saver}")
            state = _check_state(cluster, wl, check)
            assert state is not None and state["state"] == "Ready"
            assert state["message"].startswith("trainjob-advisor looked at the job before its start")
            cluster.custom.patch_namespaced_custom_object(
                *TRAINER[:2], cluster.ns, TRAINER[2], saver, {"spec": {"suspend": False}}
            )
            t0 = time.time() - 300
            for i, step in enumerate(range(10, 300, 10)):
                ack = [
                    {"name": "last_checkpoint_step", "value": "10"},
                    {"name": "last_checkpoint_seconds", "value": "42"},
                ]
                cluster.report_step(saver, spec, step, t0 + 5 * i, ack)
                time.sleep(0.02)
        time.sleep(2)  # the controller has read the savers' reports
        # a new job of the same runtime and size: held by the check until the advisor wrote the
        # grace period its peers' saves need (a 0.5 s step plus a 42 s save: 43 s)
        wl = _workload(cluster, _suspended_trainjob(cluster, "fresh"))
        wait_for(lambda: _true(cluster, wl, "Admitted"), "Kueue to admit the new job")
        patches = _runtime_patches(cluster, "fresh")
        assert [p["manager"] for p in patches] == [GRACE_MANAGER]
        assert patched_grace({"runtimePatches": patches}) == 43
        state = _check_state(cluster, wl, check)
        assert state is not None and state["state"] == "Ready"
        assert "set terminationGracePeriodSeconds to 43" in state["message"]
        assert "measured on 3 jobs of runtime torch-distributed" in state["message"]
    finally:
        ctl.close()
        control_plane.delete("advisor.trainjob-advisor.io/v1alpha1", "AdvisorPolicy", name)


def test_a_workload_of_a_namespace_the_controller_does_not_watch_starts_at_once_and_says_why(
    control_plane: cp.ControlPlane, admin_api: Any, cluster: Cluster, checked_queue: str
) -> None:
    """The controller watches the test's namespace only; the checked ClusterQueue serves another
    one too. A workload there must not wait, its quota held, for a look that never comes: its check
    goes Ready with the reason, and a Warning Event on the Workload says it."""
    check = checked_queue
    other = Cluster(admin_api, f"{cluster.ns}-u")
    control_plane.apply(
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other.ns}},
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "queue", "namespace": other.ns},
                "spec": {"clusterQueue": f"swq-{cluster.ns[-6:]}"},
            },
        ]
    )
    ctl = Controller(control_plane, cluster.ns, save_window_check=True)
    try:
        wait_for(lambda: _active(cluster, check), "the controller to mark its AdmissionCheck Active")
        wl = _workload(other, _suspended_trainjob(other, "elsewhere"))
        wait_for(lambda: _true(other, wl, "Admitted"), "Kueue to admit the unwatched namespace's job")
        state = _check_state(other, wl, check)
        assert state is not None and state["state"] == "Ready"
        assert (
            f"namespace {other.ns} not watched by this advisor (it watches {cluster.ns})" in state["message"]
        )

        def warned() -> bool:
            events = other.core.list_namespaced_event(other.ns).items
            return any(
                e.reason == "NamespaceNotWatched" and e.type == "Warning" and e.involved_object.name == wl
                for e in events
            )

        wait_for(warned, "the Warning Event on the Workload")
    finally:
        ctl.close()
        control_plane.delete_namespace(other.ns)
