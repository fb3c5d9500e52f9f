"""The dev-cluster playground plays Kueue's TrainJob integration and the Trainer end to end."""

from __future__ import annotations

import io
import sys
from typing import Any

import controlplane as cp
import pytest
from controller_harness import Controller, wait_for

from advisor.controller.store import decode_history

sys.path.insert(0, str(cp.REPO_ROOT / "scripts" / "controlplane"))
from playground import Player, play

pytestmark = pytest.mark.kueue


def test_a_played_job_is_admitted_reports_and_finishes(
    control_plane: cp.ControlPlane, admin_api: Any, e2e_namespace: str
) -> None:
    if not control_plane.kueue:
        pytest.skip(f"needs real Kueue: {control_plane.kueue_reason}")
    player = Player(admin_api, e2e_namespace, "demo", queue="queue", gpus=8)
    player.setup_queues(16)
    ctl = Controller(control_plane, e2e_namespace)
    try:
        player.create_job()
        out = io.StringIO()
        steps = list(range(10, 201, 10))
        evals = [(float(s), 1.0 + s / 1000) for s in (50, 100, 150, 200)]  # a rising eval loss
        play(player, steps, [2.0 / s**0.3 for s in steps], 200, rate=100.0, every=10, evals=evals, out=out)
        assert (
            "admitted; reporting from step 10" in out.getvalue() and "finished at step 200" in out.getvalue()
        )
        # the Workload's Finished and the TrainJob's last report come on two watches, in either
        # order: the status may say finished at step 190 for a moment, then shows the last report
        tjf = wait_for(
            lambda: (
                (f := ctl_forecast(player))
                and (f.get("status") or {}).get("state") == "finished"
                and ((f.get("status") or {}).get("progress") or {}).get("step") == 200
                and f
            ),
            "the advisor to show the played job finished at its last reported step, 200",
        )
        # the evaluations were reported from their steps on, each read once
        history = decode_history(tjf["status"]["history"])
        assert history["evals"]["series"]["eval_loss"]["steps"] == [50, 100, 150, 200]
        assert any(
            c["type"] == "Finished" and c["status"] == "True" for c in player.wl()["status"]["conditions"]
        )
    finally:
        ctl.close()
        control_plane.delete_namespace(e2e_namespace)
        control_plane.delete("kueue.x-k8s.io/v1beta2", "ClusterQueue", "queue-cq", wait_s=30)
        control_plane.delete("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "queue-cq", wait_s=30)


def ctl_forecast(player: Player) -> dict[str, Any] | None:
    from kubernetes.client.exceptions import ApiException

    try:
        return dict(
            player.custom.get_namespaced_custom_object(
                "advisor.trainjob-advisor.io", "v1alpha1", player.ns, "trainjobforecasts", player.name
            )
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_the_played_trainer_answers_a_checkpoint_request_in_its_next_report(
    control_plane: cp.ControlPlane, admin_api: Any, e2e_namespace: str
) -> None:
    """A release checkpoints first: without an answer the demo would wait out ``checkpointTimeout``."""
    from advisor.protocol import CHECKPOINT_REQUEST_ANNOTATION

    player = Player(admin_api, e2e_namespace, "ack", queue="queue", gpus=8)
    try:
        player.create_job()
        player.start_pods()
        player.report(10, 200, 1.5)
        assert "last_checkpoint_request" not in _metrics(player)
        player.core.patch_namespaced_pod(
            f"{player.name}-node-0-0",
            player.ns,
            {"metadata": {"annotations": {CHECKPOINT_REQUEST_ANNOTATION: "req-1"}}},
        )
        player.report(20, 200, 1.4)
        player.report(30, 200, 1.3)  # the helper repeats its last answer in every report
        m = _metrics(player)
        assert m["last_checkpoint_request"] == "req-1" and m["last_checkpoint_step"] == "20"
    finally:
        control_plane.delete_namespace(e2e_namespace)


def _metrics(player: Player) -> dict[str, str]:
    tj = player.custom.get_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", player.ns, "trainjobs", player.name
    )
    return {m["name"]: m["value"] for m in tj["status"]["trainerStatus"]["metrics"]}
