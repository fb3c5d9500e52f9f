"""Upgrading a Helm install: the CRD command the chart's NOTES and the README give is the one the
e2e upgrade test runs. Helm applies the chart's CRDs as field manager ``helm``; without
``--force-conflicts`` a later ``kubectl apply --server-side`` of a changed CRD is refused
(``conflict with "helm": .spec.versions``), and ``--reuse-values`` keeps only the old chart's values
(a value the new chart added is a nil pointer in its templates)."""

from __future__ import annotations

from tests.charts.render import MANIFESTS, helm_notes

ROOT = MANIFESTS.parent
CRD_COMMAND = "kubectl apply --server-side --force-conflicts -k manifests/crds"


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_notes_and_the_readme_give_the_crd_command_the_upgrade_test_runs() -> None:
    e2e = (ROOT / "tests" / "e2e" / "test_install.py").read_text()
    assert '"kubectl", "apply", "--server-side", "--force-conflicts", "-k", str(MANIFESTS / "crds")' in e2e
    notes = _flat(helm_notes())
    assert CRD_COMMAND in notes and "--reset-then-reuse-values" in notes
    readme = ROOT / "README.md"
    text = readme.read_text()
    start = text.index("**Upgrade.**")
    upgrade = _flat(text[start : text.index("\n\n", start)])
    assert f"`{CRD_COMMAND}`" in upgrade
    assert "helm upgrade --reset-then-reuse-values" in upgrade
