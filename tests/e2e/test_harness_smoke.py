"""Smoke tests proving the e2e harness is the real thing, not a mock.

Each test checks one API-server behaviour that a mock gets wrong and the controller relies on:
optimistic concurrency (409 on a stale resourceVersion), status-subresource isolation, CRD schema
and CEL validation of the upstream TrainJob CRD, watch event delivery, RBAC of the controller's
own ServiceAccount, and Kueue's real admission.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import controlplane as cp
import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

TRAINER = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")
KUEUE_API = "kueue.x-k8s.io/v1beta2"


def trainjob(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "suspend": True, **spec},
    }


def create_trainjob(api: Any, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    objects = client.CustomObjectsApi(api)
    return cast(
        dict[str, Any], objects.create_namespaced_custom_object(*TRAINER[:2], namespace, TRAINER[2], body)
    )


def merge_patch(
    api: Any, namespace: str, name: str, body: dict[str, Any], *, status: bool = False
) -> dict[str, Any]:
    objects = client.CustomObjectsApi(api)
    call = objects.patch_namespaced_custom_object_status if status else objects.patch_namespaced_custom_object
    patched = call(
        *TRAINER[:2], namespace, TRAINER[2], name, body, _content_type="application/merge-patch+json"
    )
    return cast(dict[str, Any], patched)


def api_error(fn: Callable[[], Any]) -> ApiException:
    with pytest.raises(ApiException) as info:
        fn()
    return info.value


def wait_for(check: Callable[[], Any], timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.25)
    raise AssertionError(f"condition not met within {timeout_s}s")


def test_real_apiserver_serves_pinned_version_and_upstream_crds(admin_api: Any) -> None:
    assert client.VersionApi(admin_api).get_code().git_version == cp.KUBERNETES
    served = {
        g.name: {v.version for v in g.versions} for g in client.ApisApi(admin_api).get_api_versions().groups
    }
    assert "v1alpha1" in served["trainer.kubeflow.org"]
    assert "v1beta2" in served["kueue.x-k8s.io"]
    assert "jobset.x-k8s.io" in served
    kinds = {
        r.kind
        for r in client.CustomObjectsApi(admin_api)
        .get_api_resources("trainer.kubeflow.org", "v1alpha1")
        .resources
    }
    assert {"TrainJob", "TrainingRuntime", "ClusterTrainingRuntime"} <= kinds


def test_our_manifests_are_accepted_and_our_crds_served(
    control_plane: cp.ControlPlane, admin_api: Any
) -> None:
    errors = control_plane.manifest_errors
    assert not errors, "manifests/ rejected by kube-apiserver:\n" + "\n".join(e[:600] for e in errors)
    ours = [
        d
        for d in cp.local_manifests(cp.REPO_ROOT / "manifests" / "crds")
        if d.get("kind") == "CustomResourceDefinition"
    ]
    ext = client.ApiextensionsV1Api(admin_api)
    for crd in ours:
        got = ext.read_custom_resource_definition(crd["metadata"]["name"]).to_dict()
        conditions = (got.get("status") or {}).get("conditions") or []
        assert any(c["type"] == "Established" and c["status"] == "True" for c in conditions), crd["metadata"]


def test_merge_patch_with_stale_resource_version_gets_409(admin_api: Any, e2e_namespace: str) -> None:
    created = create_trainjob(admin_api, e2e_namespace, trainjob("conflict"))
    stale = created["metadata"]["resourceVersion"]
    merge_patch(admin_api, e2e_namespace, "conflict", {"metadata": {"labels": {"round": "1"}}})
    err = api_error(
        lambda: merge_patch(
            admin_api,
            e2e_namespace,
            "conflict",
            {"metadata": {"resourceVersion": stale, "labels": {"round": "2"}}},
        )
    )
    assert err.status == 409
    current = merge_patch(admin_api, e2e_namespace, "conflict", {"metadata": {"labels": {"round": "3"}}})
    assert current["metadata"]["labels"]["round"] == "3"


def test_status_patch_does_not_change_spec_and_spec_patch_does_not_change_status(
    admin_api: Any, e2e_namespace: str
) -> None:
    create_trainjob(admin_api, e2e_namespace, trainjob("status"))
    status = {
        "trainerStatus": {
            "progressPercentage": 40,
            "lastUpdatedTime": "2026-11-30T10:00:00Z",
            "metrics": [{"name": "loss", "value": "1.25"}],
        }
    }
    after = merge_patch(
        admin_api, e2e_namespace, "status", {"spec": {"suspend": False}, "status": status}, status=True
    )
    assert after["spec"]["suspend"] is True
    assert after["status"]["trainerStatus"]["metrics"] == [{"name": "loss", "value": "1.25"}]
    after = merge_patch(
        admin_api,
        e2e_namespace,
        "status",
        {"spec": {"suspend": False}, "status": {"trainerStatus": {"progressPercentage": 99}}},
    )
    assert after["spec"]["suspend"] is False
    assert after["status"]["trainerStatus"]["progressPercentage"] == 40


def test_invalid_trainjobs_are_rejected_by_the_upstream_crd_schema(
    admin_api: Any, e2e_namespace: str
) -> None:
    body = trainjob("no-runtime")
    del body["spec"]["runtimeRef"]
    err = api_error(lambda: create_trainjob(admin_api, e2e_namespace, body))
    assert err.status == 422 and "runtimeRef" in str(err.body)

    create_trainjob(admin_api, e2e_namespace, trainjob("valid"))
    err = api_error(
        lambda: merge_patch(
            admin_api,
            e2e_namespace,
            "valid",
            {
                "status": {
                    "trainerStatus": {"progressPercentage": 150, "lastUpdatedTime": "2026-11-30T10:00:00Z"}
                }
            },
            status=True,
        )
    )
    assert err.status == 422 and "progressPercentage" in str(err.body)
    err = api_error(
        lambda: merge_patch(
            admin_api,
            e2e_namespace,
            "valid",
            {"status": {"trainerStatus": {"progressPercentage": 5}}},
            status=True,
        )
    )
    assert err.status == 422 and "lastUpdatedTime is required" in str(err.body)  # a CEL rule
    err = api_error(
        lambda: merge_patch(admin_api, e2e_namespace, "valid", {"spec": {"runtimeRef": {"name": "other"}}})
    )
    assert err.status == 422 and "immutable" in str(err.body)  # a CEL transition rule


def test_watch_from_a_resource_version_delivers_added_modified_deleted(
    admin_api: Any, e2e_namespace: str
) -> None:
    objects = client.CustomObjectsApi(admin_api)
    listed = cast(
        dict[str, Any], objects.list_namespaced_custom_object(*TRAINER[:2], e2e_namespace, TRAINER[2])
    )
    start_rv = listed["metadata"]["resourceVersion"]
    create_trainjob(admin_api, e2e_namespace, trainjob("watched"))
    merge_patch(admin_api, e2e_namespace, "watched", {"metadata": {"labels": {"seen": "yes"}}})
    objects.delete_namespaced_custom_object(*TRAINER[:2], e2e_namespace, TRAINER[2], "watched")

    seen: list[tuple[str, str]] = []
    stream = watch.Watch()
    for event in stream.stream(
        objects.list_namespaced_custom_object,
        *TRAINER[:2],
        e2e_namespace,
        TRAINER[2],
        resource_version=start_rv,
        timeout_seconds=20,
    ):
        seen.append((event["type"], event["object"]["metadata"]["name"]))
        if event["type"] == "DELETED":
            stream.stop()
    assert seen == [("ADDED", "watched"), ("MODIFIED", "watched"), ("DELETED", "watched")]


def test_controller_identity_is_its_service_account_and_rbac_denies_the_rest(
    admin_api: Any, controller_api: Any
) -> None:
    review = (
        client.AuthenticationV1Api(controller_api)
        .create_self_subject_review(
            cast(
                client.V1SelfSubjectReview,
                client.V1SelfSubjectReview.from_dict(
                    {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
                ),
            )
        )
        .to_dict()
    )
    user = review["status"]["user_info"]
    assert (
        user["username"] == f"system:serviceaccount:{cp.CONTROLLER_NAMESPACE}:{cp.CONTROLLER_SERVICE_ACCOUNT}"
    )
    assert "system:serviceaccounts" in user["groups"]
    # Least privilege: the controller never reads Secrets nor grants itself roles.
    err = api_error(lambda: client.CoreV1Api(controller_api).list_secret_for_all_namespaces())
    assert err.status == 403 and "forbidden" in str(err.body).lower()
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "advisor-escalation"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": cp.CONTROLLER_SERVICE_ACCOUNT,
                "namespace": cp.CONTROLLER_NAMESPACE,
            }
        ],
    }
    rbac = client.RbacAuthorizationV1Api(controller_api)
    err = api_error(
        lambda: rbac.create_cluster_role_binding(
            cast(client.V1ClusterRoleBinding, client.V1ClusterRoleBinding.from_dict(binding))
        )
    )
    assert err.status == 403
    client.CoreV1Api(admin_api).list_secret_for_all_namespaces()  # the same request is fine for the admin


@pytest.mark.kueue
def test_kueue_admits_within_quota_and_holds_back_what_does_not_fit(
    control_plane: cp.ControlPlane, admin_api: Any, e2e_namespace: str
) -> None:
    name = f"smoke-{e2e_namespace[-6:]}"
    control_plane.apply(
        [
            {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": name}},
            {
                "apiVersion": KUEUE_API,
                "kind": "ClusterQueue",
                "metadata": {"name": name},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [{"name": name, "resources": [{"name": "cpu", "nominalQuota": "2"}]}],
                        }
                    ],
                },
            },
            {
                "apiVersion": KUEUE_API,
                "kind": "LocalQueue",
                "spec": {"clusterQueue": name},
                "metadata": {"name": "queue", "namespace": e2e_namespace},
            },
        ]
    )
    try:
        for wl, cpu in (("fits", "2"), ("waits", "1")):
            container = {"name": "train", "image": "trainer:latest", "resources": {"requests": {"cpu": cpu}}}
            pod_set = {
                "name": "node",
                "count": 1,
                "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
            }
            control_plane.apply(
                {
                    "apiVersion": KUEUE_API,
                    "kind": "Workload",
                    "metadata": {"name": wl, "namespace": e2e_namespace},
                    "spec": {"queueName": "queue", "podSets": [pod_set]},
                }
            )
            if wl == "fits":
                admitted = wait_for(lambda: _condition(admin_api, e2e_namespace, "fits", "Admitted", "True"))
                assert admitted["reason"] == "Admitted"
        pending = wait_for(lambda: _condition(admin_api, e2e_namespace, "waits", "QuotaReserved", "False"))
        assert pending["reason"] == "Pending" and "insufficient" in pending["message"].lower()
        fits = _workload(admin_api, e2e_namespace, "fits")
        assert fits["status"]["admission"]["clusterQueue"] == name
    finally:
        control_plane.delete_namespace(e2e_namespace)
        control_plane.delete(KUEUE_API, "ClusterQueue", name, wait_s=30)
        control_plane.delete(KUEUE_API, "ResourceFlavor", name, wait_s=30)


def _workload(api: Any, namespace: str, name: str) -> dict[str, Any]:
    got = client.CustomObjectsApi(api).get_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", namespace, "workloads", name
    )
    return cast(dict[str, Any], got)


def _condition(api: Any, namespace: str, name: str, kind: str, status: str) -> dict[str, Any] | None:
    for cond in (_workload(api, namespace, name).get("status") or {}).get("conditions") or []:
        if cond["type"] == kind and cond["status"] == status:
            return dict(cond)
    return None


def test_teardown_leaves_no_process_even_when_the_owner_is_killed(
    control_plane: cp.ControlPlane, tmp_path: Path
) -> None:
    """A second, bare control plane started by a child process that is then SIGKILLed: nothing survives."""
    script = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import controlplane as cp\n"
        "plane = cp.ControlPlane(run_dir=cp.Path(sys.argv[2]), binaries=cp.Binaries("
        "etcd=cp.Path(sys.argv[3]), kube_apiserver=cp.Path(sys.argv[4])))\n"
        "plane._start_core()\n"
        "print(json.dumps({'pids': plane.pids, 'server': plane.server}), flush=True)\n"
        "sys.stdin.read()\n"
    )
    argv = [
        sys.executable,
        "-c",
        script,
        str(Path(cp.__file__).parent),
        str(tmp_path / "run"),
        str(control_plane.binaries.etcd),
        str(control_plane.binaries.kube_apiserver),
    ]
    owner = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        started = json.loads(owner.stdout.readline())
        pids = list(started["pids"].values())
        assert len(pids) == 2 and all(cp.pid_alive(pid) for pid in pids)
    finally:
        owner.kill()
        owner.wait()
    wait_for(lambda: not any(cp.pid_alive(pid) for pid in pids), timeout_s=15)


def test_without_go_every_e2e_test_is_skipped_with_one_line_saying_why(tmp_path: Path) -> None:
    """The laptop case, run for real in a child pytest whose Go toolchain does not exist."""
    env = {**os.environ, "TRAINJOB_ADVISOR_GO": str(tmp_path / "no-go"), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("TRAINJOB_ADVISOR_SKIP_E2E", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            __file__,
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "-k",  # only the tests that need the control plane
            "not without_go and not cached_outside and not conversion_webhooks",
            "--junitxml",
            str(tmp_path / "junit.xml"),
        ],
        capture_output=True,
        text=True,
        cwd=cp.REPO_ROOT,
        env=env,
        timeout=300,
    )
    skip_lines = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert len(skip_lines) == 1, proc.stdout[-2000:]
    assert "no Go toolchain" in skip_lines[0] and "TRAINJOB_ADVISOR_GO" in skip_lines[0]
    assert " passed" not in proc.stdout and " failed" not in proc.stdout


def test_binaries_are_cached_outside_the_checkout_keyed_by_pinned_version(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import k8sbuild

    monkeypatch.setenv("TRAINJOB_ADVISOR_CACHE", str(tmp_path / "cache"))
    path = k8sbuild.binary_path("kube-apiserver")
    assert path.is_relative_to(tmp_path / "cache" / "k8s") and f"-{cp.KUBERNETES}-" in path.parent.name
    binary, _version, work, commands = k8sbuild._RECIPES["kube-apiserver"]
    bumped = [[part.replace(cp.KUBERNETES, "v1.36.4") for part in cmd] for cmd in commands]
    monkeypatch.setitem(k8sbuild._RECIPES, "kube-apiserver", (binary, "v1.36.4", work, bumped))
    assert k8sbuild.binary_path("kube-apiserver").parent != path.parent  # a new pin -> a rebuild
    assert k8sbuild.binary_path("etcd").parent.name.startswith(f"etcd-{cp.ETCD}-")  # others untouched


def test_conversion_webhooks_are_stripped_from_upstream_crds() -> None:
    import k8sbuild

    crd = {
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "workloads.kueue.x-k8s.io"},
        "spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {}}}, "versions": []},
    }
    stripped = k8sbuild.strip_conversion_webhook(crd)
    assert "conversion" not in stripped["spec"] and "conversion" in crd["spec"]
