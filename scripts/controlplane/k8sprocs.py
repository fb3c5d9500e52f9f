"""Processes, certificates and kubeconfigs for the loopback control plane.

Why: a test run and a person's dev cluster must coexist and must never leave a process behind.
Every binary runs in its own process group (teardown reaches all descendants), on free loopback
ports, and, unless detached on purpose, is killed by the kernel if its owner dies (SIGKILL,
Ctrl-C). Certificates are throw-away ones made with the openssl command.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import yaml
from k8sbuild import HarnessError


# ---------------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def spawn(
    argv: Sequence[str], log_path: Path, *, detached: bool, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Own process group (so teardown reaches every descendant); unless detached, dies with us."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=dict(env) if env is not None else None,
            preexec_fn=None if detached or not sys.platform.startswith("linux") else _die_with_parent,
        )


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # a zombie is dead for our purposes
        if Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z"):
            return False
    return True


def terminate_group(pid: int, *, grace_s: float = 15.0, popen: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after the grace period."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    popen.wait(timeout=0.1)
            if not pid_alive(pid) and not _group_alive(pid):
                return
            time.sleep(0.1)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_until(
    check: Callable[[], bool],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = 0.25,
    alive: Callable[[], str | None] | None = None,
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        if alive is not None and (dead := alive()):
            raise HarnessError(f"{what}: {dead}")
        time.sleep(interval_s)
    raise HarnessError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def log_tail(path: Path, lines: int = 20) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


# ---------------------------------------------------------------------------------------------
# Certificates and kubeconfigs
# ---------------------------------------------------------------------------------------------
def make_certificates(pki: Path) -> None:
    """A throw-away CA, a serving cert for 127.0.0.1/localhost, an admin client cert, an SA key pair."""
    pki.mkdir(parents=True, exist_ok=True)

    def ossl(*args: str) -> None:
        proc = subprocess.run(["openssl", *args], cwd=pki, capture_output=True, text=True)
        if proc.returncode != 0:
            raise HarnessError(f"openssl {' '.join(args[:3])} failed: {proc.stderr.strip()[-300:]}")

    ossl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "30",
        "-subj",
        "/CN=trainjob-advisor-e2e-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
    )
    (pki / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
    )
    (pki / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, subject, ext in (
        ("server", "/CN=kube-apiserver", "server.ext"),
        ("admin", "/O=system:masters/CN=trainjob-advisor-e2e-admin", "client.ext"),
    ):
        ossl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            subject,
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
        )
        ossl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "30",
            "-extfile",
            ext,
            "-out",
            f"{name}.crt",
        )
    ossl("genrsa", "-out", "sa.key", "2048")
    ossl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")


def write_kubeconfig(path: Path, server: str, ca: Path, user: dict[str, str], user_name: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [
            {"name": "trainjob-advisor-e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": user_name, "user": user}],
        "contexts": [{"name": user_name, "context": {"cluster": "trainjob-advisor-e2e", "user": user_name}}],
        "current-context": user_name,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
