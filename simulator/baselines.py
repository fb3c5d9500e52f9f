"""The simulator's own baseline strategies, always in the comparison.

- ``no-advisor``: nothing but the jobs' own behaviour (their periodic checkpoints, if any).
- ``fixed-interval``: a checkpoint request every fixed interval of a job's runtime, the classic
  periodic checkpointing a platform can impose without any forecast, counted from the last
  checkpoint the job acknowledged (its reports, the outcomes of its requests).
- ``patience``: Keras ``EarlyStopping`` semantics on the reported loss: every evaluation period
  the mean loss of the period is compared with the best so far; after ``patience`` periods without
  an improvement of ``min_delta`` (relative here, since loss scales differ between jobs) the job
  is checkpointed and its quota released.
- ``median-stopping``: the Vizier / Ray Tune median stopping rule: after a grace period, a job
  whose best (normalised) loss is worse than the median of the running averages of completed jobs
  at the same progress is checkpointed and released.

These are written here from the rules' published semantics; they share no code with ``policies/``.
Each asks for a checkpoint when its rule fires and releases the quota at its next look (one period
later), whether or not the save came (a hung job's never does): a platform's blunt rule, not the
advisor's acknowledged sequence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from advisor.model import Action, ActionKind, ProgressSample

if TYPE_CHECKING:
    from simulator.engine import Simulation
    from simulator.jobs import SimJob

__all__ = ["FixedInterval", "MedianStopping", "NoAdvisor", "Patience", "baseline_strategies"]


class NoAdvisor:
    name = "no-advisor"
    predicts_victims = False
    judges_by_policy = False
    watches_cluster = False

    def reset(self, sim: Simulation) -> None:
        return None

    def first_tick(self, job: SimJob) -> float | None:
        return None

    def next_tick(self, job: SimJob, now: float) -> float | None:
        return None

    def tick(self, job: SimJob, samples: Sequence[ProgressSample], now: float) -> Sequence[Action]:
        return ()

    def record(self, job: SimJob, action: Action, request_id: str, now: float) -> None:
        return None

    def action_outcome(self, job: SimJob, request_id: str, outcome: str, now: float) -> None:
        return None

    def policy_of(self, job: SimJob) -> str | None:
        return None  # a baseline's rule is no AdvisorPolicy's

    def finished(self, job: SimJob, now: float) -> None:
        return None


class FixedInterval(NoAdvisor):
    """Request a checkpoint every ``interval_s`` of wall time while the job holds quota.

    The interval counts from the last checkpoint the job acknowledged, as a controller knows it:
    the first progress report carrying a new last checkpoint (step, request) or the
    acknowledgement of its own request, whichever came later. Never from the simulator's record
    of the job's saves: a save on SIGTERM, or one a report has not carried yet, is not known to a
    platform either. Until a checkpoint is acknowledged every look is due (the first comes one
    interval after the job's start)."""

    name = "fixed-interval"

    def __init__(self, interval_s: float = 1800.0) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.interval_s = interval_s
        #: per job: the last checkpoint its reports carried (step, request) and when it first did
        self._reported: dict[int, tuple[tuple[int | None, str | None], float]] = {}
        #: per job: when its latest request was acknowledged
        self._acknowledged: dict[int, float] = {}

    def reset(self, sim: Simulation) -> None:
        self._reported.clear()
        self._acknowledged.clear()

    def first_tick(self, job: SimJob) -> float | None:
        return self.interval_s

    def next_tick(self, job: SimJob, now: float) -> float | None:
        """An interval after the last acknowledged checkpoint: a look an interval after a request
        comes before its acknowledgement is an interval old, and waiting for the look after it
        checkpointed every second interval."""
        last = self._known_last(job)
        if last is None or last + self.interval_s <= now:
            return self.interval_s
        return max(1.0, last + self.interval_s - now)

    def _known_last(self, job: SimJob) -> float | None:
        seen = self._reported.get(job.idx)
        times = [t for t in (seen[1] if seen else None, self._acknowledged.get(job.idx)) if t is not None]
        return max(times) if times else None

    def last_acknowledged(self, job: SimJob, samples: Sequence[ProgressSample], now: float) -> float | None:
        """When the job's latest checkpoint was acknowledged, as far as its reports and the
        outcomes of this row's requests tell (None: none yet). A report is read at its own time
        (``now`` when it has none)."""
        seen = self._reported.get(job.idx)
        for s in samples:
            saved = (s.last_checkpoint_step, s.last_checkpoint_request)
            if saved != (None, None) and (seen is None or saved != seen[0]):
                seen = (saved, s.time if s.time is not None else now)
        if seen is not None:
            self._reported[job.idx] = seen
        return self._known_last(job)

    def tick(self, job: SimJob, samples: Sequence[ProgressSample], now: float) -> Sequence[Action]:
        last = self.last_acknowledged(job, samples, now)
        if last is not None and now - last < 0.99 * self.interval_s:
            return ()  # an extra tick (e.g. after an acknowledgement): nothing due yet
        return (Action(ActionKind.CHECKPOINT, "fixed-interval", f"every {self.interval_s:.0f}s"),)

    def action_outcome(self, job: SimJob, request_id: str, outcome: str, now: float) -> None:
        if outcome == "acknowledged":
            self._acknowledged[job.idx] = now

    def finished(self, job: SimJob, now: float) -> None:
        self._reported.pop(job.idx, None)
        self._acknowledged.pop(job.idx, None)


@dataclass(slots=True)
class _Track:
    first: float | None = None
    best: float = math.inf
    wait: int = 0
    window: list[float] = field(default_factory=list)
    releasing: bool = False
    curve: list[tuple[float, float]] = field(default_factory=list)  # (progress, normalised loss)


class _EveryPeriod(NoAdvisor):
    """A stopping baseline that looks at each job once per fixed period (as Keras callbacks and
    Vizier's median rule look once per epoch/evaluation)."""

    period_s: float

    def first_tick(self, job: SimJob) -> float | None:
        return self.period_s

    def next_tick(self, job: SimJob, now: float) -> float | None:
        return self.period_s


class Patience(_EveryPeriod):
    """Keras-style patience on the reported loss, judged once per evaluation period."""

    name = "patience"

    def __init__(
        self, period_s: float = 1800.0, patience: int = 4, min_delta: float = 0.01, start_after: int = 2
    ) -> None:
        self.period_s, self.patience, self.min_delta, self.start_after = (
            period_s,
            patience,
            min_delta,
            start_after,
        )
        self._tracks: dict[int, _Track] = {}
        self._periods: dict[int, int] = {}

    def reset(self, sim: Simulation) -> None:
        self._tracks.clear()
        self._periods.clear()

    def tick(self, job: SimJob, samples: Sequence[ProgressSample], now: float) -> Sequence[Action]:
        tr = self._tracks.setdefault(job.idx, _Track())
        if tr.releasing:
            return (Action(ActionKind.RELEASE_QUOTA, "patience", "one period after its checkpoint request"),)
        losses = [s.loss for s in samples if s.loss is not None]
        if not losses:
            return ()
        n = self._periods.get(job.idx, 0) + 1
        self._periods[job.idx] = n
        value = float(np.nanmean(losses)) if np.isfinite(losses).any() else math.inf
        if value < tr.best * (1.0 - self.min_delta):
            tr.best = value
            tr.wait = 0
        elif n > self.start_after:
            tr.wait += 1
        if tr.wait >= self.patience:
            tr.releasing = True
            return (
                Action(
                    ActionKind.CHECKPOINT,
                    "patience",
                    f"no {self.min_delta:.0%} improvement in {self.patience} periods",
                ),
            )
        return ()

    def action_outcome(self, job: SimJob, request_id: str, outcome: str, now: float) -> None:
        return None

    def finished(self, job: SimJob, now: float) -> None:
        self._tracks.pop(job.idx, None)
        self._periods.pop(job.idx, None)


class MedianStopping(_EveryPeriod):
    """Stop a run whose best normalised loss is worse than the median of completed runs' running
    averages at the same progress (Vizier's rule, as in Ray Tune's ``MedianStoppingRule``)."""

    name = "median-stopping"

    def __init__(self, period_s: float = 1800.0, grace_fraction: float = 0.25, min_samples: int = 3) -> None:
        self.period_s, self.grace, self.min_samples = period_s, grace_fraction, min_samples
        self._tracks: dict[int, _Track] = {}
        self._completed: list[tuple[np.ndarray, np.ndarray]] = []

    def reset(self, sim: Simulation) -> None:
        self._tracks.clear()
        self._completed.clear()

    def tick(self, job: SimJob, samples: Sequence[ProgressSample], now: float) -> Sequence[Action]:
        tr = self._tracks.setdefault(job.idx, _Track())
        if tr.releasing:
            return (
                Action(
                    ActionKind.RELEASE_QUOTA, "median-stopping", "one period after its checkpoint request"
                ),
            )
        for s in samples:
            if s.loss is None or not s.total_steps:
                continue
            loss = s.loss if math.isfinite(s.loss) else math.inf
            if tr.first is None and math.isfinite(loss) and loss > 0:
                tr.first = loss
            if tr.first is not None:
                tr.curve.append((s.step / s.total_steps, loss / tr.first))
        if not tr.curve or len(self._completed) < self.min_samples:
            return ()
        progress = tr.curve[-1][0]
        if progress < self.grace:
            return ()
        best = min(v for _p, v in tr.curve)
        medians = []
        for xs, running_mean in self._completed:
            if xs.size and xs[0] <= progress:
                medians.append(float(np.interp(progress, xs, running_mean)))
        if len(medians) < self.min_samples:
            return ()
        if best > float(np.median(medians)):
            tr.releasing = True
            return (
                Action(ActionKind.CHECKPOINT, "median-stopping", "worse than the median of completed runs"),
            )
        return ()

    def finished(self, job: SimJob, now: float) -> None:
        tr = self._tracks.pop(job.idx, None)
        if tr is None or not tr.curve or job.phase.value != "done":
            return
        arr = np.array(tr.curve)
        order = np.argsort(arr[:, 0], kind="stable")
        xs, vals = arr[order, 0], arr[order, 1]
        vals = np.where(np.isfinite(vals), vals, np.nan)
        counts = np.cumsum(np.isfinite(vals))
        sums = np.cumsum(np.nan_to_num(vals, nan=0.0))
        with np.errstate(invalid="ignore", divide="ignore"):
            running = np.where(counts > 0, sums / np.maximum(counts, 1), np.inf)
        self._completed.append((xs, running))


def baseline_strategies(fixed_interval_s: float = 1800.0) -> list[NoAdvisor]:
    return [NoAdvisor(), FixedInterval(fixed_interval_s), Patience(), MedianStopping()]
