"""Runs whose log is spread over several files, read as one: each such run is named by a path of
its own (``joined_name``) that ``load_curve`` and ``parse_log`` read as the files it stands for.

TensorBoard's scalar CSVs: its UI downloads one file per tag, ``run-<run>-tag-<tag>.csv`` (or
``<run>-tag-<tag>.csv`` when saved under another name), each ``Wall time,Step,Value``. The files
of a folder that name the same run are that run's fields, the tag naming each file's ``Value`` as
it does for a file read alone (``export_header``): ``train_loss``, ``eval_loss`` and
``learning_rate`` exported apart are one run with an eval series and learning rates. The run is
named ``run-<run>-tag-*.csv``.

PyTorch Lightning's ``CSVLogger``: each ``Trainer`` writes ``<name>/version_<n>/metrics.csv``, the
next free ``n``, so a run resumed from a checkpoint goes on in the next version. A fresh trainer's
global step starts at 0, and it logs its first row at the same step any other fresh run of its
logging interval does; a resumed trainer starts from its checkpoint's step, past the first step
logged by the version it resumes. So a version whose first step is beyond the first step of the
version before it continues that version (at an overlapping step or a later one), and one that
begins again at or before it is a separate experiment. A chain of continuing versions is one run,
read as a resumed ``trainer_state.json`` is: the later version wins on the steps both hold (the
earlier version's rows from the later one's first step on are what its restart replaced). The run
is named ``<name>/version_<a>+version_<b>/metrics.csv``.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from advisor.sources.coerce import parse_float
from advisor.sources.columns import ExportError, export_header, resolve_columns
from advisor.sources.loaded_curve import SourceError
from advisor.sources.normalize import canonical_name
from advisor.sources.panels import RUN_MARK, panel_run_text

__all__ = ["exported", "group_logs", "joined_log"]

#: a TensorBoard export's name: ``run-<run>-tag-<tag>`` (``run_<run>_tag_<tag>``, ``<run>-tag-<tag>``)
_TB_FILE = re.compile(r"^(?:(?:run[-_])?(?P<run>.*?)[-_])?tag[-_](?P<tag>.+)$", re.IGNORECASE)
_TB_HEADER = ("wall_time", "step", "value")
_LIGHTNING_VERSION = re.compile(r"version_(\d+)")
_LIGHTNING_LOG = "metrics.csv"


def _stem(path: Path) -> tuple[str, str]:
    """A log's name without and with its suffix (``.csv``, ``.csv.gz``)."""
    name = path.name
    low = name.lower()
    base = low.removesuffix(".gz")
    dot = base.rfind(".")
    cut = dot if dot > 0 else len(base)
    return name[:cut], name[cut:]


def _tb_key(path: Path) -> tuple[str, str] | None:
    """The run of a TensorBoard export (its name up to the tag, and the suffix), None for a file
    not so named."""
    stem, suffix = _stem(path)
    match = _TB_FILE.match(stem)
    if match is None or not match.group("tag"):
        return None
    return stem[: match.start("tag")], suffix


def _is_tb_export(path: Path, read: Callable[[Path], str]) -> bool:
    """Whether ``path`` holds a TensorBoard scalar CSV (a file only named like one is a run of its
    own, read as any other)."""
    try:
        text = read(path)
    except SourceError:
        return False
    first = text.lstrip().partition("\n")[0]
    return tuple(canonical_name(h) for h in first.strip().split(",")) == _TB_HEADER


def _lightning_version(path: Path) -> int | None:
    match = _LIGHTNING_VERSION.fullmatch(path.parent.name)
    if match is None or path.name.lower().removesuffix(".gz") != _LIGHTNING_LOG:
        return None
    return int(match.group(1))


def exported(path: str | Path, header: list[str], warnings: list[str] | None = None) -> list[str]:
    """The header with a TensorBoard or W&B panel export's columns named (``export_header``); a
    TensorBoard export whose file name gives no tag is read as a training loss, and said so."""
    try:
        named = export_header(header, Path(path).name)
    except ExportError as exc:
        raise SourceError(path, str(exc)) from None
    if warnings is not None and "Value" in header and named != header and "loss" in named:
        warnings.append(
            "a TensorBoard export whose file name names no tag: its Value read as the training loss "
            "(name the file ...-tag-<metric>.csv, such as run-a-tag-eval_accuracy.csv, to read it as that)"
        )
    return named


def group_logs(paths: Sequence[Path], read: Callable[[Path], str]) -> list[Path]:
    """``paths`` (a folder's run logs, sorted) with the files of one run replaced by the name of
    the run they make (see the module docstring), in the place of its first file. ``read`` gives a
    file's text (a Lightning version's first step decides whether it continues the one before)."""
    members: dict[Path, list[Path]] = {}
    for path in paths:
        key = _tb_key(path)
        if key is not None and _is_tb_export(path, read):
            members.setdefault(path.parent / f"{key[0]}*{key[1]}", []).append(path)
    replaced: dict[Path, Path | None] = {}
    for name, files in members.items():
        if len(files) > 1:
            replaced.update({f: None for f in files})
            replaced[files[0]] = name
    versions: dict[Path, list[tuple[int, Path]]] = {}
    for path in paths:
        number = _lightning_version(path)
        if number is not None:
            versions.setdefault(path.parent.parent, []).append((number, path))
    for found in versions.values():
        for chain in _lightning_chains([p for _, p in sorted(found)], read):
            if len(chain) > 1:
                replaced.update({f: None for f in chain})
                folder = "+".join(p.parent.name for p in chain)
                replaced[chain[0]] = chain[0].parent.parent / folder / chain[0].name
    out = [replaced.get(p, p) for p in paths]
    return [p for p in out if p is not None]


def _first_step(path: Path, read: Callable[[Path], str]) -> float | None:
    """The step of a Lightning ``metrics.csv``'s first row, None when it has none (or cannot be
    read: it is then a run of its own, whose reading says what is wrong)."""
    try:
        return _first_step_of(*_csv(path, read(path)))
    except SourceError:
        return None


def _first_step_of(header: list[str], rows: list[dict[str, str]]) -> float | None:
    column = resolve_columns(header).get("step")
    if column is None:
        return None
    for row in rows:
        value = parse_float(row.get(column.name), column.name, [])
        if value is not None:
            return value
    return None


def _lightning_chains(files: list[Path], read: Callable[[Path], str]) -> list[list[Path]]:
    """``files`` (one Lightning name's versions, in order) split into runs: a version joins the
    run of the version before when its first step is beyond that version's first step."""
    chains: list[list[Path]] = []
    previous: float | None = None
    for path in files:
        first = _first_step(path, read)
        if chains and previous is not None and first is not None and first > previous:
            chains[-1].append(path)
        else:
            chains.append([path])
        previous = first
    return chains


def _csv(path: Path, text: str) -> tuple[list[str], list[dict[str, str]]]:
    try:
        reader = csv.DictReader(io.StringIO(text))
        rows = list(reader)
    except csv.Error as exc:
        raise SourceError(path, f"malformed CSV: {exc}") from None
    return [h.strip() for h in reader.fieldnames or ()], rows


def joined_log(path: Path, read: Callable[[Path], str]) -> tuple[str, str] | None:
    """The text (one CSV) of the run ``path`` names and a note of what it was joined from, when
    ``path`` is the name of a run spread over several files (``group_logs``); None for any other
    path. ``read`` gives a file's text."""
    if path.exists():
        return None
    if RUN_MARK in path.name:
        return panel_run_text(path, read)
    if "*" in path.name:
        return _tensorboard_run(path, read)
    parts = path.parent.name.split("+")
    if len(parts) > 1 and all(_LIGHTNING_VERSION.fullmatch(p) for p in parts):
        return _lightning_run([path.parent.parent / p / path.name for p in parts], read)
    return None


def _tensorboard_run(path: Path, read: Callable[[Path], str]) -> tuple[str, str] | None:
    prefix, _, suffix = path.name.partition("*")
    parent = path.parent
    if not parent.is_dir():
        return None
    files = sorted(
        p
        for p in parent.iterdir()
        if p.is_file() and _tb_key(p) == (prefix, suffix) and _is_tb_export(p, read)
    )
    if not files:
        return None
    fields: list[str] = []
    table: dict[float, dict[str, str]] = {}
    for file in files:
        header, rows = _csv(file, read(file))
        if tuple(canonical_name(h) for h in header) != _TB_HEADER:
            expected = "Wall time,Step,Value"
            raise SourceError(file, f"named as a TensorBoard export, but its header is not {expected}")
        try:
            named = export_header(header, file.name)
        except ExportError as exc:
            raise SourceError(file, str(exc)) from None
        canonical = [canonical_name(h) for h in header]
        step_name, time_name, value_name = (
            header[canonical.index(c)] for c in ("step", "wall_time", "value")
        )
        value = named[canonical.index("value")]
        if value in fields:
            raise SourceError(path, f"two files hold the tag {value!r}")
        fields.append(value)
        for row in rows:
            step = parse_float(row.get(step_name), "Step", [])
            if step is None:
                continue
            cells = table.setdefault(step, {"Step": str(row.get(step_name, "")).strip()})
            cells.setdefault("Wall time", str(row.get(time_name, "")).strip())
            cells[value] = str(row.get(value_name, "")).strip()
    out = io.StringIO()
    writer = csv.DictWriter(out, ["Step", "Wall time", *fields], lineterminator="\n")
    writer.writeheader()
    writer.writerows(table[s] for s in sorted(table))
    note = f"one run of {len(files)} TensorBoard exports, a field each: {', '.join(fields)}"
    return out.getvalue(), note


def _lightning_run(files: list[Path], read: Callable[[Path], str]) -> tuple[str, str]:
    tables = [_csv(file, read(file)) for file in files]
    firsts = [_first_step_of(*table) for table in tables]
    fields: list[str] = []
    rows: list[dict[str, str]] = []
    for i, (header, version_rows) in enumerate(tables):
        fields += [h for h in header if h not in fields]
        step = resolve_columns(header).get("step")
        until = firsts[i + 1] if i + 1 < len(tables) else None
        for row in version_rows:
            value = None if step is None else parse_float(row.get(step.name), step.name, [])
            if value is None or until is None or value < until:
                rows.append({k.strip(): v for k, v in row.items() if k is not None})
    out = io.StringIO()
    writer = csv.DictWriter(out, fields, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    resumes = ", ".join(
        f"{file.parent.name} at step {first:,.0f}"
        for file, first in zip(files[1:], firsts[1:], strict=True)
        if first is not None
    )
    note = (
        f"one Lightning run of {len(files)} versions, each resuming the one before ({resumes}); "
        "where two hold the same steps the later version's rows are read"
    )
    return out.getvalue(), note
