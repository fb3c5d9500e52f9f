"""The AdvisorPolicy CRD, served by a real kube-apiserver, and the Python loader agree.

manifests/crds/advisorpolicy.yaml is generated from the model in policies/ (policies/crd.py), and
``policies.load_policy`` validates the same model in Python (the CLI, the simulator and the
controller's own check). Here the real API server decides: every sample policy in
manifests/samples/ is accepted as written (strict field validation, nothing pruned; the server
fills in only the defaults the printer columns show, ``mode`` and ``priority``), and invalid
policies are rejected with HTTP 422 by the OpenAPI schema and its CEL rules, naming the field. The
loader must reject the same inputs naming the same field, and accept what the server accepts, so
that ``kubectl apply`` and ``trainjob-advisor policy check`` never disagree.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import controlplane as cp
import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from policies import PolicyError, load_policy

GROUP, VERSION, PLURAL = "advisor.trainjob-advisor.io", "v1alpha1", "advisorpolicies"
API_VERSION = f"{GROUP}/{VERSION}"
CRD_PATH = cp.REPO_ROOT / "manifests" / "crds" / "advisorpolicy.yaml"
SAMPLES = sorted((cp.REPO_ROOT / "manifests" / "samples").glob("policy-*.yaml"))


def _crd_spec_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD_PATH.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == VERSION]
    return cast(dict[str, Any], version["schema"]["openAPIV3Schema"]["properties"]["spec"])


MAX_NAMESPACES = _crd_spec_schema()["properties"]["selector"]["properties"]["namespaces"]["maxItems"]
#: what the server fills into a spec that leaves it out (the fields the printer columns show)
SPEC_DEFAULTS = {k: p["default"] for k, p in _crd_spec_schema()["properties"].items() if "default" in p}


def policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "AdvisorPolicy", "metadata": {"name": name}, "spec": spec}


@dataclass(frozen=True)
class Invalid:
    """A policy spec both validators must reject, the field they must name, and the server's words."""

    id: str
    spec: dict[str, Any]
    field: str
    server_says: str


INVALID = [
    Invalid(
        "plateau-probability-out-of-range",
        {"rules": {"plateau": {"probability": 1.5, "for": "45m"}}},
        "spec.rules.plateau.probability",
        "less than or equal to 1",
    ),
    Invalid(
        "stall-for-zero",  # the CEL rule: a zero duration string passes the pattern
        {"rules": {"stall": {"for": "0s", "action": "Release"}}},
        "spec.rules.stall.for",
        "must be more than zero",
    ),
    Invalid(
        "match-expression-in-without-values",  # the CEL rule on each matchExpressions entry
        {"selector": {"jobSelector": {"matchExpressions": [{"key": "workload-type", "operator": "In"}]}}},
        "spec.selector.jobSelector.matchExpressions[0]",
        "values must be non-empty",
    ),
    Invalid(
        "too-many-namespaces",
        {"selector": {"namespaces": [f"team-{i}" for i in range(MAX_NAMESPACES + 1)]}},
        "spec.selector.namespaces",
        f"must have at most {MAX_NAMESPACES} items",
    ),
]


@pytest.fixture
def policies_api(admin_api: Any) -> Iterator[tuple[client.CustomObjectsApi, Callable[[str], str]]]:
    """The CustomObjectsApi and a name maker; every policy named by it is deleted afterwards."""
    objects = client.CustomObjectsApi(admin_api)
    names: list[str] = []
    suffix = uuid.uuid4().hex[:6]

    def name(stem: str) -> str:
        names.append(f"{stem}-{suffix}")
        return names[-1]

    yield objects, name
    for created in names:
        try:
            objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, created)
        except ApiException as exc:
            if exc.status != 404:
                raise


def create(
    objects: client.CustomObjectsApi, body: dict[str, Any], *, dry_run: bool = False
) -> dict[str, Any]:
    created = objects.create_cluster_custom_object(
        GROUP, VERSION, PLURAL, body, field_validation="Strict", dry_run="All" if dry_run else None
    )
    return cast(dict[str, Any], created)


def rejection(fn: Callable[[], Any]) -> tuple[int, str]:
    with pytest.raises(ApiException) as info:
        fn()
    body = info.value.body
    try:
        message = json.loads(body)["message"]
    except (TypeError, ValueError, KeyError):
        message = str(body)
    return int(info.value.status), str(message)


def loader_paths(body: dict[str, Any]) -> list[str]:
    with pytest.raises(PolicyError) as info:
        load_policy(body)
    return [path for path, _ in info.value.errors]


def names_field(paths: list[str], field: str) -> bool:
    """The loader names ``field`` itself or a field inside it (the server names the CEL rule's object)."""
    return any(p == field or p.startswith((f"{field}.", f"{field}[")) for p in paths)


def test_the_crd_is_cluster_scoped_and_served_under_the_expected_names(admin_api: Any) -> None:
    crd = client.ApiextensionsV1Api(admin_api).read_custom_resource_definition(f"{PLURAL}.{GROUP}")
    assert crd.spec.scope == "Cluster" and crd.spec.group == GROUP
    assert crd.spec.names.plural == PLURAL and crd.spec.names.kind == "AdvisorPolicy"
    assert [v.name for v in crd.spec.versions if v.served and v.storage] == [VERSION]


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: Path(p).stem)
def test_every_sample_policy_is_accepted_as_written(
    policies_api: tuple[client.CustomObjectsApi, Callable[[str], str]], sample: Path
) -> None:
    objects, name = policies_api
    docs = [d for d in yaml.safe_load_all(sample.read_text()) if d is not None]
    assert docs, sample
    for doc in docs:  # a sample file may hold several policies (one per kind of workload)
        load_policy(doc)  # the loader accepts it too
        body = {**doc, "metadata": {**doc["metadata"], "name": name(doc["metadata"]["name"])}}
        created = create(objects, body)
        assert created["metadata"]["name"] == body["metadata"]["name"]
        assert "namespace" not in created["metadata"]  # cluster-scoped
        stored = {**SPEC_DEFAULTS, **doc["spec"]}  # the sample's own mode and priority win
        assert created["spec"] == stored, "the server pruned part of the sample or defaulted another field"
        got = objects.get_cluster_custom_object(GROUP, VERSION, PLURAL, body["metadata"]["name"])
        assert cast(dict[str, Any], got)["spec"] == stored


def test_samples_exist() -> None:
    assert len(SAMPLES) >= 4, SAMPLES


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.id)
def test_invalid_policies_are_rejected_with_422_naming_the_field(
    policies_api: tuple[client.CustomObjectsApi, Callable[[str], str]], case: Invalid
) -> None:
    objects, name = policies_api
    body = policy(name(case.id[:40]), case.spec)
    status, message = rejection(lambda: create(objects, body))
    assert status == 422, message
    assert case.field in message, message
    assert case.server_says in message, message
    status, message = rejection(lambda: create(objects, body, dry_run=True))
    assert status == 422 and case.field in message, message  # a dry run gets the same answer


def test_the_loader_rejects_the_same_inputs_naming_the_same_field() -> None:
    """No control plane needed: the Python half of the agreement (runs wherever the model runs)."""
    for case in INVALID:
        paths = loader_paths(policy("agreement", case.spec))
        assert names_field(paths, case.field), (case.id, paths)


def test_the_invalid_cases_differ_from_a_valid_policy_only_in_the_bad_field() -> None:
    """Guards the cases above: fixing the one bad value makes each policy load."""
    fixed = {
        "plateau-probability-out-of-range": {"rules": {"plateau": {"probability": 0.9, "for": "45m"}}},
        "stall-for-zero": {"rules": {"stall": {"for": "30m", "action": "Release"}}},
        "match-expression-in-without-values": {
            "selector": {
                "jobSelector": {
                    "matchExpressions": [{"key": "workload-type", "operator": "In", "values": ["sft"]}]
                }
            }
        },
        "too-many-namespaces": {"selector": {"namespaces": [f"team-{i}" for i in range(MAX_NAMESPACES)]}},
    }
    assert set(fixed) == {c.id for c in INVALID}
    for spec in fixed.values():
        load_policy(policy("fixed", spec))


# Near the edges of the schema: the server's verdict and the loader's must be the same.
EDGES: list[tuple[str, dict[str, Any]]] = [
    ("stall-for-zero-integer", {"rules": {"stall": {"for": 0}}}),
    ("stall-for-zero-compound", {"rules": {"stall": {"for": "0m0s"}}}),
    ("stall-for-zero-decimal", {"rules": {"stall": {"for": "0.0h"}}}),
    ("stall-for-half-second", {"rules": {"stall": {"for": "0.5s"}}}),
    ("stall-for-one-second-integer", {"rules": {"stall": {"for": 1}}}),
    ("duration-without-unit", {"rules": {"plateau": {"for": "90"}}}),
    ("duration-negative", {"rules": {"plateau": {"for": -1}}}),
    ("duration-float", {"rules": {"plateau": {"for": 1.5}}}),
    ("duration-compound", {"rules": {"plateau": {"for": "1h30m"}}}),
    ("plateau-probability-zero", {"rules": {"plateau": {"probability": 0}}}),
    ("plateau-probability-one", {"rules": {"plateau": {"probability": 1}}}),
    (
        "namespace-selector-in-without-values",
        {"selector": {"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In"}]}}},
    ),
    (
        "match-expression-notin-empty-values",
        {
            "selector": {
                "jobSelector": {"matchExpressions": [{"key": "t", "operator": "NotIn", "values": []}]}
            }
        },
    ),
    (
        "match-expression-exists-with-values",
        {
            "selector": {
                "jobSelector": {"matchExpressions": [{"key": "t", "operator": "Exists", "values": ["a"]}]}
            }
        },
    ),
    (
        "match-expression-exists",
        {"selector": {"jobSelector": {"matchExpressions": [{"key": "t", "operator": "Exists"}]}}},
    ),
    ("namespaces-at-the-limit", {"selector": {"namespaces": [f"n{i}" for i in range(MAX_NAMESPACES)]}}),
    ("empty-namespace-name", {"selector": {"namespaces": [""]}}),
    ("elastic-min-above-max", {"rules": {"elastic": {"minNodes": 4, "maxNodes": 2}}}),
    ("elastic-min-equals-max", {"rules": {"elastic": {"minNodes": 2, "maxNodes": 2}}}),
    ("elastic-null-min", {"rules": {"elastic": {"minNodes": None, "maxNodes": 2}}}),
    ("deadline-null-max-runtime", {"rules": {"deadline": {"maxRuntime": None}}}),
    ("serial-fraction-one", {"rules": {"elastic": {"priorSerialFraction": 1.0}}}),
    ("unknown-mode", {"mode": "Enforce"}),
    ("misspelt-field", {"rules": {"plateau": {"probabilty": 0.9}}}),
    ("priority-beyond-int32", {"priority": 2**31}),
    ("max-actions-zero", {"safety": {"maxActionsPerHour": 0}}),
]


@pytest.mark.parametrize(("edge", "spec"), EDGES, ids=[e for e, _ in EDGES])
def test_server_and_loader_agree_near_the_edges(
    policies_api: tuple[client.CustomObjectsApi, Callable[[str], str]], edge: str, spec: dict[str, Any]
) -> None:
    objects, name = policies_api
    body = policy(name(edge[:40]), spec)
    try:
        create(objects, body, dry_run=True)
        server: str | None = None
    except ApiException as exc:
        assert exc.status in (400, 422), exc.body
        server = str(exc.body)
    try:
        load_policy(body)
        loader: str | None = None
    except PolicyError as exc:
        loader = str(exc)
    assert (server is None) == (loader is None), (
        f"server: {server or 'accepted'}\nloader: {loader or 'accepted'}"
    )
