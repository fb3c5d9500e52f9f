"""The writes each action kind makes: step 3 of the actuator's protocol (``advisor.controller.actuator``).

Each is a merge or JSON patch of exactly the fields concerned, on a fresh read where the engine's
view may be stale: a checkpoint request is a pod annotation; a release (or stop) is
``Workload.spec.active=false`` guarded by the Workload's resourceVersion; a priority boost is
Kueue's annotation on the Workload; a resize is a PyTorchJob's scale subresource or a TrainJob's
``numNodes`` (dry-run first: Trainer v2.2+ refuses it); a grace period is the advisor's own
``runtimePatches`` entry on a suspended TrainJob. What cannot work on the job as it stands comes
back ``impossible`` with the reason, so it is not tried again until the job changes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from advisor.controller.gracepatch import MANAGER as GRACE_MANAGER
from advisor.controller.gracepatch import set_grace_ops
from advisor.controller.jobs import JOB_KINDS, PYTORCHJOB, TRAINJOB
from advisor.controller.kueue import Workload
from advisor.model import ActionKind, JobView, boost_of
from advisor.protocol import CHECKPOINT_REQUEST_ANNOTATION
from advisor.sources.lifecycle import ended_as

__all__ = ["Outcome", "mutate"]


@dataclass(frozen=True, slots=True)
class Outcome:
    outcome: str  # done | requested | failed | impossible
    detail: str


def mutate(
    api: Any,
    kind: ActionKind,
    params: Mapping[str, Any],
    job: JobView,
    body: Mapping[str, Any],
    workload: Workload | None,
    rid: str,
    *,
    boost: int,
) -> Outcome:
    """Step 3 of the protocol for one action: the one write (or the few, for a resize) it takes.
    Returns what came of it; an API error not handled here propagates to the caller's retries."""
    ns = job.namespace
    if kind is ActionKind.CHECKPOINT:
        jk = JOB_KINDS.get(job.kind, TRAINJOB)
        pods = api.list_pod_names(ns, f"{jk.pod_label}={job.name}")
        if not pods:
            return Outcome("failed", f"no running pods found with {jk.pod_label}={job.name}")
        for pod in pods:
            api.annotate_pod(ns, pod, {CHECKPOINT_REQUEST_ANNOTATION: rid})
        return Outcome("requested", f"checkpoint requested on {len(pods)} pod(s)")
    if kind in (ActionKind.RELEASE_QUOTA, ActionKind.STOP):
        if workload is None:
            return Outcome(
                "impossible",
                "no Kueue Workload found for the job; quota is released only through "
                "Workload.spec.active=false",
            )
        return _release(api, job, workload)
    if kind in (ActionKind.BOOST_PRIORITY, ActionKind.DROP_BOOST):
        if workload is None:
            return Outcome("impossible", "no Kueue Workload found for the job")
        value = boost_of(params, boost) if kind is ActionKind.BOOST_PRIORITY else None
        api.kueue.set_priority_boost(ns, workload.name, value)
        what = f"set to {value}" if value is not None else "removed"
        return Outcome("done", f"priority boost on Workload {workload.name} {what}")
    if kind is ActionKind.SCALE:
        return _scale(api, job, params, workload)
    if kind is ActionKind.SET_GRACE_PERIOD:
        return _set_grace(api, job, params)
    return Outcome("impossible", f"unsupported action kind {kind.value}")


def _set_grace(api: Any, job: JobView, params: Mapping[str, Any]) -> Outcome:
    """The advisor's ``runtimePatches`` entry with the trainer pods' grace period, on a fresh
    read of a suspended TrainJob (``gracepatch``: every write tests ``/spec/suspend``, so a job
    resumed since is refused by the API server, not patched)."""
    seconds = params.get("grace_period_s")
    if job.kind != TRAINJOB.kind or not isinstance(seconds, int | float) or isinstance(seconds, bool):
        return Outcome("impossible", f"grace periods are set on TrainJobs only ({job.kind}, {seconds!r})")
    target = math.ceil(float(seconds))
    try:
        for _ in range(3):  # a value of the advisor's own is replaced in two writes: remove, add
            spec = api.get_job(TRAINJOB.kind, job.namespace, job.name).get("spec") or {}
            if spec.get("suspend") is not True:
                return Outcome(
                    "impossible",
                    "the TrainJob is not suspended: Trainer changes runtimePatches only while it is",
                )
            ops = set_grace_ops(spec, target)
            if ops is None:
                return Outcome(
                    "done",
                    f"terminationGracePeriodSeconds {target} for the next start (runtimePatches "
                    f"manager {GRACE_MANAGER})",
                )
            api.json_patch_job(TRAINJOB.kind, job.namespace, job.name, ops)
    except Exception as exc:
        if getattr(exc, "status", None) == 403:
            return Outcome(
                "impossible",
                "the controller may not read and patch TrainJobs (setting grace periods is opt-in: "
                "add the manifests/components/trainjob-grace-period RBAC component)",
            )
        raise
    return Outcome("failed", "the grace period did not hold after three writes (another writer?)")


def _release(api: Any, job: JobView, workload: Workload) -> Outcome:
    """``Workload.spec.active=false`` on a fresh read, guarded by its resourceVersion: a Workload
    replaced, finished or already inactive since the engine's view is not written, and a
    competing writer in between makes the API server refuse the patch (409, retried)."""
    kueue = api.kueue
    fresh = kueue.get_workload(job.namespace, workload.name)
    if workload.uid and fresh.uid and fresh.uid != workload.uid:
        return Outcome("failed", f"Workload {workload.name} was replaced since the decision")
    if fresh.finished:
        return Outcome("impossible", f"Workload {workload.name} has finished; nothing to release")
    if not fresh.active:
        return Outcome("done", f"Workload {workload.name} already inactive ({job.gpus} GPU(s))")
    if not fresh.quota_reserved or fresh.evicted:
        # preempted or queued since the decision: it holds nothing, and deactivated it would
        # drop out of the queue until someone resumes it
        state = "being evicted" if fresh.evicted else "waiting in the queue without quota"
        return Outcome("impossible", f"Workload {workload.name} is {state}: nothing to release")
    ended = _job_ended(api, job)
    if ended is not None:
        return Outcome("impossible", ended)
    wl = kueue.set_active(
        job.namespace, workload.name, False, resource_version=fresh.resource_version or None
    )
    return Outcome("done", f"Workload {workload.name} deactivated (active={wl.active}, {job.gpus} GPU(s))")


def _job_ended(api: Any, job: JobView) -> str | None:
    """Why the job, read afresh, is no longer one to release (it completed, failed or is gone), or
    None. Its Workload is marked Finished only after the job controller marks the job done: in
    between, a release decided on a running job would deactivate a finished one (a platform trial
    found the window a watch event wide; the Workload's own read cannot see it)."""
    try:
        body = api.get_job(job.kind, job.namespace, job.name)
    except Exception as exc:
        status = getattr(exc, "status", None)
        if status == 404:
            return f"the {job.kind} is gone: nothing to release"
        if status == 403:
            # an act role from before this read (manifests/components/act grants it): the
            # Workload's fresh read stands alone, as it did
            return None
        raise
    how = ended_as(body)
    return None if how is None else f"the {job.kind} has {how} since the decision: nothing to release"


def _scale(api: Any, job: JobView, params: Mapping[str, Any], workload: Workload | None) -> Outcome:
    target = params.get("nodes", params.get("replicas"))
    if not isinstance(target, int | float) or isinstance(target, bool) or target < 1:
        return Outcome("impossible", f"scale needs a positive target node count, got {target!r}")
    nodes = int(target)
    decided_at = params.get("from_nodes")
    if isinstance(decided_at, int) and not isinstance(decided_at, bool) and decided_at != job.nodes:
        # resized since the decision (a person, while a restarted controller was down): the
        # decision read another job, and carried out it overwrote their setting (a platform
        # trial: 2 -> 4 decided, a person set 3, the restart wrote 4)
        return Outcome(
            "impossible",
            f"the job was resized since the decision ({decided_at} -> {job.nodes} node(s)): not "
            f"resized to {nodes}; the next decision reads it as it is",
        )
    if job.kind == PYTORCHJOB.kind:
        lo = job.min_nodes if job.min_nodes is not None else 1
        hi = job.max_nodes if job.max_nodes is not None else nodes
        if not lo <= nodes <= hi:
            return Outcome("impossible", f"target {nodes} outside elasticPolicy bounds [{lo}, {hi}]")
        if workload is not None:
            # Kueue admits a PyTorchJob's pod counts as they stood; once they no longer match, it
            # stops the job and requeues it (``No matching Workload``), and it has no elastic
            # Workloads for PyTorchJob: an in-place resize is a restart from the last checkpoint
            return Outcome(
                "impossible",
                f"Kueue admitted {job.nodes} node(s) and would stop and requeue a PyTorchJob resized to "
                f"{nodes} (no elastic Workloads for PyTorchJob); resize it without Kueue, or recreate it",
            )
        # the scale subresource is Worker.replicas; a Master, if any, is a node it leaves alone
        workers = nodes - job.fixed_nodes
        if workers < 1:
            return Outcome("impossible", f"target {nodes} node(s) leaves no worker beside the Master")
        api.scale_job(PYTORCHJOB.kind, job.namespace, job.name, workers)
        return Outcome("done", f"PyTorchJob scaled from {job.nodes} to {nodes} node(s) ({workers} worker(s))")
    patch = {"spec": {"trainer": {"numNodes": nodes}}}
    try:
        api.patch_job(TRAINJOB.kind, job.namespace, job.name, patch, dry_run=True)
    except Exception as exc:
        if getattr(exc, "status", None) == 403:
            return Outcome(
                "failed",
                "the controller may not patch TrainJobs (resizing is opt-in: add the "
                "manifests/components/trainjob-resize RBAC component)",
            )
        if getattr(exc, "status", None) in (400, 422):
            return Outcome(
                "impossible",
                "this TrainJob API does not allow changing spec.trainer.numNodes "
                f"(immutable since Trainer v2.2); recreate the job with {nodes} node(s)",
            )
        raise
    # paused around the patch only if it runs, and resumed only by this call and whatever the
    # patch does: a Workload a user or a release had deactivated was set active again, and one
    # whose patch failed stayed inactive with no release recorded
    paused = workload is not None and workload.active
    if paused and workload is not None:
        api.kueue.set_active(job.namespace, workload.name, False)
    try:
        api.patch_job(TRAINJOB.kind, job.namespace, job.name, patch)
    finally:
        if paused and workload is not None:
            api.kueue.set_active(job.namespace, workload.name, True)
    return Outcome(
        "done", f"TrainJob numNodes changed from {job.nodes} to {nodes} (deactivate, patch, reactivate)"
    )
