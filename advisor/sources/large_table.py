"""Long numeric tables (a 2,000,000-row ``step,loss`` CSV) read in one pass and kept small.

The general reader builds a record per row, which for millions of rows costs tens of seconds and
gigabytes. A plain numeric table (one delimiter, no quotes, comments or empty cells, steps in
order, one run) is parsed by numpy in one call instead and kept as at most ``MAX_KEPT`` bin
medians of consecutive points: the forecast fits a few hundred points anyway, and a median of
consecutive reports keeps the curve's shape and drops its spikes. Anything else returns None and
goes through the general reader, which also gives the precise error for a broken row.
"""

from __future__ import annotations

import math
import warnings as _warnings
from collections.abc import Callable

import numpy as np

from advisor.sources.columns import Column

__all__ = ["LARGE_ROWS", "MAX_KEPT", "read_numeric_table"]

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
    skip_rows: Callable[[np.ndarray], np.ndarray] | None = None,
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
    steps = columns["step"]
    if not (np.isfinite(steps).all() and (steps >= 0).all() and (np.diff(steps) >= 0).all()):
        return None  # restarts or bad steps: the general reader keeps and reports them
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
