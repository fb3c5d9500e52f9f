"""Kueue's objects as the advisor reads them: typed Workloads, ClusterQueues and LocalQueues.

Kueue publishes no Python client (its docs recommend ``CustomObjectsApi``), so this module and
``kueue_client`` (discovery, reads and the two writes) are the one place that knows Kueue's field
paths, for both API versions a cluster may serve: ``v1beta2`` and the older ``v1beta1``. The
parsers read either where the two differ (``cohort`` / ``cohortName``, and v1beta1's spelling
``accumulatedPastExexcutionTimeSeconds``). Everything else in the controller works with the
small dataclasses below and the shared ``WorkloadView`` / ``ClusterQueueView`` value types.
Only the fields the advisor uses are parsed; Kueue-owned status is read-only here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from advisor.model import ClusterQueueView, WorkloadView, job_key
from advisor.protocol import KUEUE_PRIORITY_BOOST_ANNOTATION
from policies.hazard import interruptions

__all__ = [
    "GPU_RESOURCES",
    "JOB_UID_LABEL",
    "KUEUE_GROUP",
    "KUEUE_VERSION",
    "KUEUE_VERSIONS",
    "ClusterQueue",
    "LocalQueue",
    "Workload",
    "parse_cluster_queue",
    "parse_local_queue",
    "parse_quantity",
    "parse_time",
    "parse_workload",
]

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
#: the versions this client reads, preferred first
KUEUE_VERSIONS: tuple[str, ...] = ("v1beta2", "v1beta1")
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
#: extended resources counted as GPUs (ResourceFlavors are folded into one count)
GPU_RESOURCES: tuple[str, ...] = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915")

_SUFFIXES = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
}


def parse_quantity(value: Any) -> float:
    """A Kubernetes quantity ("8", "500m", "1Gi", 4) as a float; 0 for anything unparseable."""
    if isinstance(value, bool):
        return 0.0
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str) or not value.strip():
        return 0.0
    text = value.strip()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix):
            try:
                return float(text[: -len(suffix)]) * _SUFFIXES[suffix]
            except ValueError:
                return 0.0
    try:
        return float(text)
    except ValueError:
        return 0.0


def parse_time(value: Any) -> float | None:
    """An RFC 3339 timestamp (as the API server writes it) as epoch seconds, or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def gpus_in(resources: Mapping[str, Any] | None) -> int:
    """The GPU count in a resources map (requests, limits, resourceUsage)."""
    if not isinstance(resources, Mapping):
        return 0
    return round(sum(parse_quantity(resources.get(name)) for name in GPU_RESOURCES))


def _conditions(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    conds = (obj.get("status") or {}).get("conditions") or []
    return {c["type"]: c for c in conds if isinstance(c, Mapping) and "type" in c}


def _is_true(conds: Mapping[str, Mapping[str, Any]], kind: str) -> bool:
    return conds.get(kind, {}).get("status") == "True"


def _said(cond: Mapping[str, Any]) -> str:
    """A condition's reason and message as one line (``Preempted: Preempted to accommodate a
    workload ...``)."""
    reason, message = str(cond.get("reason") or ""), str(cond.get("message") or "").strip()
    return f"{reason}: {message}" if reason and message else reason or message


#: Kubernetes' default ``terminationGracePeriodSeconds``
DEFAULT_GRACE_PERIOD_S = 30.0


def _grace_period(template: Any) -> float:
    spec = (template or {}).get("spec") if isinstance(template, Mapping) else None
    value = (spec or {}).get("terminationGracePeriodSeconds") if isinstance(spec, Mapping) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return DEFAULT_GRACE_PERIOD_S


def _pod_gpus(template: Mapping[str, Any] | None) -> int:
    spec = (template or {}).get("spec") or {}
    total = 0
    for container in spec.get("containers") or []:
        res = container.get("resources") or {}
        total += max(gpus_in(res.get("requests")), gpus_in(res.get("limits")))
    return total


# --------------------------------------------------------------------------------------------
# Typed views of the three Kueue kinds
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Workload:
    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    queue_name: str = ""
    priority: int = 0
    active: bool = True
    quota_reserved: bool = False
    admitted: bool = False
    evicted: bool = False
    #: the ``Evicted`` condition's reason and message while it is true ("Preempted: ...")
    eviction: str = ""
    evicted_at: float | None = None
    finished: bool = False
    finished_reason: str = ""
    #: when it finished (the ``Finished`` condition's transition; None while it runs)
    finished_at: float | None = None
    cluster_queue: str | None = None
    gpus: int = 0
    owner_uid: str | None = None
    owner_kind: str | None = None
    owner_name: str | None = None
    created_at: float | None = None
    admitted_at: float | None = None
    priority_boost: int = 0
    evictions: int = 0
    past_execution_seconds: float = 0.0
    #: the pods' ``terminationGracePeriodSeconds`` (the longest of the pod sets; Kubernetes' 30 s
    #: where a template does not set it; None without pod sets)
    grace_period_s: float | None = None
    #: ``schedulingStats.evictions`` summed per reason (over underlying causes), sorted by reason
    evictions_by_reason: tuple[tuple[str, int], ...] = ()
    #: ``status.admissionChecks`` as ``(name, state)``, in the object's order (a JSON patch of one
    #: entry addresses it by its index)
    admission_checks: tuple[tuple[str, str], ...] = ()

    def view(self, cluster_queue: str | None = None) -> WorkloadView:
        """The policies' view; ``cluster_queue`` where the admission names none (a pending
        workload: the ClusterQueue of its LocalQueue, which only the caller knows)."""
        owner = job_key(self.namespace, self.owner_name) if self.owner_name else None
        return WorkloadView(
            namespace=self.namespace,
            name=self.name,
            cluster_queue=self.cluster_queue or cluster_queue or "",
            gpus=self.gpus,
            priority=self.priority,
            admitted=self.admitted,
            active=self.active,
            job=owner,
            admitted_at=self.admitted_at,
            created_at=self.created_at,
            priority_boost=self.priority_boost,
            interruptions=interruptions(dict(self.evictions_by_reason)),
            past_admitted_seconds=self.past_execution_seconds,
            uid=self.uid,
        )


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: str
    cohort: str | None = None
    nominal_gpus: int = 0
    borrowing_limit: int | None = None
    lending_limit: int | None = None
    usage_gpus: int = 0
    reservation_gpus: int = 0
    pending_workloads: int = 0
    admitted_workloads: int = 0
    within_cluster_queue: str = "Never"
    reclaim_within_cohort: str = "Never"
    borrow_within_cohort: str = "Never"
    borrow_max_priority_threshold: int | None = None
    queueing_strategy: str = "BestEffortFIFO"

    def view(self) -> ClusterQueueView:
        return ClusterQueueView(
            name=self.name,
            cohort=self.cohort,
            nominal_gpus=self.nominal_gpus,
            borrowing_limit=self.borrowing_limit,
            lending_limit=self.lending_limit,
            usage_gpus=max(self.usage_gpus, self.reservation_gpus),
            within_cluster_queue=self.within_cluster_queue,
            reclaim_within_cohort=self.reclaim_within_cohort,
            borrow_within_cohort=self.borrow_within_cohort,
            borrow_max_priority_threshold=self.borrow_max_priority_threshold,
            queueing_strategy=self.queueing_strategy,
        )


@dataclass(frozen=True, slots=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    pending_workloads: int = 0
    admitted_workloads: int = 0


def parse_workload(obj: Mapping[str, Any]) -> Workload:
    """A ``kueue.x-k8s.io/v1beta2`` Workload object (dict) as a typed ``Workload``."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    conds = _conditions(obj)
    admission = status.get("admission") or {}
    gpus = 0
    for assignment in admission.get("podSetAssignments") or []:
        gpus += gpus_in(assignment.get("resourceUsage"))
    if not gpus:  # not admitted: count the requests of every pod set
        for podset in spec.get("podSets") or []:
            gpus += _pod_gpus(podset.get("template")) * int(podset.get("count") or 1)
    owner_uid = (meta.get("labels") or {}).get(JOB_UID_LABEL)
    owner_kind = owner_name = None
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") or len(meta.get("ownerReferences") or []) == 1:
            owner_uid = owner_uid or ref.get("uid")
            owner_kind, owner_name = ref.get("kind"), ref.get("name")
            break
    boost_raw = (meta.get("annotations") or {}).get(KUEUE_PRIORITY_BOOST_ANNOTATION)
    try:
        boost = int(boost_raw) if boost_raw is not None else 0
    except ValueError:
        boost = 0
    by_reason: dict[str, int] = {}
    for e in (status.get("schedulingStats") or {}).get("evictions") or []:
        if isinstance(e, Mapping):
            reason = str(e.get("reason") or "")
            by_reason[reason] = by_reason.get(reason, 0) + int(e.get("count") or 0)
    evictions = sum(by_reason.values())
    graces = [_grace_period(p.get("template")) for p in spec.get("podSets") or [] if isinstance(p, Mapping)]
    admitted_at = (
        parse_time(conds["Admitted"].get("lastTransitionTime")) if _is_true(conds, "Admitted") else None
    )
    return Workload(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        generation=meta["generation"] if isinstance(meta.get("generation"), int) else 0,
        queue_name=str(spec.get("queueName") or ""),
        priority=int(spec.get("priority") or 0),
        active=spec.get("active", True) is not False,
        quota_reserved=_is_true(conds, "QuotaReserved"),
        admitted=_is_true(conds, "Admitted"),
        evicted=_is_true(conds, "Evicted"),
        eviction=_said(conds["Evicted"]) if _is_true(conds, "Evicted") else "",
        evicted_at=parse_time(conds["Evicted"].get("lastTransitionTime"))
        if _is_true(conds, "Evicted")
        else None,
        finished=_is_true(conds, "Finished"),
        finished_reason=str(conds["Finished"].get("reason") or "") if _is_true(conds, "Finished") else "",
        finished_at=parse_time(conds["Finished"].get("lastTransitionTime"))
        if _is_true(conds, "Finished")
        else None,
        cluster_queue=admission.get("clusterQueue"),
        gpus=gpus,
        owner_uid=owner_uid,
        owner_kind=owner_kind,
        owner_name=owner_name,
        created_at=parse_time(meta.get("creationTimestamp")),
        admitted_at=admitted_at,
        priority_boost=boost,
        evictions=evictions,
        past_execution_seconds=float(
            status.get("accumulatedPastExecutionTimeSeconds")
            or status.get("accumulatedPastExexcutionTimeSeconds")  # v1beta1's spelling
            or 0.0
        ),
        evictions_by_reason=tuple(sorted(by_reason.items())),
        grace_period_s=max(graces) if graces else None,
        admission_checks=tuple(
            (str(c.get("name") or ""), str(c.get("state") or ""))
            for c in status.get("admissionChecks") or []
            if isinstance(c, Mapping)
        ),
    )


def _flavor_gpus(flavors: Iterable[Mapping[str, Any]] | None, key: str) -> int:
    total = 0.0
    for flavor in flavors or []:
        for res in flavor.get("resources") or []:
            if res.get("name") in GPU_RESOURCES:
                total += parse_quantity(res.get(key))
    return round(total)


def _optional_flavor_gpus(flavors: Iterable[Mapping[str, Any]] | None, key: str) -> int | None:
    found = [
        res
        for flavor in flavors or []
        for res in flavor.get("resources") or []
        if res.get("name") in GPU_RESOURCES and res.get(key) is not None
    ]
    return round(sum(parse_quantity(r.get(key)) for r in found)) if found else None


def parse_cluster_queue(obj: Mapping[str, Any]) -> ClusterQueue:
    """A ``v1beta2`` ClusterQueue as a typed ``ClusterQueue`` (GPU resources only)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    flavors = [f for group in spec.get("resourceGroups") or [] for f in group.get("flavors") or []]
    preemption = spec.get("preemption") or {}
    borrow = preemption.get("borrowWithinCohort") or {}
    return ClusterQueue(
        name=str(meta.get("name") or ""),
        cohort=spec.get("cohortName") or spec.get("cohort"),
        nominal_gpus=_flavor_gpus(flavors, "nominalQuota"),
        borrowing_limit=_optional_flavor_gpus(flavors, "borrowingLimit"),
        lending_limit=_optional_flavor_gpus(flavors, "lendingLimit"),
        usage_gpus=_flavor_gpus(status.get("flavorsUsage"), "total"),
        reservation_gpus=_flavor_gpus(status.get("flavorsReservation"), "total"),
        pending_workloads=int(status.get("pendingWorkloads") or 0),
        admitted_workloads=int(status.get("admittedWorkloads") or 0),
        within_cluster_queue=str(preemption.get("withinClusterQueue") or "Never"),
        reclaim_within_cohort=str(preemption.get("reclaimWithinCohort") or "Never"),
        borrow_within_cohort=str(borrow.get("policy") or "Never"),
        borrow_max_priority_threshold=borrow.get("maxPriorityThreshold"),
        queueing_strategy=str(spec.get("queueingStrategy") or "BestEffortFIFO"),
    )


def parse_local_queue(obj: Mapping[str, Any]) -> LocalQueue:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    return LocalQueue(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        cluster_queue=str((obj.get("spec") or {}).get("clusterQueue") or ""),
        pending_workloads=int(status.get("pendingWorkloads") or 0),
        admitted_workloads=int(status.get("admittedWorkloads") or 0),
    )
