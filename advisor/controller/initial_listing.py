"""The start-up listing of the cluster, queued into the engine before kopf's watches start.

kopf's watches deliver each object one event at a time and say neither when they have delivered
them all nor that there are none, so the controller lists first what a job's first evaluation
needs (its policy, its namespace, its queues and Workload: ``prime``), then which jobs exist
(``list_jobs``), and, before those, the TrainJobForecasts it saved (``list_saved``). A listing of
``prime`` that fails is logged and left to kopf's watch, except the AdvisorPolicies'
(``Engine.policies_unknown``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from advisor.controller.api import ClusterApi
from advisor.controller.engine import Engine
from advisor.controller.jobs import PYTORCHJOB, TRAINJOB
from advisor.controller.kueue import KUEUE_GROUP, KUEUE_VERSION
from advisor.controller.operator_options import OperatorOptions
from advisor.controller.policysync import custom_policies
from advisor.model import job_key

__all__ = ["list_jobs", "list_saved", "prime"]

log = logging.getLogger(__name__)


def prime(engine: Engine, api: ClusterApi, options: OperatorOptions) -> bool:
    """Queue a first listing of policies, namespaces and Kueue objects before any job event, so
    that the first evaluation of a job (and the resumption of an action interrupted by a restart)
    already sees its policy and its Workload. kopf's watches keep them current afterwards. Last,
    which jobs exist (``list_jobs``): the saved statuses of those deleted while no controller ran
    go through the deletion path, and the policies' figures wait for the jobs listed. Returns
    whether the AdvisorPolicies could be listed."""
    custom, kueue_version = api.custom, options.kueue_version or KUEUE_VERSION
    listed = True
    listings: list[tuple[str, Callable[[], Any]]] = [
        ("policy", functools.partial(custom_policies, api)),
        ("namespace", lambda: api.core.list_namespace().to_dict()),
    ]
    if options.watch_kueue and options.save_window_check:
        # before the Workloads: a workload listed before its check is known would not be answered
        # (Kueue sends no further event while it waits on the check)
        listings.append(
            (
                "admissioncheck",
                lambda: custom.list_cluster_custom_object(KUEUE_GROUP, kueue_version, "admissionchecks"),
            )
        )
    if options.watch_kueue:
        listings += [
            (
                "clusterqueue",
                lambda: custom.list_cluster_custom_object(KUEUE_GROUP, kueue_version, "clusterqueues"),
            ),
            (
                "localqueue",
                lambda: custom.list_cluster_custom_object(KUEUE_GROUP, kueue_version, "localqueues"),
            ),
        ]
        if options.namespaces:
            listings += [
                (
                    "workload",
                    functools.partial(
                        custom.list_namespaced_custom_object, KUEUE_GROUP, kueue_version, ns, "workloads"
                    ),
                )
                for ns in options.namespaces
            ]
        else:
            listings.append(
                (
                    "workload",
                    lambda: custom.list_cluster_custom_object(KUEUE_GROUP, kueue_version, "workloads"),
                )
            )
    for kind, fetch in listings:
        try:
            items = fetch().get("items") or []
        except Exception as exc:  # a missing CRD or permission: kopf's watch will tell the rest
            log.warning("initial listing of %s objects failed: %s", kind, getattr(exc, "reason", None) or exc)
            if kind == "policy":
                # until a listing succeeds no job's governing policy is known for sure: the engine
                # acts on none (``Engine.policies_unknown``); ``resync_policies`` tries again
                engine.enqueue("policylisting", "ADDED", {"listed": False})
                listed = False
            continue
        for item in items:
            if kind == "namespace":  # the typed client's dict uses snake_case; only name/labels matter
                meta = item.get("metadata") or {}
                item = {"metadata": {"name": meta.get("name"), "labels": meta.get("labels") or {}}}
            engine.enqueue(kind, "ADDED", item)
        if kind == "namespace":  # every namespace is known now: a policy naming another names none
            engine.enqueue("namespacelisting", "ADDED", {})
    engine.enqueue("joblisting", "ADDED", list_jobs(api, options))
    return listed


def list_jobs(api: ClusterApi, options: OperatorOptions) -> dict[str, Any]:
    """The jobs of the watched kinds that exist now, as the engine's ``joblisting`` event: ``kinds``
    (those listed) and ``jobs`` (``namespace/name`` -> uid). A kind whose listing failed is left
    out (its saved statuses wait for their jobs, as before); with none listed, ``jobs`` is None."""
    kinds = [TRAINJOB, PYTORCHJOB] if options.watch_pytorchjobs else [TRAINJOB]
    listed: list[str] = []
    jobs: dict[str, str | None] = {}
    for jk in kinds:
        try:
            custom: Any = api.custom
            answers = (
                [
                    custom.list_namespaced_custom_object(jk.group, jk.version, ns, jk.plural)
                    for ns in options.namespaces
                ]
                if options.namespaces
                else [custom.list_cluster_custom_object(jk.group, jk.version, jk.plural)]
            )
            items = [item for answer in answers for item in answer.get("items") or []]
        except Exception as exc:
            # a kind not served (no PyTorchJob CRD: the start-up line said so already) has none
            # to list; left out as any failed listing is, without a second warning
            say = log.debug if getattr(exc, "status", None) == 404 else log.warning
            say("initial listing of %s objects failed: %s", jk.kind, getattr(exc, "reason", None) or exc)
            continue
        listed.append(jk.kind)
        for item in items:
            meta = item.get("metadata") or {}
            if meta.get("namespace") and meta.get("name"):
                jobs[job_key(str(meta["namespace"]), str(meta["name"]))] = str(meta.get("uid") or "") or None
    return {"kinds": listed, "jobs": jobs if listed else None}


def list_saved(api: ClusterApi, namespaces: Sequence[str]) -> Sequence[Mapping[str, Any]]:
    """The TrainJobForecasts saved in ``namespaces`` (every namespace: none named)."""
    if not namespaces:
        return api.list_forecasts()
    return [obj for ns in namespaces for obj in api.list_forecasts(ns)]
