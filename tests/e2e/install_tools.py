"""kubectl and helm, Go-built like the control plane, driving our two install paths.

Why: `kubectl apply -k` and `helm install` are how a platform team installs the advisor, so
the e2e tier renders both with the real tools (``kubectl kustomize``, ``helm template``) and
sends what they render to the real API server, instead of trusting YAML that only looks right.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import controlplane as cp
import yaml

CHART = cp.REPO_ROOT / "charts" / "trainjob-advisor"
MANIFESTS = cp.REPO_ROOT / "manifests"
OVERLAYS = {
    "manifests/": MANIFESTS,
    "overlays/recommend-only": MANIFESTS / "overlays" / "recommend-only",
    "overlays/apply": MANIFESTS / "overlays" / "apply",
}


@dataclass(frozen=True)
class Tools:
    kubectl: Path
    helm: Path
    kubeconfig: Path
    run_dir: Path

    @classmethod
    def of(cls, plane: cp.ControlPlane) -> Tools:
        bins = plane.binaries
        if bins.kubectl is None or bins.helm is None:
            missing = "; ".join(bins.tool_errors.values()) or "kubectl/helm were not built"
            raise cp.HarnessError(f"the install tests need kubectl and helm: {missing}")
        return cls(bins.kubectl, bins.helm, plane.admin_kubeconfig, plane.run_dir)

    def run(self, tool: str, *args: str, stdin: str | None = None, check: bool = True) -> str:
        binary = self.kubectl if tool == "kubectl" else self.helm
        env = {
            "HOME": str(self.run_dir),  # helm's cache/config/data dirs, kept inside the run folder
            "PATH": "/usr/bin:/bin",
            "KUBECONFIG": str(self.kubeconfig),
            "HELM_CACHE_HOME": str(self.run_dir / "helm" / "cache"),
            "HELM_CONFIG_HOME": str(self.run_dir / "helm" / "config"),
            "HELM_DATA_HOME": str(self.run_dir / "helm" / "data"),
        }
        proc = subprocess.run(
            [str(binary), *args], input=stdin, capture_output=True, text=True, env=env, timeout=180
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"`{tool} {' '.join(args)}` failed ({proc.returncode}): {proc.stderr[-2000:]}"
            )
        return proc.stdout

    def kustomize(self, directory: Path) -> list[dict[str, Any]]:
        return docs(self.run("kubectl", "kustomize", str(directory)))

    def helm_template(
        self, values: Mapping[str, Any] | None = None, *, release: str = "trainjob-advisor", namespace: str
    ) -> list[dict[str, Any]]:
        args = ["template", release, str(CHART), "--namespace", namespace, "--include-crds"]
        return docs(self.run("helm", *args, *self._values(values, release)))

    def _values(self, values: Mapping[str, Any] | None, name: str) -> list[str]:
        if not values:
            return []
        path = self.run_dir / f"values-{name}-{abs(hash(json.dumps(values, sort_keys=True)))}.json"
        path.write_text(json.dumps(values))
        return ["--values", str(path)]

    def release(
        self, verb: str, release: str, namespace: str, *args: str, values: Mapping[str, Any] | None = None
    ) -> str:
        chart = [str(CHART)] if verb in ("install", "upgrade") else []
        return self.run(
            "helm", verb, release, *chart, "--namespace", namespace, *args, *self._values(values, release)
        )

    def server_side_dry_run(self, objects: Sequence[Mapping[str, Any]]) -> str:
        """Every object through the API server's admission and schema validation, nothing stored."""
        return self.run(
            "kubectl",
            "apply",
            "--server-side",
            "--force-conflicts",
            "--dry-run=server",
            "--field-manager=trainjob-advisor-install-test",
            "-f",
            "-",
            stdin=yaml.safe_dump_all(list(objects)),
        )


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]


def by_kind(objects: Sequence[Mapping[str, Any]], kind: str) -> list[Mapping[str, Any]]:
    return [o for o in objects if o.get("kind") == kind]


def container(objects: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    (deployment,) = by_kind(objects, "Deployment")
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    return only
