"""The deleted jobs' SIGTERM evidence per runtime survives a restart through a ConfigMap."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import pytest

from advisor.controller.evidence import CONFIGMAP, KEY, WINDOWS_KEY, EvidenceStore
from tests.controller.fakes import ApiError, FakeApi
from tests.controller.test_engine import KEY as JOB
from tests.controller.test_engine import T0, engine, feed


class FakeConfigMaps:
    """The CoreV1Api calls the store makes, on a dict; ``fail`` makes the next writes fail."""

    def __init__(self) -> None:
        self.maps: dict[tuple[str, str], dict[str, str]] = {}
        self.fail = 0
        self.writes = 0

    def read_namespaced_config_map(self, name: str, namespace: str) -> Any:
        if (namespace, name) not in self.maps:
            raise ApiError(404, "NotFound")
        return type("CM", (), {"data": dict(self.maps[(namespace, name)])})()

    def patch_namespaced_config_map(self, name: str, namespace: str, body: dict[str, Any]) -> None:
        self._write()
        if (namespace, name) not in self.maps:
            raise ApiError(404, "NotFound")
        self.maps[(namespace, name)].update(body["data"])

    def create_namespaced_config_map(self, namespace: str, body: Any) -> None:
        self._write()
        self.maps[(namespace, body.metadata.name)] = dict(body.data)

    def _write(self) -> None:
        self.writes += 1
        if self.fail:
            self.fail -= 1
            raise ApiError(503, "ServiceUnavailable")


def _retire(e: Any, runtime: str, saves: int, misses: int) -> None:
    """A job of ``runtime`` that saw evictions, then is deleted."""
    feed(e, range(10, 200, 10))
    rec = e.core.record(JOB)
    rec.runtime = runtime
    rec.checkpoint = dataclasses.replace(rec.checkpoint, sigterm_saves=saves, sigterm_misses=misses)
    e.core.forget(JOB)


def test_a_restart_keeps_what_deleted_jobs_taught_and_counts_it_once() -> None:
    cms = FakeConfigMaps()
    first = engine(FakeApi())
    assert first.use_evidence_store(EvidenceStore(cms, "sys")) == 0
    _retire(first, "torch-distributed", 3, 1)
    first.step(T0 + 1000)
    assert json.loads(cms.maps[("sys", CONFIGMAP)][KEY]) == {"torch-distributed": [3, 1]}
    writes = cms.writes
    first.step(T0 + 1001)
    assert cms.writes == writes  # nothing changed: nothing written
    second = engine(FakeApi())
    assert second.use_evidence_store(EvidenceStore(cms, "sys")) == 1
    assert second.core.retired_runtime_evidence == {"torch-distributed": (3, 1)}
    # the same evidence adopted again (a second restart before any change) is not counted twice
    second.core.adopt_retired_evidence({"torch-distributed": [3, 1]})
    assert second.core.retired_runtime_evidence == {"torch-distributed": (3, 1)}


def test_a_failed_write_is_retried_on_the_next_step() -> None:
    cms = FakeConfigMaps()
    e = engine(FakeApi())
    e.use_evidence_store(EvidenceStore(cms, "sys"))
    _retire(e, "rt", 2, 0)
    cms.fail = 1
    e.step(T0 + 1000)
    assert ("sys", CONFIGMAP) not in cms.maps
    e.step(T0 + 1001)
    assert json.loads(cms.maps[("sys", CONFIGMAP)][KEY]) == {"rt": [2, 0]}


@pytest.mark.parametrize(
    "stored",
    [
        "not json",
        "[1, 2]",
        json.dumps({"rt": [1]}),
        json.dumps({"rt": [-1, 2]}),
        json.dumps({"rt": [True, 0]}),
    ],
)
def test_malformed_evidence_is_no_evidence(stored: str, caplog: pytest.LogCaptureFixture) -> None:
    cms = FakeConfigMaps()
    cms.maps[("sys", CONFIGMAP)] = {KEY: stored}
    e = engine(FakeApi())
    with caplog.at_level(logging.WARNING):
        assert e.use_evidence_store(EvidenceStore(cms, "sys")) == 0
    assert e.core.retired_runtime_evidence == {}


def test_the_save_windows_of_deleted_jobs_survive_a_restart_and_are_adopted_once() -> None:
    cms = FakeConfigMaps()
    first = engine(FakeApi())
    first.use_evidence_store(EvidenceStore(cms, "sys"))
    feed(first, range(10, 200, 10))
    rec = first.core.record(JOB)
    rec.runtime, rec.gpus, rec.nodes = "torch-distributed", 16, 2
    rec.throughput[2] = 2.0  # 0.5 s a step
    rec.checkpoint = dataclasses.replace(rec.checkpoint, save_seconds=42.0)
    first.core.forget(JOB)
    first.step(T0 + 1000)
    stored = json.loads(cms.maps[("sys", CONFIGMAP)][WINDOWS_KEY])
    assert stored == {"torch-distributed": [[16, 0.5, 42.0]]}
    second = engine(FakeApi())
    second.use_evidence_store(EvidenceStore(cms, "sys"))
    assert second.core.retired_save_windows == {"torch-distributed": [[16, 0.5, 42.0]]}
    # adopted again (a second restart before any change): nothing added
    second.core.adopt_retired_windows(stored)
    assert second.core.retired_save_windows == {"torch-distributed": [[16, 0.5, 42.0]]}
    # damaged entries are skipped, the rest kept
    third = engine(FakeApi())
    third.core.adopt_retired_windows({"jax": [[8, 1.0, 30.0], [8, -1, 3], "x", [True, 1, 1]], 7: []})
    assert third.core.retired_save_windows == {"jax": [[8, 1.0, 30.0]]}


def test_each_lease_keeps_its_own_evidence_and_an_upgrade_reads_the_shared_one() -> None:
    """Namespace shards side by side (a Lease each) do not overwrite each other's evidence; a
    controller upgraded from the one shared ConfigMap reads it until it has written its own."""
    from advisor.controller.evidence import evidence_name

    cms = FakeConfigMaps()
    cms.maps[("sys", CONFIGMAP)] = {KEY: json.dumps({"rt": [4, 1]})}
    a = EvidenceStore(cms, "sys", evidence_name("shard-a"), legacy=CONFIGMAP)
    b = EvidenceStore(cms, "sys", evidence_name("shard-b"), legacy=CONFIGMAP)
    assert a.load()[0] == {"rt": [4, 1]}  # the upgrade: nothing learned is lost
    assert a.save({"rt": [5, 1]}) and b.save({"rt": [9, 9]})
    assert a.load()[0] == {"rt": [5, 1]} and b.load()[0] == {"rt": [9, 9]}
    assert json.loads(cms.maps[("sys", CONFIGMAP)][KEY]) == {"rt": [4, 1]}  # never written again
    assert evidence_name("tja-trainjob-advisor") == "tja-trainjob-advisor-runtime-evidence"
