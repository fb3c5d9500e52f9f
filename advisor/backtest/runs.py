"""Real runs for the back-test: their steps, losses, eval points, learning rates and times.

A run is one loss history read by ``advisor.sources.files`` (a HF ``trainer_state.json``, a
CSV/TSV or JSONL log, one run per ``curve_id`` of a multi-run dump), plus what the back-test needs
around it: its GPUs (``--gpus``, or a ``gpus`` column in an index CSV), the group of runs it belongs
with (a sweep: an index ``group`` column, the folder of an index ``path``, a pattern on its name,
else the folder that holds it) and its times. A log without times is replayed at a stated constant
throughput.

A run is its folder when its log is a ``trainer_state.json`` (HF's name for every run's log) or
the only log in a folder below the folder given (``lightning_logs/version_0/metrics.csv``): such a
run's group is the folder above it (``<sweep>/<run>/trainer_state.json``: the sweep), as it is the
folder of the logs for runs side by side in one folder. A run read from the state of its latest
``checkpoint-<step>`` folder (stopped before HF's final save; see ``advisor.sources.runlogs``) is
the output folder that checkpoint is in.

A run's name is unique among the runs read, and is what every verdict, decision, report and
timeline is keyed by: its log's path relative to the folder given (``lr1e-3/trainer_state.json``
in HF's ``<sweep>/<run>/trainer_state.json`` layout), a file given alone its file name, with its
folder's when every run of a layout shares it (``hf_f1/trainer_state.json``, as for the run folder
given itself; see ``advisor.sources.runlogs``), then ``#<curve_id>`` for a run of a multi-run dump.

An index CSV gives a run its GPUs, group and labels (see ``advisor.sources.runindex`` for how a
row names its run, and which index wins when ``--index`` and one beside the runs both have a
row for it); the rows that matched no run, and the runs without a row while an index was
in use, are returned with the runs so that the back-test can warn of them.

Why the last segment only: a log whose step goes backwards restarted from a checkpoint, and which
of its segments the platform paid for is not in the file; the last one is the run that finished.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from advisor.backtest.errors import BadRunError, RunError
from advisor.forecast._prep import looks_unsorted
from advisor.forecast.robust import average_repeats
from advisor.series import Direction, direction_of
from advisor.sources.files import LoadedCurve, ParsedLog, SourceError, parse_log
from advisor.sources.loaded_curve import NotALog
from advisor.sources.metric_choice import eval_metrics
from advisor.sources.runindex import (
    NO_GROUP,
    Index,
    Indexes,
    IndexRow,
    IndexUse,
    RunWithoutRow,
    UnmatchedRow,
    index_row,
    is_folder_run,
    suggested_key,
)
from advisor.sources.runlogs import RUN_LOG_SUFFIXES, find_run_logs, run_folder

__all__ = [
    "RUN_SUFFIXES",
    "BadRunError",
    "LoadedRuns",
    "Run",
    "RunError",
    "RunWithoutRow",
    "UnmatchedRow",
    "load_runs",
    "read_runs",
]

#: the group name's end of a run its index row puts in no group (its own, named after it)
NO_GROUP_SUFFIX = " (no group)"
#: files a folder is searched for
RUN_SUFFIXES = RUN_LOG_SUFFIXES
#: a run needs this many points to be replayed at all
MIN_POINTS = 5
#: eval series read per run (a file may log hundreds of eval_* metrics)
MAX_EVAL_SERIES = 16


@dataclass(frozen=True)
class Run:
    """One real run as it happened. ``times`` are seconds since its first report."""

    name: str
    group: str
    gpus: int
    steps: np.ndarray
    values: np.ndarray
    times: np.ndarray
    learning_rates: np.ndarray | None
    epochs: np.ndarray | None
    total_steps: int  # its budget: the planned steps when the file has them, else its last step
    planned_steps: int | None  # what the run itself reports as its total (None: not in the file)
    metric: str  # "loss" or "eval_loss": the series the run reports as its loss
    eval_steps: np.ndarray | None  # the judged eval series: the primary one (``eval_metric``)
    eval_values: np.ndarray | None
    timed: bool  # times from the file, or its stated pace (else an assumed constant throughput)
    source: str
    eval_metric: str = "eval_loss"
    eval_higher: bool = False  # whether ``eval_metric`` improves upwards (accuracy, f1, ...)
    #: the run's other eval series with a direction, (name, steps, values): reported too, as a
    #: trainer reports them, for a rule that names one
    other_evals: tuple[tuple[str, np.ndarray, np.ndarray], ...] = ()
    #: its ``curve_id`` in a multi-run dump (None: its file holds one run)
    curve_id: str | None = None
    #: replayed at the pace its trainer's closing summary states (no per-report times)
    stated_pace: bool = False
    #: the job's labels from the index (``labels`` column), as a policy's selector reads them: a
    #: policy that selects by label (the sample keeps pre-training runs off its plateau rule so) is
    #: back-tested as it would select on the cluster
    labels: tuple[tuple[str, str], ...] = ()
    #: the eval metric its trainer kept its best model by (``metric_for_best_model``, read back from
    #: its trainer_state.json): reported in its progress as the training helper reports it, so that
    #: the policies judge the run by it as on a cluster (None: the run names none)
    declared_metric: str | None = None

    @property
    def duration_s(self) -> float:
        return float(self.times[-1])

    def eval_lower_better(self) -> np.ndarray | None:
        """The judged eval values oriented so that lower is better (a higher-is-better metric
        negated): what every verdict and baseline compares."""
        if self.eval_values is None:
            return None
        return -self.eval_values if self.eval_higher else self.eval_values

    def time_at(self, step: float) -> float:
        """Seconds since the first report when the run reached ``step`` (interpolated)."""
        return float(np.interp(step, self.steps, self.times))


def _last_segment(curve: LoadedCurve) -> slice:
    back = [i for i in range(1, len(curve.steps)) if curve.steps[i] < curve.steps[i - 1]]
    return slice(back[-1] if back else 0, len(curve.steps))


def _one(
    name: str,
    cid: str | None,
    curve: LoadedCurve,
    *,
    gpus: int,
    group: str,
    steps_per_second: float,
    where: str | None = None,
) -> Run:
    """The run ``name`` of ``curve``; a ``BadRunError`` names it by ``where`` (its file's path,
    as a file that cannot be parsed is named), else by ``name``."""
    label = where or name
    back = sum(1 for i in range(1, len(curve.steps)) if curve.steps[i] < curve.steps[i - 1])
    if looks_unsorted(back + 1, len(curve.steps)):
        raise BadRunError(
            f"{label}: step: goes backwards {back} times, more than restarts do: the file is not in the "
            "order the run logged it, which a replay needs (sort it by step)"
        )
    seg = _last_segment(curve)
    steps = np.asarray(curve.steps[seg], dtype=float)
    values = np.asarray(curve.values[seg], dtype=float)
    if steps.size < MIN_POINTS:
        raise BadRunError(f"{label}: steps: {steps.size} points, fewer than the {MIN_POINTS} a replay needs")
    if not np.isfinite(values).any():
        # nothing to forecast or judge (``forecast`` refuses such a file): a bad run, not one no
        # row stops and every row "saves" nothing on
        raise BadRunError(
            f"{label}: {curve.metric}: no usable points (all {values.size} values are NaN or infinite)"
        )
    # a step logged more than once in a row (gradient accumulation logs each micro-batch under
    # one optimizer step): the step's loss is the mean of its reports, as the forecaster merges
    # them (``forecast._prep``); the time, learning rate and epoch are its last report's
    last, values = average_repeats(steps, values)
    steps = steps[last]
    if steps.size < MIN_POINTS:
        raise BadRunError(
            f"{label}: steps: {steps.size} distinct steps, fewer than the {MIN_POINTS} a replay needs"
        )
    times = None
    timed = False
    if curve.times is not None:
        t = np.asarray(curve.times[seg], dtype=float)[last]
        if np.all(np.isfinite(t)) and np.all(np.diff(t) >= 0) and t[-1] > t[0]:
            times, timed = t - t[0], True
    pace = curve.trainer.steps_per_second if curve.trainer is not None else None
    stated = times is None and pace is not None
    if stated:  # the pace the run's own summary states
        times, timed = (steps - steps[0]) / pace, True
    if times is None:  # an assumed constant throughput (--steps-per-second)
        times = (steps - steps[0]) / steps_per_second
    lrs = None if curve.learning_rates is None else np.asarray(curve.learning_rates[seg], dtype=float)[last]
    epochs = None if curve.epochs is None else np.asarray(curve.epochs[seg], dtype=float)[last]
    planned = curve.total_steps if curve.total_steps and curve.total_steps >= steps[-1] else None
    total = planned if planned is not None else int(steps[-1])
    return Run(
        name=name,
        group=group,
        gpus=gpus,
        steps=steps,
        values=values,
        times=times,
        learning_rates=lrs,
        epochs=epochs,
        total_steps=int(total),
        planned_steps=planned,
        metric=curve.metric,
        eval_steps=None,
        eval_values=None,
        timed=timed,
        source=curve.source,
        curve_id=cid,
        stated_pace=stated,
    )


@dataclass(frozen=True)
class LoadedRuns:
    """The runs read, one line per run skipped as bad, and where runs and index rows missed."""

    runs: list[Run]
    skipped: list[str]
    unmatched_rows: list[UnmatchedRow] = field(default_factory=list)
    without_row: list[RunWithoutRow] = field(default_factory=list)
    #: each index CSV runs were looked up in, in the order first used
    indexes: list[IndexUse] = field(default_factory=list)
    #: files found beside the runs that are no training log at all (``NotALog``), with why
    not_logs: list[str] = field(default_factory=list)


def load_runs(
    args: Sequence[Path],
    *,
    gpus: int | None = None,
    steps_per_second: float = 1.0,
    group_pattern: str | None = None,
    index: Path | None = None,
    skip_bad: bool = False,
    on_file: Callable[[Path], None] | None = None,
) -> tuple[list[Run], list[str]]:
    """The runs in ``args`` and, with ``skip_bad``, one line per run skipped (``read_runs``
    without the index's misses)."""
    loaded = read_runs(
        args,
        gpus=gpus,
        steps_per_second=steps_per_second,
        group_pattern=group_pattern,
        index=index,
        skip_bad=skip_bad,
        on_file=on_file,
    )
    return loaded.runs, loaded.skipped


def read_runs(
    args: Sequence[Path],
    *,
    gpus: int | None = None,
    steps_per_second: float = 1.0,
    group_pattern: str | None = None,
    index: Path | None = None,
    skip_bad: bool = False,
    on_file: Callable[[Path], None] | None = None,
) -> LoadedRuns:
    """The runs in ``args`` (files or folders), with ``skip_bad`` one line per run skipped, and
    the index rows that matched no run and the runs without a row while an index was in use.

    Names and index rows: see the module's docstring. GPUs: the index's ``gpus`` column, else
    ``gpus``, else 1. Group: the index's, else the first match of ``group_pattern`` on the run's
    name, else the run's folder (or its file, for a multi-run dump). Raises ``RunError`` (one line:
    file, field, reason) on the first bad run unless ``skip_bad``."""
    if not math.isfinite(steps_per_second) or steps_per_second <= 0:
        raise RunError("--steps-per-second: must be a positive number")
    pattern = re.compile(group_pattern) if group_pattern else None
    runs: list[Run] = []
    skipped: list[str] = []
    not_logs: list[str] = []
    without_row: list[RunWithoutRow] = []
    indexes = Indexes(index)
    uses: dict[Path, _Use] = {}
    try:
        logs = find_run_logs(args)
    except SourceError as exc:
        raise RunError(str(exc)) from None
    file_names = Counter(log.path.name for log in logs)
    per_folder = Counter(log.path.parent for log in logs)
    for log in logs:
        path = log.path
        folder = path.parent
        folder_run = is_folder_run(log, per_folder[folder])
        tables = indexes.of(log)
        parsed: ParsedLog | None = None
        curves: list[tuple[str | None, LoadedCurve]] = []
        try:
            parsed = parse_log(path)
            curves = parsed.judged_curves()
        except SourceError as exc:
            if isinstance(exc, NotALog) and log.in_folder:
                # a results or config file beside the runs is no run (nor a bad one): named, passed over
                not_logs.append(f"{log.name} ({str(exc).removeprefix(f'{path}: ')})")
            elif not skip_bad:
                raise BadRunError(str(exc)) from None
            else:
                skipped.append(str(exc))
        first = len(runs)
        for cid, curve in curves:
            name = f"{log.name}#{cid}" if cid is not None else log.name
            # every index in use is looked up (a row of each that names the run is matched); the
            # first with a row (--index) gives the run its figures
            rows = [(t, index_row(t, log, cid, name, folder_run, file_names)) for t in tables]
            source, found = next(((t, r) for t, r in rows if r is not None), (None, None))
            row = found or IndexRow(None, None)
            match = pattern.search(name) if pattern is not None else None
            group = row.group or (match.group(0) if match else None)
            if row.group == NO_GROUP and match is None:
                group = f"{name}{NO_GROUP_SUFFIX}"  # alone: median stopping has no peers for it
            elif group is None:
                if cid is not None:
                    group = str(path)
                else:
                    group = str(run_folder(path).parent if folder_run else folder)
            try:
                one = _one(
                    name,
                    cid,
                    curve,
                    gpus=row.gpus or gpus or 1,
                    group=group,
                    steps_per_second=steps_per_second,
                    # by its file's path, as a file that cannot be parsed is (its run name is
                    # relative to the folder given: "noperm.csv" among "runs/a/garbage.csv:3")
                    where=f"{path.as_posix()}{'#' + cid if cid is not None else ''}",
                )
                runs.append(replace(one, labels=row.labels) if row.labels else one)
            except BadRunError as exc:
                if not skip_bad:
                    raise
                skipped.append(str(exc))
                continue
            for t, r in rows:
                use = uses.setdefault(t.path, _Use(t))
                use.looked_up += 1
                if t is source:
                    use.runs.append(name)
                elif r is not None:
                    use.overridden += 1
            if tables and found is None:
                key = suggested_key(tables[0], log, cid, folder_run)
                others = tuple(t.path for t in tables[1:])
                without_row.append(RunWithoutRow(name, tables[0].path, key, others))
        if parsed is not None and len(runs) > first:
            _attach_evals(parsed, curves, runs, first)
        if on_file is not None:
            on_file(path)
    if not runs:
        raise RunError("no runs to back-test" + (f" ({len(skipped)} skipped as bad)" if skipped else ""))
    given = None if indexes.given is None else indexes.given.path
    used = [
        IndexUse(
            path,
            len(use.runs),
            use.looked_up,
            path == given,
            columns=use.index.columns,
            fallback_gpus=gpus or 1,
            runs=tuple(use.runs),
            overridden=use.overridden,
        )
        for path, use in uses.items()
    ]
    return LoadedRuns(runs, skipped, indexes.unmatched(), without_row, used, not_logs)


@dataclass
class _Use:
    """How an index was used while reading: runs looked up in it, those it gave their row, and
    those whose row in it --index overrode."""

    index: Index
    looked_up: int = 0
    runs: list[str] = field(default_factory=list)
    overridden: int = 0


def _attach_evals(
    log: ParsedLog, curves: Sequence[tuple[str | None, LoadedCurve]], runs: list[Run], first: int
) -> None:
    """Give the runs read from ``log`` (``runs[first:]``) their eval series, all read in one pass
    over the file's records: every eval metric whose name says its direction (at most
    ``MAX_EVAL_SERIES``; one that cannot be read is left out), the primary one the run's: the
    one the trainer kept its best model by (read back from its trainer_state.json), else
    ``eval_loss``, else the first. It is what the verdict and patience (HF's EarlyStopping watches
    ``metric_for_best_model``) judge, and the core is told of it as the training helper tells a
    controller (its reports name ``metric_for_best_model``)."""
    columns = next((c.columns for _cid, c in curves if c.columns), ())
    names = eval_metrics(columns)
    declared = log.trainer.metric if log.trainer is not None else None
    if declared in names:
        names = [declared, *(n for n in names if n != declared)]
    names = names[:MAX_EVAL_SERIES]
    if curves and curves[0][1].metric != "loss":
        # a log of eval metrics alone: the series it was read by is its primary eval series (and
        # its steps and times the run's), judged as ``forecast`` judges such a log
        names = [curves[0][1].metric, *(n for n in names if n != curves[0][1].metric)][:MAX_EVAL_SERIES]
    per_metric: list[tuple[str, dict[str | None, LoadedCurve]]] = [
        (name, dict(got))
        for name, got in zip(names, log.curves_each(names), strict=True)
        if not isinstance(got, SourceError)
    ]
    # a run's last evaluation often comes after its last training-loss log (at its last step, which
    # logs no loss): kept up to the step the state was written at or the run planned, and reported
    # with its last report (``replay``). Cut at the last loss log, a run of 5 evaluations kept 4
    # and went unjudged by them
    written = log.trainer.global_step if log.trainer is not None else None
    for i in range(first, len(runs)):
        run = runs[i]
        cid = run.curve_id
        end = max(float(run.steps[-1]), float(written or 0), float(run.planned_steps or 0))
        found: list[tuple[str, np.ndarray, np.ndarray]] = []
        for name, evals in per_metric:
            ev = evals.get(cid)
            if ev is None or len(ev) < 2:
                continue
            seg = _last_segment(ev)
            s = np.asarray(ev.steps[seg], dtype=float)
            v = np.asarray(ev.values[seg], dtype=float)
            keep = (s >= run.steps[0]) & (s <= end) & np.isfinite(v)
            s, v = s[keep], v[keep]
            last = np.r_[s[1:] != s[:-1], True]  # one evaluation per step: its last, as above
            if last.sum() >= 2:
                found.append((name, s[last], v[last]))
        if found:
            name, s, v = found[0]
            runs[i] = replace(
                run,
                eval_steps=s,
                eval_values=v,
                eval_metric=name,
                eval_higher=direction_of(name) is Direction.HIGHER,
                other_evals=tuple(found[1:]),
                declared_metric=declared if declared == name else None,
            )
