"""A run's loss history, as the advisor keeps it.

The controller only ever sees the *latest* progress value of a TrainJob (each status update
replaces the previous one), so the advisor must keep the history itself, and keep it small:
it is persisted inside a Kubernetes object (``TrainJobForecast.status``), which should stay far
below etcd's object size limit even for a run with a million steps.

Three rules shape it:

* **Append only what is new.** A repeated step is a duplicate; a sample older than the newest
  one is stale (watch events can arrive re-ordered after a reconnect). Neither changes anything.
* **A step going backwards is a restart**, not a bad point: the run resumed from a checkpoint.
  A new *segment* starts, so the forecaster never fits across a restart. But a step that goes
  back at ``MALFORMED_BACKS`` reports in a row, with no progress in between, is malformed
  progress (a reporter counting down, or garbling every step), not as many restarts: those
  reports are kept as one-point segments (the newest replaced by each later one, so that such a
  stream cannot fill the history) and counted as no restart; the forecast leaves them out and
  says the reported step keeps going backwards. And a step that goes back deep and comes back past
  where it was in the next report, twice in a row, is a second writer interleaving its steps (two
  ranks, a duplicated reporter), not a run restarting at every other report: the lower writer's
  reports are left out and counted (``interleaving_note``).
* **Bounded, shape-preserving downsampling.** When the history is full, every second point of
  the older part is dropped (the first and last point of each segment are kept). Repeated thinning
  spaces old points out geometrically while the recent part, which matters most for the
  forecast and for plateau detection, stays dense.

Losses that are not finite are kept (as NaN) because a NaN loss is itself evidence of
divergence; the forecaster drops and counts them.

Eval metrics ride along in :class:`~advisor.core.evals.EvalHistory` (``History.evals``): they are
sparse and irregular, so they are kept per series with their own steps and their own bound, and
persisted in the same object (a history written before they were kept reads as one without evals).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from advisor.core.codec import finite_or_none
from advisor.core.evals import DENSE_TAIL, EvalHistory
from advisor.core.points import Columns, Point
from advisor.model import MALFORMED_BACKS, Curve, ProgressSample, backwards_run

#: a lone step back is a garbled report when the next one jumps more than this many report gaps
GLITCH_GAPS = 3
#: a garbled report this many kept reports or fewer after the last one is a second writer's
#: (the kept ones between them: the run's report, and the garbled one, kept until its next)
GLITCH_AGAIN = 2
#: progress points a history keeps before it thins its older part (a controller's ``--history-points``)
DEFAULT_MAX_POINTS = 300
#: fewer leave too little of a run's shape to fit a curve to
MIN_MAX_POINTS = 16
#: the most a stored ``maxPoints`` may ask for: a status object must still hold the history
MAX_STORED_POINTS = 5000

__all__ = ["History", "Point"]


class History:
    """A bounded, downsampled, restart-segmented loss history.

    Mutable by design (one per job, owned by the core loop); ``curve()`` hands out an immutable
    snapshot.
    """

    __slots__ = (
        "_columns",
        "_interleaving",
        "_low_before",
        "_points",
        "_segments",
        "_since_glitch",
        "dropped",
        "evals",
        "interleaved",
        "last_evals_added",
        "last_taken_back",
        "max_points",
        "restarts",
    )

    def __init__(self, max_points: int = DEFAULT_MAX_POINTS) -> None:
        if max_points < MIN_MAX_POINTS:
            raise ValueError(f"max_points must be >= {MIN_MAX_POINTS}, got {max_points}")
        self.max_points = max_points
        #: the run's eval series (see ``advisor.core.evals``)
        self.evals = EvalHistory()
        #: eval points the latest ``append`` recorded (an evaluation is news even at a known step)
        self.last_evals_added = 0
        #: points the latest ``append`` took back as a garbled report or a second writer's (its
        #: own point then follows the one before them: the step and time it is measured from)
        self.last_taken_back = 0
        self._points: list[Point] = []
        self._segments: list[int] = [0]
        self.restarts = 0
        self.dropped = 0
        #: reports of a second writer interleaving lower steps, left out (``_alternating``); while
        #: ``_interleaving``, one report below the run's step is left out, two in a row are the
        #: run going back (not persisted: after a restore, the second garbled report the glitch
        #: rule drops turns it on again)
        self.interleaved = 0
        self._since_glitch = GLITCH_AGAIN + 1
        self._interleaving = False
        self._low_before = False
        self._columns: Columns | None = None

    # ----------------------------------------------------------------------------------- access
    def __len__(self) -> int:
        return len(self._points)

    @property
    def points(self) -> tuple[Point, ...]:
        return tuple(self._points)

    @property
    def last(self) -> Point | None:
        return self._points[-1] if self._points else None

    def lowest_loss(self) -> tuple[int, float] | None:
        """(step, loss) of the lowest finite loss kept (None without one): where a run that blew
        up was last at its best, the checkpoint a resume should not be later than."""
        return self._cols().lowest

    def last_finite(self) -> tuple[int, float] | None:
        """(step, loss) of the latest point whose loss is finite (None without one)."""
        for p in reversed(self._points):
            if math.isfinite(p.loss):
                return p.step, p.loss
        return None

    def non_finite_run(self) -> int:
        """How many of the latest points in a row have a non-finite loss."""
        n = 0
        for p in reversed(self._points):
            if math.isfinite(p.loss):
                break
            n += 1
        return n

    def last_finite_step(self) -> int | None:
        """The step of the latest point whose loss is finite (None without one)."""
        last = self.last_finite()
        return None if last is None else last[0]

    @property
    def segments(self) -> tuple[int, ...]:
        return tuple(self._segments)

    def backwards_run(self) -> int:
        """How many of the latest reports each went back with no progress in between (see
        ``advisor.model.backwards_run``; ``MALFORMED_BACKS`` or more: malformed progress)."""
        return backwards_run(self._segments, len(self._points))

    def _cols(self) -> Columns:
        cols = self._columns
        if cols is None:
            cols = self._columns = Columns.of(self._points)
        return cols

    def curve(self) -> Curve:
        """An immutable snapshot for the forecaster.

        Built from columns kept up to date on every append (rebuilt only after a thinning), so a
        snapshot costs a few tuple copies rather than a walk over every point: the simulator takes
        one per forecast, tens of thousands of them in a big trace replay."""
        cols = self._cols()
        n = len(self._points)
        return Curve(
            steps=tuple(cols.steps),
            values=tuple(cols.losses),
            times=tuple(cols.times) if n and not cols.missing_times else None,  # type: ignore[arg-type]
            learning_rates=tuple(cols.lrs) if n and not cols.missing_lrs else None,  # type: ignore[arg-type]
            epochs=tuple(cols.epochs) if n and not cols.missing_epochs else None,  # type: ignore[arg-type]
            segments=tuple(self._segments),
        )

    def last_segment(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Steps (as floats, strictly increasing) and losses of the points since the latest
        restart: a cheap read of the recent trend that needs no fit."""
        cols = self._cols()
        start = self._segments[-1]
        return tuple(cols.steps[start:]), tuple(cols.losses[start:])

    # ----------------------------------------------------------------------------------- update
    def append(self, sample: ProgressSample, *, times_trusted_until: float | None = None) -> str:
        """Add a sample; returns what happened: ``appended``, ``restart`` (appended as the
        first point of a new segment), ``malformed`` (a step back at the ``MALFORMED_BACKS``-th
        report in a row with no progress in between: appended as a new segment too, and the
        steps back before it in that run are no longer counted as restarts), ``backwards`` (one
        more such report: it replaces the newest point), ``duplicate``, ``stale`` or
        ``invalid`` (no loss or a negative step: nothing to learn from). Eval metrics in the
        sample are recorded whatever becomes of its loss (an evaluation is logged on its own,
        often at a step already seen); ``last_evals_added`` says how many points they added.
        ``times_trusted_until``: a newest point dated after it (a reporter's clock once far
        ahead, kept by an older version) makes no later sample stale."""
        self.last_evals_added = self.last_taken_back = 0
        last_time = self._points[-1].time if self._points else None
        if last_time is not None and times_trusted_until is not None and last_time > times_trusted_until:
            last_time = None
        stale = sample.time is not None and last_time is not None and sample.time < last_time
        if (
            self._interleaving
            and not self._low_before
            and not stale
            and sample.step is not None
            and self._points
            and sample.step < self._points[-1].step
        ):
            # the lower of two interleaving writers: counted, not kept (its evaluations neither:
            # they would land among the run's at steps it passed long ago)
            self._low_before = True
            self.interleaved += 1
            return "interleaved"
        if not stale:
            self.last_evals_added = self.evals.add(sample)
        if sample.loss is None or sample.step is None or sample.step < 0:
            return "invalid"
        loss = float(sample.loss)
        if not math.isfinite(loss):
            loss = math.nan
        point = Point(
            int(sample.step),
            finite_or_none(sample.time),
            loss,
            finite_or_none(sample.learning_rate),
            finite_or_none(sample.epoch),
        )
        pts = self._points
        last = pts[-1] if pts else None
        outcome = "appended"
        lone_back = last is not None and point.step > last.step and self.backwards_run() == 1
        alternating = self._alternating(point.step) if lone_back else 0
        if last is not None and (
            alternating
            or (
                lone_back
                and point.step > pts[-2].step
                and len(pts) >= 3
                and point.step - last.step > GLITCH_GAPS * max(pts[-2].step - pts[-3].step, 1)
            )
        ):
            # the newest segment is one point, a step back, and this report is past where the run
            # stood before it, many report gaps ahead of that point: no resume from a checkpoint
            # covers that ground in one report, so the step back was a garbled report (a stray
            # "100" after 600), not a restart. Kept, it cut the history the forecast reads to its
            # last two points. (A resume from a checkpoint just behind the last report passes the
            # old step within a gap or two, and stays a restart. A step back after another step
            # back has no report gap to measure the jump by: it is no lone step back.)
            pts.pop()
            self._segments.pop()
            self.restarts -= 1
            self.last_taken_back = 1 + alternating
            self.evals.restart_withdrawn()
            if self._since_glitch <= GLITCH_AGAIN and not alternating:
                # a garbled report again, a report or two after the last: a second writer (told
                # apart as such after a restore, which forgets that it was one); its next lower
                # reports are left out
                self.interleaved += 1
                self._interleaving = True
            self._since_glitch = 0
            if alternating:
                # the steps back before this one alternated as it did: two writers interleave
                # their steps (two ranks, a duplicated reporter), not a run restarting at every
                # other report. The lower writer's earlier reports go too, and its next ones are
                # left out
                for _ in range(alternating):
                    del pts[self._segments.pop()]
                self.restarts -= alternating
                self.interleaved += 1 + alternating
                self._interleaving = True
            self._columns = None
            last = pts[-1]
        if last is not None:
            if point.time is not None and last_time is not None and point.time < last_time:
                return "stale"
            if point.step == last.step:
                return "duplicate"
            if point.step < last.step:
                # (while two writers interleave, the second report below the run's step in a row:
                # the writer above stopped, or never was one, and this is the run going back)
                self._interleaving = self._low_before = False
                run = self.backwards_run() + 1  # the steps back in a row, this one included
                if run > MALFORMED_BACKS:
                    # the step keeps going back: the newest point stands for the malformed
                    # reports so far (its one-point segment stays), bounding what they keep
                    pts.pop()
                    self._columns = None
                    outcome = "backwards"
                else:
                    self._segments.append(len(self._points))
                    if run == MALFORMED_BACKS:
                        # the run's earlier steps back were counted as restarts when they came
                        self.restarts = max(0, self.restarts - (run - 1))
                        outcome = "malformed"
                        self.evals.restart_withdrawn()
                    else:
                        self.restarts += 1
                        outcome = "restart"
                        self.evals.restarted_at(point.step)
        self._low_before = False
        self._since_glitch += 1
        pts.append(point)
        if self._columns is not None:
            self._columns.add(point)
        if len(pts) > self.max_points:
            self._thin()
        return outcome

    def _alternating(self, step: int) -> int:
        """How many earlier alternations a report at ``step``, after a lone step back, completes
        as a second writer's (0: none). An alternation is a one-report step back followed by a
        report past where the run stood before it. Two in a row are two writers when each step
        back is deeper than GLITCH_GAPS times the step forward past the old step (a resume from a
        checkpoint does not go back further than it then gains in one report: a shallow resume
        passes the old step within a report, a deep one takes many); three in a row are, however
        shallow (one rank a report behind the other: 100, 90, 110, 100, 120, ...), as no run
        resumes at every other report and overtakes where it was each time."""
        segs, pts = self._segments, self._points
        pairs = 0  # the 2-point [step back, past the old step] segments just before the newest
        while len(segs) - 2 - pairs >= 1:
            start, end = segs[-2 - pairs], segs[-1 - pairs]
            if end - start != 2 or start < 1 or not pts[start + 1].step > pts[start - 1].step:
                break
            pairs += 1
        if pairs == 0 or not step > pts[-2].step:
            return 0
        if pairs >= 2:
            return pairs
        prev = segs[-2]
        before, low, high = pts[prev - 1].step, pts[prev].step, pts[prev + 1].step
        low2 = pts[-1].step
        deep = before - low > GLITCH_GAPS * (high - before) and high - low2 > GLITCH_GAPS * (step - high)
        return 1 if deep else 0

    def interleaving_note(self) -> str | None:
        """What the status says while two writers' interleaving steps are being told apart."""
        if not self._interleaving or self.interleaved < 2:
            return None
        return (
            f"{self.interleaved} progress reports below the run's step left out: two writers seem to "
            "interleave their steps (two ranks or a duplicated reporter writing one TrainJob's progress)"
        )

    def _thin(self) -> None:
        """Halve the older part until the bound holds (once, for a history that grows a point at
        a time; more often for one restored under a smaller bound), then, if restart boundaries
        alone still overflow it, forget the oldest."""
        while len(self._points) > self.max_points:
            before = len(self._points)
            self._halve_older_part()
            if len(self._points) == before:
                break
        excess = len(self._points) - self.max_points
        if excess > 0:  # so many restarts that their boundaries alone overflow: forget the oldest
            del self._points[:excess]
            self.dropped += excess
            self._segments = [0] + [s - excess for s in self._segments if s - excess > 0]

    def _halve_older_part(self) -> None:
        """Drop every second point of the older part, keeping the first and last point of
        every segment (where a restart came from is part of the shape)."""
        n = len(self._points)
        dense_from = int(n * (1.0 - DENSE_TAIL))
        keep_always = set(self._segments) | {s - 1 for s in self._segments if s > 0} | {0}
        kept: list[Point] = []
        new_segments: list[int] = []
        parity = 0
        for i, p in enumerate(self._points):
            if i in keep_always:
                parity = 0
            if i >= dense_from or i in keep_always or parity % 2 == 0:
                if i in self._segments:
                    new_segments.append(len(kept))
                kept.append(p)
            else:
                self.dropped += 1
            parity += 1
        self._points = kept
        self._columns = None
        self._segments = new_segments or [0]

    # ----------------------------------------------------------------------------- persistence
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe and compact: parallel lists (non-finite losses become null)."""
        pts = self._points
        return {
            "maxPoints": self.max_points,
            "steps": [p.step for p in pts],
            "times": [p.time for p in pts],
            "losses": [p.loss if math.isfinite(p.loss) else None for p in pts],
            "learningRates": [p.learning_rate for p in pts],
            "epochs": [p.epoch for p in pts],
            "segments": list(self._segments),
            "restarts": self.restarts,
            "dropped": self.dropped,
            # the count of a second writer's reports left out (the mode itself is found again)
            "interleaved": self.interleaved,
            "evals": self.evals.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], max_points: int | None = None) -> History:
        """Rebuild from ``to_dict`` output; tolerant of damaged input (a corrupt entry is
        skipped rather than poisoning the whole history).

        ``max_points``, when given, is the reader's bound and wins over the stored one (a
        controller restarted with another ``--history-points`` applies it to what it restores;
        a stored bound is only a hint, and a damaged one must not lift the memory bound)."""
        hist = cls(max_points=max_points if max_points is not None else _stored_bound(data.get("maxPoints")))
        steps = list(data.get("steps") or [])
        n = len(steps)

        def col(name: str) -> list[Any]:
            values = list(data.get(name) or [])
            return values + [None] * (n - len(values))

        times, losses, lrs, epochs = col("times"), col("losses"), col("learningRates"), col("epochs")
        for i in range(n):
            try:
                step = int(steps[i])
            except (TypeError, ValueError):
                continue
            loss = finite_or_none(losses[i])
            hist._points.append(
                Point(
                    step=step,
                    time=finite_or_none(times[i]),
                    loss=math.nan if loss is None else loss,
                    learning_rate=finite_or_none(lrs[i]),
                    epoch=finite_or_none(epochs[i]),
                )
            )
        segments = sorted(
            {int(s) for s in data.get("segments") or [0] if isinstance(s, int) and 0 <= s < max(n, 1)}
        )
        hist._segments = segments if segments and segments[0] == 0 else [0, *segments]
        hist.restarts = int(data.get("restarts", len(hist._segments) - 1) or 0)
        hist.dropped = int(data.get("dropped", 0) or 0)
        interleaved = data.get("interleaved")
        hist.interleaved = interleaved if isinstance(interleaved, int) and interleaved > 0 else 0
        hist.evals = EvalHistory.from_dict(data.get("evals"))
        # the latest report it holds, a loss or an evaluation: a later evaluation was made after it
        latest = [p.step for p in hist._points[-1:]] + [
            s.steps[-1] for name in hist.evals.names if (s := hist.evals.series(name)) is not None and s.steps
        ]
        hist.evals.seen_up_to(max(latest) if latest else None)
        if len(hist._points) > hist.max_points:
            hist._thin()
        return hist


def _stored_bound(value: Any) -> int:
    """A stored ``maxPoints`` read defensively: the default when missing or not a number, and
    clamped to what ``History`` accepts and to a size a status object can hold."""
    try:
        bound = int(value)
    except (TypeError, ValueError, OverflowError):
        return DEFAULT_MAX_POINTS
    return min(max(bound, MIN_MAX_POINTS), MAX_STORED_POINTS)
