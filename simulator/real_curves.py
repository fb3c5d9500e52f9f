"""Curves drawn from real runs (``simulate --curves DIR``) instead of the synthetic library.

Why: the synthetic library's law and pathology mix are the project's own assumptions; a verdict that
holds only on them says little about a cluster whose runs look otherwise. Here each trace job's
curve is one real run's logged loss (and learning rate when logged), drawn at random per job and
time-scaled to the job: the run's progress (its step over its last logged step) is laid over the
job's steps, so a 20-minute log can stand for an 8-hour job. The job reports the logged values as
they are (their own noise included), interpolated between logged points.

A run that logged an eval loss (a ``trainer_state.json`` with ``eval_loss`` entries) is replayed
with it: each report carries the latest evaluation at or before its step, laid over the job's
steps as the training loss is, and the run is judged by it, as the policies and the synthetic
library's eval runs are. A ``trainer_state.json`` that names its best model by another eval metric
(its ``best_metric`` is the ``eval_f1`` logged at its ``best_model_checkpoint``) is replayed with
that one instead, reported by its name: the run is judged by what its trainer judged it by.

The hidden truth for the verdicts is the run's own later record of its judged series (the eval
loss when it logged at least ``MIN_JUDGED_EVALS`` evaluations, else the training loss), judged as
the back-test judges it: smoothed by a centred running median over 5% of its points, its best later
value read past the depth the log's noise alone gives it (``advisor.judging``). A real curve has no
known pathology (``pathology`` is ``"real"``, counted as healthy, so a release near its end is no
saving) and no hang. Its ``workload_type``, the kind of run its user knows it is (which ``--label-rate``
labels a job with), is the ``workload-type`` label an index CSV beside the runs gives it (``index.csv``
or ``runs.csv``, its rows matched to runs as the back-test matches them:
``advisor.sources.runindex``), else ``fine-tuning``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from advisor.judging import (
    MIN_JUDGED_EVALS,
    Smoothing,
    learning_end_index,
    left_after,
    smoothed,
    smoothing_of,
)
from advisor.series import Direction, direction_of
from advisor.sources.files import ParsedLog, SourceError, parse_log
from advisor.sources.runindex import Indexes, RunError, index_row, is_folder_run
from advisor.sources.runlogs import RunLog, find_run_logs
from simulator.curves import WORKLOAD_TYPE_LABEL, WORKLOAD_TYPES

__all__ = ["RealCurve", "RealCurveLibrary"]

_MIN_POINTS = 10
#: evaluations a run needs for its eval loss to be replayed (fewer say nothing of a trend); it is
#: judged by them from ``MIN_JUDGED_EVALS`` on, as the back-test judges a run
_MIN_EVALS = 3


@dataclass(frozen=True)
class RealCurve:
    """One real run laid over a job of ``total_steps`` (the same interface as ``CurveSpec``)."""

    total_steps: int
    source: str
    xs: np.ndarray = field(repr=False)  # the run's progress at its logged points, in [0, 1]
    values: np.ndarray = field(repr=False)
    lrs: np.ndarray | None = field(default=None, repr=False)  # relative to the run's peak
    #: the run's evaluations (progress in [0, 1] on the training run's scale, and the eval loss)
    eval_xs: np.ndarray | None = field(default=None, repr=False)
    eval_values: np.ndarray | None = field(default=None, repr=False)
    #: the eval series' name, as each report carries it, and whether it improves upwards
    eval_metric: str = "eval_loss"
    eval_higher: bool = False
    pathology: str = "real"
    workload_type: str = "fine-tuning"
    hang_step: int | None = None
    _truth_xs: np.ndarray = field(init=False, repr=False, compare=False)
    _truth: np.ndarray = field(init=False, repr=False, compare=False)
    _truth_noise: Smoothing = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_eval = self.has_evals and self.eval_xs is not None and self.eval_xs.size >= MIN_JUDGED_EVALS
        judged = (self.eval_xs, self.eval_values) if by_eval else (self.xs, self.values)
        truth = np.asarray(judged[1], dtype=float)
        if by_eval and self.eval_higher:
            truth = -truth  # the verdicts read lower as better (as the back-test orients a score)
        object.__setattr__(self, "_truth_xs", judged[0])
        object.__setattr__(self, "_truth", smoothed(truth))
        object.__setattr__(self, "_truth_noise", smoothing_of(truth))

    @property
    def has_evals(self) -> bool:
        return self.eval_xs is not None and self.eval_values is not None and self.eval_xs.size > 0

    @property
    def logs_learning_rate(self) -> bool:
        """Whether the run logged its learning rate; a job following a run that did not reports
        none (rather than a constant one it never had)."""
        return self.lrs is not None

    def _x(self, steps: np.ndarray | float) -> np.ndarray:
        return np.clip(np.asarray(steps, dtype=float) / self.total_steps, 0.0, 1.0)

    def reports(self, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = self._x(steps)
        loss = np.interp(x, self.xs, self.values)
        lr = np.interp(x, self.xs, self.lrs) if self.lrs is not None else np.ones_like(x)
        return np.asarray(loss), np.asarray(lr)

    def observed(self, step: int) -> float:
        return float(self.reports(np.array([step]))[0][0])

    def learning_rate(self, step: int, peak: float = 3e-4) -> float:
        return float(self.reports(np.array([step]))[1][0]) * peak

    def eval_observed(self, step: int) -> float | None:
        """The run's latest evaluation at or before ``step`` (None before its first, or for a run
        that logged none), as every report carries it until the next."""
        if self.eval_xs is None or self.eval_values is None or not self.has_evals:
            return None
        i = int(np.searchsorted(self.eval_xs, float(self._x(step)), side="right")) - 1
        return None if i < 0 else float(self.eval_values[i])

    def remaining_improvement(self, step: float) -> float:
        # what the run stood at by ``step`` against its later record, as the back-test reads it
        # (``advisor.judging.left_after``: one definition for both)
        x = float(self._x(step))
        left, _, _ = left_after(
            self._truth_xs, self._truth, x, keep_best=self.has_evals, noise=self._truth_noise
        )
        return left

    def learning_end_step(self) -> int:
        first = learning_end_index(self._truth, keep_best=self.has_evals, noise=self._truth_noise)
        if first >= self._truth.size:
            return self.total_steps
        return round(float(self._truth_xs[first]) * self.total_steps)

    def non_finite_from(self) -> int | None:
        bad = np.flatnonzero(~np.isfinite(self.values))
        return None if bad.size == 0 else int(self.xs[max(0, int(bad[0]) - 1)] * self.total_steps)


class RealCurveLibrary:
    """Real runs read from a folder (the run logs under it, found and named as ``backtest`` finds
    and names them; any format ``advisor.sources`` reads; a multi-run dump gives one curve per
    ``curve_id``), drawn uniformly per job."""

    def __init__(self, folder: Path) -> None:
        if not folder.exists():
            raise ValueError(f"--curves: no such folder: {folder}")
        if not folder.is_dir():
            raise ValueError(f"{folder}: --curves needs a folder of runs")
        self.folder = folder
        self.curves: list[_Run] = []
        self.skipped = 0
        try:
            logs = find_run_logs([folder])
        except SourceError:
            logs = []  # no run log in it: said below
        indexes = Indexes(None)
        file_names = Counter(log.path.name for log in logs)
        per_folder = Counter(log.path.parent for log in logs)
        for log in logs:
            path = log.path
            try:
                parsed = parse_log(path)
                loaded = parsed.judged_curves()
            except SourceError:
                self.skipped += 1
                continue
            eval_metric = _judged_eval(parsed)
            evals = _eval_series(parsed, eval_metric)
            for cid, curve in loaded:
                steps = np.asarray(curve.steps, dtype=float)
                back = np.nonzero(np.diff(steps) < 0)[0]
                start = int(back[-1]) + 1 if back.size else 0  # the last segment: the run that finished
                steps = steps[start:]
                values = np.asarray(curve.values[start:], dtype=float)
                if steps.size < _MIN_POINTS or steps[-1] <= 0 or np.any(np.diff(steps) <= 0):
                    self.skipped += 1
                    continue
                lrs = None
                if curve.learning_rates is not None:
                    lr = np.asarray(curve.learning_rates[start:], dtype=float)
                    peak = np.nanmax(lr) if np.isfinite(lr).any() else 0.0
                    lrs = np.where(np.isfinite(lr), lr / peak, 1.0) if peak > 0 else None
                name = f"{log.name}#{cid}" if cid is not None else log.name
                alone = is_folder_run(log, per_folder[path.parent])
                kind = _workload_type(indexes, log, cid, name, alone, file_names)
                ev = evals.get(cid)
                eval_xs = eval_values = None
                if ev is not None:
                    keep = (ev[0] >= steps[0]) & (ev[0] <= steps[-1]) & np.isfinite(ev[1])
                    if int(keep.sum()) >= _MIN_EVALS:
                        eval_xs, eval_values = ev[0][keep] / steps[-1], ev[1][keep]
                self.curves.append(
                    _Run(name, steps / steps[-1], values, lrs, eval_xs, eval_values, eval_metric, kind)
                )
        if not self.curves:
            raise ValueError(f"{folder}: no run with {_MIN_POINTS} or more points to draw curves from")

    @property
    def description(self) -> str:
        skipped = f"{self.skipped} unreadable or too short skipped"
        evals = sum(1 for run in self.curves if run.eval_xs is not None)
        told = Counter(run.workload_type for run in self.curves if run.workload_type is not None)
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(told.items()))
        said = f", workload-type from an index: {kinds}" if told else ""
        return f"{len(self.curves)} real runs from {self.folder}, {evals} with an eval loss{said} ({skipped})"

    def draw(
        self, rng: np.random.Generator, total_steps: int, seed: int, workload_type: str | None = None
    ) -> RealCurve:
        """One real run, drawn uniformly; with ``workload_type`` (a trace's ``workload_type``
        column), among the runs of that kind when there are any."""
        pool = self.curves
        if workload_type is not None:
            kind = [run for run in self.curves if (run.workload_type or "fine-tuning") == workload_type]
            pool = kind or pool
        run = pool[int(rng.integers(len(pool)))]
        return RealCurve(
            total_steps=int(total_steps),
            source=run.name,
            xs=run.xs,
            values=run.values,
            lrs=run.lrs,
            eval_xs=run.eval_xs,
            eval_values=run.eval_values,
            eval_metric=run.eval_metric,
            eval_higher=direction_of(run.eval_metric) is Direction.HIGHER,
            workload_type=run.workload_type or "fine-tuning",
        )


@dataclass(frozen=True)
class _Run:
    """One real run as read: its training loss (and learning rate) and its evaluations."""

    name: str
    xs: np.ndarray
    values: np.ndarray
    lrs: np.ndarray | None
    eval_xs: np.ndarray | None
    eval_values: np.ndarray | None
    eval_metric: str = "eval_loss"
    #: the ``workload-type`` its index row gives it (None: no row says)
    workload_type: str | None = None


def _workload_type(
    indexes: Indexes, log: RunLog, cid: str | None, name: str, alone: bool, file_names: Counter[str]
) -> str | None:
    """The ``workload-type`` label the first index with a row for the run gives it, when it is
    one the simulator knows (``WORKLOAD_TYPES``). An index that cannot be read, or cannot say which
    run a row names, is an error, as in the back-test (a ``ValueError`` here, the library's)."""
    try:
        for table in indexes.of(log):
            row = index_row(table, log, cid, name, alone, file_names)
            if row is None:
                continue
            kind = dict(row.labels).get(WORKLOAD_TYPE_LABEL)
            if kind is not None and kind not in WORKLOAD_TYPES:
                raise ValueError(
                    f"{table.path}: run {name!r}: {WORKLOAD_TYPE_LABEL}={kind!r}: expected one of "
                    f"{', '.join(WORKLOAD_TYPES)}"
                )
            return kind
    except RunError as exc:
        raise ValueError(str(exc)) from None
    return None


def _judged_eval(log: ParsedLog) -> str:
    """The eval series a run is replayed with: the one its trainer kept its best model by (read
    back from its trainer_state.json) when its name says a direction, else its eval loss."""
    declared = log.trainer.metric if log.trainer is not None else None
    return declared if declared is not None and direction_of(declared) is not None else "eval_loss"


def _eval_series(log: ParsedLog, metric: str) -> dict[str | None, tuple[np.ndarray, np.ndarray]]:
    """``curve id -> (steps, values)`` of ``metric`` in the runs of ``log`` that logged it."""
    try:
        loaded = log.curves(metric)
    except SourceError:
        return {}
    out: dict[str | None, tuple[np.ndarray, np.ndarray]] = {}
    for cid, curve in loaded:
        steps = np.asarray(curve.steps, dtype=float)
        values = np.asarray(curve.values, dtype=float)
        order = np.argsort(steps, kind="stable")
        steps, values = steps[order], values[order]
        last = np.r_[steps[1:] != steps[:-1], True]  # one evaluation per step: the last logged
        out[cid] = (steps[last], values[last])
    return out
