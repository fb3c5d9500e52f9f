"""Long numeric logs (a 2,000,000-row ``step,loss`` CSV, a JSONL log as long) read in one pass and
kept small.

The general reader builds a record per row, which for millions of rows costs tens of seconds and
gigabytes. A plain numeric table (one delimiter, no quotes, comments or empty cells, steps in
order, one run) is parsed by numpy in one call instead and kept as at most ``MAX_KEPT`` bin
medians of consecutive points: the forecast fits a few hundred points anyway, and a median of
consecutive reports keeps the curve's shape and drops its spikes. A long JSONL log is read into
the same columns (``advisor.sources.jsonl``) and kept the same way (``large_curve``). Anything
else returns None and goes through the general reader, which also gives the precise error for a
broken row.
"""

from __future__ import annotations

import math
import warnings as _warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from advisor.sources.cells import RowKinds
from advisor.sources.columns import Column, epoch_millis, resolve_columns
from advisor.sources.loaded_curve import LoadedCurve, SourceError, shown_name
from advisor.sources.metric_choice import choose_metric

__all__ = ["LARGE_ROWS", "MAX_KEPT", "Reader", "SkipRows", "kept_small", "large_curve", "read_numeric_table"]

#: tables with more data lines than this take the fast path
LARGE_ROWS = 200_000
#: a long table is kept as at most this many points
MAX_KEPT = 20_000


def read_numeric_table(
    text: str,
    header_end: int,
    delimiter: str,
    header: list[str],
    wanted: dict[str, Column],
    *,
    skip_rows: SkipRows | None = None,
) -> tuple[dict[str, np.ndarray], int, list[str]] | None:
    """Columns ``wanted`` (role -> column) of the data after ``header_end``, downsampled, with the
    number of rows read and the warnings; None when the table is not plain enough for this path.
    ``skip_rows``: the rows (a mask over the whole table) that do not carry the series, left out
    before binning (a NaN filling another kind of row's cell, ``assemble.RowKinds``)."""
    body = text[header_end:]
    if '"' in body or "#" in body or (delimiter != "\t" and "\t" in body):
        return None
    flat = body.replace(delimiter, " ") if delimiter != " " else body
    n_cols = len(header)
    with _warnings.catch_warnings():
        _warnings.simplefilter("error")  # numpy warns, and stops, at the first token it cannot read
        try:
            values = np.fromstring(flat, sep=" ")  # the text parser (not deprecated, unlike binary mode)
        except (ValueError, DeprecationWarning):
            return None
    n_rows = body.count("\n") + (0 if body.endswith("\n") else 1) - body.count("\n\n")
    if n_cols == 0 or values.size != n_rows * n_cols:
        return None  # an empty cell, a ragged row, a blank line: the general reader says which
    table = values.reshape(n_rows, n_cols)
    if skip_rows is not None:
        table = table[~skip_rows(table)]
        n_rows = table.shape[0]
        if n_rows == 0:
            return None
    columns = {role: table[:, header.index(c.name)] * c.scale for role, c in wanted.items()}
    return kept_small(columns, n_rows)


def kept_small(
    columns: dict[str, np.ndarray], n_rows: int
) -> tuple[dict[str, np.ndarray], int, list[str]] | None:
    """Columns by role of a long log (``step`` among them), as at most ``MAX_KEPT`` bin medians,
    with ``n_rows`` and the note saying so; None when the steps are not in order (restarts or bad
    steps: the general reader keeps and reports them)."""
    steps = columns["step"]
    if not (np.isfinite(steps).all() and (steps >= 0).all() and (np.diff(steps) >= 0).all()):
        return None
    notes: list[str] = []
    if n_rows > MAX_KEPT:
        k = math.ceil(n_rows / MAX_KEPT)
        head = n_rows % k  # the oldest points that do not fill a bin stay as they are
        out = {}
        for role, col in columns.items():
            binned = col[head:].reshape(-1, k)
            if role != "value":
                kept = binned[:, -1]  # a bin ends at its last step (the file's last step stays exact)
            else:
                with np.errstate(all="ignore"), _warnings.catch_warnings():
                    _warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN bin stays NaN
                    kept = np.nanmedian(binned, axis=1)
            out[role] = np.concatenate((col[:head], kept))
        columns = out
        notes.append(
            f"{n_rows:,} rows: kept {columns['step'].size:,} medians of {k} consecutive points "
            "(the forecast fits a few hundred points)"
        )
    return columns, n_rows, notes


#: reads a long log's columns ``wanted`` (role -> column): as ``read_numeric_table`` returns them
#: the rows (a mask over a whole table) that do not carry the series (``RowKinds``)
SkipRows = Callable[[np.ndarray], np.ndarray]
#: reads the columns wanted (role -> column), leaving out the rows ``SkipRows`` names where the
#: format can hold them (a JSONL log's long path takes only lines of the same fields: none)
Reader = Callable[[dict[str, Column], SkipRows], tuple[dict[str, np.ndarray], int, list[str]] | None]


def large_curve(
    path: str | Path, kind: str, header: list[str], metric: str | None, read: Reader
) -> LoadedCurve | None:
    """A long log of one run with numeric fields ``header`` as a ``LoadedCurve`` of its columns
    read by ``read`` (downsampled, as ``kept_small``); None when it is not plain enough for this
    path (no step field, several runs, a total in the rows, the series asked for absent): the
    general reader then reads it, and says what is wrong."""
    columns = resolve_columns(header)
    if len(set(header)) != len(header):
        return None
    if "step" not in columns or "curve_id" in columns or "total_steps" in columns:
        return None
    try:
        metric_role, target = choose_metric(path, columns, metric, header)
    except SourceError:
        return None
    optional = [r for r in ("time", "learning_rate", "epoch") if r in columns]
    wanted: dict[str, Column] = {
        "step": columns["step"],
        "value": target,
        **{r: columns[r] for r in optional},
    }
    kinds = RowKinds.of(columns, header)
    value_at = header.index(target.name)

    def placeholders(table: np.ndarray) -> np.ndarray:
        return np.isnan(table[:, value_at]) & kinds.placeholder_rows(metric_role, table, header)

    got = read(wanted, placeholders)
    if got is None:
        return None
    series, n_rows, warnings = got
    rescaled = epoch_millis(columns["time"], series["time"].tolist()) if "time" in series else None
    if rescaled is not None:  # as the general reader does (``assemble``)
        columns["time"], note = rescaled
        series["time"] = series["time"] * columns["time"].scale
        warnings.append(note)
    nonfinite = int((~np.isfinite(series["value"])).sum())
    if nonfinite:
        warnings.append(f"{nonfinite} non-finite {target.name} values (after binning)")

    def tup(role: str) -> tuple[float, ...] | None:
        return tuple(series[role].tolist()) if role in series else None

    details = [
        f"{n_rows} point{'' if n_rows == 1 else 's'} of {target.describe()}",
        f"step {columns['step'].describe()}",
    ]
    details += [f"{role} {columns[role].describe()}" for role in optional]
    return LoadedCurve(
        steps=tup("step") or (),
        values=tup("value") or (),
        times=tup("time"),
        learning_rates=tup("learning_rate"),
        epochs=tup("epoch"),
        metric=metric_role,
        source=f"{kind} {shown_name(path)}: " + ", ".join(details),
        warnings=tuple(warnings),
        columns=tuple(header),
    )
