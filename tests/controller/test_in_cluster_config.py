"""In a pod the controller authenticates as its ServiceAccount: the service host and port from the
environment, the token and CA from the mount (movable with TRAINJOB_ADVISOR_SERVICEACCOUNT_DIR)."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.controller.api import OTHER_THREADS, load_api_client

CA = """-----BEGIN CERTIFICATE-----
MIIBdzCCAR2gAwIBAgIUfake0000000000000000000000000wCgYIKoZIzj0EAwIw
-----END CERTIFICATE-----
"""


def test_the_mounted_token_and_the_service_environment_win_without_a_kubeconfig(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "token").write_text("the-token")
    (tmp_path / "ca.crt").write_text(CA)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("TRAINJOB_ADVISOR_SERVICEACCOUNT_DIR", str(tmp_path))
    cfg = load_api_client().configuration
    assert cfg.host == "https://10.0.0.1:443"
    assert cfg.get_api_key_with_prefix("BearerToken").lower() == "bearer the-token"
    assert cfg.ssl_ca_cert == str(tmp_path / "ca.crt")
    # a connection for each status-writer thread and for the controller's other threads (a pool
    # sized for the writer alone logged "Connection pool is full" hundreds of times at 600 jobs)
    assert cfg.connection_pool_maxsize == 32 + OTHER_THREADS
    assert load_api_client(writers=64).configuration.connection_pool_maxsize == 64 + OTHER_THREADS
    assert cfg.refresh_api_key_hook is not None  # re-reads the token the kubelet rotates


def test_outside_a_pod_the_kubeconfig_is_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("TRAINJOB_ADVISOR_SERVICEACCOUNT_DIR", str(tmp_path))
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    assert load_api_client(str(kubeconfig)).configuration.host == "https://127.0.0.1:6443"
