"""What the two install paths deploy, read without a cluster: the chart rendered by ``helm
template`` and the kustomize overlays rendered by ``kubectl kustomize``.

helm and kubectl are the ones the e2e tier builds (``scripts/dev-control-plane build``, cached
outside the checkout), else ones on PATH; without them, the tests that render skip with that reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "trainjob-advisor"
MANIFESTS = ROOT / "manifests"
NAMESPACE = "trainjob-advisor-system"


def _binary(name: str) -> Path | None:
    helpers = str(ROOT / "scripts" / "controlplane")
    if helpers not in sys.path:
        sys.path.insert(0, helpers)
    import k8sbuild

    cached = k8sbuild.binary_path(name)
    if cached.exists():
        return cached
    found = shutil.which(name)
    return Path(found) if found else None


def helm_binary() -> Path | None:
    return _binary("helm")


def _helm(*args: str) -> str:
    out = _run_helm(*args)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    helm = helm_binary()
    if helm is None:
        pytest.skip("no helm: `scripts/dev-control-plane build` builds it (or put one on PATH)")
    with tempfile.TemporaryDirectory() as home:  # helm's cache/config/data dirs, thrown away
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "HELM_CACHE_HOME": f"{home}/cache",
            "HELM_CONFIG_HOME": f"{home}/config",
            "HELM_DATA_HOME": f"{home}/data",
            "KUBECONFIG": f"{home}/no-cluster",  # nothing here talks to a cluster
        }
        return subprocess.run([str(helm), *args], env=env, capture_output=True, text=True, timeout=120)


def _sets(sets: tuple[str, ...]) -> list[str]:
    return [arg for value in sets for arg in ("--set", value)]


def helm_template(
    *sets: str, release: str = "trainjob-advisor", api_versions: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """``helm template`` of the chart with ``--set`` values ``sets``, for a cluster that serves
    ``api_versions`` too (``--api-versions``: helm template asks no cluster); skips when there is
    no helm."""
    served = [arg for v in api_versions for arg in ("--api-versions", v)]
    out = _helm("template", release, str(CHART), "--namespace", NAMESPACE, *served, *_sets(sets))
    return [d for d in yaml.safe_load_all(out) if d]


def helm_template_error(*sets: str, release: str = "trainjob-advisor") -> str:
    """What ``helm template`` says when it refuses ``sets`` (asserts that it does)."""
    out = _run_helm("template", release, str(CHART), "--namespace", NAMESPACE, *_sets(sets))
    assert out.returncode != 0, f"helm accepted {sets}"
    return out.stderr


def helm_notes(*sets: str, release: str = "trainjob-advisor") -> str:
    """The chart's NOTES as ``helm install`` prints them (a client-side dry run: no cluster)."""
    out = _helm("install", release, str(CHART), "--namespace", NAMESPACE, "--dry-run=client", *_sets(sets))
    return out.split("\nNOTES:\n", 1)[1]


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize directory`` (an overlay with its components); skips when there is no kubectl."""
    kubectl = _binary("kubectl")
    if kubectl is None:
        pytest.skip("no kubectl: `scripts/dev-control-plane build` builds it (or put one on PATH)")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tempfile.gettempdir()}
    out = subprocess.run(
        [str(kubectl), "kustomize", str(directory)], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def kustomize_deploy() -> list[dict[str, Any]]:
    """``manifests/deploy``'s objects (the overlays add arguments only)."""
    kust = yaml.safe_load((MANIFESTS / "deploy" / "kustomization.yaml").read_text())
    return [
        d
        for res in kust["resources"]
        for d in yaml.safe_load_all((MANIFESTS / "deploy" / res).read_text())
        if d
    ]


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o.get("kind") == kind]
