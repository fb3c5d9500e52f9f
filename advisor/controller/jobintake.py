"""What each watch event queued into the engine does: the intake half of ``Engine.step``.

The engine applies its queued events first in every step, then evaluates and renders; this is the
first half, kept apart because it is the one place that says what an object's arrival, change or
deletion means to the engine's state (a job followed, restored from its saved status, or
forgotten through the deletion path with its actions carried to its policies; a Workload that
makes its job due; the start-up listing that finds the jobs deleted while no controller ran), and
it reads on its own. It runs on the engine's thread, inside ``step``, like everything else that
touches the engine's state: ``JobIntake`` is a part of ``Engine`` (a mixin), not an object of its
own, and owns no state; the attributes below are the engine's.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from advisor.controller.actuator import Actuator
from advisor.controller.audit import audit_dropped
from advisor.controller.cluster_index import ClusterIndex
from advisor.controller.figureschedule import FigureSchedule
from advisor.controller.jobs import JOB_KINDS, TRAINJOB, kind_of
from advisor.controller.kueue import parse_workload
from advisor.controller.metrics import Metrics
from advisor.controller.policybook import PolicyBook
from advisor.controller.policyevents import PolicyEvents
from advisor.controller.savecheck import SaveWindowCheck
from advisor.controller.saved import JOB_DELETED, SavedStatuses
from advisor.controller.statusboard import StatusBoard
from advisor.controller.store import ForecastStore
from advisor.controller.trackedjob import TrackedJob, observe_job_event, other_kind_of_name
from advisor.controller.writer import StatusWriter
from advisor.core import AdvisorCore
from advisor.model import job_key

__all__ = ["JobIntake"]

log = logging.getLogger("advisor.controller.engine")  # the engine's lines, as before the split


class JobIntake:
    """``Engine``'s handling of the events ``step`` takes from its queue (``_apply_event``)."""

    api: Any
    core: AdvisorCore
    metrics: Metrics
    jobs: dict[str, TrackedJob]
    _shadowed: set[tuple[str, str]]
    index: ClusterIndex
    book: PolicyBook
    writer: StatusWriter
    store: ForecastStore
    actuator: Actuator
    restart: SavedStatuses
    board: StatusBoard
    figures: FigureSchedule
    policy_events: PolicyEvents
    save_check: SaveWindowCheck | None
    _judged_kinds: frozenset[str]
    _received: float

    def _apply_event(self, kind: str, event_type: str, body: Any, now: float) -> None:
        if kind == "job":
            self._on_job(event_type, body, now)
        elif kind == "workload":
            self._on_workload(event_type, body)
        elif kind == "admissioncheck":
            if self.save_check is not None:
                self.save_check.on_admission_check(event_type, body)
        elif kind == "unwatched-workload":
            # a namespace's Workload that kopf does not watch (``UnwatchedWorkloads``): only the
            # check's answer, never the index (its quota, its job are none of this advisor's)
            if self.save_check is not None and event_type != "DELETED":
                self.save_check.let_through(parse_workload(body), self._judged_kinds)
        elif kind == "clusterqueue":
            self.index.on_cluster_queue(event_type, body)
        elif kind == "localqueue":
            self.index.on_local_queue(event_type, body)
        elif kind == "namespace":
            self.index.on_namespace(event_type, body)
        elif kind == "namespacelisting":
            self.index.namespaces_listed = True
        elif kind == "policy":
            self.policy_events.on_event(event_type, body, received=self._received, now=now)
        elif kind == "joblisting":
            self._on_job_listing(body, now)
        elif kind == "policylisting":
            self.policy_events.on_listing(bool(body.get("listed")))
        elif kind == "policyresync":
            listed_at = float(body.get("listedAt", math.inf))
            self.policy_events.on_resync(body.get("items") or [], listed_at, received=self._received, now=now)
        else:
            raise ValueError(f"unknown event kind {kind!r}")

    # ----------------------------------------------------------------------------------- jobs
    def _on_job(self, event_type: str, body: Mapping[str, Any], now: float) -> None:
        meta = body.get("metadata") or {}
        if (
            not meta.get("namespace")
            or not meta.get("name")
            or str(body.get("kind") or "TrainJob") not in JOB_KINDS
        ):
            log.warning("ignoring a job event without namespace/name or of an unknown kind")
            return
        key = job_key(str(meta["namespace"]), str(meta["name"]))
        if other_kind_of_name(key, self.jobs.get(key), body, self._shadowed, self.actuator.job_events):
            return
        self.figures.seen(key)
        if event_type == "DELETED":
            if key in self.jobs:
                log.info("%s: deleted, its history and actions forgotten", key)
            self._job_deleted(key)
            return
        job = self.jobs.get(key)
        if job is None:
            job = self.jobs[key] = TrackedJob(body)
            uid = (body.get("metadata") or {}).get("uid")
            self.restart.restore(key, str(uid) if uid else None)
            log.info("%s: %s seen, advising it", key, body.get("kind") or TRAINJOB.kind)
        observe_job_event(key, job, body, now, core=self.core, metrics=self.metrics, received=self._received)

    def _job_deleted(self, key: str) -> None:
        """The deletion path: what was pending is dropped (an audit line each), the job's actions
        go to its policies' ``fromDeletedJobs``, everything else of it is forgotten."""
        audit_dropped(key, self.actuator.pending_for(key))
        rec = self.core.record(key)
        self.book.job_deleted(rec.actions if rec is not None else ())
        self.figures.due = True  # JOBS drops now; the action counts stay
        job = self.jobs.pop(key, None)
        self.core.forget(key)
        self.actuator.forget(key)
        self.writer.forget(key)
        self.store.forget(key)
        self.board.forget(key)
        if job is not None:  # a job never followed here (deleted while no controller ran) has no series
            namespace, name = key.split("/", 1)
            self.metrics.forget_job(namespace, kind_of(job.body).kind, name)

    def expect_job_listing(self) -> None:
        """Hold the policies' figures until the initial listing of the jobs is in (``enqueue`` of a
        ``joblisting``): a cold start wrote JOBS 0, RECOMMENDED 0 and the deleted jobs' actions
        alone before any job was loaded (corrected a second later). Call before the first step."""
        self.figures.expect_listing()

    def _on_job_listing(self, body: Mapping[str, Any], now: float) -> None:
        """The jobs that exist at start-up (``{"kinds": [...], "jobs": {key: uid}}``; ``jobs`` None:
        the listing failed). The saved statuses of jobs it lacks (deleted while no controller ran)
        go through the deletion path now, once; the figures wait for the listed jobs' watch events
        (at most ``figureschedule.LISTING_WAIT_S``: a job deleted after the listing never comes)."""
        self.figures.listing_in(now)
        jobs = body.get("jobs")
        if not isinstance(jobs, Mapping):
            return
        self.figures.await_jobs({str(k) for k in jobs if k not in self.jobs})
        for key in self.restart.gone(
            {str(k): (str(v) if v else None) for k, v in jobs.items()},
            [str(k) for k in body.get("kinds") or ()],
        ):
            log.info(
                "%s: deleted while no controller ran; its actions go to its policies' fromDeletedJobs", key
            )
            self._job_deleted(key)

    def _mark_carried(self) -> None:
        """Mark the TrainJobForecasts of the jobs found deleted at start-up (``JOB_DELETED``), once
        their actions are in the policies' written figures: a later restart, the forecast not
        collected yet, does not count them again. (Killed between the two writes, a controller
        counts them twice; the other order could lose them.)"""
        for key, patch in sorted(self.restart.carried.items()):
            namespace, name = key.split("/", 1)
            try:
                self.api.patch_forecast_status(namespace, name, patch)
            except Exception as exc:
                log.warning("%s: TrainJobForecast not marked %s: %s", key, JOB_DELETED, exc)
        self.restart.carried.clear()

    def _on_workload(self, event_type: str, body: Mapping[str, Any]) -> None:
        owner = self.index.on_workload(event_type, body)
        job = self.jobs.get(owner) if owner is not None else None
        if job is not None:
            job.needs_eval = True
        elif self.save_check is not None and event_type != "DELETED":
            # a workload of a kind the advisor does not judge (a batch Job on the same queue):
            # nothing to look at before it starts, so its check must not hold it
            self.save_check.let_through(parse_workload(body), self._judged_kinds)
