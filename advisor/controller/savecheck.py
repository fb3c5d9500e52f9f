"""The save-window AdmissionCheck: Kueue starts a workload only after the advisor has looked at it.

A TrainJob's grace period can change only while it is suspended (Trainer's ``runtimePatches``), and
a job that fits the quota at once is admitted within a scheduling cycle of its creation: the
advisor, which learns of the job from a watch event, races Kueue and usually loses, so the job's
first eviction gets Kubernetes' 30 s however long its save takes. Kueue's two-phase admission
closes that race: a ClusterQueue that lists an AdmissionCheck (``spec.admissionChecksStrategy``)
reserves quota for a workload and admits it only once every check's state is ``Ready``.

The advisor is the controller of the AdmissionChecks whose ``spec.controllerName`` is
``CONTROLLER_NAME``. It marks them ``Active`` (Kueue holds a ClusterQueue whose check is not
active), and after it has evaluated a job whose Workload has such a check ``Pending`` with quota
reserved (and carried out what the policies decided, a grace period for the first start
included), it sets the check ``Ready``. It never holds a workload back or rejects one: the check
decides nothing (the policies do); it only orders the advisor's look before the start. If the
advisor is down, the workloads of those queues wait, which is what the platform engineer chose by
listing the check (the README says how to remove it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from advisor.controller.kueue import KUEUE_GROUP, Workload
from advisor.model import ActionKind, Decision, JobView
from policies.rules.base import last_record

log = logging.getLogger(__name__)

__all__ = ["CONTROLLER_NAME", "SaveWindowCheck", "ready_message"]

#: ``spec.controllerName`` of the AdmissionChecks the advisor answers
CONTROLLER_NAME = "trainjob-advisor.io/save-window"
_JSON_PATCH = "application/json-patch+json"


def ready_message(decision: Decision, job: JobView) -> str:
    """What the check says when it lets a workload start: that the advisor looked, and the grace
    period it set for this start, if it set one.

    The grace period may have been written by an earlier evaluation than the one that settles the
    check (the first settle refused on a Workload changed meanwhile, say): the message names the
    one the job's action log records as written while the job waited for this start, not only
    this decision's, so what the check says does not depend on which evaluation got through."""
    graces = [a.reason for a in decision.actions if a.kind is ActionKind.SET_GRACE_PERIOD]
    if not graces:
        done = last_record(job, {ActionKind.SET_GRACE_PERIOD})
        if done is not None and done.outcome == "done" and done.time >= (job.phase_since or 0.0):
            graces = [done.reason]
    return "trainjob-advisor looked at the job before its start" + (f": {graces[0]}" if graces else "")


def _now_iso() -> str:
    return datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SaveWindowCheck:
    """The advisor's side of its Kueue AdmissionChecks (see the module docstring).

    ``custom`` is a ``kubernetes.client.CustomObjectsApi`` (or anything with its methods);
    ``version`` the Kueue API version the server serves."""

    def __init__(self, custom: Any, version: str) -> None:
        self.custom = custom
        self.version = version
        #: names of the AdmissionChecks with ``CONTROLLER_NAME``
        self.ours: set[str] = set()
        self.marked_ready = 0

    # --------------------------------------------------------------------- AdmissionChecks
    def on_admission_check(self, event_type: str, body: Mapping[str, Any]) -> None:
        """Track an AdmissionCheck; mark one of ours ``Active`` when it is not (yet)."""
        meta = body.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name:
            return
        if event_type == "DELETED" or (body.get("spec") or {}).get("controllerName") != CONTROLLER_NAME:
            self.ours.discard(name)
            return
        self.ours.add(name)
        generation = meta.get("generation")
        for cond in (body.get("status") or {}).get("conditions") or []:
            if (
                isinstance(cond, Mapping)
                and cond.get("type") == "Active"
                and cond.get("status") == "True"
                and cond.get("observedGeneration") == generation
            ):
                return
        condition: dict[str, Any] = {
            "type": "Active",
            "status": "True",
            "reason": "Active",
            "message": "trainjob-advisor looks at each workload before it starts",
            "lastTransitionTime": _now_iso(),
        }
        if isinstance(generation, int):
            condition["observedGeneration"] = generation
        try:
            self.custom.patch_cluster_custom_object_status(
                KUEUE_GROUP, self.version, "admissionchecks", name, {"status": {"conditions": [condition]}}
            )
        except Exception as exc:  # no permission, gone: Kueue shows the queue inactive, we say why
            log.warning("could not mark AdmissionCheck %s Active: %s", name, exc)

    # --------------------------------------------------------------------------- Workloads
    def pending(self, workload: Workload | None) -> list[tuple[int, str]]:
        """``(index, name)`` of our checks that wait on this workload: ``Pending`` with quota
        reserved (Kueue evaluates checks only then, and resets them to ``Pending`` on eviction)."""
        if workload is None or not workload.quota_reserved or workload.finished or not self.ours:
            return []
        return [
            (i, name)
            for i, (name, state) in enumerate(workload.admission_checks)
            if name in self.ours and state == "Pending"
        ]

    def settle(self, workload: Workload | None, why: str) -> int:
        """Set our pending checks on ``workload`` ``Ready`` (after the advisor acted on its job).

        One JSON patch of the workload's status, each entry guarded by a ``test`` of its name and
        state, so a check Kueue reset or reordered meanwhile is left for the next event (409/422
        come back as a failed write; the next Workload event brings the job round again).
        Returns the checks set."""
        checks = self.pending(workload)
        if not checks or workload is None:
            return 0
        ops: list[dict[str, Any]] = []
        now = _now_iso()
        for i, name in checks:
            base = f"/status/admissionChecks/{i}"
            ops += [
                {"op": "test", "path": f"{base}/name", "value": name},
                {"op": "test", "path": f"{base}/state", "value": "Pending"},
                {"op": "replace", "path": f"{base}/state", "value": "Ready"},
                {"op": "replace", "path": f"{base}/message", "value": why[:1024]},
                {"op": "replace", "path": f"{base}/lastTransitionTime", "value": now},
            ]
        try:
            self.custom.patch_namespaced_custom_object_status(
                KUEUE_GROUP,
                self.version,
                workload.namespace,
                "workloads",
                workload.name,
                ops,
                _content_type=_JSON_PATCH,
            )
        except Exception as exc:
            log.warning(
                "could not set the save-window check Ready on Workload %s/%s: %s",
                workload.namespace,
                workload.name,
                exc,
            )
            return 0
        self.marked_ready += len(checks)
        return len(checks)
