"""A conformance scenario played against real Kueue (minimalkueue) on the e2e control plane.

The player creates the scenario's objects (``simulator.conformance.objects``), then per event
creates a Workload or marks one ``Finished``, and lets Kueue settle: where Kueue evicts a workload
(``Evicted`` by preemption) the player does what the job framework would (the job stops, its
reservation is released and it is requeued: ``QuotaReserved`` False, the admission cleared,
``Requeued`` True), records the victim with Kueue's ``Preempted`` reason, and waits until
nothing has changed for ``QUIET_S``. The observation is then read from the Workloads.
"""

from __future__ import annotations

import time
from typing import Any

import controlplane as cp
from controller_harness import KUEUE, MERGE, release_reservation
from kubernetes import client

from simulator.conformance import objects
from simulator.conformance.play import Observation
from simulator.conformance.scenarios import Finish, Scenario, Submit

#: the state must hold this long, with no eviction outstanding, to count as settled: Kueue's
#: scheduler retries a workload it could not admit on the next change of its cohort, within
#: milliseconds here; two seconds leave room for a loaded machine
QUIET_S = 2.0
#: creation and admission times are kept to the second: events this far apart never tie
SPACING_S = 1.1
SETTLE_TIMEOUT_S = 60.0


def _conds(wl: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}


def _true(conds: dict[str, dict[str, Any]], kind: str) -> bool:
    return conds.get(kind, {}).get("status") == "True"


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class KueuePlayer:
    def __init__(self, plane: cp.ControlPlane, api: Any, namespace: str, prefix: str) -> None:
        self.plane = plane
        self.custom = client.CustomObjectsApi(api)
        self.ns = namespace
        self.prefix = prefix
        self._last_event = 0.0

    # -- objects ------------------------------------------------------------------------------
    def setup(self, scenario: Scenario) -> None:
        self.plane.apply(objects.queue_objects(scenario, self.prefix, self.ns))
        names = {f"{self.prefix}-{q.name}" for q in scenario.queues}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            active = {
                cq["metadata"]["name"]
                for cq in self.custom.list_cluster_custom_object(*KUEUE, "clusterqueues")["items"]
                if _true(_conds(cq), "Active")
            }
            if names <= active:
                return
            time.sleep(0.25)
        raise AssertionError(f"ClusterQueues {sorted(names - active)} never became Active")

    def teardown(self, scenario: Scenario) -> None:
        self.plane.delete_namespace(self.ns)
        for q in scenario.queues:
            self.plane.delete(objects.API_VERSION, "ClusterQueue", f"{self.prefix}-{q.name}", wait_s=30)
        self.plane.delete(objects.API_VERSION, "ResourceFlavor", self.prefix, wait_s=30)

    def _workloads(self) -> list[dict[str, Any]]:
        items = self.custom.list_namespaced_custom_object(*KUEUE, self.ns, "workloads")["items"]
        return list(items)

    def _patch_status(self, name: str, status: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object_status(
            *KUEUE, self.ns, "workloads", name, {"status": status}, _content_type=MERGE
        )

    # -- events -------------------------------------------------------------------------------
    def play(self, scenario: Scenario) -> tuple[Observation, ...]:
        out = []
        for event in scenario.events:
            wait = self._last_event + SPACING_S - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self._last_event = time.monotonic()
            if isinstance(event, Submit):
                self.custom.create_namespaced_custom_object(
                    *KUEUE, self.ns, "workloads", objects.workload(event, self.ns)
                )
            else:
                assert isinstance(event, Finish)
                self._finish(event.name)
            out.append(self._settle())
        return tuple(out)

    def _finish(self, name: str) -> None:
        wl = self.custom.get_namespaced_custom_object(*KUEUE, self.ns, "workloads", name)
        conds = [c for c in wl["status"]["conditions"] if c["type"] != "Finished"]
        conds.append(
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "the job ended",
                "lastTransitionTime": _stamp(),
            }
        )
        self._patch_status(name, {"conditions": conds})

    def _settle(self) -> Observation:
        preempted: list[tuple[str, str]] = []
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        last: tuple[str, ...] | None = None
        since = time.monotonic()
        while time.monotonic() < deadline:
            held = []
            evicting = False
            for wl in self._workloads():
                conds = _conds(wl)
                if _true(conds, "Finished") or not _true(conds, "QuotaReserved"):
                    continue
                if _true(conds, "Evicted"):
                    reason = conds.get("Preempted", {}).get("reason", "") if _true(conds, "Preempted") else ""
                    preempted.append((wl["metadata"]["name"], reason or conds["Evicted"].get("reason", "")))
                    # the job framework: stop the job, release the reservation, requeue
                    release_reservation(self.custom, self.ns, wl["metadata"]["name"], reason="Preempted")
                    evicting = True
                    continue
                held.append(wl["metadata"]["name"])
            state = tuple(sorted(held))
            now = time.monotonic()
            if evicting or state != last:
                last, since = state, now
            elif now - since >= QUIET_S:
                return Observation(state, tuple(sorted(preempted)))
            time.sleep(0.2)
        raise AssertionError(f"Kueue did not settle within {SETTLE_TIMEOUT_S:.0f}s (last state {last})")
