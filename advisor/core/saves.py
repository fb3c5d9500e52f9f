"""Did the save on SIGTERM make it? Verified from the reports after each eviction.

A training helper that saves on SIGTERM (at the next safe point, within the grace period) is the
cheapest protection against preemption, but it is best effort: a step longer than the grace
period, a slow filesystem or a helper that checks its flag too rarely and the save never lands.
So the advisor trusts it only on evidence. Each time the job's Workload is admitted again after an
earlier admission (it was evicted in between), the furthest step the job reported since the
admission the last verdict was about is remembered (its high-water mark: a job can be admitted,
roll back to its checkpoint and be evicted again between two looks, and the last report before
the new admission is then the rolled-back step, which a save "at least that new" would match);
the first report after the new admission says which checkpoint the run resumed from
(``last_checkpoint_step``). At least that step: the save made it. Older (or no checkpoint
reported at all): it did not, and the work since was lost. A save on SIGTERM is
at least as new as the furthest report (the step under way, then the save), whether the helper
reports it as it exits or after the restart. (A periodic save acknowledged at the furthest step
just before the eviction reads as one too: the reports cannot tell them apart, and the work it
would have cost is at most what the job did after its last report.)

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
    step_before: int | None = None  # the furthest step reported before that admission
    judged_since: float | None = None  # the admission the last verdict was about

    def to_dict(self) -> dict[str, Any]:
        return {
            "admission": self.admission,
            "awaitingSince": self.awaiting_since,
            "stepBefore": self.step_before,
            "judgedSince": self.judged_since,
        }

    @classmethod
    def from_dict(cls, data: Any) -> ResumeCheck:
        if not isinstance(data, Mapping):
            return cls()

        def num(key: str) -> float | None:
            v = data.get(key)
            return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

        before = num("stepBefore")
        return cls(
            num("admission"),
            num("awaitingSince"),
            None if before is None else int(before),
            num("judgedSince"),
        )


def _furthest_before(history: History, since: float | None, when: float) -> int | None:
    """The furthest step reported in ``[since, when)``."""
    steps = [
        p.step
        for p in history.points
        if p.time is not None and p.time < when and (since is None or p.time >= since)
    ]
    return max(steps) if steps else None


def note_admission(check: ResumeCheck, history: History, admitted_at: float | None) -> bool:
    """Remember a new admission that follows an earlier one (an eviction in between); returns
    whether ``admitted_at`` is such a re-admission."""
    if admitted_at is None or admitted_at == check.admission:
        return False
    previous, check.admission = check.admission, admitted_at
    if previous is None or admitted_at < previous:
        return False
    furthest = _furthest_before(history, check.judged_since, admitted_at)
    if furthest is not None and furthest > 0:  # else it lost nothing: it never reported before
        check.awaiting_since, check.step_before = admitted_at, furthest
    return True


def resolve(check: ResumeCheck, history: History, cp: CheckpointState) -> CheckpointState:
    """Count the eviction as a save or a miss once a report after the new admission arrived."""
    since, before = check.awaiting_since, check.step_before
    last = history.last
    if since is None or before is None or last is None or last.time is None or last.time < since:
        return cp
    check.awaiting_since = check.step_before = None
    check.judged_since = since
    # the helper reports its checkpoints: the one the run resumed from is the last it reports (a
    # save made on SIGTERM is reported by the restarted process, or just before the exit); on a
    # channel without checkpoint metrics the step it resumed at says it (a rollback below the
    # furthest report before the eviction is lost work)
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
