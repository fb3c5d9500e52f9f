"""Plain-text training logs: a line per logged step, its fields written as words and numbers.

Training scripts that log to a file or the console without a table or JSON write lines such as

- ``Step 12 | loss:1.234567 lr:2.0e-05 tokens_per_second_per_gpu:2210.5`` (torchtune's file logger),
- ``iter 100: loss 4.1234, time 35.12ms, mfu 12.30%`` and ``step 250: train loss 4.10, val loss
  4.21`` (nanoGPT-style loops),
- ``iteration      100/  500000 | lm loss: 7.0E+00 | learning rate: 3.0E-04 |`` (a total after the
  step),
- ``1|12|Loss: 2.4475: 100%|██████| 12/1600 [00:01<00:00,  1.2it/s]`` (torchtune's console: its
  progress bar's description, ``{epoch + 1}|{global step}|Loss: {loss}``).

Each line that names its step (``step``, ``iter``, ``iteration``, ``global step``: a word and a
whole number) and holds at least one ``name: number`` / ``name=number`` pair, or a loss written
``loss 4.12``, is a record; the other lines (banners, warnings, progress bars) are skipped and
counted. Field names are lower-cased with spaces as underscores, so ``val loss`` is read as
``val_loss`` (an eval loss) and ``learning rate`` as the learning rate, through the same column
names every other format is read by. A progress bar redirected to a file writes its updates
joined by carriage returns on one line: each update is read, numbered by the line it is on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from advisor.sources.assemble import Record

__all__ = ["TEXT_LOG_KIND", "is_text_log", "line_records", "text_log_records"]

TEXT_LOG_KIND = "text log"

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)\b"
#: the step a line names, and a total after it (``100/500000``)
_STEP = re.compile(
    r"\b(step|iter|iteration|global[ _]step)\b\s*[:=#]?\s*(\d+)(?:\s*/\s*(\d+))?", re.IGNORECASE
)
#: ``name: number`` and ``name=number``; a name of up to three words (``learning rate``, ``lm loss``)
_PAIR = re.compile(
    r"([A-Za-z][\w./-]*(?: [A-Za-z][\w./-]*){0,2})\s*[:=]\s*(" + _NUMBER + r")(?![\w.])", re.IGNORECASE
)
#: a loss written as ``loss 4.12`` / ``val loss 4.21`` (no separator)
_LOSS = re.compile(
    r"\b((?:train|training|val|valid|validation|eval|test|lm)?[ _]?loss)\s+(" + _NUMBER + r")(?![\w.])",
    re.IGNORECASE,
)
#: torchtune's progress bar description, ``{epoch + 1}|{global step}|Loss: {loss}``: its epoch is
#: 1-based, its step the run's global one (the bar's own ``12/1600`` counts within the epoch)
_TORCHTUNE_BAR = re.compile(r"(?:^|\s)(\d+)\|(\d+)\|Loss:\s*(" + _NUMBER + r")(?![\w.])", re.IGNORECASE)
#: a file is read so when this many of its lines are records ...
_MIN_RECORDS = 3
#: ... and they are at least this share of its non-blank lines (a console log's progress bars and
#: warnings are the rest)
_MIN_SHARE = 0.1


def is_text_log(text: str) -> bool:
    """Whether ``text`` is a plain-text training log (see the module docstring)."""
    lines = [segment for line in _lines(text) for segment in _updates(line) if segment.strip()]
    if not lines:
        return False
    found = 0
    for line in lines:
        if _fields(line) is not None:
            found += 1
            if found >= _MIN_RECORDS and found >= _MIN_SHARE * len(lines):
                return True
    return False


def text_log_records(text: str, warnings: list[str] | None = None) -> list[Record]:
    """The records of a plain-text log, one per line (or progress bar update: ``_updates``) that
    names its step and holds a field; the count of the other non-blank lines goes to
    ``warnings``."""
    records = line_records(
        _lines(text),
        _fields,
        warnings,
        "of the text log naming no step and no field skipped (banners, progress bars, warnings)",
        split=_updates,
    )
    # a progress bar redraws its last description when it moves on (torchtune's bar is updated,
    # then described): the same update twice on a line is one report, not a step logged twice
    return [r for i, r in enumerate(records) if i == 0 or records[i - 1][1:] != r[1:]]


def _lines(text: str) -> list[str]:
    """The lines of ``text`` as an editor numbers them: a carriage return alone ends no line (a
    progress bar's updates, ``str.splitlines`` would number each as a line of its own)."""
    return text.replace("\r\n", "\n").split("\n")


def _updates(line: str) -> list[str]:
    """The updates a progress bar wrote on one line, each after a carriage return (``tqdm`` to a
    file: ``\\r1|1|Loss: 2.44: ...\\r1|2|Loss: 2.40: ...``); a line without one is its only update."""
    return line.split("\r")


def line_records(
    lines: Iterable[str],
    parse: Callable[[str], dict[str, object] | None],
    warnings: list[str] | None,
    skipped_are: str,
    split: Callable[[str], list[str]] | None = None,
) -> list[Record]:
    """A record of each line ``parse`` reads (None: no record), numbered from 1; the non-blank
    lines it does not read are counted in a warning (``N lines <skipped_are>``): in a console or
    text log, a line that is no record is the rule, not an error. ``split`` cuts a line into the
    several records it may hold (a progress bar's updates), each numbered by the line."""
    records: list[Record] = []
    skipped = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        read = [f for f in map(parse, split(line) if split else [line]) if f is not None]
        if not read:
            skipped += 1
            continue
        records.extend((f"line {number}", number, fields) for fields in read)
    if skipped and warnings is not None:
        warnings.append(f"{skipped:,} line{'s' if skipped != 1 else ''} {skipped_are}")
    return records


def _fields(line: str) -> dict[str, object] | None:
    """The fields of one line (or progress bar update), None when it names no step or no field."""
    bar = _TORCHTUNE_BAR.search(line)
    if bar is not None:
        # the epoch as an index from 0, as Lightning's ``epoch`` column counts it
        return {
            "epoch": max(int(bar.group(1)) - 1, 0),
            "step": int(bar.group(2)),
            "loss": float(bar.group(3)),
        }
    step = _STEP.search(line)
    if step is None:
        return None
    fields: dict[str, object] = {"step": int(step.group(2))}
    if step.group(3) is not None:
        fields["total_steps"] = int(step.group(3))
    rest = line[: step.start()] + " " + line[step.end() :]
    for pattern in (_PAIR, _LOSS):
        for match in pattern.finditer(rest):
            name = _name(match.group(1))
            if name and name not in fields:
                fields[name] = float(match.group(2))
    return fields if len(fields) > 1 + ("total_steps" in fields) else None


def _name(raw: str) -> str:
    """``Val Loss`` -> ``val_loss``; a leading word that is part of the line's prose (``| lm loss``)
    stays, as the column names read it (``lm_loss`` is no training loss name: it is read by name)."""
    return re.sub(r"[\s]+", "_", raw.strip().lower())
