"""The run logs a command line names: a file stands for itself, a folder for every run log under it.

``backtest``, ``compare`` and ``simulate --curves`` find their runs here, in every subfolder of a
folder given (hidden files and folders, such as ``.ipynb_checkpoints``, left out). Each log gets a
name unique among those found, which is what the commands key it by and print: its path relative
to the folder given (``lr1e-3/trainer_state.json`` in HF's ``<sweep>/<run>/trainer_state.json``
layout, where every run's file has the same name), a file given alone its file name (with its
folder's, ``hf_f1/trainer_state.json``, when that name is one every run of a layout shares, as for
a run folder given itself: ``SHARED_LOG_NAMES``); logs whose names would clash
(``out/trainer_state.json`` of two folders named ``out``, two folders holding an ``a.csv``) are
named by their path as given instead.

A HuggingFace Trainer's ``output_dir`` is one run, whose log is its ``trainer_state.json``: the
model and tokenizer files beside it (``config.json``, ``vocab.json``, ``merges.txt``,
``all_results.json``, ...) are not runs, and its ``checkpoint-<step>`` folders hold snapshots of
the same run's state, each a prefix of the last. So in a folder that holds a ``trainer_state.json``
(or a ``training_args.bin``, or a ``checkpoint-<step>`` folder with a state, or is such a
folder) only that file is read; its
checkpoints' states are left out when it has its own, and otherwise (a run stopped before its final
save) the state of its latest checkpoint alone stands for the run.

A run whose log is spread over several files is found as one, named as ``advisor.sources.joined``
names it: TensorBoard's per-tag exports of one run (``run-exp-tag-*.csv``), and a Lightning run
resumed into a later version folder (``my_model/version_0+version_1/metrics.csv``). A W&B panel
export of several runs stands for each of them (``panel.csv#<run>``, ``advisor.sources.panels``).

A run is read once however it reaches the command line: the same file by another path (a folder
and a file in it, a symbolic link to a folder given too, the same path twice: the same real path)
and a copy of it (the same content, a ``.gz`` of it decompressed: ``x.csv.gz`` beside ``x.csv``, a
renamed copy) are left out, each said in a note on stderr, so that no run counts twice in the
totals a back-test or a comparison reports.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from advisor.sources.joined import group_logs
from advisor.sources.loaded_curve import SourceError, shown_name
from advisor.sources.panels import RUN_MARK, panel_run_logs

__all__ = ["INDEX_NAMES", "RUN_LOG_SUFFIXES", "RunLog", "find_run_logs", "is_run_log", "run_folder"]

#: what a folder's run logs are named (its plots, scripts and notes are not runs); each also as .gz
RUN_LOG_SUFFIXES = (".json", ".jsonl", ".csv", ".tsv", ".txt", ".log")
#: index files: runs' GPUs and groups, never runs themselves
INDEX_NAMES = ("index.csv", "runs.csv")


@dataclass(frozen=True)
class RunLog:
    """One run log found: where it is read from, its unique name, and the folder it was found in
    (``root``: the folder given; a file given alone: its own folder)."""

    path: Path
    name: str
    root: Path
    in_folder: bool  # found in a folder given (not named itself)

    @property
    def relative(self) -> Path:
        """Its path relative to ``root``."""
        return self.path.relative_to(self.root)


def is_run_log(path: Path) -> bool:
    """A folder's run log: one of ``RUN_LOG_SUFFIXES``, gzip-compressed or not (``train.csv.gz``
    is read as a file given alone is), and no index."""
    name = path.name.lower()
    return name.removesuffix(".gz").endswith(RUN_LOG_SUFFIXES) and name not in INDEX_NAMES


def _broken_link(path: Path) -> bool:
    return path.is_symlink() and not path.exists()


#: the file a HuggingFace Trainer writes its run's log history to, and what marks its output folder
_HF_STATE = "trainer_state.json"
_HF_MARKS = (_HF_STATE, _HF_STATE + ".gz", "training_args.bin")
_HF_CHECKPOINT = re.compile(r"checkpoint-(\d+)")


def _hf_state(folder: Path) -> Path | None:
    """The ``trainer_state.json`` (or ``.gz``) ``folder`` holds, if any."""
    return next((folder / n for n in _HF_MARKS[:2] if (folder / n).is_file()), None)


def _is_hf_folder(folder: Path) -> bool:
    """A HuggingFace Trainer's output folder or one of its checkpoints (see the module docstring).
    An output folder written by ``save_model`` alone has no state of its own, only its model files
    (``config.json``, read as a second run beside the checkpoint's state) and its
    ``checkpoint-<step>`` folders: one of those holding a state marks it too."""
    if _HF_CHECKPOINT.fullmatch(folder.name) is not None or any((folder / n).exists() for n in _HF_MARKS):
        return True
    return _hf_latest_checkpoint(folder) is not None


def _hf_latest_checkpoint(folder: Path) -> Path | None:
    """The checkpoint folder of ``folder`` with the highest step that holds a state."""
    steps = [
        (int(m.group(1)), child)
        for child in folder.iterdir()
        if child.is_dir() and (m := _HF_CHECKPOINT.fullmatch(child.name)) and _hf_state(child) is not None
    ]
    return max(steps)[1] if steps else None


def _is_snapshot(path: Path) -> bool:
    """Whether ``path`` (a ``trainer_state.json`` in a ``checkpoint-<step>`` folder) is a snapshot
    of its parent folder's run that another state of that run stands for."""
    checkpoint = path.parent
    if _HF_CHECKPOINT.fullmatch(checkpoint.name) is None:
        return False
    run = checkpoint.parent
    return _hf_state(run) is not None or _hf_latest_checkpoint(run) != checkpoint


def run_folder(path: Path) -> Path:
    """The folder a run log is in, or for the state of a ``checkpoint-<step>`` folder, the output
    folder that checkpoint belongs to: the run's folder either way."""
    folder = path.parent
    return folder.parent if _HF_CHECKPOINT.fullmatch(folder.name) else folder


#: logs of kinds a HuggingFace Trainer does not write: beside its trainer_state.json, a user's own
#: (its .json and .txt files are configs, results and vocabularies, passed over without a word)
_NOT_HF_LOGS = (".csv", ".tsv", ".jsonl", ".log")


def _in_folder(folder: Path, passed_over: list[Path] | None = None) -> list[Path]:
    """The run logs under ``folder``; a broken symbolic link named as one is among them (reading
    it fails, and the commands count it as the bad run it is rather than pass over it). A
    HuggingFace output folder gives one (see the module docstring); the logs of other kinds in it,
    which are not read, are added to ``passed_over``."""
    hf: dict[Path, bool] = {}

    def wanted(p: Path) -> bool:
        if not is_run_log(p) or any(part.startswith(".") for part in p.relative_to(folder).parts):
            return False
        if not (p.is_file() or _broken_link(p)):
            return False
        if p.parent not in hf:
            hf[p.parent] = _is_hf_folder(p.parent)
        if not hf[p.parent]:
            return True
        name = p.name.lower().removesuffix(".gz")
        if name != _HF_STATE and name.endswith(_NOT_HF_LOGS) and passed_over is not None:
            passed_over.append(p)
        return name == _HF_STATE and not (p.parent != folder and _is_snapshot(p))

    from advisor.sources.files import _read_text  # files reads the joined runs named here

    grouped = group_logs(sorted(p for p in folder.rglob("*") if wanted(p)), _read_text)
    return [run for log in grouped for run in panel_run_logs(log)]


def _real_key(path: Path) -> str:
    """What the same run log has whatever path it is reached by: its real path (a panel run's or
    a joined run's name, which is no file, by its folder's real path)."""
    if path.is_file():
        return str(path.resolve())
    return str(path.parent.resolve() / path.name)


def _digest(path: Path) -> str | None:
    """A hash of a run log's content, decompressed when it is gzip-compressed (a ``.gz`` copy of a
    file has the content of that file); None when it cannot be read (the reader says why)."""
    file, mark, run = path.name.partition(RUN_MARK)
    base = path.with_name(file) if mark and not path.is_file() else path
    if not base.is_file():
        return None
    h = hashlib.sha256()
    size = 0
    try:
        with base.open("rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
        with gzip.open(base, "rb") if gz else base.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
                size += len(chunk)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    if size == 0:  # empty files are each the bad run they are, not copies of one another
        return None
    return h.hexdigest() + (mark + run if mark and base is not path else "")


def _shown(path: Path) -> str:
    return path.as_posix()


def _say(note: Callable[[str], None] | None, line: str) -> None:
    if note is None:
        print(line, file=sys.stderr)
    else:
        note(line)


def _named(path: Path, root: Path) -> str:
    """A log's name before clashes are resolved: its path relative to the folder it was found in,
    with its own folder's name when that path is a file name every run of a layout shares
    (``hf_f1/trainer_state.json``, a HF output folder given itself, or its state given alone), as a
    sweep's runs are named (``lr3e-5/trainer_state.json``) and as a curve's source names its log
    (``shown_name``): "trainer_state.json" alone names no run."""
    rel = path.relative_to(root).as_posix()
    if "/" in rel:
        return rel
    return shown_name(Path(os.path.abspath(path)))


def find_run_logs(args: Sequence[Path], *, note: Callable[[str], None] | None = None) -> list[RunLog]:
    """The run logs ``args`` name, in order (a folder's sorted), each once, with unique names.
    A log reached again (the same real path) or a copy of one read (the same content) is left
    out, each said in one line to ``note`` (None: stderr; see the module docstring).
    Raises ``SourceError`` for an argument that does not exist or a folder with no run log."""
    found: list[tuple[Path, Path, bool]] = []
    seen: dict[str, Path] = {}
    contents: dict[str, Path] = {}
    # the same files reached by another path: (arg dropped, arg kept) -> [(dropped, kept)]
    again: dict[tuple[Path, Path], list[tuple[Path, Path]]] = {}
    arg_of: dict[Path, Path] = {}
    for arg in args:
        if arg.is_dir():
            passed: list[Path] = []
            logs = _in_folder(arg, passed)
            for parent in sorted({q.parent for q in passed}):
                beside = sorted(q.name for q in passed if q.parent == parent)
                _say(
                    note,
                    f"{_shown(parent)}: a HuggingFace output folder, read as one run from its "
                    f"trainer_state.json; not read beside it: {', '.join(beside)} (name "
                    f"{'it' if len(beside) == 1 else 'them'} as files to read "
                    f"{'it as a run' if len(beside) == 1 else 'them as runs'})",
                )
            if not logs:
                raise SourceError(
                    arg,
                    f"folder: no runs in it (looked for {', '.join(RUN_LOG_SUFFIXES)}, each also as .gz)",
                )
            entries = [(p, arg, True) for p in logs]
        elif arg.exists() or _broken_link(arg):
            entries = [(p, arg.parent, False) for p in panel_run_logs(arg)]
        else:
            raise SourceError(arg, "no such file or folder")
        for path, root, in_folder in entries:
            key = _real_key(path)
            if key in seen:  # the same file by another path (or named twice): one run
                kept = seen[key]
                again.setdefault((arg, arg_of[kept]), []).append((path, kept))
                continue
            seen[key] = path
            digest = _digest(path)
            if digest is not None and digest in contents:  # a copy of a log read: one run
                _say(note, f"{_shown(path)}: the same log as {_shown(contents[digest])}; read once")
                continue
            if digest is not None:
                contents[digest] = path
            arg_of[path] = arg
            found.append((path, root, in_folder))
    for (arg, kept_arg), pairs in again.items():
        if len(pairs) == 1:
            path, kept = pairs[0]
            if os.path.normpath(path) == os.path.normpath(kept):
                _say(note, f"{_shown(path)}: named twice; read once")
            else:
                _say(note, f"{_shown(path)}: the same file as {_shown(kept)}; read once")
        else:
            _say(
                note,
                f"{_shown(arg)}: {len(pairs)} run logs are the same files as those read from "
                f"{_shown(kept_arg)}; each read once",
            )
    relative = [_named(path, root) for path, root, _ in found]
    clash = Counter(relative)
    names = [
        rel if clash[rel] == 1 else Path(os.path.normpath(path)).as_posix()
        for rel, (path, _root, _) in zip(relative, found, strict=True)
    ]
    taken: set[str] = set()
    out: list[RunLog] = []
    for name, (path, root, in_folder) in zip(names, found, strict=True):
        unique, k = name, 2
        while unique in taken:  # a path as given that is also another log's relative path
            unique, k = f"{name} ({k})", k + 1
        taken.add(unique)
        out.append(RunLog(path, unique, root, in_folder))
    return out
