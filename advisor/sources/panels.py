"""The runs of a W&B chart panel's CSV export, each read as a run of its own.

A panel export (``Step,"<run> - train/loss","<run> - train/loss__MIN",...``) holds a column of
each run the chart shows. One run's columns are that run's log, as a panel of that run alone would
be: ``forecast --curve RUN`` reads them (the curve id of a panel is its run's name, as a
``curve_id`` column's value is of a multi-run table), and ``compare``/``backtest`` find each run of
the export as a run log of its own, named ``<file>#<run>``.
"""

from __future__ import annotations

import csv
import gzip
import io
import zlib
from collections.abc import Callable
from pathlib import Path

from advisor.sources.columns import ROLES, wandb_panel_runs
from advisor.sources.loaded_curve import SourceError, listing
from advisor.sources.normalize import canonical_name

__all__ = ["RUN_MARK", "first_line", "one_panel_run", "panel_run_logs", "panel_run_text"]

#: what separates a panel export's file from the run of it a run log's name stands for
RUN_MARK = "#"


def first_line(path: Path) -> str:
    """The first line of a file (gzip-compressed or not), "" when it cannot be read: enough to
    tell an export by its header without reading the whole file."""
    try:
        with path.open("rb") as raw:
            zipped = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            if not zipped:
                data = raw.readline(65536)
            else:
                with gzip.open(raw) as unzipped:
                    data = unzipped.readline(65536)
    except (OSError, EOFError, zlib.error):
        return ""
    return data.decode("utf-8-sig", errors="replace").strip()


def _header(line: str) -> list[str]:
    try:
        return [cell.strip() for cell in next(csv.reader([line]), [])]
    except csv.Error:
        return []


def panel_run_logs(path: Path) -> list[Path]:
    """The run logs a file stands for: each run of a W&B panel export of several runs
    (``<file>#<run>``), else the file itself."""
    runs = wandb_panel_runs(_header(first_line(path))) if path.is_file() else []
    if len(runs) < 2:
        return [path]
    return [path.with_name(f"{path.name}{RUN_MARK}{run}") for run in runs]


def one_panel_run(path: str | Path, text: str, run: str | None) -> tuple[str, str | None]:
    """``text`` and the curve id to read it by: a W&B panel export of several runs, with ``run``
    one of them, is that run's columns alone (and no curve id is left to choose); any other text
    is returned as it is. Raises ``SourceError`` for a panel holding no run ``run``."""
    if run is None:
        return text, run
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return text, run
    header = _header(lines[first])
    runs = wandb_panel_runs(header)
    if len(runs) < 2:
        return text, run
    if run.strip() not in runs:
        raise SourceError(path, f"no run {run!r} in the W&B panel export (its runs: {listing(runs)})")
    prefix = f"{run.strip()} - "
    keep = [
        i
        for i, h in enumerate(header)
        if h.startswith(prefix) or (canonical_name(h) in ROLES["step"] and " - " not in h)
    ]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    try:
        for row in csv.reader(lines[first:]):
            if row:
                writer.writerow([row[i] if i < len(row) else "" for i in keep])
    except csv.Error as exc:
        raise SourceError(path, f"malformed CSV: {exc}") from None
    return out.getvalue(), None


def panel_run_text(path: Path, read: Callable[[Path], str]) -> tuple[str, str] | None:
    """The text of the run ``<file>#<run>`` names (see ``panel_run_logs``) and a note saying which
    run of which export it is; None for a path that names none."""
    if path.exists() or RUN_MARK not in path.name:
        return None
    name, _, run = path.name.partition(RUN_MARK)
    file = path.with_name(name)
    if not file.is_file():
        return None
    text, _ = one_panel_run(file, read(file), run)
    runs = wandb_panel_runs(_header(first_line(file)))
    return text, f"run {run!r} of a W&B panel export of {len(runs)} runs ({file.name})"
