"""What reading a loss log gives: a ``LoadedCurve``, or a ``SourceError`` that says why not.

``LoadedCurve`` is the history as the file holds it (restarts kept, not sorted away), with what
the file says beside it: its total, its other series' names, its trainer's checkpoints, and the
loader's warnings; ``upto`` cuts it where a forecast replayed at an earlier step would have
stood, recounting the warnings that count points. ``SourceError`` is one line naming the file,
the line or entry, and the reason; ``listing`` names what a file holds in such a line.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from advisor.forecast._prep import looks_unsorted
from advisor.model import Curve
from advisor.sources.trainer_choice import TrainerChoice

__all__ = ["LoadedCurve", "NotALog", "SourceError", "backwards_warning", "listing", "nonfinite_warning"]


class SourceError(Exception):
    """A file that cannot be read as a loss history; ``str()`` is one line: ``file:line: reason``.

    ``series``: when the file was read but holds no series by the name asked for (or, asked for
    none, no loss), the series it does hold (``file_series``), else None."""

    def __init__(
        self,
        path: str | Path,
        reason: str,
        *,
        line: int | None = None,
        where: str | None = None,
        series: Sequence[str] | None = None,
    ):
        self.path = str(path)
        self.line = line
        self.reason = reason
        self.series = None if series is None else tuple(series)
        location = f":{line}" if line is not None else (f" ({where})" if where else "")
        super().__init__(f"{self.path}{location}: {reason}")


class NotALog(SourceError):
    """A file that is no training log at all: one JSON object without a ``log_history`` (a model's
    config.json, HF's all_results.json, a notes file beside the runs). Found in a folder of runs,
    it is passed over and named, not a bad run (``compare`` and ``backtest`` alike)."""


def nonfinite_warning(count: int, metric: str) -> str:
    """The loader's word on a file's non-finite values (recounted for a cut by ``upto``)."""
    return f"{count} non-finite {metric} values"


def backwards_warning(count: int) -> str:
    """The loader's word on a file's steps going back (recounted for a cut by ``upto``)."""
    # what it means (restarts or an unsorted file) is the forecaster's call, said in its warnings
    return f"step goes backwards {count} time(s) in the file"


#: the two warnings above, as ``upto`` finds them again (a long table's count is after binning)
_NONFINITE = re.compile(r"(\d+) non-finite (.+) values( \(after binning\))?")
_BACKWARDS = re.compile(r"step goes backwards \d+ time\(s\) in the file")


@dataclass(frozen=True, slots=True)
class LoadedCurve:
    """A loss history read from a file, in file order (restarts are kept, not sorted away)."""

    steps: tuple[float, ...]
    values: tuple[float, ...]
    times: tuple[float, ...] | None = None
    learning_rates: tuple[float, ...] | None = None
    epochs: tuple[float, ...] | None = None
    total_steps: int | None = None
    metric: str = "loss"
    source: str = ""
    warnings: tuple[str, ...] = ()
    #: every field name the file has (what other series it could be read for)
    columns: tuple[str, ...] = ()
    #: what a HF trainer_state.json says of its saved checkpoints and its best model (None: the
    #: file states neither, or is no trainer_state.json)
    trainer: TrainerChoice | None = None

    def __len__(self) -> int:
        return len(self.steps)

    def upto(self, step: float) -> LoadedCurve:
        """The history as it stood when training first passed ``step`` (the prefix up to it)."""
        end = next((i for i, s in enumerate(self.steps) if s > step), len(self.steps))

        def cut(series: tuple[float, ...] | None) -> tuple[float, ...] | None:
            return None if series is None else series[:end]

        # the file's counts of non-finite values and of backward steps are recounted for the
        # prefix: a warning about what came after the cut tells what the forecast, made before
        # it, could not know. The warning names the series by its column (``train/loss``), not
        # by ``metric`` (``loss``)
        whole = sum(1 for v in self.values if not math.isfinite(v))
        nonfinite = sum(1 for v in self.values[:end] if not math.isfinite(v))
        backwards = sum(1 for a, b in itertools.pairwise(self.steps[:end]) if b < a)
        warnings: list[str] = []
        for w in self.warnings:
            if (found := _NONFINITE.fullmatch(w)) is not None and int(found[1]) == whole:
                w = nonfinite_warning(nonfinite, found[2]) + (found[3] or "") if nonfinite else ""
            elif _BACKWARDS.fullmatch(w) is not None:
                w = backwards_warning(backwards) if backwards else ""
            if w:
                warnings.append(w)
        return replace(
            self,
            warnings=tuple(warnings),
            steps=self.steps[:end],
            values=self.values[:end],
            times=cut(self.times),
            learning_rates=cut(self.learning_rates),
            epochs=cut(self.epochs),
        )

    def in_step_order(self) -> LoadedCurve:
        """The history sorted by step when its steps go back more often than restarts do (a
        table exported unsorted); else itself. The forecaster sorts such a history for its fit,
        but what is shown beside it (the progress, the JSON's first and last step, the plot's
        line through the reports) read the file's order: "step 69" of a run logged to step 300,
        and a line scribbled back and forth across the chart. A resumed run's few steps back are
        kept: they are its restarts. Stable: repeats of a step keep their order."""
        back = sum(1 for a, b in itertools.pairwise(self.steps) if b < a)
        if not looks_unsorted(back + 1, len(self.steps)):
            return self
        order = sorted(range(len(self.steps)), key=self.steps.__getitem__)
        said = f"step goes backwards {back} times in the file, more often than restarts do: sorted by step"
        warnings = tuple(said if _BACKWARDS.fullmatch(w) else w for w in self.warnings)
        return replace(self._picked(order), warnings=warnings if said in warnings else (*warnings, said))

    def _picked(self, rows: Sequence[int]) -> LoadedCurve:
        """The history of the points at ``rows``, in that order, every per-point field alike."""

        def pick(series: tuple[float, ...] | None) -> tuple[float, ...] | None:
            return None if series is None else tuple(series[i] for i in rows)

        return replace(
            self,
            steps=tuple(self.steps[i] for i in rows),
            values=tuple(self.values[i] for i in rows),
            times=pick(self.times),
            learning_rates=pick(self.learning_rates),
            epochs=pick(self.epochs),
        )

    def resumed(self) -> LoadedCurve:
        """The series as the run that went on made it: at each step back (a resume from an earlier
        checkpoint), the points at or past the step it resumed at belong to the attempt it
        abandoned and are left out, as the forecast joins a resumed history and as the controller
        judges a run that went back. Read whole, a resumed run's best evaluation was counted
        "9 evaluations ago" with the lost attempt's; a history whose steps go back more often than
        restarts do is no resumed run (``in_step_order``) and is left as it is."""
        back = sum(1 for a, b in itertools.pairwise(self.steps) if b < a)
        if not back or looks_unsorted(back + 1, len(self.steps)):
            return self
        keep: list[int] = []
        for i, step in enumerate(self.steps):
            if keep and step <= self.steps[keep[-1]]:
                while keep and self.steps[keep[-1]] >= step:
                    keep.pop()
            keep.append(i)
        return self._picked(keep)

    def as_curve(self) -> Curve:
        """The shared ``Curve`` type, with a new segment wherever the step goes backwards."""
        segments = (0, *(i for i in range(1, len(self.steps)) if self.steps[i] < self.steps[i - 1]))
        return Curve(
            steps=self.steps,
            values=self.values,
            times=self.times,
            learning_rates=self.learning_rates,
            epochs=self.epochs,
            segments=segments,
        )


#: file names every run of a layout shares (HF's output folders, Lightning's version folders): a
#: curve read from one is named with its folder too (a sweep's plots and headers all read
#: "trainer_state.json", the run's folder, its only name, nowhere)
SHARED_LOG_NAMES = frozenset({"trainer_state.json", "metrics.csv", "progress.csv", "log.txt", "train.log"})


def shown_name(path: str | Path) -> str:
    """A log's name in a curve's ``source``: its file name, with its folder's when the file name
    is one every run of a layout shares (``ft-overfit/trainer_state.json``)."""
    p = Path(path)
    if p.name.lower().removesuffix(".gz") in SHARED_LOG_NAMES and p.parent.name not in ("", ".", ".."):
        return f"{p.parent.name}/{p.name}"
    return p.name


def listing(items: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(str(i) for i in items[:limit])
    return (shown + f", ... ({len(items)} in all)" if len(items) > limit else shown) or "nothing"
