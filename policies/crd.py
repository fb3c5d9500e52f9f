"""The AdvisorPolicy CRD, generated from the policy model.

``manifests/crds/advisorpolicy.yaml`` is the output of ``crd_manifest()`` (write it with
``trainjob-advisor policy crd > manifests/crds/advisorpolicy.yaml``); a test fails when the two
differ, so the schema the API server enforces is always the one the loader enforces.

Limits of the schema, by design: cross-field rules are CEL ``x-kubernetes-validations`` where CEL
can express them, and the loader alone checks the rest (a policy the API server accepted but the
loader rejects gets an ``Invalid`` condition and applies to nothing).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import yaml

from advisor.model import Mode
from advisor.protocol import CRD_SCHEMA_ANNOTATION, CRD_SCHEMA_GENERATION, GROUP, VERSION
from policies.fields import (
    DURATION_PATTERN,
    MAX_DURATION,
    MAX_ITEMS,
    MAX_STRING,
    ZERO_DURATION_PATTERN,
    FieldSpec,
    field_specs,
)
from policies.loader import KIND, NAME_PATTERN
from policies.spec import PolicySpec

__all__ = ["crd_manifest", "crd_yaml", "json_schema", "object_schema"]

PLURAL = "advisorpolicies"


def _field_schema(spec: FieldSpec) -> dict[str, Any]:
    kind = spec.kind
    out: dict[str, Any]
    if kind == "object":
        assert spec.cls is not None
        out = object_schema(spec.cls)
    elif kind == "objlist":
        assert spec.cls is not None
        out = {"type": "array", "maxItems": MAX_ITEMS, "items": object_schema(spec.cls)}
    elif kind == "strlist":
        item: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": spec.max_length or MAX_STRING}
        if spec.pattern:
            item["pattern"] = spec.pattern
        out = {"type": "array", "maxItems": MAX_ITEMS, "items": item}
    elif kind == "strmap":
        values: dict[str, Any] = {"type": "string", "maxLength": MAX_STRING}
        if spec.enum:
            values = {"type": "string", "enum": list(spec.enum)}
        out = {"type": "object", "maxProperties": MAX_ITEMS, "additionalProperties": values}
    elif kind == "duration":
        # the canonical structural int-or-string form; pattern and minimum apply to their own type
        out = {
            "x-kubernetes-int-or-string": True,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": DURATION_PATTERN,
            "maxLength": MAX_DURATION,
            "minimum": 0,
        }
        if spec.exclusive_minimum:
            out["exclusiveMinimum"] = True
            out["x-kubernetes-validations"] = [
                {
                    "rule": f"type(self) != string || !self.matches('{ZERO_DURATION_PATTERN}')",
                    "message": "must be more than zero",
                }
            ]
    elif kind == "bool":
        out = {"type": "boolean"}
    elif kind in ("int", "float"):
        out = {"type": "integer" if kind == "int" else "number"}
        if spec.minimum is not None:
            out["minimum"] = spec.minimum
            if spec.exclusive_minimum:
                out["exclusiveMinimum"] = True
        if spec.maximum is not None:
            out["maximum"] = spec.maximum
            if spec.exclusive_maximum:
                out["exclusiveMaximum"] = True
    elif kind == "enum":
        out = {"type": "string", "enum": list(spec.enum)}
    else:
        out = {"type": "string"}
        if spec.min_length is not None:
            out["minLength"] = spec.min_length
        out["maxLength"] = spec.max_length if spec.max_length is not None else MAX_STRING
    if kind in ("int", "float") and isinstance(spec.minimum, float) and spec.minimum.is_integer():
        out["minimum"] = int(spec.minimum) if kind == "int" else spec.minimum
    if spec.nullable:
        out["nullable"] = True
    return {"description": spec.doc.strip(), **out} if spec.doc else out


def _server_default(spec: FieldSpec, field: Any) -> dict[str, Any]:
    """``{"default": value}`` for a field the API server fills in (``FieldSpec.server_default``):
    the loader's own default, so that the stored object says what the loader reads."""
    if not spec.server_default:
        return {}
    value = field.default
    assert value is not dataclasses.MISSING, f"{spec.key}: server_default needs a plain default"
    return {"default": value.value if isinstance(value, enum.Enum) else value}


def object_schema(cls: type) -> dict[str, Any]:
    """The OpenAPI v3 (structural) schema of one policy dataclass."""
    props = {spec.key: {**_field_schema(spec), **_server_default(spec, f)} for _, spec, f in field_specs(cls)}
    out: dict[str, Any] = {"type": "object", "properties": props}
    if cls.__doc__:
        out = {"description": " ".join(cls.__doc__.split()), **out}
    required = [spec.key for _, spec, _ in field_specs(cls) if spec.required]
    if required:
        out["required"] = required
    cel = getattr(cls, "CEL", ())
    if cel:
        out["x-kubernetes-validations"] = [{"rule": rule, "message": msg} for rule, msg in cel]
    return out


def _status_schema() -> dict[str, Any]:
    status = _bare_status_schema()
    props = status["properties"]
    figures = (
        "jobsMatched",
        "jobsSelected",
        "actionsTaken",
        "actionsFailed",
        "matchedJobs",
        "actionsByKind",
        "actionsByOutcome",
        "recommendations",
        "actionsHeld",
        "lostTies",
        "gpuHoursFlaggedNonLearning",
        "fromDeletedJobs",
    )
    props["shards"] = {
        "type": "object",
        "description": "The figures (jobsMatched ... fromDeletedJobs) as each controller release wrote "
        "them from the jobs of its namespaces, keyed by its identity (its Lease, namespace/name): "
        "namespace shards each write their own entry, and the figures above are the sums over the "
        "entries. An entry not updated for an hour (a release uninstalled) is dropped.",
        "additionalProperties": {
            "type": "object",
            "properties": {
                **{key: _undescribed(props[key]) for key in figures},
                "updatedAt": {"type": "string", "format": "date-time"},
            },
        },
    }
    return status


def _undescribed(schema: Any) -> Any:
    """A copy of ``schema`` without its descriptions (said once, at the top of the status)."""
    if isinstance(schema, dict):
        return {k: _undescribed(v) for k, v in schema.items() if k != "description"}
    return schema


def _bare_status_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "Written by the controller only.",
        "properties": {
            "observedGeneration": {"type": "integer"},
            "conditions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["type", "status"],
                    "properties": {
                        "type": {"type": "string"},
                        "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                        "reason": {"type": "string"},
                        "message": {"type": "string"},
                        "lastTransitionTime": {"type": "string", "format": "date-time"},
                        "observedGeneration": {"type": "integer"},
                    },
                },
            },
            "effectiveMode": {
                "type": "string",
                "enum": [m.value for m in Mode],
                "description": "The mode the controller evaluates the policy in: Recommend under the "
                "controller's --recommend-only whatever spec.mode says (the RecommendOnly condition "
                "says so), else spec.mode. Absent while nothing of an invalid policy governs.",
            },
            "jobsMatched": {"type": "integer", "minimum": 0},
            "jobsSelected": {
                "type": "integer",
                "minimum": 0,
                "description": "Jobs this policy's selector matches, whichever policy governs them "
                "(jobsMatched counts those it governs). 0: the policy reaches no job, and its JobsSelected "
                "condition says why (a namespace it names that does not exist, say).",
            },
            "actionsTaken": {"type": "integer", "minimum": 0},
            "actionsFailed": {
                "type": "integer",
                "minimum": 0,
                "description": "Of actionsTaken, those the API server refused or that could not be "
                "carried out (outcomes failed and impossible): attempts with no effect.",
            },
            "matchedJobs": {"type": "array", "items": {"type": "string"}},
            "actionsByKind": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
            "actionsByOutcome": {
                "type": "object",
                "description": "actionsTaken split by outcome (done, acknowledged, failed, impossible, ...).",
                "additionalProperties": {"type": "integer", "minimum": 0},
            },
            "recommendations": {"type": "integer", "minimum": 0},
            "actionsHeld": {
                "type": "integer",
                "minimum": 0,
                "description": "Actions of this policy (in Apply) its cooldown or hourly cap held back: "
                "neither taken (actionsTaken) nor recommendations.",
            },
            "lostTies": {
                "type": "object",
                "description": "Jobs this policy selects that another policy governs because it ties "
                "this one on specificity and priority and wins by its mode (Recommend before Apply) or "
                "name, by that policy's name. "
                "Set spec.priority on the policy meant to govern.",
                "additionalProperties": {"type": "integer", "minimum": 0},
            },
            "gpuHoursFlaggedNonLearning": {
                "type": "number",
                "minimum": 0,
                "description": "GPU-hours held by the jobs this policy governs while their state was "
                "plateaued, overfitting, hung or diverging (not learning), kept across restarts.",
            },
            "fromDeletedJobs": {
                "type": "object",
                "description": "The action and recommendation counts of jobs deleted since (included in "
                "actionsTaken, actionsByKind, actionsByOutcome, recommendations and actionsHeld), kept "
                "across restarts.",
                "properties": {
                    "actionsByKind": {
                        "type": "object",
                        "additionalProperties": {"type": "integer", "minimum": 0},
                    },
                    "actionsByOutcome": {
                        "type": "object",
                        "additionalProperties": {"type": "integer", "minimum": 0},
                    },
                    "recommendations": {"type": "integer", "minimum": 0},
                    "actionsHeld": {"type": "integer", "minimum": 0},
                },
            },
            "lastValid": {
                "type": "object",
                "description": "The policy's last valid generation and its spec (as one JSON string), "
                "written by the controller at each new valid generation: an edit that makes the policy "
                "invalid leaves this one in force, across a controller restart too.",
                "properties": {
                    "generation": {"type": "integer"},
                    "spec": {"type": "string"},
                },
            },
            "recentActions": {
                "type": "array",
                "description": "The policy's disruptive actions of the last hour (the newest "
                "maxActionsPerHour), so that the hourly cap survives a controller restart.",
                "items": {
                    "type": "object",
                    "required": ["requestId", "time"],
                    "properties": {
                        "requestId": {"type": "string"},
                        "time": {"type": "number", "description": "Unix seconds (read back)"},
                        "at": {"type": "string", "format": "date-time", "description": "That time, RFC 3339"},
                    },
                },
            },
        },
    }


def crd_manifest() -> dict[str, Any]:
    """The CustomResourceDefinition object for AdvisorPolicy."""
    # a policy without a spec is all defaults, to the loader and, with this default, to the API server
    # (which fills in the spec's own defaulted fields only inside a spec that is there)
    spec_schema = {**object_schema(PolicySpec), "default": {}}
    schema = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec_schema,
            "status": _status_schema(),
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{PLURAL}.{GROUP}",
            "annotations": {CRD_SCHEMA_ANNOTATION: str(CRD_SCHEMA_GENERATION)},
        },
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": "advisorpolicy",
                "shortNames": ["advpol"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Mode", "type": "string", "jsonPath": ".spec.mode"},
                        # what the controller does with it: Recommend under --recommend-only
                        {"name": "Effective", "type": "string", "jsonPath": ".status.effectiveMode"},
                        {"name": "Priority", "type": "integer", "jsonPath": ".spec.priority"},
                        {
                            "name": "Valid",
                            "type": "string",
                            "jsonPath": ".status.conditions[?(@.type=='Valid')].status",
                        },
                        # the jobs its selector picks, and of them those it governs (a more
                        # specific or higher-priority policy governs the others): a policy
                        # outranked on every job it selects read JOBS 0, as a misspelt one does
                        {"name": "Selected", "type": "integer", "jsonPath": ".status.jobsSelected"},
                        {"name": "Jobs", "type": "integer", "jsonPath": ".status.jobsMatched"},
                        {
                            "name": "Actions",
                            "type": "integer",
                            "jsonPath": ".status.actionsTaken",
                            # read as "jobs acted on" by a trial, which counted a release twice
                            "description": "actions the policy attempted, whatever came of them (a "
                            "checkpoint request and the release after it are two; "
                            "status.actionsByOutcome tells done, acknowledged, cancelled and failed apart)",
                        },
                        # of them, attempts with no effect (a 403 from an install without the
                        # act role read as ACTIONS alone)
                        {
                            "name": "Failed",
                            "type": "integer",
                            "jsonPath": ".status.actionsFailed",
                            "description": "those of its actions that failed or were impossible",
                        },
                        # a Recommend-mode policy takes no action: what it advised is its figure
                        {"name": "Recommended", "type": "integer", "jsonPath": ".status.recommendations"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


HEADER = (
    "# Generated from policies/spec.py by `trainjob-advisor policy crd`; do not edit by hand.\n"
    "# tests/policies/test_policy_crd.py fails when this file and the model disagree.\n"
)


def crd_yaml() -> str:
    return HEADER + yaml.safe_dump(crd_manifest(), sort_keys=False, width=110)


def json_schema() -> dict[str, Any]:
    """The CRD's object schema as plain JSON Schema (draft 4), for validating outside a cluster.

    Differences from the API server are made explicit: unknown fields are rejected
    (``kubectl``'s strict field validation), ``metadata.name`` is checked, the
    Kubernetes-only keys (``x-kubernetes-*``, ``nullable``) are dropped, and the one CEL rule JSON
    Schema can say (a duration "more than zero") is translated.
    """

    def convert(node: Any) -> Any:
        if isinstance(node, dict):
            out = {
                k: convert(v)
                for k, v in node.items()
                if not k.startswith("x-kubernetes") and k not in ("nullable", "description")
            }
            if node.get("type") == "object" and "properties" in node:
                out["additionalProperties"] = False
            if node.get("x-kubernetes-int-or-string") and node.get("exclusiveMinimum"):
                out["not"] = {
                    "type": "string",
                    "pattern": ZERO_DURATION_PATTERN,
                }  # the CEL rule, in JSON Schema
            return out
        if isinstance(node, list):
            return [convert(v) for v in node]
        return node

    schema = convert(crd_manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    schema["required"] = ["apiVersion", "kind", "metadata"]
    schema["properties"]["apiVersion"] = {"enum": [f"{GROUP}/{VERSION}"]}
    schema["properties"]["kind"] = {"enum": [KIND]}
    schema["properties"]["metadata"] = {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string", "pattern": NAME_PATTERN, "maxLength": 253}},
    }
    schema["properties"]["status"] = {}
    return schema
