"""The CRDs' schema generation: carried by both files, raised with every schema change, and read
by the controller at start (``advisor.controller.crd_check``): one older than its own holds Apply."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor.controller.crd_check import (
    ADVISOR_CRDS,
    UPGRADE_COMMAND,
    holds_apply,
    outdated_crds,
    outdated_line,
)
from advisor.protocol import CRD_SCHEMA_ANNOTATION, CRD_SCHEMA_GENERATION, CRD_SCHEMA_REQUIRED

ROOT = Path(__file__).resolve().parents[2]
FILES = ("manifests/crds/advisorpolicy.yaml", "manifests/crds/trainjobforecast.yaml")
#: per CRD file, the generation its schema was recorded at and the digest of its ``spec``: a
#: change of either file's spec without a new generation fails here (raise
#: ``advisor.protocol.CRD_SCHEMA_GENERATION``, the annotation in both files, and record both digests)
RECORDED = {
    "manifests/crds/advisorpolicy.yaml": (3, "4e05967a65ffeb3c"),
    "manifests/crds/trainjobforecast.yaml": (3, "f3e58ffcfac2ef0a"),
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


def test_crds_older_than_apply_needs_or_unannotated_are_named_and_hold_apply() -> None:
    policies, forecasts = ADVISOR_CRDS
    found = outdated_crds(_installed({policies: None, forecasts: str(CRD_SCHEMA_REQUIRED - 1)}))
    assert [o.phrase for o in found] == [
        f"{policies} has no schema generation (installed before {CRD_SCHEMA_GENERATION})",
        f"{forecasts} has schema generation {CRD_SCHEMA_REQUIRED - 1}",
    ]
    assert [o.holds_apply for o in found] == [True, True] and holds_apply(found)
    garbled = outdated_crds(_installed({policies: "garbled"}))
    assert [o.phrase for o in garbled] == [found[0].phrase]
    line = outdated_line(found, recommend_only=False)
    assert UPGRADE_COMMAND in line and "Apply is held" in line and "last valid generation" in line
    assert "Apply is held" not in outdated_line(found, recommend_only=True)


def test_crds_that_lack_only_fields_for_people_are_named_and_hold_nothing() -> None:
    """Generation 3 added only ``recentActions[].at`` (an RFC 3339 copy of ``time``): on generation
    2 the API server drops it, and Apply loses nothing it reads back."""
    assert CRD_SCHEMA_REQUIRED < CRD_SCHEMA_GENERATION
    policies, forecasts = ADVISOR_CRDS
    older = {policies: str(CRD_SCHEMA_REQUIRED), forecasts: str(CRD_SCHEMA_GENERATION)}
    found = outdated_crds(_installed(older))
    assert [(o.phrase, o.holds_apply) for o in found] == [
        (f"{policies} has schema generation {CRD_SCHEMA_REQUIRED}", False)
    ]
    assert not holds_apply(found)
    line = outdated_line(found, recommend_only=False)
    assert UPGRADE_COMMAND in line and "nothing is held" in line and "Apply is held" not in line
    # one CRD Apply cannot run on holds it, whatever the other
    mixed = {policies: str(CRD_SCHEMA_REQUIRED), forecasts: str(CRD_SCHEMA_REQUIRED - 1)}
    both = outdated_crds(_installed(mixed))
    assert holds_apply(both) and "Apply is held" in outdated_line(both, recommend_only=False)
