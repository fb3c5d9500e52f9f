"""The controller's only door to the API server.

``ClusterApi`` wraps the kubernetes client for the handful of calls the controller makes (our
``TrainJobForecast`` objects, pod annotations, Events, job patches, Kueue through
``KueueClient``), so that the engine and the actuator can be unit-tested against a fake with the
same methods, and so that every write is visible in one file (RBAC in ``manifests/rbac`` mirrors
it). Patches are JSON merge patches of exactly the fields changed.

Every request has a timeout (``REQUEST_TIMEOUT``): the kubernetes client's default is none, so a
paused or partitioned API server would hang a write, and the action waiting behind it, forever.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from advisor.controller.jobs import JOB_KINDS
from advisor.controller.kueue_client import KueueClient
from advisor.protocol import GROUP, VERSION

__all__ = [
    "FORECAST_KIND",
    "FORECAST_PLURAL",
    "ClusterApi",
    "is_conflict",
    "is_not_found",
    "load_api_client",
    "status_code",
]

log = logging.getLogger(__name__)

FORECAST_KIND = "TrainJobForecast"
FORECAST_PLURAL = "trainjobforecasts"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
COMPONENT = "trainjob-advisor"
#: (connect, read) seconds for every request the controller makes (watches are kopf's, with its own)
REQUEST_TIMEOUT = (5.0, 30.0)


def status_code(exc: BaseException) -> int | None:
    """The HTTP status of an API error (None: not an API error, or none given)."""
    status = getattr(exc, "status", None)
    return int(status) if isinstance(status, int) else None


def is_not_found(exc: BaseException) -> bool:
    return status_code(exc) == 404


def is_conflict(exc: BaseException) -> bool:
    return status_code(exc) == 409


#: where the kubelet mounts a pod's ServiceAccount token and CA
SERVICEACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


#: the threads besides the status writer's that may hold a connection at once: the engine's, the
#: policy resync, the Lease renewer, the unwatched-workload follower and asyncio's ``to_thread``
#: pool (a pool sized for the writer alone logged hundreds of "Connection pool is full" warnings
#: a run at 600 jobs)
OTHER_THREADS = 16


def load_api_client(kubeconfig: str | None = None, context: str | None = None, *, writers: int = 32) -> Any:
    """A kubernetes ``ApiClient`` from a kubeconfig file, ``$KUBECONFIG``, or the in-cluster account.

    In a pod (``KUBERNETES_SERVICE_HOST``/``_PORT`` set, the token mounted), the ServiceAccount
    wins unless a kubeconfig is named; the token is re-read as the kubelet rotates it.
    ``TRAINJOB_ADVISOR_SERVICEACCOUNT_DIR`` moves the mount point (the e2e tier runs the
    controller as a pod would, from a temporary folder). Its connection pool holds a connection
    for each of the status writer's ``writers`` threads and the others' (``OTHER_THREADS``).
    """
    from kubernetes import client, config
    from kubernetes.config.incluster_config import InClusterConfigLoader

    cfg = client.Configuration()
    loaded = False
    if kubeconfig is None:
        mount = Path(os.environ.get("TRAINJOB_ADVISOR_SERVICEACCOUNT_DIR") or SERVICEACCOUNT_DIR)
        try:
            InClusterConfigLoader(
                token_filename=str(mount / "token"), cert_filename=str(mount / "ca.crt")
            ).load_and_set(cfg)
            loaded = True
        except config.ConfigException:
            pass
    if not loaded:
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, writers + OTHER_THREADS)
    return client.ApiClient(cfg)


def with_request_timeout(api_client: Any, timeout: tuple[float, float] = REQUEST_TIMEOUT) -> Any:
    """Give every request through ``api_client`` a default ``_request_timeout`` (idempotent). It
    wraps the REST client's ``request``, which every version of the client calls by keyword."""
    rest = api_client.rest_client
    if getattr(rest, "_advisor_timeout", None) is not None:
        return api_client
    request = rest.request

    def request_with_timeout(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("_request_timeout") is None:
            kwargs["_request_timeout"] = timeout
        return request(*args, **kwargs)

    rest.request = request_with_timeout
    rest._advisor_timeout = timeout
    return api_client


def _as_dict(obj: object) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise TypeError(f"expected a JSON object from the API server, got {type(obj).__name__}")
    return obj


def _generation(obj: object) -> int | None:
    """``metadata.generation`` of an object the API server returned (None when it has none)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    gen = meta.get("generation") if isinstance(meta, dict) else None
    return gen if isinstance(gen, int) and not isinstance(gen, bool) else None


def _now_iso() -> str:
    return datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ClusterApi:
    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self.api_client = with_request_timeout(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.kueue = KueueClient(self.custom)
        self._event_model = client.CoreV1Event
        #: the Events' ``reportingInstance``: which controller posted them (two releases, namespace
        #: shards, both post as the component trainjob-advisor)
        self.instance = COMPONENT

    def discover_kueue(self) -> str:
        """Point the Kueue client at the version the server serves (v1beta2, else v1beta1); say which."""
        from advisor.controller.kueue_client import discover_version

        self.kueue.version, why = discover_version(self.api_client)
        return why

    def serves(self, group: str, version: str) -> bool | None:
        """Whether the API server serves ``group/version`` (None: discovery failed)."""
        from advisor.controller.kueue_client import served_versions

        try:
            return version in served_versions(self.api_client, group)
        except Exception as exc:  # the caller says "discovery failed"; the log says why
            log.warning("discovery of %s failed: %s", group, getattr(exc, "reason", None) or exc)
            return None

    def may(self, verb: str, group: str, resource: str, subresource: str = "") -> bool | None:
        """Whether this identity may ``verb`` the resource in every namespace (a
        SelfSubjectAccessReview, which every authenticated user may create); None: not known."""
        from kubernetes import client

        review = client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(
                resource_attributes=client.V1ResourceAttributes(
                    verb=verb, group=group, resource=resource, subresource=subresource or None
                )
            )
        )
        try:
            out = client.AuthorizationV1Api(self.api_client).create_self_subject_access_review(review)
        except Exception as exc:  # the caller says nothing of what it cannot know; the log says why
            log.debug("access review of %s %s/%s failed: %s", verb, group, resource, exc)
            return None
        return bool(out.status.allowed) if out.status is not None else None

    # ---------------------------------------------------------------- TrainJobForecast objects
    def list_forecasts(self, namespace: str | None = None) -> list[dict[str, Any]]:
        if namespace:
            resp = _as_dict(
                self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, FORECAST_PLURAL)
            )
        else:
            resp = _as_dict(self.custom.list_cluster_custom_object(GROUP, VERSION, FORECAST_PLURAL))
        return list(resp.get("items") or [])

    def get_forecast(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return _as_dict(
                self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, FORECAST_PLURAL, name)
            )
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise

    def get_policy(self, name: str) -> dict[str, Any] | None:
        """An AdvisorPolicy (cluster-scoped) by name; None when there is none."""
        try:
            return _as_dict(self.custom.get_cluster_custom_object(GROUP, VERSION, "advisorpolicies", name))
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise

    def create_forecast(self, namespace: str, name: str, owner: Mapping[str, Any]) -> int | None:
        """Create the (empty) TrainJobForecast for a job, owned by it; an existing one is kept.
        Returns the created object's ``metadata.generation`` (None when one existed already)."""
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": FORECAST_KIND,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/managed-by": COMPONENT},
                "ownerReferences": [
                    {
                        "apiVersion": owner["apiVersion"],
                        "kind": owner["kind"],
                        "name": name,
                        "uid": owner["uid"],
                    }
                ]
                if owner.get("uid")
                else [],
            },
            "spec": {
                "jobRef": {
                    "apiVersion": owner["apiVersion"],
                    "kind": owner["kind"],
                    "name": name,
                    "uid": owner.get("uid", ""),
                }
            },
        }
        try:
            created = self.custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, FORECAST_PLURAL, body
            )
        except Exception as exc:
            if status_code(exc) != 409:
                raise
            return None
        return _generation(created)

    def patch_forecast_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> int | None:
        """A merge patch of the status; returns the object's ``metadata.generation`` after it."""
        return _generation(
            self.custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, FORECAST_PLURAL, name, {"status": status}
            )
        )

    def json_patch_forecast_status(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> int | None:
        """An RFC 6902 JSON patch of the status (``ForecastStore``'s incremental writes); a failed
        ``test`` op comes back as 422. Returns the object's ``metadata.generation`` after it."""
        return _generation(
            self.custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, FORECAST_PLURAL, name, ops, _content_type=JSON_PATCH
            )
        )

    def patch_policy_status(
        self, name: str, status: Mapping[str, Any], *, resource_version: str | None = None
    ) -> dict[str, Any]:
        """A merge patch of an AdvisorPolicy's status; with ``resource_version`` it applies only to
        that version of the object (else 409). Returns the object after it."""
        body: dict[str, Any] = {"status": status}
        if resource_version is not None:
            body["metadata"] = {"resourceVersion": str(resource_version)}
        return _as_dict(
            self.custom.patch_cluster_custom_object_status(GROUP, VERSION, "advisorpolicies", name, body)
        )

    # ---------------------------------------------------------------------------------- jobs
    def get_job(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        jk = JOB_KINDS[kind]
        return _as_dict(
            self.custom.get_namespaced_custom_object(jk.group, jk.version, namespace, jk.plural, name)
        )

    def patch_job(
        self, kind: str, namespace: str, name: str, patch: Mapping[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        jk = JOB_KINDS[kind]
        kwargs: dict[str, Any] = {"dry_run": "All"} if dry_run else {}
        return _as_dict(
            self.custom.patch_namespaced_custom_object(
                jk.group, jk.version, namespace, jk.plural, name, dict(patch), **kwargs
            )
        )

    def json_patch_job(
        self, kind: str, namespace: str, name: str, ops: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """An RFC 6902 JSON patch of the job's spec; a failed ``test`` op comes back as 422."""
        jk = JOB_KINDS[kind]
        return _as_dict(
            self.custom.patch_namespaced_custom_object(
                jk.group, jk.version, namespace, jk.plural, name, ops, _content_type=JSON_PATCH
            )
        )

    def scale_job(self, kind: str, namespace: str, name: str, replicas: int) -> None:
        """Set replicas through the scale subresource (PyTorchJob: the Worker replicas)."""
        jk = JOB_KINDS[kind]
        self.custom.patch_namespaced_custom_object_scale(
            jk.group, jk.version, namespace, jk.plural, name, {"spec": {"replicas": int(replicas)}}
        )

    # ---------------------------------------------------------------------------------- pods
    def list_pod_names(self, namespace: str, label_selector: str) -> list[str]:
        pods = self.core.list_namespaced_pod(namespace, label_selector=label_selector)
        return [
            str(p.metadata.name)
            for p in pods.items
            if p.metadata is not None and p.metadata.name and p.metadata.deletion_timestamp is None
        ]

    def annotate_pod(self, namespace: str, name: str, annotations: Mapping[str, str | None]) -> None:
        self.core.patch_namespaced_pod(
            name, namespace, {"metadata": {"annotations": dict(annotations)}}, _content_type=MERGE_PATCH
        )

    # -------------------------------------------------------------------------------- events
    def create_event(
        self,
        involved: Mapping[str, Any],
        *,
        reason: str,
        message: str,
        warning: bool = False,
        dedupe_key: str | None = None,
    ) -> bool:
        """Post an Event; False when one with the same ``dedupe_key`` exists already. The key (a
        request id and an outcome) names the Event, so the API server refuses the second post
        (409) even from a controller restarted in between. A cluster-scoped object's (no
        namespace) is posted in ``default``, where ``kubectl describe`` looks for a Node's."""
        namespace = str(involved.get("namespace") or "default")
        now = _now_iso()
        suffix = (
            hashlib.sha256(f"{involved.get('uid')}/{dedupe_key}".encode()).hexdigest()[:16]
            if dedupe_key
            else uuid.uuid4().hex[:16]
        )
        body = self._event_model.from_dict(
            {
                "metadata": {"name": f"{str(involved['name'])[:200]}.{suffix}", "namespace": namespace},
                "involvedObject": dict(involved),
                "reason": reason[:128],
                "message": message[:1024],
                "type": "Warning" if warning else "Normal",
                "source": {"component": COMPONENT},
                "reportingComponent": COMPONENT,
                "reportingInstance": self.instance[:128],
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
        )
        if body is None:
            raise ValueError("could not build the Event")
        try:
            self.core.create_namespaced_event(namespace, body)
        except Exception as exc:
            if getattr(exc, "status", None) == 409 and dedupe_key:
                return False
            raise
        return True


def dumps_compact(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), sort_keys=True, allow_nan=False)
