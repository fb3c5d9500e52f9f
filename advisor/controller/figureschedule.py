"""When the engine writes the AdvisorPolicies' figures (``PolicyBook.write_figures``).

At the bounded rate (``EngineConfig.policy_status_interval_s``), and sooner when a policy or a job
came or went (``due``): then at the first step that has judged every job under the new set, not
at the bounded rate, since a new policy's columns would stay blank until then.

Never while the jobs are not all loaded at start-up: their figures would read as zero. A cold
start wrote JOBS 0, RECOMMENDED 0 and the deleted jobs' actions alone before any job was loaded
(corrected a second later), so the figures wait for the initial job listing
(``expect_listing``) and then for the watch events of the jobs it found (``seen``), at most
``LISTING_WAIT_S``: one deleted between the listing and the watch never comes.

Only state and arithmetic, no API: the engine asks ``take`` at each step and writes when told.
"""

from __future__ import annotations

import math

__all__ = ["LISTING_WAIT_S", "FigureSchedule"]

#: how long the policies' figures wait for the watch events of the jobs the initial listing found
#: (one deleted between the listing and the watch never comes)
LISTING_WAIT_S = 60.0


class FigureSchedule:
    def __init__(self) -> None:
        #: a policy or a job came or went: the policies' figures are written at the next step that
        #: has judged every job, not at the bounded rate (a new policy's columns would stay blank)
        self.due = False
        self._last_written = -math.inf
        #: the initial job listing (``expect_listing``): awaited, and the listed jobs not seen
        #: yet (None: not asked for, or in and every listed job seen)
        self._listing_pending = False
        self._awaited: set[str] | None = None
        self._listing_at = -math.inf

    def expect_listing(self) -> None:
        """Hold the figures until the initial listing of the jobs is in (``listing_in``)."""
        self._awaited = None
        self._listing_pending = True

    def listing_in(self, now: float) -> None:
        """The initial job listing arrived at ``now``; the jobs it found and the engine had not
        seen yet are then named by ``await_jobs`` (a failed listing names none)."""
        self._listing_pending = False
        self._listing_at = now
        self._awaited = set()

    def await_jobs(self, keys: set[str]) -> None:
        """The listed jobs whose watch events the figures wait for (``seen``)."""
        self._awaited = keys

    def seen(self, key: str) -> None:
        """A watch event of job ``key`` arrived: the figures no longer wait for it."""
        if self._awaited is not None:
            self._awaited.discard(key)

    def held(self, now: float) -> bool:
        """Whether the figures wait for the initial job listing (``expect_listing``)."""
        if self._listing_pending:
            return True
        if self._awaited:
            if now - self._listing_at < LISTING_WAIT_S:
                return True
            self._awaited = set()
        return False

    def take(self, now: float, *, interval_s: float, at_once: bool) -> bool:
        """Whether the figures are to be written now (they then count as written at ``now``):
        ``at_once`` (the engine's: they are ``due`` and every job was judged since), else once
        ``interval_s`` passed since the last write; never while ``held``."""
        if self.held(now):
            return False  # the jobs are not all loaded yet: their figures would read as zero
        if at_once or now - self._last_written >= interval_s:
            self._last_written = now
            self.due = False
            return True
        return False
