"""kopf's warning, at every CRD event, that a kind the controller looks for itself (PyTorchJobs
installed after start-up) cannot be served is DEBUG while it is looked for; the same warning
about any other kind, and every other kopf line, stays as it is.

kopf's own function logs the warning here, so that a change of its wording fails this test rather
than bringing the noise back unnoticed."""

from __future__ import annotations

import logging

import pytest
from kopf._cogs.structs import references
from kopf._core.reactor import observation

from advisor.controller.jobs import PYTORCHJOB, TRAINJOB, JobKind
from advisor.controller.late_kinds import KOPF_OBSERVATION_LOGGER, quiet_while_late


def _kopf_warns_unserved(*kinds: JobKind) -> None:
    """What kopf logs at each rescan of the cluster's kinds while ``kinds`` are not served."""
    selectors = frozenset(references.Selector(k.group, k.version, k.plural) for k in kinds)
    observation._disable_mismatched_selectors(resources=set(), selectors=selectors)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_kopfs_warning_of_the_kind_looked_for_is_debug_while_it_is_looked_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert observation.logger.name == KOPF_OBSERVATION_LOGGER
    caplog.set_level(logging.INFO)
    with quiet_while_late([PYTORCHJOB]):
        for _ in range(3):  # one per CRD event in the cluster
            _kopf_warns_unserved(PYTORCHJOB)
    assert _warnings(caplog) == []
    caplog.set_level(logging.DEBUG, logger=KOPF_OBSERVATION_LOGGER)
    with quiet_while_late([PYTORCHJOB]):
        _kopf_warns_unserved(PYTORCHJOB)
    (debug,) = [r for r in caplog.records if r.name == KOPF_OBSERVATION_LOGGER]
    assert debug.levelno == logging.DEBUG and "pytorchjobs" in debug.getMessage()  # --log-level debug
    caplog.clear()
    _kopf_warns_unserved(PYTORCHJOB)  # served now (or looked for no more): kopf's warning is its own
    assert len(_warnings(caplog)) == 1


def test_the_same_warning_about_another_kind_stays_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with quiet_while_late([PYTORCHJOB]):
        _kopf_warns_unserved(TRAINJOB)  # no Trainer CRD: a real fault, not the transient
        _kopf_warns_unserved(TRAINJOB, PYTORCHJOB)
        logging.getLogger(KOPF_OBSERVATION_LOGGER).warning("Not enough permissions to watch for resources")
    warnings = _warnings(caplog)
    assert len(warnings) == 3 and all("trainjobs" in w for w in warnings[:2])
    assert "pytorchjobs" not in warnings[1]  # the real warning names the missing kind alone
