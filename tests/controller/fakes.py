"""In-memory stand-ins for the API (unit tier only; the e2e tier uses a real API server)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from advisor.controller.kueue import Workload, parse_workload
from advisor.controller.leader import LeaseConfig
from advisor.model import Action, ActionKind, Decision, JobView, Mode

if TYPE_CHECKING:
    from kubernetes import client

    from advisor.controller.engine import Engine


class ApiError(Exception):
    def __init__(self, status: int, reason: str = "") -> None:
        super().__init__(f"{status} {reason}")
        self.status = status
        self.reason = reason


class FakeKueue:
    def __init__(self, log: list[tuple[Any, ...]], workloads: dict[str, dict[str, Any]]) -> None:
        self.log = log
        self.workloads = workloads

    def get_workload(self, namespace: str, name: str) -> Workload:
        obj = self.workloads.get(f"{namespace}/{name}")
        if obj is None:
            raise ApiError(404, "not found")
        return parse_workload(obj)

    def set_active(
        self, namespace: str, name: str, active: bool, *, resource_version: str | None = None
    ) -> Workload:
        obj = self.workloads[f"{namespace}/{name}"]
        meta = obj.setdefault("metadata", {})
        if resource_version is not None and str(meta.get("resourceVersion") or "") != resource_version:
            raise ApiError(409, "Conflict: the object has been modified")
        self.log.append(("set_active", namespace, name, active))
        obj.setdefault("spec", {})["active"] = active
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1)
        return parse_workload(obj)

    def set_priority_boost(self, namespace: str, name: str, boost: int | None) -> Workload:
        self.log.append(("set_priority_boost", namespace, name, boost))
        obj = self.workloads[f"{namespace}/{name}"]
        ann = obj.setdefault("metadata", {}).setdefault("annotations", {})
        if boost is None:
            ann.pop("kueue.x-k8s.io/priority-boost", None)
        else:
            ann["kueue.x-k8s.io/priority-boost"] = str(boost)
        return parse_workload(obj)


class FakeApi:
    """Records every call in ``log``; keeps TrainJobForecast statuses in ``forecasts``."""

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.forecasts: dict[str, dict[str, Any]] = {}
        self.workloads: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, list[str]] = {}
        self.event_keys: set[str] = set()
        self.pod_annotations: dict[str, dict[str, str]] = {}
        self.events: list[dict[str, Any]] = []
        self.kueue = FakeKueue(self.log, self.workloads)
        self.fail_writes = 0
        self.immutable_num_nodes = True
        #: AdvisorPolicies kept as the API server would (``add_policy``); others' writes are only logged
        self.policies: dict[str, dict[str, Any]] = {}
        #: job objects as ``get_job`` reads them ("ns/name"); a job not here reads as running
        self.job_bodies: dict[str, dict[str, Any]] = {}

    def discover_kueue(self) -> str:
        return "fake: Kueue at its default version"

    def _maybe_fail(self) -> None:
        """``fail_writes`` writes in a row fail as an unavailable API server would."""
        if self.fail_writes:
            self.fail_writes -= 1
            raise ApiError(503, "unavailable")

    def _stored_forecast(self, namespace: str, name: str) -> dict[str, Any]:
        self._maybe_fail()
        obj = self.forecasts.get(f"{namespace}/{name}")
        if obj is None:
            raise ApiError(404, "not found")
        return obj

    def create_forecast(self, namespace: str, name: str, owner: Mapping[str, Any]) -> int | None:
        """As the API server: a new object starts at generation 1; an existing one is kept (409)."""
        self._maybe_fail()
        key = f"{namespace}/{name}"
        self.log.append(("create_forecast", namespace, name))
        if key in self.forecasts:
            return None
        kind = {k: owner[k] for k in ("apiVersion", "kind") if k in owner}
        refs = [{**kind, "name": name, "uid": owner["uid"]}]
        self.forecasts[key] = {
            "metadata": {
                "namespace": namespace,
                "name": name,
                "generation": 1,
                "ownerReferences": refs if owner.get("uid") else [],
            },
            "status": {},
            "owner": dict(owner),
        }
        return 1

    def edit_forecast_spec(self, namespace: str, name: str) -> None:
        """A hand edit of the spec: the API server bumps ``metadata.generation``."""
        self.forecasts[f"{namespace}/{name}"]["metadata"]["generation"] += 1

    def patch_forecast_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> int | None:
        """The whole status, as the store's full writes send it (a merge patch of ``status``)."""
        obj = self._stored_forecast(namespace, name)
        self.log.append(("write_forecast", namespace, name))
        obj["status"] = copy.deepcopy(dict(status))
        return int(obj["metadata"]["generation"])

    def json_patch_forecast_status(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> int | None:
        """RFC 6902 as the API server applies it (atomically; 422 when a ``test`` fails)."""
        obj = self._stored_forecast(namespace, name)
        doc = copy.deepcopy(obj)
        for op in ops:
            *parents, last = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
            target: Any = doc
            try:
                for token in parents:
                    target = target[int(token)] if isinstance(target, list) else target[token]
                if op["op"] == "test":
                    current = target[int(last)] if isinstance(target, list) else target[last]
                    if current != op["value"]:
                        raise ApiError(422, f"test failed at {op['path']}")
                elif op["op"] == "add" and isinstance(target, list):
                    target.insert(len(target) if last == "-" else int(last), copy.deepcopy(op["value"]))
                elif op["op"] == "replace" and isinstance(target, list):
                    target[int(last)] = copy.deepcopy(op["value"])
                elif op["op"] in ("add", "replace"):
                    if op["op"] == "replace" and last not in target:
                        raise ApiError(422, f"no {op['path']} to replace")
                    target[last] = copy.deepcopy(op["value"])
                else:
                    raise ApiError(422, f"unsupported op {op['op']}")
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                raise ApiError(422, f"cannot apply {op}: {exc}") from exc
        self.log.append(("json_patch_forecast", namespace, name, len(ops)))
        self.forecasts[f"{namespace}/{name}"] = doc
        return int(doc["metadata"]["generation"])

    def list_forecasts(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return [copy.deepcopy(v) for v in self.forecasts.values()]

    def list_pod_names(self, namespace: str, label_selector: str) -> list[str]:
        self.log.append(("list_pods", namespace, label_selector))
        return list(self.pods.get(f"{namespace}/{label_selector}", []))

    def annotate_pod(self, namespace: str, name: str, annotations: Mapping[str, str | None]) -> None:
        self.log.append(("annotate_pod", namespace, name, dict(annotations)))
        self.pod_annotations.setdefault(f"{namespace}/{name}", {}).update(
            {k: v for k, v in annotations.items() if v is not None}
        )

    def create_event(
        self,
        involved: Mapping[str, Any],
        *,
        reason: str,
        message: str,
        warning: bool = False,
        dedupe_key: str | None = None,
    ) -> bool:
        # like the API server: the key names the Event, and a second create is refused
        if dedupe_key is not None:
            if dedupe_key in self.event_keys:
                return False
            self.event_keys.add(dedupe_key)
        self.log.append(("event", reason))
        self.events.append(
            {"involved": dict(involved), "reason": reason, "message": message, "warning": warning}
        )
        return True

    def patch_job(
        self, kind: str, namespace: str, name: str, patch: Mapping[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        if kind == "TrainJob" and self.immutable_num_nodes:
            raise ApiError(422, "Invalid: spec.trainer: field is immutable")
        self.log.append(("patch_job", kind, namespace, name, dict(patch), dry_run))
        return {}

    def get_job(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        return self.job_bodies.get(
            f"{namespace}/{name}", {"kind": kind, "metadata": {"name": name}, "status": {}}
        )

    def scale_job(self, kind: str, namespace: str, name: str, replicas: int) -> None:
        self.log.append(("scale_job", kind, namespace, name, replicas))

    def patch_policy_status(
        self, name: str, status: Mapping[str, Any], *, resource_version: str | None = None
    ) -> dict[str, Any] | None:
        """Logged; a policy held in ``policies`` is patched as the API server would (a JSON merge
        patch, refused with 409 when ``resource_version`` is not the stored one) and returned."""
        obj = self.policies.get(name)
        if obj is not None and resource_version not in (None, obj["metadata"]["resourceVersion"]):
            raise ApiError(409, "Conflict: the object has been modified")
        self.log.append(("policy_status", name, copy.deepcopy(dict(status))))
        if obj is None:
            return None
        obj["status"] = _merge_patch(obj.get("status") or {}, status)
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(obj)

    def get_policy(self, name: str) -> dict[str, Any] | None:
        self.log.append(("get_policy", name))
        obj = self.policies.get(name)
        return copy.deepcopy(obj) if obj is not None else None

    def add_policy(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Keep an AdvisorPolicy (at resourceVersion 1) so that its status writes apply to it."""
        obj = copy.deepcopy(dict(body))
        obj.setdefault("metadata", {})["resourceVersion"] = "1"
        self.policies[obj["metadata"]["name"]] = obj
        return copy.deepcopy(obj)

    def mutations(self) -> list[tuple[Any, ...]]:
        """Calls that change a user's object (everything but our own status, Events and reads)."""
        return [
            c
            for c in self.log
            if c[0] in ("set_active", "set_priority_boost", "annotate_pod", "patch_job", "scale_job")
        ]


def _merge_patch(target: Any, patch: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7386: null removes a key, an object merges, anything else replaces."""
    out = copy.deepcopy(dict(target)) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping):
            out[key] = _merge_patch(out.get(key), value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def trainjob(
    name: str = "llm",
    namespace: str = "team-a",
    *,
    step: int | None = None,
    loss: Any = None,
    total: int = 1000,
    updated: str = "2026-08-21T10:30:45Z",
    uid: str = "uid-1",
    queue: str | None = "team-a-lq",
    nodes: int = 2,
    gpus_per_node: int = 8,
    metrics: list[dict[str, Any]] | None = None,
    extra_metrics: list[dict[str, str]] = (),
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "labels": {},
            "creationTimestamp": "2026-08-21T10:00:00Z",
        },
        "spec": {
            "trainer": {
                "numNodes": nodes,
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": str(gpus_per_node)}},
            }
        },
    }
    if queue:
        body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = queue
    if step is not None or metrics is not None:
        ms = (
            metrics
            if metrics is not None
            else [
                {"name": "current_step", "value": str(step)},
                {"name": "total_steps", "value": str(total)},
                {"name": "loss", "value": str(loss)},
                *extra_metrics,
            ]
        )
        body["status"] = {"trainerStatus": {"metrics": ms, "lastUpdatedTime": updated}}
    return body


def workload(
    job_name: str = "llm",
    namespace: str = "team-a",
    *,
    uid: str = "uid-1",
    active: bool = True,
    admitted: bool = True,
    cq: str = "gpu-cq",
    gpus: int = 16,
    priority: int = 0,
) -> dict[str, Any]:
    conds = [
        {"type": "QuotaReserved", "status": "True" if admitted else "False"},
        {
            "type": "Admitted",
            "status": "True" if admitted else "False",
            "lastTransitionTime": "2026-08-21T10:00:05Z",
        },
    ]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"trainjob-{job_name}-abcde",
            "namespace": namespace,
            "uid": f"wl-{uid}",
            "labels": {"kueue.x-k8s.io/job-uid": uid},
            "ownerReferences": [
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "name": job_name,
                    "uid": uid,
                    "controller": True,
                }
            ],
            "creationTimestamp": "2026-08-21T10:00:01Z",
        },
        "spec": {
            "active": active,
            "queueName": "team-a-lq",
            "priority": priority,
            "podSets": [
                {
                    "name": "node",
                    "count": 2,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "node", "resources": {"requests": {"nvidia.com/gpu": "8"}}}
                            ]
                        }
                    },
                }
            ],
        },
        "status": {
            "conditions": conds,
            **(
                {
                    "admission": {
                        "clusterQueue": cq,
                        "podSetAssignments": [
                            {"name": "node", "count": 2, "resourceUsage": {"nvidia.com/gpu": str(gpus)}}
                        ],
                    }
                }
                if admitted
                else {}
            ),
        },
    }


#: the Lease timings of the leader-election tests
LEASE_CONFIG = LeaseConfig(
    namespace="sys", name="lease", lease_duration_s=15, renew_deadline_s=10, retry_period_s=2
)


class FakeLeases:
    """The three Lease calls, with the API server's optimistic concurrency on resourceVersion."""

    def __init__(self) -> None:
        self.lease: client.V1Lease | None = None
        self.version = 0
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise ApiError(503, "unavailable")

    def read_namespaced_lease(self, name: str, namespace: str) -> client.V1Lease:
        self._check()
        if self.lease is None:
            raise ApiError(404, "not found")
        return copy.deepcopy(self.lease)

    def create_namespaced_lease(self, namespace: str, body: client.V1Lease) -> client.V1Lease:
        self._check()
        if self.lease is not None:
            raise ApiError(409, "already exists")
        return self._store(body)

    def replace_namespaced_lease(self, name: str, namespace: str, body: client.V1Lease) -> client.V1Lease:
        self._check()
        assert self.lease is not None
        if body.metadata.resource_version != self.lease.metadata.resource_version:
            raise ApiError(409, "Conflict")
        return self._store(body)

    def _store(self, body: client.V1Lease) -> client.V1Lease:
        self.version += 1
        stored = copy.deepcopy(body)
        stored.metadata.resource_version = str(self.version)
        self.lease = stored
        return copy.deepcopy(stored)


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make_engine(api: FakeApi, decide: Any = None, *, core: Any = None, **cfg: Any) -> Engine:
    """An engine on ``api`` that writes at once and forecasts at every look; with ``decide``, its
    core's one policy decides by it; with ``core``, that core (its policies from ``api``)."""
    from advisor.controller.engine import Engine, EngineConfig
    from advisor.core import AdvisorCore

    if decide is not None:
        core = AdvisorCore(
            policies=[object()], forecast_interval_s=0, selector=lambda ps, job: ps[0], decider=decide
        )
    config = EngineConfig(write_interval_s=0, writer_workers=0, forecast_interval_s=0, **cfg)
    return Engine(api, config=config, core=core)


def release_sequence(job: JobView, now: float) -> Decision:
    """What policy ``p`` (Apply) decides while it releases ``job`` checkpoint first: the checkpoint
    before the release, once, then waiting for its acknowledgement, the window open since ``now``."""
    acts: tuple[Action, ...] = ()
    if not job.actions:
        why = "checkpoint before release quota: P(plateau)=0.9"
        acts = (Action(ActionKind.CHECKPOINT, "plateau", why, {"timeout_s": 600}),)
    return Decision(
        job=job.key,
        policy="p",
        mode=Mode.APPLY,
        actions=acts,
        state={"plateau.since": now},
        reasons=("plateau: waiting for checkpoint acknowledgement",),
    )
