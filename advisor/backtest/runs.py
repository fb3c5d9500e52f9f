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
in HF's ``<sweep>/<run>/trainer_state.json`` layout), a file given alone its file name (see
``advisor.sources.runlogs``), then ``#<curve_id>`` for a run of a multi-run dump.

An index CSV (``index.csv`` or ``runs.csv``; the nearest one in the run's folder or a folder above
it, up to the folder given; else ``--index``) gives a run the row whose run column is, the first
that matches: its ``curve_id`` (a multi-run dump); its log's path relative to the index's folder,
with or without its suffix (``lr1e-3/trainer_state.json``, ``lr1e-3/trainer_state``); the run's
folder (``lr1e-3``) when the run is its folder; the run's name; its file name, with or without its
suffix, when no other run's log has that file name. A row that names by file name several runs'
logs (``trainer_state.json``) is an error that says which path to give instead. Its ``labels``
(``workload-type=pretraining;team=a``) are the job's labels, which a policy's selector reads: a
policy that keeps pre-training runs off its plateau rule by label is back-tested as it selects.

Why the last segment only: a log whose step goes backwards restarted from a checkpoint, and which
of its segments the platform paid for is not in the file; the last one is the run that finished.
"""

from __future__ import annotations

import csv
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from advisor.forecast._prep import looks_unsorted
from advisor.series import Direction, direction_of
from advisor.sources.assemble import eval_metrics
from advisor.sources.files import LoadedCurve, ParsedLog, SourceError, parse_log
from advisor.sources.runlogs import INDEX_NAMES, RUN_LOG_SUFFIXES, RunLog, find_run_logs, run_folder

__all__ = ["RUN_SUFFIXES", "BadRunError", "Run", "RunError", "load_runs"]

#: files a folder is searched for
RUN_SUFFIXES = RUN_LOG_SUFFIXES
#: a run needs this many points to be replayed at all
MIN_POINTS = 5
#: eval series read per run (a file may log hundreds of eval_* metrics)
MAX_EVAL_SERIES = 16


class RunError(Exception):
    """Runs that cannot be back-tested; ``str()`` is one line: ``file: field: reason``."""


class BadRunError(RunError):
    """One run that cannot be back-tested, which ``skip_bad`` skips. Apart from ``RunError``
    because only this kind is worth a hint to skip it: an empty folder, a bad index or flag
    fails with or without skipping."""


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
    timed: bool  # times from the file (else a constant throughput)
    source: str
    eval_metric: str = "eval_loss"
    eval_higher: bool = False  # whether ``eval_metric`` improves upwards (accuracy, f1, ...)
    #: the run's other eval series with a direction, (name, steps, values): reported too, as a
    #: trainer reports them, for a rule that names one
    other_evals: tuple[tuple[str, np.ndarray, np.ndarray], ...] = ()
    #: its ``curve_id`` in a multi-run dump (None: its file holds one run)
    curve_id: str | None = None
    #: the job's labels from the index (``labels`` column), as a policy's selector reads them: a
    #: policy that selects by label (the sample keeps pre-training runs off its plateau rule so) is
    #: back-tested as it would select on the cluster
    labels: tuple[tuple[str, str], ...] = ()

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


@dataclass(frozen=True)
class _IndexRow:
    gpus: int | None
    group: str | None
    labels: tuple[tuple[str, str], ...] = ()


def _last_segment(curve: LoadedCurve) -> slice:
    back = [i for i in range(1, len(curve.steps)) if curve.steps[i] < curve.steps[i - 1]]
    return slice(back[-1] if back else 0, len(curve.steps))


def _labels(path: Path, line: int, text: str) -> tuple[tuple[str, str], ...]:
    """``workload-type=pretraining;team=a`` as label pairs, or an error naming the cell."""
    out: list[tuple[str, str]] = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise RunError(f"{path}:{line}: labels: not key=value: {part!r} (pairs are separated by ';')")
        out.append((key.strip(), value.strip()))
    return tuple(out)


def _read_index(path: Path) -> dict[str, _IndexRow]:
    """``run key -> (gpus, group, labels)`` from an index CSV: the key column is ``curve_id``,
    ``run``, ``name`` or ``file``; ``gpus``, ``group`` (or ``repo`` / ``sweep``, or ``path``, whose
    folder is the group) and ``labels`` (``key=value`` pairs separated by ``;``: the job's labels, as
    a policy's selector reads them) optional."""
    try:
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            key = next((k for k in ("curve_id", "run", "name", "file") if k in header), None)
            if key is None:
                raise RunError(f"{path}: header: no run column (curve_id, run, name or file)")
            out: dict[str, _IndexRow] = {}
            for line, row in enumerate(reader, start=2):
                gpus_raw = (row.get("gpus") or "").strip()
                gpus = None
                if gpus_raw:
                    if not gpus_raw.isdigit() or int(gpus_raw) < 1:
                        raise RunError(f"{path}:{line}: gpus: not a positive whole number: {gpus_raw!r}")
                    gpus = int(gpus_raw)
                group = (row.get("group") or row.get("repo") or row.get("sweep") or "").strip() or None
                if group is None and (row.get("path") or "").strip():
                    group = str(Path(row["path"].strip()).parent)
                labels = _labels(path, line, row.get("labels") or "")
                out[(row.get(key) or "").strip()] = _IndexRow(gpus, group, labels)
            return out
    except OSError as exc:
        raise RunError(f"{path}: {exc.strerror or exc}") from None


def _one(
    name: str,
    cid: str | None,
    curve: LoadedCurve,
    *,
    gpus: int,
    group: str,
    steps_per_second: float,
) -> Run:
    back = sum(1 for i in range(1, len(curve.steps)) if curve.steps[i] < curve.steps[i - 1])
    if looks_unsorted(back + 1, len(curve.steps)):
        raise BadRunError(
            f"{name}: step: goes backwards {back} times, more than restarts do: the file is not in the "
            "order the run logged it, which a replay needs (sort it by step)"
        )
    seg = _last_segment(curve)
    steps = np.asarray(curve.steps[seg], dtype=float)
    values = np.asarray(curve.values[seg], dtype=float)
    if steps.size < MIN_POINTS:
        raise BadRunError(f"{name}: steps: {steps.size} points, fewer than the {MIN_POINTS} a replay needs")
    if not np.isfinite(values).any():
        # nothing to forecast or judge (``forecast`` refuses such a file): a bad run, not one no
        # row stops and every row "saves" nothing on
        raise BadRunError(
            f"{name}: {curve.metric}: no usable points (all {values.size} values are NaN or infinite)"
        )
    if not np.all(np.diff(steps) > 0):
        raise BadRunError(f"{name}: step: repeats within the run (the same step logged twice)")
    times = None
    timed = False
    if curve.times is not None:
        t = np.asarray(curve.times[seg], dtype=float)
        if np.all(np.isfinite(t)) and np.all(np.diff(t) >= 0) and t[-1] > t[0]:
            times, timed = t - t[0], True
    if times is None:  # a stated constant throughput
        times = (steps - steps[0]) / steps_per_second
    lrs = None if curve.learning_rates is None else np.asarray(curve.learning_rates[seg], dtype=float)
    epochs = None if curve.epochs is None else np.asarray(curve.epochs[seg], dtype=float)
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
    )


@dataclass(frozen=True)
class _Index:
    path: Path
    rows: dict[str, _IndexRow]

    @property
    def folder(self) -> Path:
        return self.path.parent


class _Indexes:
    """The index CSV each run is looked up in (see the module's docstring), each read once."""

    def __init__(self, given: Path | None) -> None:
        self.given = None if given is None else _Index(given, _read_index(given))
        self.found: dict[Path, _Index | None] = {}
        if self.given is not None:  # the index given is its own folder's, whatever else is there
            self.found[self.given.folder] = self.given

    def _in(self, folder: Path) -> _Index | None:
        if folder not in self.found:
            path = next((folder / n for n in INDEX_NAMES if (folder / n).is_file()), None)
            self.found[folder] = None if path is None else _Index(path, _read_index(path))
        return self.found[folder]

    def of(self, log: RunLog) -> _Index | None:
        folder = log.path.parent
        while True:
            found = self._in(folder)
            if found is not None and found.rows:
                return found
            if folder == log.root or folder == folder.parent:
                return self.given
            folder = folder.parent


#: the log file that names no run: the run is its folder (HF writes every run's state under it)
_FOLDER_RUN_LOGS = ("trainer_state.json",)


def _is_folder_run(log: RunLog, logs_in_folder: int) -> bool:
    """Whether the run is the folder its log is in (see the module's docstring)."""
    if log.path.name.lower().removesuffix(".gz") in _FOLDER_RUN_LOGS:
        return True
    return logs_in_folder == 1 and log.path.parent != log.root


def _index_row(
    index: _Index | None, log: RunLog, cid: str | None, name: str, alone: bool, file_names: Counter[str]
) -> _IndexRow:
    """The index's row for one run (see the module's docstring for the keys tried)."""
    if index is None:
        return _IndexRow(None, None)
    try:
        rel = log.path.relative_to(index.folder)
    except ValueError:  # an --index elsewhere: paths relative to the folder given
        rel = log.relative
    keys = [cid] if cid is not None else []
    keys += [rel.as_posix(), (rel.parent / rel.stem).as_posix()]
    if alone and rel.parent != Path("."):
        keys.append(rel.parent.as_posix())
        folder = run_folder(rel)  # the output folder of a run that is its latest checkpoint's state
        if folder not in (rel.parent, Path(".")):
            keys.append(folder.as_posix())
    keys.append(name)
    unique = file_names[log.path.name] == 1
    if unique:
        keys += [log.path.name, log.path.stem]
    row = next((index.rows[k] for k in keys if k in index.rows), None)
    if row is not None:
        return row
    if not unique:
        shared = next((k for k in (log.path.name, log.path.stem) if k in index.rows), None)
        if shared is not None:
            raise RunError(
                f"{index.path}: run {shared!r}: {file_names[log.path.name]} runs' logs have that file "
                f"name; name each by its path relative to the index's folder (such as {rel.as_posix()!r})"
            )
    return _IndexRow(None, None)


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
    """The runs in ``args`` (files or folders) and, with ``skip_bad``, one line per run skipped.

    Names and index rows: see the module's docstring. GPUs: the index's ``gpus`` column, else
    ``gpus``, else 1. Group: the index's, else the first match of ``group_pattern`` on the run's
    name, else the run's folder (or its file, for a multi-run dump). Raises ``RunError`` (one line:
    file, field, reason) on the first bad run unless ``skip_bad``."""
    if not math.isfinite(steps_per_second) or steps_per_second <= 0:
        raise RunError("--steps-per-second: must be a positive number")
    pattern = re.compile(group_pattern) if group_pattern else None
    runs: list[Run] = []
    skipped: list[str] = []
    indexes = _Indexes(index)
    try:
        logs = find_run_logs(args)
    except SourceError as exc:
        raise RunError(str(exc)) from None
    file_names = Counter(log.path.name for log in logs)
    per_folder = Counter(log.path.parent for log in logs)
    for log in logs:
        path = log.path
        folder = path.parent
        folder_run = _is_folder_run(log, per_folder[folder])
        table = indexes.of(log)
        parsed: ParsedLog | None = None
        curves: list[tuple[str | None, LoadedCurve]] = []
        try:
            parsed = parse_log(path)
            curves = parsed.curves()
        except SourceError as exc:
            if not skip_bad:
                raise BadRunError(str(exc)) from None
            skipped.append(str(exc))
        first = len(runs)
        for cid, curve in curves:
            name = f"{log.name}#{cid}" if cid is not None else log.name
            row = _index_row(table, log, cid, name, folder_run, file_names)
            match = pattern.search(name) if pattern is not None else None
            group = row.group or (match.group(0) if match else None)
            if group is None:
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
                )
                runs.append(replace(one, labels=row.labels) if row.labels else one)
            except BadRunError as exc:
                if not skip_bad:
                    raise
                skipped.append(str(exc))
        if parsed is not None and len(runs) > first:
            _attach_evals(parsed, curves, runs, first)
        if on_file is not None:
            on_file(path)
    if not runs:
        raise RunError("no runs to back-test" + (f" ({len(skipped)} skipped as bad)" if skipped else ""))
    return runs, skipped


def _attach_evals(
    log: ParsedLog, curves: Sequence[tuple[str | None, LoadedCurve]], runs: list[Run], first: int
) -> None:
    """Give the runs read from ``log`` (``runs[first:]``) their eval series, all read in one pass
    over the file's records: every eval metric whose name says its direction (at most
    ``MAX_EVAL_SERIES``; one that cannot be read is left out), the primary one (``eval_loss``,
    else the first, as the core's rules default to) judged."""
    columns = next((c.columns for _cid, c in curves if c.columns), ())
    names = eval_metrics(columns)[:MAX_EVAL_SERIES]
    if curves and curves[0][1].metric != "loss":
        # a log of eval metrics alone: the series it was read by is its primary eval series (and
        # its steps and times the run's), judged as ``forecast`` judges such a log
        names = [curves[0][1].metric, *(n for n in names if n != curves[0][1].metric)][:MAX_EVAL_SERIES]
    per_metric: list[tuple[str, dict[str | None, LoadedCurve]]] = [
        (name, dict(got))
        for name, got in zip(names, log.curves_each(names), strict=True)
        if not isinstance(got, SourceError)
    ]
    for i in range(first, len(runs)):
        run = runs[i]
        cid = run.curve_id
        found: list[tuple[str, np.ndarray, np.ndarray]] = []
        for name, evals in per_metric:
            ev = evals.get(cid)
            if ev is None or len(ev) < 2:
                continue
            seg = _last_segment(ev)
            s = np.asarray(ev.steps[seg], dtype=float)
            v = np.asarray(ev.values[seg], dtype=float)
            keep = (s >= run.steps[0]) & (s <= run.steps[-1]) & np.isfinite(v)
            if keep.sum() >= 2:
                found.append((name, s[keep], v[keep]))
        if found:
            name, s, v = found[0]
            runs[i] = replace(
                run,
                eval_steps=s,
                eval_values=v,
                eval_metric=name,
                eval_higher=direction_of(name) is Direction.HIGHER,
                other_evals=tuple(found[1:]),
            )
