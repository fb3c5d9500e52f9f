"""What the controller knows of Kueue and the namespaces, from the watch events: the Workloads,
ClusterQueues, LocalQueues and namespace labels, indexed for the two questions the engine asks of
them: which Workload a job has (``workload_for``), and the ``ClusterView`` the policies read
(quotas, live workloads, and the preemption hazard per ClusterQueue, estimated exactly as the
simulator does through ``policies.hazard``).

Single-threaded, like the engine that owns it: the engine's worker applies events and asks
questions on the same thread, so nothing here locks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advisor.controller.jobs import base_view
from advisor.controller.kueue import (
    ClusterQueue,
    LocalQueue,
    Workload,
    parse_cluster_queue,
    parse_local_queue,
    parse_workload,
)
from advisor.model import ClusterView, JobView, job_key
from policies.hazard import hazard_evidence, hazard_evidence_by_priority, rates_of, workload_exposure

__all__ = ["ClusterIndex"]


class ClusterIndex:
    def __init__(self) -> None:
        self.workloads: dict[str, Workload] = {}
        self.cluster_queues: dict[str, ClusterQueue] = {}
        self.local_queues: dict[str, LocalQueue] = {}
        self.namespace_labels: dict[str, dict[str, str]] = {}
        #: whether ``namespace_labels`` holds every namespace: the start-up listing of them is in
        #: (the watch keeps them current); until then a namespace it lacks may still exist
        self.namespaces_listed = False
        self._by_owner: dict[tuple[str, str], list[Workload]] | None = None

    # ------------------------------------------------------------------------------ events
    def on_workload(self, event_type: str, body: Mapping[str, Any]) -> str | None:
        """Apply a Workload event; returns the key of the job that owns it (None: no owner)."""
        wl = parse_workload(body)
        wkey = job_key(wl.namespace, wl.name)
        if event_type == "DELETED":
            self.workloads.pop(wkey, None)
        else:
            self.workloads[wkey] = wl
        self._by_owner = None  # rebuilt lazily, at most once per step
        return job_key(wl.namespace, wl.owner_name) if wl.owner_name else None

    def on_cluster_queue(self, event_type: str, body: Mapping[str, Any]) -> None:
        cq = parse_cluster_queue(body)
        if event_type == "DELETED":
            self.cluster_queues.pop(cq.name, None)
        else:
            self.cluster_queues[cq.name] = cq

    def on_local_queue(self, event_type: str, body: Mapping[str, Any]) -> None:
        lq = parse_local_queue(body)
        if event_type == "DELETED":
            self.local_queues.pop(job_key(lq.namespace, lq.name), None)
        else:
            self.local_queues[job_key(lq.namespace, lq.name)] = lq

    def on_namespace(self, event_type: str, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        if event_type == "DELETED":
            self.namespace_labels.pop(str(meta.get("name")), None)
        else:
            self.namespace_labels[str(meta.get("name"))] = dict(meta.get("labels") or {})

    def known_namespaces(self) -> Mapping[str, Mapping[str, str]] | None:
        """The namespaces that exist (name -> labels), None while they have not been listed."""
        return self.namespace_labels if self.namespaces_listed else None

    # ----------------------------------------------------------------------------- questions
    def workload_for(self, body: Mapping[str, Any]) -> Workload | None:
        """The job's Workload: the newest live one it owns (by uid), else its newest finished one."""
        meta = body.get("metadata") or {}
        uid, ns = meta.get("uid"), meta.get("namespace")
        if not uid:
            return None
        if self._by_owner is None:
            index: dict[tuple[str, str], list[Workload]] = {}
            for w in self.workloads.values():
                if w.owner_uid:
                    index.setdefault((w.namespace, w.owner_uid), []).append(w)
            self._by_owner = index
        found = self._by_owner.get((str(ns), str(uid)), [])
        live = [w for w in found if not w.finished] or found
        return max(live, key=lambda w: w.created_at or 0.0) if live else None

    def base_view(self, body: Mapping[str, Any]) -> JobView:
        """The job's view before the core adds its history: its Workload, queue and namespace."""
        meta = body.get("metadata") or {}
        ns = str(meta.get("namespace") or "")
        queue_name = (meta.get("labels") or {}).get("kueue.x-k8s.io/queue-name")
        lq = self.local_queues.get(job_key(ns, queue_name)) if queue_name else None
        return base_view(
            body,
            workload=self.workload_for(body),
            cluster_queue=lq.cluster_queue if lq else None,
            namespace_labels=self.namespace_labels.get(ns),
        )

    def queue_of(self, wl: Workload) -> str | None:
        """The ClusterQueue a Workload belongs to: its admission's, else its LocalQueue's (a
        pending workload has no admission yet; an evicted one lost it but keeps its history on
        that queue)."""
        if wl.cluster_queue:
            return wl.cluster_queue
        lq = self.local_queues.get(job_key(wl.namespace, wl.queue_name)) if wl.queue_name else None
        return lq.cluster_queue if lq is not None and lq.cluster_queue else None

    def cluster_view(self, now: float, *, priority_boost_enabled: bool) -> ClusterView:
        exposures = [
            workload_exposure(
                cq,
                dict(wl.evictions_by_reason),
                past_admitted_seconds=wl.past_execution_seconds,
                # a finished Workload keeps its Admitted condition: its admission ended when it
                # finished (counted to now, the queue's rate drifted toward 0 for ever)
                admitted_since=wl.admitted_at
                if wl.admitted and (wl.finished_at or not wl.finished)
                else None,
                now=min(now, wl.finished_at) if wl.finished and wl.finished_at is not None else now,
                priority=wl.priority,
            )
            for wl in self.workloads.values()
            if (cq := self.queue_of(wl)) is not None
        ]
        evidence = hazard_evidence(exposures)
        return ClusterView(
            cluster_queues={name: cq.view() for name, cq in self.cluster_queues.items()},
            # a pending workload has no admission: its queue is its LocalQueue's, else the guard
            # sees no pending preemptor and the priority ranges per queue leave it out
            workloads=tuple(w.view(self.queue_of(w)) for w in self.workloads.values() if not w.finished),
            preemption_rate=rates_of(evidence),
            hazard_evidence=evidence,
            priority_hazard_evidence=hazard_evidence_by_priority(exposures),
            priority_boost_enabled=priority_boost_enabled,
        )
