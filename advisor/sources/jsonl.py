"""JSONL logs: one JSON object a line (``{"step": 10, "loss": 2.31, "learning_rate": 3e-4}``).

``jsonl_records`` reads a log into records for the general reader (``assemble``), which aligns
sparse fields (an eval loss every 500 steps) and names the line of a broken one. A long log
(more than ``LARGE_ROWS`` lines) of one run whose every line holds the same numeric fields is
instead read into columns as it is parsed, a block of lines at a time, and kept small as a long
CSV is (``large_table``): a record per line of a 1,000,000-line log took 9 s and 1.1 GB. Anything
else (a sparse field, a string, a blank line, a restart) goes to the general reader.
"""

from __future__ import annotations

import ast
import json
import math
from operator import itemgetter
from pathlib import Path

import numpy as np

from advisor.sources.assemble import Record
from advisor.sources.columns import Column
from advisor.sources.large_table import kept_small, large_curve
from advisor.sources.loaded_curve import LoadedCurve, SourceError
from advisor.sources.textlog import line_records

__all__ = ["is_console_log", "jsonl_records", "large_jsonl"]

#: characters ``str.splitlines`` breaks a line at besides \n and \r\n: line numbers would differ
_OTHER_BREAKS = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
#: about this many characters of lines are parsed at a time by the long-log reader
_BLOCK = 1 << 22


def jsonl_records(path: str | Path, text: str, warnings: list[str] | None = None) -> list[Record]:
    """A JSONL file's records. Its last line alone may be cut short (a log being written is read
    while its writer is mid-line): skipped with a warning in ``warnings``, after at least one
    record; an invalid line anywhere else is an error. A Trainer's console output (``python
    train.py > train.log``: its logs printed as Python dicts, some after a progress bar on the
    same line) is read for those dicts, and its other lines (progress bars, warnings, anything the
    script printed) are skipped and counted: there, a line that is no record is the rule."""
    lines = text.splitlines()
    if _is_console(lines):
        return _console_records(lines, warnings)
    records: list[Record] = []
    last = max((n for n, line in enumerate(lines, start=1) if line.strip()), default=0)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError) as exc:
            reason = _invalid(exc)
            if number == last and records and warnings is not None:
                warnings.append(_cut_last(number, reason))
                break
            raise SourceError(path, reason, line=number) from None
        if not isinstance(value, dict):
            raise SourceError(path, f"expected a JSON object, found {type(value).__name__}", line=number)
        records.append((f"line {number}", number, value))
    return records


def is_console_log(text: str) -> bool:
    """Whether a file is a Trainer's console output, whatever its first line (a script prints
    what it loads before the Trainer logs anything)."""
    return "{'" in text and _is_console(text.splitlines())


def _is_console(lines: list[str]) -> bool:
    """Whether a log is a Trainer's console output: some line holds a Python dict (a JSONL log's
    lines are JSON, which a quoted key tells apart)."""
    return any("{'" in line and _console_dict(line) is not None for line in lines)


def _console_dict(line: str) -> dict[str, object] | None:
    """The record a console line holds: the whole line as JSON or as a Python dict, or the dict
    printed after a progress bar on the same line (``50/900 [01:33<26:34]{'loss': 1.49, ...}``)."""
    text = line.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return value
    at = text.find("{'")
    return _python_dict(text[at:]) if at >= 0 else None


def _console_records(lines: list[str], warnings: list[str] | None) -> list[Record]:
    records = line_records(
        lines,
        _console_dict,
        warnings,
        "of console output holding no log record (progress bars, warnings, prints) skipped",
    )
    # the Trainer's closing summary ({'train_runtime': ..., 'train_loss': <the run's mean>})
    # is no point of the curve (trainer_state.json is read so too: ``HF_ROLES``)
    ended = any("train_runtime" in r[2] for r in records)
    records[:] = [r for r in records if "train_runtime" not in r[2]]
    _logging_steps(records, warnings)
    if ended:
        _ended_at_last_step(records, warnings)
    return records


def _ended_at_last_step(records: list[Record], warnings: list[str] | None) -> None:
    """The Trainer prints its closing summary once, when the run has ended: the run's last step is
    its total. Without it the log read as a run still going, forecast to its curves' asymptote (a
    final loss of 0.059 beside a current 0.36, ranked best of a sweep at P(best) 99%)."""
    steps = [float(s) for _, _, f in records if isinstance(s := f.get("step"), int | float) and "loss" in f]
    if not steps or any("total_steps" in f or "max_steps" in f for _, _, f in records):
        return
    last = max(steps)
    where, line, fields = records[-1]
    records[-1] = (where, line, {**fields, "total_steps": last})
    if warnings is not None:
        warnings.append(
            f"the Trainer's closing summary says the run ended: total steps {last:,.0f}, its last step"
        )


#: the warning of a console log whose steps count its training logs (``_logging_steps``); the
#: outputs read it by this prefix to say a step named is in those units
LOG_COUNT_WARNING = "lines read as Python dicts"


def _logging_steps(records: list[Record], warnings: list[str] | None) -> None:
    """Give a Trainer's console lines, which carry no step, the count of training logs at their
    epoch as one: the Trainer logs every ``logging_steps`` steps, so the count is the step in
    those units. Why not the epoch itself: a handful of epochs is too short an axis for the
    forecast's families (they read steps from 1 up), and an eval loss still falling at each
    evaluation was forecast to rise."""
    if any("step" in fields for _, _, fields in records):
        return
    train = [f.get("epoch") for _, _, f in records if "loss" in f and isinstance(f.get("epoch"), int | float)]
    top = max((float(e) for e in train if isinstance(e, int | float)), default=0.0)
    if len(train) < 2 or top <= 0:
        return
    per_epoch = len(train) / top
    for _, _, fields in records:
        epoch = fields.get("epoch")
        if isinstance(epoch, int | float) and not isinstance(epoch, bool) and isinstance(fields, dict):
            fields["step"] = round(float(epoch) * per_epoch)
    if warnings is not None:
        warnings.append(
            f"{LOG_COUNT_WARNING}, as Hugging Face's Trainer prints them: they carry no step, so "
            f"the step is the count of training logs ({per_epoch:.4g} per epoch, logging_steps apart), and "
            "so are --total-steps, --upto-step and every step named (2,000 planned steps logged every "
            "10 are 200 here); the run's trainer_state.json has its steps"
        )


def _python_dict(line: str) -> dict[str, object] | None:
    """A line as Hugging Face's Trainer prints its logs to the console (``{'loss': 2.46,
    'learning_rate': 2e-05, 'epoch': 0.02}``: a Python dict's repr, ``nan`` and ``inf`` as bare
    names), or None when it is not one."""
    text = line.strip()
    if not (text.startswith("{'") and text.endswith("}")) or len(text) > 100_000:
        return None
    bare = {"nan": math.nan, "inf": math.inf}
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    if not isinstance(tree, ast.Dict):
        return None
    out: dict[str, object] = {}
    for key, node in zip(tree.keys, tree.values, strict=True):
        if not isinstance(key, ast.Constant) or not isinstance(key.value, str):
            return None
        if isinstance(node, ast.Name) and node.id in bare:
            out[key.value] = bare[node.id]
            continue
        try:
            out[key.value] = ast.literal_eval(node)
        except (ValueError, SyntaxError, RecursionError):
            return None
    return out


def _invalid(exc: Exception) -> str:
    return f"invalid JSON ({str(exc).splitlines()[0][:80]})"


def _cut_last(number: int, reason: str) -> str:
    return f"line {number}: {reason}; skipped (the last line, still being written?)"


def large_jsonl(path: str | Path, text: str, metric: str | None) -> LoadedCurve | None:
    """A long JSONL log of one run with the same numeric fields on every line, as a curve kept
    small (``large_curve``); None when it is not plain enough (read it the general way)."""
    if any(c in text for c in _OTHER_BREAKS) or text.count("\r") != text.count("\r\n"):
        return None
    end = text.find("\n")
    try:
        first = json.loads(text[:end])
    except (ValueError, RecursionError):
        return None
    if not isinstance(first, dict) or not first or not _numbers(list(first.values())):
        return None
    header = list(first)
    if not all(isinstance(h, str) for h in header):
        return None
    limit = len(text)  # the end of the last line (no copy of a log of a hundred megabytes)
    while limit and text[limit - 1].isspace():
        limit -= 1
    start = text.rfind("\n", 0, limit) + 1  # the last line, which a writer may have left cut short
    warnings: list[str] = []
    try:
        json.loads(text[start:limit])
    except (ValueError, RecursionError) as exc:
        warnings.append(_cut_last(text.count("\n", 0, start) + 1, _invalid(exc)))
        limit = start
    return large_curve(
        path, "JSONL", header, metric, lambda wanted, _skip: _columns(text, limit, header, wanted, warnings)
    )


def _numbers(values: list[object]) -> bool:
    """Every value a JSON number (``true`` is no step count)."""
    return set(map(type, values)) <= {int, float}


def _columns(
    text: str, limit: int, header: list[str], wanted: dict[str, Column], warnings: list[str]
) -> tuple[dict[str, np.ndarray], int, list[str]] | None:
    """The ``wanted`` columns of the log's lines before ``limit``, parsed a block of lines at a
    time (one JSON array a block, never a record per line of the whole log), then kept small."""
    fields = {name: itemgetter(name) for name in header}
    parts: dict[str, list[np.ndarray]] = {role: [] for role in wanted}
    n_rows = 0
    at = 0
    while at < limit:
        stop = text.find("\n", at + _BLOCK, limit)
        stop = limit if stop < 0 else stop + 1
        block = text[at:stop].strip()
        at = stop
        if not block:
            continue
        lines = block.count("\n") + 1
        try:
            objects = json.loads("[" + block.replace("\n", ",") + "]")
        except (ValueError, RecursionError):
            return None  # a blank line, a broken one: the general reader says which
        if len(objects) != lines:
            return None  # an object over several lines
        # every line an object of the first line's fields (the same number of them, each found):
        # a field some lines lack (an eval loss every 500 steps) is aligned by the general reader
        if set(map(type, objects)) != {dict} or set(map(len, objects)) != {len(header)}:
            return None
        for name, get in fields.items():
            try:
                values = list(map(get, objects))
            except KeyError:
                return None
            if not _numbers(values):
                return None
            for role, column in wanted.items():
                if column.name == name:
                    parts[role].append(np.array(values, dtype=float))
        n_rows += lines
    if not n_rows:
        return None
    columns = {role: np.concatenate(parts[role]) * column.scale for role, column in wanted.items()}
    got = kept_small(columns, n_rows)
    if got is None:
        return None
    series, n, notes = got
    return series, n, warnings + notes
