"""Uninstalling with the save-window AdmissionCheck: what to do first, where an admin reads it.

Kueue puts its ``kueue.x-k8s.io/resource-in-use`` finalizer on an AdmissionCheck a ClusterQueue
lists, so the check outlives ``helm uninstall`` (which reports success) as ``Terminating`` until no
ClusterQueue lists it, and those queues' workloads wait for a check nobody answers. The chart's
NOTES and the README say to take it off the ClusterQueues first.
"""

from __future__ import annotations

import yaml

from tests.charts.render import MANIFESTS, helm_notes, helm_template, of_kind

ROOT = MANIFESTS.parent


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_notes_say_to_take_the_check_off_the_cluster_queues_before_uninstalling() -> None:
    (check,) = of_kind(helm_template("kueue.saveWindowCheck=true"), "AdmissionCheck")
    name = check["metadata"]["name"]
    notes = _flat(helm_notes("kueue.saveWindowCheck=true"))
    assert f"AdmissionCheck {name}" in notes
    assert "Before `helm uninstall` (or setting it false), remove it from every ClusterQueue" in notes
    for needed in (
        "spec.admissionChecksStrategy.admissionChecks",
        "kueue.x-k8s.io/resource-in-use",
        "Terminating",
    ):
        assert needed in notes, needed
    assert "AdmissionCheck" not in _flat(helm_notes())  # no check installed, nothing to say


def test_the_readme_says_it_in_the_uninstall_paragraph() -> None:
    component = MANIFESTS / "components" / "save-window-check" / "save-window-check.yaml"
    (check,) = [d for d in yaml.safe_load_all(component.read_text()) if d["kind"] == "AdmissionCheck"]
    name = check["metadata"]["name"]
    readme = (ROOT / "README.md").read_text()
    start = readme.index("**Uninstall.**")
    uninstall = _flat(readme[start : readme.index("**kubectl.**", start)])
    assert f"first remove `{name}` from every ClusterQueue" in uninstall
    assert "`kueue.x-k8s.io/resource-in-use` finalizer" in uninstall and "`Terminating`" in uninstall
