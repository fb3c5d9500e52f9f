"""Both install paths (kustomize overlays, the Helm chart), rendered by the real tools and sent to
the real API server; a Helm install, upgrade and uninstall that keep users' objects.

Rendering is by ``kubectl kustomize`` and ``helm template`` built from their Go modules; every
rendered object goes through the API server's server-side apply in dry-run (schema, admission,
RBAC escalation checks) because the session's control plane already holds our CRDs and the
controller's identity, which other tests use. The Helm release uses its own names, so it is
installed, upgraded and uninstalled for real.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import controlplane as cp
import pytest
import yaml
from install_tools import CHART, MANIFESTS, OVERLAYS, Tools, by_kind, container
from kubernetes import client

GROUP, VERSION = "advisor.trainjob-advisor.io", "v1alpha1"
NS = cp.CONTROLLER_NAMESPACE
#: every value of the chart away from its default, except the ServiceMonitor (its own test installs its CRD)
ALL_OPTIONS = {
    "image": {"repository": "registry.example/advisor", "tag": "dev"},
    "watchNamespaces": ["team-a", "team-b"],
    "recommendOnly": False,
    "kueue": {"enabled": True, "priorityBoost": True},
    "pytorchJobs": False,
    "logLevel": "debug",
    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}},
}


@pytest.fixture(scope="module")
def tools(control_plane: cp.ControlPlane) -> Tools:
    return Tools.of(control_plane)


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_each_kustomize_overlay_renders_and_the_api_server_accepts_it(tools: Tools, overlay: str) -> None:
    objects = tools.kustomize(OVERLAYS[overlay])
    assert {o["kind"] for o in objects} >= {
        "Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
        "Deployment", "Service",
    }  # fmt: skip
    args = container(objects)["args"]
    assert ("--recommend-only" in args) is (overlay != "overlays/apply")
    out = tools.server_side_dry_run(objects)
    assert out.count("(server dry run)") == len(objects), out


@pytest.mark.parametrize(
    ("values", "flags"),
    [
        ({}, {"--all-namespaces", "--recommend-only"}),
        (ALL_OPTIONS, {"--namespace=team-a", "--namespace=team-b", "--priority-boost", "--no-pytorchjobs"}),
        ({"kueue": {"enabled": False, "priorityBoost": True}}, {"--no-kueue"}),
    ],
)
def test_the_chart_renders_its_values_and_the_api_server_accepts_it(
    tools: Tools, values: dict[str, Any], flags: set[str]
) -> None:
    objects = tools.helm_template(values, namespace=NS)
    for ns in values.get("watchNamespaces") or []:  # its RoleBindings live there: they must exist
        tools.run("kubectl", "create", "namespace", ns, check=False)
    args = set(container(objects)["args"])
    assert flags <= args
    assert ("--recommend-only" in args) is values.get("recommendOnly", True)
    assert ("--priority-boost" in args) is (flags >= {"--priority-boost"})
    if values:
        assert container(objects)["image"] == "registry.example/advisor:dev" or "image" not in values
    out = tools.server_side_dry_run(objects)
    assert out.count("(server dry run)") == len(objects), out


def test_the_grace_period_rbac_is_the_kustomize_components_on_request(tools: Tools) -> None:
    path = MANIFESTS / "components" / "trainjob-grace-period" / "trainjob-grace-period.yaml"
    component = list(yaml.safe_load_all(path.read_text()))

    def controller_role(values: dict[str, Any]) -> dict[str, Any]:
        roles = by_kind(tools.helm_template(values, namespace=NS), "ClusterRole")
        (role,) = [r for r in roles if any("workloads" in rule["resources"] for rule in r["rules"])]
        return role

    # the opt-ins are Apply's writes: granted with recommendOnly=false only
    applying = {"recommendOnly": False}
    plain = controller_role(applying)
    granted = controller_role({**applying, "rbac": {"trainJobGracePeriod": True}})
    assert granted["rules"] == plain["rules"] + component[0]["rules"]
    assert controller_role({"rbac": {"trainJobGracePeriod": True}}) == controller_role({})
    resize = list(
        yaml.safe_load_all(
            (MANIFESTS / "components" / "trainjob-resize" / "trainjob-resize.yaml").read_text()
        )
    )
    resized = controller_role({**applying, "rbac": {"trainJobResize": True}})
    assert resized["rules"] == plain["rules"] + resize[0]["rules"]
    assert not [r for r in plain["rules"] if "patch" in r["verbs"] and "trainjobs" in r["resources"]]
    out = tools.server_side_dry_run(
        by_kind(
            tools.helm_template({**applying, "rbac": {"trainJobGracePeriod": True}}, namespace=NS),
            "ClusterRole",
        )
    )
    assert "(server dry run)" in out, out


def test_with_watch_namespaces_the_writes_are_granted_in_those_namespaces_only(tools: Tools) -> None:
    """A controller told to watch team-a and team-b must not be able to patch pods or Workloads in
    kube-system: its writes to namespaced objects come from a RoleBinding per watched namespace;
    its reads and its writes to cluster-scoped objects stay cluster-wide. Each release gets its own
    Lease (two namespace shards in one namespace must not stand one another by)."""
    writes = {"patch", "create", "update", "delete"}
    cluster_scoped = {"advisorpolicies", "advisorpolicies/status", "clusterqueues", "namespaces"}
    cluster_scoped |= {"customresourcedefinitions", "admissionchecks", "admissionchecks/status"}
    values = {
        "watchNamespaces": ["team-a", "team-b"],
        "recommendOnly": False,
        "rbac": {"trainJobGracePeriod": True},
    }
    objects = tools.helm_template(values, release="shard-a", namespace=NS)
    bound = {b["roleRef"]["name"] for b in by_kind(objects, "ClusterRoleBinding")}
    for role in by_kind(objects, "ClusterRole"):
        if role["metadata"]["name"] in bound:
            for rule in role["rules"]:
                namespaced = set(rule["resources"]) - cluster_scoped
                assert not (namespaced and writes & set(rule["verbs"])), rule
    bindings = [b for b in by_kind(objects, "RoleBinding") if b["roleRef"]["kind"] == "ClusterRole"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    (granted,) = {b["roleRef"]["name"] for b in bindings}
    (role,) = [r for r in by_kind(objects, "ClusterRole") if r["metadata"]["name"] == granted]
    patched = {res for rule in role["rules"] if "patch" in rule["verbs"] for res in rule["resources"]}
    assert {"pods", "workloads", "trainjobs", "trainjobforecasts/status"} <= patched
    # every rule of the cluster-wide install is still granted somewhere
    plain = by_kind(
        tools.helm_template({"recommendOnly": False, "rbac": {"trainJobGracePeriod": True}}, namespace=NS),
        "ClusterRole",
    )
    every = {
        (g, r, v)
        for o in plain
        for rule in o["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    split = {
        (g, r, v)
        for o in by_kind(objects, "ClusterRole")
        for rule in o["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert every == split
    assert "--leader-election-id=shard-a-trainjob-advisor" in container(objects)["args"]
    assert "--leader-election-id=trainjob-advisor" in container(tools.helm_template(namespace=NS))["args"]
    out = tools.server_side_dry_run(
        [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    )
    assert "(server dry run)" in out, out


def test_the_save_window_check_is_the_kustomize_components_on_request(tools: Tools) -> None:
    path = MANIFESTS / "components" / "save-window-check" / "save-window-check.yaml"
    component = list(yaml.safe_load_all(path.read_text()))
    plain = tools.helm_template({}, namespace=NS)
    checked = tools.helm_template({"kueue": {"saveWindowCheck": True}}, namespace=NS)
    assert "--save-window-check" not in container(plain)["args"]
    assert "--save-window-check" in container(checked)["args"]
    assert not by_kind(plain, "AdmissionCheck")
    (check,) = by_kind(checked, "AdmissionCheck")
    assert check["spec"] == component[2]["spec"]

    def rules(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        roles = by_kind(objects, "ClusterRole")
        (role,) = [r for r in roles if any("workloads" in rule["resources"] for rule in r["rules"])]
        return list(role["rules"])

    assert rules(checked) == rules(plain) + component[0]["rules"]
    out = tools.server_side_dry_run([*by_kind(checked, "ClusterRole"), check])
    assert out.count("(server dry run)") == 1 + len(by_kind(checked, "ClusterRole")), out


def test_the_service_monitor_is_rendered_on_request_and_accepted_by_prometheus_operators_crd(
    tools: Tools, control_plane: cp.ControlPlane
) -> None:
    """The ServiceMonitor and the alerts (PrometheusRule), each on request, accepted by
    prometheus-operator's CRDs."""
    assert not by_kind(tools.helm_template(namespace=NS), "ServiceMonitor")
    assert not by_kind(tools.helm_template(namespace=NS), "PrometheusRule")
    objects = tools.helm_template(
        {"metrics": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}}, namespace=NS
    )
    (monitor,) = by_kind(objects, "ServiceMonitor")
    (rule,) = by_kind(objects, "PrometheusRule")
    (service,) = by_kind(objects, "Service")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [p["name"] for p in service["spec"]["ports"]]
    try:
        crds = [cp.service_monitor_crd(cp.find_go()), cp.prometheus_rule_crd(cp.find_go())]
    except cp.HarnessError as exc:  # the module proxy refused prometheus-operator's module
        pytest.skip(f"no prometheus-operator CRDs to check against: {exc}")
    control_plane.apply(crds)  # a cluster with prometheus-operator installed
    try:
        out = tools.server_side_dry_run(objects)
        assert out.count("(server dry run)") == len(objects), out
        assert f"servicemonitor.monitoring.coreos.com/{monitor['metadata']['name']}" in out, out
        assert f"prometheusrule.monitoring.coreos.com/{rule['metadata']['name']}" in out, out
    finally:
        for crd in crds:
            control_plane.delete(
                "apiextensions.k8s.io/v1", "CustomResourceDefinition", crd["metadata"]["name"]
            )


def test_the_chart_and_the_kustomize_install_deploy_the_same_controller(tools: Tools) -> None:
    """Same rules, image, arguments, probes and security; a drift between the two paths fails here."""
    kustomized = tools.kustomize(MANIFESTS)
    charted = tools.helm_template(namespace=NS)
    assert {o["kind"] for o in kustomized} - {"Namespace"} == {o["kind"] for o in charted}
    for kind in ("ClusterRole", "Role"):
        rules = sorted(str(o["rules"]) for o in by_kind(kustomized, kind))
        assert rules == sorted(str(o["rules"]) for o in by_kind(charted, kind)), kind

    def grants(objects: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
        return {
            (g, r, v)
            for o in by_kind(objects, "ClusterRole")
            for rule in o["rules"]
            for g in rule["apiGroups"]
            for r in rule["resources"]
            for v in rule["verbs"]
        }

    # Apply: the overlay's act component, the chart's recommendOnly=false (one ClusterRole there)
    applying = tools.helm_template({"recommendOnly": False}, namespace=NS)
    assert grants(tools.kustomize(OVERLAYS["overlays/apply"])) == grants(applying)
    acting = {("", "pods", "patch"), ("kueue.x-k8s.io", "workloads", "patch")}
    assert grants(applying) - grants(charted) >= acting
    (ours_deploy,), (their_deploy,) = by_kind(kustomized, "Deployment"), by_kind(charted, "Deployment")
    for key in ("replicas", "strategy"):  # two replicas under leader election, rolled one at a time
        assert ours_deploy["spec"][key] == their_deploy["spec"][key], key
    # on different nodes where they can be, and drained one at a time
    spread = [
        d["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"] for d in (ours_deploy, their_deploy)
    ]
    assert [
        a["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]["topologyKey"]
        for a in spread
    ] == ["kubernetes.io/hostname"] * 2
    assert [o["spec"]["maxUnavailable"] for o in by_kind(kustomized + charted, "PodDisruptionBudget")] == [
        1,
        1,
    ]
    ours, theirs = container(kustomized), container(charted)
    for key in ("image", "args", "ports", "livenessProbe", "readinessProbe", "resources", "securityContext"):
        assert ours[key] == theirs[key], key
    assert sorted(ours["env"], key=str) == sorted(theirs["env"], key=str)
    crds = {o["metadata"]["name"]: o for o in by_kind(kustomized, "CustomResourceDefinition")}
    assert crds == {o["metadata"]["name"]: o for o in by_kind(charted, "CustomResourceDefinition")}
    (chart,) = [yaml.safe_load((CHART / "Chart.yaml").read_text())]
    assert ours["image"].endswith(f":{chart['appVersion']}")


@pytest.fixture
def release(tools: Tools, control_plane: cp.ControlPlane) -> Iterator[tuple[str, str]]:
    name, namespace = f"tja-{uuid.uuid4().hex[:6]}", f"tja-helm-{uuid.uuid4().hex[:6]}"
    yield name, namespace
    tools.run("helm", "uninstall", name, "--namespace", namespace, check=False)
    control_plane.delete_namespace(namespace)


def test_helm_install_upgrade_and_uninstall_keep_every_users_object(
    tools: Tools, release: tuple[str, str], admin_api: Any, e2e_namespace: str
) -> None:
    from test_controller_scenarios import Cluster

    name, namespace = release
    custom = client.CustomObjectsApi(admin_api)
    tools.release("install", name, namespace, "--create-namespace")
    deployment = client.AppsV1Api(admin_api).read_namespaced_deployment(f"{name}-trainjob-advisor", namespace)
    assert "--recommend-only" in deployment.spec.template.spec.containers[0].args

    users = Cluster(admin_api, e2e_namespace)
    job = users.create_trainjob("llm")
    policy = next(yaml.safe_load_all((MANIFESTS / "samples" / "policy-plateau-release.yaml").read_text()))
    policy["metadata"] = {"name": f"upgrade-{uuid.uuid4().hex[:6]}"}
    custom.create_cluster_custom_object(GROUP, VERSION, "advisorpolicies", policy)
    forecast = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainJobForecast",
        "metadata": {"name": "llm", "namespace": e2e_namespace},
        "spec": {
            "jobRef": {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "llm"}
        },
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, e2e_namespace, "trainjobforecasts", forecast)

    def snapshot() -> tuple[Any, ...]:
        tj = custom.get_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", e2e_namespace, "trainjobs", "llm"
        )
        tjf = custom.get_namespaced_custom_object(GROUP, VERSION, e2e_namespace, "trainjobforecasts", "llm")
        pol = custom.get_cluster_custom_object(GROUP, VERSION, "advisorpolicies", policy["metadata"]["name"])
        return (
            (tj["metadata"]["resourceVersion"], tj["spec"], tj["metadata"].get("finalizers")),
            (tjf["metadata"]["resourceVersion"], tjf.get("spec")),
            (pol["metadata"]["resourceVersion"], pol["spec"]),
        )

    before = snapshot()
    assert before[0][0] == job["metadata"]["resourceVersion"] and before[0][2] is None

    # upgrade: the CRDs first (Helm leaves crds/ alone on upgrade), then the release with new values
    tools.run("kubectl", "apply", "--server-side", "--force-conflicts", "-k", str(MANIFESTS / "crds"))
    new_values = {"recommendOnly": False, "kueue": {"priorityBoost": True}}
    tools.release("upgrade", name, namespace, values=new_values)
    upgraded = client.AppsV1Api(admin_api).read_namespaced_deployment(f"{name}-trainjob-advisor", namespace)
    args = upgraded.spec.template.spec.containers[0].args
    assert "--recommend-only" not in args and "--priority-boost" in args
    assert snapshot() == before
    # with the writes, the policies that hold them to their fields, for this release's identity
    admission = client.AdmissionregistrationV1Api(admin_api)
    sa = f"system:serviceaccount:{namespace}:{name}-trainjob-advisor"
    for kind in ("pods", "workloads"):
        vap = admission.read_validating_admission_policy(f"{name}-trainjob-advisor-{kind}")
        assert [c.expression for c in vap.spec.match_conditions] == [f"request.userInfo.username == '{sa}'"]
        binding = admission.read_validating_admission_policy_binding(f"{name}-trainjob-advisor-{kind}")
        assert binding.spec.policy_name == vap.metadata.name and binding.spec.validation_actions == ["Deny"]
    ext = client.ApiextensionsV1Api(admin_api)
    for crd in ("trainjobforecasts", "advisorpolicies"):
        served = ext.read_custom_resource_definition(f"{crd}.{GROUP}")
        stored = set(served.status.stored_versions or [])
        assert stored <= {v.name for v in served.spec.versions if v.served}, crd

    tools.release("uninstall", name, namespace)
    assert not client.AppsV1Api(admin_api).list_namespaced_deployment(namespace).items
    assert not [
        p.metadata.name
        for p in admission.list_validating_admission_policy().items
        if p.metadata.name.startswith(f"{name}-")
    ]
    assert snapshot() == before  # TrainJob, forecast and policy untouched; the CRDs stay
    custom.delete_cluster_custom_object(GROUP, VERSION, "advisorpolicies", policy["metadata"]["name"])


def test_kubectl_finds_the_advisor_plugin_installed_with_the_package(tools: Tools, tmp_path: Any) -> None:
    import subprocess
    import sys
    from pathlib import Path

    bin_dir = Path(sys.executable).parent  # where pip put kubectl-advisor with the package
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(tools.kubeconfig)}

    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(tools.kubectl), *args], capture_output=True, text=True, env=env, timeout=120
        )

    listed = kubectl("plugin", "list")
    assert f"{bin_dir}/kubectl-advisor" in listed.stdout, listed.stdout + listed.stderr
    status = kubectl("advisor", "status", "-A", "-o", "json")
    assert status.returncode == 0, status.stderr
    assert isinstance(yaml.safe_load(status.stdout), list | dict)
    missing = kubectl("advisor", "explain", "no-such-job", "-n", "default")
    assert missing.returncode == 2 and "default/no-such-job" in missing.stderr
