"""Kinds installed after the controller started (PyTorchJobs): looked for, and kopf kept quiet
about them meanwhile.

kopf notices a CRD created after start-up only if the API server's discovery serves it by the
CRD's own watch events, which it may not yet: a PyTorchJob CRD installed later was never watched.
So ``run_operator`` looks for such a kind itself every ``LATE_KIND_POLL_S`` (``until_served``)
and, once it is served, ends the kopf run so that a new one lists and watches it.

While it waits, kopf says at every rescan of the cluster's kinds (at start, and at each event of
any CRD: created, changed, deleted) that the kind "cannot be served": a warning per CRD event for
a state the controller said once, at start-up, that it knows and handles. ``QuietUnservedKinds``
lowers exactly those lines to DEBUG (shown with ``--log-level debug``), and only while the kind
is looked for: the same warning about any other kind (a Kueue or TrainJob CRD missing: a real
fault) stays a warning, naming those kinds alone, and every other kopf line stays as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Collection, Iterator

from advisor.controller.api import ClusterApi
from advisor.controller.jobs import PYTORCHJOB, JobKind

__all__ = [
    "KOPF_OBSERVATION_LOGGER",
    "LATE_KIND_POLL_S",
    "QuietUnservedKinds",
    "quiet_while_late",
    "until_served",
]

log = logging.getLogger(__name__)

#: how often a kind not served at start-up (PyTorchJobs) is looked for
LATE_KIND_POLL_S = 30.0
#: the kopf logger that warns of the kinds it cannot serve (kopf 1.x:
#: ``_core/reactor/observation.py``)
KOPF_OBSERVATION_LOGGER = "kopf._core.reactor.observation"
#: the warning's opening words, then the kinds' selectors (``Selector(group=..., ...)``)
_UNRESOLVED = "Unresolved resources cannot be served"
_SELECTOR = re.compile(r"Selector\([^)]*\)")


def selector_text(kind: JobKind) -> str:
    """The kind as kopf's warning names it (``Selector.__repr__``)."""
    return f"Selector(group={kind.group!r}, version={kind.version!r}, any_name={kind.plural!r})"


class QuietUnservedKinds(logging.Filter):
    """kopf's "cannot be served" warnings that name only ``kinds`` (the ones looked for) become
    DEBUG records, dropped unless the logger shows DEBUG; everything else passes unchanged."""

    def __init__(self, kinds: Collection[JobKind]) -> None:
        super().__init__()
        self.selectors = frozenset(selector_text(k) for k in kinds)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING or not isinstance(record.msg, str):
            return True
        if not record.msg.startswith(_UNRESOLVED):
            return True
        named = _SELECTOR.findall(record.getMessage().split(":", 1)[-1])
        others = [n for n in named if n not in self.selectors]
        if not named or len(others) == len(named):
            return True
        if others:  # kinds not looked for (a missing Kueue or TrainJob CRD): a real warning, of them
            record.msg, record.args = f"{_UNRESOLVED} (try creating their CRDs): {', '.join(others)}", ()
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


@contextlib.contextmanager
def quiet_while_late(kinds: Collection[JobKind]) -> Iterator[QuietUnservedKinds | None]:
    """``QuietUnservedKinds`` on kopf's observation logger while the block runs (none for no kinds)."""
    if not kinds:
        yield None
        return
    quiet = QuietUnservedKinds(kinds)
    logger = logging.getLogger(KOPF_OBSERVATION_LOGGER)
    logger.addFilter(quiet)
    try:
        yield quiet
    finally:
        logger.removeFilter(quiet)


async def until_served(
    api: ClusterApi, late_pytorchjobs: bool, stop_all: asyncio.Event, this_run: asyncio.Event, every_s: float
) -> None:
    """Ends this kopf run when the controller stops, or when PyTorchJobs, not served at start-up
    (``late_pytorchjobs``), are served now (a new run then watches them)."""
    next_look = time.monotonic() + every_s
    while not stop_all.is_set():
        if late_pytorchjobs and time.monotonic() >= next_look:
            next_look = time.monotonic() + every_s
            if await asyncio.to_thread(api.serves, PYTORCHJOB.group, PYTORCHJOB.version):
                log.info(
                    "PyTorchJobs: %s/%s is served now (installed after start-up); watching them (kopf "
                    "restarts its watches: its 'stopping' lines that follow are that restart)",
                    PYTORCHJOB.group,
                    PYTORCHJOB.version,
                )
                break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop_all.wait(), timeout=0.5)
    this_run.set()
