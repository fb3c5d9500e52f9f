"""Loss histories from files: CSV/TSV, JSONL and HuggingFace ``trainer_state.json``.

This is how a finished or running job's log reaches ``trainjob-advisor forecast`` (and the
benchmarks). Unlike live progress, a file is something the user hands us on purpose, so a broken
one is reported, not silently patched: ``SourceError`` names the file, the line (or the
``log_history`` entry) and the reason. Only the last line of a JSONL log is let go, with a warning
when it does not parse: a log still being written ends mid-line. What is merely sparse (an eval
loss every 500 steps, a learning rate logged on training rows only) is normal and is aligned, not
rejected.

Here: a path read (or the bytes of standard input), its format told from its content, and the
two ways in: ``load_curve`` (one series) and ``parse_log`` (a ``ParsedLog``: the file split into
records once, each of its series assembled on demand). Around it: ``decode`` (bytes to text),
``formats`` (each format's text split into records) and ``assemble`` (records to a curve).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from advisor.series import primary_eval
from advisor.sources.assemble import Record, assemble, assemble_each
from advisor.sources.columns import HF_ROLES, ROLES, Column, resolve_columns
from advisor.sources.decode import MAX_FILE_BYTES, decode
from advisor.sources.formats import (
    FORMATS_HINT,
    is_number,
    json_kind,
    json_list_records,
    one_document,
    table_records,
    trainer_state_records,
    unended_warning,
)
from advisor.sources.joined import exported, joined_log
from advisor.sources.jsonl import is_console_log, jsonl_records, large_jsonl
from advisor.sources.large_table import LARGE_ROWS, SkipRows, large_curve, read_numeric_table
from advisor.sources.loaded_curve import LoadedCurve, NotALog, SourceError, listing
from advisor.sources.metric_choice import METRICS, is_series_metric
from advisor.sources.panels import one_panel_run
from advisor.sources.textlog import TEXT_LOG_KIND, is_text_log, text_log_records
from advisor.sources.trainer_choice import TrainerChoice, trainer_choice

__all__ = [
    "LoadedCurve",
    "ParsedLog",
    "SourceError",
    "load_curve",
    "load_curve_bytes",
    "load_curves",
    "parse_log",
]


# --------------------------------------------------------------------------------------------
# Reading and format detection
# --------------------------------------------------------------------------------------------


def load_curve(path: str | Path, *, metric: str | None = None, curve_id: str | None = None) -> LoadedCurve:
    """Read ``path`` (format from its content) into a ``LoadedCurve``; raises ``SourceError``.

    ``metric`` is ``"loss"`` (training loss), ``"eval_loss"``, another eval metric whose name says
    its direction (``"eval_accuracy"``), or ``None``: the training loss when the file has one, else
    its evaluation loss. A file without the series asked for raises a ``SourceError`` whose
    ``series`` are those it holds. ``curve_id`` selects one run in a file that holds
    several (a ``curve_id``/``run_id`` column).
    """
    text, note = _text_of(Path(path))
    curve = _parse(path, text, metric, curve_id)
    return replace(curve, warnings=(note, *curve.warnings)) if note else curve


def _text_of(path: Path) -> tuple[str, str | None]:
    """A log's text, or a run's spread over several files (``joined_log``) and what it was joined from."""
    joined = joined_log(path, _read_text)
    return joined if joined is not None else (_read_text(path), None)


def load_curve_bytes(
    data: bytes, name: str = "<stdin>", *, metric: str | None = None, curve_id: str | None = None
) -> LoadedCurve:
    """Like ``load_curve``, from the bytes of a file read elsewhere (``-``: standard input);
    ``name`` stands for the path in messages."""
    if len(data) > MAX_FILE_BYTES:
        raise SourceError(name, f"input of {len(data)} bytes exceeds the limit of {MAX_FILE_BYTES}")
    return _parse(name, decode(name, data), metric, curve_id)


def _parse(path: str | Path, text: str, metric: str | None, curve_id: str | None) -> LoadedCurve:
    # a metric is checked against the file's fields once they are read (``choose_metric``), so
    # that a name it does not hold is told the series it does
    head = text.lstrip()
    named_json = str(path).lower().removesuffix(".gz").endswith(".json")
    if head.startswith(("{", "[", '"')) or head.rstrip() in ("null", "true", "false") or named_json:
        try:
            document = json.loads(text)
        except (ValueError, RecursionError) as exc:
            document = None
            one_document(path, text, exc, named_json)
        else:
            if not isinstance(document, dict | list):
                raise SourceError(path, f"{FORMATS_HINT}: the file is a single JSON {json_kind(document)}")
        if isinstance(document, dict) and "log_history" in document:
            return _from_trainer_state(path, document, metric)
        if isinstance(document, list):
            return assemble(path, "JSON", json_list_records(path, document), metric, curve_id, ROLES)
        _no_log_object(path, text, document)
        if head.startswith("{"):
            if curve_id is None and text.count("\n") > LARGE_ROWS:
                fast = large_jsonl(path, text, metric)
                if fast is not None:
                    return fast
            return _from_jsonl(path, text, metric, curve_id)
    if is_console_log(text):  # ``train.py > train.log``, its first lines the script's own output
        return _from_jsonl(path, text, metric, curve_id)
    if is_text_log(text):  # ``Step 12 | loss:1.23 lr:2e-05``, ``iter 100: loss 4.12, time 35ms``
        warnings: list[str] = []
        records = text_log_records(text, warnings)
        return assemble(path, TEXT_LOG_KIND, records, metric, curve_id, ROLES, warnings=warnings)
    return _from_table(path, text, metric, curve_id)


def _from_jsonl(path: str | Path, text: str, metric: str | None, curve_id: str | None) -> LoadedCurve:
    warnings: list[str] = []
    records = jsonl_records(path, text, warnings)
    return assemble(path, "JSONL", records, metric, curve_id, ROLES, warnings=warnings)


def _read_text(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise SourceError(path, f"file of {size} bytes exceeds the limit of {MAX_FILE_BYTES}")
        data = path.read_bytes()
    except FileNotFoundError:
        if path.is_symlink():
            raise SourceError(path, f"a broken symbolic link: {os.readlink(path)} does not exist") from None
        raise SourceError(path, "no such file") from None
    except IsADirectoryError:
        raise SourceError(path, "is a directory, not a file") from None
    except OSError as exc:
        raise SourceError(path, f"cannot read: {exc.strerror or exc}") from None
    return decode(path, data)


def _from_table(path: str | Path, text: str, metric: str | None, curve_id: str | None) -> LoadedCurve:
    text, curve_id = one_panel_run(path, text, curve_id)
    if text.count("\n", 0, len(text)) > LARGE_ROWS:
        fast = _large_table(path, text, metric)
        if fast is not None:
            return fast
    kind, records, header, warnings = table_records(path, text, curve_id)
    return assemble(path, kind, records, metric, curve_id, ROLES, warnings=warnings, names=header)


def _large_table(path: str | Path, text: str, metric: str | None) -> LoadedCurve | None:
    """A long plain numeric table through ``large_table`` (None: read it the general way)."""
    end = text.find("\n")
    first = text[:end].strip()
    delimiter = next((d for d in ("\t", ",", ";") if d in first), None)
    if end < 0 or delimiter is None or first.startswith("#"):
        return None
    header = [cell.strip() for cell in first.split(delimiter)]
    if any(is_number(h) for h in header):
        return None
    header = exported(path, header)
    kind = "TSV" if delimiter == "\t" else "CSV"
    unended: list[str] = []
    if not text.endswith(("\n", "\r")):  # its last line may be cut short, as the general reader says
        last = text.rfind("\n") + 1
        unended.append(unended_warning(text.count("\n") + 1, text[last:].split(delimiter), len(header)))
        text = text[:last]

    def read(
        wanted: dict[str, Column], skip: SkipRows
    ) -> tuple[dict[str, np.ndarray], int, list[str]] | None:
        got = read_numeric_table(text, end + 1, delimiter, header, wanted, skip_rows=skip)
        return None if got is None else (got[0], got[1], [*unended, *got[2]])

    return large_curve(path, kind, header, metric, read)


def load_curves(path: str | Path, *, metric: str | None = None) -> list[tuple[str | None, LoadedCurve]]:
    """Every run in ``path``: ``[(curve id, curve)]``, one per distinct ``curve_id``/``run_id`` of a
    multi-run table or JSON(L) dump (read once, in the order the ids first appear), or
    ``[(None, curve)]`` for a file that holds one run. Raises ``SourceError`` as ``load_curve``."""
    _check_metric(path, metric)
    return parse_log(path).curves(metric)


def _check_metric(path: str | Path, metric: str | None) -> None:
    if metric is not None and not is_series_metric(metric):
        raise SourceError(
            path,
            f"unknown metric {metric!r} (choose one of {', '.join(METRICS)}, or an eval metric whose "
            "name says its direction, such as eval_accuracy)",
        )


class ParsedLog:
    """A log file read, decoded and split into records once, its series assembled from those
    records on demand: one (``curves``) or many in one pass over them (``curves_each``). Why: a
    run's loss and every eval metric it logs are series of the same file, and the back-test reads
    up to 17 of them per run; reading the file and its step and time fields again for each would
    be most of the work."""

    def __init__(self, path: str | Path, text: str) -> None:
        self.path = path
        self._roles = ROLES
        self._warnings: list[str] = []
        #: a trainer_state.json's ``max_steps`` (checked against each curve's last step)
        self._hf_total: int | None = None
        self._hf = False
        #: what a trainer_state.json says of its checkpoints and best model
        self.trainer: TrainerChoice | None = None
        names: list[str] | None = None
        head = text.lstrip()
        records: list[Record]
        document: object = None
        if head.startswith(("{", "[")):
            try:
                document = json.loads(text)
            except (ValueError, RecursionError) as exc:
                document = None
                one_document(path, text, exc, str(path).lower().removesuffix(".gz").endswith(".json"))
        if isinstance(document, dict) and "log_history" in document:
            self._hf, self._roles = True, HF_ROLES
            self._kind = "HF trainer state"
            records, self._warnings, self._hf_total = trainer_state_records(path, document)
            self.trainer = _choice(document, records)
        elif isinstance(document, list):
            self._kind, records = "JSON", json_list_records(path, document)
        elif head.startswith("{") or is_console_log(text):
            _no_log_object(path, text, document)
            self._kind, records = "JSONL", jsonl_records(path, text, self._warnings)
        elif is_text_log(text):
            self._kind, records = TEXT_LOG_KIND, text_log_records(text, self._warnings)
        else:
            self._kind, records, names, self._warnings = table_records(path, text, None)
        whole = names if names is not None else _field_names(records)
        column = None if self._hf else resolve_columns(whole).get("curve_id")
        #: per run (``None``: the file holds one), its records and field names (a table's header,
        #: else the names its own records have)
        self._runs: dict[str | None, tuple[list[Record], list[str]]] = {}
        if column is None:
            self._runs[None] = (records, whole)
            return
        groups: dict[str | None, list[Record]] = {}
        for record in records:
            groups.setdefault(str(record[2].get(column.name, "")).strip(), []).append(record)
        self._runs = {
            cid: (rows, names if names is not None else _field_names(rows)) for cid, rows in groups.items()
        }

    def curves(self, metric: str | None = None) -> list[tuple[str | None, LoadedCurve]]:
        """The file's runs read for ``metric``, as ``load_curves(path, metric=metric)`` reads them
        (raises ``SourceError`` as it does)."""
        (got,) = self.curves_each([metric])
        if isinstance(got, SourceError):
            raise got
        return got

    def judged_curves(self) -> list[tuple[str | None, LoadedCurve]]:
        """The file's runs by the series a run is judged by: its training loss, else its eval
        loss, else its primary eval metric (a log of ``eval_accuracy`` alone), as ``forecast``
        reads a file; raises the ``SourceError`` of the training loss when none is there. Without
        a training loss, the eval metric its trainer kept its best model by comes first."""
        declared = self.trainer.metric if self.trainer is not None else None
        try:
            curves = self.curves()
        except SourceError as exc:
            primary = primary_eval(exc.series or (), declared=declared)
            if primary is None:
                raise
            return self.curves(primary)
        if declared is None or not curves or curves[0][1].metric in ("loss", declared):
            return curves
        if not is_series_metric(declared):
            return curves
        try:
            return self.curves(declared)
        except SourceError:
            return curves

    def curves_each(
        self, metrics: Sequence[str | None]
    ) -> list[list[tuple[str | None, LoadedCurve]] | SourceError]:
        """Per metric, in one pass over the records of each run: what ``curves(metric)`` returns,
        or the ``SourceError`` it raises."""
        out: list[list[tuple[str | None, LoadedCurve]] | SourceError] = []
        wanted: list[str | None] = []
        for metric in metrics:
            try:
                _check_metric(self.path, metric)
            except SourceError as exc:
                out.append(exc)
            else:
                out.append([])
                wanted.append(metric)
        slots = [i for i, got in enumerate(out) if not isinstance(got, SourceError)]
        for cid, (rows, names) in self._runs.items():
            read = assemble_each(
                self.path, self._kind, rows, wanted, None, self._roles, warnings=self._warnings, names=names
            )
            for i, got in zip(slots, read, strict=True):
                done = out[i]
                if isinstance(done, SourceError):
                    continue  # the first run this metric cannot be read in is what is said
                if isinstance(got, SourceError):
                    out[i] = got
                else:
                    done.append(
                        (cid, _within_max_steps(got, self._hf_total, self.trainer) if self._hf else got)
                    )
        return out


def _no_log_object(path: str | Path, text: str, document: object) -> None:
    """Raise ``SourceError`` for one JSON object over several lines without a ``log_history`` (a
    model's config.json, HF's all_results.json, a notes file): no log, and no JSONL either (read
    as lines, it was "line 1: invalid JSON" in a back-test, while ``forecast`` said this)."""
    if isinstance(document, dict) and "log_history" not in document and len(text.strip().splitlines()) > 1:
        keys = listing([str(k) for k in document][:6])
        raise NotALog(
            path,
            f"{FORMATS_HINT}: one JSON object with no log_history (keys: {keys}); a HF run's log is "
            "its trainer_state.json",
        )


def _field_names(records: Sequence[Record]) -> list[str]:
    seen: dict[str, None] = {}
    for _, _, fields in records:
        seen.update(dict.fromkeys(k for k in fields if isinstance(k, str)))
    return list(seen)


def parse_log(path: str | Path) -> ParsedLog:
    """``path`` read and split into records once, for reading several of its series
    (``ParsedLog.curves``); raises ``SourceError`` when the file cannot be read or split."""
    text, note = _text_of(Path(path))
    parsed = ParsedLog(path, text)
    parsed._warnings[:0] = [note] if note else []
    return parsed


def _from_trainer_state(path: str | Path, state: Mapping[str, object], metric: str | None) -> LoadedCurve:
    records, warnings, total = trainer_state_records(path, state)
    curve = assemble(path, "HF trainer state", records, metric, None, HF_ROLES, warnings=warnings)
    return _within_max_steps(curve, total, _choice(state, records))


def _choice(state: Mapping[str, object], records: Sequence[Record]) -> TrainerChoice | None:
    """What the trainer_state.json says of its checkpoints and best model (``trainer_choice``)."""
    return trainer_choice(state, [fields for _, _, fields in records])


def _within_max_steps(curve: LoadedCurve, total: int | None, trainer: TrainerChoice | None) -> LoadedCurve:
    """A trainer_state.json's curve with its ``max_steps`` as its total, unless the run logged
    past it (then no total, and a warning), and what the file says of its checkpoints."""
    warnings = list(curve.warnings)
    if total is not None and curve.steps and max(curve.steps) > total:
        warnings.append(f"max_steps {total} is below the last logged step; ignored")
        total = None
    return replace(curve, total_steps=total, warnings=tuple(warnings), trainer=trainer)
