"""Building the control plane's binaries from Go modules, and finding the upstream CRDs.

Why: no package ships kube-apiserver, so it (and etcd, Kueue's minimalkueue, kubectl) is built
from the Go module proxy once, in throw-away wrapper modules, and cached outside the checkout:
a fresh clone (CI) reuses the binaries, and only a change of the pins below rebuilds the one
binary it affects. The upstream CRDs (Kubeflow Trainer, JobSet, Kueue) are read from the Go
module cache at setup time, never committed. Used by tests/e2e/controlplane.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# ---------------------------------------------------------------------------------------------
# Pins: the one place the versions live. Changing one rebuilds only the binary it affects.
# ---------------------------------------------------------------------------------------------
KUBERNETES = "v1.36.3"  # k8s.io/kubernetes (kube-apiserver, kubectl)
STAGING = "v0.36.3"  # the published twin of every k8s.io/* staging module of KUBERNETES
ETCD = "v3.6.8"  # go.etcd.io/etcd/server/v3, the version KUBERNETES itself pins
KUEUE = "v0.19.2"  # sigs.k8s.io/kueue (minimalkueue + CRDs)
TRAINER = "v2.3.0"  # github.com/kubeflow/trainer/v2 (CRDs; the opt-in trainer-controller-manager)
JOBSET = "v0.12.0"  # sigs.k8s.io/jobset (CRD only), the version KUEUE pins
HELM = "v4.3.2"  # helm.sh/helm/v4 (renders charts/ in the e2e tier)
# The compatibility plane (tests/e2e/test_compat.py): the clusters people have besides the newest.
TRAINER_PREVIOUS = "v2.2.1"  # Trainer 2.2: the first with status.trainerStatus
KUEUE_V1BETA1 = "v0.14.0"  # the last Kueue whose CRDs serve v1beta1 only
TRAINING_OPERATOR = "v1.9.2"  # github.com/kubeflow/training-operator: the PyTorchJob CRD (Trainer v1)
# The chart's optional ServiceMonitor (metrics.serviceMonitor.enabled) needs prometheus-operator's CRD.
PROMETHEUS_OPERATOR = "v0.86.1"  # github.com/prometheus-operator/prometheus-operator (CRD only)
MIN_GO = (1, 26)  # Kueue >= v0.18 and k8s 1.36 declare `go 1.26.0`

CONTROLLER_NAMESPACE = "trainjob-advisor-system"
CONTROLLER_SERVICE_ACCOUNT = "trainjob-advisor"
FIELD_MANAGER = "trainjob-advisor-e2e"

REPO_ROOT = Path(__file__).resolve().parents[2]
LOG: Callable[[str], None] = lambda msg: print(f"[control-plane] {msg}", file=sys.stderr, flush=True)  # noqa: E731


class Unavailable(RuntimeError):
    """The machine cannot build the control plane (no Go toolchain, too old, no openssl): skip, never fake."""


class HarnessError(RuntimeError):
    """Building or starting failed on a machine that should be able to: a real failure, with the evidence."""


def cache_root() -> Path:
    """Where binaries and the dev cluster live: outside the checkout, shared by every clone."""
    explicit = os.environ.get("TRAINJOB_ADVISOR_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "trainjob-advisor"


# ---------------------------------------------------------------------------------------------
# Go toolchain and builds
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Go:
    path: str
    version: str  # "go1.26.8"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-buildvcs=false", GOWORK="off")
        return env


def find_go() -> Go:
    """TRAINJOB_ADVISOR_GO, else `go` on PATH, else /usr/local/go; or Unavailable saying why not."""
    explicit = os.environ.get("TRAINJOB_ADVISOR_GO")
    candidates = [explicit] if explicit else [shutil.which("go"), "/usr/local/go/bin/go"]
    path = next((c for c in candidates if c and os.access(c, os.X_OK)), None)
    if path is None:
        where = f"TRAINJOB_ADVISOR_GO={explicit} is not executable" if explicit else "not on PATH"
        raise Unavailable(f"no Go toolchain ({where}); Go >= 1.26 builds kube-apiserver, etcd and Kueue")
    try:
        out = subprocess.run(
            [path, "env", "GOVERSION"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "GOTOOLCHAIN": "local"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"Go at {path} does not run: {exc}") from exc
    version = out.stdout.strip()
    match = re.match(r"go(\d+)\.(\d+)", version)
    if out.returncode != 0 or not match:
        raise Unavailable(f"Go at {path} did not report its version: {out.stderr.strip()[:200]}")
    if (int(match.group(1)), int(match.group(2))) < MIN_GO:
        raise Unavailable(f"Go {version} at {path} is older than go{MIN_GO[0]}.{MIN_GO[1]}")
    if shutil.which("openssl") is None:
        raise Unavailable("openssl not found (needed to generate the control plane's certificates)")
    return Go(path, version)


def _version_ldflags(kind: str) -> str:
    major, minor = KUBERNETES.lstrip("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    return (
        f"-s -w -X {pkg}.gitVersion={KUBERNETES} -X {pkg}.gitMajor={major} -X {pkg}.gitMinor={minor}"
        f" -X {pkg}.gitTreeState=clean -X {pkg}.buildDate=1970-01-01T00:00:00Z"
        if kind == "k8s"
        else "-s -w"
    )


_TRAINER_MANAGER = "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"

# name -> (binary, version, workdir key, build commands; "{out}" is the output path)
_RECIPES: dict[str, tuple[str, str, str, list[list[str]]]] = {
    "etcd": (
        "etcd",
        ETCD,
        f"etcd-{ETCD}",
        [
            ["go", "get", f"go.etcd.io/etcd/server/v3@{ETCD}"],
            ["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", "{out}", "go.etcd.io/etcd/server/v3"],
        ],
    ),
    "kube-apiserver": (
        "kube-apiserver",
        KUBERNETES,
        f"kubernetes-{KUBERNETES}-{STAGING}",
        [
            ["go", "get", f"k8s.io/kubernetes/cmd/kube-apiserver@{KUBERNETES}"],
            [
                "go",
                "build",
                "-trimpath",
                "-pgo=off",
                "-ldflags",
                _version_ldflags("k8s"),
                "-o",
                "{out}",
                "k8s.io/kubernetes/cmd/kube-apiserver",
            ],
        ],
    ),
    "kubectl": (
        "kubectl",
        KUBERNETES,
        f"kubernetes-{KUBERNETES}-{STAGING}",
        [
            ["go", "get", f"k8s.io/kubernetes/cmd/kubectl@{KUBERNETES}"],
            [
                "go",
                "build",
                "-trimpath",
                "-pgo=off",
                "-ldflags",
                _version_ldflags("k8s"),
                "-o",
                "{out}",
                "k8s.io/kubernetes/cmd/kubectl",
            ],
        ],
    ),
    # Its own wrapper module (helm pins its own k8s.io/* versions); version stamped like helm's Makefile.
    "helm": (
        "helm",
        HELM,
        f"helm-{HELM}",
        [
            ["go", "get", "-tool", f"helm.sh/helm/v4/cmd/helm@{HELM}"],
            [
                "go",
                "build",
                "-trimpath",
                "-ldflags",
                f"-s -w -X helm.sh/helm/v4/internal/version.version={HELM}",
                "-o",
                "{out}",
                "helm.sh/helm/v4/cmd/helm",
            ],
        ],
    ),
    # Kubeflow Trainer's controller manager (its status server is the real progress pipeline):
    # opt-in (tests/e2e/test_trainer_pipeline.py), its own wrapper module like Kueue's.
    "trainer-controller-manager": (
        "trainer-controller-manager",
        TRAINER,
        f"trainer-{TRAINER}",
        [
            ["go", "get", "-tool", f"{_TRAINER_MANAGER}@{TRAINER}"],
            [
                "go",
                "build",
                "-trimpath",
                "-ldflags",
                "-s -w",
                "-o",
                "{out}",
                _TRAINER_MANAGER,
            ],
        ],
    ),
    # Its own wrapper module: MVS would otherwise couple Kueue's k8s.io/* versions to kube-apiserver's.
    "minimalkueue": (
        "minimalkueue",
        KUEUE,
        f"kueue-{KUEUE}",
        [
            ["go", "get", "-tool", f"sigs.k8s.io/kueue/test/performance/scheduler/minimalkueue@{KUEUE}"],
            [
                "go",
                "build",
                "-trimpath",
                "-ldflags",
                "-s -w",
                "-o",
                "{out}",
                "sigs.k8s.io/kueue/test/performance/scheduler/minimalkueue",
            ],
        ],
    ),
}


def _recipe_key(name: str) -> str:
    binary, version, work, commands = _RECIPES[name]
    digest = hashlib.sha256(
        json.dumps([binary, version, work, commands, STAGING, MIN_GO]).encode()
    ).hexdigest()
    return f"{name}-{version}-{digest[:10]}"


def binary_path(name: str) -> Path:
    return cache_root() / "k8s" / _recipe_key(name) / _RECIPES[name][0]


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    lock_path = cache_root() / "k8s" / ".build.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            LOG("another process is building the control plane binaries; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run_logged(cmd: Sequence[str], *, cwd: Path, env: Mapping[str, str], log_file: Path) -> None:
    with open(log_file, "a") as log:
        log.write(f"\n$ (cd {cwd}; {' '.join(cmd)})\n")
        log.flush()
        proc = subprocess.run(list(cmd), cwd=cwd, env=dict(env), stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = log_file.read_text(errors="replace").splitlines()[-25:]
        raise HarnessError(
            f"`{' '.join(cmd)}` failed (exit {proc.returncode}) in {cwd}; full log: {log_file}\n"
            + "\n".join(tail)
        )


def _prepare_wrapper(go: Go, name: str, workdir: Path, log_file: Path) -> None:
    """A throw-away module; for k8s.io/kubernetes, every staging module replaced by its published twin."""
    if (workdir / ".ready").exists():
        return
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    env = go.env()
    _run_logged(
        [go.path, "mod", "init", f"local/{workdir.name.split('-')[0]}-build"],
        cwd=workdir,
        env=env,
        log_file=log_file,
    )
    _run_logged(
        [go.path, "mod", "edit", f"-go={MIN_GO[0]}.{MIN_GO[1]}.0"], cwd=workdir, env=env, log_file=log_file
    )
    if name in ("kube-apiserver", "kubectl"):
        gomod = Path(module_info(go, "k8s.io/kubernetes", KUBERNETES, log_file)["GoMod"]).read_text()
        # k/k requires its staging modules at v0.0.0 and replaces them with ./staging/...: neither resolves.
        staging = sorted(
            set(re.findall(r"^\s*(k8s\.io/[\w.-]+) v0\.0\.0\s*$", gomod, re.M))
            | set(re.findall(r"^\s*(k8s\.io/[\w.-]+) => \./staging/", gomod, re.M))
        )
        if not staging:
            raise HarnessError(f"found no staging modules in k8s.io/kubernetes@{KUBERNETES} go.mod")
        edits = [f"-replace={mod}={mod}@{STAGING}" for mod in staging]
        _run_logged([go.path, "mod", "edit", *edits], cwd=workdir, env=env, log_file=log_file)
    (workdir / ".ready").touch()


#: modules the checksum database served here has no entry for (its lookup answers 404): their
#: go.sum line cannot be verified, only the proxy's TLS vouches for them. Only CRD files are read
#: from them, as test fixtures; nothing is built from them.
NOT_IN_SUMDB = ("github.com/prometheus-operator/prometheus-operator",)


def module_info(go: Go, module: str, version: str, log_file: Path | None = None) -> dict[str, Any]:
    """`go mod download -json module@version`: downloads into the module cache, returns Dir/GoMod."""
    env = go.env()
    if module in NOT_IN_SUMDB:
        env["GONOSUMDB"] = ",".join(filter(None, [env.get("GONOSUMDB"), module]))
    proc = subprocess.run(
        [go.path, "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    try:
        info: dict[str, Any] = json.loads(proc.stdout or "{}")
    except json.JSONDecodeError:
        info = {}
    if proc.returncode != 0 or info.get("Error") or "Dir" not in info:
        detail = info.get("Error") or proc.stderr.strip()[-400:]
        raise HarnessError(f"`go mod download {module}@{version}` failed: {detail}")
    if log_file is not None:
        with open(log_file, "a") as log:
            log.write(f"module {module}@{version}: {info['Dir']}\n")
    return info


def ensure_binary(go: Go, name: str) -> Path:
    """The cached binary, built first if missing (under a lock, so two processes never build at once)."""
    target = binary_path(name)
    if target.exists():
        return target
    with _build_lock():
        if target.exists():  # built by whoever held the lock before us
            return target
        binary, version, work, commands = _RECIPES[name]
        base = cache_root() / "k8s"
        workdir, log_dir = base / "work" / work, base / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        log_file = log_dir / f"{_recipe_key(name)}.log"
        log_file.write_text(f"{go.version} building {name} {version}\n")
        LOG(f"building {name} {version} with {go.version} (first run only; log: {log_file})")
        started = time.monotonic()
        _prepare_wrapper(go, name, workdir, log_file)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{binary}.partial")
        env = go.env()
        nice = ["nice", "-n", "10"] if shutil.which("nice") else []
        for cmd in commands:
            argv = [go.path if part == "go" else part.replace("{out}", str(partial)) for part in cmd]
            _run_logged(nice + argv if argv[1] == "build" else argv, cwd=workdir, env=env, log_file=log_file)
        os.replace(partial, target)
        seconds = time.monotonic() - started
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        info = {
            "name": name,
            "version": version,
            "go": go.version,
            "seconds": round(seconds, 1),
            "peak_rss_mib_of_largest_process_so_far": round(peak_kib / 1024),
            "built_at": time.time(),
        }
        (target.parent / "build-info.json").write_text(json.dumps(info, indent=1) + "\n")
        LOG(f"built {name} in {seconds:.0f}s -> {target}")
        return target


@dataclass
class Binaries:
    etcd: Path
    kube_apiserver: Path
    minimalkueue: Path | None = None
    kueue_error: str | None = None
    kubectl: Path | None = None
    helm: Path | None = None
    #: Kubeflow Trainer's manager: built on request only (``build --trainer``), else used when cached
    trainer_manager: Path | None = None
    #: why kubectl, helm or the Trainer manager is missing (their tests fail with it; the rest runs)
    tool_errors: dict[str, str] = field(default_factory=dict)


def ensure_binaries(
    go: Go, *, kueue: bool = True, kubectl: bool = False, helm: bool = False, trainer: bool = False
) -> Binaries:
    """etcd and kube-apiserver are required (HarnessError on failure); Kueue, kubectl, helm and the
    Trainer manager: best effort. A tool not asked for is still offered when it is already cached."""
    bins = Binaries(etcd=ensure_binary(go, "etcd"), kube_apiserver=ensure_binary(go, "kube-apiserver"))
    if kueue:
        try:
            bins.minimalkueue = ensure_binary(go, "minimalkueue")
        except HarnessError as exc:
            bins.kueue_error = f"minimalkueue {KUEUE} did not build: {str(exc).splitlines()[0]}"
            LOG(bins.kueue_error)
    for name, attr, wanted in (
        ("kubectl", "kubectl", kubectl),
        ("helm", "helm", helm),
        ("trainer-controller-manager", "trainer_manager", trainer),
    ):
        if not wanted and binary_path(name).exists():
            setattr(bins, attr, binary_path(name))  # built earlier: free to offer
        elif wanted:
            try:
                setattr(bins, attr, ensure_binary(go, name))
            except HarnessError as exc:
                bins.tool_errors[name] = f"{name} did not build: {str(exc).splitlines()[0]}"
                LOG(bins.tool_errors[name])
    return bins


# ---------------------------------------------------------------------------------------------
# Upstream CRDs, read from the Go module cache at setup
# ---------------------------------------------------------------------------------------------
def load_yaml_docs(path: Path) -> list[dict[str, Any]]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path) as handle:
        return [doc for doc in yaml.load_all(handle, Loader=loader) if isinstance(doc, dict)]


def upstream_crds(go: Go) -> list[dict[str, Any]]:
    """TrainJob/TrainingRuntime/ClusterTrainingRuntime, JobSet and the 11 Kueue CRDs, webhook-free."""
    return module_crds(
        go,
        [
            ("github.com/kubeflow/trainer/v2", TRAINER, "manifests/base/crds", "*.yaml"),
            ("sigs.k8s.io/jobset", JOBSET, "config/components/crd/bases", "*.yaml"),
            ("sigs.k8s.io/kueue", KUEUE, "config/components/crd/bases", "*.yaml"),
        ],
    )


def compat_crds(go: Go) -> list[dict[str, Any]]:
    """Trainer 2.2's TrainJob CRDs, Kueue's v1beta1-only CRDs and the training-operator's PyTorchJob."""
    crd_dir = "manifests/base/crds"
    return module_crds(
        go,
        [
            ("github.com/kubeflow/trainer/v2", TRAINER_PREVIOUS, crd_dir, "*.yaml"),
            ("sigs.k8s.io/kueue", KUEUE_V1BETA1, "config/components/crd/bases", "*.yaml"),
            ("github.com/kubeflow/training-operator", TRAINING_OPERATOR, crd_dir, "*_pytorchjobs.yaml"),
        ],
    )


def service_monitor_crd(go: Go) -> dict[str, Any]:
    """prometheus-operator's ServiceMonitor CRD, for the chart's optional ServiceMonitor."""
    return _prometheus_operator_crd(go, "servicemonitors")


def prometheus_rule_crd(go: Go) -> dict[str, Any]:
    """prometheus-operator's PrometheusRule CRD, for the chart's optional alerts."""
    return _prometheus_operator_crd(go, "prometheusrules")


def _prometheus_operator_crd(go: Go, plural: str) -> dict[str, Any]:
    (crd,) = module_crds(
        go,
        [
            (
                "github.com/prometheus-operator/prometheus-operator",
                PROMETHEUS_OPERATOR,
                "example/prometheus-operator-crd",
                f"monitoring.coreos.com_{plural}.yaml",
            )
        ],
    )
    return crd


def module_crds(go: Go, sources: list[tuple[str, str, str, str]]) -> list[dict[str, Any]]:
    """The CRDs in the files matching each (module, version, folder, glob), webhook-free."""
    crds: list[dict[str, Any]] = []
    for module, version, subdir, pattern in sources:
        directory = Path(module_info(go, module, version)["Dir"]) / subdir
        files = sorted(p for p in directory.glob(pattern) if p.name != "kustomization.yaml")
        if not files:
            raise HarnessError(f"no CRD files {pattern} under {directory}")
        crds.extend(
            strip_conversion_webhook(doc)
            for path in files
            for doc in load_yaml_docs(path)
            if doc.get("kind") == "CustomResourceDefinition"
        )
    return crds


def strip_conversion_webhook(crd: dict[str, Any]) -> dict[str, Any]:
    """No conversion webhook runs here: serve every version with strategy None (storage stays as shipped)."""
    crd = json.loads(json.dumps(crd))
    crd.get("spec", {}).pop("conversion", None)
    crd.get("metadata", {}).get("annotations", {}).pop("cert-manager.io/inject-ca-from", None)
    return crd


def local_manifests(directory: Path) -> list[dict[str, Any]]:
    """The Kubernetes objects of a manifests/ folder (its kustomization.yaml is not one)."""
    docs: list[dict[str, Any]] = []
    if directory.is_dir():
        for path in sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")]):
            if path.name != "kustomization.yaml":
                docs.extend(load_yaml_docs(path))
    return docs
