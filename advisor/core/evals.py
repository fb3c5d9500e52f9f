"""A run's eval metrics as the advisor keeps them: sparse, irregular, bounded.

Eval points come every few hundred steps (HF ``eval_steps``, one per epoch, or whenever the user
likes), so they are few and precious: each one is kept until a series holds ``max_points``, and
then the older part is thinned as the loss history is, always keeping the first, the last and the
best point (the best eval step is the checkpoint worth keeping).

What counts as a new evaluation: a progress source repeats the latest eval values on every update
until the next evaluation (upstream ``trainerStatus`` replaces the whole metrics list each time),
so an evaluation is new when any ``eval_*`` value differs from the one seen last, timings such as
``eval_runtime`` included (two evaluations almost never take the same time). All the eval metrics
with a direction are then recorded at the sample's step (the direction from the name, or from the
governing policy's ``metricDirections``). Names without a direction are watched for that purpose
but not kept as series; names beyond ``max_series`` are counted, never stored, so a
job reporting thousands of metrics cannot grow the object.

Non-finite eval values are kept as NaN (evidence of divergence), like the loss history does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from advisor.core.codec import finite_or_none
from advisor.model import Curve, ProgressSample
from advisor.series import Direction, direction_of, eval_series_name, is_eval_name
from advisor.sources.normalize import canonical_name

__all__ = ["EvalHistory", "EvalSeries"]

#: fraction of the newest points never thinned when a history is full (each eval series, and the
#: run's progress points in :class:`~advisor.core.history.History`)
DENSE_TAIL = 0.35
#: eval names whose last value is remembered (to recognise a new evaluation); more are counted
_MAX_WATCHED = 64


@dataclass(slots=True)
class EvalSeries:
    """One eval metric: parallel lists of steps and values (NaN where it was not finite).

    ``made_after``, parallel too: the step of the report before the one that carried each
    evaluation, when it was behind it (None: unknown, or the report's step is the evaluation's
    own). A live job reports no eval step: an evaluation lands at the first report after it, so
    it was made after that earlier report and by the step it is kept at. A trainer evaluating
    at step 3,000 and reporting every 70 steps had its best evaluation kept at step 3,071, and
    the advice named a checkpoint of step 3,071 where the one saved was 3,000."""

    direction: Direction
    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    made_after: list[int | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.steps)

    def count_to(self, step: int) -> int:
        """How many points lie at or before ``step`` (the points are in step order)."""
        return sum(1 for s in self.steps if s <= step)

    def prefix(self, n: int) -> EvalSeries:
        """A copy of the first ``n`` points."""
        return EvalSeries(self.direction, self.steps[:n], self.values[:n], self.made_after[:n])

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` points (the parallel lists together)."""
        del self.steps[n:], self.values[n:], self.made_after[n:]

    def best_index(self) -> int | None:
        """Index of the best finite value (the earliest of equals), or None."""
        best: int | None = None
        for i, v in enumerate(self.values):
            if not math.isfinite(v):
                continue
            if best is None or (
                v < self.values[best] if self.direction is Direction.LOWER else v > self.values[best]
            ):
                best = i
        return best

    def curve(self) -> Curve:
        return Curve(steps=tuple(float(s) for s in self.steps), values=tuple(self.values))


class EvalHistory:
    """The eval series of one run, bounded in series and in points per series."""

    __slots__ = (
        "_last_seen",
        "_last_step",
        "_overrides",
        "_restart",
        "_series",
        "dropped",
        "ignored",
        "max_points",
        "max_series",
        "nonfinite",
        "undirected",
    )

    def __init__(self, max_points: int = 200, max_series: int = 16) -> None:
        if max_points < 8:
            raise ValueError(f"max_points must be >= 8, got {max_points}")
        self.max_points = max_points
        self.max_series = max_series
        self._series: dict[str, EvalSeries] = {}
        self._last_seen: dict[str, float] = {}
        #: the step of the latest sample seen, with or without an evaluation (``made_after``); not
        #: persisted (it moves with every report, and the stored evals are rewritten only when they
        #: change): a restored history sets it to its latest point's step (``seen_up_to``)
        self._last_step: int | None = None
        #: the step a run went back to (a resume from an earlier checkpoint, or from scratch) while
        #: evaluations past it are kept: those belong to the attempt it abandoned (``current``)
        self._restart: int | None = None
        #: the governing policy's ``metricDirections`` (canonical eval names -> direction)
        self._overrides: dict[str, str] = {}
        #: points thinned away, metrics beyond the series cap, names with no direction, NaN values
        self.dropped = 0
        self.ignored = 0
        self.undirected = 0
        self.nonfinite = 0

    # ----------------------------------------------------------------------------------- access
    @property
    def names(self) -> tuple[str, ...]:
        """The tracked series, in order of first appearance."""
        return tuple(self._series)

    @property
    def overrides(self) -> Mapping[str, str]:
        """The governing policy's ``metricDirections`` in force (canonical names)."""
        return self._overrides

    def series(self, name: str) -> EvalSeries | None:
        return self._series.get(name)

    def current(self, name: str) -> EvalSeries | None:
        """Series ``name`` as the run that goes on now made it: after the run went back to an
        earlier step (``restarted_at``), the evaluations past that step are the abandoned
        attempt's and are left out until the resumed run evaluates (then they are dropped). A run
        released past its best eval and resumed from scratch read "plateaued, P(plateau) 100%"
        on its previous attempt's evaluations at 1% progress (a platform trial), and a policy
        could have released it again on them."""
        series = self._series.get(name)
        if series is None or self._restart is None or not series.steps or series.steps[-1] <= self._restart:
            return series
        return series.prefix(series.count_to(self._restart))

    @property
    def restarted_at_step(self) -> int | None:
        """The step the run went back to while its abandoned attempt's evaluations are kept."""
        return self._restart

    def __len__(self) -> int:
        return sum(len(s) for s in self._series.values())

    def warnings(self) -> tuple[str, ...]:
        out = []
        if self.ignored:
            out.append(
                f"{self.ignored} eval metric value(s) beyond the cap of {self.max_series} series ignored"
            )
        if self.nonfinite:
            out.append(f"{self.nonfinite} non-finite eval value(s) kept as NaN")
        return tuple(out)

    # ----------------------------------------------------------------------------------- update
    def restarted_at(self, step: int) -> None:
        """The run went back to ``step`` (``History.append``'s ``restart``): evaluations past it
        are its abandoned attempt's (``current``)."""
        if any(s.steps and s.steps[-1] > step for s in self._series.values()):
            self._restart = step if self._restart is None else min(self._restart, step)

    def restart_withdrawn(self) -> None:
        """The step back was no restart (a garbled report taken back, a second writer, a step
        that keeps going back): the evaluations past it stand."""
        self._restart = None

    def _drop_abandoned(self) -> None:
        """The resumed run evaluates: the abandoned attempt's evaluations go."""
        if self._restart is None:
            return
        for series in self._series.values():
            series.truncate(series.count_to(self._restart))
        self._restart = None

    def seen_up_to(self, step: int | None) -> None:
        """The step of the latest report a restored history holds: the next evaluation was made
        after it (``EvalSeries.made_after``)."""
        self._last_step = step

    def set_overrides(self, overrides: Mapping[str, str]) -> bool:
        """Take the governing policy's ``metricDirections`` (metric name -> ``lower``/``higher``).

        A name whose own words give no direction is recorded from its next evaluation on (the ones
        before were watched, not kept); a tracked series whose direction the override changes is
        turned at once (its points stay, its best is read the other way). Returns whether a
        tracked series changed direction (its forecasts and the run state must be made again)."""
        canon = {eval_series_name(canonical_name(str(k))): str(v) for k, v in overrides.items()}
        if canon == self._overrides:
            return False
        self._overrides = canon
        changed = False
        for name, series in self._series.items():
            direction = direction_of(name, canon)
            if direction is not None and direction is not series.direction:
                series.direction = direction
                changed = True
        return changed

    @staticmethod
    def _evals_of(sample: ProgressSample) -> dict[str, float]:
        found: dict[str, float] = {}
        for raw, value in sample.metrics.items():
            name = canonical_name(raw)
            if is_eval_name(name):
                found[eval_series_name(name)] = float(value)
        if sample.eval_loss is not None:
            found["eval_loss"] = float(sample.eval_loss)
        return found

    def add(self, sample: ProgressSample) -> int:
        """Record the sample's evaluation if it is a new one; returns the points appended."""
        if sample.step is None or sample.step < 0:
            return 0
        before, self._last_step = self._last_step, int(sample.step)
        evals = self._evals_of(sample)
        if not evals:
            return 0
        new = False
        for name, value in evals.items():
            seen = self._last_seen.get(name)
            same = seen is not None and (seen == value or (math.isnan(seen) and math.isnan(value)))
            if not same:
                new = True
                if name in self._last_seen or len(self._last_seen) < _MAX_WATCHED:
                    self._last_seen[name] = value
        if not new:
            return 0
        after = before if before is not None and before < sample.step else None
        self._drop_abandoned()
        added = 0
        for name, value in evals.items():
            added += self._record(name, int(sample.step), value, after)
        return added

    def _record(self, name: str, step: int, value: float, after: int | None = None) -> int:
        series = self._series.get(name)
        if series is None:
            direction = direction_of(name, self._overrides)
            if direction is None:
                self.undirected += 1
                return 0
            if len(self._series) >= self.max_series:
                self.ignored += 1
                return 0
            series = self._series[name] = EvalSeries(direction)
        if not math.isfinite(value):
            self.nonfinite += 1
            value = math.nan
        if series.steps and step <= series.steps[-1]:
            if step == series.steps[-1]:
                series.values[-1] = value  # a re-evaluation at the same step: the latest stands
                return 0
            # the run went back to an earlier checkpoint: the evaluations of the abandoned attempt
            # after it are superseded by the ones the resumed run will make
            series.truncate(series.count_to(step - 1))
        series.steps.append(step)
        series.values.append(value)
        series.made_after.append(after)
        if len(series) > self.max_points:
            self._thin(series)
        return 1

    def _thin(self, series: EvalSeries) -> None:
        n = len(series)
        dense_from = int(n * (1.0 - DENSE_TAIL))
        best = series.best_index()
        keep = [i for i in range(n) if i >= dense_from or i == 0 or i == best or i % 2 == 0]
        self.dropped += n - len(keep)
        series.steps = [series.steps[i] for i in keep]
        series.values = [series.values[i] for i in keep]
        series.made_after = [series.made_after[i] for i in keep]

    # ----------------------------------------------------------------------------- persistence
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: one entry of parallel lists per series (NaN becomes null)."""
        return {
            "maxPoints": self.max_points,
            "series": {
                name: {
                    "direction": s.direction.value,
                    "steps": list(s.steps),
                    "values": [v if math.isfinite(v) else None for v in s.values],
                    "madeAfter": list(s.made_after),
                }
                for name, s in self._series.items()
            },
            "lastSeen": {k: (v if math.isfinite(v) else None) for k, v in self._last_seen.items()},
            "restartedAt": self._restart,
            "dropped": self.dropped,
            "ignored": self.ignored,
            "undirected": self.undirected,
            "nonfinite": self.nonfinite,
        }

    @classmethod
    def from_dict(cls, data: Any, *, max_series: int = 16) -> EvalHistory:
        """Rebuild from ``to_dict`` output, or an empty history from anything else (a history
        written before eval metrics were kept has none). A damaged entry is skipped."""
        if not isinstance(data, Mapping):
            return cls(max_series=max_series)
        try:
            max_points = max(8, int(data.get("maxPoints", 200) or 200))
        except (TypeError, ValueError):
            max_points = 200
        hist = cls(max_points=max_points, max_series=max_series)
        raw_series = data.get("series")
        for name, entry in raw_series.items() if isinstance(raw_series, Mapping) else ():
            if not isinstance(entry, Mapping) or len(hist._series) >= max_series:
                continue
            try:
                direction = Direction(str(entry.get("direction")))
            except ValueError:
                continue
            series = EvalSeries(direction)
            last = -1
            steps, values = entry.get("steps") or [], entry.get("values") or []
            # written before ``made_after`` was kept (or damaged): unknown for every point
            afters = entry.get("madeAfter")
            if not isinstance(afters, list) or len(afters) != len(steps):
                afters = [None] * len(steps)
            for step, value, after in zip(steps, values, afters, strict=False):
                s = finite_or_none(step)
                if s is None or int(s) <= last:
                    continue
                v = finite_or_none(value)
                a = finite_or_none(after)
                series.steps.append(int(s))
                series.values.append(math.nan if v is None else v)
                series.made_after.append(int(a) if a is not None and 0 <= a < s else None)
                last = int(s)
            hist._series[str(name)] = series
        seen = data.get("lastSeen")
        for name, value in seen.items() if isinstance(seen, Mapping) else ():
            if len(hist._last_seen) < _MAX_WATCHED:
                v = finite_or_none(value)
                hist._last_seen[str(name)] = math.nan if v is None else v
        restart = finite_or_none(data.get("restartedAt"))
        hist._restart = int(restart) if restart is not None and restart >= 0 else None
        for attr in ("dropped", "ignored", "undirected", "nonfinite"):
            v = finite_or_none(data.get(attr))
            setattr(hist, attr, int(v) if v is not None and v >= 0 else 0)
        return hist
