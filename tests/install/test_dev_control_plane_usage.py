"""What ``scripts/dev-control-plane up`` tells a person to run next: its CRDs are installed by
``up`` itself, so the hint says "once installed" only when installing them failed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _dev() -> object:
    pytest.importorskip("kubernetes")
    spec = importlib.util.spec_from_file_location("dev_cp", ROOT / "scripts" / "controlplane" / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["dev_cp"] = module
    spec.loader.exec_module(module)
    return module


def _state(**extra: object) -> dict[str, object]:
    return {
        "server": "https://127.0.0.1:6443",
        "admin_kubeconfig": "/tmp/admin",
        "controller_kubeconfig": "/tmp/controller",
        "kueue_reason": "running",
        "binaries": {"kubectl": "/tmp/bin/kubectl"},
        **extra,
    }


def test_the_hint_does_not_ask_for_crds_up_installed(capsys: pytest.CaptureFixture[str]) -> None:
    dev = _dev()
    dev._print_usage(_state())  # type: ignore[attr-defined]
    out = capsys.readouterr().out
    assert "kubectl get tjf -A   # TrainJobForecasts\n" in out and "once manifests/crds" not in out
    dev._print_usage(_state(manifest_errors=["crds: refused"]))  # type: ignore[attr-defined]
    assert "(once manifests/crds is installed)" in capsys.readouterr().out
