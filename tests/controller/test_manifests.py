"""Our manifests agree with the code: CRD columns, least-privilege RBAC, dashboard metric names."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from advisor.controller import policystatus
from advisor.controller.metrics import Metrics
from advisor.controller.savecheck import CONTROLLER_NAME
from advisor.controller.summary import NOT_LEARNING

ROOT = Path(__file__).resolve().parents[2] / "manifests"


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_printer_columns_are_the_documented_ones() -> None:
    (crd,) = docs(ROOT / "crds" / "trainjobforecast.yaml")
    assert crd["spec"]["names"]["shortNames"] == ["tjf"]
    (version,) = crd["spec"]["versions"]
    cols = [c["name"].upper() for c in version["additionalPrinterColumns"] if not c.get("priority")]
    assert cols == ["JOB", "PROGRESS", "ETA", "LOSS", "PLATEAU", "STATE", "ADVICE", "AGE"]
    assert version["subresources"] == {"status": {}}
    # only the fields the API server declares (a comma in an unquoted flow-style description
    # splits it into a stray key, which the API server rejects)
    allowed = {"name", "type", "jsonPath", "description", "priority", "format"}
    assert all(set(c) <= allowed for c in version["additionalPrinterColumns"])


def test_a_policy_lists_what_it_recommended_beside_what_it_did() -> None:
    """A Recommend-mode policy takes no action: ``kubectl get advisorpolicies`` shows its advice."""
    (crd,) = docs(ROOT / "crds" / "advisorpolicy.yaml")
    (version,) = crd["spec"]["versions"]
    cols = {c["name"].upper(): c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert cols["ACTIONS"] == ".status.actionsTaken"
    assert cols["RECOMMENDED"] == ".status.recommendations"
    assert "recommendations" in version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]


def test_a_policy_shows_its_spec_mode_beside_the_mode_the_controller_evaluates_it_in() -> None:
    """Under ``--recommend-only`` an Apply policy changes no job: EFFECTIVE (``status.effectiveMode``)
    says Recommend beside MODE, which stays what the admin wrote."""
    (crd,) = docs(ROOT / "crds" / "advisorpolicy.yaml")
    (version,) = crd["spec"]["versions"]
    columns = [(c["name"].upper(), c["jsonPath"]) for c in version["additionalPrinterColumns"]]
    assert [name for name, _path in columns] == [
        "MODE", "EFFECTIVE", "PRIORITY", "VALID", "SELECTED", "JOBS", "ACTIONS", "FAILED", "RECOMMENDED",
        "AGE",
    ]  # fmt: skip
    assert columns[:2] == [("MODE", ".spec.mode"), ("EFFECTIVE", ".status.effectiveMode")]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert status["effectiveMode"]["enum"] == ["Recommend", "Apply"]


def test_the_non_learning_gpu_hours_name_every_state_they_count() -> None:
    """The engine counts GPU-hours while a run's state is in ``NOT_LEARNING`` (overfitting
    included): the counter's HELP, the policy status field's description in the CRD and the
    status docstring say so."""
    (family,) = [
        m for m in Metrics().registry.collect() if m.name == "trainjob_advisor_non_learning_gpu_hours"
    ]
    (crd,) = docs(ROOT / "crds" / "advisorpolicy.yaml")
    status = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    (doc,) = [
        part for part in (policystatus.__doc__ or "").split("\n* ") if part.startswith("``gpuHoursFlagged")
    ]
    for where, text in (
        ("HELP", family.documentation),
        ("CRD", status["gpuHoursFlaggedNonLearning"]["description"]),
        ("docstring", " ".join(doc.split())),
    ):
        assert all(state in text for state in NOT_LEARNING), f"{where}: {text}"


def test_rbac_is_least_privilege() -> None:
    (role,) = docs(ROOT / "rbac" / "clusterrole.yaml")
    grants = {
        (g, r): set(rule["verbs"])
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    assert all(not {"delete", "deletecollection", "update", "*"} & v for v in grants.values())
    # the recommend-only role: reads, and the controller's own records (forecasts, policy status,
    # Events); no pod, Workload or job write (manifests/components/act, below)
    assert grants == {
        ("trainer.kubeflow.org", "trainjobs"): {"list", "watch"},  # patch: opt-in component
        ("kubeflow.org", "pytorchjobs"): {"list", "watch"},
        ("kueue.x-k8s.io", "workloads"): {"list", "watch"},
        ("kueue.x-k8s.io", "clusterqueues"): {"list", "watch"},
        ("kueue.x-k8s.io", "localqueues"): {"list", "watch"},
        ("", "namespaces"): {"list", "watch"},
        ("", "events"): {"create"},
        ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
        ("advisor.trainjob-advisor.io", "trainjobforecasts"): {"list", "create"},
        ("advisor.trainjob-advisor.io", "trainjobforecasts/status"): {"patch"},
        ("advisor.trainjob-advisor.io", "advisorpolicies"): {"get", "list", "watch"},
        ("advisor.trainjob-advisor.io", "advisorpolicies/status"): {"patch"},
    }
    # the chart drops a group's rules whole (kueue.enabled=false, pytorchJobs=false)
    assert all(len(rule["apiGroups"]) == 1 for rule in role["rules"])
    act, act_binding = docs(ROOT / "components" / "act" / "act.yaml")
    assert act["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "patch"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "patch"]},
        {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": ["get"]},
        {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs/scale"], "verbs": ["patch"]},
        {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": ["get"]},
    ]
    assert act_binding["roleRef"]["name"] == act["metadata"]["name"]
    assert act_binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "trainjob-advisor", "namespace": "trainjob-advisor-system"}
    ]
    role, binding = docs(ROOT / "rbac" / "leader-election.yaml")
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == "trainjob-advisor-system"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["trainjob-advisor"],
            "verbs": ["get", "update"],
        },
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["trainjob-advisor-runtime-evidence"],
            "verbs": ["get", "patch"],
        },
    ]
    (viewer,) = docs(ROOT / "rbac" / "forecast-viewer.yaml")
    assert viewer["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert [r["verbs"] for r in viewer["rules"]] == [["get", "list", "watch"]]
    resize = docs(ROOT / "components" / "trainjob-resize" / "trainjob-resize.yaml")
    assert resize[0]["rules"] == [
        {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": ["patch"]}
    ]
    grace = docs(ROOT / "components" / "trainjob-grace-period" / "trainjob-grace-period.yaml")
    assert grace[0]["rules"] == [
        {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": ["get", "patch"]}
    ]
    assert grace[1]["roleRef"]["name"] == grace[0]["metadata"]["name"]
    check = docs(ROOT / "components" / "save-window-check" / "save-window-check.yaml")
    assert check[0]["rules"] == [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["admissionchecks"], "verbs": ["list", "watch"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["admissionchecks/status"], "verbs": ["patch"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ]
    assert check[1]["roleRef"]["name"] == check[0]["metadata"]["name"]
    assert check[2]["spec"]["controllerName"] == CONTROLLER_NAME
    kust = yaml.safe_load((ROOT / "components" / "save-window-check" / "kustomization.yaml").read_text())
    assert "--save-window-check" in kust["patches"][0]["patch"]
    (binding,) = docs(ROOT / "rbac" / "clusterrolebinding.yaml")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "trainjob-advisor", "namespace": "trainjob-advisor-system"}
    ]


def _kustomization_resources(directory: Path, seen: set[Path]) -> None:
    """Every resource of a kustomization exists; folders and components are followed (base,
    overlays, components)."""
    kust = yaml.safe_load((directory / "kustomization.yaml").read_text())
    for res in [*kust.get("resources", []), *kust.get("components", [])]:
        path = (directory / res).resolve()
        assert path.exists(), f"{directory}/kustomization.yaml: {res} does not exist"
        if path.is_dir():
            _kustomization_resources(path, seen)
        else:
            seen.add(path)


def test_kustomizations_list_every_manifest_and_deployment_has_probes() -> None:
    for overlay in (ROOT, ROOT / "overlays" / "recommend-only", ROOT / "overlays" / "apply"):
        listed: set[Path] = set()
        _kustomization_resources(overlay, listed)
        # the writes of mode Apply: the apply overlay's only, never the recommend-only install's
        folders = (
            ("namespace", "crds", "rbac", "deploy", "components/act")
            if overlay.name == "apply"
            else ("namespace", "crds", "rbac", "deploy")
        )
        on_disk = {
            p.resolve() for d in folders for p in (ROOT / d).glob("*.yaml") if p.name != "kustomization.yaml"
        }
        assert listed == on_disk, f"{overlay}: not listed {on_disk - listed}, not on disk {listed - on_disk}"
    # the act component (Apply's writes) is the apply overlay's, and no other kustomization's
    for overlay in (ROOT, ROOT / "base", ROOT / "overlays" / "recommend-only", ROOT / "overlays" / "apply"):
        kust = yaml.safe_load((overlay / "kustomization.yaml").read_text())
        acts = [c for c in kust.get("components", []) if c.rstrip("/").endswith("components/act")]
        assert len(acts) == (overlay.name == "apply"), overlay
    (deploy,) = docs(ROOT / "deploy" / "deployment.yaml")
    pod = deploy["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert pod["serviceAccountName"] == "trainjob-advisor"
    assert (
        c["livenessProbe"]["httpGet"]["path"] == "/healthz"
        and c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    )
    assert c["resources"]["requests"] and c["resources"]["limits"]
    # two replicas, exactly one acting: leader election on, a rolling update that adds a standby
    assert deploy["spec"]["replicas"] == 2 and "--leader-elect" in c["args"]
    assert deploy["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert c["livenessProbe"]["httpGet"]["port"] == "metrics"  # answered by a standby too
    (svc,) = docs(ROOT / "deploy" / "service.yaml")
    assert svc["spec"]["selector"] == deploy["spec"]["selector"]["matchLabels"]


def test_dashboard_queries_only_metrics_the_controller_exports() -> None:
    dash = json.loads((ROOT / "dashboards" / "trainjob-advisor.json").read_text())
    exported = {m.name for m in Metrics().registry.collect()}
    used = {
        re.sub(r"_(bucket|total|count|sum)$", "", n)
        for p in dash["panels"]
        for t in p["targets"]
        for n in re.findall(r"trainjob_advisor_\w+", t["expr"])
    }
    assert used and used <= exported | {n + "_total" for n in exported}


def test_the_samples_folder_applies_as_one_set() -> None:
    """``kubectl apply -f manifests/samples/`` must not apply two documents to one object (two
    TrainJobs ``team-a/hf-finetune`` with different trainers: the second is refused as an
    immutable-field change)."""
    seen: dict[tuple[str, str, str], str] = {}
    for path in sorted((ROOT / "samples").glob("*.yaml")):
        for d in docs(path):
            meta = d.get("metadata") or {}
            key = (str(d.get("kind")), str(meta.get("namespace", "")), str(meta.get("name")))
            assert key not in seen, f"{path.name} and {seen[key]} both define {key}"
            seen[key] = path.name


def test_deleting_the_controller_leaves_its_namespace() -> None:
    """A platform trial: the documented kustomize uninstall (``kubectl delete -k manifests/deploy``)
    deleted the whole namespace, the Lease and evidence ConfigMap the docs say stay among what went,
    and the documented move to Helm then failed ("namespace ... is being terminated"). The
    Namespace is its own kustomization, which the base lists; deploy and rbac list none."""
    for folder in ("deploy", "rbac", "components/act"):
        kust = yaml.safe_load((ROOT / folder / "kustomization.yaml").read_text())
        kinds = {d.get("kind") for res in kust.get("resources", []) for d in docs(ROOT / folder / res)}
        assert "Namespace" not in kinds, folder
    (ns,) = docs(ROOT / "namespace" / "namespace.yaml")
    assert ns["kind"] == "Namespace" and ns["metadata"]["name"] == "trainjob-advisor-system"
    base = yaml.safe_load((ROOT / "base" / "kustomization.yaml").read_text())
    assert "../namespace" in base["resources"]
