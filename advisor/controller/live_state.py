"""A live job as the controller sees it, read once from the cluster: ``policy explain FILE --job
NS/NAME`` decides on it what a draft policy would decide on the cluster.

The same path the controller takes, not a copy of it: the job's TrainJobForecast gives its history
and rule memory back to an ``AdvisorCore`` (``saved.core_state``, as a restarted controller gets
them), the job object its latest progress (``sample_from_object``) and lifecycle, and one listing
of namespaces, ClusterQueues, LocalQueues and Workloads fills a ``ClusterIndex`` whose
``cluster_view`` carries the queues' preemption hazard exactly as the controller estimates it. A
job state pasted by hand (``--job-state``) has none of that evidence unless it is written out: a
trial's preemption checkpoint came minutes apart between ``policy explain`` and the live
controller for that reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advisor.controller.cliutil import api_error, forecast_object
from advisor.controller.cluster_index import ClusterIndex
from advisor.controller.jobs import JOB_KINDS, TRAINJOB, base_view
from advisor.controller.kueue import KUEUE_GROUP
from advisor.controller.saved import core_state
from advisor.core import AdvisorCore
from advisor.model import ClusterView, JobView, job_key
from advisor.sources import sample_from_object

__all__ = ["live_job"]


def live_job(
    api: Any, namespace: str, name: str, *, now: float, priority_boost_enabled: bool = False
) -> tuple[JobView, ClusterView, list[str]]:
    """(the job's view, the cluster's, notes on what could not be read) as the controller would
    judge ``namespace/name`` at ``now``. The job and its TrainJobForecast must be readable; a
    listing refused (no permission on Workloads, say) is a note, and the view lacks it."""
    key = job_key(namespace, name)
    tjf = forecast_object(api, namespace, name, ": the controller has not seen this job (yet)")
    refs = (tjf.get("metadata") or {}).get("ownerReferences") or []
    owner: Mapping[str, Any] = next((r for r in refs if isinstance(r, Mapping) and r.get("kind")), {})
    kind = JOB_KINDS.get(str(owner.get("kind") or ""), TRAINJOB)
    try:
        body = api.get_job(kind.kind, namespace, name)
    except Exception as exc:
        raise api_error(exc, f"{kind.kind} {key}") from exc
    notes: list[str] = []
    index = _cluster_index(api, notes)
    core = AdvisorCore()
    saved = core_state(tjf.get("status") or {})
    if saved is not None:
        core.restore(key, saved)
    else:
        notes.append("its TrainJobForecast holds no history yet: judged on the latest report alone")
    sample = sample_from_object(body, now=now)
    if sample is not None:
        core.observe(key, sample, now=now, nodes=base_view(body).nodes)
    view = core.view(index.base_view(body), now=now)
    return view, index.cluster_view(now, priority_boost_enabled=priority_boost_enabled), notes


def _cluster_index(api: Any, notes: list[str]) -> ClusterIndex:
    """One listing of what the controller watches beside the jobs, applied as its watch events."""
    index = ClusterIndex()
    try:
        api.discover_kueue()  # points the Kueue client at the version the server serves
    except Exception as exc:  # no Kueue: the job is judged without queues, as the controller does
        notes.append(f"Kueue not found ({getattr(exc, 'reason', None) or exc}): judged without its queues")
    custom, kueue_version = api.custom, api.kueue.version
    listings: list[tuple[str, Any]] = [
        ("namespace", lambda: api.core.list_namespace().to_dict()),
        (
            "clusterqueue",
            lambda: custom.list_cluster_custom_object(KUEUE_GROUP, kueue_version, "clusterqueues"),
        ),
        ("localqueue", lambda: custom.list_cluster_custom_object(KUEUE_GROUP, kueue_version, "localqueues")),
        ("workload", lambda: custom.list_cluster_custom_object(KUEUE_GROUP, kueue_version, "workloads")),
    ]
    for kind, fetch in listings:
        try:
            items: list[Mapping[str, Any]] = fetch().get("items") or []
        except Exception as exc:
            notes.append(
                f"{kind} objects not listed ({getattr(exc, 'reason', None) or exc}): judged without them"
            )
            continue
        for item in items:
            if kind == "namespace":
                meta = item.get("metadata") or {}
                index.on_namespace(
                    "ADDED", {"metadata": {"name": meta.get("name"), "labels": meta.get("labels")}}
                )
            elif kind == "clusterqueue":
                index.on_cluster_queue("ADDED", item)
            elif kind == "localqueue":
                index.on_local_queue("ADDED", item)
            else:
                index.on_workload("ADDED", item)
    return index
