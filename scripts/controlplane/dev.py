"""`scripts/dev-control-plane up|down|status|env`: the e2e control plane, kept running for a person.

Why: playing with the controller needs the same real API server the e2e tier uses, but one that
outlives the command that started it. It lives in a fixed folder of the cache
(``<cache>/dev-cluster``) so that `down`, `status` and `env` find it again; its ports are free
ones chosen at start, so it coexists with e2e test runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "e2e"))
try:
    import controlplane as cp
except ModuleNotFoundError as exc:  # the kubernetes client and friends come with the controller extra
    sys.exit(
        f"dev-control-plane: {exc.name} is not installed; install the controller extra first: "
        "pip install -e '.[controller]' (or make venv)"
    )


def run_dir() -> Path:
    return cp.cache_root() / "dev-cluster"


def _state() -> dict[str, Any] | None:
    with contextlib.suppress(OSError, ValueError):
        state: dict[str, Any] = json.loads((run_dir() / "state.json").read_text())
        return state
    return None


def _owned(pid: int, binary: str | None) -> bool:
    """True if pid is alive and still runs our binary (a recycled pid must never be signalled)."""
    if not cp.pid_alive(pid):
        return False
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return True  # no /proc: trust the recorded pid
    return binary is None or argv0 == binary


def _binary_for(state: dict[str, Any], name: str) -> str | None:
    return state.get("binaries", {}).get(name.replace("-", "_"))


def _running(state: dict[str, Any]) -> dict[str, bool]:
    return {name: _owned(int(pid), _binary_for(state, name)) for name, pid in state.get("pids", {}).items()}


def _print_env(state: dict[str, Any]) -> None:
    print(f"export KUBECONFIG={state['admin_kubeconfig']}")
    kubectl = state.get("binaries", {}).get("kubectl")
    if kubectl:
        print(f"export PATH={Path(kubectl).parent}:$PATH")


def _print_usage(state: dict[str, Any]) -> None:
    print(f"API server:             {state['server']}")
    print(f"admin kubeconfig:       {state['admin_kubeconfig']}")
    print(
        f"controller kubeconfig:  {state['controller_kubeconfig']}  "
        f"(ServiceAccount {cp.CONTROLLER_NAMESPACE}/{cp.CONTROLLER_SERVICE_ACCOUNT})"
    )
    print(f"Kueue:                  {state['kueue_reason']}")
    for error in state.get("manifest_errors") or []:
        print(f"NOT INSTALLED (from manifests/): {error[:400]}")
    print("\nTo use it from a shell:")
    _print_env(state)
    if state.get("binaries", {}).get("kubectl"):
        # ``up`` installs the CRDs from manifests/: said as done, unless that failed (above)
        installed = not state.get("manifest_errors")
        print(
            "kubectl get tjf -A   # TrainJobForecasts"
            + ("" if installed else " (once manifests/crds is installed)")
        )
    else:
        print("# kubectl is not available; use the Python client, e.g.:")
        print(
            "#   python -c 'import kubernetes as k; k.config.load_kube_config(); "
            "print(k.client.VersionApi().get_code().git_version)'"
        )
    if (Path(__file__).resolve().parents[2] / "advisor" / "commands" / "status.py").exists():
        print("trainjob-advisor status   # the advisor's own view (reads KUBECONFIG)")
    print(
        f"\nRun the controller against it with --kubeconfig {state['controller_kubeconfig']};"
        " stop it all with `scripts/dev-control-plane down`."
    )


def up(args: argparse.Namespace) -> int:
    state = _state()
    if state and all(_running(state).values()):
        print("dev control plane is already up")
        _print_usage(state)
        return 0
    if state:
        down(args)
    shutil.rmtree(run_dir(), ignore_errors=True)
    try:
        plane = cp.start_control_plane(run_dir(), with_kueue=not args.no_kueue, detached=True, kubectl=True)
    except cp.Unavailable as exc:
        print(f"cannot start a dev control plane: {exc}", file=sys.stderr)
        return 2
    except cp.HarnessError as exc:
        print(f"dev control plane failed: {exc}\nlogs: {run_dir()}", file=sys.stderr)
        return 1
    plane.save_state()
    _print_usage(_state() or {})
    return 0


def build(args: argparse.Namespace) -> int:
    """Build (or find cached) every binary without starting anything: CI runs it before the tests."""
    try:
        go = cp.find_go()
    except cp.Unavailable as exc:
        print(f"nothing to build: {exc}")
        return 0 if args.if_go else 2
    try:
        bins = cp.ensure_binaries(go, kueue=True, kubectl=True, helm=True, trainer=args.trainer)
        cp.upstream_crds(go)  # fetches the CRD modules into the module cache now, not mid-test
        cp.compat_crds(go)
    except cp.HarnessError as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    for name, path in vars(bins).items():
        if isinstance(path, Path):
            print(f"{name:15s} {path}")
    for error in bins.tool_errors.values():
        print(f"build failed: {error}", file=sys.stderr)
    return 1 if bins.tool_errors else 0


def down(args: argparse.Namespace) -> int:
    state = _state()
    if not state:
        print("no dev control plane is recorded as running")
        return 0
    for name in ("minimalkueue", "kube-apiserver", "etcd"):
        pid = state.get("pids", {}).get(name)
        if pid is not None and _owned(int(pid), _binary_for(state, name)):
            cp.terminate_group(int(pid))
            print(f"stopped {name} (pid {pid})")
    shutil.rmtree(run_dir(), ignore_errors=True)
    return 0


def status(args: argparse.Namespace) -> int:
    state = _state()
    if not state:
        print("down")
        return 3
    running = _running(state)
    for name, alive in running.items():
        print(f"{name:15s} {'running' if alive else 'NOT running'} (pid {state['pids'][name]})")
    print(f"server          {state['server']}")
    print(f"kueue           {state['kueue_reason']}")
    return 0 if all(running.values()) else 1


def env(args: argparse.Namespace) -> int:
    state = _state()
    if not state:
        print("# no dev control plane is running: scripts/dev-control-plane up", file=sys.stderr)
        return 3
    _print_env(state)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dev-control-plane", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="build if needed, start, print the kubeconfig")
    p_up.add_argument("--no-kueue", action="store_true", help="do not start Kueue's minimalkueue")
    p_up.set_defaults(func=up)
    p_build = sub.add_parser("build", help="build or find the cached binaries; start nothing")
    p_build.add_argument("--kubectl", action="store_true", help="(kubectl and helm are always built now)")
    p_build.add_argument("--if-go", action="store_true", help="exit 0 (after saying why) when Go is absent")
    p_build.add_argument(
        "--trainer",
        action="store_true",
        help="also Kubeflow Trainer's controller manager (opt-in: tests/e2e/test_trainer_pipeline.py)",
    )
    p_build.set_defaults(func=build)
    sub.add_parser("down", help="stop every process and remove the run folder").set_defaults(func=down)
    sub.add_parser("status", help="which processes are running").set_defaults(func=status)
    sub.add_parser("env", help='print `export KUBECONFIG=...` (eval "$(... env)")').set_defaults(func=env)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
