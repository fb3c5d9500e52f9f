"""What the controller knows about each kind of training job it watches.

One small ``JobKind`` record per kind (TrainJob v2, PyTorchJob v1) carries its API coordinates,
how to find its pods, and how to read nodes/GPUs/elastic bounds from its spec, so that the rest
of the controller is written once. ``base_view`` builds the adapter's half of a ``JobView`` (the
identity and cluster-facing fields); the core loop fills in the history-derived half.

A TrainJob's trainer spec is read through the published Kubeflow Trainer models
(``kubeflow-trainer-api``, the ``controller`` extra), so that field names and types follow
upstream. Validating one costs a fraction of a millisecond, and a job reports every few seconds
while its spec almost never changes, so each distinct spec is parsed once (a small LRU cache
keyed by its JSON). Without the package, or for a spec the models reject (an older or newer API),
the same fields are read from the plain object.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from advisor.controller.gracepatch import patched_grace
from advisor.controller.kueue import Workload, gpus_in, parse_time
from advisor.model import JobView, LifecycleSignals
from advisor.protocol import KUEUE_QUEUE_LABEL
from advisor.sources.lifecycle import job_signals

__all__ = ["JOB_KINDS", "PYTORCHJOB", "TRAINJOB", "JobKind", "base_view", "kind_of", "trainer_shape"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class JobKind:
    kind: str
    group: str
    version: str
    plural: str
    #: label on the job's pods whose value is the job name
    pod_label: str


TRAINJOB = JobKind(
    "TrainJob", "trainer.kubeflow.org", "v1alpha1", "trainjobs", "jobset.sigs.k8s.io/jobset-name"
)
PYTORCHJOB = JobKind("PyTorchJob", "kubeflow.org", "v1", "pytorchjobs", "training.kubeflow.org/job-name")
JOB_KINDS: Mapping[str, JobKind] = {k.kind: k for k in (TRAINJOB, PYTORCHJOB)}


def kind_of(body: Mapping[str, Any]) -> JobKind:
    kind = str(body.get("kind") or "TrainJob")
    if kind not in JOB_KINDS:
        raise ValueError(f"unsupported job kind {kind!r}; expected one of {sorted(JOB_KINDS)}")
    return JOB_KINDS[kind]


def _int(value: Any, default: int | None) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else default
    except (TypeError, ValueError):
        return default


def _suspended(body: Mapping[str, Any]) -> bool:
    spec = body.get("spec") or {}
    if body.get("kind") == "PyTorchJob":
        return bool((spec.get("runPolicy") or {}).get("suspend"))
    return bool(spec.get("suspend"))


def _trainjob_shape(spec: Mapping[str, Any]) -> tuple[int, int, int | None, int | None]:
    trainer = spec.get("trainer") or {}
    if not isinstance(trainer, Mapping):
        trainer = {}
    try:
        key = json.dumps(trainer, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        key = None
    shape = trainer_shape(key) if key is not None else None
    if shape is None:
        nodes = max(_int(trainer.get("numNodes"), 1) or 1, 1)
        per_node = trainer.get("resourcesPerNode") or {}
        gpus_per_node = max(gpus_in(per_node.get("limits")), gpus_in(per_node.get("requests")))
        shape = nodes, gpus_per_node
    return shape[0], shape[0] * shape[1], None, None


@functools.lru_cache(maxsize=4096)
def trainer_shape(trainer_json: str) -> tuple[int, int] | None:
    """(nodes, GPUs per node) of a TrainJob ``spec.trainer`` (as JSON) read with the upstream
    ``TrainerV1alpha1Trainer`` model; None without the package or when the model rejects it."""
    try:
        from kubeflow_trainer_api.models.trainer_v1alpha1_trainer import TrainerV1alpha1Trainer
    except ImportError:
        return None
    try:
        trainer = TrainerV1alpha1Trainer.from_json(trainer_json)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        log.debug("TrainJob trainer spec not readable with the upstream model: %s", exc)
        return None
    if trainer is None:
        return None
    nodes = max(trainer.num_nodes or 1, 1)
    res = trainer.resources_per_node

    def quantities(values: Mapping[str, Any] | None) -> dict[str, Any]:
        return {k: getattr(q, "actual_instance", q) for k, q in (values or {}).items()}

    per_node = max(gpus_in(quantities(res.limits)), gpus_in(quantities(res.requests))) if res else 0
    return nodes, per_node


def _pytorchjob_shape(spec: Mapping[str, Any]) -> tuple[int, int, int | None, int | None, int]:
    """(nodes, GPUs, elastic bounds in nodes, nodes a resize leaves alone) of a PyTorchJob.

    An elastic PyTorchJob is resized through its scale subresource, ``Worker.replicas``, and its
    ``elasticPolicy.minReplicas`` / ``maxReplicas`` bound that count (the HPA it may create scales
    the same field between them). A Master, when the job has one, is a node no resize touches:
    the bounds in nodes are the workers' plus it. A worker-only job (the usual elastic layout)
    had been read as if it had a Master: a shrink to 1 node wrote 0 workers."""
    replicas = spec.get("pytorchReplicaSpecs") or {}
    nodes = gpus = masters = 0
    for role in ("Master", "Worker"):
        rs = replicas.get(role) or {}
        count = _int(rs.get("replicas"), 1 if rs else 0) or 0
        nodes += count
        if role == "Master":
            masters = count
        containers = ((rs.get("template") or {}).get("spec") or {}).get("containers") or []
        per_pod = sum(
            max(
                gpus_in((c.get("resources") or {}).get("limits")),
                gpus_in((c.get("resources") or {}).get("requests")),
            )
            for c in containers
        )
        gpus += per_pod * count
    elastic = spec.get("elasticPolicy") or {}
    lo, hi = _int(elastic.get("minReplicas"), None), _int(elastic.get("maxReplicas"), None)
    return (
        max(nodes, 1),
        gpus,
        None if lo is None else lo + masters,
        None if hi is None else hi + masters,
        masters,
    )


def _runtime_name(spec: Mapping[str, Any]) -> str | None:
    ref = spec.get("runtimeRef")
    name = ref.get("name") if isinstance(ref, Mapping) else None
    return str(name) if isinstance(name, str) and name else None


def _version(meta: Mapping[str, Any], workload: Workload | None) -> str:
    """The job's and its Workload's identity and generation (``JobView.version``): status updates
    leave it alone, a new Workload or a spec change moves it."""
    wl = f"{workload.uid}/{workload.generation}" if workload is not None else "none"
    return f"{meta.get('uid') or ''}/{meta.get('generation') or 0};workload={wl}"


def base_view(
    body: Mapping[str, Any],
    *,
    workload: Workload | None = None,
    cluster_queue: str | None = None,
    namespace_labels: Mapping[str, str] | None = None,
) -> JobView:
    """The adapter's part of a ``JobView`` from a TrainJob or PyTorchJob object (dict).

    With a Kueue ``workload``, activity/admission/priority come from it (Kueue is the authority
    on whether a job holds quota); without one, from the job's own ``suspend``.
    """
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    kind = kind_of(body)
    fixed_nodes = 0
    if kind is PYTORCHJOB:
        nodes, gpus, min_nodes, max_nodes, fixed_nodes = _pytorchjob_shape(spec)
    else:
        nodes, gpus, min_nodes, max_nodes = _trainjob_shape(spec)
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    admitted_at = grace = None
    signals: LifecycleSignals = job_signals(body)
    if workload is not None:
        grace = workload.grace_period_s
        signals = replace(
            signals,
            has_workload=True,
            workload_active=workload.active,
            quota_reserved=workload.quota_reserved,
            workload_admitted=workload.admitted,
            evicted=workload.evicted,
            eviction=workload.eviction,
            evicted_at=workload.evicted_at,
            workload_finished=workload.finished,
            workload_finished_reason=workload.finished_reason,
        )
        active, admitted, priority = workload.active, workload.admitted, workload.priority
        admitted_at = workload.admitted_at if workload.admitted else None
        cluster_queue = workload.cluster_queue or cluster_queue
        gpus = gpus or workload.gpus
    else:
        active = admitted = not _suspended(body)
        priority = 0
    if kind is not PYTORCHJOB:
        # the advisor's (or anyone's) runtime patch is what the pods get at their next start, and
        # got at this one if it was there before it; the Workload's pod sets may lag behind it
        patched = patched_grace(spec)
        if patched is not None:
            grace = float(patched)
    return JobView(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        kind=kind.kind,
        labels=labels,
        annotations=annotations,
        queue_name=labels.get(KUEUE_QUEUE_LABEL),
        cluster_queue=cluster_queue,
        priority=priority,
        gpus=gpus,
        nodes=nodes,
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        fixed_nodes=fixed_nodes,
        active=active,
        admitted=admitted,
        admitted_at=admitted_at,
        grace_period_s=grace,
        workload_boost=workload.priority_boost if workload is not None else None,
        runtime=_runtime_name(spec) if kind is not PYTORCHJOB else None,
        signals=signals,
        version=_version(meta, workload),
        started_at=parse_time(meta.get("creationTimestamp")),
        namespace_labels=dict(namespace_labels or {}),
    )
