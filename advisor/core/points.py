"""A run's stored points, and the same points as the forecaster's parallel columns.

Kept apart from :mod:`advisor.core.history`, which decides *which* points a run keeps (restarts,
glitches, thinning); this module only holds them, and keeps the column layout and the lowest loss
in step with every point added, so that a forecast never rebuilds them from the whole history.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Columns", "Point"]


@dataclass(frozen=True, slots=True)
class Point:
    """One stored observation (the subset of a ProgressSample the forecaster uses)."""

    step: int
    time: float | None
    loss: float
    learning_rate: float | None = None
    epoch: float | None = None


class Columns:
    """The history as parallel lists (the forecaster's layout), kept in step with the points."""

    __slots__ = (
        "epochs",
        "losses",
        "lowest",
        "lrs",
        "missing_epochs",
        "missing_lrs",
        "missing_times",
        "steps",
        "times",
    )

    def __init__(self) -> None:
        self.steps: list[float] = []
        self.losses: list[float] = []
        self.times: list[float | None] = []
        self.lrs: list[float | None] = []
        self.epochs: list[float | None] = []
        self.missing_times = 0
        self.missing_lrs = 0
        self.missing_epochs = 0
        #: (step, loss) of the lowest finite loss, the first of equals (None without one)
        self.lowest: tuple[int, float] | None = None

    @classmethod
    def of(cls, points: list[Point]) -> Columns:
        cols = cls()
        cols.steps = [float(p.step) for p in points]
        cols.losses = [p.loss for p in points]
        cols.times = [p.time for p in points]
        cols.lrs = [p.learning_rate for p in points]
        cols.epochs = [p.epoch for p in points]
        cols.missing_times = cols.times.count(None)
        cols.missing_lrs = cols.lrs.count(None)
        cols.missing_epochs = cols.epochs.count(None)
        for p in points:
            cols._lower(p)
        return cols

    def _lower(self, p: Point) -> None:
        if math.isfinite(p.loss) and (self.lowest is None or p.loss < self.lowest[1]):
            self.lowest = (p.step, p.loss)

    def add(self, p: Point) -> None:
        self.steps.append(float(p.step))
        self.losses.append(p.loss)
        self.times.append(p.time)
        self.lrs.append(p.learning_rate)
        self.epochs.append(p.epoch)
        if p.time is None:
            self.missing_times += 1
        if p.learning_rate is None:
            self.missing_lrs += 1
        if p.epoch is None:
            self.missing_epochs += 1
        self._lower(p)
