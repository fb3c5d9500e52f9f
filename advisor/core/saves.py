"""Did the save on SIGTERM make it? Verified from the reports after each eviction.

A training helper that saves on SIGTERM (at the next safe point, within the grace period) is the
cheapest protection against preemption, but it is best effort: a step longer than the grace
period, a slow filesystem or a helper that checks its flag too rarely and the save never lands.
So the advisor trusts it only on evidence. Each time the job's Workload is admitted again after an
earlier admission (it was evicted in between), the last step the job reported before the new
admission is remembered; the first report after the new admission says which checkpoint the run
resumed from (``last_checkpoint_step``). At least that step: the save made it. Older (or no
checkpoint reported at all): it did not, and the work since was lost.

Pure bookkeeping on the core's own record; the counts go out in ``CheckpointState`` where the
policies read them (``policies.savewindow``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from advisor.core.history import History
from advisor.model import CheckpointState

__all__ = ["ResumeCheck", "note_admission", "resolve"]


@dataclass(slots=True)
class ResumeCheck:
    """What the loop remembers between an eviction and the first report after it."""

    admission: float | None = None  # the admission last seen
    awaiting_since: float | None = None  # a new admission whose resume is not verified yet
    step_before: int | None = None  # the last step reported before that admission

    def to_dict(self) -> dict[str, Any]:
        return {
            "admission": self.admission,
            "awaitingSince": self.awaiting_since,
            "stepBefore": self.step_before,
        }

    @classmethod
    def from_dict(cls, data: Any) -> ResumeCheck:
        if not isinstance(data, Mapping):
            return cls()

        def num(key: str) -> float | None:
            v = data.get(key)
            return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

        before = num("stepBefore")
        return cls(num("admission"), num("awaitingSince"), None if before is None else int(before))


def _last_step_before(history: History, when: float) -> int | None:
    for point in reversed(history.points):
        if point.time is not None and point.time < when:
            return point.step
    return None


def note_admission(check: ResumeCheck, history: History, admitted_at: float | None) -> None:
    """Remember a new admission that follows an earlier one (an eviction in between)."""
    if admitted_at is None or admitted_at == check.admission:
        return
    previous, check.admission = check.admission, admitted_at
    if previous is None or admitted_at < previous:
        return
    before = _last_step_before(history, admitted_at)
    if before is None or before <= 0:
        return  # it never reported progress in the earlier admission: nothing it could lose
    check.awaiting_since, check.step_before = admitted_at, before


def resolve(check: ResumeCheck, history: History, cp: CheckpointState) -> CheckpointState:
    """Count the eviction as a save or a miss once a report after the new admission arrived."""
    since, before = check.awaiting_since, check.step_before
    last = history.last
    if since is None or before is None or last is None or last.time is None or last.time < since:
        return cp
    check.awaiting_since = check.step_before = None
    # the helper reports its checkpoints: the one the run resumed from is the last it reports (a
    # save made on SIGTERM is reported by the restarted process, or just before the exit); on a
    # channel without checkpoint metrics the step it resumed at says it (a rollback below the
    # last report before the eviction is lost work)
    resumed = cp.last_step if cp.last_step is not None else _first_step_since(history, since)
    made = resumed >= before
    if made:
        return dataclasses.replace(cp, sigterm_saves=cp.sigterm_saves + 1)
    return dataclasses.replace(cp, sigterm_misses=cp.sigterm_misses + 1)


def _first_step_since(history: History, since: float) -> int:
    first = None
    for point in reversed(history.points):
        if point.time is None or point.time < since:
            break
        first = point.step
    return first if first is not None else -1
