"""Loss histories from files: CSV/TSV, JSONL and HuggingFace ``trainer_state.json``.

This is how a finished or running job's log reaches ``trainjob-advisor forecast`` (and the
benchmarks). Unlike live progress, a file is something the user hands us on purpose, so a broken
one is reported, not silently patched: ``SourceError`` names the file, the line (or the
``log_history`` entry) and the reason. What is merely sparse (an eval loss every 500 steps, a
learning rate logged on training rows only) is normal and is aligned, not rejected.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from advisor.model import Curve
from advisor.sources.coerce import parse_duration, parse_float, parse_timestamp, short_repr
from advisor.sources.columns import HF_ROLES, ROLES, Column, resolve_columns
from advisor.sources.large_table import LARGE_ROWS, read_numeric_table

__all__ = [
    "MAX_FILE_BYTES",
    "METRICS",
    "LoadedCurve",
    "SourceError",
    "load_curve",
    "load_curve_bytes",
    "load_curves",
]

#: files larger than this are refused (a 24,000-step trainer_state.json is ~3 MB)
MAX_FILE_BYTES = 512 * 1024 * 1024
#: what ``metric=`` accepts: the training loss or the evaluation loss
METRICS = ("loss", "eval_loss")
_HEADERLESS_ROLES = ("step", "loss", "time", "learning_rate", "epoch")


class SourceError(Exception):
    """A file that cannot be read as a loss history; ``str()`` is one line: ``file:line: reason``."""

    def __init__(self, path: str | Path, reason: str, *, line: int | None = None, where: str | None = None):
        self.path = str(path)
        self.line = line
        self.reason = reason
        location = f":{line}" if line is not None else (f" ({where})" if where else "")
        super().__init__(f"{self.path}{location}: {reason}")


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

    def __len__(self) -> int:
        return len(self.steps)

    def upto(self, step: float) -> LoadedCurve:
        """The history as it stood when training first passed ``step`` (the prefix up to it)."""
        end = next((i for i, s in enumerate(self.steps) if s > step), len(self.steps))

        def cut(series: tuple[float, ...] | None) -> tuple[float, ...] | None:
            return None if series is None else series[:end]

        return replace(
            self,
            steps=self.steps[:end],
            values=self.values[:end],
            times=cut(self.times),
            learning_rates=cut(self.learning_rates),
            epochs=cut(self.epochs),
        )

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


# --------------------------------------------------------------------------------------------
# Reading and format detection
# --------------------------------------------------------------------------------------------


def load_curve(path: str | Path, *, metric: str | None = None, curve_id: str | None = None) -> LoadedCurve:
    """Read ``path`` (format from its content) into a ``LoadedCurve``; raises ``SourceError``.

    ``metric`` is ``"loss"`` (training loss), ``"eval_loss"``, or ``None``: the training loss when
    the file has one, else its evaluation loss. ``curve_id`` selects one run in a file that holds
    several (a ``curve_id``/``run_id`` column).
    """
    return _parse(path, _read_text(Path(path)), metric, curve_id)


def load_curve_bytes(
    data: bytes, name: str = "<stdin>", *, metric: str | None = None, curve_id: str | None = None
) -> LoadedCurve:
    """Like ``load_curve``, from the bytes of a file read elsewhere (``-``: standard input);
    ``name`` stands for the path in messages."""
    if len(data) > MAX_FILE_BYTES:
        raise SourceError(name, f"input of {len(data)} bytes exceeds the limit of {MAX_FILE_BYTES}")
    return _parse(name, _decode(name, data), metric, curve_id)


def _parse(path: str | Path, text: str, metric: str | None, curve_id: str | None) -> LoadedCurve:
    if metric is not None and metric not in METRICS:
        raise SourceError(path, f"unknown metric {metric!r} (choose one of {', '.join(METRICS)})")
    head = text.lstrip()
    if head.startswith(("{", "[", '"')) or head.rstrip() in ("null", "true", "false"):
        try:
            document = json.loads(text)
        except (ValueError, RecursionError):
            document = None
        else:
            if not isinstance(document, dict | list):
                raise SourceError(path, f"{_FORMATS_HINT}: the file is a single JSON {_json_kind(document)}")
        if isinstance(document, dict) and "log_history" in document:
            return _from_trainer_state(path, document, metric)
        if isinstance(document, list):
            return _assemble(path, "JSON", _json_list_records(path, document), metric, curve_id, ROLES)
        if head.startswith("{"):
            return _assemble(path, "JSONL", _jsonl_records(path, text), metric, curve_id, ROLES)
    return _from_table(path, text, metric, curve_id)


#: what a file that is none of them is told
_FORMATS_HINT = "not a recognised loss log (CSV/TSV with a step,loss header, JSONL, or trainer_state.json)"


def _json_list_records(path: str | Path, document: list[object]) -> list[Record]:
    records: list[Record] = []
    for i, r in enumerate(document):
        if not isinstance(r, dict):
            raise SourceError(
                path, f"{_FORMATS_HINT}: a JSON list of {_json_kind(r)}s, not of records", where=f"entry {i}"
            )
        records.append((f"entry {i}", None, r))
    return records


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "number", float: "number", str: "string", list: "list"}.get(
        type(value), type(value).__name__
    )


def _read_text(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise SourceError(path, f"file of {size} bytes exceeds the limit of {MAX_FILE_BYTES}")
        data = path.read_bytes()
    except FileNotFoundError:
        raise SourceError(path, "no such file") from None
    except IsADirectoryError:
        raise SourceError(path, "is a directory, not a file") from None
    except OSError as exc:
        raise SourceError(path, f"cannot read: {exc.strerror or exc}") from None
    return _decode(path, data)


def _decode(path: str | Path, data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SourceError(path, "not UTF-8 text (a binary file?)", line=line) from None
    if "\x00" in text:
        raise SourceError(
            path, "not a text file (it holds NUL bytes)", line=text[: text.index("\x00")].count("\n") + 1
        )
    if not text.strip():
        raise SourceError(path, "empty file")
    return text


Record = tuple[str, int | None, Mapping[str, object]]  # (location, line number, fields)


def _jsonl_records(path: str | Path, text: str) -> list[Record]:
    records: list[Record] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise SourceError(path, f"invalid JSON ({str(exc).splitlines()[0][:80]})", line=number) from None
        if not isinstance(value, dict):
            raise SourceError(path, f"expected a JSON object, found {type(value).__name__}", line=number)
        records.append((f"line {number}", number, value))
    return records


def _table_records(
    path: str | Path, text: str, curve_id: str | None
) -> tuple[str, list[Record], list[str], list[str]]:
    """A table's kind, records, header and warnings (rows of other curves than ``curve_id`` skipped)."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    lines = [(n, line) for n, line in lines if not line.lstrip().startswith("#")]
    if not lines:
        raise SourceError(path, "no data lines (only comments)")
    first = lines[0][1]
    delimiter = next((d for d in ("\t", ",", ";") if d in first), None)
    kind = {"\t": "TSV", ",": "CSV", ";": "CSV"}.get(delimiter or "", "whitespace-separated table")

    numbers = [n for n, _ in lines]
    texts = [line for _, line in lines]
    try:
        if delimiter is None:
            split: list[list[str]] = [line.split() for line in texts]
        else:
            split = list(csv.reader(texts, delimiter=delimiter))
    except csv.Error as exc:
        raise SourceError(path, f"malformed {kind}: {exc}") from None
    rows = list(zip(numbers, split, strict=True))
    header = [cell.strip() for cell in rows[0][1]]
    warnings: list[str] = []
    if all(_is_number(cell) for cell in header):
        if len(header) > len(_HEADERLESS_ROLES):
            reason = f"no header and {len(header)} columns; add a header line"
            raise SourceError(path, reason, line=rows[0][0])
        header = list(_HEADERLESS_ROLES[: len(header)])
        warnings.append(f"no header; columns read as {','.join(header)}")
    else:
        rows = rows[1:]
        if len(set(header)) != len(header):
            raise SourceError(path, "duplicate column names in the header", line=lines[0][0])
    roles = resolve_columns(header)
    missing = [
        r for r, ok in (("step", "step" in roles), ("loss", {"loss", "eval_loss"} & roles.keys())) if not ok
    ]
    if missing:
        # checked before the rows: a console log or another tool's dump is told what it is not,
        # not that some line has the wrong number of fields
        found = _listing([h for h in header if h])
        what = f"no {' or '.join(missing)} field (found: {found})"
        if delimiter is None:
            what = f"{_FORMATS_HINT}: {what}"
        raise SourceError(path, what, line=lines[0][0])
    curve_column = roles.get("curve_id")
    if curve_id is not None and curve_column is not None:  # skip other runs early in multi-run dumps
        index = header.index(curve_column.name)
        wanted = curve_id.strip()
        selected = [(n, c) for n, c in rows if len(c) != len(header) or c[index].strip() == wanted]
        rows = selected or rows  # nothing matched: let the curve selection report it
    records: list[Record] = []
    for number, cells in rows:
        if len(cells) != len(header):
            raise SourceError(path, f"expected {len(header)} fields, found {len(cells)}", line=number)
        records.append((f"line {number}", number, dict(zip(header, cells, strict=True))))
    return kind, records, header, warnings


def _from_table(path: str | Path, text: str, metric: str | None, curve_id: str | None) -> LoadedCurve:
    if text.count("\n", 0, len(text)) > LARGE_ROWS:
        fast = _large_table(path, text, metric)
        if fast is not None:
            return fast
    kind, records, header, warnings = _table_records(path, text, curve_id)
    return _assemble(path, kind, records, metric, curve_id, ROLES, warnings=warnings, names=header)


def _large_table(path: str | Path, text: str, metric: str | None) -> LoadedCurve | None:
    """A long plain numeric table through ``large_table`` (None: read it the general way)."""
    end = text.find("\n")
    first = text[:end].strip()
    delimiter = next((d for d in ("\t", ",", ";") if d in first), None)
    if end < 0 or delimiter is None or first.startswith("#"):
        return None
    header = [cell.strip() for cell in first.split(delimiter)]
    columns = resolve_columns(header)
    if len(set(header)) != len(header) or any(_is_number(h) for h in header):
        return None
    if "step" not in columns or "curve_id" in columns or "total_steps" in columns:
        return None
    try:
        metric_role, target = _choose_metric(path, columns, metric, header)
    except SourceError:
        return None
    optional = [r for r in ("time", "learning_rate", "epoch") if r in columns]
    wanted: dict[str, Column] = {
        "step": columns["step"],
        "value": target,
        **{r: columns[r] for r in optional},
    }
    read = read_numeric_table(text, end + 1, delimiter, header, wanted)
    if read is None:
        return None
    series, n_rows, warnings = read
    nonfinite = int((~np.isfinite(series["value"])).sum())
    if nonfinite:
        warnings.append(f"{nonfinite} non-finite {target.name} values (after binning)")

    def tup(role: str) -> tuple[float, ...] | None:
        return tuple(series[role].tolist()) if role in series else None

    kind = "TSV" if delimiter == "\t" else "CSV"
    details = [f"{n_rows} points of {target.describe()}", f"step {columns['step'].describe()}"]
    details += [f"{role} {columns[role].describe()}" for role in optional]
    return LoadedCurve(
        steps=tup("step") or (),
        values=tup("value") or (),
        times=tup("time"),
        learning_rates=tup("learning_rate"),
        epochs=tup("epoch"),
        metric=metric_role,
        source=f"{kind} {Path(path).name}: " + ", ".join(details),
        warnings=tuple(warnings),
    )


def load_curves(path: str | Path, *, metric: str | None = None) -> list[tuple[str | None, LoadedCurve]]:
    """Every run in ``path``: ``[(curve id, curve)]``, one per distinct ``curve_id``/``run_id`` of a
    multi-run table or JSON(L) dump (read once, in the order the ids first appear), or
    ``[(None, curve)]`` for a file that holds one run. Raises ``SourceError`` as ``load_curve``."""
    if metric is not None and metric not in METRICS:
        raise SourceError(path, f"unknown metric {metric!r} (choose one of {', '.join(METRICS)})")
    text = _read_text(Path(path))
    head = text.lstrip()
    names: list[str] | None = None
    warnings: list[str] = []
    records: list[Record]
    if head.startswith(("{", "[")):
        try:
            document = json.loads(text)
        except (ValueError, RecursionError):
            document = None
        if isinstance(document, dict) and "log_history" in document:
            return [(None, _from_trainer_state(path, document, metric))]
        if isinstance(document, list):
            kind, records = "JSON", _json_list_records(path, document)
        elif head.startswith("{"):
            kind, records = "JSONL", _jsonl_records(path, text)
        else:
            kind, records, names, warnings = _table_records(path, text, None)
    else:
        kind, records, names, warnings = _table_records(path, text, None)
    seen: dict[str, None] = {}
    for _, _, fields in records:
        seen.update(dict.fromkeys(k for k in fields if isinstance(k, str)))
    column = resolve_columns(names if names is not None else list(seen)).get("curve_id")
    if column is None:
        return [(None, _assemble(path, kind, records, metric, None, ROLES, warnings=warnings, names=names))]
    groups: dict[str, list[Record]] = {}
    for record in records:
        groups.setdefault(str(record[2].get(column.name, "")).strip(), []).append(record)
    return [
        (cid, _assemble(path, kind, rows, metric, None, ROLES, warnings=list(warnings), names=names))
        for cid, rows in groups.items()
    ]


def _from_trainer_state(path: str | Path, state: Mapping[str, object], metric: str | None) -> LoadedCurve:
    history = state.get("log_history")
    if not isinstance(history, list):
        raise SourceError(path, "'log_history' is not a list (not a trainer_state.json?)")
    records: list[Record] = []
    for index, entry in enumerate(history):
        if not isinstance(entry, dict):
            reason = f"entry is a {type(entry).__name__}, not an object"
            raise SourceError(path, reason, where=f"log_history[{index}]")
        records.append((f"log_history[{index}]", None, entry))
    warnings: list[str] = []
    total = _total_from(state.get("max_steps"), "max_steps", warnings)
    curve = _assemble(path, "HF trainer state", records, metric, None, HF_ROLES, warnings=warnings)
    if total is not None and curve.steps and max(curve.steps) > total:
        warnings.append(f"max_steps {total} is below the last logged step; ignored")
        total = None
    return replace(curve, total_steps=total, warnings=tuple(warnings))


# --------------------------------------------------------------------------------------------
# From records (any format) to a curve
# --------------------------------------------------------------------------------------------


def _assemble(
    path: str | Path,
    kind: str,
    records: Sequence[Record],
    metric: str | None,
    curve_id: str | None,
    roles: dict[str, tuple[str, ...]],
    *,
    warnings: list[str] | None = None,
    names: Sequence[str] | None = None,
) -> LoadedCurve:
    warnings = warnings if warnings is not None else []
    if not records:
        raise SourceError(path, f"{kind} file has no data rows")
    if names is None:
        seen: dict[str, None] = {}
        for _, _, fields in records:
            seen.update(dict.fromkeys(k for k in fields if isinstance(k, str)))
        names = list(seen)
    columns = resolve_columns(names, roles)
    metric_role, target = _choose_metric(path, columns, metric, names)
    if "step" not in columns:
        raise SourceError(path, f"no step field (found: {_listing(names)})")
    records = _select_curve(path, records, columns.get("curve_id"), curve_id)

    def strict(
        location: str, line: int | None, column: Column, raw: object, *, time: bool = False
    ) -> float | None:
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            return None
        problems: list[str] = []
        if time:
            value = parse_duration(raw, column.name, problems)
            if value is None:
                value = parse_timestamp(raw, column.name, [])
        else:
            value = parse_float(raw, column.name, problems, allow_nonfinite=True)
        if value is None:
            where = None if line is not None else location
            raise SourceError(
                path, f"column {column.describe()}: {short_repr(raw)} is not a number", line=line, where=where
            )
        return value * column.scale

    optional = [role for role in ("time", "learning_rate", "epoch") if role in columns]
    steps: list[float] = []
    values: list[float] = []
    kept: list[int] = []
    extra: dict[str, list[float]] = {role: [] for role in optional}
    totals: list[float] = []
    for index, (location, line, fields) in enumerate(records):
        for role in optional:
            value = strict(location, line, columns[role], fields.get(columns[role].name), time=role == "time")
            extra[role].append(math.nan if value is None else value)
        if "total_steps" in columns:
            total = strict(location, line, columns["total_steps"], fields.get(columns["total_steps"].name))
            if total is not None:
                totals.append(total)
        value = strict(location, line, target, fields.get(target.name))
        if value is None:
            continue  # sparse logging: this row does not carry the chosen metric
        step = strict(location, line, columns["step"], fields.get(columns["step"].name))
        if step is None or not math.isfinite(step) or step < 0:
            reason = "missing step" if step is None else f"step {step} is not a non-negative number"
            raise SourceError(path, reason, line=line, where=None if line is not None else location)
        steps.append(step)
        values.append(value)
        kept.append(index)
    if not steps:
        raise SourceError(path, f"no row has a value for {target.describe()}")
    series = {role: _aligned(extra[role], kept, role, warnings) for role in optional}
    backwards = sum(1 for a, b in itertools.pairwise(steps) if b < a)
    if backwards:
        # what it means (restarts or an unsorted file) is the forecaster's call, said in its warnings
        warnings.append(f"step goes backwards {backwards} time(s); kept in file order")
    nonfinite = sum(1 for v in values if not math.isfinite(v))
    if nonfinite:
        warnings.append(f"{nonfinite} non-finite {target.name} values")
    total_name = columns["total_steps"].name if "total_steps" in columns else "total_steps"
    total_steps = _total_from(totals[-1] if totals else None, total_name, warnings)
    if totals and len(set(totals)) > 1:
        warnings.append(f"total steps vary within the file; using the last value {total_steps}")
    details = [f"{len(steps)} points of {target.describe()}", f"step {columns['step'].describe()}"]
    details += [f"{role} {columns[role].describe()}" for role in optional if series[role] is not None]
    return LoadedCurve(
        steps=tuple(steps),
        values=tuple(values),
        times=series.get("time"),
        learning_rates=series.get("learning_rate"),
        epochs=series.get("epoch"),
        total_steps=total_steps,
        metric=metric_role,
        source=f"{kind} {Path(path).name}: " + ", ".join(details),
        warnings=tuple(warnings),
    )


def _choose_metric(
    path: str | Path, columns: dict[str, Column], metric: str | None, names: Sequence[str]
) -> tuple[str, Column]:
    if metric is None:
        role = "loss" if "loss" in columns else "eval_loss"
        if role not in columns:
            raise SourceError(path, f"no loss field (found: {_listing(names)})")
        return role, columns[role]
    if metric not in columns:
        other = "eval_loss" if metric == "loss" else "loss"
        hint = f"; the file has {columns[other].describe()}, use metric {other}" if other in columns else ""
        wanted = "training-loss" if metric == "loss" else "evaluation-loss"
        raise SourceError(path, f"no {wanted} field (found: {_listing(names)}){hint}")
    return metric, columns[metric]


def _select_curve(
    path: str | Path, records: Sequence[Record], column: Column | None, wanted: str | None
) -> Sequence[Record]:
    if column is None:
        if wanted is not None:
            raise SourceError(path, "a curve was chosen but the file holds one (no curve_id/run_id column)")
        return records
    ids = [str(fields.get(column.name, "")).strip() for _, _, fields in records]
    distinct = list(dict.fromkeys(ids))
    if wanted is None:
        if len(distinct) > 1:
            raise SourceError(
                path,
                f"the file holds {len(distinct)} curves (column '{column.name}': "
                f"{_listing(distinct)}); choose one",
            )
        return records
    matches = [r for r, i in zip(records, ids, strict=True) if i == wanted.strip()]
    if not matches:
        found = _listing(distinct)
        raise SourceError(path, f"no curve {wanted!r} in column '{column.name}' (found: {found})")
    return matches


def _aligned(
    values: list[float], kept: list[int], role: str, warnings: list[str]
) -> tuple[float, ...] | None:
    """Values of an optional series at the kept rows; gaps are filled from the nearest earlier
    row (a learning rate logged on training rows, read at an eval row), else the first later one."""
    known = [v for v in values if not math.isnan(v)]
    if not known:
        return None
    filled: list[float] = []
    last = known[0]
    for value in values:
        last = value if not math.isnan(value) else last
        filled.append(last)
    result = tuple(filled[i] for i in kept)
    gaps = sum(1 for i in kept if math.isnan(values[i]))
    if gaps:
        warnings.append(f"{role} missing on {gaps} of {len(kept)} points; taken from neighbouring rows")
    return result


def _total_from(raw: object, name: str, warnings: list[str]) -> int | None:
    if raw is None:
        return None
    value = parse_float(raw, name, warnings)
    if value is None or value < 1 or not value.is_integer():
        warnings.append(f"{name} {short_repr(raw)} is not a positive whole number; ignored")
        return None
    return int(value)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _listing(items: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(str(i) for i in items[:limit])
    return (shown + f", ... ({len(items)} in all)" if len(items) > limit else shown) or "nothing"
