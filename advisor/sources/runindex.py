"""Index CSVs beside run logs: each run's GPUs, group and labels, and the rows that match nothing.

Read by ``backtest`` (GPUs, groups, labels) and by ``simulate --curves`` (a run's ``workload-type``
label: the kind of run its user knows it is); the same rows name the same runs in both.

An index CSV (``index.csv`` or ``runs.csv``; the nearest one in the run's folder or a folder above
it, up to the folder given; else ``--index``) gives a run the row whose run column is, the first
that matches: its ``curve_id`` (a multi-run dump); its log's path relative to the index's folder,
with or without its suffix (``lr1e-3/trainer_state.json``, ``lr1e-3/trainer_state``), also when
that path leaves the index's folder (``../sweep/lr1e-3``); the run's folder (``lr1e-3``) when the
run is its folder, also when that folder is given itself; the run's name; its file name, with or
without its suffix, when no other run's log has that file name. A row that names by file name several runs'
logs (``trainer_state.json``) is an error that says which path to give instead. Its ``labels``
(``workload-type=pretraining;team=a``) are the job's labels, which a policy's selector reads.

An index given with ``--index`` comes first: a run it has a row for takes that row, and an index
found beside the runs gives the runs ``--index`` does not list theirs (a row of both that names one
run is matched in both, and said overridden).

An index found so is applied without being asked for: the back-test names each index it used,
the columns it read from it (an index of notes alone gives no GPUs, group or labels, and says so)
and how many runs it gave a row (``index_notes``), so that GPUs and groups taken from a file
nobody mentioned do not go unseen.

Which rows matched is recorded, and which runs had none while an index was in use: a run without
its row falls back to ``--gpus`` (else 1 GPU), its folder's group and no labels, so its GPU-hours
and the policy that selects it are wrong with no sign of it. The back-test warns of both rather
than failing: an index often lists more runs than one back-test reads.
"""

from __future__ import annotations

import csv
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from advisor.sources.runlogs import INDEX_NAMES, RunLog, run_folder

__all__ = [
    "FOLDER_RUN_LOGS",
    "MAX_WARNINGS",
    "Index",
    "IndexRow",
    "IndexUse",
    "Indexes",
    "RunError",
    "RunWithoutRow",
    "UnmatchedRow",
    "index_columns",
    "index_notes",
    "index_row",
    "is_folder_run",
    "mismatch_warnings",
    "read_index",
    "read_index_columns",
    "suggested_key",
]


class RunError(Exception):
    """Runs that cannot be read or looked up (a bad index, a row naming several runs); ``str()``
    is one line: ``file: field: reason``."""


#: the log file that names no run: the run is its folder (HF writes every run's state under it)
FOLDER_RUN_LOGS = ("trainer_state.json",)


def is_folder_run(log: RunLog, logs_in_folder: int) -> bool:
    """Whether the run is the folder its log is in: a log that names no run of its own
    (``FOLDER_RUN_LOGS``), or the only log in a folder below the one given."""
    if log.path.name.lower().removesuffix(".gz") in FOLDER_RUN_LOGS:
        return True
    return logs_in_folder == 1 and log.path.parent != log.root


#: an index row's group cell left empty where the index has a group column: the run is in no group
NO_GROUP = ""


@dataclass(frozen=True)
class IndexRow:
    """What an index row gives its run (None: not in the row)."""

    gpus: int | None
    group: str | None
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class UnmatchedRow:
    """An index row that matched no run read: the index and the row's run cell."""

    index: Path
    key: str


@dataclass(frozen=True)
class RunWithoutRow:
    """A run that no row of the index in use for it names: it took ``--gpus`` (else 1 GPU), its
    folder's group and no labels. ``key``: the run cell a row would give to name it."""

    run: str
    index: Path
    key: str
    #: the other indexes in use for it, which have no row for it either
    others: tuple[Path, ...] = ()


@dataclass(frozen=True)
class IndexUse:
    """An index CSV runs were looked up in: of ``looked_up`` runs, ``matched`` got a row;
    ``given``: it is ``--index`` (else found in a run's folder or above it)."""

    index: Path
    matched: int
    looked_up: int
    given: bool
    #: the columns it gives runs their figures from (``index_columns``)
    columns: tuple[str, ...] = ("gpus", "group", "labels")
    #: the GPUs of a run it gives none (``--gpus``, else 1)
    fallback_gpus: int = 1
    #: the runs it gave their row, in order
    runs: tuple[str, ...] = ()
    #: runs whose row in it an index given with ``--index`` overrode
    overridden: int = 0


#: runs named in an index's note when it gave some but not all of the runs looked up a row
_NAMED_RUNS = 5


def _joined(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def index_notes(uses: list[IndexUse]) -> list[str]:
    """One line per index CSV in use: which file, for one found beside the runs that it was read
    without ``--index``, the columns read from it, how many runs (and, when not all, which) it
    gave a row, and what a run takes for a column it does not have."""
    lines = []
    for use in uses:
        how = "--index" if use.given else "found beside the runs, read automatically"
        runs = f"{use.matched} of {use.looked_up} run{'s' if use.looked_up != 1 else ''}"
        if 0 < use.matched < use.looked_up:
            named = list(use.runs[:_NAMED_RUNS])
            more = len(use.runs) - len(named)
            runs += f" ({', '.join(named)}{f' and {more} more' if more else ''})"
        each = "1 GPU each" if use.fallback_gpus == 1 else f"{use.fallback_gpus} GPUs each (--gpus)"
        if not use.columns:
            line = (
                f"index {use.index} ({how}): no gpus, group or labels column: {each}, grouped by "
                f"folder; a row for {runs}"
            )
        else:
            line = f"index {use.index} ({how}): {_joined(list(use.columns))} for {runs}"
            if not any(c.startswith("gpus") for c in use.columns):
                line += f"; no gpus column: {each}"
        if use.overridden:
            rows = "the row of 1 run" if use.overridden == 1 else f"the rows of {use.overridden} runs"
            line += f"; {rows} overridden by --index"
        lines.append(line)
    return lines


#: warning lines per kind of miss (index rows that match no run, runs without a row); the rest
#: are counted in one more line
MAX_WARNINGS = 10


def mismatch_warnings(unmatched: list[UnmatchedRow], without_row: list[RunWithoutRow]) -> list[str]:
    """One line per index row that matched no run and per run without a row (at most
    ``MAX_WARNINGS`` of each, then a count of the rest), and how a row names a run. When every run
    read has its row, the rows left are the runs not given (a few runs of an indexed folder): one
    line counts them."""
    if unmatched and not without_row:
        index = unmatched[0].index
        rows = "1 row names a run" if len(unmatched) == 1 else f"{len(unmatched)} rows name runs"
        why = "not read (every run read has its row): their gpus, group and labels go unused"
        return [f"{index}: {rows} {why}"]
    lines = [
        f"{u.index}: row {u.key!r} matches no run read: its gpus, group and labels go unused"
        for u in unmatched[:MAX_WARNINGS]
    ]
    if len(unmatched) > MAX_WARNINGS:
        lines.append(f"... and {len(unmatched) - MAX_WARNINGS} more index rows that match no run")
    lines += [
        f"{w.run}: no row in {' or '.join(str(i) for i in (w.index, *w.others))} (a row {w.key!r} "
        "would name it): --gpus or 1 GPU, the group of its folder, no labels"
        for w in without_row[:MAX_WARNINGS]
    ]
    if len(without_row) > MAX_WARNINGS:
        lines.append(f"... and {len(without_row) - MAX_WARNINGS} more runs without an index row")
    if lines:
        lines.append(
            "an index row names a run by its curve_id, its log's path relative to the index's folder, "
            "its folder when the run is its folder, its name, or its file name when unique"
        )
    return lines


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


#: the columns a run's group is read from, in the order tried, and how a note names each
_GROUP_COLUMNS = (
    ("group", "group"),
    ("repo", "its repo column"),
    ("sweep", "its sweep column"),
    ("path", "the folder of its path column"),
)


def index_columns(header: list[str]) -> tuple[str, ...]:
    """The columns of an index CSV's ``header`` that give runs their figures, as a note names
    them: ``gpus``, ``group`` (``group (its repo column)`` when the group is read from another
    column) and ``labels``."""
    out = ["gpus"] if "gpus" in header else []
    groups = [said for column, said in _GROUP_COLUMNS if column in header]
    if groups:
        out.append("group" if groups == ["group"] else f"group ({', else '.join(groups)})")
    if "labels" in header:
        out.append("labels")
    return tuple(out)


def read_index(path: Path) -> dict[str, IndexRow]:
    """``run key -> (gpus, group, labels)`` from an index CSV (``read_index_columns``)."""
    return read_index_columns(path)[0]


def read_index_columns(path: Path) -> tuple[dict[str, IndexRow], tuple[str, ...]]:
    """``run key -> (gpus, group, labels)`` from an index CSV: the key column is ``curve_id``,
    ``run``, ``name`` or ``file``; ``gpus``, ``group`` (or ``repo`` / ``sweep``, or ``path``, whose
    folder is the group) and ``labels`` (``key=value`` pairs separated by ``;``: the job's labels, as
    a policy's selector reads them) optional; and which of those it has (``index_columns``)."""
    try:
        # utf-8-sig: a spreadsheet's "CSV UTF-8" export starts with a byte-order mark, which read
        # as part of the first column's name hid the run column
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            key = next((k for k in ("curve_id", "run", "name", "file") if k in header), None)
            if key is None:
                raise RunError(f"{path}: header: no run column (curve_id, run, name or file)")
            out: dict[str, IndexRow] = {}
            first_line: dict[str, int] = {}
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
                if group is None and any(c in header for c, _ in _GROUP_COLUMNS):
                    # an empty cell of a group column: the run belongs to no group (its folder as
                    # its group put 32-GPU pre-training runs among 1-GPU fine-tunes as peers)
                    group = NO_GROUP
                labels = _labels(path, line, row.get("labels") or "")
                name = (row.get(key) or "").strip()
                entry = IndexRow(gpus, group, labels)
                if name in out and out[name] != entry:
                    # the later row silently won: a run listed twice with 8 and 4 GPUs was replayed
                    # on 4, and nothing said which row was read
                    raise RunError(
                        f"{path}:{line}: {key}: {name!r} is also line {first_line[name]}'s, with "
                        "other values: a run has one row"
                    )
                first_line.setdefault(name, line)
                out[name] = entry
            return out, index_columns(list(header))
    except OSError as exc:
        raise RunError(f"{path}: {exc.strerror or exc}") from None


@dataclass
class Index:
    """One index CSV read, and the keys of its rows some run matched."""

    path: Path
    rows: dict[str, IndexRow]
    matched: set[str] = field(default_factory=set)
    #: the columns it gives runs their figures from (``index_columns``)
    columns: tuple[str, ...] = ("gpus", "group", "labels")

    @classmethod
    def read(cls, path: Path) -> Index:
        rows, columns = read_index_columns(path)
        return cls(path, rows, columns=columns)

    @property
    def folder(self) -> Path:
        return self.path.parent


class Indexes:
    """The index CSV each run is looked up in (see the module's docstring), each read once."""

    def __init__(self, given: Path | None) -> None:
        self.given = None if given is None else Index.read(given)
        self.found: dict[Path, Index | None] = {}
        if self.given is not None:  # the index given is its own folder's, whatever else is there
            self.found[self.given.folder] = self.given

    def _in(self, folder: Path) -> Index | None:
        if folder not in self.found:
            path = next((folder / n for n in INDEX_NAMES if (folder / n).is_file()), None)
            self.found[folder] = None if path is None else Index.read(path)
        return self.found[folder]

    def _nearest(self, log: RunLog) -> Index | None:
        """The nearest index with rows in the run's folder or a folder above it, up to the
        folder given."""
        folder = log.path.parent
        while True:
            found = self._in(folder)
            if found is not None and found.rows:
                return found
            if folder == log.root or folder == folder.parent:
                return None
            folder = folder.parent

    def of(self, log: RunLog) -> list[Index]:
        """The indexes a run is looked up in, first the one whose row wins: ``--index``, then the
        nearest one found beside it (it gives the runs ``--index`` does not list their rows)."""
        nearest = self._nearest(log)
        out = [] if self.given is None else [self.given]
        if nearest is not None and nearest is not self.given:
            out.append(nearest)
        return out

    def unmatched(self) -> list[UnmatchedRow]:
        """Every row of every index read that no run matched (a blank run cell names none)."""
        read = [i for i in (self.given, *self.found.values()) if i is not None]
        seen: set[Path] = set()
        out: list[UnmatchedRow] = []
        for index in read:
            if index.path in seen:
                continue
            seen.add(index.path)
            out += [UnmatchedRow(index.path, k) for k in index.rows if k and k not in index.matched]
        return out


def _keys(
    index: Index, log: RunLog, cid: str | None, name: str, alone: bool, unique: bool
) -> tuple[list[str], Path]:
    """The keys a row may name the run by, in order (see the module's docstring), and the log's
    path relative to the index's folder."""
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
    if alone and rel.parent == Path("."):
        # a run folder given itself (``backtest runs/lr1e-3 --index elsewhere/index.csv``): its name
        # is what a row names it by, as when its parent is given (a trial's row 'r05_wsd_hf' matched
        # no run, and the label that kept a policy off it was lost)
        keys.append(run_folder(log.path.resolve()).name)
    try:  # a path relative to the index's folder that leaves it (``../full/r05/trainer_state.json``)
        outside = Path(os.path.relpath(log.path.resolve(), index.folder.resolve()))
    except ValueError:  # another drive
        outside = rel
    if outside != rel:
        keys += [outside.as_posix(), (outside.parent / outside.stem).as_posix()]
        if alone and outside.parent != Path("."):
            keys.append(outside.parent.as_posix())
    keys.append(name)
    if unique:
        keys += [log.path.name, log.path.stem]
    return keys, rel


def suggested_key(index: Index, log: RunLog, cid: str | None, alone: bool) -> str:
    """The run cell a row would give to name this run: its curve_id, else its folder when the run
    is its folder, else its log's path relative to the index's folder."""
    keys, rel = _keys(index, log, cid, "", alone, unique=False)
    if cid is not None:
        return cid
    if alone:
        return rel.parent.as_posix() if rel.parent != Path(".") else run_folder(log.path.resolve()).name
    return keys[0]


def index_row(
    index: Index, log: RunLog, cid: str | None, name: str, alone: bool, file_names: Counter[str]
) -> IndexRow | None:
    """The index's row for one run (see the module's docstring for the keys tried), marked as
    matched; None when no row names it."""
    unique = file_names[log.path.name] == 1
    keys, rel = _keys(index, log, cid, name, alone, unique)
    key = next((k for k in keys if k in index.rows), None)
    if key is not None:
        index.matched.add(key)
        return index.rows[key]
    if not unique:
        shared = next((k for k in (log.path.name, log.path.stem) if k in index.rows), None)
        if shared is not None:
            raise RunError(
                f"{index.path}: run {shared!r}: {file_names[log.path.name]} runs' logs have that file "
                f"name; name each by its path relative to the index's folder (such as {rel.as_posix()!r})"
            )
    return None
