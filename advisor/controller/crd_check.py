"""Whether the installed CRDs are as new as this controller: Helm never upgrades its ``crds/``.

A ``helm upgrade`` without the documented CRD step left a new controller on the old schemas, and
the API server pruned every status field they lacked without a word (a platform trial): a policy's
last valid generation (``status.lastValid``) went, so an invalid edit and a restart dropped the
policy and cancelled the release it had pending, and the job a status was written for went too.
Each CRD carries its schema generation (``CRD_SCHEMA_ANNOTATION``); the controller reads both at
start, and one older than its own (or none: installed before the annotation) is said in an
ERROR line, with the command that upgrades them, and Apply is held (the controller runs as with
``--recommend-only``) until they are upgraded and it restarts. Forecasts go on: their fields the
old schema lacks are lost, but nothing acts on what cannot be kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from advisor.protocol import CRD_SCHEMA_ANNOTATION, CRD_SCHEMA_GENERATION, GROUP

__all__ = ["ADVISOR_CRDS", "UPGRADE_COMMAND", "installed_crd", "outdated_crds", "outdated_line"]

ADVISOR_CRDS: tuple[str, ...] = (f"advisorpolicies.{GROUP}", f"trainjobforecasts.{GROUP}")
UPGRADE_COMMAND = "kubectl apply --server-side --force-conflicts -k manifests/crds"


def outdated_crds(read: Callable[[str], Mapping[str, Any] | None]) -> list[str]:
    """What is out of date, one phrase per CRD (empty: both are current). ``read``: a CRD by
    name, None when it is not installed (kopf then waits for it, and says so)."""
    found: list[str] = []
    for name in ADVISOR_CRDS:
        crd = read(name)
        if crd is None:
            continue
        annotations = (crd.get("metadata") or {}).get("annotations") or {}
        raw = annotations.get(CRD_SCHEMA_ANNOTATION)
        try:
            generation = int(str(raw))
        except ValueError:
            generation = None
        if generation is None:
            found.append(f"{name} has no schema generation (installed before {CRD_SCHEMA_GENERATION})")
        elif generation < CRD_SCHEMA_GENERATION:
            found.append(f"{name} has schema generation {generation}")
    return found


def outdated_line(found: list[str], *, recommend_only: bool) -> str:
    """The ERROR line for ``found`` (``outdated_crds``)."""
    held = (
        ""
        if recommend_only
        else "; Apply is held (every policy is evaluated as Recommend) until they are upgraded and "
        "the controller restarts"
    )
    return (
        f"the installed CRDs are older than this controller (schema generation "
        f"{CRD_SCHEMA_GENERATION}): {'; '.join(found)}. The API server drops the status fields "
        f"they lack (a policy's last valid generation among them){held}. Upgrade them from this "
        f"release: {UPGRADE_COMMAND}"
    )


def installed_crd(api_client: Any) -> Callable[[str], Mapping[str, Any] | None]:
    """``read`` for ``outdated_crds`` through the API server: a list by name (the controller's
    role lists and watches CRDs; it does not get them)."""
    from kubernetes import client

    ext = client.ApiextensionsV1Api(api_client)

    def read(name: str) -> Mapping[str, Any] | None:
        items = ext.list_custom_resource_definition(field_selector=f"metadata.name={name}").items or []
        if not items:
            return None
        meta = items[0].metadata
        annotations = dict((meta.annotations if meta is not None else None) or {})
        return {"metadata": {"name": name, "annotations": annotations}}

    return read
