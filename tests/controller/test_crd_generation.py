"""The CRDs' schema generation: carried by both files, raised with every schema change, and read
by the controller at start (``advisor.controller.crd_check``): one older than its own holds Apply."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor.controller.crd_check import ADVISOR_CRDS, UPGRADE_COMMAND, outdated_crds, outdated_line
from advisor.protocol import CRD_SCHEMA_ANNOTATION, CRD_SCHEMA_GENERATION

ROOT = Path(__file__).resolve().parents[2]
FILES = ("manifests/crds/advisorpolicy.yaml", "manifests/crds/trainjobforecast.yaml")
#: per CRD file, the generation its schema was recorded at and the digest of its ``spec``: a
#: change of either file's spec without a new generation fails here (raise
#: ``advisor.protocol.CRD_SCHEMA_GENERATION``, the annotation in both files, and record both digests)
RECORDED = {
    "manifests/crds/advisorpolicy.yaml": (2, "90a7ba247295ecf2"),
    "manifests/crds/trainjobforecast.yaml": (2, "f3e58ffcfac2ef0a"),
}


def _crd(path: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / path).read_text())
    return loaded


@pytest.mark.parametrize("path", FILES)
def test_each_crd_carries_the_generation_of_its_schema(path: str) -> None:
    crd = _crd(path)
    assert crd["metadata"]["annotations"][CRD_SCHEMA_ANNOTATION] == str(CRD_SCHEMA_GENERATION)
    digest = hashlib.sha256(json.dumps(crd["spec"], sort_keys=True, separators=(",", ":")).encode())
    generation, recorded = RECORDED[path]
    assert (generation, digest.hexdigest()[:16]) == (CRD_SCHEMA_GENERATION, recorded), (
        f"{path} changed: raise CRD_SCHEMA_GENERATION (advisor/protocol.py) and the annotation of both "
        f"CRDs, and record both digests here; a controller finding the older CRDs then holds Apply"
    )
    assert crd["metadata"]["name"] in ADVISOR_CRDS


def _installed(generations: dict[str, str | None]) -> Any:
    def read(name: str) -> dict[str, Any] | None:
        if name not in generations:
            return None
        value = generations[name]
        return {
            "metadata": {"name": name, "annotations": {} if value is None else {CRD_SCHEMA_ANNOTATION: value}}
        }

    return read


def test_current_crds_are_not_outdated_and_missing_ones_are_left_to_kopf() -> None:
    current = {name: str(CRD_SCHEMA_GENERATION) for name in ADVISOR_CRDS}
    assert outdated_crds(_installed(current)) == []
    assert outdated_crds(_installed({})) == []  # not installed: kopf waits for them and says so
    newer = {name: str(CRD_SCHEMA_GENERATION + 1) for name in ADVISOR_CRDS}
    assert outdated_crds(_installed(newer)) == []  # a newer schema keeps every field this one writes


def test_older_or_unannotated_crds_are_named_with_the_upgrade_command() -> None:
    policies, forecasts = ADVISOR_CRDS
    found = outdated_crds(_installed({policies: None, forecasts: str(CRD_SCHEMA_GENERATION - 1)}))
    assert found == [
        f"{policies} has no schema generation (installed before {CRD_SCHEMA_GENERATION})",
        f"{forecasts} has schema generation {CRD_SCHEMA_GENERATION - 1}",
    ]
    assert outdated_crds(_installed({policies: "garbled"})) == [
        f"{policies} has no schema generation (installed before {CRD_SCHEMA_GENERATION})"
    ]
    line = outdated_line(found, recommend_only=False)
    assert UPGRADE_COMMAND in line and "Apply is held" in line and "last valid generation" in line
    assert "Apply is held" not in outdated_line(found, recommend_only=True)
