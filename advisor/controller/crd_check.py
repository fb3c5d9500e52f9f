"""Whether the installed CRDs are as new as this controller: Helm never upgrades its ``crds/``.

A ``helm upgrade`` without the documented CRD step left a new controller on the old schemas, and
the API server pruned every status field they lacked without a word (a platform trial): a policy's
last valid generation (``status.lastValid``) went, so an invalid edit and a restart dropped the
policy and cancelled the release it had pending, and the job a status was written for went too.
Each CRD carries its schema generation (``CRD_SCHEMA_ANNOTATION``); the controller reads both at
start, and one older than its own (or none: installed before the annotation) is said in an
ERROR line, with the command that upgrades them, and Apply is held (the controller runs as with
``--recommend-only``) until they are upgraded and it restarts. Forecasts go on: their fields the
old schema lacks are lost, but nothing acts on what cannot be kept. A generation that lacks only
fields for people (at or above ``CRD_SCHEMA_REQUIRED``) is said in a WARNING, and nothing is held:
an upgrade should not stop Apply for a timestamp's format.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from advisor.protocol import CRD_SCHEMA_ANNOTATION, CRD_SCHEMA_GENERATION, CRD_SCHEMA_REQUIRED, GROUP

__all__ = [
    "ADVISOR_CRDS",
    "UPGRADE_COMMAND",
    "Outdated",
    "holds_apply",
    "installed_crd",
    "outdated_crds",
    "outdated_line",
]

ADVISOR_CRDS: tuple[str, ...] = (f"advisorpolicies.{GROUP}", f"trainjobforecasts.{GROUP}")
UPGRADE_COMMAND = "kubectl apply --server-side --force-conflicts -k manifests/crds"


class Outdated(NamedTuple):
    """One installed CRD older than this controller."""

    #: what is out of date, as the log line says it
    phrase: str
    #: the installed generation (None: no annotation, installed before there was one)
    generation: int | None

    @property
    def holds_apply(self) -> bool:
        """Whether it lacks a field whose loss changes what the controller does."""
        return self.generation is None or self.generation < CRD_SCHEMA_REQUIRED


def holds_apply(found: list[Outdated]) -> bool:
    return any(o.holds_apply for o in found)


def outdated_crds(read: Callable[[str], Mapping[str, Any] | None]) -> list[Outdated]:
    """What is out of date, one entry per CRD (empty: both are current). ``read``: a CRD by
    name, None when it is not installed (kopf then waits for it, and says so)."""
    found: list[Outdated] = []
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
            found.append(
                Outdated(f"{name} has no schema generation (installed before {CRD_SCHEMA_GENERATION})", None)
            )
        elif generation < CRD_SCHEMA_GENERATION:
            found.append(Outdated(f"{name} has schema generation {generation}", generation))
    return found


def outdated_line(found: list[Outdated], *, recommend_only: bool) -> str:
    """The log line for ``found`` (``outdated_crds``): an ERROR's when ``holds_apply(found)``,
    else a WARNING's."""
    phrases = "; ".join(o.phrase for o in found)
    head = (
        f"the installed CRDs are older than this controller (schema generation {CRD_SCHEMA_GENERATION}): "
        f"{phrases}."
    )
    upgrade = f"Upgrade them from this release: {UPGRADE_COMMAND}"
    if not holds_apply(found):
        return (
            f"{head} The API server drops the status fields they lack, which are for people only "
            f"(the RFC 3339 time of a policy's recent actions); nothing is held. {upgrade}"
        )
    held = (
        ""
        if recommend_only
        else "; Apply is held (every policy is evaluated as Recommend) until they are upgraded and "
        "the controller restarts"
    )
    return (
        f"{head} The API server drops the status fields they lack (a policy's last valid "
        f"generation among them){held}. {upgrade}"
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
