"""The act component's ValidatingAdmissionPolicies in the chart: named for the release, matching
its ServiceAccount alone, rendered with the writes they hold (``recommendOnly=false``), and only on
a cluster that serves ``admissionregistration.k8s.io/v1`` ValidatingAdmissionPolicy (the e2e tier
installs both paths on a real API server and has them refuse what they should)."""

from __future__ import annotations

from typing import Any

import yaml

from tests.charts.render import MANIFESTS, NAMESPACE, helm_template

SERVED = ("admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",)


def _guards(*sets: str, served: tuple[str, ...] = SERVED) -> dict[str, dict[str, Any]]:
    return {
        f"{d['kind']}/{d['metadata']['name']}": d
        for d in helm_template(*sets, release="tja", api_versions=served)
        if d["kind"].startswith("ValidatingAdmissionPolicy")
    }


def test_the_writes_of_mode_apply_come_with_the_policies_that_hold_them_to_their_fields() -> None:
    found = _guards("recommendOnly=false")
    names = ["tja-trainjob-advisor-pods", "tja-trainjob-advisor-workloads"]
    assert set(found) == {
        f"{k}/{n}" for k in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding") for n in names
    }
    sa = f"system:serviceaccount:{NAMESPACE}:tja-trainjob-advisor"
    source = {
        d["metadata"]["name"]: d
        for d in yaml.safe_load_all((MANIFESTS / "components" / "act" / "field-guard.yaml").read_text())
        if d and d["kind"] == "ValidatingAdmissionPolicy"
    }
    for name in names:
        policy = found[f"ValidatingAdmissionPolicy/{name}"]
        assert policy["spec"]["matchConditions"] == [
            {"name": "by-this-release", "expression": f"request.userInfo.username == '{sa}'"}
        ]
        # the kustomize component's validations, unchanged: one source
        kind = name.rsplit("-", 1)[1]
        assert policy["spec"]["validations"] == source[f"trainjob-advisor-act-{kind}"]["spec"]["validations"]
        assert found[f"ValidatingAdmissionPolicyBinding/{name}"]["spec"] == {
            "policyName": name,
            "validationActions": ["Deny"],
        }


def test_without_the_writes_or_the_kind_there_is_nothing_to_hold() -> None:
    assert _guards() == {}  # recommend-only: no write to hold
    assert _guards("recommendOnly=false", "fieldGuard=false") == {}
    assert _guards("recommendOnly=false", served=()) == {}  # a cluster before 1.30
    # recommend-only with the boost removal it keeps: the Workload policy alone
    boost = _guards("kueue.priorityBoost=true")
    assert set(boost) == {
        "ValidatingAdmissionPolicy/tja-trainjob-advisor-workloads",
        "ValidatingAdmissionPolicyBinding/tja-trainjob-advisor-workloads",
    }
    assert "ValidatingAdmissionPolicy/tja-trainjob-advisor-pods" in _guards(
        "recommendOnly=false", "kueue.enabled=false"
    )
    assert "ValidatingAdmissionPolicy/tja-trainjob-advisor-workloads" not in _guards(
        "recommendOnly=false", "kueue.enabled=false"
    )
