"""The formats a loss log comes in, each split into records: a JSON list (of records, or
TensorBoard's ``[wall time, step, value]`` download), a HF ``trainer_state.json``'s
``log_history``, and a CSV/TSV/whitespace-separated table (with a header, or without one and read
as ``step, loss, time, learning_rate, epoch``). A JSONL log is split line by line in
``advisor.sources.jsonl``.

A record is a row's location, its line number and its fields (``assemble.Record``): what
``advisor.sources.files`` hands to ``assemble``, which reads every format's records the same way.
A file that cannot be split is refused here (``SourceError``) with the line or entry at fault: a
JSON document cut short, a table row with the wrong number of fields, a header without a step or
a loss.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from pathlib import Path

from advisor.sources.assemble import Record, total_from
from advisor.sources.columns import loss_named, resolve_columns
from advisor.sources.joined import exported
from advisor.sources.loaded_curve import SourceError, listing
from advisor.sources.metric_choice import eval_metrics

__all__ = [
    "FORMATS_HINT",
    "is_number",
    "json_kind",
    "json_list_records",
    "one_document",
    "table_records",
    "trainer_state_records",
    "unended_warning",
]

#: what a file that is none of them is told
FORMATS_HINT = (
    "not a recognised loss log (CSV/TSV with a step,loss header, JSONL, trainer_state.json, or a text "
    "log of lines such as 'step 10 | loss: 2.31')"
)

#: TensorBoard's JSON download of one tag's scalars: ``[[wall time, step, value], ...]``
_TB_JSON_HEADER = ["Wall time", "Step", "Value"]

_HEADERLESS_ROLES = ("step", "loss", "time", "learning_rate", "epoch")


def json_list_records(path: str | Path, document: list[object]) -> list[Record]:
    """A JSON list's records: its objects, or the rows of TensorBoard's download of one tag."""
    if document and all(
        isinstance(r, list)
        and len(r) == 3
        and all(isinstance(x, int | float) and not isinstance(x, bool) for x in r)
        for r in document
    ):
        # read as its CSV download is: the tag in the file's name names the value
        header = exported(path, list(_TB_JSON_HEADER))
        rows = [r for r in document if isinstance(r, list)]
        return [(f"entry {i}", None, dict(zip(header, r, strict=True))) for i, r in enumerate(rows)]
    records: list[Record] = []
    for i, r in enumerate(document):
        if not isinstance(r, dict):
            raise SourceError(
                path, f"{FORMATS_HINT}: a JSON list of {json_kind(r)}s, not of records", where=f"entry {i}"
            )
        records.append((f"entry {i}", None, r))
    return records


def json_kind(value: object) -> str:
    """What a JSON value is, in the words a message to the user names it by."""
    if value is None:
        return "null"
    return {bool: "boolean", int: "number", float: "number", str: "string", list: "list"}.get(
        type(value), type(value).__name__
    )


def one_document(path: str | Path, text: str, exc: Exception, named_json: bool) -> None:
    """Raise the error of a file that fails to parse as one JSON document and is one (named
    ``.json``, or a ``{`` alone on its first line, as a pretty-printed trainer_state.json starts),
    at the real position; return for anything else (a JSONL log is read line by line). Read as
    JSONL, a trainer_state.json cut short was told "line 1 column 2: expecting property name"."""
    first = text.lstrip().split("\n", 1)[0].strip()
    if not isinstance(exc, json.JSONDecodeError) or not (named_json or first in ("{", "[")):
        return
    if first.startswith("{'") or _parses(first):
        return  # a JSONL log, or a Trainer's console lines, named .json
    if exc.pos >= len(text.rstrip()):
        raise SourceError(
            path,
            f"the JSON ends early (column {exc.colno}, char {exc.pos}: the end of the file) inside an "
            "unclosed object or list: is it still being written? (a HF Trainer rewrites "
            "trainer_state.json in place at each save; read it again once the save is done)",
            line=exc.lineno,
        ) from None
    raise SourceError(
        path, f"invalid JSON ({exc.msg}, column {exc.colno} (char {exc.pos}))", line=exc.lineno
    ) from None


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return False
    return True


def trainer_state_records(
    path: str | Path, state: Mapping[str, object]
) -> tuple[list[Record], list[str], int | None]:
    """A trainer_state.json's ``log_history`` entries as records, the warnings about its
    ``max_steps``, and that total (None: absent or not a step count)."""
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
    total = total_from(state.get("max_steps"), "max_steps", warnings)
    return records, warnings, total


def table_records(
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
    if all(is_number(cell) for cell in header):
        if len(header) > len(_HEADERLESS_ROLES):
            reason = f"no header and {len(header)} columns; add a header line"
            raise SourceError(path, reason, line=rows[0][0])
        header = list(_HEADERLESS_ROLES[: len(header)])
        warnings.append(f"no header; columns read as {','.join(header)}")
    else:
        rows = rows[1:]
        header = exported(path, header, warnings)
        if len(set(header)) != len(header):
            raise SourceError(path, "duplicate column names in the header", line=lines[0][0])
    roles = resolve_columns(header)
    missing = [
        r
        for r, ok in (
            ("step", {"step", "epoch"} & roles.keys()),
            ("loss", {"loss", "eval_loss"} & roles.keys() or eval_metrics(header) or loss_named(header)),
        )
        if not ok
    ]
    if missing:
        # checked before the rows: a console log or another tool's dump is told what it is not,
        # not that some line has the wrong number of fields
        found = listing([h for h in header if h])
        what = f"no {' or '.join(missing)} field (found: {found})"
        if delimiter is None:
            what = f"{FORMATS_HINT}: {what}"
        raise SourceError(path, what, line=lines[0][0])
    curve_column = roles.get("curve_id")
    if curve_id is not None and curve_column is not None:  # skip other runs early in multi-run dumps
        index = header.index(curve_column.name)
        wanted = curve_id.strip()
        selected = [(n, c) for n, c in rows if len(c) != len(header) or c[index].strip() == wanted]
        rows = selected or rows  # nothing matched: let the curve selection report it
    records: list[Record] = []
    # a file that does not end its last line is being written: that line alone may be cut short
    # (as a JSONL log's), and is let go with a warning. Even when its fields look whole: a row
    # ``2540,2.69565,1587.52,1.72`` was a learning rate of 1.72e-04 cut mid-number, read as 1.72
    cut = rows[-1][0] if rows and not text.endswith(("\n", "\r")) else None
    for number, cells in rows:
        if number == cut and records:
            warnings.append(unended_warning(number, cells, len(header)))
            break
        if len(cells) != len(header):
            raise SourceError(path, f"expected {len(header)} fields, found {len(cells)}", line=number)
        records.append((f"line {number}", number, dict(zip(header, cells, strict=True))))
    return kind, records, header, warnings


def unended_warning(number: int, cells: list[str], n_fields: int) -> str:
    """The warning on a table's last line skipped because the file does not end it (its writer
    may be mid-line): what it holds that says so, if anything."""
    if len(cells) != n_fields:
        why = f"{len(cells)} of {n_fields} fields"
    elif _cut_number(cells[-1]):
        why = f"ends in {cells[-1].strip()!r}, a number cut short"
    else:
        why = "no line break at its end (its last number may be cut short)"
    return f"line {number}: {why}; skipped (the last line, still being written?)"


def _cut_number(cell: str) -> bool:
    """A cell no logger writes as a whole number: a mantissa or exponent cut off (``0.``, ``1e``,
    ``2.5e-``), what an unended last line holds when its writer is mid-number."""
    text = cell.strip()
    return bool(text) and text[-1] in ".eE+-" and text.lower() not in ("-inf", "+inf")


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
