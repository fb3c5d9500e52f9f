"""One source of truth: the committed CRD is generated from the model, and its schema accepts and
rejects the same policies as the loader (checked with a JSON Schema validator over random input)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.protocol import GROUP, VERSION
from policies import PolicyError, load_policy
from policies.crd import crd_manifest, crd_yaml, json_schema
from policies.fields import field_specs
from policies.spec import CheckpointRule, LabelSelector, PolicySpec, Safety, Selector

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "manifests" / "crds" / "advisorpolicy.yaml"
VALIDATOR = jsonschema.Draft4Validator(json_schema())


def test_committed_crd_is_the_generated_one() -> None:
    assert CRD.read_text() == crd_yaml(), (
        "regenerate: trainjob-advisor policy crd > manifests/crds/advisorpolicy.yaml"
    )


def test_crd_is_cluster_scoped_in_our_group_with_a_status_subresource() -> None:
    crd = yaml.safe_load(CRD.read_text())
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["metadata"]["name"] == "advisorpolicies.advisor.trainjob-advisor.io"
    version = crd["spec"]["versions"][0]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    jsonschema.Draft4Validator.check_schema(json_schema())


def _all_classes(cls: type, seen: set[type] | None = None) -> set[type]:
    seen = seen if seen is not None else set()
    seen.add(cls)
    for _, spec, _ in field_specs(cls):
        if spec.cls is not None and dataclasses.is_dataclass(spec.cls) and spec.cls not in seen:
            _all_classes(spec.cls, seen)
    return seen


def test_every_cross_field_check_is_in_the_crd_as_cel_or_explicitly_loader_only() -> None:
    # int-or-string durations with day units cannot be compared in CEL; label-key syntax over a
    # map's keys is a regex per key, which the API server's CEL cost budget would have to allow for
    # every map size (the controller still marks such a policy Valid=False, and `policy validate`
    # refuses it); a namespace's name is checked by the CRD's items pattern, not by CEL; the exempt
    # label's key syntax is the same label-key check, loader-only as the selectors' keys
    loader_only = {CheckpointRule, LabelSelector, Selector, Safety}
    for cls in _all_classes(PolicySpec):
        if hasattr(cls, "check") and cls not in loader_only:
            assert getattr(cls, "CEL", ()), f"{cls.__name__}.check() has no CEL twin"


# --- random inputs: mostly-valid policies with a few type, range and name errors -----------------

_prob = st.one_of(st.floats(-0.5, 1.5, allow_nan=False), st.sampled_from([0, 1, 1.0, "0.9", True, None]))
_dur = st.one_of(
    st.integers(-10, 10_000),
    st.sampled_from(
        ["30m", "1h30m", "2d", "90s", "0.5h", "0s", "0m0.0s", "1s" * 16, "1s" * 17, "soon", "", 1.5]
    ),
)
_int = st.one_of(st.integers(-3, 40), st.sampled_from([2.5, "3", None, False]))
_bool = st.one_of(st.booleans(), st.sampled_from(["true", 0, None]))
_mode = st.sampled_from(["Recommend", "Apply", "apply", 3])
_action = st.sampled_from(["Recommend", "Release", "Stop", "Delete"])
_names = st.one_of(
    st.lists(st.sampled_from(["a", "team-b", "", 7, "n" * 317, "n" * 318]), max_size=3),
    st.integers(60, 70).map(lambda n: [f"ns{i}" for i in range(n)]),  # around the 64-item bound
)


def _maybe(d: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=d)


_requirement = _maybe(
    {
        "key": st.sampled_from(["tier", ""]),
        "operator": st.sampled_from(["In", "NotIn", "Exists", "Gt"]),
        "values": st.lists(st.sampled_from(["x", "y"]), max_size=2),
    }
)
_selector = _maybe(
    {
        "namespaces": _names,
        "localQueues": _names,
        "clusterQueues": _names,
        "kinds": _names,
        "jobSelector": _maybe(
            {
                "matchLabels": st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["x", 1])),
                "matchExpressions": st.lists(_requirement, max_size=2),
            }
        ),
    }
)
_rules = _maybe(
    {
        "plateau": _maybe({"probability": _prob, "for": _dur, "action": _action, "enabled": _bool}),
        "divergence": _maybe({"probability": _prob, "for": _dur, "nonFinite": _bool, "action": _action}),
        "stall": _maybe({"for": _dur, "checkpointFirst": _bool}),
        "deadline": _maybe(
            {"maxRuntime": _dur, "margin": _dur, "scaleUp": _bool, "annotation": st.sampled_from(["a/b", ""])}
        ),
        "checkpoint": _maybe({"defaultCost": _dur, "defaultHazardPerHour": _prob, "maxInterval": _dur}),
        "preemptionGuard": _maybe({"staleAfter": _dur, "boost": _int}),
        "elastic": _maybe(
            {"minNodes": _int, "maxStep": _int, "minMarginalEfficiency": _prob, "priorSerialFraction": _prob}
        ),
        "quotaRelease": _maybe({"checkpointFirst": _bool, "checkpointTimeout": _dur}),
        "bogus": st.just({}),
    }
)
_spec = _maybe(
    {
        "mode": _mode,
        "priority": _int,
        "selector": _selector,
        "rules": _rules,
        "safety": _maybe(
            {"minProgress": _prob, "minSteps": _int, "cooldown": _dur, "maxActionsPerHour": _int}
        ),
    }
)


def _drop_nulls(node: Any) -> Any:
    """What the API server does before validation: fields set to null are dropped."""
    if isinstance(node, dict):
        return {k: _drop_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_drop_nulls(v) for v in node]
    return node


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=_spec, name=st.sampled_from(["ok-name", "Bad_Name"]))
def test_schema_and_loader_accept_and_reject_the_same_policies(spec: dict[str, Any], name: str) -> None:
    obj = {
        "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
        "kind": "AdvisorPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }
    schema_ok = VALIDATOR.is_valid(_drop_nulls(obj))
    try:
        load_policy(obj)
        loader_ok = True
    except PolicyError:
        loader_ok = False
    # CEL rules (requirement values vs operator; min <= max) are not JSON Schema: where they are
    # the only problem, the loader rejects and a plain JSON Schema validator cannot.
    if schema_ok and not loader_ok:
        try:
            load_policy(obj)
        except PolicyError as exc:
            assert all(_cel_only(path) for path, _ in exc.errors), exc.errors
        return
    assert schema_ok == loader_ok, (obj, list(VALIDATOR.iter_errors(_drop_nulls(obj))))


def _cel_only(path: str) -> bool:
    return path.endswith(".values") or path.endswith("minNodes") or path.endswith("minInterval")


def test_the_schema_generator_covers_every_field() -> None:
    props = crd_manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"
    ]
    assert set(props) == {spec.key for _, spec, _ in field_specs(PolicySpec)}
    rules = props["rules"]["properties"]
    assert rules["plateau"]["properties"]["probability"] == {
        "description": "Plateau probability threshold.",
        "type": "number",
        "minimum": 0.0,
        "exclusiveMinimum": True,
        "maximum": 1.0,
    }


def _server_defaulted(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` as the API server stores it: each absent property with a ``default`` gets it,
    then the same inside every property (the structural-schema defaulting of custom resources)."""
    if not isinstance(value, dict):
        return value
    props = schema.get("properties", {})
    out = {k: v for k, v in value.items()}
    for key, prop in props.items():
        if key not in out and "default" in prop:
            out[key] = prop["default"]
    return {k: _server_defaulted(v, props[k]) if k in props else v for k, v in out.items()}


def test_a_printer_column_of_the_spec_shows_what_the_loader_reads_when_the_field_is_left_out() -> None:
    """``kubectl get advisorpolicies`` reads the stored object: a spec field the loader defaults
    is stored with that default (MODE Recommend, PRIORITY 0), not shown blank."""
    (version,) = yaml.safe_load(CRD.read_text())["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    shown = [c["jsonPath"].removeprefix(".spec.") for c in version["additionalPrinterColumns"]]
    shown = [key for key in shown if not key.startswith(".")]
    assert sorted(shown) == ["mode", "priority"]
    for spec in (None, {}, {"selector": {"namespaces": ["team-a"]}}, {"priority": 5}, {"mode": "Apply"}):
        obj = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "AdvisorPolicy", "metadata": {"name": "p"}}
        obj = obj if spec is None else {**obj, "spec": spec}
        stored = _server_defaulted(obj, schema)
        loaded = load_policy(obj).spec
        assert stored["spec"]["mode"] == loaded.mode.value, spec
        assert stored["spec"]["priority"] == loaded.priority, spec
        assert load_policy(stored).spec == loaded  # the defaults change nothing the loader reads


def test_a_namespace_no_namespace_can_have_is_refused_by_the_loader_and_the_crd() -> None:
    """``Team_B!`` matches nothing, silently: both the loader and the API server refuse it."""
    body = {
        "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
        "kind": "AdvisorPolicy",
        "metadata": {"name": "ns"},
        "spec": {"selector": {"namespaces": ["team-b", "Team_B!"]}, "rules": {"plateau": {"for": "10m"}}},
    }
    with pytest.raises(PolicyError, match=r"namespaces\[1\].*'Team_B!' is not a namespace name"):
        load_policy(body)
    items = json_schema()["properties"]["spec"]["properties"]["selector"]["properties"]["namespaces"]["items"]
    assert items["maxLength"] == 63 and re.match(items["pattern"], "team-b")
    assert not re.match(items["pattern"], "Team_B!")
