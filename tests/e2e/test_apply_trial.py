"""The Apply-mode trial, replayed: five TrainJobs, real kube-apiserver and Kueue, the stall rule.

The trial that found the defects: a finished run's quota was released by the stall rule (its last
report one logging interval short of the total), a job without a Workload was retried without
limit, a resumed job was never judged again, an Event came twice across a restart, and nothing was
logged. Here, on curves the project generates (``simulator.curves``), in Apply mode:

* ``done-a`` reports every 30 steps up to 2610 of 2619, then goes ``Complete`` (its Workload
  ``Finished``); ``done-b``'s last update carries 100% and no step: neither gets any action
  (``done-b``, whose Workload still holds its quota past the stall window, may be recommended
  for a look: a final save or teardown that hangs);
* ``waiting`` asks for more GPUs than its queue has: pending, never acted on;
* ``no-wl`` has no Workload: no release is attempted (quota is released through one) and no
  checkpoint asked for it; one ActionHeld Event says why, not repeated (also not by a restarted
  controller);
* ``resumed`` hangs and is released, is resumed (``spec.active=true``, Kueue admits it again),
  runs and hangs again, and is released again: judged again from its resume;
* the controller is restarted in the middle; no Event is posted twice for one request id and
  outcome, and every attempt and outcome is an INFO line of the audit log.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import controlplane as cp
import pytest
from controller_harness import (
    KUEUE,
    MERGE,
    TRAINER,
    Controller,
    admitting,
    release_reservation,
    wait_for,
    workload_admitted,
)
from test_controller_scenarios import Cluster, feed, rfc3339

from advisor.controller.audit import AUDIT_LOGGER
from simulator.curves import CurveSpec

pytestmark = pytest.mark.kueue

STALL = {"stall": {"for": "20s", "action": "Release"}, "quotaRelease": {"checkpointFirst": False}}


@pytest.fixture
def cluster(admin_api: Any, e2e_namespace: str) -> Cluster:
    return Cluster(admin_api, e2e_namespace)


@pytest.fixture
def policy_cleanup(control_plane: cp.ControlPlane) -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        control_plane.delete("advisor.trainjob-advisor.io/v1alpha1", "AdvisorPolicy", name)


def curve(seed: int) -> CurveSpec:
    return CurveSpec(
        total_steps=2619, l_inf=0.9, a=2.0, alpha=0.5, x0=0.01, schedule="cosine", noise=0.01, seed=seed
    )


def _condition(kind: str, status: str, reason: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": reason,
        "lastTransitionTime": rfc3339(time.time()),
    }


def _finish(cluster: Cluster, job: str, workload: str) -> None:
    """Play the Trainer and Kueue at the end of a run: TrainJob Complete, Workload Finished."""
    cluster.custom.patch_namespaced_custom_object_status(
        *TRAINER[:2],
        cluster.ns,
        TRAINER[2],
        job,
        {"status": {"conditions": [_condition("Complete", "True", "JobsCompleted")]}},
        _content_type=MERGE,
    )
    conds = cluster.workload(workload)["status"]["conditions"]
    cluster.custom.patch_namespaced_custom_object_status(
        *KUEUE,
        cluster.ns,
        "workloads",
        workload,
        {"status": {"conditions": [*conds, _condition("Finished", "True", "Succeeded")]}},
        _content_type=MERGE,
    )


def _releases(cluster: Cluster, job: str) -> list[dict[str, Any]]:
    f = cluster.forecast(job)
    return [a for a in ((f or {}).get("status") or {}).get("actions") or [] if a["kind"] == "release-quota"]


def _events(cluster: Cluster, job: str) -> list[Any]:
    return [e for e in cluster.events(job) if e.source and e.source.component == "trainjob-advisor"]


def test_apply_mode_acts_only_on_running_jobs_once_and_says_what_it_did(
    control_plane: cp.ControlPlane,
    cluster: Cluster,
    policy_cleanup: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    name = f"trial-{cluster.ns[-6:]}"
    with admitting(control_plane, cluster.ns, gpus=48):
        cluster.apply_policy(control_plane, name, "Apply", **STALL)
        policy_cleanup.append(name)
        jobs = {
            j: cluster.create_trainjob(j, queue="queue")
            for j in ("done-a", "done-b", "no-wl", "resumed", "waiting")
        }
        wls = {j: cluster.create_workload(jobs[j]) for j in ("done-a", "done-b", "resumed")}
        wls["waiting"] = cluster.create_workload(jobs["waiting"], gpus_per_pod=16, pods=4)  # 64 > 48
        for j in ("done-a", "done-b", "resumed"):
            wait_for(lambda j=j: workload_admitted(cluster.custom, cluster.ns, wls[j]), f"Kueue to admit {j}")
        ctl = Controller(control_plane, cluster.ns)
        try:
            now = time.time()
            feed(cluster, "done-a", curve(1), range(30, 2611, 30), t0=now - 87 * 2.0, dt=2.0, pause=0.0)
            _finish(cluster, "done-a", wls["done-a"])
            feed(cluster, "done-b", curve(2), range(30, 2000, 30), t0=now - 66 * 2.0, dt=2.0, pause=0.0)
            cluster.report("done-b", [{"name": "loss", "value": "0.95"}], time.time(), percent=100)
            feed(cluster, "no-wl", curve(3), range(30, 900, 30), t0=now - 29 * 2.0, dt=2.0, pause=0.0)
            feed(cluster, "resumed", curve(4), range(30, 900, 30), t0=now - 29 * 2.0, dt=2.0, pause=0.0)
            # resumed and no-wl hang: resumed is released (Kueue evicts it), no-wl cannot be
            wait_for(lambda: cluster.workload(wls["resumed"])["spec"].get("active") is False, "the release")
            wait_for(
                lambda: "ActionHeld" in cluster.reasons("no-wl"), "the release held for want of a Workload"
            )
        finally:
            ctl.close()
        # a restarted controller: same state, no repeats
        ctl = Controller(control_plane, cluster.ns)
        try:
            time.sleep(5)
            release_reservation(cluster.custom, cluster.ns, wls["resumed"])
            assert not workload_admitted(cluster.custom, cluster.ns, wls["resumed"])
            cluster.custom.patch_namespaced_custom_object(
                *KUEUE,
                cluster.ns,
                "workloads",
                wls["resumed"],
                {"spec": {"active": True}},
                _content_type=MERGE,
            )
            wait_for(lambda: workload_admitted(cluster.custom, cluster.ns, wls["resumed"]), "re-admission")
            feed(
                cluster,
                "resumed",
                curve(4),
                range(900, 1500, 30),
                t0=time.time() - 20 * 2.0,
                dt=2.0,
                pause=0.0,
            )
            wait_for(
                lambda: len(_releases(cluster, "resumed")) == 2, "the resumed job released again", timeout=90
            )
            time.sleep(25)  # longer than the stall window: a wrong controller would act on the rest now
        finally:
            ctl.close()

        for job in ("done-a", "done-b", "waiting"):
            assert _releases(cluster, job) == [], job
            assert not [e for e in _events(cluster, job) if e.reason != "Recommendation"], (
                job,
                [(e.reason, e.message) for e in _events(cluster, job)],
            )
        assert cluster.workload(wls["done-a"])["spec"].get("active", True) is True
        states = {j: (cluster.forecast(j) or {}).get("status", {}) for j in ("done-a", "done-b", "waiting")}
        assert states["done-a"]["state"] == "finished" and states["done-a"]["summary"]["advice"] == "finished"
        assert states["done-b"]["state"] == "finished"
        # a job that never reported may have no TrainJobForecast; if it has one, it says pending
        assert not states["waiting"] or states["waiting"]["state"] == "pending"
        assert _releases(cluster, "no-wl") == []
        assert [e.reason for e in _events(cluster, "no-wl")] == ["ActionHeld"], [
            (e.reason, e.message) for e in _events(cluster, "no-wl")
        ]
        assert [a["outcome"] for a in _releases(cluster, "resumed")] == ["done", "done"]
        # one Event per request id and outcome, across the restart
        seen = Counter(
            (e.reason, m.group(1))
            for j in jobs
            for e in _events(cluster, j)
            if (m := re.search(r"request (\S+?)\)", e.message or ""))
        )
        assert seen and all(n == 1 for n in seen.values()), seen
        # the audit trail: an attempt and an outcome per action, for the jobs acted on only
        audit = [r.audit for r in caplog.records if r.name == AUDIT_LOGGER]  # type: ignore[attr-defined]
        acted = {a["job"].split("/")[1] for a in audit if a["outcome"] != "recommended"}
        assert acted == {"no-wl", "resumed"}, acted
        # done-b reported done (100%) and its Workload still holds its quota past the stall window:
        # pointed out (a final save or teardown that hangs), never acted on
        said = [a for a in audit if a["outcome"] == "recommended"]
        assert {a["job"].split("/")[1] for a in said} <= {"done-b"}, said
        rids = {a["requestId"] for a in _releases(cluster, "resumed")}
        for rid in rids:
            stages = [(a["audit"], a["outcome"]) for a in audit if a["requestId"] == rid]
            assert stages == [("attempt", "requested"), ("outcome", "done")], stages
        held = [a for a in audit if a["job"].endswith("/no-wl") and a["audit"] == "outcome"]
        assert [a["outcome"] for a in held] == ["held"]
        assert "the job has no Kueue Workload" in held[0]["reason"]
        assert all(a["policy"] == name and a["rule"] == "stall" and a["reason"] for a in audit)


def test_a_silence_every_job_shares_releases_none_and_a_lone_one_is_released(
    control_plane: cp.ControlPlane, cluster: Cluster, policy_cleanup: list[str]
) -> None:
    """The trainer's status server stops (the API server up): every job goes silent at once.
    Under an Apply stall rule none is released and each says ``progress-outage``; once reports
    return, the one job that stays silent is released as a hang, the others are not."""
    name = f"blackout-{cluster.ns[-6:]}"
    names = [f"b{i}" for i in range(4)]
    with admitting(control_plane, cluster.ns, gpus=48):
        cluster.apply_policy(control_plane, name, "Apply", **STALL)
        policy_cleanup.append(name)
        jobs = {j: cluster.create_trainjob(j, queue="queue") for j in names}
        wls = {j: cluster.create_workload(jobs[j], gpus_per_pod=4, pods=2) for j in names}
        for j in names:
            wait_for(lambda j=j: workload_admitted(cluster.custom, cluster.ns, wls[j]), f"Kueue to admit {j}")
        steps = dict.fromkeys(names, 30)

        def report(who: list[str], seconds: float) -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                for i, j in enumerate(who):
                    cluster.report_step(j, curve(10 + i), steps[j], time.time())
                    steps[j] += 30
                time.sleep(2.0)

        ctl = Controller(control_plane, cluster.ns)
        try:
            report(names, 12)
            time.sleep(45)  # two stall windows without a report from anyone
            for j in names:
                assert _releases(cluster, j) == [], j
            advice = {j: cluster.forecast(j)["status"]["summary"]["advice"] for j in names}
            assert set(advice.values()) == {"progress-outage"}, advice
            report(names[1:], 40)  # b0 stays silent: a hang of its own now
            wait_for(lambda: len(_releases(cluster, "b0")) == 1, "the lone silent job released", timeout=60)
        finally:
            ctl.close()
        assert cluster.workload(wls["b0"])["spec"].get("active") is False
        for j in names[1:]:
            assert _releases(cluster, j) == [], j
            assert cluster.workload(wls[j])["spec"].get("active", True) is True
