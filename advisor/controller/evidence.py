"""Evidence that outlives its jobs: saves on SIGTERM per runtime, kept in a ConfigMap.

Whether a runtime's saves on SIGTERM work is learnt from its jobs' evictions (``advisor.core.saves``)
and sets the prior of every new job on that runtime (``policies.savewindow.miss_probability``).
A job's own counts live in its TrainJobForecast; once the TrainJob is deleted, its forecast goes
with it and its counts live only in the controller's memory (``AdvisorCore.forget``). So they are
also written to one ConfigMap in the controller's own namespace (beside its Lease), read back at
start-up: a restart or a new leader keeps what the deleted jobs taught. The save windows the
deleted jobs measured (a step plus a save, per GPU count: the grace period a new job of the
runtime starts with, ``policies.savewindow.peer_grace``) are kept beside the counts, under a key
of their own (the latest ``advisor.core.runtime_pool.MAX_WINDOWS`` per runtime). Written by the leader
only, when the counts changed, and retried on the next engine step after a failed write; a
missing, unreadable or malformed ConfigMap is no evidence, never an error that stops the
controller.
"""

from __future__ import annotations

import json
import logging
from typing import Any

__all__ = ["CONFIGMAP", "KEY", "WINDOWS_KEY", "EvidenceStore", "evidence_name"]

log = logging.getLogger(__name__)

#: the ConfigMap's name, in the controller's namespace, when it has no Lease to name it after; a
#: controller with one keeps its own (``evidence_name``) and reads this one while it has none
CONFIGMAP = "trainjob-advisor-runtime-evidence"
#: its data key: JSON ``{"runtime": [saves, misses], ...}``
KEY = "sigtermByRuntime"
#: its data key for the save windows: JSON ``{"runtime": [[gpus, step seconds, save seconds], ...]}``
WINDOWS_KEY = "saveWindowsByRuntime"

Counts = dict[str, tuple[int, int]]
Windows = dict[str, list[list[float]]]


def evidence_name(lease: str) -> str:
    """The evidence ConfigMap of the controller that leads ``lease``: namespace shards installed
    side by side (a release each, a Lease each) would otherwise share one and overwrite each
    other's evidence, the last writer winning."""
    return f"{lease}-runtime-evidence"[:253]


class EvidenceStore:
    """Reads and writes the runtime evidence ConfigMap with a typed CoreV1Api. ``legacy``: the
    name an earlier version kept it under, read (never written) while ``name`` does not exist, so
    that an upgrade loses nothing the controller learned."""

    def __init__(
        self, core_v1: Any, namespace: str, name: str = CONFIGMAP, legacy: str | None = None
    ) -> None:
        self.api = core_v1
        self.namespace = namespace
        self.name = name
        self.legacy = legacy if legacy != name else None

    def load(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The stored counts and save windows; {} for what is missing or cannot be read (logged)."""
        for name in (self.name, self.legacy):
            if name is None:
                continue
            found = self._load(name)
            if found is not None:
                return found
        return {}, {}

    def _load(self, name: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """What ConfigMap ``name`` holds; None when it does not exist."""
        try:
            cm = self.api.read_namespaced_config_map(name, self.namespace)
        except Exception as exc:
            if getattr(exc, "status", None) == 404:
                return None
            log.warning(
                "reading ConfigMap %s/%s failed (%s); starting without the runtimes' SIGTERM evidence",
                self.namespace,
                name,
                getattr(exc, "reason", None) or exc,
            )
            return {}, {}
        data = getattr(cm, "data", None) or {}
        return self._object(data, KEY), self._object(data, WINDOWS_KEY)

    def _object(self, data: dict[str, Any], key: str) -> dict[str, Any]:
        raw = data.get(key)
        try:
            parsed = json.loads(raw) if isinstance(raw, str) else {}
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            log.warning("ConfigMap %s/%s: %s is not a JSON object; ignored", self.namespace, self.name, key)
            return {}
        return parsed

    def save(self, evidence: Counts, windows: Windows | None = None) -> bool:
        """Write the counts and the save windows (create the ConfigMap or patch its keys); False on
        failure (logged)."""
        body = {KEY: json.dumps({k: [int(s), int(m)] for k, (s, m) in sorted(evidence.items())})}
        if windows is not None:
            body[WINDOWS_KEY] = json.dumps(dict(sorted(windows.items())))
        try:
            try:
                self.api.patch_namespaced_config_map(self.name, self.namespace, {"data": body})
            except Exception as exc:
                if getattr(exc, "status", None) != 404:
                    raise
                from kubernetes import client

                self.api.create_namespaced_config_map(
                    self.namespace,
                    client.V1ConfigMap(
                        metadata=client.V1ObjectMeta(
                            name=self.name,
                            namespace=self.namespace,
                            labels={"app.kubernetes.io/name": "trainjob-advisor"},
                        ),
                        data=body,
                    ),
                )
        except Exception as exc:
            log.warning(
                "writing ConfigMap %s/%s failed (%s); retried on the next step",
                self.namespace,
                self.name,
                getattr(exc, "reason", None) or exc,
            )
            return False
        return True
