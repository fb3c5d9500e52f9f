"""The engine's side of the AdvisorPolicies: their watch events, whether they could be listed at
all, the listings that resync them, and the record of their hourly caps.

A policy event changes which policy governs each job, so every job is judged again under the new
set and the policies' figures are due once it is (``FigureSchedule.due``). Each event's
``status.recentActions`` is adopted into the core's count of the policy's capped actions, and
completed with those this process counts and the status lacks, so that ``maxActionsPerHour``
holds across restarts and job deletions (``PolicyBook.record_actions``).

Kept apart from the engine's loop, which only routes the ``policy``, ``policylisting`` and
``policyresync`` events here (``Engine.enqueue``) and the actuator's ``record_cap``; like the
engine, it runs on the engine's worker thread alone.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from advisor.controller.figureschedule import FigureSchedule
from advisor.controller.metrics import Metrics
from advisor.controller.policybook import PolicyBook
from advisor.controller.policysync import PolicySync
from advisor.controller.statusboard import StatusBoard
from advisor.controller.trackedjob import TrackedJob
from advisor.core import AdvisorCore

__all__ = ["PolicyEvents"]

log = logging.getLogger(__name__)


class PolicyEvents:
    def __init__(
        self,
        book: PolicyBook,
        core: AdvisorCore,
        metrics: Metrics,
        board: StatusBoard,
        jobs: Mapping[str, TrackedJob],
        figures: FigureSchedule,
    ) -> None:
        self.book = book
        self.core = core
        self.metrics = metrics
        self.board = board
        self.jobs = jobs  # the engine's: each is judged again when the policies change
        self.figures = figures
        #: the start-up listing of the AdvisorPolicies failed and none has succeeded since
        #: (``policylisting`` events): which policy governs a job is not known for sure (kopf's watch
        #: may not have delivered them all, or the one that governs it), so no job is acted on and
        #: no release sequence is taken as abandoned; the jobs are judged and shown meanwhile
        self.unknown = False
        #: what the policy events applied, which a listing is compared with (``on_resync``)
        self.sync = PolicySync()

    def on_event(self, event_type: str, body: Mapping[str, Any], *, received: float, now: float) -> None:
        """A watch event of an AdvisorPolicy (``received``: when the engine got it)."""
        self.book.on_event(event_type, body)
        self.sync.applied(event_type, body, received=received)
        if event_type != "DELETED":
            name = str((body.get("metadata") or {}).get("name"))
            self.core.note_policy_actions(name, self.book.stored_actions(body))
            self.complete_record(name, now)
        self.core.set_policies(self.book.governing())
        for job in self.jobs.values():
            job.needs_eval = True
        self.figures.due = True  # written once the jobs are judged under the new set, not later

    def on_listing(self, listed: bool) -> None:
        """Whether the AdvisorPolicies could be listed (``unknown`` while not)."""
        if listed == (not self.unknown):
            return
        self.unknown = not listed
        self.metrics.policies_listed.set(1 if listed else 0)
        self.board.policies_listed = listed
        if listed:
            log.info("AdvisorPolicies listed: jobs are acted on again")
            for job in self.jobs.values():
                job.needs_eval = True
        else:
            log.warning("AdvisorPolicies not listed: no job is acted on until they are")

    def on_resync(
        self, items: Sequence[Mapping[str, Any]], listed_at: float, *, received: float, now: float
    ) -> None:
        """A whole listing of the AdvisorPolicies (``policysync.resync_policies``): it ends the wait
        of a start-up whose listing failed, and applies what the watch did not deliver
        (``PolicySync.missed``), each as an event of its own."""
        self.on_listing(True)
        for event_type, body in self.sync.missed(items, listed_at):
            name = (body.get("metadata") or {}).get("name")
            log.warning(
                "AdvisorPolicy %s: applied from a listing (%s): no watch event delivered it", name, event_type
            )
            self.on_event(event_type, body, received=received, now=now)

    def complete_record(self, name: str, now: float) -> None:
        """Write into the policy's ``status.recentActions`` the recent capped actions this process
        counts and the status lacks: those of the saved job logs a restart adopted (an action a
        restart finished without recording it there, or whose record failed), so that the cap
        still counts them once those jobs, and their logs, are deleted. Nothing is written when the
        status lists them all; a failed write is tried again at the policy's next event."""
        try:
            self.book.record_actions(name, self.core.policy_actions(name, now))
        except Exception as exc:
            log.warning("AdvisorPolicy %s: recentActions not completed: %s", name, exc)

    def record_cap(self, policy: str, rid: str, at: float, resumed: bool, *, now: float) -> None:
        """Before a capped action is carried out (the first time, or ``resumed`` after a restart):
        the policy's hourly cap must survive a restart and the deletion of the job, so its
        ``status.recentActions`` is made to carry the action (with the policy's other recent ones:
        the list is replaced). Raises when that cannot be written: the action is then not run.

        A resumed action whose policy this process has not seen (deleted while the controller was
        down: the policies are listed before any job) fails: writing the list would drop entries
        only the status holds, and carrying the action out unrecorded could lose it from a cap."""
        if resumed and policy not in self.book.stored:
            raise LookupError(f"AdvisorPolicy {policy} not seen: its recentActions cannot be completed")
        self.core.note_policy_actions(policy, [(rid, at)])
        self.book.record_actions(policy, self.core.policy_actions(policy, max(now, at)))
